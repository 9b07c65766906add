"""Margin-MSE (Hofstätter et al. 2020): the student's score margins between a query's positive and
each of its negatives match the teacher's.

    margin_mse = mean over groups g and negatives i >= 1 of ((s_g0 - s_gi) - (t_g0 - t_gi))^2

s are the student's scores of a group's passages, t the teacher's (precomputed), passage 0 the
positive. Only differences are matched, so a student whose scores live on another scale or offset
than the teacher's (a bi-encoder's cosine, a smaller cross-encoder) is not penalised for it.
With one negative this is sentence-transformers' `MarginMSELoss` on (query, positive, negative);
with n - 1 negatives the n - 1 margins of each group are averaged.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .base import Term
from .group_scores import GroupScoreLoss, teacher_group_scores

__all__ = ["MarginMSELoss", "margin_mse"]


def margin_mse(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Margin-MSE of (B, n) student and teacher scores (passage 0 the positive) over the masked passages.

    A batch whose groups hold only their positive has no margin: the loss is 0 (still part of the graph).
    """
    student, teacher = student.float(), teacher.float().to(student.device)
    mask = mask.bool().to(student.device)
    valid = mask[:, 1:] & mask[:, :1]
    if not bool(valid.any()):
        return student.sum() * 0.0
    student_margin = student[:, :1] - student[:, 1:]
    teacher_margin = teacher[:, :1] - teacher[:, 1:]
    return ((student_margin - teacher_margin)[valid] ** 2).mean()


class MarginMSELoss(GroupScoreLoss):
    """Margin-MSE over query groups: term `margin_mse`, weighted by `margin_mse_weight`.

    Reads a group batch (`GroupCollator`): the teacher's precomputed `teacher_scores` and the
    student's scores of the same passages (cross-encoder logits, or a Siamese student's scaled cosine).

    Args: those of `GroupScoreLoss` (how a Siamese or multi-class student's passage score is read).

    Example:
        >>> groups = query_groups(load_trec_run("dl20"), teacher, group_size=8, relevance_threshold=2)
        >>> args = DistillationArguments(output_dir="out", margin_mse_weight=1.0, hard_weight=0.0)
        >>> DistillationTrainer(student, args, train_dataset=groups, data_collator=GroupCollator.for_student(student))
    """

    terms = (Term("margin_mse", "margin_mse_weight", "MSE between the student's and the teacher's score margins "
                  "(positive minus each negative) over query groups (Margin-MSE)"),)
    requires = {"teacher_scores"}
    method = "margin_mse"
    switch = "margin_mse_weight"
    switch_help = (
        "Weight (>= 0) of Margin-MSE over query groups (Hofstätter et al. 2020): the student's score margins between "
        "each group's positive and its negatives match the teacher's precomputed ones; needs a group training set "
        "(ranking_group_size). 0: off."
    )

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        teacher, mask = teacher_group_scores(batch)
        return {"margin_mse": margin_mse(self.scores(student_out, batch), teacher, mask)}
