"""Embedding, hidden-state and attention losses against hand-computed values on tiny tensors."""

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from hf_distill.losses.layers import (
    AttentionLoss,
    EmbeddingLoss,
    HiddenStateLoss,
    attention_scores,
    make_projection,
    masked_mse,
    pair_mask,
    reduce_heads,
)


def t(values):
    return torch.tensor(values, dtype=torch.float32)


def hidden_out(*layers):
    """An output whose hidden_states are (1, T, d) tensors given as nested lists of shape (T, d)."""
    return SimpleNamespace(hidden_states=tuple(t(layer).unsqueeze(0) for layer in layers))


def qk_out(queries, keys):
    """An output with one layer per entry; each entry (H, T, d_head) nested lists, batch of one."""
    return SimpleNamespace(
        query_states=tuple(t(q).unsqueeze(0) for q in queries),
        key_states=tuple(t(k).unsqueeze(0) for k in keys),
        attentions=None,
    )


# ---------------------------------------------------------------------------- masked_mse
def test_masked_mse_hand_values_ignore_padding_even_nan():
    student = t([[[1, 2], [3, 4], [9, 9]], [[1, 1], [5, 5], [0, 0]]])
    teacher = t([[[0, 2], [3, 1], [0, 0]], [[3, 3], [0, 0], [0, 0]]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    # real tokens: (1,0)->1, (0,3)->9 for the first, (-2,-2)->8 for the second: 18 over 3 tokens x 2 features
    assert masked_mse(student, teacher, mask).item() == pytest.approx(3.0)
    student_nan = student.clone()
    student_nan[0, 2] = float("nan")
    student_nan[1, 1] = float("inf")
    assert masked_mse(student_nan, teacher, mask).item() == pytest.approx(3.0)
    # unmasked: every entry counts
    expected_all = ((student - teacher) ** 2).mean().item()
    assert masked_mse(student, teacher).item() == pytest.approx(expected_all)
    assert masked_mse(student, teacher, torch.ones(2, 3)).item() == pytest.approx(expected_all)


def test_masked_mse_empty_mask_is_zero_and_shape_mismatch_is_an_error():
    x = torch.randn(1, 3, 2)
    assert masked_mse(x, x + 1, torch.zeros(1, 3)).item() == 0.0
    with pytest.raises(ValueError, match="differ"):
        masked_mse(torch.zeros(1, 3, 2), torch.zeros(1, 3, 4))
    with pytest.raises(ValueError, match="same tokenizer"):
        masked_mse(torch.zeros(1, 3, 2), torch.zeros(1, 3, 2), torch.ones(1, 4))


def test_pair_mask_and_scores_and_head_reduction():
    assert pair_mask(torch.tensor([[1, 1, 0]])).tolist() == [[[[1, 1, 0], [1, 1, 0], [0, 0, 0]]]]
    q = t([[[1, 1, 1, 1], [0, 2, 0, 0]]]).unsqueeze(0)  # (1, 1, 2, 4)
    k = t([[[1, 1, 1, 1], [1, 0, 0, 3]]]).unsqueeze(0)
    # q.k / sqrt(4)
    assert attention_scores(q, k)[0, 0].tolist() == [[2.0, 2.0], [1.0, 0.0]]
    heads = t([1, 3, 2, 2]).reshape(1, 4, 1, 1)
    assert reduce_heads(heads, 2).flatten().tolist() == [2.0, 2.0]
    assert reduce_heads(heads, 1).flatten().tolist() == [2.0]
    with pytest.raises(ValueError, match="must divide"):
        reduce_heads(heads, 3)


def test_projection_policy():
    same = make_projection(3, 3)
    assert isinstance(same, torch.nn.Linear) and torch.equal(same.weight, torch.eye(3)) and same.bias.abs().sum() == 0
    assert isinstance(make_projection(3, 3, projection=False), torch.nn.Identity)
    assert make_projection(2, 5).weight.shape == (5, 2)
    with pytest.raises(ValueError, match="projection=False needs equal hidden sizes"):
        make_projection(2, 5, projection=False)


# ---------------------------------------------------------------------------- EmbeddingLoss
def test_embedding_loss_with_projection_hand_value_and_padding():
    loss = EmbeddingLoss(student_dim=1, teacher_dim=2)
    with torch.no_grad():
        loss.projection.weight.copy_(t([[2.0], [-1.0]]))
        loss.projection.bias.copy_(t([0.0, 1.0]))
    student = hidden_out([[1], [2], [100]])  # third token is padding
    teacher = hidden_out([[2, 1], [3, -1], [0, 0]])
    # projected [[2, 0], [4, -1]] vs [[2, 1], [3, -1]]: squares 0, 1, 1, 0 over 4 entries
    terms = loss(student, [teacher], {"attention_mask": torch.tensor([[1, 1, 0]])})
    assert list(terms) == ["embedding"]
    assert terms["embedding"].item() == pytest.approx(0.5)
    terms["embedding"].backward()
    assert loss.projection.weight.grad is not None and loss.projection.weight.grad.abs().sum() > 0


def test_embedding_loss_identity_start_equals_plain_mse():
    loss = EmbeddingLoss(4, 4)
    s, te = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    student, teacher = SimpleNamespace(hidden_states=(s,)), SimpleNamespace(hidden_states=(te,))
    out = loss(student, [teacher], {"attention_mask": torch.ones(2, 3)})
    assert out["embedding"].item() == pytest.approx(F.mse_loss(s, te).item(), rel=1e-6)
    with pytest.raises(ValueError, match="hidden size is 4, but the component was built for 3"):
        EmbeddingLoss(3, 4)(SimpleNamespace(hidden_states=(s,)), [SimpleNamespace(hidden_states=(te,))], {})
    with pytest.raises(ValueError, match="output_hidden_states=True"):
        loss(SimpleNamespace(hidden_states=None), [SimpleNamespace(hidden_states=(te,))], {})


# ---------------------------------------------------------------------------- HiddenStateLoss
STUDENT_LAYERS = ([[0], [0]], [[1], [2]], [[3], [3]])  # h0 (embeddings), h1, h2: T=2, d=1
TEACHER_LAYERS = ([[0], [0]], [[9], [9]], [[1], [0]], [[9], [9]], [[4], [3]])  # h0..h4


def test_hidden_loss_uniform_and_last_hand_values():
    batch = {"attention_mask": torch.tensor([[1, 1]])}
    student, teacher = hidden_out(*STUDENT_LAYERS), hidden_out(*TEACHER_LAYERS)
    # uniform 2 <- 4: (1,2): diffs (0, 2) -> 2; (2,4): diffs (-1, 0) -> 0.5; mean 1.25
    uniform = HiddenStateLoss(1, 1, num_student_layers=2, mapping="uniform")
    assert uniform(student, [teacher], batch)["hidden"].item() == pytest.approx(1.25)
    # last: (1,3): (1-9)^2, (2-9)^2 -> 56.5; (2,4): 0.5; mean 28.5
    last = HiddenStateLoss(1, 1, num_student_layers=2, mapping="last")
    assert last(student, [teacher], batch)["hidden"].item() == pytest.approx(28.5)
    explicit = HiddenStateLoss(1, 1, num_student_layers=2, mapping=[(2, 2)])
    # (2,2): diffs (2, 3) -> (4 + 9) / 2
    assert explicit(student, [teacher], batch)["hidden"].item() == pytest.approx(6.5)


def test_hidden_loss_per_layer_projections():
    loss = HiddenStateLoss(1, 1, num_student_layers=2, mapping="uniform", shared_projection=False)
    assert len(loss.projections) == 2
    with torch.no_grad():
        loss.projections[1].weight.fill_(2.0)
    # (1,2) unchanged: 2; (2,4): [6, 6] vs [4, 3] -> (4 + 9) / 2 = 6.5; mean 4.25
    out = loss(hidden_out(*STUDENT_LAYERS), [hidden_out(*TEACHER_LAYERS)], {"attention_mask": torch.ones(1, 2)})
    assert out["hidden"].item() == pytest.approx(4.25)
    out["hidden"].backward()
    assert loss.projections[0].weight.grad is not None and loss.projections[1].weight.grad is not None


def test_hidden_loss_padding_does_not_change_the_loss():
    loss = HiddenStateLoss(3, 5, num_student_layers=2, mapping="uniform")
    lengths = [4, 2]
    student = [torch.randn(2, 4, 3) for _ in range(3)]
    teacher = [torch.randn(2, 4, 5) for _ in range(5)]
    mask = (torch.arange(4)[None] < torch.tensor(lengths)[:, None]).long()

    def padded(states, extra):
        return tuple(torch.cat([s, 50 * torch.randn(s.size(0), extra, s.size(-1))], dim=1) for s in states)

    def garbage_in_padding(states):
        states = [s.clone() for s in states]
        for s in states:
            s[1, 2:] = 1e3 * torch.randn_like(s[1, 2:])
        return tuple(states)

    reference = loss(
        SimpleNamespace(hidden_states=tuple(student)), [SimpleNamespace(hidden_states=tuple(teacher))], {"attention_mask": mask}
    )
    more_padding = loss(
        SimpleNamespace(hidden_states=padded(student, 3)),
        [SimpleNamespace(hidden_states=padded(teacher, 3))],
        {"attention_mask": torch.cat([mask, torch.zeros(2, 3, dtype=torch.long)], dim=1)},
    )
    other_garbage = loss(
        SimpleNamespace(hidden_states=garbage_in_padding(student)),
        [SimpleNamespace(hidden_states=garbage_in_padding(teacher))],
        {"attention_mask": mask},
    )
    assert more_padding["hidden"].item() == pytest.approx(reference["hidden"].item(), rel=1e-6)
    assert other_garbage["hidden"].item() == pytest.approx(reference["hidden"].item(), rel=1e-6)


def test_hidden_loss_checks_layers():
    loss = HiddenStateLoss(1, 1, num_student_layers=3)
    with pytest.raises(ValueError, match="num_student_layers=3, but the student returned 2"):
        loss(hidden_out(*STUDENT_LAYERS), [hidden_out(*TEACHER_LAYERS)], {})
    with pytest.raises(ValueError, match="num_student_layers=0"):
        HiddenStateLoss(1, 1, num_student_layers=0)


# ---------------------------------------------------------------------------- AttentionLoss (mse)
# One layer, one head, d_head = 1: scores are q_a * k_b.
ATT_STUDENT = qk_out([[[[1], [2]]]], [[[[3], [-1]]]])  # scores [[3, -1], [6, -2]]
ATT_TEACHER = qk_out([[[[1], [1]]]], [[[[1], [1]]]])  # scores [[1, 1], [1, 1]]


def test_attention_mse_hand_value():
    loss = AttentionLoss(mapping="uniform", kind="mse")
    out = loss(ATT_STUDENT, [ATT_TEACHER], {"attention_mask": torch.ones(1, 2)})
    # diffs [[2, -2], [5, -3]] -> (4 + 4 + 25 + 9) / 4
    assert list(out) == ["attention"]
    assert out["attention"].item() == pytest.approx(10.5)


def test_attention_mse_padding_rows_and_columns_are_left_out():
    student = qk_out([[[[1], [2], [7]]]], [[[[3], [-1], [5]]]])
    teacher = qk_out([[[[1], [1], [-4]]]], [[[[1], [1], [8]]]])
    out = AttentionLoss(kind="mse")(student, [teacher], {"attention_mask": torch.tensor([[1, 1, 0]])})
    assert out["attention"].item() == pytest.approx(10.5)
    # without the mask the padded row and column count
    assert AttentionLoss(kind="mse")(student, [teacher], {})["attention"].item() != pytest.approx(10.5)


def test_attention_mse_maps_layers_and_averages_them():
    # student 1 layer, teacher 2 layers, "last": student 1 <-> teacher 2 only
    teacher = qk_out([[[[9], [9]]], [[[1], [1]]]], [[[[9], [9]]], [[[1], [1]]]])
    out = AttentionLoss(mapping="last")(ATT_STUDENT, [teacher], {"attention_mask": torch.ones(1, 2)})
    assert out["attention"].item() == pytest.approx(10.5)
    # explicit many-to-one: (1,1) and (1,2): the first has teacher scores 81 everywhere
    out = AttentionLoss(mapping=[(1, 1), (1, 2)])(ATT_STUDENT, [teacher], {"attention_mask": torch.ones(1, 2)})
    first = ((3 - 81) ** 2 + (-1 - 81) ** 2 + (6 - 81) ** 2 + (-2 - 81) ** 2) / 4
    assert out["attention"].item() == pytest.approx((first + 10.5) / 2)


def test_attention_head_mismatch_error_and_mean_reduction():
    # T = 1, d_head = 1: one score per head
    student = qk_out([[[[1]], [[2]]]], [[[[1]], [[1]]]])  # 2 heads: scores 1, 2
    teacher = qk_out([[[[1]], [[3]], [[2]], [[2]]]], [[[[1]], [[1]], [[1]], [[1]]]])  # 4 heads: 1, 3, 2, 2
    batch = {"attention_mask": torch.ones(1, 1)}
    with pytest.raises(ValueError, match="2 attention heads and the teacher 4.*head_reduction='mean'"):
        AttentionLoss()(student, [teacher], batch)
    # teacher heads averaged in pairs: [2, 2]; diffs [-1, 0] -> 0.5
    assert AttentionLoss(head_reduction="mean")(student, [teacher], batch)["attention"].item() == pytest.approx(0.5)


def test_attention_loss_needs_queries_keys():
    with pytest.raises(ValueError, match="output_query_key=True"):
        AttentionLoss()(SimpleNamespace(query_states=None, key_states=None, attentions=None), [ATT_TEACHER], {})
    with pytest.raises(ValueError, match="kind='bad'"):
        AttentionLoss(kind="bad")
    with pytest.raises(ValueError, match="head_reduction='sum'"):
        AttentionLoss(head_reduction="sum")


# ---------------------------------------------------------------------------- AttentionLoss (kl)
KL_HAND = (0.75 * math.log(1.5) + 0.25 * math.log(0.5) + 0.0) / 2  # rows: [.75,.25] vs [.5,.5]; [.5,.5] vs [.5,.5]


def test_attention_kl_hand_value():
    student = qk_out([[[[0], [0]]]], [[[[0], [0]]]])  # uniform rows
    teacher = qk_out([[[[1], [0]]]], [[[[math.log(3)], [0]]]])  # row 0 [ln 3, 0] -> [.75, .25]; row 1 uniform
    out = AttentionLoss(kind="kl")(student, [teacher], {"attention_mask": torch.ones(1, 2)})
    assert out["attention"].item() == pytest.approx(KL_HAND, rel=1e-5)


def test_attention_kl_padding_and_attentions_fallback():
    student = qk_out([[[[0], [0], [5]]]], [[[[0], [0], [9]]]])
    teacher = qk_out([[[[1], [0], [-3]]]], [[[[math.log(3)], [0], [7]]]])
    batch = {"attention_mask": torch.tensor([[1, 1, 0]])}
    out = AttentionLoss(kind="kl")(student, [teacher], batch)
    assert out["attention"].item() == pytest.approx(KL_HAND, rel=1e-5)

    def as_probs(output):  # what eager attention returns: softmax with padded keys masked
        scores = attention_scores(output.query_states[0], output.key_states[0])
        scores = scores + (1 - batch["attention_mask"][:, None, None, :]) * -1e9
        return SimpleNamespace(query_states=None, key_states=None, attentions=(scores.softmax(-1),))

    fallback = AttentionLoss(kind="kl")(as_probs(student), [as_probs(teacher)], batch)
    assert fallback["attention"].item() == pytest.approx(KL_HAND, rel=1e-5)


def test_attention_kl_is_zero_for_identical_and_positive_otherwise():
    q, k = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5)
    same = SimpleNamespace(query_states=(q,), key_states=(k,), attentions=None)
    other = SimpleNamespace(query_states=(torch.randn(2, 3, 4, 5),), key_states=(k,), attentions=None)
    batch = {"attention_mask": torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])}
    assert AttentionLoss(kind="kl")(same, [same], batch)["attention"].abs().item() < 1e-6
    assert AttentionLoss(kind="kl")(other, [same], batch)["attention"].item() > 0


