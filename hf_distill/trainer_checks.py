"""The checks `DistillationTrainer` runs before any training: one clear line naming what is wrong and what is valid."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from torch import nn

from .data import PairCollator, check_labels
from .training_args import DistillationArguments
from .wrappers import unwrap_model

__all__ = ["check_arguments", "check_columns", "check_length_buckets", "check_teacher_labels", "check_term_weights"]


def check_arguments(args, model) -> DistillationArguments:
    """The arguments (defaults when None) and a student model, or a ValueError."""
    if args is None:
        args = DistillationArguments(output_dir="hf_distill_output")
    if not isinstance(args, DistillationArguments):
        raise ValueError(f"args={type(args).__name__} is not valid; give DistillationArguments.")
    if model is None:
        raise ValueError("model=None is not valid; give the student model.")
    return args


def check_length_buckets(args: DistillationArguments, student: nn.Module, requires: Iterable[str] = ()) -> None:
    """`student_length_buckets` > 1 needs a Siamese student and no loss on its layer outputs (they are not bucketed).
    Without `requires` (before the teachers load and the losses are built) only the student is checked."""
    buckets = args.student_length_buckets
    if buckets <= 1:
        return
    if not hasattr(student, "encode_side"):
        raise ValueError(f"student_length_buckets={buckets} is not valid for a {type(student).__name__}; it encodes "
                         "the sides of a Siamese student (SiameseModel). Give 1.")
    if getattr(student.config, "interaction", "none") == "virt":
        raise ValueError(f"student_length_buckets={buckets} is not valid for a student with interaction='virt' (its "
                         "interaction reads each side's last-layer queries and keys, which are not bucketed); give 1.")
    layered = sorted(set(requires) & {"hidden_states", "attentions", "query_key"})
    if layered:
        raise ValueError(f"student_length_buckets={buckets} is not valid with losses on the student's {', '.join(layered)}; "
                         "give 1.")


def check_term_weights(term_weights: Mapping[str, float] | None, known: Iterable[str] | None = None) -> dict[str, float]:
    """Explicit term weights: finite numbers >= 0, each naming a term (or group) some component returns."""
    checked = dict(term_weights or {})
    for name, value in checked.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"term_weights[{name!r}]={value!r} is out of range; it must be >= 0 (a finite number).")
    if known is not None:
        known = sorted(set(known))
        unknown = [name for name in checked if name not in known]
        if unknown:
            raise ValueError(
                f"term_weights[{unknown[0]!r}] names no loss term of this trainer; valid terms: {', '.join(known)}."
            )
    return checked


def check_teacher_labels(student: nn.Module, teachers: list) -> None:
    """Every teacher predicts the student's labels (count, and names where both have them)."""
    for k, teacher in enumerate(teachers):
        config = unwrap_model(teacher).config
        if student.config.num_labels != config.num_labels:
            raise ValueError(
                f"teachers[{k}].num_labels={config.num_labels} differs from the student's "
                f"num_labels={student.config.num_labels}; they must predict the same labels."
            )
        if config.num_labels > 1 and student.config.label2id and config.label2id:
            if dict(student.config.label2id) != dict(config.label2id):
                raise ValueError(
                    f"teachers[{k}].label2id={dict(config.label2id)} differs from the student's "
                    f"label2id={dict(student.config.label2id)}; align the label names and ids."
                )


def check_columns(name: str, dataset, collator) -> None:
    """A non-empty dataset with the collator's text columns and labels it can read."""
    if dataset is None:
        return
    datasets = dataset.items() if isinstance(dataset, dict) else [(None, dataset)]  # dict / DatasetDict: each part
    for key, part in datasets:
        where = f"{name}_dataset" + (f"[{key!r}]" if key is not None else "")
        if hasattr(part, "__len__") and len(part) == 0:
            raise ValueError(f"{where} is empty (0 rows); give at least one example.")
        if not isinstance(collator, PairCollator) or not hasattr(part, "column_names"):
            continue
        missing = [c for c in collator.text_columns if c not in part.column_names]
        if missing:
            raise ValueError(
                f"text_columns={list(collator.text_columns)} not found in the {name} dataset: missing {missing}; "
                f"its columns are {part.column_names}."
            )
        if collator.label_column:
            check_labels(name, part, collator.label_column, collator.label2id, collator.regression)
