"""Batches of similar length: sort rows by tokenised length so a padded batch wastes little.

The plan is global (the same on every process) and a pure function of the lengths, so labelling
in one process or in many gives the same batches and hence bit-identical teacher outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["length_batches", "token_lengths"]


def token_lengths(tokenizer, texts: Sequence[Sequence[str]], max_length: int, chunk_size: int = 2048) -> np.ndarray:
    """The truncated token count (special tokens included) of every row of one or two text columns."""
    lengths = np.zeros(len(texts[0]), dtype=np.int64)
    for start in range(0, len(lengths), chunk_size):
        chunk = [list(column[start:start + chunk_size]) for column in texts]
        encoded = tokenizer(*chunk, truncation=True, max_length=max_length, return_attention_mask=False,
                            return_token_type_ids=False)
        lengths[start:start + len(chunk[0])] = [len(ids) for ids in encoded["input_ids"]]
    return lengths


def length_batches(lengths: Sequence[int], batch_size: int, sort: bool = True) -> list[np.ndarray]:
    """Row indices in batches of `batch_size`: longest first when `sort` (stable on ties), else in row order."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} is not valid; give a positive integer.")
    lengths = np.asarray(lengths)
    order = np.argsort(-lengths, kind="stable") if sort else np.arange(len(lengths))
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
