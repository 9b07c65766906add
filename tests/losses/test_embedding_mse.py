"""EmbeddingMSELoss: the hand-computed MSE, the projection (auto, identity start, kept as the output layer), inputs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from hf_distill.losses.embedding_mse import EmbeddingMSELoss, embedding_mse
from tests.conftest import make_siamese


def outputs(a, b=None):
    return SimpleNamespace(embeddings_a=torch.tensor(a), embeddings_b=None if b is None else torch.tensor(b))


def test_mse_of_equal_widths_is_the_hand_value_over_both_sides():
    student = outputs([[1.0, 2.0]], [[0.0, -1.0]])
    teacher = outputs([[1.5, 2.0]], [[1.0, 1.0]])
    loss = EmbeddingMSELoss(2, 2)  # equal widths: no projection
    value = loss(student, [teacher], {})["embedding_mse"]
    # rows a then b: squared differences 0.25, 0, 1, 4 -> mean 1.3125
    assert value.item() == pytest.approx((0.25 + 0 + 1 + 4) / 4)
    assert isinstance(loss.projection, nn.Identity) and not list(loss.parameters())


def test_projection_when_widths_differ_is_applied_before_the_mse():
    loss = EmbeddingMSELoss(2, 3)
    with torch.no_grad():
        loss.projection.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        loss.projection.bias.copy_(torch.tensor([0.0, 0.0, -1.0]))
    student = outputs([[1.0, 2.0]])
    teacher = outputs([[1.0, 1.0, 1.0]])
    # W s + c = [1, 2, 2]; differences 0, 1, 1 -> mean 2/3
    assert loss(student, [teacher], {})["embedding_mse"].item() == pytest.approx(2 / 3)


def test_forced_projection_of_equal_widths_starts_as_the_identity_and_normalize_compares_directions():
    loss = EmbeddingMSELoss(2, 2, projection=True)
    assert isinstance(loss.projection, nn.Linear)
    student, teacher = outputs([[3.0, 4.0]]), outputs([[6.0, 8.0]])
    assert loss(student, [teacher], {})["embedding_mse"].item() == pytest.approx((9 + 16) / 2)
    assert EmbeddingMSELoss(2, 2, normalize=True)(student, [teacher], {})["embedding_mse"].item() == pytest.approx(0.0, abs=1e-7)
    assert embedding_mse(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 2.0]]), normalize=True).item() == pytest.approx(1.0)


def test_precomputed_columns_win_over_the_online_output_and_teacher_k_is_read():
    loss = EmbeddingMSELoss(1, 1, teacher=1)
    student = outputs([[1.0], [2.0]])
    batch = {"teacher_embeddings_1_a": torch.tensor([[0.0], [0.0]])}
    assert loss(student, [], batch)["embedding_mse"].item() == pytest.approx((1 + 4) / 2)
    online = [outputs([[9.0], [9.0]]), outputs([[1.0], [1.0]])]
    assert loss(student, online, {})["embedding_mse"].item() == pytest.approx(0.5)


def test_bad_inputs_say_what_is_missing():
    loss = EmbeddingMSELoss(2, 3)
    with pytest.raises(ValueError, match="needs the student's sentence embeddings.*SiameseModel"):
        loss(SimpleNamespace(logits=torch.zeros(1, 2)), [], {})
    with pytest.raises(ValueError, match="reads teacher 0's sentence embeddings, but the batch has no teacher_embeddings_0_a"):
        loss(outputs([[1.0, 2.0]]), [SimpleNamespace(logits=torch.zeros(1, 1))], {})
    with pytest.raises(ValueError, match="built for student width 2 and teacher width 3, but the embeddings are 2 and 4 wide"):
        loss(outputs([[1.0, 2.0]]), [outputs([[1.0, 2.0, 3.0, 4.0]])], {})
    with pytest.raises(ValueError, match="projection=False needs equal hidden sizes"):
        EmbeddingMSELoss(2, 3, projection=False)
    with pytest.raises(ValueError, match="keep_projection=True needs a projection"):
        EmbeddingMSELoss(2, 2, projection=False, keep_projection=True)


def test_keep_projection_makes_it_the_students_output_layer(tiny_tokenizer):
    student = make_siamese(tiny_tokenizer, head="cosine", num_labels=1)
    loss = EmbeddingMSELoss(32, 48, keep_projection=True)
    layer = loss.projection
    loss.prepare_student(student)
    assert student.output_projection is layer and student.config.output_dim == 48 and student.embedding_dim == 48
    assert not list(loss.parameters())  # the layer is the student's now: trained, checkpointed and saved with it
    assert student.encode(["a man plays"]).shape == (1, 48)
    loss.prepare_student(student)  # a second call (or a student saved with the layer) keeps the same layer
    assert student.output_projection is layer
    assert "the student's output layer" in loss.declared_terms()[0].description


def test_a_student_with_an_output_layer_of_its_own_gets_a_projection_from_its_real_width(tiny_tokenizer):
    student = make_siamese(tiny_tokenizer, head="cosine", num_labels=1)
    student.add_output_layer(nn.Linear(32, 48))
    plain = EmbeddingMSELoss(32, 64)  # built from the backbone's width, as the registry does
    plain.prepare_student(student)
    assert plain.student_dim == 48 and plain.projection.weight.shape == (64, 48)
    kept = EmbeddingMSELoss(32, 48, keep_projection=True)  # a student saved with its kept layer: trained further
    kept.prepare_student(student)
    assert isinstance(kept.projection, nn.Identity) and kept.student_dim == 48 and student.output_projection.out_features == 48
