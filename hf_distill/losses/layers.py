"""Intermediate-layer distillation (TinyBERT-style): embeddings, hidden states, attention.

With h_i the hidden states (i = 0 the embedding output, 1..L the transformer blocks), A_i the
pre-softmax attention scores Q_i K_i^T / sqrt(d_head) of block i, and g a layer mapping
(`hf_distill.mapping`):

    embedding = MSE(h^S_0 W_e, h^T_0)
    hidden    = mean over mapped pairs (i, g(i)) of MSE(h^S_i W_h, h^T_g(i))
    attention = mean over mapped pairs of MSE(A^S_i, A^T_g(i))            (kind="mse", TinyBERT)
              = mean over mapped pairs of KL(P^T_g(i) || P^S_i)            (kind="kl", as in MiniLM)

Every average runs over real tokens only: hidden MSEs over (real token, feature) entries,
attention MSEs over (head, real query, real key) entries (padded rows and columns are set to
0 first, as TinyBERT does, and left out of the count), attention KLs over (head, real query
row) with the distributions restricted to real keys. Padding therefore never changes a loss,
and without padding every MSE equals `F.mse_loss` on the whole tensors.

Projections: W_e and W_h are learned `nn.Linear(d_S, d_T)`. When d_S == d_T they are still
learned but start as the identity (zero bias), so the first loss equals the plain MSE and a
student copied from the teacher starts at zero; `projection=False` drops them (same sizes only).
They are training-only parameters of the loss component, never part of the saved student.

References:
    Jiao et al., "TinyBERT: Distilling BERT for Natural Language Understanding", Findings of EMNLP 2020.
    Wang et al., "MiniLM: Deep Self-Attention Distillation...", NeurIPS 2020 (the KL variant).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..mapping import LayerMapping, get_mapping, parse_layer_mapping
from .base import LossComponent, Term

__all__ = [
    "ATTENTION_KINDS",
    "HEAD_REDUCTIONS",
    "AttentionLoss",
    "EmbeddingLoss",
    "HiddenStateLoss",
    "attention_scores",
    "make_projection",
    "masked_mse",
    "pair_mask",
    "query_key_states",
    "reduce_heads",
]

ATTENTION_KINDS = ("mse", "kl")
HEAD_REDUCTIONS = (None, "mean")


# ---------------------------------------------------------------------------- pure functions
def _broadcast_mask(mask: torch.Tensor, shape: torch.Size, device: torch.device) -> torch.Tensor:
    """A (B, T)-style mask padded with trailing singleton dims and broadcast to `shape`."""
    mask = mask.to(device=device, dtype=torch.float32)
    while mask.dim() < len(shape):
        mask = mask.unsqueeze(-1)
    try:
        return mask.expand(shape)
    except RuntimeError as error:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to {tuple(shape)}; student and teacher "
            "need the same tokenizer and inputs for layer losses."
        ) from error


def trailing_mask(mask: torch.Tensor, dims: int, device: torch.device) -> torch.Tensor:
    """A float32 mask with trailing singleton dims up to `dims`: broadcasts without being materialised."""
    small = mask.to(device=device, dtype=torch.float32)
    while small.dim() < dims:
        small = small.unsqueeze(-1)
    return small


def masked_mse(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean squared error over the entries the mask keeps (in float32).

    Args:
        student, teacher: tensors of the same shape, e.g. (B, T, d) or (B, H, T, T).
        mask: None (plain mean), or a 0/1 mask broadcastable to that shape after trailing
            singleton dims are added: (B, T) for hidden states, `pair_mask(...)` for attention.
            Masked entries are ignored even when they hold inf/nan.

    Returns:
        sum over kept entries of (student - teacher)^2 / number of kept entries (0 when none).
    """
    if student.shape != teacher.shape:
        raise ValueError(
            f"student tensor of shape {tuple(student.shape)} and teacher tensor of shape {tuple(teacher.shape)} "
            "differ; project the student first (hidden sizes) or match heads/lengths."
        )
    diff = student.float() - teacher.float().to(student.device)
    if mask is None:
        return diff.pow(2).mean()
    _broadcast_mask(mask, diff.shape, diff.device)  # checks that the mask broadcasts (an expanded view, no copy)
    small = trailing_mask(mask, diff.dim(), diff.device)
    # broadcast the small mask instead of materialising it: one pass over the maps, and the count
    # of kept entries from the small mask times how often each of its entries repeats
    squared = torch.where(small > 0, diff.square() * small, 0.0)
    count = small.sum() * (diff.numel() / small.numel())
    return squared.sum() / count.clamp(min=1e-12)


