"""Localised contrastive estimation (LCE; Gao, Dai & Callan, ECIR 2021): the gold signal of a query group.

    group_ce = mean over groups g of -log softmax(s_g)[0]

over the passages of each group (padding left out), with s the student's scores and passage 0 the
group's positive (`ranking_positives: gold`: a judged-relevant candidate; `teacher`: the teacher's
top one). The student must pick the positive among its hard negatives, the way a re-ranker is used.
Margin-MSE and listwise KL read only the teacher's scores; this term adds the gold labels a
pointwise student learns from (its hard loss), in a form that compares passages of one query.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..batch_keys import GROUP_MASK
from .base import Term
from .group_scores import GroupScoreLoss, masked_log_softmax

__all__ = ["GroupContrastiveLoss", "group_contrastive"]


def group_contrastive(student: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each group's passage 0 under the softmax over its masked passages, mean over groups.

    A group of one passage contributes 0 (its positive has all the mass); tied scores give log(n).
    """
    mask = mask.bool().to(student.device)
    if not bool(mask[:, 0].all()):
        raise ValueError("every group needs its positive in column 0 of group_mask.")
    return -masked_log_softmax(student.float(), mask)[:, 0].mean()


class GroupContrastiveLoss(GroupScoreLoss):
    """LCE over query groups: term `group_ce`, weighted by `group_ce_weight`.

    Reads a group batch (`GroupCollator`): the student's scores of each group's passages (cross-encoder
    logits, or a Siamese student's scaled cosine); no teacher output.

    Args: those of `GroupScoreLoss` (how a Siamese or multi-class student's passage score is read).
    """

    terms = (Term("group_ce", "group_ce_weight", "cross-entropy of each query group's positive under the softmax "
                  "over the group's passages (localised contrastive estimation)"),)
    method = "group_contrastive"
    switch = "group_ce_weight"
    switch_help = (
        "Weight (>= 0) of localised contrastive estimation over query groups (LCE): cross-entropy of each group's "
        "positive against the group's negatives, from the student's scores; needs a group training set "
        "(ranking_group_size). The gold signal beside Margin-MSE or listwise KL. 0: off."
    )

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        if GROUP_MASK not in batch:
            raise ValueError("group_ce_weight > 0 needs query groups batched by hf_distill.group_collator.GroupCollator.")
        return {"group_ce": group_contrastive(self.scores(student_out, batch), batch[GROUP_MASK])}
