"""BERT-EMD's cost matrices: D_ij = MSE(student layer i, teacher layer j) for every pair at once.

Hidden states: one batched masked MSE over all (i, j) pairs (`layer_cost_matrix`). Attention
scores: the MSE of Q K^T / sqrt(d) without materialising every layer's score tensor when the
factorised form is cheaper (`score_cost_matrix`, `score_cost_method`). Real tokens only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .layers import _broadcast_mask, trailing_mask

__all__ = ["layer_cost_matrix", "score_cost_matrix", "score_cost_method"]


def _stack_layers(layers: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
    return layers if isinstance(layers, torch.Tensor) else torch.stack(list(layers))


def layer_cost_matrix(
    student_layers: torch.Tensor | Sequence[torch.Tensor],
    teacher_layers: torch.Tensor | Sequence[torch.Tensor],
    mask: torch.Tensor | None = None,
    center: bool = True,
) -> torch.Tensor:
    """(L_S, L_T) matrix of masked MSEs between every student layer and every teacher layer.

    D_ij equals `masked_mse(student_layers[i], teacher_layers[j], mask)`, computed in one pass
    through ||a_i||^2 + ||b_j||^2 - 2 a_i . b_j on the masked, flattened layers (one matrix
    product, memory of the inputs only). Float32 even under autocast; gradients flow to both inputs.

    Args:
        student_layers: (L_S, *shape) tensor or a sequence of L_S tensors of one shape.
        teacher_layers: (L_T, *shape) tensor or a sequence of L_T tensors of the same shape.
        mask: None, or a mask broadcastable to `shape` after trailing singleton dims are added:
            (B, T) for hidden states (B, T, d), `pair_mask(attention_mask)` for scores (B, H, T, T).
        center: subtract the teacher layers' mean from both sides first (D is unchanged; it limits
            float32 cancellation when all layers share a large common part, as BERT hidden states
            do; one more pass over the inputs).
    """
    student = _stack_layers(student_layers)
    # float32 even under autocast: the expansion below cancels badly in half precision
    with torch.autocast(device_type=student.device.type, enabled=False):
        return _layer_cost_matrix(student.float(), _stack_layers(teacher_layers).float().to(student.device), mask, center)


def _layer_cost_matrix(
    student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor | None, center: bool
) -> torch.Tensor:
    if student.shape[1:] != teacher.shape[1:]:
        raise ValueError(
            f"student layers of shape {tuple(student.shape[1:])} and teacher layers of shape {tuple(teacher.shape[1:])} "
            "differ; project the student first (hidden sizes) or match heads/lengths."
        )
    layer_shape = student.shape[1:]
    if mask is None:
        count = torch.tensor(float(layer_shape.numel()), device=student.device)
    else:
        weights = _broadcast_mask(mask, layer_shape, student.device)  # checks the shapes
        small = trailing_mask(mask, len(layer_shape), student.device)
        # each mask entry is repeated alike along the broadcast dims: count without expanding
        count = (small.sum() * (weights.numel() / small.numel())).clamp(min=1e-12)
        padded = small <= 0
        student, teacher = student.masked_fill(padded, 0.0), teacher.masked_fill(padded, 0.0)
        if not bool(((small == 0) | (small == 1)).all()):  # soft weights: scale both sides by sqrt(w)
            student, teacher = student * small.sqrt(), teacher * small.sqrt()
    a, b = student.flatten(1), teacher.flatten(1)
    if center:
        reference = b.detach().mean(0, keepdim=True)
        a, b = a - reference, b - reference
    return _pairwise_squared_distances(a, b) / count


def _pairwise_squared_distances(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """||a_i - b_j||^2 for rows a (L_S, N) and b (L_T, N), as ||a_i||^2 + ||b_j||^2 - 2 a_i . b_j (one product).

    Squared norms through vector_norm: no N-sized temporary, and a zero gradient at a zero row.
    """
    a_norms, b_norms = torch.linalg.vector_norm(a, dim=1).square(), torch.linalg.vector_norm(b, dim=1).square()
    return (a_norms.unsqueeze(1) + b_norms.unsqueeze(0) - 2.0 * (a @ b.T)).clamp(min=0.0)


def _score_factors(
    queries: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor | None, heads: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(L, B, H, T, d) queries and keys -> (L, B, heads, T, g * d) factors whose products are the scores.

    Q K^T / sqrt(d) averaged over each group of g = H / heads heads is the product of the group's
    queries and keys laid side by side, scaled by 1 / (g sqrt(d)); the pair mask m_t m_t'
    factorises, so padded queries and keys are scaled by sqrt(m) (zeroed for a 0/1 mask).
    """
    layers, batch, total, length, width = queries.shape
    if total % heads:
        raise ValueError(f"cannot reduce {total} heads to {heads}: {heads} must divide {total}.")
    group = total // heads

    def side_by_side(states: torch.Tensor) -> torch.Tensor:
        if group == 1:
            return states
        states = states.reshape(layers, batch, heads, group, length, width).transpose(3, 4)
        return states.reshape(layers, batch, heads, length, group * width)

    queries = side_by_side(queries) / (group * math.sqrt(width))
    keys = side_by_side(keys)
    if mask is not None:
        root = mask.to(device=queries.device, dtype=queries.dtype).sqrt()[None, :, None, :, None]
        queries, keys = queries * root, keys * root
    return queries, keys


