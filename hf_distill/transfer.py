"""Transfer sets: unlabelled pairs from other files join the training set, for the teachers to label.

Distillation's strength is that a teacher labels far more data than the gold set (Augmented SBERT
samples pairs for a cross-encoder to label; DvBERT's teachers label the training set). The pairs
are read from JSON Lines / CSV / TSV files, their text columns renamed to the training set's, and
appended with label None and `origin="transfer"`. Label the result with `add_teacher_logits`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from datasets import Dataset, concatenate_datasets, load_dataset

from .content_cache import files_by_content
from .origins import GOLD, ORIGIN_COLUMN, TRANSFER, check_unlabelled_by_teachers, mixed_features

__all__ = ["PAIR_FILE_SUFFIXES", "add_transfer_pairs", "append_transfer_rows", "load_pairs"]

_FORMATS = {".jsonl": ("json", {}), ".json": ("json", {}), ".csv": ("csv", {}), ".tsv": ("csv", {"sep": "\t"})}
PAIR_FILE_SUFFIXES = tuple(_FORMATS)  # the file types `load_pairs` reads


def _format(files: Sequence[str]) -> tuple[str, dict]:
    suffixes = sorted({Path(f).suffix.lower() for f in files})
    if len(suffixes) != 1 or suffixes[0] not in _FORMATS:
        raise ValueError(f"files={list(files)!r} is not valid; give files of one format: {', '.join(_FORMATS)}.")
    return _FORMATS[suffixes[0]]


def _renaming(text_columns: Sequence[str], source_columns: Sequence[str] | Mapping[str, str] | None) -> dict[str, str]:
    """File column -> training column."""
    if source_columns is None:
        return {c: c for c in text_columns}
    if isinstance(source_columns, Mapping):
        renaming = dict(source_columns)
    else:
        renaming = dict(zip(source_columns, text_columns))
        if len(source_columns) != len(text_columns):
            raise ValueError(f"source_columns={list(source_columns)!r} is not valid; give one file column per text column "
                             f"{list(text_columns)}.")
    if sorted(renaming.values()) != sorted(text_columns):
        raise ValueError(f"source_columns={source_columns!r} is not valid; it must map file columns onto exactly "
                         f"{list(text_columns)}.")
    return renaming


def load_pairs(
    files: str | Sequence[str],
    text_columns: Sequence[str],
    source_columns: Sequence[str] | Mapping[str, str] | None = None,
    cache_dir: str | None = None,
) -> Dataset:
    """The text pairs of JSON Lines / CSV / TSV files, under the training set's column names, nothing else.

    `source_columns`: the files' names for the text columns (a list in the order of `text_columns`,
    or a mapping file name -> training name); None when the files already use `text_columns`.
    """
    files = [files] if isinstance(files, str) else list(files)
    missing_files = [f for f in files if not Path(f).is_file()]
    if not files or missing_files:
        raise ValueError(f"files={files!r} is not valid; {missing_files or 'none'} given or found.")
    builder, options = _format(files)
    renaming = _renaming(text_columns, source_columns)
    pairs = files_by_content(  # saved by content: the maps cached on it outlive a fresh copy of the files
        lambda mode: load_dataset(builder, data_files=files, split="train", cache_dir=cache_dir, download_mode=mode, **options),
        files, (builder, options), cache_dir,
    )
    absent = [c for c in renaming if c not in pairs.column_names]
    if absent:
        raise ValueError(f"source_columns: the files {files} have no column {absent}; their columns: {pairs.column_names}.")
    pairs = pairs.select_columns(list(renaming))
    return pairs.rename_columns({k: v for k, v in renaming.items() if k != v})


def add_transfer_pairs(
    dataset: Dataset,
    files: str | Sequence[str],
    text_columns: Sequence[str],
    source_columns: Sequence[str] | Mapping[str, str] | None = None,
    cache_dir: str | None = None,
) -> Dataset:
    """`dataset` followed by the pairs of `files` (`load_pairs`) as transfer rows (`append_transfer_rows`)."""
    check_unlabelled_by_teachers(dataset, "add_transfer_pairs")
    _check_text_columns(dataset, text_columns)
    return append_transfer_rows(dataset, load_pairs(files, text_columns, source_columns, cache_dir), text_columns)


def append_transfer_rows(dataset: Dataset, pairs: Dataset, text_columns: Sequence[str]) -> Dataset:
    """`dataset` followed by `pairs` (their columns: `text_columns` only): the pairs' other columns, the label
    included, are None, and `origin` is "transfer" (the training rows keep theirs, "gold" where they had none)."""
    check_unlabelled_by_teachers(dataset, "append_transfer_rows")
    _check_text_columns(dataset, text_columns)
    features = mixed_features(dataset)
    if ORIGIN_COLUMN not in dataset.column_names:
        dataset = dataset.add_column(ORIGIN_COLUMN, [GOLD] * len(dataset), feature=features[ORIGIN_COLUMN])

    def fill(batch: dict[str, list]) -> dict[str, list]:
        size = len(batch[text_columns[0]])
        blank = {ORIGIN_COLUMN: TRANSFER}
        return {name: batch[name] if name in batch else [blank.get(name)] * size for name in features}

    pairs = pairs.map(fill, batched=True, features=features, desc="Transfer pairs")
    return concatenate_datasets([dataset, pairs])


def _check_text_columns(dataset: Dataset, text_columns: Sequence[str]) -> None:
    missing = [c for c in text_columns if c not in dataset.column_names]
    if missing:
        raise ValueError(f"text_columns={list(text_columns)!r} is not valid: the dataset has no {missing}; "
                         f"its columns: {dataset.column_names}.")
