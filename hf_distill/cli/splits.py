"""Train / validation / test splits from local files (a folder or one file per split) or the Hub."""

from __future__ import annotations

from pathlib import Path

from .arguments import DataArguments
from .errors import ConfigError

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
        splits = {}
        for split, path in files.items():
            suffix = Path(path).suffix.lower()
            extra = {"delimiter": "\t"} if suffix == ".tsv" else {}
            splits[split] = load_dataset(
                FILE_BUILDERS[suffix], data_files={split: path}, split=split, cache_dir=cache_dir, **extra
            )
        raw = DatasetDict(splits)
    elif data_args.dataset_name:
        raw = load_dataset(data_args.dataset_name, data_args.dataset_config_name, cache_dir=cache_dir)
        if "validation" not in raw:  # e.g. MNLI: validation_matched
            alternative = next((s for s in raw if s.startswith("validation") or s == "dev"), None)
            if alternative:
                raw["validation"] = raw[alternative]
    else:
        raw = DatasetDict()
    if data_args.train_dataset_dir:
        raw["train"] = load_from_disk(data_args.train_dataset_dir)
    return raw


def trim_splits(raw, data_args: DataArguments):
    """Keep the first max_train_samples / max_eval_samples / max_predict_samples rows of each split."""
    for split, limit in (("train", data_args.max_train_samples), ("validation", data_args.max_eval_samples),
                         ("test", data_args.max_predict_samples)):
        if split in raw and limit is not None:
            raw[split] = raw[split].select(range(min(limit, len(raw[split]))))
    return raw
