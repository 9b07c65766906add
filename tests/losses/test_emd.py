"""BERT-EMD: cost matrix, exact flow (checked against scipy's linprog), cost attention, the component."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.optimize import linprog

from hf_distill.losses.emd import (
    EMDLayerLoss,
    cost_attention_update,
    earth_movers_flow,
    layer_cost_matrix,
    score_cost_matrix,
    score_cost_method,
)
from hf_distill.losses.layers import attention_scores, masked_mse, pair_mask, reduce_heads


def lengths_mask(lengths, width):
    return (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()


def linprog_transport(a, b, cost):
    """Optimal value and plan of min <F, C> s.t. F 1 = a, F^T 1 = b, F >= 0, by HiGHS."""
    rows, cols = cost.shape
    a_eq = np.zeros((rows + cols, rows * cols))
    for i in range(rows):
        a_eq[i, i * cols : (i + 1) * cols] = 1.0
    for j in range(cols):
        a_eq[rows + j, j::cols] = 1.0
    result = linprog(cost.ravel(), A_eq=a_eq, b_eq=np.concatenate([a, b]), bounds=(0, None), method="highs")
    assert result.status == 0
    return result.fun, result.x.reshape(rows, cols)


# ---------------------------------------------------------------------------- cost matrix
def test_cost_matrix_hand_values_with_padding():
    # two student layers, three teacher layers, B=1, T=2, d=1; only the first token is real
    student = torch.tensor([[[[1.0], [3.0]]], [[[0.0], [0.0]]]])
    teacher = torch.tensor([[[[1.0], [1.0]]], [[[2.0], [5.0]]], [[[0.0], [9.0]]]])
    cost = layer_cost_matrix(student, teacher, torch.tensor([[1, 0]]))
    torch.testing.assert_close(cost, torch.tensor([[0.0, 1.0, 1.0], [1.0, 4.0, 0.0]]))
    # without a mask both tokens count: e.g. D_00 = (0 + 4) / 2, D_12 = (0 + 81) / 2
    unmasked = layer_cost_matrix(student, teacher)
    assert unmasked[0, 0].item() == pytest.approx(2.0) and unmasked[1, 2].item() == pytest.approx(40.5)


def test_cost_matrix_equals_naive_double_loop_for_hidden_states_with_gradients():
    student = [torch.randn(2, 5, 4, requires_grad=True) for _ in range(3)]
    teacher = [torch.randn(2, 5, 4) for _ in range(4)]
    mask = lengths_mask([5, 3], 5)
    cost = layer_cost_matrix(student, teacher, mask)
    naive = torch.stack([torch.stack([masked_mse(s, te, mask) for te in teacher]) for s in student])
    assert cost.shape == (3, 4)
    torch.testing.assert_close(cost, naive, rtol=1e-5, atol=1e-6)
    weights = torch.rand(3, 4)
    (grad_fast,) = torch.autograd.grad((cost * weights).sum(), student[1])
    (grad_naive,) = torch.autograd.grad((naive * weights).sum(), student[1])
    torch.testing.assert_close(grad_fast, grad_naive, rtol=1e-5, atol=1e-6)


def test_cost_matrix_equals_naive_double_loop_for_attention_scores():
    student = torch.randn(2, 2, 3, 4, 4)  # (L_S, B, H, T, T)
    teacher = torch.randn(5, 2, 3, 4, 4)
    mask = pair_mask(lengths_mask([4, 2], 4))
    naive = torch.tensor([[masked_mse(s, te, mask).item() for te in teacher] for s in student])
    for center in (True, False):
        torch.testing.assert_close(layer_cost_matrix(student, teacher, mask, center=center), naive, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["gram", "maps", "auto"])
@pytest.mark.parametrize(
    "student_heads, teacher_heads, heads, mask",
    [
        (3, 3, None, None),
        (3, 3, None, [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]]),
        (4, 2, 2, [[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0]]),
        (2, 2, None, [[1.0, 0.5, 0.25, 0.0, 1.0, 0.0], [1, 1, 1, 1, 1, 1]]),  # soft token weights
    ],
)
def test_score_cost_matrix_equals_the_naive_loop_over_materialised_scores(method, student_heads, teacher_heads, heads, mask):
    """D_ij from queries and keys (Gram matrices, or the maps) = masked MSE of the explicit score maps, with gradients."""
    generator = torch.Generator().manual_seed(student_heads * 10 + teacher_heads)
    batch, length = 2, 6
    qs = torch.randn(2, batch, student_heads, length, 3, generator=generator, dtype=torch.float64).requires_grad_()
    ks = torch.randn(2, batch, student_heads, length, 3, generator=generator, dtype=torch.float64).requires_grad_()
    qt = torch.randn(3, batch, teacher_heads, length, 5, generator=generator, dtype=torch.float64)
    kt = torch.randn(3, batch, teacher_heads, length, 5, generator=generator, dtype=torch.float64)
    mask = None if mask is None else torch.tensor(mask, dtype=torch.float32)
    common = heads or student_heads
    student_maps = [reduce_heads(attention_scores(qs[i], ks[i]), common) for i in range(2)]
    teacher_maps = [reduce_heads(attention_scores(qt[j], kt[j]), common) for j in range(3)]
    weights = None if mask is None else pair_mask(mask)
    naive = torch.stack([torch.stack([masked_mse(s, t, weights) for t in teacher_maps]) for s in student_maps])
    cost = score_cost_matrix(qs, ks, list(qt), list(kt), mask, heads=heads, method=method)
    torch.testing.assert_close(cost, naive, rtol=1e-4, atol=1e-5)
    probe = torch.arange(1.0, 7.0, dtype=torch.float32).view(2, 3)
    expected = torch.autograd.grad((naive * probe).sum(), (qs, ks))
    for got, want in zip(torch.autograd.grad((cost * probe).sum(), (qs, ks)), expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "layers, length, width, expected",
    [((2, 6), 64, 32, "maps"), ((2, 6), 128, 32, "gram"), ((6, 6), 128, 32, "maps"), ((6, 6), 256, 32, "gram"),
     ((6, 12), 256, 64, "maps"), ((6, 12), 512, 64, "gram")],
)
def test_score_cost_method_picks_gram_for_long_sequences_and_maps_for_wide_heads(layers, length, width, expected):
    """T >= 1.5 d L_S L_T / (L_S + L_T): 2 x 6 layers at d 32 switch between T 64 and 128."""
    assert score_cost_method(*layers, length, width) == expected


def test_score_cost_matrix_rejects_bad_input():
    q = torch.randn(1, 2, 4, 6, 3)
    with pytest.raises(ValueError, match="method='fast' is not valid"):
        score_cost_matrix(q, q, q, q, method="fast")
    with pytest.raises(ValueError, match="4 attention heads and the teacher 2"):
        score_cost_matrix(q, q, q[:, :, :2], q[:, :, :2])
    with pytest.raises(ValueError, match="cannot reduce 4 heads to 3"):
        score_cost_matrix(q, q, q, q, heads=3, method="gram")
    with pytest.raises(ValueError, match="batch and length must match"):
        score_cost_matrix(q, q, q[:, :, :, :5], q[:, :, :, :5])


def test_cost_matrix_is_accurate_for_large_common_offsets():
    student = torch.randn(3, 2, 6, 8) + 300.0
    teacher = torch.randn(4, 2, 6, 8) + 300.0
    mask = lengths_mask([6, 4], 6)
    naive = torch.tensor([[masked_mse(s, te, mask).item() for te in teacher] for s in student])
    torch.testing.assert_close(layer_cost_matrix(student, teacher, mask), naive, rtol=1e-3, atol=1e-3)
    # the plain expansion loses this precision in float32: centering is what keeps it
    assert not torch.allclose(layer_cost_matrix(student, teacher, mask, center=False), naive, rtol=1e-3, atol=1e-3)


def test_cost_matrix_padding_does_not_change_costs():
    student, teacher = torch.randn(2, 2, 3, 4), torch.randn(3, 2, 3, 4)
    mask = lengths_mask([3, 2], 3)
    reference = layer_cost_matrix(student, teacher, mask)
    garbage_s, garbage_t = student.clone(), teacher.clone()
    garbage_s[:, 1, 2], garbage_t[:, 1, 2] = 1e4, -1e4
    torch.testing.assert_close(layer_cost_matrix(garbage_s, garbage_t, mask), reference)
    longer_s = torch.cat([student, torch.randn(2, 2, 2, 4)], dim=2)
    longer_t = torch.cat([teacher, torch.randn(3, 2, 2, 4)], dim=2)
    longer_mask = torch.cat([mask, torch.zeros(2, 2, dtype=torch.long)], dim=1)
    torch.testing.assert_close(layer_cost_matrix(longer_s, longer_t, longer_mask), reference, rtol=1e-5, atol=1e-6)


def test_cost_matrix_shape_mismatch():
    with pytest.raises(ValueError, match="differ"):
        layer_cost_matrix(torch.zeros(2, 1, 3, 4), torch.zeros(2, 1, 3, 5))


# ---------------------------------------------------------------------------- flow
@pytest.mark.parametrize("seed, rows, cols", [(0, 3, 5), (1, 4, 4), (2, 6, 2), (3, 4, 12)])
def test_flow_is_an_exact_optimal_transport_plan(seed, rows, cols):
    rng = np.random.default_rng(seed)
    a, b = rng.dirichlet(np.ones(rows)), rng.dirichlet(np.ones(cols))
    cost = rng.random((rows, cols)) * 5
    flow = earth_movers_flow(torch.tensor(a), torch.tensor(b), torch.tensor(cost, dtype=torch.float32))
    assert flow.dtype == torch.float32 and flow.shape == (rows, cols) and not flow.requires_grad
    value, _ = linprog_transport(a, b, cost)
    assert float((flow.double() * torch.tensor(cost)).sum()) == pytest.approx(value, rel=1e-6, abs=1e-9)
    flow64 = earth_movers_flow(a, b, torch.tensor(cost))
    assert flow64.dtype == torch.float64
    np.testing.assert_allclose(flow64.sum(1).numpy(), a, atol=1e-12)
    np.testing.assert_allclose(flow64.sum(0).numpy(), b, atol=1e-12)
    assert (flow64 >= 0).all()
    assert float((flow64 * torch.tensor(cost)).sum()) == pytest.approx(value, rel=1e-9, abs=1e-12)


def test_flow_renormalises_masses_and_rejects_bad_input():
    cost = torch.rand(2, 3)
    torch.testing.assert_close(
        earth_movers_flow(torch.tensor([2.0, 2.0]), torch.ones(3), cost),
        earth_movers_flow([0.5, 0.5], torch.ones(3) / 3, cost),
    )
    with pytest.raises(ValueError, match="expected \\(2, 4\\)"):
        earth_movers_flow([0.5, 0.5], [0.25] * 4, cost)
    with pytest.raises(ValueError, match="NaN or inf"):
        earth_movers_flow([0.5, 0.5], [1 / 3] * 3, torch.full((2, 3), float("nan")))
    with pytest.raises(ValueError, match="non-negative"):
        earth_movers_flow([1.5, -0.5], [1 / 3] * 3, cost)


def test_diagonal_cost_gives_the_diagonal_flow():
    size = 4
    cost = torch.rand(size, size) + 0.5
    cost.fill_diagonal_(0.0)
    weights = torch.full((size,), 1.0 / size)
    torch.testing.assert_close(earth_movers_flow(weights, weights, cost), torch.eye(size) / size)


def test_gradient_reaches_the_cost_and_not_the_flow():
    cost = torch.rand(3, 5, requires_grad=True)
    flow = earth_movers_flow(torch.ones(3) / 3, torch.ones(5) / 5, cost)
    assert not flow.requires_grad and flow.grad_fn is None
    (flow * cost).sum().backward()
    torch.testing.assert_close(cost.grad, flow)


# ---------------------------------------------------------------------------- cost attention
# w_S = [.5, .5], w_T = [.2, .3, .5]; F has those marginals; F * D = [[.2, .6, 0], [0, 0, 2]].
W_S = torch.tensor([0.5, 0.5], dtype=torch.float64)
W_T = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
FLOW = torch.tensor([[0.2, 0.3, 0.0], [0.0, 0.0, 0.5]], dtype=torch.float64)
COST = torch.tensor([[1.0, 2.0, 7.0], [3.0, 5.0, 4.0]], dtype=torch.float64)
# student: c = [.8, 2], r = c / w = [1.6, 4], w~ = 5.6 / r = [3.5, 1.4]
# teacher: c = [.2, .6, 2], r = [1, 2, 4], w~ = 7 / r = [7, 3.5, 1.75]


def softmax_of(values, temperature=1.0):
    exps = [math.exp(v / temperature) for v in values]
    return [e / sum(exps) for e in exps]


@pytest.mark.parametrize(
    "side, weights, mode, temperature, expected",
    [
        ("student", W_S, "normalize", 1.0, [5 / 7, 2 / 7]),
        ("student", W_S, "softmax", 1.0, [1 / (1 + math.exp(-2.1)), 1 - 1 / (1 + math.exp(-2.1))]),
        ("student", W_S, "softmax", 2.0, [1 / (1 + math.exp(-1.05)), 1 - 1 / (1 + math.exp(-1.05))]),
        ("teacher", W_T, "normalize", 1.0, [4 / 7, 2 / 7, 1 / 7]),
        ("teacher", W_T, "softmax", 1.0, softmax_of([7.0, 3.5, 1.75])),
        ("teacher", W_T, "softmax", 5.0, softmax_of([7.0, 3.5, 1.75], 5.0)),
    ],
)
def test_cost_attention_update_hand_values(side, weights, mode, temperature, expected):
    new = cost_attention_update(weights, FLOW, COST, temperature=temperature, mode=mode, side=side)
    assert new.tolist() == pytest.approx(expected, rel=1e-9)
    assert new.sum().item() == pytest.approx(1.0)


def test_cost_attention_zero_cost_layer_follows_the_official_code():
    # student layer 2 transports at zero cost: r = [1.6, 0] -> w~ = [1, 0] (the official code skips r = 0)
    cost = COST.clone()
    cost[1] = 0.0
    assert cost_attention_update(W_S, FLOW, cost, mode="normalize").tolist() == pytest.approx([1.0, 0.0])
    assert cost_attention_update(W_S, FLOW, cost, mode="softmax").tolist() == pytest.approx(softmax_of([1.0, 0.0]))
    # a layer with no mass is treated the same way instead of producing NaN
    w = torch.tensor([1.0, 0.0], dtype=torch.float64)
    flow = torch.tensor([[0.2, 0.3, 0.5], [0.0, 0.0, 0.0]], dtype=torch.float64)
    new = cost_attention_update(w, flow, COST, mode="normalize")
    assert torch.isfinite(new).all() and new.tolist() == pytest.approx([1.0, 0.0])
    # all costs zero: uniform
    assert cost_attention_update(W_S, FLOW, torch.zeros(2, 3), mode="normalize").tolist() == pytest.approx([0.5, 0.5])


def test_cost_attention_update_keeps_dtype_and_validates():
    new = cost_attention_update(W_S.float(), FLOW, COST)
    assert new.dtype == torch.float32
    with pytest.raises(ValueError, match="mode='max'"):
        cost_attention_update(W_S, FLOW, COST, mode="max")
    with pytest.raises(ValueError, match="side='both'"):
        cost_attention_update(W_S, FLOW, COST, side="both")
    with pytest.raises(ValueError, match="temperature=0"):
        cost_attention_update(W_S, FLOW, COST, temperature=0)
    with pytest.raises(ValueError, match="do not match"):
        cost_attention_update(W_T, FLOW, COST, side="student")


# ---------------------------------------------------------------------------- the component
def fake_output(num_layers, batch, length, hidden, heads, d_head, requires_grad=False):
    states = tuple(torch.randn(batch, length, hidden, requires_grad=requires_grad) for _ in range(num_layers + 1))
    queries = tuple(torch.randn(batch, heads, length, d_head, requires_grad=requires_grad) for _ in range(num_layers))
    keys = tuple(torch.randn(batch, heads, length, d_head, requires_grad=requires_grad) for _ in range(num_layers))
    return SimpleNamespace(hidden_states=states, query_states=queries, key_states=keys, attentions=None)


def naive_scores(out):
    return [q @ k.transpose(-1, -2) / math.sqrt(q.size(-1)) for q, k in zip(out.query_states, out.key_states)]


@pytest.fixture
def emd_setup():
    student = fake_output(2, batch=2, length=5, hidden=3, heads=2, d_head=4, requires_grad=True)
    teacher = fake_output(4, batch=2, length=5, hidden=6, heads=2, d_head=4)
    batch = {"attention_mask": lengths_mask([5, 3], 5)}
    loss = EMDLayerLoss(num_student_layers=2, num_teacher_layers=4, student_dim=3, teacher_dim=6)
    return loss, student, teacher, batch


def test_emd_terms_equal_an_independent_exact_solution(emd_setup):
    loss, student, teacher, batch = emd_setup
    terms = loss(student, [teacher], batch)
    assert set(terms) == {"emd_hidden", "emd_attention"}
    mask = batch["attention_mask"]
    with torch.no_grad():
        hidden_cost = np.array(
            [
                [masked_mse(loss.projection(s), te, mask).item() for te in teacher.hidden_states[1:]]
                for s in student.hidden_states[1:]
            ]
        )
        attention_cost = np.array(
            [[masked_mse(s, te, pair_mask(mask)).item() for te in naive_scores(teacher)] for s in naive_scores(student)]
        )
    uniform_s, uniform_t = np.full(2, 0.5), np.full(4, 0.25)
    assert terms["emd_hidden"].item() == pytest.approx(linprog_transport(uniform_s, uniform_t, hidden_cost)[0], rel=1e-5)
    attention_value = linprog_transport(uniform_s, uniform_t, attention_cost)[0]
    assert terms["emd_attention"].item() == pytest.approx(attention_value, rel=1e-5)
    np.testing.assert_allclose(loss.last_costs["hidden"].numpy(), hidden_cost, rtol=1e-5)


def test_emd_gradient_reaches_student_and_projection_only_through_costs(emd_setup):
    loss, student, teacher, batch = emd_setup
    terms = loss(student, [teacher], batch)
    (terms["emd_hidden"] + terms["emd_attention"]).backward()
    assert student.hidden_states[1].grad is not None and student.hidden_states[1].grad.abs().sum() > 0
    assert student.query_states[0].grad is not None and student.key_states[1].grad is not None
    assert loss.projection.weight.grad is not None
    assert student.hidden_states[0].grad is None  # embeddings are not part of the EMD terms
    assert not loss.last_flows["hidden"].requires_grad


def test_emd_padding_does_not_change_the_terms(emd_setup):
    loss, student, teacher, batch = emd_setup
    reference = loss(student, [teacher], batch)

    def pad(out, extra):
        def grow(x, dim):
            shape = list(x.shape)
            shape[dim] = extra
            return torch.cat([x.detach(), 100 * torch.randn(shape)], dim=dim)

        return SimpleNamespace(
            hidden_states=tuple(grow(h, 1) for h in out.hidden_states),
            query_states=tuple(grow(q, 2) for q in out.query_states),
            key_states=tuple(grow(k, 2) for k in out.key_states),
            attentions=None,
        )

    padded_batch = {"attention_mask": torch.cat([batch["attention_mask"], torch.zeros(2, 2, dtype=torch.long)], dim=1)}
    padded = loss(pad(student, 2), [pad(teacher, 2)], padded_batch)
    for name in reference:
        assert padded[name].item() == pytest.approx(reference[name].item(), rel=1e-5)


def test_update_weights_separate_and_averaged(emd_setup):
    loss, student, teacher, batch = emd_setup
    loss(student, [teacher], batch)
    flows, costs = dict(loss.last_flows), dict(loss.last_costs)
    uniform_s, uniform_t = torch.full((2,), 0.5, dtype=torch.float64), torch.full((4,), 0.25, dtype=torch.float64)
    expected = {
        kind: (
            cost_attention_update(uniform_s, flows[kind], costs[kind], 2.0, "softmax", "student"),
            cost_attention_update(uniform_t, flows[kind], costs[kind], 2.0, "softmax", "teacher"),
        )
        for kind in ("hidden", "attention")
    }
    new = loss.update_weights(temperature=2.0, mode="softmax", separate=True)
    for kind in ("hidden", "attention"):
        torch.testing.assert_close(new[f"{kind}_student"], expected[kind][0])
        torch.testing.assert_close(new[f"{kind}_teacher"], expected[kind][1])
        assert new[f"{kind}_student"].sum().item() == pytest.approx(1.0)
    assert not torch.allclose(new["hidden_student"], new["attention_student"])

    averaged = EMDLayerLoss(2, 4, 3, 6)
    averaged.load_state_dict({k: v for k, v in loss.state_dict().items() if "projection" in k}, strict=False)
    averaged(student, [teacher], batch)
    result = averaged.update_weights(temperature=2.0, mode="softmax", separate=False)
    for side, index in (("student", 0), ("teacher", 1)):
        mean = (expected["hidden"][index] + expected["attention"][index]) / 2
        torch.testing.assert_close(result[f"hidden_{side}"], mean)
        torch.testing.assert_close(result[f"attention_{side}"], mean)


def test_update_weights_smooth_is_one_more_softmax_after_the_average(emd_setup):
    """The official code's add_softmax: masses = softmax(averaged masses), e.g. (0.9, 0.1) -> (0.690, 0.310)."""
    loss, student, teacher, batch = emd_setup
    plain = EMDLayerLoss(2, 4, 3, 6)
    plain.load_state_dict(loss.state_dict())
    loss(student, [teacher], batch)
    plain(student, [teacher], batch)
    averaged = plain.update_weights(temperature=1.0, mode="softmax")
    smoothed = loss.update_weights(temperature=1.0, mode="softmax", smooth=True)
    for name, weights in averaged.items():
        exp = [math.exp(w) for w in weights.tolist()]
        torch.testing.assert_close(smoothed[name], torch.tensor([e / sum(exp) for e in exp], dtype=torch.float64))
        assert smoothed[name].max() / smoothed[name].min() <= math.e  # masses in [0, 1]: within a factor e
    # the hand value in the docstring
    assert torch.softmax(torch.tensor([0.9, 0.1]), 0).tolist() == pytest.approx([0.6900, 0.3100], abs=1e-4)


