"""CrossEncoderModel: shapes, head, per-layer internals, and students built from a teacher."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from hf_distill import CrossEncoderModel, CrossEncoderOutput
from hf_distill.modeling import select_layers
from hf_distill.modeling.modeling_common import backbone_layers

from ..conftest import PAIRS, make_cross_encoder

HIDDEN = 32
HEADS = 2


# ---------------------------------------------------------------------------- outputs
def test_forward_shapes_and_head(tiny_cross_encoder, cross_batch):
    out = tiny_cross_encoder(**cross_batch)
    batch, length = cross_batch["input_ids"].shape
    assert isinstance(out, CrossEncoderOutput)
    assert out.loss is None and out.hidden_states is None and out.attentions is None and out.query_states is None
    assert out.logits.shape == (batch, 2)
    assert out.pooled.shape == (batch, HIDDEN)
    # The head reads [CLS] of the last layer: dense + tanh, then the output layer.
    cls_state = tiny_cross_encoder(**cross_batch, output_hidden_states=True).hidden_states[-1][:, 0]
    head = tiny_cross_encoder.head
    pooled = torch.tanh(cls_state @ head.dense.weight.T + head.dense.bias)
    torch.testing.assert_close(out.pooled, pooled, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(out.logits, pooled @ head.out_proj.weight.T + head.out_proj.bias, atol=1e-6, rtol=1e-6)


def test_reads_the_pair_jointly(tiny_cross_encoder, tiny_tokenizer):
    """The score of (a, b) depends on b: the backbone sees both texts at once."""
    a, b = PAIRS[0]
    one = tiny_cross_encoder(**tiny_tokenizer([a], [b], return_tensors="pt")).logits
    other = tiny_cross_encoder(**tiny_tokenizer([a], [PAIRS[1][1]], return_tensors="pt")).logits
    assert not torch.allclose(one, other)


def test_padding_does_not_change_scores(tiny_cross_encoder, tiny_tokenizer, cross_batch):
    batched = tiny_cross_encoder(**cross_batch).logits
    assert (cross_batch["attention_mask"] == 0).any()
    for row, (a, b) in enumerate(PAIRS):
        alone = tiny_cross_encoder(**tiny_tokenizer([a], [b], return_tensors="pt")).logits
        torch.testing.assert_close(batched[row], alone[0], atol=1e-5, rtol=1e-5)


def test_classification_loss(tiny_cross_encoder, cross_batch):
    labels = torch.tensor([1, 0, 1])
    out = tiny_cross_encoder(**cross_batch, labels=labels)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, labels), atol=1e-6, rtol=1e-6)


def test_regression_with_one_label(tiny_tokenizer, cross_batch):
    model = make_cross_encoder(tiny_tokenizer, num_labels=1)
    assert model.config.problem_type == "regression"
    labels = torch.tensor([0.2, 0.9, 0.4])
    out = model(**cross_batch, labels=labels)
    assert out.logits.shape == (3, 1)
    torch.testing.assert_close(out.loss, F.mse_loss(out.logits.squeeze(-1), labels), atol=1e-6, rtol=1e-6)
    scores = model.predict(PAIRS, batch_size=2)
    assert scores.shape == (3,)
    torch.testing.assert_close(scores, out.logits.squeeze(-1), atol=1e-5, rtol=1e-5)


def test_predict_matches_forward_in_input_order(tiny_cross_encoder, cross_batch):
    expected = tiny_cross_encoder(**cross_batch).logits
    for batch_size in (1, 2, 10):
        scores = tiny_cross_encoder.predict(PAIRS, batch_size=batch_size)
        torch.testing.assert_close(scores, expected, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------- internals
def _expected_attention(queries, keys, attention_mask):
    scores = queries @ keys.transpose(-1, -2) / math.sqrt(queries.size(-1))
    additive = (1.0 - attention_mask[:, None, None, :].to(scores.dtype)) * torch.finfo(scores.dtype).min
    return torch.softmax(scores + additive, dim=-1)


def test_hidden_states_attentions_queries_keys_per_layer(tiny_cross_encoder, cross_batch):
    out = tiny_cross_encoder(**cross_batch, output_hidden_states=True, output_attentions=True, output_query_key=True)
    mask = cross_batch["attention_mask"]
    batch, length = mask.shape
    layers = tiny_cross_encoder.config.encoder.num_hidden_layers
    assert len(out.hidden_states) == layers + 1
    assert all(h.shape == (batch, length, HIDDEN) for h in out.hidden_states)
    assert len(out.attentions) == len(out.query_states) == len(out.key_states) == layers
    for attention, queries, keys in zip(out.attentions, out.query_states, out.key_states):
        assert attention.shape == (batch, HEADS, length, length)
        assert queries.shape == keys.shape == (batch, HEADS, length, HIDDEN // HEADS)
        torch.testing.assert_close(attention.sum(-1), torch.ones(batch, HEADS, length), atol=1e-5, rtol=0)
        assert attention.masked_select(mask[:, None, None, :] == 0).abs().max() < 1e-6
        torch.testing.assert_close(attention, _expected_attention(queries, keys, mask), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(out.attentions[0], out.attentions[1])


# ---------------------------------------------------------------------------- from_teacher
@pytest.mark.parametrize(
    ("depth", "k", "strategy", "expected"),
    [
        (6, 2, "uniform", [2, 5]),
        (6, 3, "uniform", [1, 3, 5]),
        (6, 6, "uniform", [0, 1, 2, 3, 4, 5]),
        (6, 1, "uniform", [5]),
        (12, 4, "uniform", [2, 5, 8, 11]),
        (6, 2, "first", [0, 1]),
        (6, 2, [4, 1], [1, 4]),
    ],
)
def test_select_layers(depth, k, strategy, expected):
    assert select_layers(depth, k, strategy) == expected


def _layer_state(model, index):
    return {k: v.clone() for k, v in backbone_layers(model.backbone)[index].state_dict().items()}


def _assert_same_params(left: dict, right: dict):
    assert left.keys() == right.keys()
    for name in left:
        assert torch.equal(left[name], right[name]), name


def test_from_teacher_first_reproduces_teacher_hidden_states(tiny_teacher, cross_batch):
    teacher_out = tiny_teacher(**cross_batch, output_hidden_states=True)
    student = CrossEncoderModel.from_teacher(tiny_teacher, num_layers=2, strategy="first")
    student_out = student(**cross_batch, output_hidden_states=True)
    assert student.config.encoder.num_hidden_layers == 2 and len(backbone_layers(student.backbone)) == 2
    assert len(student_out.hidden_states) == 3
    for student_state, teacher_state in zip(student_out.hidden_states, teacher_out.hidden_states[:3]):
        assert torch.equal(student_state, teacher_state)
    # The head is copied: applied to the same [CLS] state it gives the same logits.
    expected_logits, _ = tiny_teacher.head(teacher_out.hidden_states[2][:, 0])
    torch.testing.assert_close(student_out.logits, expected_logits, atol=0, rtol=0)
    assert not torch.allclose(student_out.logits, teacher_out.logits)
    assert student.tokenizer is tiny_teacher.tokenizer


@pytest.mark.parametrize(
    ("k", "strategy", "chosen"), [(2, "uniform", [2, 5]), (3, "uniform", [1, 3, 5]), (2, [0, 4], [0, 4])]
)
def test_from_teacher_copies_the_chosen_layers(tiny_teacher, cross_batch, k, strategy, chosen):
    student = CrossEncoderModel.from_teacher(tiny_teacher, num_layers=k, strategy=strategy)
    assert len(backbone_layers(student.backbone)) == k
    assert student.config.encoder.num_hidden_layers == k
    for new_index, old_index in enumerate(chosen):
        _assert_same_params(_layer_state(student, new_index), _layer_state(tiny_teacher, old_index))
    # Layers that were not chosen are really gone (their weights differ from the kept ones).
    skipped = next(i for i in range(6) if i not in chosen)
    query = "attention.self.query.weight"
    assert not torch.equal(_layer_state(student, 0)[query], _layer_state(tiny_teacher, skipped)[query])
    _assert_same_params(student.backbone.embeddings.state_dict(), tiny_teacher.backbone.embeddings.state_dict())
    _assert_same_params(student.head.state_dict(), tiny_teacher.head.state_dict())
    # The student runs, and returns one attention map per kept layer.
    out = student(**cross_batch, output_attentions=True, output_hidden_states=True)
    assert len(out.attentions) == k and len(out.hidden_states) == k + 1


def test_from_teacher_leaves_the_teacher_alone(tiny_teacher, cross_batch):
    before = tiny_teacher(**cross_batch).logits
    student = CrossEncoderModel.from_teacher(tiny_teacher, num_layers=2, strategy="uniform")
    with torch.no_grad():
        for parameter in student.parameters():
            parameter.add_(1.0)
    assert tiny_teacher.config.encoder.num_hidden_layers == 6
    assert len(backbone_layers(tiny_teacher.backbone)) == 6
    torch.testing.assert_close(tiny_teacher(**cross_batch).logits, before, atol=0, rtol=0)


def test_from_teacher_student_trains(tiny_teacher, cross_batch):
    """Every kept layer gets a nonzero gradient, and each of 5 gradient steps lowers the loss on the batch."""
    student = CrossEncoderModel.from_teacher(tiny_teacher, num_layers=2, strategy="uniform").train()
    labels = torch.tensor([0, 1, 0])
    optimizer = torch.optim.SGD(student.parameters(), lr=0.5)
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        out = student(**cross_batch, labels=labels)
        out.loss.backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in backbone_layers(student.backbone).parameters())
        optimizer.step()
        losses.append(out.loss.item())
    assert all(later < earlier for earlier, later in itertools.pairwise(losses)), losses
