"""VirtualInteractionLoss: definition on constructed tensors, layer mapping, errors, gradients, training."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from hf_distill.alignment import ALIGNMENT_PREFIX
from hf_distill.data import PairCollator
from hf_distill.losses.virt import (
    VirtualInteractionLoss,
    contiguous_start,
    gather_positions,
    student_virtual_attention,
    teacher_cross_attention,
    virtual_attention_squared_error,
)
from hf_distill.trainer import DistillationTrainer
from hf_distill.training_args import DistillationArguments

from ..conftest import PAIRS, make_cross_encoder, make_siamese
from ..test_trainer import pair_dataset

B, H, D = 2, 2, 4
# Hand-made alignment: example 0 has 3 X tokens and 2 Y tokens, example 1 has 2 and 2 (one padded entry).
ALIGN = {
    "a_student": [[1, 2, 3], [1, 2, 0]],
    "a_teacher": [[1, 2, 3], [1, 2, 0]],
    "a_mask": [[True, True, True], [True, True, False]],
    "b_student": [[1, 2], [1, 2]],
    "b_teacher": [[5, 6], [4, 5]],
    "b_mask": [[True, True], [True, True]],
}
T_A, T_B, T_JOINT = 5, 4, 8  # student X / Y lengths (with [CLS], [SEP], padding) and the joint length


def alignment_batch() -> dict[str, torch.Tensor]:
    return {ALIGNMENT_PREFIX + k: torch.tensor(v) for k, v in ALIGN.items()}


def teacher_output(num_layers: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    queries = tuple(torch.randn(B, H, T_JOINT, D, generator=g) for _ in range(num_layers))
    keys = tuple(torch.randn(B, H, T_JOINT, D, generator=g) for _ in range(num_layers))
    return SimpleNamespace(query_states=queries, key_states=keys)


def student_matching(teacher, layers: list[int], seed: int = 1):
    """Student q/k whose aligned tokens carry the teacher's q/k of the given (1-based) teacher layers.

    Every other position ([CLS], [SEP], padding) is random: the loss must not read it.
    """
    g = torch.Generator().manual_seed(seed)
    sides = {}
    for side, length in (("a", T_A), ("b", T_B)):
        queries, keys = [], []
        for layer in layers:
            q = torch.randn(B, H, length, D, generator=g)
            k = torch.randn(B, H, length, D, generator=g)
            for b in range(B):
                for n, real in enumerate(ALIGN[f"{side}_mask"][b]):
                    if real:
                        s, t = ALIGN[f"{side}_student"][b][n], ALIGN[f"{side}_teacher"][b][n]
                        q[b, :, s] = teacher.query_states[layer - 1][b, :, t]
                        k[b, :, s] = teacher.key_states[layer - 1][b, :, t]
            queries.append(q)
            keys.append(k)
        sides[side] = SimpleNamespace(query_states=tuple(queries), key_states=tuple(keys))
    return SimpleNamespace(side_a=sides["a"], side_b=sides["b"])


def reference_loss(student, teacher, pairs) -> float:
    """The definition with explicit loops: MSE over real (row, column) entries per layer and direction, then the mean."""
    terms = []
    for i, j in pairs:
        for rows, cols in (("a", "b"), ("b", "a")):
            squared, count = 0.0, 0
            side_rows, side_cols = getattr(student, f"side_{rows}"), getattr(student, f"side_{cols}")
            for b in range(B):
                r = [n for n, m in enumerate(ALIGN[f"{rows}_mask"][b]) if m]
                c = [n for n, m in enumerate(ALIGN[f"{cols}_mask"][b]) if m]
                rs, rt = [ALIGN[f"{rows}_student"][b][n] for n in r], [ALIGN[f"{rows}_teacher"][b][n] for n in r]
                cs, ct = [ALIGN[f"{cols}_student"][b][n] for n in c], [ALIGN[f"{cols}_teacher"][b][n] for n in c]
                for h in range(H):
                    q, k = side_rows.query_states[i - 1][b, h, rs], side_cols.key_states[i - 1][b, h, cs]
                    m = torch.softmax(q @ k.T / math.sqrt(D), dim=-1)
                    tq, tk = teacher.query_states[j - 1][b, h, rt], teacher.key_states[j - 1][b, h, ct]
                    a = torch.softmax(tq @ tk.T / math.sqrt(D), dim=-1)
                    squared += float(((m - a) ** 2).sum())
                    count += m.numel()
            terms.append(squared / count)
    return sum(terms) / len(terms)


# ---------------------------------------------------------------------------- the definition
def test_zero_when_virtual_attention_equals_the_teacher_sub_block():
    teacher = teacher_output(2)
    student = student_matching(teacher, [1, 2])
    loss = VirtualInteractionLoss()(student, [teacher], alignment_batch())["virt"]
    assert loss.item() == pytest.approx(0.0, abs=1e-12)


def test_positive_otherwise_and_equal_to_the_hand_computed_definition():
    teacher = teacher_output(2)
    student = student_matching(teacher, [1, 2])
    student.side_a.query_states[1][0, 1, 2] += 0.5  # one real X token's query, head 1, layer 2
    loss = VirtualInteractionLoss()(student, [teacher], alignment_batch())["virt"]
    assert loss.item() > 1e-6
    assert loss.item() == pytest.approx(reference_loss(student, teacher, [(1, 1), (2, 2)]), rel=1e-5)

    unrelated = student_matching(teacher_output(2, seed=7), [1, 2])
    loss = VirtualInteractionLoss()(unrelated, [teacher], alignment_batch())["virt"]
    assert loss.item() == pytest.approx(reference_loss(unrelated, teacher, [(1, 1), (2, 2)]), rel=1e-5)
    assert loss.item() > 1e-3


def test_special_tokens_and_padding_are_not_read():
    teacher = teacher_output(2)
    student = student_matching(teacher, [1, 2])
    for side in (student.side_a, student.side_b):
        for states in (side.query_states, side.key_states):
            for layer in states:
                layer[:, :, 0] += 100.0  # [CLS]
    student.side_a.query_states[0][1, :, 3:] -= 50.0  # example 1: [SEP] and padding of X
    student.side_a.key_states[0][1, :, 3:] -= 50.0
    loss = VirtualInteractionLoss()(student, [teacher], alignment_batch())["virt"]
    assert loss.item() == pytest.approx(0.0, abs=1e-12)


def test_both_directions_count():
    teacher = teacher_output(1)
    student = student_matching(teacher, [1])
    student.side_b.query_states[0][0, 0, 1] += 1.0  # only Y -> X reads Y's queries
    loss = VirtualInteractionLoss()(student, [teacher], alignment_batch())["virt"]
    assert loss.item() > 1e-6
    assert loss.item() == pytest.approx(reference_loss(student, teacher, [(1, 1)]), rel=1e-5)


def test_layer_selection_through_the_mapping_when_depths_differ():
    teacher = teacher_output(4)
    student = student_matching(teacher, [2, 4])  # uniform 2 -> 4: (1, 2), (2, 4)
    assert VirtualInteractionLoss("uniform")(student, [teacher], alignment_batch())["virt"].item() == pytest.approx(0, abs=1e-12)
    assert VirtualInteractionLoss([(1, 2), (2, 4)])(student, [teacher], alignment_batch())["virt"].item() == pytest.approx(
        0, abs=1e-12
    )
    last = VirtualInteractionLoss("last")(student, [teacher], alignment_batch())["virt"]  # (1, 3), (2, 4)
    assert last.item() == pytest.approx(reference_loss(student, teacher, [(1, 3), (2, 4)]), rel=1e-5)
    assert last.item() > 1e-4


def test_teacher_attention_probabilities_give_the_same_target():
    """Renormalising the teacher's attention sub-block = softmax of its scores over those columns."""
    teacher = teacher_output(1)
    probs = torch.softmax(teacher.query_states[0] @ teacher.key_states[0].transpose(-1, -2) / math.sqrt(D), dim=-1)
    batch = alignment_batch()
    rows, cols, row_mask, mask = (batch[ALIGNMENT_PREFIX + k] for k in ("a_teacher", "b_teacher", "a_mask", "b_mask"))
    from_scores = teacher_cross_attention(teacher, 1, rows, cols, row_mask, mask)
    from_probs = teacher_cross_attention(SimpleNamespace(attentions=(probs,)), 1, rows, cols, row_mask, mask)
    torch.testing.assert_close(from_probs, from_scores, atol=1e-6, rtol=1e-5)