def pair_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, T) token mask -> (B, 1, T, T) mask of (real query, real key) pairs, broadcast over heads."""
    m = attention_mask.float()
    return (m[:, :, None] * m[:, None, :]).unsqueeze(1)


def attention_scores(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Pre-softmax attention scores Q K^T / sqrt(d_head), (..., H, T, d) x2 -> (..., H, T, T), float32 (autocast off)."""
    with torch.autocast(device_type=queries.device.type, enabled=False):
        queries, keys = queries.float(), keys.float().to(queries.device)
        return queries @ keys.transpose(-1, -2) / math.sqrt(queries.size(-1))


def reduce_heads(attention: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Average contiguous groups of heads: (..., H, T, T) -> (..., num_heads, T, T); num_heads must divide H."""
    heads = attention.size(-3)
    if heads % num_heads:
        raise ValueError(f"cannot reduce {heads} heads to {num_heads}: {num_heads} must divide {heads}.")
    if heads == num_heads:
        return attention
    *lead, _, rows, cols = attention.shape
    return attention.reshape(*lead, num_heads, heads // num_heads, rows, cols).mean(-3)


def _key_log_probs(scores: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """log softmax over real keys only (padded keys get a huge negative score)."""
    if attention_mask is not None:
        keys = attention_mask[:, None, None, :].to(scores.device) > 0
        scores = scores.masked_fill(~keys, torch.finfo(scores.dtype).min)
    return F.log_softmax(scores, dim=-1)


def _attention_kl(
    teacher_log_probs: torch.Tensor, student_log_probs: torch.Tensor, attention_mask: torch.Tensor | None
) -> torch.Tensor:
    """KL(teacher || student) per (head, query row) over real keys, averaged over heads and real rows."""
    pointwise = teacher_log_probs.exp() * (teacher_log_probs - student_log_probs)
    if attention_mask is None:
        return pointwise.sum(-1).mean()
    mask = attention_mask.float().to(pointwise.device)
    keys = mask[:, None, None, :] > 0
    per_row = torch.where(keys, pointwise, torch.zeros_like(pointwise)).sum(-1)  # (B, H, T)
    rows = mask[:, None, :].expand_as(per_row)
    return (per_row * rows).sum() / rows.sum().clamp(min=1e-12)


def make_projection(student_dim: int, teacher_dim: int, projection: bool = True) -> nn.Module:
    """Learned Linear(d_S, d_T) (identity-initialised when d_S == d_T), or Identity when disabled."""
    if not projection:
        if student_dim != teacher_dim:
            raise ValueError(
                f"projection=False needs equal hidden sizes, got student_dim={student_dim} and teacher_dim={teacher_dim}; "
                "use projection=True."
            )
        return nn.Identity()
    linear = nn.Linear(student_dim, teacher_dim)
    if student_dim == teacher_dim:
        with torch.no_grad():
            linear.weight.copy_(torch.eye(student_dim))
            linear.bias.zero_()
    return linear


def _attention_mask(batch: dict) -> torch.Tensor | None:
    return batch.get("attention_mask") if isinstance(batch, dict) else None


def query_key_states(output) -> tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]] | None:
    """(query_states, key_states) of a model output, one (B, H, T, d_head) tensor per layer, or None."""
    queries, keys = getattr(output, "query_states", None), getattr(output, "key_states", None)
    if queries is None or keys is None:
        return None
    return queries, keys


def _hidden_states(output, who: str, component: str) -> Sequence[torch.Tensor]:
    states = getattr(output, "hidden_states", None)
    if states is None:
        raise ValueError(
            f"{component} needs the {who}'s hidden states, but hidden_states=None; "
            "run the forward with output_hidden_states=True (requires={'hidden_states'})."
        )
    return states


def _check_dim(tensor: torch.Tensor, expected: int, who: str, component: str) -> None:
    if tensor.size(-1) != expected:
        raise ValueError(
            f"{component}: the {who}'s hidden size is {tensor.size(-1)}, but the component was built for {expected}."
        )


# ---------------------------------------------------------------------------- components
class EmbeddingLoss(LossComponent):
    """MSE between the projected student embedding output and the teacher's: term `embedding`.

        embedding = MSE(h^S_0 W_e, h^T_0) over real tokens and features

    Args:
        student_dim, teacher_dim: hidden sizes d_S and d_T.
        projection: learn W_e (identity-initialised when the sizes match); False uses none (equal sizes only).

    Requirements: the same tokenizer for student and teacher (same positions); `hidden_states` from both.
    """

    terms = (Term("embedding", "embedding_weight", "MSE between the projected student embedding output and the teacher's"),)
    requires: set[str] = {"hidden_states"}
    layer_outputs = True
    method = "tinybert"
    switch = "embedding_weight"
    switch_help = "Weight (>= 0) of the embedding-layer MSE loss (TinyBERT; BERT-EMD's beta on embeddings)."

    def __init__(self, student_dim: int, teacher_dim: int, projection: bool = True):
        super().__init__()
        self.student_dim, self.teacher_dim = student_dim, teacher_dim
        self.projection = make_projection(student_dim, teacher_dim, projection)

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config) -> "EmbeddingLoss":
        return cls(student_config.hidden_size, teacher_config.hidden_size)

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        student = _hidden_states(student_out, "student", "EmbeddingLoss")[0]
        teacher = _hidden_states(teacher_outs[0], "teacher", "EmbeddingLoss")[0].detach()
        _check_dim(student, self.student_dim, "student", "EmbeddingLoss")
        _check_dim(teacher, self.teacher_dim, "teacher", "EmbeddingLoss")
        return {"embedding": masked_mse(self.projection(student), teacher, _attention_mask(batch))}


class HiddenStateLoss(LossComponent):
    """MSE between projected student hidden states and their mapped teacher layers: term `hidden`.

        hidden = (1 / |pairs|) * sum over (i, g(i)) of MSE(h^S_i W_h, h^T_g(i))   (real tokens only)

    Args:
        student_dim, teacher_dim: hidden sizes d_S and d_T.
        num_student_layers: L_S (transformer blocks, embeddings excluded); checked at every forward.
        mapping: "uniform", "last", explicit (student, teacher) pairs, or a `LayerMapping`.
        shared_projection: one W_h for every layer (True) or one per student layer.
        projection: learn W_h (identity-initialised when sizes match); False uses none (equal sizes only).
    """

    terms = (
        Term("hidden", "hidden_weight", "MSE between projected student hidden states and the mapped teacher layers (real tokens only)"),
    )
    requires: set[str] = {"hidden_states"}
    layer_outputs = True
    method = "tinybert"
    switch = "hidden_weight"
    switch_help = "Weight (>= 0) of the hidden-state MSE loss between mapped layers (TinyBERT)."

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config) -> "HiddenStateLoss":
        return cls(
            student_config.hidden_size, teacher_config.hidden_size, student_config.num_hidden_layers,
            parse_layer_mapping(args.layer_mapping), args.shared_projection,
        )

    def __init__(
        self,
        student_dim: int,
        teacher_dim: int,
        num_student_layers: int,
        mapping: str | Sequence[Sequence[int]] | LayerMapping = "uniform",
        shared_projection: bool = True,
        projection: bool = True,
    ):
        super().__init__()
        if isinstance(num_student_layers, bool) or not isinstance(num_student_layers, int) or num_student_layers < 1:
            raise ValueError(f"num_student_layers={num_student_layers!r} must be an integer >= 1.")
        self.student_dim, self.teacher_dim = student_dim, teacher_dim
        self.num_student_layers = num_student_layers
        self.mapping = get_mapping(mapping)
        self.shared_projection = shared_projection
        if shared_projection:
            self.projection = make_projection(student_dim, teacher_dim, projection)
        else:
            self.projections = nn.ModuleList(
                make_projection(student_dim, teacher_dim, projection) for _ in range(num_student_layers)
            )

    def project(self, state: torch.Tensor, student_layer: int) -> torch.Tensor:
        """h^S_i W_h for 1-based student layer i."""
        if self.shared_projection:
            return self.projection(state)
        return self.projections[student_layer - 1](state)

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        student = _hidden_states(student_out, "student", "HiddenStateLoss")
        teacher = _hidden_states(teacher_outs[0], "teacher", "HiddenStateLoss")
        if len(student) - 1 != self.num_student_layers:
            raise ValueError(
                f"HiddenStateLoss was built for num_student_layers={self.num_student_layers}, "
                f"but the student returned {len(student) - 1} layers."
            )
        _check_dim(student[-1], self.student_dim, "student", "HiddenStateLoss")
        _check_dim(teacher[-1], self.teacher_dim, "teacher", "HiddenStateLoss")
        pairs = self.mapping.pairs(len(student) - 1, len(teacher) - 1)
        mask = _attention_mask(batch)
        projected = torch.stack([self.project(student[i], i).float() for i, _ in pairs])
        targets = torch.stack([teacher[j].detach().float() for _, j in pairs])
        # Every pair has the same token count, so one masked mean over the stack is the mean over pairs.
        return {"hidden": masked_mse(projected, targets, None if mask is None else mask.unsqueeze(0))}


class AttentionLoss(LossComponent):
    """Attention transfer between mapped layers: term `attention`.

    kind="mse" (TinyBERT): MSE of the pre-softmax scores Q K^T / sqrt(d_head), with padded
    query rows and key columns set to 0 and left out, averaged over heads and real
    (query, key) pairs, then over the mapped layers.
    kind="kl": KL(P^T || P^S) of the attention distributions restricted to real keys, summed over
    keys, averaged over heads and real query rows, then over mapped layers.

    Scores come from the output's captured `query_states`/`key_states` (`requires={"query_key"}`,
    forward hooks that work with any attention implementation); for kind="kl" an output without
    them may give `attentions` instead
    (eager only; note eager attention probabilities are taken after attention dropout).

    Args:
        mapping: "uniform", "last", explicit (student, teacher) pairs, or a `LayerMapping`.
        kind: "mse" or "kl".
        head_reduction: None (student and teacher need the same head count) or "mean": both
            sides average contiguous groups of heads down to gcd(H_S, H_T) heads (scores for
            "mse", probabilities for "kl").
    """

    terms = (Term("attention", "attention_weight", "attention of mapped layers, averaged over heads and real tokens"),)
    requires: set[str] = {"query_key"}
    layer_outputs = True
    method = "tinybert"
    switch = "attention_weight"
    switch_help = "Weight (>= 0) of the attention loss between mapped layers (TinyBERT: MSE of scores; or KL)."

    @classmethod
    def from_arguments(cls, args, student_config, teacher_config) -> "AttentionLoss":
        return cls(parse_layer_mapping(args.layer_mapping), kind=args.attention_loss)

    def declared_terms(self) -> tuple[Term, ...]:
        what = "pre-softmax attention scores (MSE)" if self.kind == "mse" else "attention distributions (KL)"
        return (Term("attention", "attention_weight", f"{what} of mapped layers, averaged over heads and real tokens"),)

    def __init__(
        self,
        mapping: str | Sequence[Sequence[int]] | LayerMapping = "uniform",
        kind: str = "mse",
        head_reduction: str | None = None,
    ):
        super().__init__()
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"kind={kind!r} is not valid; choose one of {', '.join(map(repr, ATTENTION_KINDS))}.")
        if head_reduction not in HEAD_REDUCTIONS:
            raise ValueError(f"head_reduction={head_reduction!r} is not valid; choose None or 'mean'.")
        self.mapping = get_mapping(mapping)
        self.kind = kind
        self.head_reduction = head_reduction

    @staticmethod
    def _num_layers(output, who: str) -> int:
        states = query_key_states(output)
        if states is not None:
            return len(states[0])
        if getattr(output, "attentions", None) is not None:
            return len(output.attentions)
        raise ValueError(
            f"AttentionLoss needs the {who}'s query/key states, but query_states=None; run the forward with "
            "output_query_key=True (requires={'query_key'})."
        )

    def _scores(self, output, layer: int, who: str) -> torch.Tensor:
        states = query_key_states(output)
        if states is None:
            raise ValueError(
                f"AttentionLoss(kind='mse') needs the {who}'s pre-softmax scores, but query_states/key_states are None; "
                "run the forward with output_query_key=True (requires={'query_key'})."
            )
        return attention_scores(states[0][layer - 1], states[1][layer - 1])

    def _probs_or_log_probs(self, output, layer: int, mask: torch.Tensor | None) -> tuple[torch.Tensor, bool]:
        """(log-probs, True) from queries/keys, else (probs restricted to real keys, False) from attentions."""
        states = query_key_states(output)
        if states is not None:
            return _key_log_probs(attention_scores(states[0][layer - 1], states[1][layer - 1]), mask), True
        probs = output.attentions[layer - 1].float()
        if mask is not None:
            probs = probs * (mask[:, None, None, :].to(probs.device) > 0)
        return probs / probs.sum(-1, keepdim=True).clamp(min=1e-12), False

    def _common_heads(self, student_heads: int, teacher_heads: int) -> int:
        if student_heads == teacher_heads:
            return student_heads
        if self.head_reduction is None:
            raise ValueError(
                f"AttentionLoss: the student has {student_heads} attention heads and the teacher {teacher_heads}; "
                "they must match, or pass head_reduction='mean' to average both down to a common count."
            )
        return math.gcd(student_heads, teacher_heads)

    def _layer_loss(self, student_out, teacher_out, i: int, j: int, mask: torch.Tensor | None) -> torch.Tensor:
        if self.kind == "mse":
            student = self._scores(student_out, i, "student")
            teacher = self._scores(teacher_out, j, "teacher").detach()
            heads = self._common_heads(student.size(1), teacher.size(1))
            student, teacher = reduce_heads(student, heads), reduce_heads(teacher, heads)
            return masked_mse(student, teacher, None if mask is None else pair_mask(mask))
        student, student_is_log = self._probs_or_log_probs(student_out, i, mask)
        teacher, teacher_is_log = self._probs_or_log_probs(teacher_out, j, mask)
        teacher = teacher.detach()
        heads = self._common_heads(student.size(1), teacher.size(1))
        logs = []
        for values, is_log in ((student, student_is_log), (teacher, teacher_is_log)):
            if heads != values.size(1):  # average probabilities, not logs
                values = reduce_heads(values.exp() if is_log else values, heads)
                is_log = False
            logs.append(values if is_log else values.clamp(min=1e-12).log())
        return _attention_kl(logs[1], logs[0], mask)

    def forward(self, student_out, teacher_outs: Sequence, batch: dict) -> dict[str, torch.Tensor]:
        teacher_out = teacher_outs[0]
        mask = _attention_mask(batch)
        pairs = self.mapping.pairs(self._num_layers(student_out, "student"), self._num_layers(teacher_out, "teacher"))
        losses = [self._layer_loss(student_out, teacher_out, i, j, mask) for i, j in pairs]
        return {"attention": torch.stack(losses).mean()}