def score_cost_method(student_layers: int, teacher_layers: int, length: int, width: int) -> str:
    """"gram" or "maps": the cheaper way for `score_cost_matrix` to build L_S x L_T attention costs.

    Gram matrices cost ~L_S L_T T d^2, the maps ~(L_S + L_T) T^2 d plus passes over them; the
    factor 1.5 is fitted to `benchmarks/step_breakdown.py` part 3 (2-6 x 6 layers at d 32 and
    4-6 x 12 at d 64, T 64-256: the pick is the faster way in 17 of its 18 rows, 3% off in the other).
    """
    return "gram" if length >= 1.5 * width * student_layers * teacher_layers / (student_layers + teacher_layers) else "maps"


def score_cost_matrix(
    student_queries: torch.Tensor | Sequence[torch.Tensor],
    student_keys: torch.Tensor | Sequence[torch.Tensor],
    teacher_queries: torch.Tensor | Sequence[torch.Tensor],
    teacher_keys: torch.Tensor | Sequence[torch.Tensor],
    mask: torch.Tensor | None = None,
    heads: int | None = None,
    method: str = "auto",
) -> torch.Tensor:
    """(L_S, L_T) masked MSEs between the pre-softmax attention scores of every student and teacher layer.

    Equals `layer_cost_matrix(reduce_heads(S), reduce_heads(S'), pair_mask(mask), center=False)` with
    S = Q K^T / sqrt(d_head) per layer. The pair mask factorises, so the padded queries and keys are
    zeroed first and no pass over the maps ever masks them. Then either ("gram") no T x T map is
    built at all: <S_i, S'_j> = sum over (example, head) of <Q_i^T Q'_j, K_i^T K'_j> (d x d' Gram
    matrices), O(L_S L_T B H T d d') work and B H d d' memory per layer pair; or ("maps") the
    L_S + L_T maps are built and every pair's dot product is one matrix product. Gram matrices cost
    ~L_S L_T T d^2 and the maps ~(L_S + L_T) T^2 d, so "auto" picks Gram when
    T >= 1.5 d L_S L_T / (L_S + L_T) (`score_cost_method`; fitted to both ways timed side by side
    in `benchmarks/step_breakdown.py`, part 3).

    Args:
        student_queries, student_keys: (L_S, B, H_S, T, d_S) tensors or sequences of (B, H_S, T, d_S).
        teacher_queries, teacher_keys: (L_T, B, H_T, T, d_T) likewise.
        mask: None or a (B, T) token mask (0/1 or soft weights), as for `pair_mask`.
        heads: average both sides' heads down to this many (it must divide H_S and H_T); None: H_S == H_T.
        method: "gram", "maps" or "auto".
    """
    if method not in ("auto", "gram", "maps"):
        raise ValueError(f"method={method!r} is not valid; choose 'auto', 'gram' or 'maps'.")
    with torch.autocast(device_type=_stack_layers(student_queries).device.type, enabled=False):
        qs, ks = (_stack_layers(x).float() for x in (student_queries, student_keys))
        device = qs.device
        qt, kt = (_stack_layers(x).float().to(device) for x in (teacher_queries, teacher_keys))
        if qs.shape[1:-1] != ks.shape[1:-1] or qt.shape[1:-1] != kt.shape[1:-1] or qs.shape[1] != qt.shape[1] or qs.shape[3] != qt.shape[3]:
            raise ValueError(
                f"student queries/keys of shapes {tuple(qs.shape)}/{tuple(ks.shape)} and teacher queries/keys of shapes "
                f"{tuple(qt.shape)}/{tuple(kt.shape)} do not describe score maps of one shape (batch and length must match)."
            )
        if heads is None:
            if qs.size(2) != qt.size(2):
                raise ValueError(
                    f"the student has {qs.size(2)} attention heads and the teacher {qt.size(2)}; pass heads= to reduce both."
                )
            heads = qs.size(2)
        widths = [x.size(-1) * x.size(2) // heads for x in (qs, qt)]  # a head group's queries side by side
        if method == "auto":
            method = score_cost_method(qs.size(0), qt.size(0), qs.size(3), max(widths))
        use_maps = method == "maps"
        # padded queries and keys zeroed: the maps are zero off the real (query, key) pairs, no mask pass needed
        qs, ks = _score_factors(qs, ks, mask, heads)
        qt, kt = _score_factors(qt, kt, mask, heads)
        batch, length = qs.size(1), qs.size(3)
        if mask is None:
            count = torch.tensor(float(batch * heads * length * length), device=device)
        else:
            count = (heads * mask.to(device=device, dtype=torch.float32).sum(1).square().sum()).clamp(min=1e-12)
        if use_maps:
            a, b = ((q @ k.transpose(-1, -2)).flatten(1) for q, k in ((qs, ks), (qt, kt)))
            return _pairwise_squared_distances(a, b) / count
        return _gram_squared_distances(qs, ks, qt, kt) / count


def _gram_squared_distances(qs: torch.Tensor, ks: torch.Tensor, qt: torch.Tensor, kt: torch.Tensor) -> torch.Tensor:
    """(L_S, L_T) ||S_i - S'_j||_F^2 of the score maps S = Q K^T (factors from `_score_factors`), no map built.

    <S_i, S'_j> = sum over (example, head) of <Q_i^T Q'_j, K_i^T K'_j>: Gram matrices of the factors only.
    """
    layers_s, batch, heads, length, width_s = qs.shape
    layers_t, width_t = qt.size(0), qt.size(-1)
    pairs = batch * heads

    def rows(x: torch.Tensor) -> torch.Tensor:  # (L, B, H, T, x) -> (B H, L x, T): every layer's factor as rows
        return x.permute(1, 2, 0, 4, 3).reshape(pairs, -1, length)

    def columns(x: torch.Tensor) -> torch.Tensor:  # (L, B, H, T, y) -> (B H, T, L y)
        return x.permute(1, 2, 3, 0, 4).reshape(pairs, length, -1)

    def own_norms(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:  # ||Q K^T||_F^2 per layer = <Q^T Q, K^T K>
        layers, width = q.size(0), q.size(-1)
        q, k = q.reshape(-1, length, width), k.reshape(-1, length, width)
        grams = torch.bmm(q.transpose(1, 2), q) * torch.bmm(k.transpose(1, 2), k)
        return grams.view(layers, -1).sum(1)

    # every (student layer, teacher layer) Gram block in one product per factor
    cross = torch.bmm(rows(qs), columns(qt)) * torch.bmm(rows(ks), columns(kt))
    cross = cross.view(pairs, layers_s, width_s, layers_t, width_t).sum((0, 2, 4))
    student_norms, teacher_norms = own_norms(qs, ks), own_norms(qt, kt)
    squared = student_norms[:, None] + teacher_norms[None, :] - 2.0 * cross
    return squared.clamp(min=0.0)
