"""Prediction-level losses against hand-computed values on tiny tensors."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from hf_distill.losses.base import resolve_weights
from hf_distill.losses.logits import PredictionLoss, hard_loss, soft_loss


def _softmax(row: list[float], tau: float) -> list[float]:
    exps = [math.exp(v / tau) for v in row]
    return [e / sum(exps) for e in exps]


def _hand_kl(student: list[list[float]], teacher: list[list[float]], tau: float) -> float:
    """tau^2 * mean over rows of sum_c p_T log(p_T / p_S)."""
    total = 0.0
    for s_row, t_row in zip(student, teacher):
        p_s, p_t = _softmax(s_row, tau), _softmax(t_row, tau)
        total += sum(t * math.log(t / s) for s, t in zip(p_s, p_t))
    return tau**2 * total / len(student)


STUDENT = [[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]]
TEACHER = [[2.0, 0.0, 1.0], [0.5, 0.5, 2.0]]
TEACHER_2 = [[-1.0, 1.0, 0.0], [1.0, 2.0, 0.0]]


@pytest.mark.parametrize("tau", [1.0, 2.0, 5.0])
def test_soft_loss_is_scaled_kl(tau):
    got = soft_loss(torch.tensor(STUDENT), torch.tensor(TEACHER), tau)
    assert got.item() == pytest.approx(_hand_kl(STUDENT, TEACHER, tau), rel=1e-5)


def test_soft_loss_is_zero_when_student_matches_teacher():
    logits = torch.tensor(TEACHER)
    assert soft_loss(logits, logits.clone(), 3.0).item() == pytest.approx(0.0, abs=1e-7)


def test_soft_loss_regression_is_mse():
    student, teacher = torch.tensor([[0.2], [0.9]]), torch.tensor([[0.5], [0.4]])
    assert soft_loss(student, teacher, 4.0).item() == pytest.approx(((0.3**2) + (0.5**2)) / 2)


def test_soft_loss_rejects_mismatched_label_counts():
    with pytest.raises(ValueError, match="same number of labels"):
        soft_loss(torch.zeros(2, 3), torch.zeros(2, 2))


def test_hard_loss_classification_and_regression():
    labels = torch.tensor([1, 2])
    expected = -(math.log(_softmax(STUDENT[0], 1)[1]) + math.log(_softmax(STUDENT[1], 1)[2])) / 2
    assert hard_loss(torch.tensor(STUDENT), labels).item() == pytest.approx(expected, rel=1e-6)
    assert hard_loss(torch.tensor([[0.2], [0.9]]), torch.tensor([0.0, 1.0])).item() == pytest.approx((0.04 + 0.01) / 2)


def _out(logits):
    return SimpleNamespace(logits=torch.tensor(logits))


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_prediction_loss_terms_for_two_teachers(reduction):
    loss = PredictionLoss(temperature=2.0, reduction=reduction, num_teachers=2)
    terms = loss(_out(STUDENT), [_out(TEACHER), _out(TEACHER_2)], {"labels": torch.tensor([0, 2])})
    soft_0, soft_1 = _hand_kl(STUDENT, TEACHER, 2.0), _hand_kl(STUDENT, TEACHER_2, 2.0)
    assert terms["soft_0"].item() == pytest.approx(soft_0, rel=1e-5)
    assert terms["soft_1"].item() == pytest.approx(soft_1, rel=1e-5)
    assert set(terms) == {"hard", "soft_0", "soft_1"}
    # The per-teacher terms are the loss itself: their weighted sum is alpha * (sum or mean of the KLs).
    args = SimpleNamespace(prediction_weights=lambda annealing: (0.3, 0.7))
    weights = resolve_weights([loss], args)
    combined = soft_0 + soft_1 if reduction == "sum" else (soft_0 + soft_1) / 2
    total = sum(weights[name] * value.item() for name, value in terms.items())
    assert total == pytest.approx(0.3 * terms["hard"].item() + 0.7 * combined, rel=1e-5)


def test_prediction_loss_single_teacher_has_no_per_teacher_terms_and_no_hard_without_labels():
    terms = PredictionLoss()(_out(STUDENT), [_out(TEACHER)], {})
    assert set(terms) == {"soft"}


def test_hard_loss_averages_over_labelled_rows_only():
    """Augmented and transfer rows (class -100, score NaN) are left out of the hard loss."""
    logits = torch.tensor(STUDENT + [[0.3, 0.3, 0.3]])
    labels = torch.tensor([1, -100, 2])
    expected = -(math.log(_softmax(STUDENT[0], 1)[1]) + math.log(_softmax([0.3, 0.3, 0.3], 1)[2])) / 2
    assert hard_loss(logits, labels).item() == pytest.approx(expected, rel=1e-6)
    scores = torch.tensor([[0.2], [0.9], [0.4]])
    assert hard_loss(scores, torch.tensor([0.0, float("nan"), 1.0])).item() == pytest.approx((0.04 + 0.36) / 2)
    assert hard_loss(scores, torch.full((3,), float("nan"))) is None
    assert hard_loss(logits, torch.full((3,), -100)) is None


def test_mixed_batch_loss_is_the_hand_mixture():
    """alpha * soft over every row + (1 - alpha) * hard over the labelled rows; no hard term without one."""
    loss = PredictionLoss(temperature=2.0)
    args = SimpleNamespace(prediction_weights=lambda annealing: (0.4, 0.6))
    mixed = loss(_out(STUDENT), [_out(TEACHER)], {"labels": torch.tensor([-100, 2])})
    hand_hard = -math.log(_softmax(STUDENT[1], 1)[2])
    hand = 0.6 * _hand_kl(STUDENT, TEACHER, 2.0) + 0.4 * hand_hard
    weights = resolve_weights([loss], args)
    assert sum(weights[n] * v.item() for n, v in mixed.items()) == pytest.approx(hand, rel=1e-5)
    unlabelled = loss(_out(STUDENT), [_out(TEACHER)], {"labels": torch.tensor([-100, -100])})
    assert set(unlabelled) == {"soft"}


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_prediction_loss_rejects_bad_temperature(bad):
    with pytest.raises(ValueError, match=r"temperature=.* must be > 0"):
        PredictionLoss(temperature=bad)


def test_gradient_reaches_student_logits_only():
    student = torch.tensor(STUDENT, requires_grad=True)
    teacher = torch.tensor(TEACHER, requires_grad=True)
    soft_loss(student, teacher.detach(), 2.0).backward()
    assert student.grad is not None and student.grad.abs().sum() > 0
    assert teacher.grad is None
