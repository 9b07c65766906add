"""Digests that key the `datasets` cache: a model's weights, a tokenizer, any mix of plain values.

A map keyed by these is recomputed when the teacher, its tokenizer or a setting changes, and
reused otherwise (rerunning a script costs nothing). A model's digest hashes the exact bytes of every
tensor: float statistics (sums) would depend on the number of threads that computed them, so the same
teacher would miss its own cache in a process with another thread count. Hashing a 22M-parameter model's
bytes takes a fraction of a second.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import torch

__all__ = ["fingerprint", "tokenizer_digest", "weights_digest"]


def fingerprint(*parts: Any, length: int = 32) -> str:
    """A hex digest of the `repr` of `parts` (the values must have a stable repr)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:length]


def _hash_tensor(digest, tensor: torch.Tensor) -> None:
    """Feed the tensor's shape, dtype and exact bytes (CPU, contiguous) into `digest`."""
    flat = tensor.detach().reshape(-1).contiguous().cpu()
    digest.update(repr((tuple(tensor.shape), str(tensor.dtype))).encode())
    digest.update(flat.view(torch.uint8).numpy())


def weights_digest(weights: torch.nn.Module | torch.Tensor) -> str:
    """A digest of a module's state (or one tensor): names, shapes, dtypes and the exact bytes of every value,
    the same in any process whatever its thread count."""
    digest = hashlib.sha256()
    with torch.no_grad():
        if isinstance(weights, torch.Tensor):
            _hash_tensor(digest, weights)
        else:
            for name, tensor in sorted(weights.state_dict().items()):
                digest.update(name.encode())
                _hash_tensor(digest, tensor)
    return digest.hexdigest()[:16]


def _backend_settings(tokenizer) -> str:
    """A fast tokenizer's full pipeline (normaliser, pre-tokeniser, model, post-processor), without the
    truncation/padding state that its calls change (else the digest would move after the first call)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return ""
    settings = json.loads(backend.to_str())
    settings.pop("truncation", None)
    settings.pop("padding", None)
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def tokenizer_digest(tokenizer) -> str:
    """A digest of what decides a tokenizer's ids: its name or path, class, vocabulary (size and content,
    added tokens included), fast pipeline, scalar settings (lower-casing, special tokens) and sides."""
    vocab = sorted(tokenizer.get_vocab().items())
    settings = {
        key: value
        for key, value in sorted(getattr(tokenizer, "init_kwargs", {}).items())
        if isinstance(value, (bool, int, float, str)) and not key.endswith("_file") and key != "name_or_path"
    }
    return fingerprint(
        getattr(tokenizer, "name_or_path", ""),
        type(tokenizer).__name__,
        len(tokenizer),
        hashlib.sha256(json.dumps(vocab).encode()).hexdigest(),
        _backend_settings(tokenizer),
        settings,
        getattr(tokenizer, "truncation_side", "right"),
        getattr(tokenizer, "padding_side", "right"),
    )
