"""Embedding distillation: the student's sentence embeddings regressed onto an embedding teacher's.

    embedding_mse = mean over sentences i and features j of ((W s_i + c)_j - t_ij)^2

s_i the student's pooled embedding of sentence i, t_i the teacher's (each model reads its own
tokenization; the rows are every sentence of the batch, both sides of pairs), W, c a learned
projection Linear(d_S, d_T) when the widths differ (Reimers & Gurevych 2020, sentence-transformers'
`MSELoss` with a `Dense` layer). With `normalize=True` both sides are L2-normalised first (the loss
then matches directions only).

The projection is trained with the student. By default it is training-only: it lives in the
component, is saved in every checkpoint (`distillation_state.safetensors`, restored on resume) and
is dropped from the saved student, whose embeddings keep the student's width. With
`keep_projection=True` it is the student's output layer instead (`SiameseModel.add_output_layer`):
trained, checkpointed and saved as part of the student, whose embeddings then have the teacher's
width (a drop-in for an index built with the teacher).

Inputs: a Siamese student; an online embedding teacher (`load_embedding_teacher`) or the columns
`teacher_embeddings_{k}_a` (`_b` for pairs) from `add_teacher_embeddings`. Rows may be sentences
alone or pairs, with or without labels.

Example:
    >>> teacher = load_embedding_teacher("sentence-transformers/all-mpnet-base-v2")
    >>> trainer = DistillationTrainer(student, DistillationArguments(..., embedding_mse_weight=1.0, alpha=1.0),
    ...                               teachers=teacher, train_dataset=Dataset.from_dict({"sentence": sentences}))
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .base import LossComponent, Term
from .embedding_views import embedding_views, require_teacher
from .layers import make_projection

__all__ = ["EmbeddingMSELoss", "embedding_mse"]


def embedding_mse(student: torch.Tensor, teacher: torch.Tensor, normalize: bool = False) -> torch.Tensor:
    """Mean squared error between two (N, d) embedding matrices (optionally L2-normalised first), in float32."""
    if student.shape != teacher.shape:
        raise ValueError(f"student embeddings {tuple(student.shape)} and teacher embeddings {tuple(teacher.shape)} differ.")
    student, teacher = student.float(), teacher.float()
    if normalize:
        student, teacher = F.normalize(student, dim=-1), F.normalize(teacher, dim=-1)
    return F.mse_loss(student, teacher)


class EmbeddingMSELoss(LossComponent):
    """MSE between (projected) student embeddings and one embedding teacher's: term `embedding_mse`.

    Args:
        student_dim / teacher_dim: the embedding widths d_S and d_T.
        teacher: which teacher's embeddings (index k of the online teachers or of the precomputed columns).
        projection: None (default): a learned Linear(d_S, d_T) when the widths differ, none when equal;
            True: always one (identity-initialised when equal); False: none (equal widths only).
        keep_projection: make the projection the student's output layer (saved with the student)
            instead of a training-only part of this component.
        normalize: compare L2-normalised embeddings.
    """

    terms = (Term("embedding_mse", "embedding_mse_weight", "MSE between the student's (projected) sentence embeddings and the teacher's"),)
    method = "embedding_kd"
    switch = "embedding_mse_weight"
    switch_help = (
        "Weight (>= 0) of the MSE between the Siamese student's sentence embeddings (projected to the teacher's width "
        "when they differ) and an embedding teacher's (load_embedding_teacher, or add_teacher_embeddings columns)."
    )

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config) -> "EmbeddingMSELoss":
        require_teacher(teacher_config, cls.switch)
        return cls(student_config.hidden_size, teacher_config.hidden_size)

    def __init__(
        self,
        student_dim: int,
        teacher_dim: int,
        teacher: int = 0,
        projection: bool | None = None,
        keep_projection: bool = False,
        normalize: bool = False,
    ):
        super().__init__()
        if keep_projection and projection is False:
            raise ValueError("keep_projection=True needs a projection; leave projection=None or set it True.")
        self.student_dim, self.teacher_dim, self.teacher = student_dim, teacher_dim, teacher
        self.keep_projection, self.normalize = keep_projection, normalize
        if keep_projection or projection is None:
            projection = keep_projection or student_dim != teacher_dim  # auto: a projection when the widths differ
        self.projection = make_projection(student_dim, teacher_dim, projection)
        self._shape = f"Linear({student_dim}, {teacher_dim})" if projection else None

    def declared_terms(self) -> tuple[Term, ...]:
        where = "the student's output layer" if self.keep_projection else "training-only"
        shape = f"projected by {self._shape}, {where}" if self._shape else "no projection"
        unit = "L2-normalised " if self.normalize else ""
        text = f"MSE between the student's {unit}sentence embeddings ({shape}) and teacher {self.teacher}'s"
        return (Term("embedding_mse", "embedding_mse_weight", text),)

    def prepare_student(self, student: nn.Module) -> None:
        """Called by the trainer before training. With `keep_projection` the projection moves into the student as
        its output layer (a student saved with one of the teacher's width trains that one further); without it, a
        student whose embeddings are not `student_dim` wide (an output layer of its own) gets a projection from
        their real width."""
        width = getattr(student, "embedding_dim", self.student_dim)
        if self.keep_projection and isinstance(self.projection, nn.Linear):
            if width != self.teacher_dim:
                student.add_output_layer(self.projection)
            self.projection, self.student_dim = nn.Identity(), self.teacher_dim
        elif not self.keep_projection and width != self.student_dim:
            self.student_dim = width
            self.projection = make_projection(width, self.teacher_dim, width != self.teacher_dim)
            self._shape = f"Linear({width}, {self.teacher_dim})" if width != self.teacher_dim else None

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        name = type(self).__name__
        student, teacher = embedding_views(student_out, teacher_outs, batch, self.teacher, name)
        if student.size(-1) != self.student_dim or teacher.size(-1) != self.teacher_dim:
            raise ValueError(
                f"{name} was built for student width {self.student_dim} and teacher width {self.teacher_dim}, but the "
                f"embeddings are {student.size(-1)} and {teacher.size(-1)} wide; build EmbeddingMSELoss(student_dim, "
                f"teacher_dim, teacher=k) for the embedding teacher and pass it in loss_components."
            )
        return {"embedding_mse": embedding_mse(self.projection(student), teacher, self.normalize)}
