"""Offline teacher embeddings: an embedding teacher embeds every sentence once, into dataset columns.

`add_teacher_embeddings` is to embedding teachers what `add_teacher_logits` is to cross-encoders:
the teacher embeds each distinct sentence of the text columns once (length-batched, with a progress
bar, split across the processes of `torchrun` / `accelerate launch`), the vectors are stored as
`teacher_embeddings_{k}_a` (and `_b` for pairs), in float32 or float16, and the result is cached by
a `datasets` fingerprint of the data, the teacher's weights, its tokenizer and the settings. Training
then reads the columns (`EmbeddingMSELoss`, `SimilarityStructureLoss`) and no teacher runs.

Rows may be sentences alone (one text column: unlabelled text is all it needs) or pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import datasets
import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from .embedding_teachers import EMBEDDINGS_PREFIX, SIDES, embedding_column, embedding_columns, load_embedding_teacher
from .fingerprints import fingerprint, tokenizer_digest, weights_digest
from .length_batching import length_batches, token_lengths
from .process_shards import gather_rows, shard_plan
from .teachers import _cached, _default_device, _frozen

__all__ = ["EMBEDDING_DTYPES", "add_teacher_embeddings", "embedding_fingerprint", "precomputed_teacher_config"]

EMBEDDING_DTYPES = ("float32", "float16")


def embedding_fingerprint(dataset, teacher, tokenizer, text_columns: Sequence[str], max_length: int, k: int,
                          dtype: str, cosine_column: str | None) -> str:
    """The cache key of `add_teacher_embeddings`: the data, the teacher's weights and pooling, its tokenizer,
    the text columns, the truncation, the teacher index, the storage dtype and the cosine column."""
    return fingerprint(
        "add_teacher_embeddings/1", dataset._fingerprint, weights_digest(teacher), tokenizer_digest(tokenizer),
        teacher.config.pooling, teacher.config.output_dim, list(text_columns), max_length, k, dtype, cosine_column,
    )


def precomputed_teacher_config(dataset, k: int = 0) -> SimpleNamespace | None:
    """`hidden_size` = the width of teacher k's precomputed embeddings in `dataset`, or None when it has none
    (what the registry's `from_arguments` reads when no teacher model is given)."""
    columns = getattr(dataset, "column_names", None) or []
    column = embedding_column(k, "a")
    if column not in columns or len(dataset) == 0:
        return None
    return SimpleNamespace(hidden_size=len(dataset[0][column]))


def _check_arguments(dataset, text_columns: Sequence[str], dtype: str, cosine_column: str | None) -> None:
    missing = [c for c in text_columns if c not in dataset.column_names]
    if missing or not 1 <= len(text_columns) <= 2:
        raise ValueError(
            f"text_columns={list(text_columns)!r} is not valid for this dataset: give one or two of {dataset.column_names}."
        )
    if dtype not in EMBEDDING_DTYPES:
        raise ValueError(f"dtype={dtype!r} is not valid; choose one of {', '.join(map(repr, EMBEDDING_DTYPES))}.")
    if cosine_column is not None and len(text_columns) != 2:
        raise ValueError(f"cosine_column={cosine_column!r} needs two text columns (a pair), got {list(text_columns)}.")


def _embed_batches(teacher, tokenizer, texts: Sequence[str], batches, max_length: int, device, bar) -> list[torch.Tensor]:
    outputs = []
    for rows in batches:
        enc = tokenizer([texts[i] for i in rows], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        enc = {k: v.to(device) for k, v in enc.items()}
        with torch.inference_mode():
            side = teacher.encode_side(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))
        outputs.append(side.embeddings.float().cpu())
        bar.update(len(rows))
    return outputs


def _distinct_texts(dataset, text_columns: Sequence[str]) -> tuple[list[str], list[np.ndarray]]:
    """The distinct texts of the columns (first-seen order) and, per column, each row's index into them."""
    index: dict[str, int] = {}
    rows = []
    for column in text_columns:
        rows.append(np.array([index.setdefault(str(text), len(index)) for text in dataset[column][:]], dtype=np.int64))
    return list(index), rows


def _next_teacher(dataset) -> int:
    taken = {int(name[len(EMBEDDINGS_PREFIX):].split("_")[0]) for name in embedding_columns(dataset.column_names)}
    return max(taken, default=-1) + 1


def _write(dataset, vectors: torch.Tensor, rows: list[np.ndarray], k: int, dtype: str, cosine_column: str | None,
           key: str, desc: str):
    """`dataset` with the embedding columns (and the cosine column), computed from the distinct texts' vectors."""
    columns = [embedding_column(k, side) for side in SIDES[: len(rows)]]
    features = dataset.features.copy()
    for column in columns:
        features[column] = datasets.Sequence(datasets.Value(dtype))
    if cosine_column is not None:
        features[cosine_column] = datasets.Sequence(datasets.Value("float32"))
    numpy_dtype = np.float16 if dtype == "float16" else np.float32

    def write(batch, indices):
        picked = [vectors[torch.as_tensor(side[indices])] for side in rows]
        out = {column: [v.numpy().astype(numpy_dtype) for v in side] for column, side in zip(columns, picked)}
        if cosine_column is not None:
            out[cosine_column] = F.cosine_similarity(picked[0], picked[1], dim=-1).unsqueeze(-1).numpy()
        return out

    return dataset.map(write, batched=True, batch_size=1000, with_indices=True, features=features,
                       new_fingerprint=key, desc=f"{desc} (writing)")


def add_teacher_embeddings(
    dataset,
    teacher: str | PreTrainedModel,
    text_columns: Sequence[str],
    tokenizer=None,
    k: int | None = None,
    batch_size: int = 64,
    max_length: int = 128,
    device: str | torch.device | None = None,
    desc: str | None = None,
    *,
    dtype: str = "float32",
    cosine_column: str | None = None,
    sort_by_length: bool = True,
    shard: bool | None = None,
    progress: bool = True,
):
    """Return `dataset` with teacher k's embedding of every sentence as columns (computed once, then cached).

    Args:
        dataset: a `datasets.Dataset` with one text column (sentences) or two (pairs).
        teacher: an embedding teacher or anything `load_embedding_teacher` takes (a path, a backbone).
        text_columns: the one or two text columns; each sentence is embedded alone (distinct texts once).
        tokenizer: the teacher's own tokenizer (default: the one it carries).
        k: the teacher index of the columns `teacher_embeddings_{k}_a` / `_b` (default: the next free one).
        batch_size / max_length: teacher batching and truncation.
        dtype: storage of the vectors, "float32" or "float16" (half the disk; training reads float32).
        cosine_column: also write the cosine of the two sides' embeddings there, one score per row (e.g.
            `teacher_logits_1`: the bi-encoder's score of the pair beside cross-encoder logits, DvBERT offline).
        sort_by_length: batch texts of similar tokenised length (less padding); the columns keep row order.
        shard: split the batches across processes (True), never (False), or when all arrive (None; see
            `process_shards`). Every process ends with the full columns.
        progress: show a progress bar (on the first process).
    """
    teacher = load_embedding_teacher(teacher, tokenizer=tokenizer)
    tokenizer = teacher.tokenizer
    _check_arguments(dataset, text_columns, dtype, cosine_column)
    k = _next_teacher(dataset) if k is None else k
    desc = desc or f"Teacher embeddings -> {embedding_column(k)}"
    key = embedding_fingerprint(dataset, teacher, tokenizer, text_columns, max_length, k, dtype, cosine_column)
    cached = _cached(dataset, key, embedding_column(k), desc)
    if cached is not None:
        return cached
    texts, rows = _distinct_texts(dataset, text_columns)
    rank, world = shard_plan(shard, key)
    lengths = token_lengths(tokenizer, [texts], max_length) if sort_by_length else np.zeros(len(texts), np.int64)
    mine = length_batches(lengths, batch_size, sort=sort_by_length)[rank::world]
    device = torch.device(device) if device is not None else _default_device(world)
    bar = tqdm(total=sum(len(r) for r in mine), desc=desc, unit="sentences", disable=not progress or rank != 0)
    with _frozen(teacher, device), bar:
        outputs = _embed_batches(teacher, tokenizer, texts, mine, max_length, device, bar)
    vectors = gather_rows(mine, outputs, len(texts), world) if texts else torch.zeros(0, teacher.embedding_dim)
    return _write(dataset, vectors, rows, k, dtype, cosine_column, key, desc)
