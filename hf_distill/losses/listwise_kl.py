"""Listwise KL (RocketQAv2, Ren et al. 2021): the student's distribution over a query's passages
matches the teacher's.

    listwise_kl = tau^2 * mean over groups g of KL(softmax(t_g / tau) || softmax(s_g / tau))

over the passages of each group (padding left out), with s the student's scores, t the teacher's
(precomputed) and tau the temperature; tau^2 keeps the gradient's size independent of tau, as in
Hinton et al. and sentence-transformers' `DistillKLDivLoss` (whose batch of (query, passage_1..n)
rows with teacher scores is exactly one group per row). Unlike Margin-MSE it needs no positive:
every passage counts by the teacher's softmax weight, so the ordering of the negatives is learned too.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .base import Term
from .group_scores import SIMILARITY_SCALE, GroupScoreLoss, masked_log_softmax, teacher_group_scores

__all__ = ["ListwiseKLLoss", "listwise_kl"]


def listwise_kl(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """tau^2 * KL(teacher || student) of the softmax over each group's masked passages, mean over groups.

    A group of one passage contributes 0 (both distributions put all mass on it); tied teacher
    scores give a uniform target over the tied passages.
    """
    if temperature <= 0:
        raise ValueError(f"temperature={temperature!r} must be > 0.")
    student, teacher = student.float(), teacher.float().to(student.device)
    mask = mask.bool().to(student.device)
    log_p_student = masked_log_softmax(student / temperature, mask)
    log_p_teacher = masked_log_softmax(teacher / temperature, mask)
    p_teacher = log_p_teacher.exp().masked_fill(~mask, 0.0)
    kl = (p_teacher * (log_p_teacher - log_p_student)).sum(dim=-1)
    return kl.mean() * temperature**2


class ListwiseKLLoss(GroupScoreLoss):
    """Listwise KL over query groups: term `listwise_kl`, weighted by `listwise_kl_weight`.

    Reads a group batch (`GroupCollator`): the teacher's precomputed `teacher_scores` and the
    student's scores of the same passages (cross-encoder logits, or a Siamese student's scaled cosine).

    Args:
        temperature: tau > 0 softening both distributions (`DistillationArguments.temperature`).
        similarity_scale, positive_label: as in `GroupScoreLoss`.
    """

    terms = (Term("listwise_kl", "listwise_kl_weight", "τ²·KL(teacher ‖ student) of the softmax over each query "
                  "group's passages (listwise distillation)"),)
    requires = {"teacher_scores"}
    method = "listwise_kl"
    switch = "listwise_kl_weight"
    switch_help = (
        "Weight (>= 0) of listwise KL over query groups (RocketQAv2): tau^2 * KL between the teacher's and the "
        "student's softmax over each group's passages at `temperature`; needs a group training set "
        "(ranking_group_size). 0: off."
    )

    def __init__(self, temperature: float = 1.0, similarity_scale: float = SIMILARITY_SCALE, positive_label: int = 1):
        super().__init__(similarity_scale, positive_label)
        if temperature <= 0:
            raise ValueError(f"temperature={temperature!r} must be > 0.")
        self.temperature = temperature

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config) -> "ListwiseKLLoss":
        return cls(temperature=args.temperature)

    def declared_terms(self) -> tuple[Term, ...]:
        term = type(self).terms[0]
        description = f"{term.description}, τ = {self.temperature:g}"
        return (Term(term.name, term.weight_argument, description),)

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        teacher, mask = teacher_group_scores(batch)
        return {"listwise_kl": listwise_kl(self.scores(student_out, batch), teacher, mask, self.temperature)}
