"""In-batch negatives for Siamese students over query groups, by hand on 2-d embeddings."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from hf_distill.batch_keys import GROUP_MASK, GROUP_QUERY
from hf_distill.losses import InBatchNegativesLoss, in_batch_negatives

QUERIES = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
PASSAGES = torch.tensor([[3.0, 0.0], [0.0, 1.0], [0.0, 5.0]])  # group 0: passages 0 (positive) and 1; group 1: passage 2
MASK = torch.tensor([[True, True], [True, False]])


def test_each_positive_against_every_passage_of_the_batch():
    # cosines: q0 -> [1, 0, 0] (target 0), q1 -> [0, 1, 1] (target 2)
    expected = (-math.log(math.e / (math.e + 2)) - math.log(math.e / (1 + 2 * math.e))) / 2
    assert in_batch_negatives(QUERIES, PASSAGES, MASK, scale=1.0).item() == pytest.approx(expected, rel=1e-6)


def test_groups_of_the_same_query_do_not_count_as_negatives():
    # both groups belong to one query: q0 sees only its group's passages [1, 0], q1 only its own [1]
    got = in_batch_negatives(QUERIES, PASSAGES, MASK, torch.tensor([7, 7]), scale=1.0)
    assert got.item() == pytest.approx(-math.log(math.e / (math.e + 1)) / 2, rel=1e-6)


def test_component_reads_the_stacked_embeddings_and_refuses_cross_encoders():
    out = SimpleNamespace(logits=None, embeddings_a=torch.cat([QUERIES, PASSAGES]), embeddings_b=None)
    batch = {GROUP_MASK: MASK, GROUP_QUERY: torch.tensor([0, 1])}
    got = InBatchNegativesLoss(similarity_scale=1.0)(out, [], batch)["in_batch"]
    assert got.item() == pytest.approx(in_batch_negatives(QUERIES, PASSAGES, MASK, scale=1.0).item())
    with pytest.raises(ValueError, match="Siamese student"):
        InBatchNegativesLoss()(SimpleNamespace(logits=torch.zeros(3, 2)), [], batch)
