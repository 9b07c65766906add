"""Where a training row comes from: the gold set, augmentation or a transfer set (the `origin` column).

Rows that do not come from the gold set carry no gold label: their label is None (the column is
kept, so gold and new rows share one schema) and the trainer gives them only teacher terms.
"""

from __future__ import annotations

from datasets import Dataset, Features, Value

from .batch_keys import LOGITS_PREFIX

__all__ = ["AUGMENTED", "GOLD", "ORIGINS", "ORIGIN_COLUMN", "TRANSFER", "check_unlabelled_by_teachers", "mixed_features"]

ORIGIN_COLUMN = "origin"
GOLD, AUGMENTED, TRANSFER = "gold", "augmented", "transfer"
ORIGINS = (GOLD, AUGMENTED, TRANSFER)


def mixed_features(dataset: Dataset) -> Features:
    """The dataset's features with a string `origin` column (kept where it exists)."""
    return Features({**dataset.features, ORIGIN_COLUMN: dataset.features.get(ORIGIN_COLUMN, Value("string"))})


def check_unlabelled_by_teachers(dataset: Dataset, step: str) -> None:
    """New rows would have no teacher logits: `step` must come before `add_teacher_logits`."""
    columns = [c for c in dataset.column_names if c.startswith(LOGITS_PREFIX)]
    if columns:
        raise ValueError(
            f"dataset has teacher logit columns {columns}: {step} adds rows no teacher has labelled; "
            f"call {step} first, then add_teacher_logits on its result."
        )
