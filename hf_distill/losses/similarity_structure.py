"""Similarity-structure distillation: the student's in-batch cosine-similarity matrix matched to the teacher's.

With C^S_ij = cos(s_i, s_j) and C^T_ij = cos(t_i, t_j) over the N sentences of the batch (both sides
of pairs; each model reads its own tokenization, the widths may differ: no projection is needed)
and the diagonal (always 1) left out:

    kind="mse":  similarity_structure = mean over i != j of (C^S_ij - C^T_ij)^2
    kind="kl":   similarity_structure = mean over i of KL(P^T_i || P^S_i),
                 P_i = softmax over j != i of C_ij / tau          (row-wise, temperature tau)

The MSE form is similarity-preserving distillation (Tung & Mori, ICCV 2019) on sentence embeddings;
the KL form matches each sentence's distribution over its in-batch neighbours (as SEED and
sentence-transformers' `DistillKLDivLoss` do with scores). A batch of one sentence has no
structure: the term is then absent.

Inputs: as `EmbeddingMSELoss` (a Siamese student; an online embedding teacher or precomputed columns).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .base import LossComponent, Term
from .embedding_views import embedding_views, require_teacher

__all__ = ["SIMILARITY_KINDS", "SimilarityStructureLoss", "cosine_matrix", "similarity_structure_loss"]

SIMILARITY_KINDS = ("mse", "kl")


def cosine_matrix(embeddings: torch.Tensor) -> torch.Tensor:
    """(N, d) -> (N, N) cosine similarities, in float32."""
    unit = F.normalize(embeddings.float(), dim=-1)
    return unit @ unit.T


def _off_diagonal(matrix: torch.Tensor) -> torch.Tensor:
    """(N, N) -> (N, N - 1): each row without its diagonal entry."""
    n = matrix.size(0)
    keep = ~torch.eye(n, dtype=torch.bool, device=matrix.device)
    return matrix[keep].view(n, n - 1)


def similarity_structure_loss(
    student: torch.Tensor, teacher: torch.Tensor, kind: str = "kl", temperature: float = 0.05
) -> torch.Tensor:
    """The loss between the in-batch cosine matrices of two (N, d_S) and (N, d_T) embedding matrices (N >= 2)."""
    if kind not in SIMILARITY_KINDS:
        raise ValueError(f"kind={kind!r} is not valid; choose one of {', '.join(map(repr, SIMILARITY_KINDS))}.")
    if student.size(0) != teacher.size(0) or student.size(0) < 2:
        raise ValueError(f"need the same number (>= 2) of student and teacher rows, got {student.size(0)} and {teacher.size(0)}.")
    s = _off_diagonal(cosine_matrix(student))
    t = _off_diagonal(cosine_matrix(teacher)).to(s.device)
    if kind == "mse":
        return F.mse_loss(s, t)
    log_p_student = F.log_softmax(s / temperature, dim=-1)
    log_p_teacher = F.log_softmax(t / temperature, dim=-1)
    return F.kl_div(log_p_student, log_p_teacher, reduction="batchmean", log_target=True)


class SimilarityStructureLoss(LossComponent):
    """In-batch cosine-similarity structure of the student matched to one embedding teacher's: term `similarity_structure`.

    Args:
        kind: "kl" (row-wise KL at temperature tau, default) or "mse" (on the cosine matrices).
        temperature: tau > 0 of the row softmax (kind="kl"); cosines lie in [-1, 1], so small values sharpen.
        teacher: which teacher's embeddings (index k of the online teachers or of the precomputed columns).
    """

    terms = (Term("similarity_structure", "similarity_structure_weight", "in-batch cosine-similarity structure, student vs teacher"),)
    method = "similarity_kd"
    switch = "similarity_structure_weight"
    switch_help = (
        "Weight (>= 0) of similarity-structure distillation: the Siamese student's in-batch cosine-similarity matrix "
        "matched to an embedding teacher's (row-wise KL, temperature 0.05; configure SimilarityStructureLoss for MSE)."
    )

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config) -> "SimilarityStructureLoss":
        require_teacher(teacher_config, cls.switch)
        return cls()

    def __init__(self, kind: str = "kl", temperature: float = 0.05, teacher: int = 0):
        super().__init__()
        if kind not in SIMILARITY_KINDS:
            raise ValueError(f"kind={kind!r} is not valid; choose one of {', '.join(map(repr, SIMILARITY_KINDS))}.")
        if not temperature > 0:
            raise ValueError(f"temperature={temperature!r} must be > 0.")
        self.kind, self.temperature, self.teacher = kind, temperature, teacher

    def declared_terms(self) -> tuple[Term, ...]:
        how = f"row-wise KL(teacher ‖ student) at τ = {self.temperature:g}" if self.kind == "kl" else "MSE"
        text = f"in-batch cosine-similarity matrices (diagonal left out), student vs teacher {self.teacher}: {how}"
        return (Term("similarity_structure", "similarity_structure_weight", text),)

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        student, teacher = embedding_views(student_out, teacher_outs, batch, self.teacher, type(self).__name__)
        if student.size(0) < 2:
            return {}
        return {"similarity_structure": similarity_structure_loss(student, teacher, self.kind, self.temperature)}