# ---------------------------------------------------------------------------- errors
def test_clear_errors():
    teacher = teacher_output(2)
    student = student_matching(teacher, [1, 2])
    loss = VirtualInteractionLoss()
    wide = SimpleNamespace(
        query_states=tuple(torch.randn(B, 4, T_JOINT, D) for _ in range(2)),
        key_states=tuple(torch.randn(B, 4, T_JOINT, D) for _ in range(2)),
    )
    with pytest.raises(ValueError, match=r"student has num_attention_heads=2 and the teacher num_attention_heads=4"):
        loss(student, [wide], alignment_batch())
    with pytest.raises(ValueError, match=r"lacks the token alignment.*virt_alignment=True"):
        loss(student, [teacher], {})
    with pytest.raises(ValueError, match="needs a Siamese student"):
        loss(SimpleNamespace(logits=torch.zeros(B, 2)), [teacher], alignment_batch())
    with pytest.raises(ValueError, match=r"student's side_a.query_states.*output_query_key=True"):
        loss(SimpleNamespace(side_a=SimpleNamespace(), side_b=SimpleNamespace()), [teacher], alignment_batch())
    with pytest.raises(ValueError, match=r"teacher's per-layer queries and keys"):
        loss(student, [SimpleNamespace(logits=torch.zeros(B, 2))], alignment_batch())
    with pytest.raises(ValueError, match="needs an online cross-encoder teacher"):
        loss(student, [], alignment_batch())
    short = SimpleNamespace(query_states=tuple(q[:, :, :5] for q in teacher.query_states),
                            key_states=tuple(k[:, :, :5] for k in teacher.key_states))
    with pytest.raises(ValueError, match="points past the teacher's sequence length 5"):
        loss(student, [short], alignment_batch())
    with pytest.raises(ValueError, match="mapping="):
        VirtualInteractionLoss("skip")


