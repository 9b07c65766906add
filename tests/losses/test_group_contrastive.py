"""Localised contrastive estimation over query groups against hand computations on tiny tensors."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from hf_distill.batch_keys import GROUP_MASK, GROUP_SCORES
from hf_distill.losses import GroupContrastiveLoss, group_contrastive
from hf_distill.losses.registry import requested_components
from hf_distill.training_args import DistillationArguments


def test_cross_entropy_of_the_positive_in_column_0():
    # scores [ln 3, 0, 0]: softmax of the positive 3 / 5
    got = group_contrastive(torch.tensor([[math.log(3), 0.0, 0.0]]), torch.ones(1, 3, dtype=torch.bool))
    assert got.item() == pytest.approx(-math.log(3 / 5), rel=1e-6)


def test_ties_cost_log_n_and_a_group_of_one_positive_costs_nothing():
    assert group_contrastive(torch.tensor([[2.0, 2.0, 2.0, 2.0]]), torch.ones(1, 4, dtype=torch.bool)).item() == \
        pytest.approx(math.log(4), rel=1e-6)
    student = torch.tensor([[-5.0]], requires_grad=True)
    got = group_contrastive(student, torch.ones(1, 1, dtype=torch.bool))
    got.backward()
    assert got.item() == pytest.approx(0.0, abs=1e-7) and student.grad.item() == pytest.approx(0.0, abs=1e-7)


def test_padding_is_left_out_and_groups_are_averaged_with_the_softmax_gradient():
    student = torch.tensor([[0.0, 0.0, 50.0], [math.log(3), 0.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    got = group_contrastive(student, mask)
    assert got.item() == pytest.approx((math.log(2) - math.log(3 / 5)) / 2, rel=1e-6)
    got.backward()
    # d/ds of -log p_0 = p - onehot(0), over 2 groups; padding gets no gradient
    expected = torch.tensor([[(0.5 - 1) / 2, 0.5 / 2, 0.0], [(0.6 - 1) / 2, 0.2 / 2, 0.2 / 2]])
    assert torch.allclose(student.grad, expected, atol=1e-6)


def test_a_group_without_its_positive_in_column_0_is_refused():
    with pytest.raises(ValueError, match="column 0"):
        group_contrastive(torch.zeros(1, 2), torch.tensor([[False, True]]))


def test_component_reads_cross_encoder_log_odds_and_no_teacher():
    # a 2-class cross-encoder: score = logit_1 - logit_0 -> groups [ln 3, 0, 0] and [7]
    logits = torch.tensor([[0.0, math.log(3)], [1.0, 1.0], [2.0, 2.0], [0.0, 7.0]])
    batch = {GROUP_SCORES: torch.zeros(2, 3), GROUP_MASK: torch.tensor([[True, True, True], [True, False, False]])}
    terms = GroupContrastiveLoss()(SimpleNamespace(logits=logits), [], batch)
    assert set(terms) == {"group_ce"} and terms["group_ce"].item() == pytest.approx(-math.log(3 / 5) / 2, rel=1e-6)
    with pytest.raises(ValueError, match="GroupCollator"):
        GroupContrastiveLoss()(SimpleNamespace(logits=logits), [], {})


def test_the_weight_argument_switches_it_on(tmp_path):
    args = DistillationArguments(output_dir=str(tmp_path), group_ce_weight=0.5, hard_weight=0.0, report_to="none")
    assert GroupContrastiveLoss in requested_components(args)
    assert GroupContrastiveLoss not in requested_components(DistillationArguments(output_dir=str(tmp_path), report_to="none"))
