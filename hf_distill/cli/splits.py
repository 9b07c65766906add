"""Train / validation / test splits from local files (a folder or one file per split) or the Hub."""

from __future__ import annotations

import logging
from pathlib import Path

from ..content_cache import files_by_content
from .arguments import DataArguments
from .data_files import unreadable_file
from .errors import ConfigError
from .sources import dataset_load_error

SPLIT_NAMES = {"train": ("train",), "validation": ("validation", "valid", "dev", "eval"), "test": ("test",)}
FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}


def _split_files(data_args: DataArguments) -> dict[str, str]:
    files: dict[str, str] = {}
    if data_args.data_dir:
        folder = Path(data_args.data_dir)
        if not folder.is_dir():
            raise ConfigError(f"data_dir={data_args.data_dir!r} is not a folder.")
        for split, names in SPLIT_NAMES.items():
            candidates = [folder / f"{name}{ext}" for name in names for ext in FILE_BUILDERS]
            found = [path for path in candidates if path.is_file()]
            if found:
                files[split] = str(found[0])
        if not files:
            raise ConfigError(
                f"data_dir={data_args.data_dir!r} holds no train/validation/test file with extension "
                f"{', '.join(FILE_BUILDERS)}; it contains {sorted(p.name for p in folder.iterdir())}."
            )
    for split in ("train", "validation", "test"):
        explicit = getattr(data_args, f"{split}_file")
        if explicit:
            if not Path(explicit).is_file():
                raise ConfigError(f"{split}_file={explicit!r} does not exist.")
            files[split] = explicit
    for split, path in files.items():
        if Path(path).suffix.lower() not in FILE_BUILDERS:
            raise ConfigError(f"{split} file {path!r}: unknown format; use one of {', '.join(FILE_BUILDERS)}.")
    return files


def load_raw_datasets(data_args: DataArguments, cache_dir: str | None = None):
    """A DatasetDict with train / validation / test (those that exist), from local files or the Hub;
    the training split from train_dataset_dir when one is given."""
    from datasets import DatasetDict, load_dataset, load_from_disk

    files = _split_files(data_args)
    if files:
        raw = DatasetDict({split: _load_file(split, path, cache_dir) for split, path in files.items()})
    elif data_args.dataset_name:
        try:
            raw = load_dataset(data_args.dataset_name, data_args.dataset_config_name, cache_dir=cache_dir)
        except (OSError, ValueError) as error:  # offline and not cached, no connection, no such dataset or config
            raise dataset_load_error(data_args.dataset_name, data_args.dataset_config_name, error) from error
        if "validation" not in raw:  # e.g. MNLI: validation_matched
            alternative = next((s for s in raw if s.startswith("validation") or s == "dev"), None)
            if alternative:
                raw["validation"] = raw[alternative]
    else:
        raw = DatasetDict()
    if data_args.train_dataset_dir:
        raw["train"] = load_from_disk(data_args.train_dataset_dir)
    return raw


def _load_file(split: str, path: str, cache_dir: str | None):
    """One split from one local file, saved by content (`files_by_content`); a file `datasets` cannot read is a
    `ConfigError` naming its first bad line (`datasets` logs its own error too, with a traceback: silenced here,
    the `ConfigError` says it in one line)."""
    from datasets import load_dataset
    from datasets.exceptions import DatasetGenerationError

    suffix = Path(path).suffix.lower()
    extra = {"delimiter": "\t"} if suffix == ".tsv" else {}

    def read(download_mode):
        datasets_logger = logging.getLogger("datasets")
        level = datasets_logger.level
        datasets_logger.setLevel(logging.CRITICAL)
        try:
            return load_dataset(FILE_BUILDERS[suffix], data_files={split: path}, split=split, cache_dir=cache_dir,
                                download_mode=download_mode, **extra)
        except (DatasetGenerationError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            raise unreadable_file(f"{split} file", path, error) from error
        finally:
            datasets_logger.setLevel(level)

    # keyed by content, not path and age: labels and augmentation cached on it survive a fresh copy of the file
    return files_by_content(read, [path], (FILE_BUILDERS[suffix], extra, split), cache_dir)


def split_sources(data_args: DataArguments) -> dict[str, str]:
    """How each split is named in a message: "train file 'data/train.jsonl'", "the train split of nyu-mll/glue"."""
    files = _split_files(data_args)
    sources = {split: f"{split} file {path!r}" for split, path in files.items()}
    if not files and data_args.dataset_name:
        name = data_args.dataset_name + (f" ({data_args.dataset_config_name})" if data_args.dataset_config_name else "")
        sources = {split: f"the {split} split of {name}" for split in ("train", "validation", "test")}
    if data_args.train_dataset_dir:
        sources["train"] = f"train_dataset_dir {data_args.train_dataset_dir!r}"
    return sources


def trim_splits(raw, data_args: DataArguments):
    """Keep the first max_train_samples / max_eval_samples / max_predict_samples rows of each split."""
    for split, limit in (("train", data_args.max_train_samples), ("validation", data_args.max_eval_samples),
                         ("test", data_args.max_predict_samples)):
        if split in raw and limit is not None:
            raw[split] = raw[split].select(range(min(limit, len(raw[split]))))
    return raw