def test_requires():
    assert EmbeddingLoss.requires == {"hidden_states"}
    assert HiddenStateLoss.requires == {"hidden_states"}
    assert AttentionLoss.requires == {"query_key"}
    assert AttentionLoss(kind="kl").requires == {"query_key"}


# ---------------------------------------------------------------------------- real tiny models
def _pair_batch(tokenizer):
    return dict(
        tokenizer(
            ["a man plays the guitar", "it is"],
            ["someone plays music on the guitar .", "a day"],
            padding=True,
            return_tensors="pt",
        )
    )


def test_scores_from_captured_queries_keys_reproduce_eager_attention(tiny_cross_encoder, tiny_tokenizer):
    batch = _pair_batch(tiny_tokenizer)
    assert batch["attention_mask"].min() == 0  # the batch is padded
    with torch.no_grad():
        out = tiny_cross_encoder(**batch, output_attentions=True, output_query_key=True, output_hidden_states=True)
    keys_mask = batch["attention_mask"][:, None, None, :] > 0
    for layer in range(len(out.attentions)):
        scores = attention_scores(out.query_states[layer], out.key_states[layer])
        scores = scores.masked_fill(~keys_mask, torch.finfo(torch.float32).min)
        torch.testing.assert_close(scores.softmax(-1), out.attentions[layer], atol=1e-5, rtol=1e-4)


