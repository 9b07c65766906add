"""The student's scores of a batch of query groups, laid out like the teacher's: (groups, passages).

A group batch (`hf_distill.group_collator`) carries the teacher's scores `teacher_scores` (B, n),
the positive first, and `group_mask` (B, n), True where a group has a passage. The student ran once
over the whole batch (the trainer's forward on `student_view(batch)`):

- a cross-encoder scored the P = mask.sum() (query, passage) pairs, group after group: its logits
  become one score per pair with `passage_scores` (the single output; for two classes the log-odds
  of the positive class, which orders like its probability, as `RankingEvaluator` reads them);
- a Siamese student embedded the B queries, then the P passages (one stack in `input_ids_a`):
  a passage's score is `similarity_scale` x the cosine of its embedding and its query's.

The scores are then scattered into (B, n), zeros where the mask is False.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from ..batch_keys import GROUP_MASK, GROUP_SCORES
from .base import LossComponent

__all__ = [
    "SIMILARITY_SCALE",
    "GroupScoreLoss",
    "group_embeddings",
    "masked_log_softmax",
    "passage_scores",
    "scatter_groups",
    "student_group_scores",
    "teacher_group_scores",
]

SIMILARITY_SCALE = 20.0  # cosine x 20 spans [-20, 20], the range of cross-encoder log-odds (sentence-transformers' MNRL scale)


def passage_scores(logits: torch.Tensor, positive_label: int = 1) -> torch.Tensor:
    """One ranking score per row of logits (..., C): the output itself for C = 1, the log-odds of
    `positive_label` for C = 2, its log-softmax for more classes."""
    classes = logits.size(-1)
    if classes == 1:
        return logits[..., 0]
    if not 0 <= positive_label < classes:
        raise ValueError(f"positive_label={positive_label} is not a class of a {classes}-class head.")
    if classes == 2:
        return logits[..., positive_label] - logits[..., 1 - positive_label]
    return F.log_softmax(logits, dim=-1)[..., positive_label]


def masked_log_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log-softmax over each row's masked entries; 0 (not -inf) elsewhere, so no NaN reaches the gradient."""
    log_p = F.log_softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return log_p.masked_fill(~mask, 0.0)


def scatter_groups(flat: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Values of the P passages in group order (P,) as (B, n) under `mask` (zeros elsewhere), differentiably."""
    if flat.shape[0] != int(mask.sum()):
        raise ValueError(f"{flat.shape[0]} passage scores for a group mask holding {int(mask.sum())} passages.")
    out = flat.new_zeros(mask.shape)
    return out.masked_scatter(mask, flat)


def group_embeddings(student_out, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(queries (B, d), passages (P, d)) of a Siamese student that embedded a group batch's stack."""
    embeddings = getattr(student_out, "embeddings_a", None)
    if embeddings is None or getattr(student_out, "embeddings_b", None) is not None:
        raise ValueError(
            "the student output holds no stacked group embeddings: a Siamese student needs a group batch from "
            "GroupCollator(siamese=True) (queries, then passages, in input_ids_a)."
        )
    groups, passages = mask.shape[0], int(mask.sum())
    if embeddings.shape[0] != groups + passages:
        raise ValueError(
            f"the student embedded {embeddings.shape[0]} texts, but the batch has {groups} queries and {passages} passages."
        )
    return embeddings[:groups].float(), embeddings[groups:].float()


def student_group_scores(
    student_out, batch: Mapping[str, Any], similarity_scale: float = SIMILARITY_SCALE, positive_label: int = 1
) -> torch.Tensor:
    """The student's score of every passage of every group, (B, n), zeros where `group_mask` is False."""
    mask = batch[GROUP_MASK].bool()
    logits = getattr(student_out, "logits", None)
    if logits is not None and getattr(student_out, "embeddings_a", None) is None:
        return scatter_groups(passage_scores(logits.float(), positive_label), mask)
    queries, passages = group_embeddings(student_out, mask)
    owner = mask.nonzero(as_tuple=True)[0]  # the group of each passage
    cosine = F.cosine_similarity(queries[owner], passages, dim=-1)
    return scatter_groups(similarity_scale * cosine, mask)


def teacher_group_scores(batch: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """(teacher scores (B, n) as float, group mask (B, n) as bool) of a group batch, or a clear error."""
    if GROUP_SCORES not in batch or GROUP_MASK not in batch:
        raise ValueError(
            f"the batch has no {GROUP_SCORES!r} / {GROUP_MASK!r}: group losses need query groups "
            "(hf_distill.ranking_groups.query_groups) batched by hf_distill.group_collator.GroupCollator."
        )
    return batch[GROUP_SCORES].float(), batch[GROUP_MASK].bool()


class GroupScoreLoss(LossComponent):
    """A loss over query groups that reads the student's score of each passage (`scores`): the settings of
    that score, shared by Margin-MSE, listwise KL and LCE.

    Args:
        similarity_scale: a Siamese student's score is this times the cosine (cross-encoders ignore it).
        positive_label: the class whose log-odds score a passage, for a cross-encoder with two or more classes.
    """

    def __init__(self, similarity_scale: float = SIMILARITY_SCALE, positive_label: int = 1):
        super().__init__()
        if similarity_scale <= 0:
            raise ValueError(f"similarity_scale={similarity_scale!r} must be > 0.")
        self.similarity_scale = similarity_scale
        self.positive_label = positive_label

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config) -> "GroupScoreLoss":
        return cls()

    def scores(self, student_out, batch: Mapping[str, Any]) -> torch.Tensor:
        """The student's (B, n) passage scores of the group batch (`student_group_scores`)."""
        return student_group_scores(student_out, batch, self.similarity_scale, self.positive_label)