# ---------------------------------------------------------------------------- real models
def test_gradients_reach_the_students_query_and_key_projections(tiny_tokenizer):
    student = make_siamese(tiny_tokenizer, num_layers=2, num_labels=2).train()
    teacher = make_cross_encoder(tiny_tokenizer, num_layers=4, seed=1).requires_grad_(False)
    collator = PairCollator(
        tokenizer=tiny_tokenizer, siamese=True, text_columns=("s1", "s2"), teacher_tokenizers=[tiny_tokenizer],
        label_column=None, virt_alignment=True,
    )
    batch = collator([{"s1": a, "s2": b} for a, b in PAIRS])
    student_out = student(**{k: v for k, v in batch.items() if not k.startswith("teacher_")}, output_query_key=True)
    with torch.no_grad():
        teacher_out = teacher(**{k[len("teacher_0_"):]: v for k, v in batch.items() if k.startswith("teacher_0_")},
                              output_query_key=True)
    loss = VirtualInteractionLoss("uniform")(student_out, [teacher_out], batch)["virt"]
    assert loss.item() > 0
    loss.backward()
    for index, layer in enumerate(student.backbone.encoder.layer):
        for name in ("query", "key"):
            grad = getattr(layer.attention.self, name).weight.grad
            assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0, (index, name)
    # Only queries and keys are read: the last layer's feed-forward gets no gradient, nor does the teacher.
    assert student.backbone.encoder.layer[-1].intermediate.dense.weight.grad is None
    assert all(p.grad is None for p in teacher.parameters())


@pytest.mark.parametrize("interaction", ["none", "virt"])
def test_trainer_end_to_end_virt_term_falls(tmp_path, tiny_tokenizer, interaction):
    student = make_siamese(tiny_tokenizer, num_labels=2, interaction=interaction).train()
    teacher = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1)
    with torch.no_grad():  # a teacher with sharper attention than a fresh random model's near-uniform maps
        for layer in teacher.backbone.encoder.layer:
            layer.attention.self.query.weight.mul_(5.0)
            layer.attention.self.key.weight.mul_(5.0)
    args = DistillationArguments(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, max_steps=30, learning_rate=1e-3,
        lr_scheduler_type="constant", logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
        disable_tqdm=True, seed=0, max_length=32, virt_weight=1.0,
    )
    trainer = DistillationTrainer(
        model=student, args=args, teachers=teacher, loss_components=[VirtualInteractionLoss()], train_dataset=pair_dataset(8)
    )
    assert trainer.data_collator.virt_alignment is True
    trainer.train()
    virt = [entry["virt"] for entry in trainer.state.log_history if "virt" in entry]
    assert len(virt) == 30
    assert sum(virt[-5:]) / 5 < 0.85 * sum(virt[:5]) / 5, virt
    assert virt[-1] < virt[0]


