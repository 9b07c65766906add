"""In-batch negatives for Siamese students (DPR, Karpukhin et al. 2020): each query's positive must
out-score every other passage of the batch, not only its own group's.

    in_batch = mean over groups g of CE(softmax_j(scale * cos(q_g, p_j)), j = positive of g)

over all P passages of the batch: the group's own hard negatives and the other groups' passages,
which cost nothing more since each text is embedded once. Passages of another group of the same
query (`group_query`) are left out: one of them may be a second positive of that query.
Cross-encoders score pairs, not embeddings: they have no in-batch negatives.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ..batch_keys import GROUP_MASK, GROUP_QUERY
from .base import LossComponent, Term
from .group_scores import SIMILARITY_SCALE, group_embeddings

__all__ = ["InBatchNegativesLoss", "in_batch_negatives"]


def in_batch_negatives(
    queries: torch.Tensor,
    passages: torch.Tensor,
    mask: torch.Tensor,
    group_query: torch.Tensor | None = None,
    scale: float = SIMILARITY_SCALE,
) -> torch.Tensor:
    """Cross-entropy of each query's positive (its group's first passage) against all passages of the batch.

    queries (B, d), passages (P, d) in group order, mask (B, n) with each group's positive at column 0,
    group_query (B,) ids (equal for groups of one query; None: all distinct).
    """
    mask = mask.bool()
    owner = mask.nonzero(as_tuple=True)[0]  # (P,) the group of each passage
    first = torch.cumsum(mask.sum(dim=1), dim=0) - mask.sum(dim=1)  # flat index of each group's first passage
    if not bool(mask[:, 0].all()):
        raise ValueError("every group needs its positive in column 0 of group_mask.")
    logits = scale * F.normalize(queries.float(), dim=-1) @ F.normalize(passages.float(), dim=-1).T  # (B, P)
    if group_query is not None:
        same_query = group_query.view(-1, 1) == group_query[owner].view(1, -1)
        other_group = torch.arange(mask.shape[0], device=owner.device).view(-1, 1) != owner.view(1, -1)
        logits = logits.masked_fill(same_query & other_group, float("-inf"))
    return F.cross_entropy(logits, first)


class InBatchNegativesLoss(LossComponent):
    """In-batch negatives for a Siamese student over query groups: term `in_batch`, weighted by `in_batch_weight`.

    Args:
        similarity_scale: the cosine is multiplied by this before the softmax (1 / temperature).
    """

    terms = (Term("in_batch", "in_batch_weight", "cross-entropy of each query's positive against every passage in "
                  "the batch (in-batch negatives, Siamese students)"),)
    method = "in_batch_negatives"
    switch = "in_batch_weight"
    switch_help = (
        "Weight (>= 0) of in-batch negatives for a Siamese student trained on query groups (DPR): each query's "
        "positive against every passage of the batch, scaled cosine, cross-entropy. 0: off."
    )

    def __init__(self, similarity_scale: float = SIMILARITY_SCALE):
        super().__init__()
        if similarity_scale <= 0:
            raise ValueError(f"similarity_scale={similarity_scale!r} must be > 0.")
        self.similarity_scale = similarity_scale

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config) -> "InBatchNegativesLoss":
        return cls()

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        if GROUP_MASK not in batch:
            raise ValueError("in_batch_weight > 0 needs query groups batched by hf_distill.group_collator.GroupCollator.")
        if getattr(student_out, "embeddings_a", None) is None:
            raise ValueError("in_batch_weight > 0 needs a Siamese student: a cross-encoder embeds no passage alone.")
        mask = batch[GROUP_MASK].bool()
        queries, passages = group_embeddings(student_out, mask)
        return {"in_batch": in_batch_negatives(queries, passages, mask, batch.get(GROUP_QUERY), self.similarity_scale)}