def test_update_weights_averages_micro_batches_and_skips_eval(emd_setup):
    loss, student, teacher, batch = emd_setup
    other_student = fake_output(2, batch=2, length=5, hidden=3, heads=2, d_head=4)
    loss(student, [teacher], batch)
    first = loss.last_costs["hidden"].clone()
    loss(other_student, [teacher], batch)
    mean_cost = (first + loss.last_costs["hidden"]) / 2
    with torch.no_grad():  # evaluation forwards are not remembered for the update
        loss(fake_output(2, batch=2, length=5, hidden=3, heads=2, d_head=4), [teacher], batch)
    loss.eval()
    loss(fake_output(2, batch=2, length=5, hidden=3, heads=2, d_head=4), [teacher], batch)
    loss.train()
    uniform_s, uniform_t = torch.full((2,), 0.5, dtype=torch.float64), torch.full((4,), 0.25, dtype=torch.float64)
    flow = earth_movers_flow(uniform_s, uniform_t, mean_cost)
    new = loss.update_weights(temperature=1.0, mode="normalize", separate=True)
    for side, uniform in (("student", uniform_s), ("teacher", uniform_t)):
        expected = cost_attention_update(uniform, flow, mean_cost, 1.0, "normalize", side)
        torch.testing.assert_close(new[f"hidden_{side}"], expected)
    # nothing seen since: a second update changes nothing
    assert all(torch.equal(new[k], v) for k, v in loss.update_weights(temperature=1.0, mode="normalize").items())