def test_gather_positions_slice_path_equals_the_gather():
    """Contiguous positions (a side's own encoding) take a slice; values and gradients equal the gather's on real rows."""
    torch.manual_seed(0)
    states = torch.randn(3, 2, 9, 4, requires_grad=True)
    index = torch.tensor([[1, 2, 3, 4], [1, 2, 0, 0], [1, 2, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]], dtype=torch.bool)
    start = contiguous_start(index, mask)
    assert start == 1
    sliced = gather_positions(states, index, start)
    assert sliced.data_ptr() == states[:, :, 1:5].data_ptr()  # a view: no gather
    gathered = gather_positions(states, index)
    keep = mask[:, None, :, None]
    assert torch.equal(sliced * keep, gathered * keep)
    (grad_slice,) = torch.autograd.grad((sliced * keep).square().sum(), states)
    (grad_gather,) = torch.autograd.grad((gathered * keep).square().sum(), states)
    assert torch.equal(grad_slice, grad_gather)
    # positions that are not one run (the teacher's joint view: Y after X) fall back to the gather
    shifted = torch.tensor([[5, 6, 7, 8], [3, 4, 0, 0], [4, 5, 6, 0]])
    assert contiguous_start(shifted, mask) is None
    # a run whose padding entries pass the end of the sequence (length 9) is sliced and zero-padded
    index = torch.tensor([[6, 7, 8, 0], [6, 7, 0, 0], [6, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.bool)
    start = contiguous_start(index, mask)
    assert start == 6
    padded = gather_positions(states, index, start)
    assert padded.shape == (3, 2, 4, 4)
    assert torch.equal(padded[:, :, 3], torch.zeros(3, 2, 4))
    keep = mask[:, None, :, None]
    gathered = gather_positions(states, index)
    assert torch.equal(padded * keep, gathered * keep)
    (grad_padded,) = torch.autograd.grad((padded * keep).square().sum(), states)
    (grad_gather,) = torch.autograd.grad((gathered * keep).square().sum(), states)
    assert torch.equal(grad_padded, grad_gather)


def test_fused_squared_error_equals_autograd_in_value_and_gradients():
    """The fused loss (gradients computed in its forward) = the plain autograd expression, masked keys included."""
    torch.manual_seed(0)
    queries = torch.randn(3, 2, 4, 5, dtype=torch.float64, requires_grad=True)
    keys = torch.randn(3, 2, 6, 5, dtype=torch.float64, requires_grad=True)
    key_mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0]], dtype=torch.bool)
    target = torch.softmax(torch.randn(3, 2, 4, 6, dtype=torch.float64).masked_fill(~key_mask[:, None, None, :], -math.inf), -1)
    # the reference in float64, written out: masked keys get -inf before the softmax
    scores = (queries @ keys.transpose(-1, -2) / math.sqrt(5)).masked_fill(~key_mask[:, None, None, :], -math.inf)
    reference = (torch.softmax(scores, -1) - target).square().sum()
    # and one (example, head, row) by hand: a softmax over its 3 kept keys; the masked ones contribute target^2
    row_scores = [sum(queries[1, 0, 2, c].item() * keys[1, 0, m, c].item() for c in range(5)) / math.sqrt(5) for m in range(3)]
    row_probs = [math.exp(x) / sum(math.exp(y) for y in row_scores) for x in row_scores]
    by_hand = sum((p - t) ** 2 for p, t in zip(row_probs, target[1, 0, 2].tolist())) + sum(t**2 for t in target[1, 0, 2, 3:].tolist())
    assert by_hand == pytest.approx((torch.softmax(scores, -1) - target)[1, 0, 2].square().sum().item(), rel=1e-12)
    fused = virtual_attention_squared_error(queries, keys, key_mask, target.clone())
    assert fused.item() == pytest.approx(reference.item(), rel=1e-12)
    grads = torch.autograd.grad(3.0 * fused, (queries, keys))
    expected = torch.autograd.grad(3.0 * reference, (queries, keys))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(
        lambda q, k: virtual_attention_squared_error(q, k, key_mask, target.clone()), (queries, keys)
    )


def test_zero_query_rows_match_the_teachers_padding_rows():
    """A padding row of the student (zero query) and of the teacher (uniform) agree, so it adds nothing to the loss."""
    teacher = teacher_output(1)
    batch = alignment_batch()
    rows, cols, row_mask, col_mask = (batch[ALIGNMENT_PREFIX + k] for k in ("a_teacher", "b_teacher", "a_mask", "b_mask"))
    target = teacher_cross_attention(teacher, 1, rows, cols, row_mask, col_mask)
    student = student_virtual_attention(torch.randn(B, H, T_JOINT, D), torch.randn(B, H, T_JOINT, D), rows, cols, row_mask, col_mask)
    padding = ~row_mask[:, None, :, None].expand_as(target)
    assert torch.equal(student[padding], target[padding])
    torch.testing.assert_close(target[1, :, 2], torch.full((H, 2), 0.5))
