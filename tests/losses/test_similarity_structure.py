"""SimilarityStructureLoss: the hand-computed MSE and row-wise KL of in-batch cosine matrices, widths free."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from hf_distill.losses.similarity_structure import SimilarityStructureLoss, cosine_matrix, similarity_structure_loss

# Student rows: e1, e2, (1, 1)/sqrt 2 -> cosines c12 = 0, c13 = c23 = 1/sqrt 2.
STUDENT = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
# Teacher rows (another width): c12 = 1 (the same direction), c13 = c23 = 0 (orthogonal).
TEACHER = torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])


def test_cosine_matrix_by_hand():
    r = 1 / math.sqrt(2)
    assert torch.allclose(cosine_matrix(STUDENT), torch.tensor([[1.0, 0.0, r], [0.0, 1.0, r], [r, r, 1.0]]), atol=1e-6)


def test_mse_over_the_off_diagonal_entries_by_hand():
    r = 1 / math.sqrt(2)
    # off-diagonal differences: (1,2), (2,1): 0 - 1; the four others: r - 0
    expected = (2 * 1.0 + 4 * r**2) / 6
    assert similarity_structure_loss(STUDENT, TEACHER, "mse").item() == pytest.approx(expected, rel=1e-6)


def _kl(p, q):
    return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q))


def _softmax(values, tau):
    exps = [math.exp(v / tau) for v in values]
    return [e / sum(exps) for e in exps]


@pytest.mark.parametrize("tau", [0.5, 2.0])
def test_row_wise_kl_at_a_temperature_by_hand(tau):
    r = 1 / math.sqrt(2)
    student_rows = [[0.0, r], [0.0, r], [r, r]]  # each row's cosines to the other two
    teacher_rows = [[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]
    expected = sum(_kl(_softmax(t, tau), _softmax(s, tau)) for s, t in zip(student_rows, teacher_rows)) / 3
    assert similarity_structure_loss(STUDENT, TEACHER, "kl", tau).item() == pytest.approx(expected, rel=1e-5)


def test_the_same_structure_costs_nothing_whatever_the_scale_and_width():
    rotated = torch.cat([STUDENT * 5.0, torch.zeros(3, 4)], dim=1)  # same angles, wider, longer
    for kind in ("mse", "kl"):
        assert similarity_structure_loss(STUDENT, rotated, kind).item() == pytest.approx(0.0, abs=1e-6)


def test_component_reads_both_sides_and_skips_a_single_sentence():
    loss = SimilarityStructureLoss(kind="mse")
    student = SimpleNamespace(embeddings_a=STUDENT[:2], embeddings_b=STUDENT[2:])
    teacher = SimpleNamespace(embeddings_a=TEACHER[:2], embeddings_b=TEACHER[2:])
    value = loss(student, [teacher], {})["similarity_structure"]
    assert value.item() == pytest.approx(similarity_structure_loss(STUDENT, TEACHER, "mse").item())
    single = SimpleNamespace(embeddings_a=STUDENT[:1], embeddings_b=None)
    assert loss(single, [SimpleNamespace(embeddings_a=TEACHER[:1], embeddings_b=None)], {}) == {}


def test_gradient_reaches_the_student_only_and_bad_settings_are_refused():
    student = STUDENT.clone().requires_grad_(True)
    similarity_structure_loss(student, TEACHER, "kl", 0.1).backward()
    assert student.grad is not None and torch.isfinite(student.grad).all()
    with pytest.raises(ValueError, match="kind='l2' is not valid; choose one of 'mse', 'kl'"):
        SimilarityStructureLoss(kind="l2")
    with pytest.raises(ValueError, match="temperature=0 must be > 0"):
        SimilarityStructureLoss(temperature=0)
