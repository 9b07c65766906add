"""BERT-EMD: many-to-many layer distillation by Earth Mover's Distance, with cost attention.

For hidden states (blocks 1..L, after a learned projection W_h) and, separately, for the
pre-softmax attention scores:

    D_ij = MSE(student layer i, teacher layer j)          all (i, j) at once, real tokens only
    F    = argmin_{F >= 0, F 1 = w_S, F^T 1 = w_T} sum_ij F_ij D_ij   (exact, POT's ot.emd, float64,
                                                                       on a detached copy of D)
    loss = sum_ij F_ij D_ij                              (gradient through D only: F is a constant)

The layer masses w_S (L_S) and w_T (L_T) each sum to 1, start uniform, and are re-estimated
after each optimizer step by cost attention (`cost_attention_update`), as the official code's
`get_new_layer_weight` does:

    c_i = sum_j F_ij D_ij,  r_i = c_i / w_S,i,  w~_i = (sum_k r_k) / r_i,
    w_S = softmax(w~ / tau_emd)     ("softmax": `bert-emd/emd_task_distill.py` of the official code)
        or w~ / sum_k w~_k          ("normalize": `bert_emd/emd_task_distill.py`, the other copy there)

and the teacher side alike over the columns of F * D. Layers with r_i = 0 get w~_i = 0, as in
the official code (which skips them to avoid dividing by zero); a layer with no mass left
(w_i = 0) is treated the same way instead of producing NaN.

The embedding term is not part of EMD here: use `EmbeddingLoss` beside `EMDLayerLoss`.

References:
    Li et al., "BERT-EMD: Many-to-Many Layer Mapping for BERT Compression with Earth Mover's
    Distance", EMNLP 2020; official code github.com/lxk00/BERT-EMD (`emd_task_distill.py`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .base import LossComponent, Term
from .emd_costs import layer_cost_matrix, score_cost_matrix, score_cost_method
from .layers import _attention_mask, make_projection, query_key_states

__all__ = [
    "COST_ATTENTION_MODES",
    "EMDLayerLoss",
    "cost_attention_update",
    "earth_movers_flow",
    "layer_cost_matrix",
    "score_cost_matrix",
    "score_cost_method",
]

COST_ATTENTION_MODES = ("softmax", "normalize")
_SIDES = ("student", "teacher")
_KINDS = ("hidden", "attention")


def _as_float64_numpy(values, name: str) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().to("cpu", torch.float64).numpy()
    array = np.ascontiguousarray(np.asarray(values, dtype=np.float64))
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or inf values; the EMD flow needs finite masses and costs.")
    return array


def earth_movers_flow(student_weights, teacher_weights, cost: torch.Tensor) -> torch.Tensor:
    """Exact optimal transport plan F (L_S, L_T) between the layer masses under `cost`.

    Solved by `ot.emd` in float64 on CPU from a detached copy of the cost; the masses are
    renormalised to sum to 1. Returns a tensor without gradient on the cost's device and dtype.
    """
    a = _as_float64_numpy(student_weights, "student_weights")
    b = _as_float64_numpy(teacher_weights, "teacher_weights")
    matrix = _as_float64_numpy(cost, "cost")
    if matrix.shape != (a.size, b.size):
        raise ValueError(f"cost of shape {matrix.shape} does not match the masses: expected ({a.size}, {b.size}).")
    for name, mass in (("student_weights", a), ("teacher_weights", b)):
        if (mass < 0).any() or mass.sum() <= 0:
            raise ValueError(f"{name}={mass.tolist()} must be non-negative with a positive sum.")
    import ot  # POT pulls in scipy and more: loaded when a transport is first solved, not at import

    flow, log = ot.emd(a / a.sum(), b / b.sum(), matrix, log=True)
    if log.get("warning"):
        warnings.warn(f"ot.emd: {log['warning']}", RuntimeWarning, stacklevel=2)
    device = cost.device if isinstance(cost, torch.Tensor) else None
    dtype = cost.dtype if isinstance(cost, torch.Tensor) else torch.float64
    return torch.as_tensor(flow, dtype=dtype, device=device)


def cost_attention_update(
    weights: torch.Tensor,
    flow: torch.Tensor,
    cost: torch.Tensor,
    temperature: float = 1.0,
    mode: str = "softmax",
    side: str = "student",
) -> torch.Tensor:
    """New layer masses for one side by BERT-EMD's cost attention (see the module docstring).

    Args:
        weights: the current masses of that side, (L_S,) or (L_T,).
        flow, cost: F and D of the last step, (L_S, L_T).
        temperature: tau_emd > 0 for mode="softmax" (ignored by "normalize").
        mode: "softmax" (softmax(w~ / tau)) or "normalize" (w~ / sum w~).
        side: "student" (rows of F * D) or "teacher" (columns).

    Returns:
        masses summing to 1, same dtype and device as `weights` (computed in float64).
    """
    if mode not in COST_ATTENTION_MODES:
        raise ValueError(f"mode={mode!r} is not valid; choose one of {', '.join(map(repr, COST_ATTENTION_MODES))}.")
    if side not in _SIDES:
        raise ValueError(f"side={side!r} is not valid; choose 'student' or 'teacher'.")
    if not temperature > 0:
        raise ValueError(f"temperature={temperature!r} must be > 0.")
    w = weights.detach().to(torch.float64)
    transported = flow.detach().to(w.device, torch.float64) * cost.detach().to(w.device, torch.float64)
    contribution = transported.sum(1) if side == "student" else transported.sum(0)
    if contribution.shape != w.shape:
        raise ValueError(
            f"weights of shape {tuple(w.shape)} do not match the {side} side of a flow of shape {tuple(flow.shape)}."
        )
    ratio = torch.where(w > 0, contribution / torch.where(w > 0, w, torch.ones_like(w)), torch.zeros_like(w))
    safe_ratio = torch.where(ratio > 0, ratio, torch.ones_like(ratio))
    tilde = torch.where(ratio > 0, ratio.sum() / safe_ratio, torch.zeros_like(ratio))
    if mode == "softmax":
        new = F.softmax(tilde / temperature, dim=0)
    elif tilde.sum() > 0:
        new = tilde / tilde.sum()
    else:  # every layer transported at zero cost: nothing to prefer
        new = torch.full_like(tilde, 1.0 / tilde.numel())
    return new.to(device=weights.device, dtype=weights.dtype)


def _distributed_mean(tensor: torch.Tensor) -> torch.Tensor:
    """Average across DDP ranks (a collective: every rank must call it); identity when not distributed."""
    if torch.distributed.is_available() and torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
        tensor = tensor.clone()
        torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.SUM)
        tensor /= torch.distributed.get_world_size()
    return tensor


class EMDLayerLoss(LossComponent):
    """BERT-EMD layer loss: terms `emd_hidden` and `emd_attention` (each sum(F * D), see the module docstring).

    Holds the layer masses as buffers (`hidden_student_weights`, `hidden_teacher_weights`,
    `attention_student_weights`, `attention_teacher_weights`, float64, uniform at start), so the
    trainer's checkpoint of `state_dict()` restores them, and the hidden-state projection W_h
    (learned Linear(d_S, d_T), identity-initialised when the sizes match).

    Each training forward (module in training mode, gradients enabled) adds its detached cost
    matrices to a running sum; `update_weights` (called by `CostAttentionCallback` after each
    optimizer step, on every rank) averages them over the micro-batches of the step and over DDP
    ranks, re-solves the flow with the current masses (with one micro-batch and one process this
    is exactly the flow of the loss) and applies cost attention. `last_flows` / `last_costs` keep
    the latest F and D per kind for plots.

    Args:
        num_student_layers, num_teacher_layers: L_S and L_T (transformer blocks).
        student_dim, teacher_dim: hidden sizes.
        hidden, attention: which EMD terms to compute.
        projection: learn W_h; False needs equal hidden sizes.
        head_reduction: None (equal head counts required) or "mean" (average both sides' heads
            down to gcd(H_S, H_T) before the attention costs).
    """

    terms = (
        Term("emd_hidden", "emd_weight", "Σ F·D over all student × teacher hidden layer pairs, F the EMD flow"),
        Term("emd_attention", "emd_weight", "Σ F·D over all student × teacher attention layer pairs, F the EMD flow"),
    )
    requires: set[str] = {"hidden_states", "query_key"}
    layer_outputs = True
    method = "bert_emd"
    switch = "emd_weight"
    switch_help = "beta (>= 0): weight of the BERT-EMD hidden and attention losses (many-to-many layer mapping)."

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config) -> "EMDLayerLoss":
        return cls(
            student_config.num_hidden_layers, teacher_config.num_hidden_layers, student_config.hidden_size,
            teacher_config.hidden_size,
        )

    def declared_terms(self) -> tuple[Term, ...]:
        return tuple(term for term in self.terms if term.name[len("emd_"):] in self.kinds)

    def __init__(
        self,
        num_student_layers: int,
        num_teacher_layers: int,
        student_dim: int,
        teacher_dim: int,
        hidden: bool = True,
        attention: bool = True,
        projection: bool = True,
        head_reduction: str | None = None,
    ):
        super().__init__()
        for name, value in (("num_student_layers", num_student_layers), ("num_teacher_layers", num_teacher_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be an integer >= 1.")
        if not (hidden or attention):
            raise ValueError("hidden=False and attention=False leave EMDLayerLoss nothing to do; enable at least one.")
        if head_reduction not in (None, "mean"):
            raise ValueError(f"head_reduction={head_reduction!r} is not valid; choose None or 'mean'.")
        self.num_student_layers, self.num_teacher_layers = num_student_layers, num_teacher_layers
        self.student_dim, self.teacher_dim = student_dim, teacher_dim
        self.kinds = tuple(kind for kind, on in (("hidden", hidden), ("attention", attention)) if on)
        self.head_reduction = head_reduction
        # Only what the enabled terms need (the class attribute lists both).
        self.requires = ({"hidden_states"} if hidden else set()) | ({"query_key"} if attention else set())
        self.projection = make_projection(student_dim, teacher_dim, projection) if hidden else None
        for kind in _KINDS:
            for side, depth in (("student", num_student_layers), ("teacher", num_teacher_layers)):
                self.register_buffer(f"{kind}_{side}_weights", torch.full((depth,), 1.0 / depth, dtype=torch.float64))
        self.last_flows: dict[str, torch.Tensor] = {}
        self.last_costs: dict[str, torch.Tensor] = {}
        self._cost_sums: dict[str, torch.Tensor] = {}
        self._cost_counts: dict[str, int] = {}

    # ------------------------------------------------------------------ masses
    def masses(self, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(w_S, w_T) for "hidden" or "attention"."""
        return getattr(self, f"{kind}_student_weights"), getattr(self, f"{kind}_teacher_weights")

    def layer_weights(self) -> dict[str, torch.Tensor]:
        """Copies of the masses of the enabled kinds, keyed "hidden_student", "attention_teacher", ..."""
        return {
            f"{kind}_{side}": getattr(self, f"{kind}_{side}_weights").detach().clone() for kind in self.kinds for side in _SIDES
        }

    # ------------------------------------------------------------------ costs
    def _check_layers(self, count: int, expected: int, who: str, what: str) -> None:
        if count != expected:
            raise ValueError(f"EMDLayerLoss was built for {expected} {who} layers, but the {who} returned {count} {what}.")

    def hidden_cost(self, student_out, teacher_out, mask: torch.Tensor | None) -> torch.Tensor:
        """(L_S, L_T) costs between projected student blocks and teacher blocks (embeddings excluded)."""
        student, teacher = student_out.hidden_states, teacher_out.hidden_states
        if student is None or teacher is None:
            raise ValueError(
                "EMDLayerLoss(hidden=True) needs hidden_states from both models; run with output_hidden_states=True."
            )
        self._check_layers(len(student) - 1, self.num_student_layers, "student", "hidden layers")
        self._check_layers(len(teacher) - 1, self.num_teacher_layers, "teacher", "hidden layers")
        for who, states, dim in (("student", student, self.student_dim), ("teacher", teacher, self.teacher_dim)):
            if states[-1].size(-1) != dim:
                raise ValueError(
                    f"EMDLayerLoss: the {who}'s hidden size is {states[-1].size(-1)}, but the component was built for {dim}."
                )
        projected = self.projection(torch.stack(list(student[1:])))
        return layer_cost_matrix(projected, torch.stack(list(teacher[1:])).detach(), mask)

    def attention_cost(self, student_out, teacher_out, mask: torch.Tensor | None) -> torch.Tensor:
        """(L_S, L_T) costs between pre-softmax attention scores, padded rows/columns excluded."""
        states = {}
        for who, out in (("student", student_out), ("teacher", teacher_out)):
            states[who] = query_key_states(out)
            if states[who] is None:
                raise ValueError(
                    f"EMDLayerLoss(attention=True) needs the {who}'s query_states/key_states; run the forward with "
                    "output_query_key=True."
                )
        self._check_layers(len(states["student"][0]), self.num_student_layers, "student", "attention layers")
        self._check_layers(len(states["teacher"][0]), self.num_teacher_layers, "teacher", "attention layers")
        student_heads, teacher_heads = states["student"][0][0].size(1), states["teacher"][0][0].size(1)
        heads = None
        if student_heads != teacher_heads:
            if self.head_reduction is None:
                raise ValueError(
                    f"EMDLayerLoss: the student has {student_heads} attention heads and the teacher {teacher_heads}; "
                    "they must match, or pass head_reduction='mean' to average both down to a common count."
                )
            heads = int(np.gcd(student_heads, teacher_heads))
        teacher_queries, teacher_keys = ([state.detach() for state in side] for side in states["teacher"])
        return score_cost_matrix(*states["student"], teacher_queries, teacher_keys, mask, heads=heads)

    # ------------------------------------------------------------------ forward
    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        teacher_out = teacher_outs[0]
        mask = _attention_mask(batch)
        terms: dict[str, torch.Tensor] = {}
        for kind in self.kinds:
            cost = (self.hidden_cost if kind == "hidden" else self.attention_cost)(student_out, teacher_out, mask)
            flow = earth_movers_flow(*self.masses(kind), cost)
            terms[f"emd_{kind}"] = (flow * cost).sum()
            self._remember(kind, flow, cost)
        return terms

    def _remember(self, kind: str, flow: torch.Tensor, cost: torch.Tensor) -> None:
        self.last_flows[kind] = flow.detach()
        self.last_costs[kind] = cost.detach()
        if self.training and torch.is_grad_enabled():
            previous = self._cost_sums.get(kind)
            self._cost_sums[kind] = cost.detach().clone() if previous is None else previous + cost.detach()
            self._cost_counts[kind] = self._cost_counts.get(kind, 0) + 1

    # ------------------------------------------------------------------ cost attention
    @torch.no_grad()
    def update_weights(
        self, temperature: float = 1.0, mode: str = "softmax", separate: bool = False, smooth: bool = False
    ) -> dict[str, torch.Tensor]:
        """Apply cost attention with the costs seen since the last update; returns the new masses.

        Attention and hidden masses are updated separately, then (unless `separate`) both kinds
        take the average of the two results, as in the official code. With `smooth`, every mass
        vector then goes through one more softmax(w) (the official code's `add_softmax`, on by
        default there): masses in [0, 1] come out within a factor e of each other, so the
        weights cannot collapse onto one layer. Does nothing when no
        training forward ran since the last update. Under DDP every rank must call it (the costs
        are averaged across ranks so the masses stay identical everywhere).
        """
        if mode not in COST_ATTENTION_MODES:
            raise ValueError(f"mode={mode!r} is not valid; choose one of {', '.join(map(repr, COST_ATTENTION_MODES))}.")
        if not temperature > 0:
            raise ValueError(f"temperature={temperature!r} must be > 0.")
        updated: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for kind in self.kinds:
            if kind not in self._cost_sums:
                continue
            cost = _distributed_mean(self._cost_sums[kind] / self._cost_counts[kind])
            student_weights, teacher_weights = self.masses(kind)
            flow = earth_movers_flow(student_weights, teacher_weights, cost)
            updated[kind] = (
                cost_attention_update(student_weights, flow, cost, temperature, mode, side="student"),
                cost_attention_update(teacher_weights, flow, cost, temperature, mode, side="teacher"),
            )
        if not separate and len(updated) == 2:
            average = tuple((updated["hidden"][k] + updated["attention"][k]) / 2 for k in range(2))
            updated = {kind: average for kind in updated}
        if smooth:
            updated = {kind: tuple(F.softmax(w, dim=0) for w in pair) for kind, pair in updated.items()}
        for kind, (student_weights, teacher_weights) in updated.items():
            getattr(self, f"{kind}_student_weights").copy_(student_weights)
            getattr(self, f"{kind}_teacher_weights").copy_(teacher_weights)
        self._cost_sums.clear()
        self._cost_counts.clear()
        return self.layer_weights()
