"""Listwise KL over query groups against hand computations on tiny tensors."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from hf_distill.batch_keys import GROUP_MASK, GROUP_SCORES
from hf_distill.losses import ListwiseKLLoss, listwise_kl

TWO = torch.ones(1, 2, dtype=torch.bool)


def _kl(p: list[float], q: list[float]) -> float:
    return sum(a * math.log(a / b) for a, b in zip(p, q))


def test_kl_of_the_teachers_softmax_from_the_students():
    # teacher [ln 3, 0] -> (3/4, 1/4); student [0, 0] -> (1/2, 1/2)
    got = listwise_kl(torch.tensor([[0.0, 0.0]]), torch.tensor([[math.log(3), 0.0]]), TWO)
    assert got.item() == pytest.approx(_kl([0.75, 0.25], [0.5, 0.5]), rel=1e-6)


def test_temperature_softens_both_sides_and_scales_by_tau_squared():
    tau = 2.0
    p_teacher = [math.sqrt(3) / (math.sqrt(3) + 1), 1 / (math.sqrt(3) + 1)]  # softmax([ln 3 / 2, 0])
    got = listwise_kl(torch.tensor([[0.0, 0.0]]), torch.tensor([[math.log(3), 0.0]]), TWO, temperature=tau)
    assert got.item() == pytest.approx(tau**2 * _kl(p_teacher, [0.5, 0.5]), rel=1e-6)


def test_tied_teacher_scores_are_a_uniform_target():
    got = listwise_kl(torch.tensor([[math.log(3), 0.0]]), torch.tensor([[1.0, 1.0]]), TWO)
    assert got.item() == pytest.approx(_kl([0.5, 0.5], [0.75, 0.25]), rel=1e-6)
    assert listwise_kl(torch.tensor([[0.0, 0.0]]), torch.tensor([[4.0, 4.0]]), TWO).item() == pytest.approx(0.0, abs=1e-7)


def test_a_group_of_one_positive_contributes_nothing():
    student = torch.tensor([[3.0]], requires_grad=True)
    got = listwise_kl(student, torch.tensor([[-2.0]]), torch.ones(1, 1, dtype=torch.bool))
    got.backward()
    assert got.item() == pytest.approx(0.0, abs=1e-7) and student.grad.item() == pytest.approx(0.0, abs=1e-7)


def test_padding_is_left_out_without_nan_gradients_and_groups_are_averaged():
    student = torch.tensor([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]], requires_grad=True)
    teacher = torch.tensor([[math.log(3), 0.0, 1e4], [1.0, 2.0, 3.0]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    got = listwise_kl(student, teacher, mask)
    assert got.item() == pytest.approx((_kl([0.75, 0.25], [0.5, 0.5]) + 0.0) / 2, rel=1e-6)
    got.backward()
    assert torch.isfinite(student.grad).all() and student.grad[0, 2].item() == 0.0
    # d KL / d s = (p_student - p_teacher) / groups for tau = 1
    assert student.grad[0, :2].tolist() == pytest.approx([(0.5 - 0.75) / 2, (0.5 - 0.25) / 2], rel=1e-5)


def test_order_of_passages_within_a_group_does_not_matter():
    student, teacher = torch.tensor([[0.3, -1.0, 2.0, 0.5]]), torch.tensor([[1.0, 2.0, -1.0, 0.0]])
    order = torch.tensor([2, 0, 3, 1])
    mask = torch.ones(1, 4, dtype=torch.bool)
    assert listwise_kl(student, teacher, mask, 3.0).item() == pytest.approx(
        listwise_kl(student[:, order], teacher[:, order], mask, 3.0).item(), rel=1e-6)


def test_component_uses_its_temperature_and_refuses_a_bad_one():
    batch = {GROUP_SCORES: torch.tensor([[math.log(3), 0.0]]), GROUP_MASK: TWO}
    terms = ListwiseKLLoss(temperature=1.0)(SimpleNamespace(logits=torch.zeros(2, 1)), [], batch)
    assert terms["listwise_kl"].item() == pytest.approx(_kl([0.75, 0.25], [0.5, 0.5]), rel=1e-6)
    assert "τ = 2" in ListwiseKLLoss(temperature=2.0).declared_terms()[0].description
    with pytest.raises(ValueError, match="temperature=0"):
        ListwiseKLLoss(temperature=0)
