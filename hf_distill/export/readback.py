"""Read an exported standard checkpoint back from disk as its users will, for the parity check.

A cross-encoder is read with `AutoModelForSequenceClassification`; a bi-encoder with
`SentenceTransformer` when sentence-transformers is installed, else with `AutoModel` and the
pooling its `1_Pooling/config.json` names (what sentence-transformers computes).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer
from transformers.utils import logging as transformers_logging

from ..modeling import pool_tokens
from .sentence_transformers_checkpoint import POOLING_FLAGS

__all__ = ["StandardBiEncoder", "StandardCrossEncoder", "read_back"]


@contextlib.contextmanager
def _quiet():
    """No load reports while reading back (BertModel reports its unused pooler as newly initialised)."""
    previous = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(previous)


class StandardCrossEncoder:
    """`predict(pairs)` over a saved `AutoModelForSequenceClassification` checkpoint: raw logits, like the student."""

    reader = "transformers AutoModelForSequenceClassification"

    def __init__(self, folder: str | Path):
        with _quiet():
            self.model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(folder)

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        first, second = zip(*pairs)
        encoded = self.tokenizer(list(first), list(second), padding=True, truncation=True, return_tensors="pt")
        with torch.inference_mode():
            logits = self.model(**encoded).logits.float().numpy()
        return logits[:, 0] if logits.shape[1] == 1 else logits


class StandardBiEncoder:
    """`encode(texts)` over a saved sentence-transformers folder, read without sentence-transformers."""

    reader = "transformers AutoModel + the folder's pooling"

    def __init__(self, folder: str | Path):
        folder = Path(folder)
        with _quiet():
            self.model = AutoModel.from_pretrained(folder).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
        self.pooling = next(mode for mode, flag in POOLING_FLAGS.items() if pooling.get(flag))
        self.normalize = (folder / "2_Normalize").is_dir()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        encoded = self.tokenizer(list(texts), padding=True, truncation=True, return_tensors="pt")
        with torch.inference_mode():
            states = self.model(**encoded).last_hidden_state
        embeddings = pool_tokens(states, encoded["attention_mask"], self.pooling)
        return (F.normalize(embeddings, dim=-1) if self.normalize else embeddings).float().numpy()


class _SentenceTransformerReader:
    reader = "sentence-transformers SentenceTransformer"

    def __init__(self, folder: str | Path, module):
        with _quiet():
            self.model = module.SentenceTransformer(str(folder), device="cpu")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.encode(list(texts), convert_to_numpy=True)


def read_back(folder: str | Path, cross_encoder: bool):
    """The written checkpoint, loaded as a user loads it (see the module docstring)."""
    if cross_encoder:
        return StandardCrossEncoder(folder)
    try:
        import sentence_transformers
    except ImportError:
        return StandardBiEncoder(folder)
    return _SentenceTransformerReader(folder, sentence_transformers)
