"""Teachers: online (a frozen model run every step) and offline (logits precomputed into the dataset).

Offline logits are what DvBERT does: the teacher labels the training set once and every epoch
and run reuses the column. Labelling sorts the rows by tokenised length (little padding), shows
a progress bar, is cached by a `datasets` fingerprint of the data, the teacher's weights and its
tokenizer, and under `torchrun` / `accelerate launch` splits the batches across the processes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import datasets
import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import AutoModel, PreTrainedModel

from .batch_keys import logits_column, logits_columns
from .fingerprints import fingerprint, tokenizer_digest, weights_digest
from .length_batching import length_batches, token_lengths
from .model_card.teacher_records import record_teacher
from .process_shards import gather_rows, shard_plan

__all__ = [
    "TEACHER_DTYPES",
    "TeacherLogits",
    "add_teacher_logits",
    "freeze_teacher",
    "labelling_fingerprint",
    "load_teacher",
    "teacher_logit_columns",
]

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


teacher_logit_columns = logits_columns  # the name other modules import; `batch_keys` spells the keys


def labelling_fingerprint(dataset, teacher: torch.nn.Module, tokenizer, text_columns: Sequence[str], max_length: int,
                          column: str) -> str:
    """The cache key of `add_teacher_logits`: the data, the teacher's weights, its tokenizer (name or path,
    vocabulary size and digest, pipeline, sides), the text columns, the truncation and the output column."""
    return fingerprint(
        "add_teacher_logits/2", dataset._fingerprint, weights_digest(teacher), tokenizer_digest(tokenizer),
        list(text_columns), "longest_first", max_length, column,
    )


def _check_text_columns(dataset, text_columns: Sequence[str]) -> None:
    missing = [c for c in text_columns if c not in dataset.column_names]
    if missing or not 1 <= len(text_columns) <= 2:
        raise ValueError(
            f"text_columns={list(text_columns)!r} is not valid for this dataset: give one or two of {dataset.column_names}."
        )


def _default_device(world: int) -> torch.device:
    if not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if world > 1 else torch.device("cuda")


@contextlib.contextmanager
def _frozen(teacher: torch.nn.Module, device) -> Iterator[None]:
    """Eval mode and no gradients on `device` inside; the caller's train/eval mode and requires_grad after."""
    was_training = teacher.training
    trainable = {name: p.requires_grad for name, p in teacher.named_parameters()}
    freeze_teacher(teacher, device)
    try:
        yield
    finally:
        teacher.train(was_training)
        for name, parameter in teacher.named_parameters():
            parameter.requires_grad_(trainable[name])


def _cached(dataset, key: str, column: str, desc: str) -> datasets.Dataset | None:
    """The labelled dataset from the `datasets` cache when a file for `key` exists (no teacher runs)."""
    if not dataset.cache_files or not datasets.is_caching_enabled():
        return None
    if not os.path.exists(dataset._get_cache_file_path(key)):
        return None

    def never(batch):  # map loads the cached file and never calls this
        raise RuntimeError(f"the cache file for {column} vanished while loading it")

    return dataset.map(never, batched=True, new_fingerprint=key, desc=desc)


def _label_batches(teacher, tokenizer, texts, batches, max_length: int, device, bar: tqdm) -> list[torch.Tensor]:
    outputs = []
    for rows in batches:
        enc = tokenizer(*[[column[i] for i in rows] for column in texts], padding=True, truncation=True,
                        max_length=max_length, return_tensors="pt")
        with torch.inference_mode():
            outputs.append(teacher(**{k: v.to(device) for k, v in enc.items()}).logits.float().cpu())
        bar.update(len(rows))
    return outputs


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
    *,
    sort_by_length: bool = True,
    shard: bool | None = None,
    progress: bool = True,
):
    """Return `dataset` with a column of the teacher's logits for every row (computed once, then cached).

    Args:
        dataset: a `datasets.Dataset` holding the text columns.
        teacher: a cross-encoder (`CrossEncoderModel` or any sequence-pair model) or its path.
        text_columns: the one or two text columns the teacher reads as a (joint) pair.
        tokenizer: the teacher's own tokenizer (default: `teacher.tokenizer`).
        column: output column; default the first free `teacher_logits_{k}`.
        batch_size / max_length: teacher batching and truncation.
        sort_by_length: batch rows of similar tokenised length (less padding); the column keeps row order.
        shard: split the batches across the processes of `torchrun` / `accelerate launch` (True), never
            (False), or when every process makes this call at once (None: see `process_shards`). Every
            process ends with the full column; call it outside `main_process_first` to split the work.
        progress: show a progress bar (on the first process).

    The result is cached by `labelling_fingerprint` (data, teacher weights, tokenizer, columns,
    truncation): rerunning a script reuses the column, a changed teacher or tokenizer relabels.
    The dataset records the teacher of the column (name, size, saved results: `record_teacher`), so the
    student's model card names it although the trainer never sees the teacher.
    """
    teacher = load_teacher(teacher)
    tokenizer = tokenizer if tokenizer is not None else getattr(teacher, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("tokenizer=None: pass the teacher's tokenizer (the teacher carries none).")
    _check_text_columns(dataset, text_columns)
    column = column or logits_column(len(logits_columns(dataset.column_names)))
    desc = desc or f"Teacher logits -> {column}"
    key = labelling_fingerprint(dataset, teacher, tokenizer, text_columns, max_length, column)
    cached = _cached(dataset, key, column, desc)
    if cached is not None:
        return record_teacher(cached, column, teacher)
    rank, world = shard_plan(shard, key)
    texts = [dataset[c][:] for c in text_columns]
    lengths = token_lengths(tokenizer, texts, max_length) if sort_by_length else np.zeros(len(dataset), np.int64)
    mine = length_batches(lengths, batch_size, sort=sort_by_length)[rank::world]
    device = torch.device(device) if device is not None else _default_device(world)
    bar = tqdm(total=sum(len(rows) for rows in mine), desc=desc, unit="pairs", disable=not progress or rank != 0)
    with _frozen(teacher, device), bar:
        outputs = _label_batches(teacher, tokenizer, texts, mine, max_length, device, bar)
    logits = gather_rows(mine, outputs, len(dataset), world) if len(dataset) else torch.zeros(0)

    def write(batch, indices):
        return {column: logits[indices].tolist()}

    labelled = dataset.map(write, batched=True, batch_size=1000, with_indices=True, new_fingerprint=key,
                           desc=f"{desc} (writing)")
    return record_teacher(labelled, column, teacher)
