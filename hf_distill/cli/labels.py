"""Gold labels: which column holds them, whether a split has any, and what head they need."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .errors import ConfigError

logger = logging.getLogger(__name__)

# Label columns recognised when `label_column` is absent (the project's STS-B copy calls it "score").
LABEL_ALTERNATIVES = ("label", "score", "labels", "similarity_score")


@dataclass
class LabelInfo:
    """How gold labels map to the head: num_labels (1 = regression) and class names if any."""

    num_labels: int
    names: list[str] | None = None  # id -> name

    @property
    def label2id(self) -> dict[str, int] | None:
        return {name: i for i, name in enumerate(self.names)} if self.names else None


def infer_labels(dataset, column: str, num_labels: int | None) -> LabelInfo:
    """num_labels and names from a labelled split: ClassLabel names, sorted strings, ints, or floats (regression)."""
    from datasets import ClassLabel

    feature = dataset.features.get(column)
    if isinstance(feature, ClassLabel):
        names = list(feature.names)
        if num_labels == 1:
            return LabelInfo(1)
        _check_num_labels(num_labels, len(names), column)
        return LabelInfo(len(names), names)
    values = [v for v in dataset[column] if v is not None]
    if not values:
        raise ConfigError(f"label column {column!r} holds no labels.")
    if any(isinstance(v, str) for v in values):
        names = sorted({str(v) for v in values})
        _check_num_labels(num_labels, len(names), column)
        return LabelInfo(len(names), names)
    if num_labels is not None:
        return LabelInfo(num_labels)
    if any(isinstance(v, float) and not float(v).is_integer() for v in values):
        return LabelInfo(1)
    ids = [int(v) for v in values if int(v) >= 0]  # GLUE marks unlabelled rows -1
    return LabelInfo(max(max(ids) + 1, 2) if ids else 2)


def _check_num_labels(num_labels: int | None, found: int, column: str) -> None:
    if num_labels is not None and num_labels != found:
        raise ConfigError(f"num_labels={num_labels} but the training column {column!r} has {found} classes.")


def is_labelled(dataset, column: str) -> bool:
    if column not in dataset.column_names or len(dataset) == 0:
        return False
    return any(v is not None and not (isinstance(v, (int, float)) and v == -1) for v in dataset[column])


def find_label_column(raw, column: str):
    """Rename a recognised label column (e.g. STS-B's "score") to `column` when `column` is absent."""
    for split in list(raw):
        names = raw[split].column_names
        if column in names:
            continue
        alternative = next((c for c in LABEL_ALTERNATIVES if c in names and c != column), None)
        if alternative is not None:
            logger.info("%s split: using column %r as the labels (label_column=%r)", split, alternative, column)
            raw[split] = raw[split].rename_column(alternative, column)
    return raw


def check_finite_labels(raw, column: str, sources: dict[str, str]) -> None:
    """Refuse a NaN or infinite number in a float label column (a regression score), naming the split's
    file (`sources`), the row and the column: the loss would turn NaN at the first batch that holds it.
    Missing labels (null) stay allowed: those rows are unlabelled."""
    import numpy as np
    import pyarrow.compute as pc

    for split in raw:
        names = raw[split].column_names
        name = column if column in names else next((c for c in LABEL_ALTERNATIVES if c in names), None)
        dtype = getattr(raw[split].features.get(name), "dtype", "") if name else ""
        if not str(dtype).startswith("float"):
            continue
        values = raw[split].with_format("arrow")[name]
        finite = pc.fill_null(pc.is_finite(values), True).to_numpy(zero_copy_only=False)
        bad = np.flatnonzero(~finite)
        if bad.size:
            row = int(bad[0])
            raise ConfigError(
                f"{sources.get(split, f'the {split} split')}, row {row} (counting from 0), column {name!r}: "
                f"{values[row].as_py()} is not a finite number; a regression label must be finite "
                f"({bad.size} such row{'s' if bad.size > 1 else ''}: fix or drop them)"
            )


def labels_for(datasets: list, label_column: str, num_labels: int | None, teachers: list) -> LabelInfo:
    """The head the student needs: from the first labelled split, else from num_labels or the first teacher."""
    labelled = [d for d in datasets if d is not None and is_labelled(d, label_column)]
    if labelled:
        return infer_labels(labelled[0], label_column, num_labels)
    if teachers or num_labels:  # an unlabelled transfer set: the teachers say what to predict
        return LabelInfo(num_labels or teachers[0].config.num_labels)
    raise ConfigError(f"label column {label_column!r} not found or empty: set label_column, or num_labels.")
