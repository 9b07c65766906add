"""Margin-MSE over query groups against hand computations on tiny tensors."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from hf_distill.batch_keys import GROUP_MASK, GROUP_SCORES
from hf_distill.losses import MarginMSELoss, margin_mse

ALL = torch.ones(1, 3, dtype=torch.bool)


def test_margins_of_the_positive_over_each_negative():
    # student margins 3-1=2, 3-2=1; teacher margins 2-2=0, 2-0=2 -> ((2-0)^2 + (1-2)^2) / 2
    got = margin_mse(torch.tensor([[3.0, 1.0, 2.0]]), torch.tensor([[2.0, 2.0, 0.0]]), ALL)
    assert got.item() == pytest.approx(2.5)


def test_teacher_ties_ask_for_zero_margins():
    # the teacher scores all three alike: the student's margins 1 and 0 should be 0 -> (1 + 0) / 2
    got = margin_mse(torch.tensor([[1.0, 0.0, 1.0]]), torch.tensor([[4.0, 4.0, 4.0]]), ALL)
    assert got.item() == pytest.approx(0.5)
    assert margin_mse(torch.tensor([[7.0, 7.0]]), torch.tensor([[1.0, 1.0]]), torch.ones(1, 2, dtype=torch.bool)).item() == 0.0


def test_only_differences_count_offset_and_student_scale_of_scores_do_not():
    teacher = torch.tensor([[5.0, 1.0, -2.0]])
    assert margin_mse(teacher + 100.0, teacher, ALL).item() == pytest.approx(0.0)


def test_a_group_of_one_positive_has_no_margin():
    student = torch.tensor([[5.0]], requires_grad=True)
    got = margin_mse(student, torch.tensor([[1.0]]), torch.ones(1, 1, dtype=torch.bool))
    got.backward()
    assert got.item() == 0.0 and student.grad is not None and student.grad.item() == 0.0


def test_padding_is_left_out_and_margins_average_over_all_groups():
    # group 0 as in the first test (squares 4 and 1); group 1 has 2 passages + padding: margin 2 vs 1 (square 1)
    student = torch.tensor([[3.0, 1.0, 2.0], [2.0, 0.0, 0.0]], requires_grad=True)
    teacher = torch.tensor([[2.0, 2.0, 0.0], [1.0, 0.0, 99.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    got = margin_mse(student, teacher, mask)
    assert got.item() == pytest.approx((4 + 1 + 1) / 3)
    got.backward()
    # d/ds of (1/3) * sum (m_s - m_t)^2: the positive gets 2/3 * sum of its residuals, each negative -2/3 * its own
    expected = torch.tensor([[2 / 3 * (2 - 1), -2 / 3 * 2, -2 / 3 * -1], [2 / 3 * 1, -2 / 3 * 1, 0.0]])
    assert torch.allclose(student.grad, expected)


def test_component_reads_teacher_scores_and_cross_encoder_log_odds():
    # a 2-class cross-encoder: score = logit_1 - logit_0; groups of 3 and 1 passages (4 pairs)
    logits = torch.tensor([[0.0, 3.0], [0.0, 1.0], [1.0, 3.0], [0.0, 5.0]])
    batch = {GROUP_SCORES: torch.tensor([[2.0, 2.0, 0.0], [1.0, 0.0, 0.0]]),
             GROUP_MASK: torch.tensor([[True, True, True], [True, False, False]])}
    terms = MarginMSELoss()(SimpleNamespace(logits=logits), [], batch)
    assert set(terms) == {"margin_mse"} and terms["margin_mse"].item() == pytest.approx(2.5)


def test_component_without_group_batch_says_what_is_missing():
    with pytest.raises(ValueError, match="teacher_scores"):
        MarginMSELoss()(SimpleNamespace(logits=torch.zeros(2, 2)), [], {"labels": torch.zeros(2)})
