"""Where a run's models and Hub datasets come from: checked before anything loads, failures in one line.

A model path that looks local (`./x`, `../x`, `/x`, `outputs/teacher/mrpc`, or a folder whose parent
exists) and is missing is refused at once, naming the recipe whose `output_dir` it is (found in the
`recipes/` folder of the given recipe, of the working directory, or of the project) so the user
knows what to run first. A Hub id that is not in the local cache while the Hub is offline
(HF_HUB_OFFLINE=1) is refused at once too, instead of failing after the data has loaded; the load
errors of models and Hub datasets (no connection, no such repository) become one line naming the
alternative: a local model folder, or `--data_dir` with JSON Lines files.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from .errors import ConfigError, first_line

LOCAL_DATA_HINT = "give --data_dir DIR with train/validation/test JSON Lines files (train.jsonl, validation.jsonl, test.jsonl) instead"


def hub_offline() -> bool:
    """Offline mode as `huggingface_hub` (and so `transformers`) and, once imported, `datasets` see it."""
    from huggingface_hub import constants

    datasets = sys.modules.get("datasets")
    return bool(constants.HF_HUB_OFFLINE or getattr(getattr(datasets, "config", None), "HF_HUB_OFFLINE", False))


def looks_local(path: str) -> bool:
    """A folder path rather than a Hub id ('namespace/name' or 'name'): ./x, ../x, /x, ~/x, a/b/c, a\\b,
    or a/b where the folder a exists."""
    if path.startswith((".", "/", "~")) or "\\" in path or os.path.isabs(path) or path.count("/") > 1:
        return True
    return "/" in path and os.path.isdir(os.path.dirname(path))


def _recipe_folders(recipe: str | None) -> list[Path]:
    """The `recipes/` folders to search: above the given recipe, in the working directory, in the project."""
    folders = []
    if recipe:
        here = Path(recipe).resolve().parent
        folders += [p for p in (here, *here.parents) if p.name == "recipes"][:1] or [here / "recipes"]
    folders += [Path.cwd() / "recipes", Path(__file__).resolve().parents[2] / "recipes"]
    unique = []
    for folder in folders:
        if folder.is_dir() and folder.resolve() not in unique:
            unique.append(folder.resolve())
    return unique


def producing_recipe(path: str, recipe: str | None = None) -> str | None:
    """The recipe whose `output_dir` is `path` (as given, relative to the working directory), shown
    relative to the working directory when it is under it; None when no recipe writes it."""
    import yaml

    target = Path(path).expanduser().resolve()
    for folder in _recipe_folders(recipe):
        for candidate in sorted(folder.rglob("*.yaml")):
            try:
                settings = yaml.safe_load(candidate.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                continue
            output = settings.get("output_dir") if isinstance(settings, dict) else None
            if isinstance(output, str) and Path(output).expanduser().resolve() == target:
                try:
                    return str(candidate.relative_to(Path.cwd().resolve()))
                except ValueError:
                    return str(candidate)
    return None


def _in_hub_cache(repo_id: str, cache_dir: str | None, revision: str | None) -> bool:
    """The Hub model's config.json, or a PEFT adapter's adapter_config.json, is in the local cache (what an
    offline load needs first)."""
    from huggingface_hub import try_to_load_from_cache

    for filename in ("config.json", "adapter_config.json"):
        try:
            found = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision or "main")
        except ValueError:  # not a valid repository id (HFValidationError)
            return False
        if isinstance(found, str):
            return True
    return False


def check_model_source(field: str, path: str, recipe: str | None = None, cache_dir: str | None = None,
                       revision: str | None = None) -> None:
    """Refuse `path` (the value of `field`) when it cannot be loaded: a missing local folder, or a Hub id
    not in the cache while the Hub is offline. Hub ids are left to the load otherwise."""
    if os.path.exists(path):
        return
    writer = producing_recipe(path, recipe)
    if writer:
        raise ConfigError(
            f"{field}={path!r} does not exist: run 'hf-distill train {writer}' first (it writes that folder)"
        )
    if looks_local(path):
        raise ConfigError(f"{field}={path!r} does not exist: it is neither a local folder nor reachable on the Hub")
    if hub_offline() and not _in_hub_cache(path, cache_dir, revision):
        raise ConfigError(
            f"{field}={path!r} is not a local folder and not in the Hub cache, and the Hub is offline "
            "(HF_HUB_OFFLINE=1): give a local model folder instead (or download it once online)"
        )


def check_model_sources(model_args, data_args=None, recipe: str | None = None, student: bool = True,
                        teachers: bool = True) -> None:
    """Every model the run will load (the student's model_name_or_path, the teachers, the masked LM of
    augmentation), checked before any data or model loads."""
    sources = []
    if student and model_args.model_name_or_path:
        sources.append(("model_name_or_path", model_args.model_name_or_path))
    if teachers:
        sources += [("teacher_name_or_path", path) for path in model_args.teacher_name_or_path or []]
        if data_args is not None and data_args.augment_n and data_args.augment_masked_lm:
            sources.append(("augment_masked_lm", data_args.augment_masked_lm))
    for field, path in sources:
        check_model_source(field, path, recipe, model_args.cache_dir, model_args.model_revision)


def model_load_error(field: str, path: str, error: OSError) -> ConfigError:
    """One line for a model that could not be loaded (no connection, no such repository, no config.json)."""
    if os.path.isdir(path):
        return ConfigError(f"{field}={path!r} could not be loaded ({first_line(error)})")
    offline = " (HF_HUB_OFFLINE=1)" if hub_offline() else ""
    return ConfigError(
        f"{field}={path!r} is neither a local folder nor reachable on the Hub{offline} ({first_line(error)}): "
        "give a local model folder instead"
    )


@contextlib.contextmanager
def loading(field: str, path: str | None) -> Iterator[None]:
    """Turn an `OSError` while loading the model `path` (the value of `field`) into its one-line `ConfigError`."""
    try:
        yield
    except OSError as error:
        if not path:
            raise
        raise model_load_error(field, path, error) from error


def dataset_load_error(name: str, config: str | None, error: Exception) -> ConfigError:
    """One line for a Hub dataset that could not be loaded: which one, why, and the local alternative."""
    what = f"dataset_name={name!r}" + (f" (dataset_config_name={config!r})" if config else "")
    if hub_offline() and isinstance(error, ConnectionError):
        return ConfigError(
            f"{what} is not in the local cache and the Hub is offline (HF_HUB_OFFLINE=1): {LOCAL_DATA_HINT}"
        )
    return ConfigError(f"{what} could not be loaded from the Hub ({first_line(error)}): {LOCAL_DATA_HINT}")