def test_masses_start_uniform_and_survive_state_dict(emd_setup, tmp_path):
    loss, student, teacher, batch = emd_setup
    for name, size in (("hidden_student", 2), ("hidden_teacher", 4), ("attention_student", 2), ("attention_teacher", 4)):
        torch.testing.assert_close(getattr(loss, f"{name}_weights"), torch.full((size,), 1 / size, dtype=torch.float64))
    loss(student, [teacher], batch)
    loss.update_weights(temperature=1.0, mode="softmax", separate=True)
    path = tmp_path / "emd.pt"
    torch.save(loss.state_dict(), path)
    restored = EMDLayerLoss(2, 4, 3, 6)
    restored.load_state_dict(torch.load(path))
    for key, value in loss.state_dict().items():
        assert torch.equal(restored.state_dict()[key], value), key
    assert {"hidden_student_weights", "attention_teacher_weights", "projection.weight"} <= set(loss.state_dict())
    assert not torch.allclose(restored.hidden_student_weights, torch.full((2,), 0.5, dtype=torch.float64))
    # the restored masses drive the flow exactly as before
    again = loss(student, [teacher], batch)["emd_hidden"].item()
    assert restored(student, [teacher], batch)["emd_hidden"].item() == pytest.approx(again)


def test_emd_options_and_checks():
    hidden_only = EMDLayerLoss(2, 4, 3, 6, attention=False)
    assert hidden_only.requires == {"hidden_states"} and EMDLayerLoss.requires == {"hidden_states", "query_key"}
    assert EMDLayerLoss(2, 4, 3, 3, hidden=False).requires == {"query_key"}
    assert EMDLayerLoss(2, 4, 3, 3, hidden=False).projection is None
    with pytest.raises(ValueError, match="nothing to do"):
        EMDLayerLoss(2, 4, 3, 6, hidden=False, attention=False)
    student = fake_output(2, batch=1, length=3, hidden=3, heads=2, d_head=4)
    teacher = fake_output(4, batch=1, length=3, hidden=6, heads=4, d_head=2)
    batch = {"attention_mask": torch.ones(1, 3)}
    with pytest.raises(ValueError, match="2 attention heads and the teacher 4"):
        EMDLayerLoss(2, 4, 3, 6)(student, [teacher], batch)
    terms = EMDLayerLoss(2, 4, 3, 6, head_reduction="mean")(student, [teacher], batch)
    assert torch.isfinite(terms["emd_attention"])
    with pytest.raises(ValueError, match="built for 3 student layers, but the student returned 2"):
        EMDLayerLoss(3, 4, 3, 6, attention=False)(student, [teacher], batch)
    with pytest.raises(ValueError, match="mode='max'"):
        hidden_only.update_weights(mode="max")


