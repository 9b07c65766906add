"""Parity and speed of a student in each runtime: what the export card and the deployment benchmark report.

Parity is the largest absolute difference between a runtime's outputs and the hf_distill student's
(pair scores or logits for a cross-encoder, embeddings for a bi-encoder) on the same texts.
Speed is measured on inputs padded to a fixed length: batch-1 latency (p50, p95 over `latency_runs`
calls after a warm-up) and batch-`batch` throughput (rows per second: pairs for a cross-encoder,
texts for a bi-encoder) with `hf_distill.speed.time_batches`, the project's one throughput meter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..speed import time_batches
from .student import BI_ENCODER, max_sequence_length, student_kind

__all__ = ["fixed_inputs", "forward_call", "max_abs_difference", "outputs_of", "speed_profile"]


def outputs_of(model, kind: str, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """Scores (cross-encoder) or embeddings of every distinct text (bi-encoder) as float64 NumPy."""
    if kind == BI_ENCODER:
        values = model.encode(list(dict.fromkeys(text for pair in pairs for text in pair)))
    else:
        values = model.predict(list(pairs))
    if hasattr(values, "detach"):
        values = values.detach().float().cpu().numpy()
    return np.asarray(values, dtype=np.float64)


def max_abs_difference(reference: np.ndarray, other: np.ndarray) -> float:
    if reference.shape != other.shape:
        raise ValueError(f"outputs of shape {other.shape} cannot be compared with the student's {reference.shape}.")
    return float(np.abs(reference - other).max()) if reference.size else 0.0


def fixed_inputs(student, pairs: Sequence[tuple[str, str]], batch: int, seq: int) -> dict[str, np.ndarray]:
    """`batch` rows padded (or cut) to exactly `seq` tokens: joint pairs, or first texts for a bi-encoder."""
    rows = [pairs[i % len(pairs)] for i in range(batch)]
    first = [a for a, _ in rows]
    second = None if student_kind(student) == BI_ENCODER else [b for _, b in rows]
    seq = min(seq, max_sequence_length(student))
    return dict(student.tokenizer(first, second, padding="max_length", truncation=True, max_length=seq, return_tensors="np"))


def forward_call(model, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
    """A no-argument call running one forward pass: an ONNX runtime's `run`, or the PyTorch student."""
    if hasattr(model, "session"):
        return lambda: model.run(inputs)
    tensors = {name: torch.from_numpy(np.asarray(value, dtype=np.int64)) for name, value in inputs.items()}
    bi_encoder = student_kind(model) == BI_ENCODER

    def call():
        with torch.inference_mode():
            if bi_encoder:
                return model.encode_side(tensors["input_ids"], tensors["attention_mask"], tensors.get("token_type_ids"))
            return model(**tensors)

    return call


def _latencies(call: Callable[[], object], runs: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def speed_profile(
    model, student, pairs: Sequence[tuple[str, str]], seq: int = 128, batch: int = 32, latency_runs: int = 30,
    min_seconds: float = 0.5,
) -> dict[str, float]:
    """Batch-1 p50/p95 latency (ms) and batch-`batch` throughput (rows/s, `hf_distill.speed`'s meter) at `seq` tokens."""
    single = _latencies(forward_call(model, fixed_inputs(student, pairs, 1, seq)), latency_runs)
    batched = forward_call(model, fixed_inputs(student, pairs, batch, seq))
    return {
        "batch1_p50_ms": 1000 * float(np.percentile(single, 50)),
        "batch1_p95_ms": 1000 * float(np.percentile(single, 95)),
        "throughput_rows_per_s": time_batches(lambda _: batched(), [None], batch, min_seconds),
        "throughput_batch": batch,
        "seq": min(seq, max_sequence_length(student)),
    }
