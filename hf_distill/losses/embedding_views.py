"""The sentence embeddings an embedding loss compares: the student's and one teacher's, row for row.

Rows are every sentence of the batch: side a, then side b when the rows are pairs. The teacher's
come from precomputed columns in the batch (`teacher_embeddings_{k}_a` / `_b`) when present, else
from the online teacher k's output (`embeddings_a` / `embeddings_b` of an embedding teacher).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ..embedding_teachers import SIDES, embedding_column

__all__ = ["embedding_views", "require_teacher", "student_sides", "teacher_sides"]


def require_teacher(teacher_config, switch: str) -> None:
    """Refuse, before training, an embedding loss switched on without a teacher or precomputed embeddings."""
    if teacher_config is None:
        raise ValueError(
            f"{switch} > 0 needs an embedding teacher (teachers=[load_embedding_teacher(...)]) or precomputed "
            "teacher_embeddings_0_a columns in the training set (add_teacher_embeddings)."
        )


def student_sides(student_out, component: str) -> list[torch.Tensor]:
    """The student's pooled embeddings: [a] for sentences, [a, b] for pairs."""
    first, second = getattr(student_out, "embeddings_a", None), getattr(student_out, "embeddings_b", None)
    if first is None:
        raise ValueError(
            f"{component} needs the student's sentence embeddings, but its output has none; "
            "valid students: SiameseModel (bi-encoders), not cross-encoders."
        )
    return [first] if second is None else [first, second]


def teacher_sides(teacher_outs: Sequence, batch: Mapping, teacher: int, sides: int, component: str) -> list[torch.Tensor]:
    """Teacher `teacher`'s embeddings of the first `sides` sides: precomputed columns first, else its online output."""
    columns = [embedding_column(teacher, side) for side in SIDES[:sides]]
    if all(column in batch for column in columns):
        return [batch[column] for column in columns]
    if teacher < len(teacher_outs):
        found = [getattr(teacher_outs[teacher], f"embeddings_{side}", None) for side in SIDES[:sides]]
        if all(e is not None for e in found):
            return found
    raise ValueError(
        f"{component} reads teacher {teacher}'s sentence embeddings, but the batch has no {' / '.join(columns)} and "
        f"teacher {teacher} is not an online embedding teacher; give teachers=[load_embedding_teacher(...)] or "
        "precomputed columns (add_teacher_embeddings)."
    )


def embedding_views(
    student_out, teacher_outs: Sequence, batch: Mapping, teacher: int, component: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(student rows (N, d_S), teacher rows (N, d_T)) in float32, N = sentences in the batch (both sides of pairs)."""
    student = student_sides(student_out, component)
    teacher_rows = teacher_sides(teacher_outs, batch, teacher, len(student), component)
    stacked_student = torch.cat(student).float()
    stacked_teacher = torch.cat(teacher_rows).float().to(stacked_student.device)
    if stacked_teacher.size(0) != stacked_student.size(0):
        raise ValueError(
            f"{component}: teacher {teacher} gave {stacked_teacher.size(0)} embeddings for the student's {stacked_student.size(0)} "
            "sentences; precomputed columns must belong to the batch's rows."
        )
    return stacked_student, stacked_teacher