def test_emd_on_a_student_copied_from_the_teacher(tiny_teacher, tiny_tokenizer):
    from hf_distill import CrossEncoderModel

    student = CrossEncoderModel.from_teacher(tiny_teacher, num_layers=2, strategy="first").eval()
    pairs = (["a man plays", "the dog runs in the park"], ["music", "a cat"])
    batch = dict(tiny_tokenizer(*pairs, padding=True, return_tensors="pt"))
    flags = dict(output_hidden_states=True, output_query_key=True)
    with torch.no_grad():
        s_out, t_out = student(**batch, **flags), tiny_teacher(**batch, **flags)
    d = tiny_teacher.config.encoder.hidden_size
    loss = EMDLayerLoss(2, 6, d, d)
    terms = loss(s_out, [t_out], batch)
    for kind in ("hidden", "attention"):
        cost = loss.last_costs[kind]
        assert cost.shape == (2, 6)
        assert cost[0, 0].item() == pytest.approx(0.0, abs=1e-6) and cost[1, 1].item() == pytest.approx(0.0, abs=1e-6)
        assert (cost[0, 1:] > 0).all() and terms[f"emd_{kind}"].item() > 0


def test_cost_matrix_stays_float32_under_autocast():
    student, teacher = torch.randn(2, 2, 6, 16) + 3.0, torch.randn(3, 2, 6, 16) + 3.0
    mask = lengths_mask([6, 4], 6)
    naive = torch.tensor([[masked_mse(s, te, mask).item() for te in teacher] for s in student])
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        cost = layer_cost_matrix(student, teacher, mask)
    assert cost.dtype == torch.float32
    torch.testing.assert_close(cost, naive, rtol=1e-5, atol=1e-5)
