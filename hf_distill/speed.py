"""How fast a model scores text pairs: one meter for the quickstart, the model card and the benchmarks.

    >>> from hf_distill.speed import pairs_per_second
    >>> pairs_per_second(student, [("a cat sat", "a cat was sitting"), ...], batch_size=32, max_length=128)
    812.4

The pairs are tokenised once, before timing, the way the model reads them: the joint pair for a
cross-encoder (or any sequence-pair classifier), each side alone for a Siamese bi-encoder (two
backbone passes per pair). Timing covers the forward passes only, under `torch.inference_mode`
in eval mode, after one warm-up batch; CUDA work is synchronised before the clock is read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .modeling.configuration_hf_distill import SiameseConfig


def _device_of(model) -> torch.device:
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    return next(model.parameters()).device


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def pair_batches(
    model,
    pairs: Sequence[tuple[str, str]],
    batch_size: int = 32,
    max_length: int = 128,
    tokenizer=None,
    padding: bool | str = True,
) -> list[dict[str, torch.Tensor]]:
    """`pairs` tokenised as `model` reads them, in batches of `batch_size` on the model's device.

    A Siamese model gets each side alone (`input_ids_a`, ..., `input_ids_b`, ...); any other model
    the joint pair (`input_ids`, `attention_mask`, ...). `tokenizer` defaults to `model.tokenizer`;
    `padding="max_length"` pads every sequence to exactly `max_length` tokens (a controlled length).
    """
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("tokenizer=None and the model carries no tokenizer; pass tokenizer=...")
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} must be >= 1.")
    siamese = getattr(getattr(model, "config", None), "model_type", None) == SiameseConfig.model_type
    device = _device_of(model)
    settings = dict(padding=padding, truncation=True, max_length=max_length, return_tensors="pt")
    batches = []
    for start in range(0, len(pairs), batch_size):
        first, second = (list(side) for side in zip(*pairs[start : start + batch_size]))
        if siamese:
            sides = {"_a": tokenizer(first, **settings), "_b": tokenizer(second, **settings)}
            batch = {name + suffix: value for suffix, view in sides.items() for name, value in view.items()}
        else:
            batch = dict(tokenizer(first, second, **settings))
        batches.append({name: value.to(device) for name, value in batch.items()})
    return batches


def time_batches(
    forward: Callable[[Any], Any], batches: Sequence[Any], pairs_per_pass: int, min_seconds: float = 1.0,
    device: torch.device | None = None,
) -> float:
    """Pairs per second of `forward` over `batches`, which hold `pairs_per_pass` pairs in all.

    One warm-up call on the first batch, then whole passes over `batches` until at least
    `min_seconds` have passed, under `torch.inference_mode`. `device`: synchronise CUDA before
    reading the clock. For batches of any form (e.g. a trainer's collated batches and a view of them).
    """
    if not batches or pairs_per_pass < 1:
        raise ValueError("time_batches needs at least one batch and one pair.")
    device = device or torch.device("cpu")
    with torch.inference_mode():
        forward(batches[0])
        _synchronize(device)
        done, start = 0, time.perf_counter()
        while True:
            for batch in batches:
                forward(batch)
            _synchronize(device)
            done += pairs_per_pass
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                return done / elapsed


def pairs_per_second(
    model,
    pairs: Sequence[tuple[str, str]],
    batch_size: int = 32,
    max_length: int = 128,
    min_seconds: float = 1.0,
    tokenizer=None,
    *,
    padding: bool | str = True,
) -> float:
    """Text pairs `model` scores per second (inference), a student or a teacher alike.

    Args:
        model: a `CrossEncoderModel` or `SiameseModel` (PEFT-wrapped too), or any model whose forward
            takes the tokenizer's joint-pair output.
        pairs: (text_a, text_b) pairs; all are scored in each pass (repeat a short list, or pass more).
        batch_size, max_length: the batches and the truncation (padding: longest in the batch, or
            `padding="max_length"` for exactly `max_length` tokens).
        min_seconds: time whole passes over `pairs` for at least this long, after one warm-up batch.
        tokenizer: default `model.tokenizer`.

    Returns:
        pairs per second. The model is put in eval mode while timed and its mode restored.
    """
    if not pairs:
        raise ValueError("pairs_per_second needs at least one pair.")
    batches = pair_batches(model, pairs, batch_size, max_length, tokenizer, padding)
    was_training = model.training
    model.eval()
    try:
        return time_batches(lambda batch: model(**batch), batches, len(pairs), min_seconds, _device_of(model))
    finally:
        model.train(was_training)
