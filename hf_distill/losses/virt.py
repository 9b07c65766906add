"""VIRT: distil a cross-encoder's X<->Y attention into a Siamese student ("virtual interaction").

Li et al., "VIRT: Improving Representation-based Text Matching via Virtual Interaction", EMNLP 2022.
No official code exists; this reading follows the paper (see docs/virt.md):

The Siamese student encodes X and Y separately. At each distilled student layer l and head h,

    M_XY = softmax(Q_X K_Y^T / sqrt(d_head) + mask_Y)       Q_X: layer-l queries computed while encoding X,
                                                            K_Y: layer-l keys computed while encoding Y
    M_YX = softmax(Q_Y K_X^T / sqrt(d_head) + mask_X)

The teacher cross-encoder encodes [CLS] X [SEP] Y [SEP]; its layer-g(l) pre-softmax scores
restricted to rows = X tokens and columns = Y tokens, soft-maxed over those columns (the
teacher's attention sub-block renormalised over Y), give A_XY; A_YX likewise. Then

    virt = mean over mapped layers (l, g(l)) and both directions of
           MSE(M, A) over (head, real row token, real column token) entries

Rows and columns are the pair's real tokens only: special tokens ([CLS], [SEP]) and padding
are excluded on both sides, in the softmax as in the average. Token positions come from the
collator (`PairCollator(virt_alignment=True)`, `hf_distill.alignment`), which builds the
teacher's joint input from the student's own token ids, so the alignment is exact.

The trainer scales the term by `DistillationArguments.virt_weight` (the paper's alpha; 1 is its
best). Inference is unchanged: the loss only reads queries and keys during training.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ..batch_keys import ALIGNMENT_KEYS, ALIGNMENT_PREFIX
from ..mapping import LayerMapping, get_mapping, parse_layer_mapping
from ..modeling.virt_interaction import key_mask_bias, virtual_attention
from .base import LossComponent, Term
from .layers import query_key_states

__all__ = [
    "VirtualInteractionLoss", "contiguous_start", "gather_positions", "pad_positions", "real_pairs", "row_queries", "student_virtual_attention",
    "teacher_cross_attention", "virtual_attention_squared_error",
]


def contiguous_start(index: torch.Tensor, mask: torch.Tensor) -> int | None:
    """`start` when every real position in `index` (B, N) is `start + j`, else None.

    A Siamese side's own encoding ([CLS] X [SEP]) puts its real tokens at 1, 2, ..., and so does
    X in the teacher's joint view: their states are then a slice, not a gather. The answer costs
    two host syncs and holds for every layer of the batch, so the loss asks once per side and
    batch. `mask` (B, N) is False on padding entries, whose positions are ignored.
    """
    if not index.numel():
        return None
    start = int(index[:, 0].max())
    expected = start + torch.arange(index.size(1), device=index.device)
    if bool(((index == expected) | ~mask.to(index.device).bool()).all()):
        return start
    return None


def pad_positions(positions: torch.Tensor, multiple: int = 16) -> torch.Tensor:
    """(B, N) positions or mask padded with 0 / False to N a multiple of `multiple`.

    The maps are (B, H, N, M): with rows of a multiple of 16 floats the softmax and the products
    run vectorised to the end of each row (2x faster on AVX-512 than rows of 126). The extra rows
    and columns are padding and count for nothing (see `row_queries`).
    """
    extra = -positions.size(1) % multiple
    return nn.functional.pad(positions, (0, extra)) if extra else positions


def gather_positions(states: torch.Tensor, index: torch.Tensor, start: int | None = None) -> torch.Tensor:
    """Per-head states at given token positions: (B, H, T, d) and (B, N) -> (B, H, N, d).

    With `start` (from `contiguous_start`), the positions are `start + j` on every real entry and
    the states are sliced (zero-padded where the run of N passes the end of the sequence, which
    only padding entries reach): the backward is then a plain copy instead of a scatter-add.
    Entries at padding positions may hold any state.
    """
    count = index.size(1)
    if start is not None:
        run = states[:, :, start : start + count]
        return nn.functional.pad(run, (0, 0, 0, count - run.size(2))) if run.size(2) < count else run
    batch, heads, _, width = states.shape
    expanded = index.to(states.device)[:, None, :, None].expand(batch, heads, count, width)
    return states.gather(2, expanded)


def row_queries(
    queries: torch.Tensor, rows: torch.Tensor, row_mask: torch.Tensor, row_start: int | None = None
) -> torch.Tensor:
    """The queries at the row positions, (B, H, N, d), zero on padding rows.

    A zero query attends uniformly to the real columns, which is what `teacher_cross_attention`
    puts on padding rows: the two maps then agree there and padding rows add nothing to a squared
    error, so no (B, H, N, M) row mask is ever built.
    """
    gathered = gather_positions(queries, rows, row_start)
    return gathered * row_mask.to(gathered.device)[:, None, :, None].to(gathered.dtype)


def student_virtual_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    rows: torch.Tensor,
    columns: torch.Tensor,
    row_mask: torch.Tensor,
    column_mask: torch.Tensor,
    row_start: int | None = None,
    column_start: int | None = None,
) -> torch.Tensor:
    """M = softmax(Q_rows K_columns^T / sqrt(d_head)) over the real columns, (B, H, N_rows, N_columns).

    queries: (B, H, T_X, d) of the side the rows come from; keys: (B, H, T_Y, d) of the other side;
    rows / columns: (B, N) positions of the real tokens in each side's own encoding, sliced from
    `row_start` / `column_start` when given (see `contiguous_start`). Padding rows are uniform over
    the real columns (see `row_queries`).
    """
    return virtual_attention(
        row_queries(queries, rows, row_mask, row_start), gather_positions(keys, columns, column_start), column_mask
    )


def teacher_cross_attention(
    output, layer: int, rows: torch.Tensor, columns: torch.Tensor, row_mask: torch.Tensor, column_mask: torch.Tensor
) -> torch.Tensor:
    """A = the teacher's layer attention at (rows, columns) of the joint encoding, renormalised over the columns.

    From the captured queries/keys (a softmax of the pre-softmax scores over the real columns),
    or else from attention probabilities (the sub-block divided by its row sums: the same thing).
    `layer` is 1-based. Padding rows are uniform over the real columns, as in `student_virtual_attention`.
    """
    states = query_key_states(output)
    if states is not None:
        return student_virtual_attention(states[0][layer - 1], states[1][layer - 1], rows, columns, row_mask, column_mask)
    probs = output.attentions[layer - 1].float()
    batch, heads, length, _ = probs.shape
    rows = rows.to(probs.device)[:, None, :, None].expand(batch, heads, rows.size(1), length)
    block = probs.gather(2, rows)
    columns = columns.to(probs.device)[:, None, None, :].expand(batch, heads, block.size(2), columns.size(1))
    keep = column_mask.to(probs.device)[:, None, None, :].to(probs.dtype)
    real_rows = row_mask.to(probs.device).bool()[:, None, :, None]
    block = torch.where(real_rows, block.gather(3, columns) * keep, keep)
    return block / block.sum(-1, keepdim=True).clamp(min=1e-12)


# (example, head) maps per chunk: about 1 MB of float32 scores, so that a chunk's maps stay in cache
_CHUNK_FLOATS = 1 << 18


class _VirtualAttentionSquaredError(torch.autograd.Function):
    """sum((softmax(Q K^T * scale + bias) - target)^2) over (G, N, M) maps, in cache-sized chunks.

    The loss is a scalar, so d loss / dQ and d loss / dK are known as soon as the maps are: the
    forward computes them chunk by chunk while a chunk's maps are in cache, and keeps only those
    (G, N, d) gradients for the backward (which just scales them). Autograd's version would keep
    every probability map and difference alive until the backward and pass over them five more
    times. The target is either given, (G, N, M) (overwritten), or computed per chunk from the
    teacher's queries and keys as softmax(Q_t K_t^T * target_scale + bias).
    """

    @staticmethod
    def forward(ctx, queries, keys, bias, target, target_queries, target_keys, scale: float, target_scale: float):  # noqa: D102
        groups, rows, _ = queries.shape
        chunk = max(1, _CHUNK_FLOATS // max(1, rows * keys.size(1)))
        need_queries, need_keys = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_queries = torch.empty_like(queries) if need_queries else None
        grad_keys = torch.empty_like(keys) if need_keys else None
        loss = queries.new_zeros(())
        for first in range(0, groups, chunk):
            part = slice(first, first + chunk)
            probs = torch.baddbmm(bias[part], queries[part], keys[part].transpose(1, 2), alpha=scale).softmax(dim=-1)
            if target is None:
                goal = torch.baddbmm(bias[part], target_queries[part], target_keys[part].transpose(1, 2), alpha=target_scale)
                goal = goal.softmax(dim=-1)
            else:
                goal = target[part]
            difference = goal.sub_(probs)  # target - probs, in the target's buffer
            flat = difference.view(-1)
            loss += torch.dot(flat, flat)
            if need_queries or need_keys:
                # softmax backward of d loss / d probs = -2 difference: -2 probs * (difference - rowsum(difference * probs))
                row_sums = torch.linalg.vecdot(difference, probs)[..., None]
                grad_scores = difference.sub_(row_sums).mul_(probs).mul_(-2.0 * scale)  # includes the scale of Q K^T
                if need_queries:
                    torch.bmm(grad_scores, keys[part], out=grad_queries[part])
                if need_keys:
                    torch.bmm(grad_scores.transpose(1, 2), queries[part], out=grad_keys[part])
        ctx.save_for_backward(grad_queries, grad_keys)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):  # noqa: D102 (see the class)
        grad_queries, grad_keys = ctx.saved_tensors
        return (
            None if grad_queries is None else grad_queries * grad_loss,
            None if grad_keys is None else grad_keys * grad_loss,
            None, None, None, None, None, None,
        )


def virtual_attention_squared_error(
    queries: torch.Tensor,
    keys: torch.Tensor,
    key_mask: torch.Tensor,
    target: torch.Tensor | None = None,
    target_queries: torch.Tensor | None = None,
    target_keys: torch.Tensor | None = None,
) -> torch.Tensor:
    """sum over every entry of (virtual_attention(queries, keys, key_mask) - target)^2, in float32.

    queries (B, H, N, d), keys (B, H, M, d), key_mask (B, M). The target is either a (B, H, N, M)
    map without grad (overwritten), or `virtual_attention(target_queries, target_keys, key_mask)`
    from the teacher's (B, H, N, d_t) / (B, H, M, d_t) queries and keys, computed chunk by chunk
    (never materialised whole). Equals `((virtual_attention(...) - target) ** 2).sum()` in value
    and gradients (see `_VirtualAttentionSquaredError` for why it is not written that way).
    float64 inputs stay float64.
    """
    if (target is None) == (target_queries is None or target_keys is None):
        raise ValueError("virtual_attention_squared_error needs either target or both target_queries and target_keys.")
    dtype = torch.float64 if queries.dtype == torch.float64 else torch.float32
    device = queries.device

    def flat(states: torch.Tensor | None) -> torch.Tensor | None:  # (B, H, L, x) -> (B * H, L, x)
        return None if states is None else states.to(device=device, dtype=dtype).reshape(-1, *states.shape[-2:])

    with torch.autocast(device_type=device.type, enabled=False):
        _, heads, _, width = queries.shape
        bias = key_mask_bias(key_mask, heads, dtype, device)
        target_scale = 1.0 / math.sqrt(target_queries.size(-1)) if target_queries is not None else 1.0
        return _VirtualAttentionSquaredError.apply(
            flat(queries), flat(keys), bias, flat(target), flat(target_queries), flat(target_keys),
            1.0 / math.sqrt(width), target_scale,
        )


def real_pairs(row_mask: torch.Tensor, column_mask: torch.Tensor) -> torch.Tensor:
    """How many (real row, real column) pairs the batch holds: sum over examples of n_rows * n_columns."""
    return (row_mask.bool().sum(1) * column_mask.bool().to(row_mask.device).sum(1)).sum()


def _layers(output, who: str) -> int:
    states = query_key_states(output)
    if states is not None:
        return len(states[0])
    if who == "teacher" and getattr(output, "attentions", None) is not None:
        return len(output.attentions)
    raise ValueError(
        f"VirtualInteractionLoss needs the {who}'s per-layer queries and keys, but query_states=None; run the "
        "forward with output_query_key=True (requires={'query_key'}; the DistillationTrainer does this)."
    )


def _heads(output) -> int:
    states = query_key_states(output)
    return states[0][0].size(1) if states is not None else output.attentions[0].size(1)


class VirtualInteractionLoss(LossComponent):
    """VIRT's attention-map distillation from a cross-encoder into a Siamese student: term `virt`.

    Args:
        mapping: which teacher layer each student layer learns from when depths differ:
            "uniform" (default; identity for equal depths), "last", explicit (student, teacher)
            1-based pairs, or a `LayerMapping`.

    References:
        Li et al., "VIRT: Improving Representation-based Text Matching via Virtual Interaction",
        EMNLP 2022 (arXiv:2112.04195). No official code; our reading is documented in docs/virt.md.

    Requirements:
        - a `SiameseModel` student and a cross-encoder teacher (the first teacher), both eager,
          with the same tokenizer and the same number of attention heads (head sizes may differ);
        - the teacher runs online (its queries/keys are read every step).

    Inputs (batch keys, from `PairCollator(virt_alignment=True)`, which the `DistillationTrainer`
    builds because `requires_alignment` is True):
        - `input_ids_a` / `input_ids_b` ...: the student's views of X and Y;
        - `teacher_0_input_ids` ...: the teacher's joint view, built from the same token ids;
        - `teacher_alignment_{a,b}_{student,teacher,mask}`: the aligned token positions.

    Example:
        >>> trainer = DistillationTrainer(
        ...     model=siamese_student, args=DistillationArguments(output_dir="out", alpha=0.0, virt_weight=1.0),
        ...     teachers=cross_encoder, loss_components=[VirtualInteractionLoss("uniform")], train_dataset=train)
    """

    terms = (Term("virt", "virt_weight", "MSE between the student's virtual X↔Y attention and the teacher's cross attention"),)
    requires: set[str] = {"query_key"}
    requires_alignment: bool = True
    layer_outputs = True
    method = "virt"
    switch = "virt_weight"
    switch_help = "alpha of VIRT (>= 0): weight of the virtual-interaction loss (Siamese student, cross-encoder teacher)."

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config) -> "VirtualInteractionLoss":
        return cls(parse_layer_mapping(args.layer_mapping))

    def __init__(self, mapping: str | Sequence[Sequence[int]] | LayerMapping = "uniform"):
        super().__init__()
        self.mapping = get_mapping(mapping)

    @staticmethod
    def _sides(student_out) -> tuple:
        side_a, side_b = getattr(student_out, "side_a", None), getattr(student_out, "side_b", None)
        if side_a is None or side_b is None:
            raise ValueError(
                f"VirtualInteractionLoss needs a Siamese student with both sides encoded, got {type(student_out).__name__} "
                "without side_a/side_b; valid: SiameseModel outputs of a pair (input_ids_a and input_ids_b)."
            )
        for name, side in (("side_a", side_a), ("side_b", side_b)):
            if query_key_states(side) is None:
                raise ValueError(
                    f"VirtualInteractionLoss needs the student's {name}.query_states, but they are None; run the "
                    "forward with output_query_key=True (requires={'query_key'})."
                )
        return side_a, side_b

    @staticmethod
    def _alignment(batch: dict) -> dict[str, torch.Tensor]:
        missing = [key for key in ALIGNMENT_KEYS if key not in batch]
        if missing:
            raise ValueError(
                f"the batch lacks the token alignment {missing}; build it with PairCollator(..., virt_alignment=True) "
                "(the DistillationTrainer does so when a component has requires_alignment=True)."
            )
        return {key[len(ALIGNMENT_PREFIX) :]: batch[key] for key in ALIGNMENT_KEYS}

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        if not teacher_outs:
            raise ValueError("VirtualInteractionLoss needs an online cross-encoder teacher, but teacher_outs is empty.")
        side_a, side_b = self._sides(student_out)
        teacher = teacher_outs[0]
        student_layers, teacher_layers = _layers(side_a, "student"), _layers(teacher, "teacher")
        student_heads, teacher_heads = _heads(side_a), _heads(teacher)
        if student_heads != teacher_heads:
            raise ValueError(
                f"VirtualInteractionLoss: the student has num_attention_heads={student_heads} and the teacher "
                f"num_attention_heads={teacher_heads}; VIRT compares attention maps head by head, so they must "
                f"match (valid: a teacher with {student_heads} heads)."
            )
        align = {key: pad_positions(value) for key, value in self._alignment(batch).items()}
        teacher_states = query_key_states(teacher)
        joint_length = (teacher_states[0] if teacher_states is not None else teacher.attentions)[0].size(2)
        for side in ("a", "b"):
            if bool((align[f"{side}_teacher"] >= joint_length).any()):
                raise ValueError(
                    f"teacher_alignment_{side}_teacher points past the teacher's sequence length {joint_length}: the "
                    "teacher did not read the collator's aligned joint view (teacher_0_input_ids)."
                )
        states = {"student": {"a": query_key_states(side_a), "b": query_key_states(side_b)}}
        if teacher_states is not None:
            states["teacher"] = {"a": teacher_states, "b": teacher_states}
        # whether each side's real tokens are one run of positions (then sliced): decided once for all layers
        starts = {
            (who, side): contiguous_start(align[f"{side}_{who}"], align[f"{side}_mask"])
            for side in "ab" for who in ("student", "teacher")
        }

        def queries_keys(who: str, layer: int, rows: str, columns: str) -> dict[str, torch.Tensor]:
            """`who`'s layer queries at the row side's real tokens (zero on padding) and keys at the column side's."""
            queries = states[who][rows][0][layer - 1]
            keys = states[who][columns][1][layer - 1]
            return {
                "queries": row_queries(queries, align[f"{rows}_{who}"], align[f"{rows}_mask"], starts[who, rows]),
                "keys": gather_positions(keys, align[f"{columns}_{who}"], starts[who, columns]),
            }

        pairs = list(self.mapping.pairs(student_layers, teacher_layers))
        total = None
        # one layer and direction at a time: the teacher's map is built inside the loss, chunk by chunk
        for i, j in pairs:
            for rows, columns in (("a", "b"), ("b", "a")):  # X -> Y, then Y -> X
                column_mask = align[f"{columns}_mask"]
                with torch.no_grad():
                    if teacher_states is not None:
                        target = {f"target_{k}": v for k, v in queries_keys("teacher", j, rows, columns).items()}
                    else:
                        target = {"target": teacher_cross_attention(
                            teacher, j, align[f"{rows}_teacher"], align[f"{columns}_teacher"], align[f"{rows}_mask"], column_mask
                        )}
                # padding rows are uniform in both maps, masked columns 0 in both: the plain sum is the masked sum
                squared = virtual_attention_squared_error(**queries_keys("student", i, rows, columns), key_mask=column_mask, **target)
                total = squared if total is None else total + squared
        # the mean over layers, directions, heads and each example's (real row, real column) pairs
        count = 2 * len(pairs) * student_heads * real_pairs(align["a_mask"], align["b_mask"]).to(total.device)
        return {"virt": total / count.clamp(min=1)}
