"""VIRT's virtual attention and the VIRT-adapted interaction layer of `SiameseModel(interaction="virt")`.

Virtual attention (Li et al., EMNLP 2022): with Q_X the queries a layer computes while
encoding X alone and K_Y the keys the same layer computes while encoding Y alone,

    M_XY = softmax(Q_X K_Y^T / sqrt(d_head) + mask_Y)          per head, (B, H, T_X, T_Y)

is the attention X would pay to Y had the two been encoded jointly. `VirtualInteractionLoss`
distils it towards the cross-encoder's X->Y attention; the interaction layer reuses it at
match time (our reading of the paper's "VIRT-adapted interaction"; no official code exists):

    X~ = mean_h M^h_XY H_Y       with the LAST layer's queries and keys (the backbone's own
                                 projections: no new parameters, and exactly the maps VIRT distils)
    Y~ = mean_h M^h_YX H_X
    u  = pool([H_X ; X~]),  v = pool([H_Y ; Y~])                          (2 * hidden each)
    classifier over [u; v; |u - v|; max(u, v)] (+ u * v with use_product)

H_X is the last hidden state of X encoded alone, so the embeddings `encode()` returns stay
independent: the interaction only runs when a pair is scored.

Self-contained (imports only torch) so that it travels with a saved model for ``trust_remote_code=True``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["VirtInteraction", "cross_attend", "key_mask_bias", "virtual_attention"]


def key_mask_bias(key_mask: torch.Tensor, heads: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """(B, M) key mask -> (B * heads, 1, M) additive bias: 0 on kept keys, the dtype's minimum on masked ones.

    Added to Q K^T inside the matmul (`torch.baddbmm`), it masks in the same pass that computes the
    scores instead of two more passes over them.
    """
    keep = key_mask.to(device=device).bool()
    bias = torch.zeros(keep.shape, dtype=dtype, device=device).masked_fill(~keep, torch.finfo(dtype).min)
    columns = keep.size(-1)
    return bias[:, None, None, :].expand(keep.size(0), heads, 1, columns).reshape(-1, 1, columns)


def virtual_attention(queries: torch.Tensor, keys: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_head) + mask) over the keys, in float32 (autocast off).

    Args:
        queries: (B, H, N, d_head) queries of one sequence.
        keys: (B, H, M, d_head) keys of the other sequence.
        key_mask: (B, M), 1/True for keys that may be attended to; None keeps every key.
            A row whose keys are all masked gets a uniform (meaningless) distribution: mask it downstream.

    Returns:
        (B, H, N, M) attention probabilities, each row summing to 1 over the kept keys.
    """
    with torch.autocast(device_type=queries.device.type, enabled=False):
        queries, keys = queries.float(), keys.float().to(queries.device)
        *lead, rows, width = queries.shape
        columns = keys.size(-2)
        flat_queries, flat_keys = queries.reshape(-1, rows, width), keys.reshape(-1, columns, width).transpose(1, 2)
        scale = 1.0 / math.sqrt(width)
        if key_mask is None:
            scores = torch.baddbmm(flat_queries.new_zeros(()), flat_queries, flat_keys, beta=0.0, alpha=scale)
        else:
            bias = key_mask_bias(key_mask, lead[-1] if len(lead) > 1 else 1, queries.dtype, queries.device)
            scores = torch.baddbmm(bias, flat_queries, flat_keys, alpha=scale)
        return scores.view(*lead, rows, columns).softmax(dim=-1)


def cross_attend(probabilities: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """(mean over heads of probabilities) @ values: (B, H, N, M) x (B, M, D) -> (B, N, D) in values' dtype."""
    mixed = probabilities.mean(dim=1) @ values.float()
    return mixed.to(values.dtype)


class VirtInteraction(nn.Module):
    """The VIRT-adapted interaction layer: parameter-free, it reads what the encoder computed.

    forward(hidden_a, query_a, key_a, mask_a, hidden_b, query_b, key_b, mask_b) returns the
    token-level fused states [H_a ; H~_a] and [H_b ; H~_b], (B, T, 2 * hidden), to be pooled.
    hidden_*: last hidden states (B, T, D); query_*/key_*: the last layer's per-head queries and
    keys (B, H, T, d_head) of the same side; mask_*: (B, T) attention masks.
    """

    def forward(
        self,
        hidden_a: torch.Tensor,
        query_a: torch.Tensor,
        key_a: torch.Tensor,
        mask_a: torch.Tensor,
        hidden_b: torch.Tensor,
        query_b: torch.Tensor,
        key_b: torch.Tensor,
        mask_b: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        attended_a = cross_attend(virtual_attention(query_a, key_b, mask_b), hidden_b)  # X~ = M_XY H_Y
        attended_b = cross_attend(virtual_attention(query_b, key_a, mask_a), hidden_a)  # Y~ = M_YX H_X
        return torch.cat([hidden_a, attended_a], dim=-1), torch.cat([hidden_b, attended_b], dim=-1)
