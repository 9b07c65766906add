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

from collections.abc import Sequence

import torch
from torch import nn

from ..alignment import ALIGNMENT_KEYS, ALIGNMENT_PREFIX
from ..mapping import LayerMapping, get_mapping
from ..modeling.virt_interaction import virtual_attention
from .layers import query_key_states

__all__ = ["VirtualInteractionLoss", "contiguous_start", "gather_positions", "pairwise_mse", "teacher_cross_attention", "student_virtual_attention"]


def contiguous_start(index: torch.Tensor, mask: torch.Tensor, length: int) -> int | None:
    """`start` when every real position in `index` (B, N) is `start + j`, else None.

    A Siamese side's own encoding ([CLS] X [SEP]) puts its real tokens at 1, 2, ...: its states are
    then a slice, not a gather. The answer costs two host syncs and holds for every layer of the
    batch, so the loss asks once per side and batch. `mask` (B, N) is False on padding entries,
    whose positions are ignored; `length` is the states' sequence length.
    """
    if not index.numel():
        return None
    count = index.size(1)
    start = int(index[:, 0].max())
    expected = start + torch.arange(count, device=index.device)
    if start + count <= length and bool(((index == expected) | ~mask.to(index.device).bool()).all()):
        return start
    return None


def gather_positions(states: torch.Tensor, index: torch.Tensor, start: int | None = None) -> torch.Tensor:
    """Per-head states at given token positions: (B, H, T, d) and (B, N) -> (B, H, N, d).

    With `start` (from `contiguous_start`), the positions are `start + j` on every real entry and
    the states are sliced: the backward is then a plain copy instead of a scatter-add. Entries
    at padding positions may hold any state.
    """
    if start is not None:
        return states[:, :, start : start + index.size(1)]
    batch, heads, _, width = states.shape
    expanded = index.to(states.device)[:, None, :, None].expand(batch, heads, index.size(1), width)
    return states.gather(2, expanded)


def student_virtual_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    rows: torch.Tensor,
    columns: torch.Tensor,
    column_mask: torch.Tensor,
    row_start: int | None = None,
    column_start: int | None = None,
) -> torch.Tensor:
    """M = softmax(Q_rows K_columns^T / sqrt(d_head)) over the real columns, (B, H, N_rows, N_columns).

    queries: (B, H, T_X, d) of the side the rows come from; keys: (B, H, T_Y, d) of the other side;
    rows / columns: (B, N) positions of the real tokens in each side's own encoding, sliced from
    `row_start` / `column_start` when given (see `contiguous_start`). Padding rows hold arbitrary
    values (mask them downstream).
    """
    return virtual_attention(
        gather_positions(queries, rows, row_start), gather_positions(keys, columns, column_start), column_mask
    )


def teacher_cross_attention(
    output, layer: int, rows: torch.Tensor, columns: torch.Tensor, column_mask: torch.Tensor
) -> torch.Tensor:
    """A = the teacher's layer attention at (rows, columns) of the joint encoding, renormalised over the columns.

    From the captured queries/keys (a softmax of the pre-softmax scores over the real columns),
    or else from attention probabilities (the sub-block divided by its row sums: the same thing).
    `layer` is 1-based.
    """
    states = query_key_states(output)
    if states is not None:
        return student_virtual_attention(states[0][layer - 1], states[1][layer - 1], rows, columns, column_mask)
    probs = output.attentions[layer - 1].float()
    batch, heads, length, _ = probs.shape
    rows = rows.to(probs.device)[:, None, :, None].expand(batch, heads, rows.size(1), length)
    block = probs.gather(2, rows)
    columns = columns.to(probs.device)[:, None, None, :].expand(batch, heads, block.size(2), columns.size(1))
    block = block.gather(3, columns) * column_mask.to(probs.device)[:, None, None, :]
    return block / block.sum(-1, keepdim=True).clamp(min=1e-12)


def pairwise_mse(student: torch.Tensor, target: torch.Tensor, row_mask: torch.Tensor, column_mask: torch.Tensor) -> torch.Tensor:
    """MSE of (B, H, N, M) maps over the heads and the (real row, real column) pairs of each example.

    Equals `masked_mse(student, target, row_mask[:, None, :, None] & column_mask[:, None, None, :])`,
    but sums the heads first and masks the (B, N, M) result: two passes over the maps instead of six.
    """
    pairs = (row_mask.to(student.device)[:, :, None] & column_mask.to(student.device)[:, None, :]).to(torch.float32)
    squared = (student.float() - target.float().to(student.device)).square().sum(1)
    return (squared * pairs).sum() / (pairs.sum() * student.size(1)).clamp(min=1e-12)


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


class VirtualInteractionLoss(nn.Module):
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

    requires: set[str] = {"query_key"}
    requires_alignment: bool = True

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
        align = self._alignment(batch)
        teacher_states = query_key_states(teacher)
        joint_length = (teacher_states[0] if teacher_states is not None else teacher.attentions)[0].size(2)
        for side in ("a", "b"):
            if bool((align[f"{side}_teacher"] >= joint_length).any()):
                raise ValueError(
                    f"teacher_alignment_{side}_teacher points past the teacher's sequence length {joint_length}: the "
                    "teacher did not read the collator's aligned joint view (teacher_0_input_ids)."
                )
        sides = {"a": query_key_states(side_a), "b": query_key_states(side_b)}
        # whether each side's real tokens are one run of positions: decided once for all layers
        starts = {
            side: contiguous_start(align[f"{side}_student"], align[f"{side}_mask"], sides[side][0][0].size(2))
            for side in ("a", "b")
        }
        losses = []
        for i, j in self.mapping.pairs(student_layers, teacher_layers):
            for rows, columns in (("a", "b"), ("b", "a")):  # X -> Y, then Y -> X
                row_mask, column_mask = align[f"{rows}_mask"], align[f"{columns}_mask"]
                student = student_virtual_attention(
                    sides[rows][0][i - 1], sides[columns][1][i - 1],
                    align[f"{rows}_student"], align[f"{columns}_student"], column_mask, starts[rows], starts[columns],
                )
                with torch.no_grad():
                    target = teacher_cross_attention(
                        teacher, j, align[f"{rows}_teacher"], align[f"{columns}_teacher"], column_mask
                    )
                losses.append(pairwise_mse(student, target, row_mask, column_mask))
        return {"virt": torch.stack(losses).mean()}
