"""Teachers: online (a frozen model run every step) and offline (logits precomputed into the dataset).

Offline logits are what DvBERT does: the teacher labels the training set once, with
`datasets.map` (batched, cached by fingerprint), and every epoch and run reuses the columns.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import AutoModel, PreTrainedModel

TEACHER_LOGITS_PATTERN = re.compile(r"^teacher_logits_(\d+)$")
TEACHER_DTYPES = {"auto": None, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class TeacherLogits:
    """A teacher's output reduced to what logit losses read (for precomputed columns)."""

    logits: torch.Tensor


def load_teacher(teacher: str | PreTrainedModel, attn_implementation: str | None = None) -> PreTrainedModel:
    """A teacher model from a path / Hub id (loaded with `AutoModel`) or as given."""
    if isinstance(teacher, str):
        kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
        return AutoModel.from_pretrained(teacher, **kwargs)
    if not isinstance(teacher, torch.nn.Module):
        raise ValueError(f"teachers=[{teacher!r}] is not valid; give a PreTrainedModel, a PEFT model or a path.")
    return teacher


def freeze_teacher(teacher: torch.nn.Module, device: torch.device | str, dtype: str = "auto") -> torch.nn.Module:
    """Eval mode, no gradients, on the student's device, optionally cast (bf16/fp16). Never wrapped by DDP."""
    if dtype not in TEACHER_DTYPES:
        raise ValueError(f"teacher_dtype={dtype!r} is not valid; choose one of {', '.join(TEACHER_DTYPES)}.")
    teacher.eval()
    teacher.requires_grad_(False)
    teacher.to(device=device, dtype=TEACHER_DTYPES[dtype]) if TEACHER_DTYPES[dtype] else teacher.to(device)
    return teacher


def teacher_logit_columns(column_names: Sequence[str]) -> list[str]:
    """`teacher_logits_0`, `teacher_logits_1`, ... present in a dataset, in teacher order."""
    found = sorted((int(m.group(1)), name) for name in column_names if (m := TEACHER_LOGITS_PATTERN.match(name)))
    indices = [index for index, _ in found]
    if indices != list(range(len(indices))):
        raise ValueError(f"teacher logit columns {[n for _, n in found]} must be numbered 0..K-1 without gaps.")
    return [name for _, name in found]


def _weights_digest(model: torch.nn.Module) -> str:
    """A cheap, deterministic digest of a model's weights (for the datasets cache fingerprint)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        flat = tensor.detach().float().flatten()
        digest.update(repr((tuple(tensor.shape), float(flat.sum()), float(flat.abs().sum()))).encode())
    return digest.hexdigest()[:16]


def add_teacher_logits(
    dataset,
    teacher: str | PreTrainedModel,
    text_columns: Sequence[str],
    tokenizer=None,
    column: str | None = None,
    batch_size: int = 64,
    max_length: int = 128,
    device: str | torch.device | None = None,
    desc: str | None = None,
):
    """Return `dataset` with a column of the teacher's logits for every row (computed once).

    Args:
        dataset: a `datasets.Dataset` holding the text columns.
        teacher: a cross-encoder (`CrossEncoderModel` or any sequence-pair model) or its path.
        text_columns: the one or two text columns the teacher reads as a (joint) pair.
        tokenizer: the teacher's own tokenizer (default: `teacher.tokenizer`).
        column: output column; default the first free `teacher_logits_{k}`.
        batch_size / max_length: teacher batching and truncation.

    The map is cached by a fingerprint of the input dataset, the teacher's weights, the
    columns and the truncation, so rerunning a script reuses the cached logits.
    """
    teacher = load_teacher(teacher)
    tokenizer = tokenizer if tokenizer is not None else getattr(teacher, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("tokenizer=None: pass the teacher's tokenizer (the teacher carries none).")
    missing = [c for c in text_columns if c not in dataset.column_names]
    if missing or not 1 <= len(text_columns) <= 2:
        raise ValueError(
            f"text_columns={list(text_columns)!r} is not valid for this dataset: give one or two of {dataset.column_names}."
        )
    if column is None:
        column = f"teacher_logits_{len(teacher_logit_columns(dataset.column_names))}"
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    was_training = teacher.training
    trainable = {name: p.requires_grad for name, p in teacher.named_parameters()}
    freeze_teacher(teacher, device)

    def label(batch: dict) -> dict:
        texts = [batch[c] for c in text_columns]
        enc = tokenizer(*texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.inference_mode():
            logits = teacher(**{k: v.to(device) for k, v in enc.items()}).logits
        return {column: logits.float().cpu().tolist()}

    fingerprint = hashlib.sha256(
        repr((dataset._fingerprint, _weights_digest(teacher), list(text_columns), max_length, column)).encode()
    ).hexdigest()[:32]
    labelled = dataset.map(
        label,
        batched=True,
        batch_size=batch_size,
        new_fingerprint=fingerprint,
        desc=desc or f"Teacher logits -> {column}",
    )
    teacher.train(was_training)  # leave the caller's model as it was
    for name, parameter in teacher.named_parameters():
        parameter.requires_grad_(trainable[name])
    return labelled