def test_student_copied_from_teacher_layers_has_zero_layer_losses(tiny_teacher, tiny_tokenizer):
    from hf_distill import CrossEncoderModel

    student = CrossEncoderModel.from_teacher(tiny_teacher, num_layers=2, strategy="first").eval()
    batch = _pair_batch(tiny_tokenizer)
    flags = dict(output_hidden_states=True, output_query_key=True)
    with torch.no_grad():
        s_out, t_out = student(**batch, **flags), tiny_teacher(**batch, **flags)
    copied = [(1, 1), (2, 2)]
    d = tiny_teacher.config.encoder.hidden_size
    assert EmbeddingLoss(d, d)(s_out, [t_out], batch)["embedding"].item() == pytest.approx(0.0, abs=1e-10)
    assert HiddenStateLoss(d, d, 2, mapping=copied)(s_out, [t_out], batch)["hidden"].item() == pytest.approx(0.0, abs=1e-10)
    assert AttentionLoss(mapping=copied)(s_out, [t_out], batch)["attention"].item() == pytest.approx(0.0, abs=1e-8)
    kl = AttentionLoss(mapping=copied, kind="kl")(s_out, [t_out], batch)["attention"]
    assert kl.item() == pytest.approx(0.0, abs=1e-6)
    # the uniform mapping compares them with deeper teacher layers: not zero
    assert HiddenStateLoss(d, d, 2, mapping="uniform")(s_out, [t_out], batch)["hidden"].item() > 1e-6
    assert AttentionLoss(mapping="uniform")(s_out, [t_out], batch)["attention"].item() > 1e-6
