"""Augmented text pairs in the manner of TinyBERT's task-specific data augmentation.

For every training pair, `n` times: each replaceable word (alphabetic, not a stop word, with
candidates) of one text is replaced with probability `p` by one of its `k` candidates drawn
uniformly; as in TinyBERT, which augments each text of a pair on its own, draw i changes text
i mod 2 and keeps the other (`change="all"` changes every text of the pair in each draw) (`word_candidates`: the teacher's input-embedding neighbours by default, or a masked
LM's top k). As in TinyBERT, a draw equal to the original pair or to an earlier draw is dropped,
so a pair yields at most `n` new ones. The new rows follow their pair, carry no gold label (None)
and `origin="augmented"`; the pair itself keeps its label and gets `origin="gold"`. Draws come from
a generator seeded by (seed, row index), so the result depends on the seed only, not on batching.

Reference: Jiao et al., "TinyBERT: Distilling BERT for Natural Language Understanding", Findings of
EMNLP 2020, section 3.3 (the official data_augmentation.py: p = 0.4, K = 15, N = 20 or 30).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from datasets import Dataset

from .fingerprints import fingerprint
from .origins import AUGMENTED, GOLD, ORIGIN_COLUMN, check_unlabelled_by_teachers, mixed_features
from .word_candidates import STOP_WORDS, EmbeddingNeighbours, MaskedLMCandidates, Spans, match_case

__all__ = ["augment_pairs", "replace_words"]


def replace_words(text: str, spans: Spans, p: float, rng: np.random.Generator) -> str:
    """`text` with each listed word replaced, with probability `p`, by a uniformly drawn candidate."""
    pieces, last = [], 0
    for (start, end), candidates in spans:
        pick = candidates[int(rng.integers(len(candidates)))]
        if rng.random() < p:
            pieces += [text[last:start], match_case(text[start:end], pick)]
            last = end
    return "".join(pieces) + text[last:]


CHANGES = ("one", "all")


def _new_pairs(pair: dict[str, str], spans: dict[str, Spans], n: int, p: float, rng: np.random.Generator,
               change: str = "one") -> list[dict]:
    """Up to n distinct augmented versions of `pair` (none equal to it); draw i changes text i mod len(pair)
    (change "one") or every text (change "all")."""
    seen = {tuple(pair.values())}
    columns = list(pair)
    out = []
    for draw in range(n):
        changed = columns if change == "all" else [columns[draw % len(columns)]]
        new = {column: replace_words(text, spans[column], p, rng) if column in changed else text
               for column, text in pair.items()}
        if tuple(new.values()) not in seen:
            seen.add(tuple(new.values()))
            out.append(new)
    return out


def _check(dataset, text_columns: Sequence[str], label_column: str, n: int, p: float, k: int, sources: int,
           change: str) -> None:
    if not isinstance(dataset, Dataset):
        raise ValueError(f"dataset={type(dataset).__name__} is not valid; give a datasets.Dataset (one split).")
    missing = [c for c in text_columns if c not in dataset.column_names]
    if missing or not 1 <= len(text_columns) <= 2:
        raise ValueError(f"text_columns={list(text_columns)!r} is not valid: give one or two of {dataset.column_names}.")
    if label_column in text_columns:
        raise ValueError(f"label_column={label_column!r} is not valid: it is one of the text columns.")
    for name, value, valid in (("n", n, n >= 1), ("k", k, k >= 1), ("p", p, 0.0 <= p <= 1.0)):
        if not valid:
            raise ValueError(f"{name}={value} is not valid; n and k are integers >= 1, p is in [0, 1].")
    if change not in CHANGES:
        raise ValueError(f"change={change!r} is not valid; give one of {list(CHANGES)}.")
    if sources != 1:
        raise ValueError("embeddings/masked_lm: give exactly one candidate source (the teacher's embeddings, or a masked LM).")
    check_unlabelled_by_teachers(dataset, "augment_pairs")


def augment_pairs(
    dataset: Dataset,
    text_columns: Sequence[str],
    tokenizer=None,
    *,
    embeddings=None,
    masked_lm=None,
    n: int = 20,
    p: float = 0.4,
    k: int = 15,
    seed: int = 0,
    change: str = "one",
    label_column: str = "label",
    batch_size: int = 64,
    device=None,
    desc: str | None = None,
) -> Dataset:
    """Each pair of `dataset` followed by up to `n` augmented pairs (label None, origin "augmented").

    Args:
        dataset: a `datasets.Dataset` with the text columns (and a label column, kept for gold rows).
        text_columns: the one or two text columns; each text is augmented on its own.
        tokenizer: the tokenizer of the candidate source (the teacher's; for a masked LM given as a path,
            None loads its own).
        embeddings: the teacher (its input embeddings), an `nn.Embedding` or a (vocab, dim) tensor.
        masked_lm: instead, a masked LM (`AutoModelForMaskedLM` or its path).
        n / p / k: draws per pair, replacement probability, candidates per word (TinyBERT: 20-30, 0.4, 15).
        change: "one" (TinyBERT: each new pair changes one text, alternating) or "all" (every text).
        seed: the result is a function of the seed (and the data and source), cached by `datasets`.
        batch_size / device: rows per map batch; the masked LM's batch size and device.

    Returns a dataset with the input's columns plus `origin`; its fingerprint keys on the data,
    the columns, n, p, k, change, the seed and the candidate source (weights and tokenizer).
    """
    _check(dataset, text_columns, label_column, n, p, k, (embeddings is not None) + (masked_lm is not None), change)
    if embeddings is not None:
        if tokenizer is None:
            raise ValueError("tokenizer=None: pass the tokenizer of the model whose embeddings give the candidates.")
        source = EmbeddingNeighbours(embeddings, tokenizer, k)
    else:
        source = MaskedLMCandidates(masked_lm, tokenizer, k, batch_size=batch_size, device=device)
    key = fingerprint("augment_pairs/2", dataset._fingerprint, list(text_columns), label_column, n, p, k, seed, change,
                      source.fingerprint, sorted(STOP_WORDS))
    features = mixed_features(dataset)
    columns = list(text_columns)

    def expand(batch: Mapping[str, list], indices: list[int]) -> dict[str, list]:
        spans = {c: source.candidates(batch[c]) for c in columns}
        out: dict[str, list] = {name: [] for name in features}
        for j, index in enumerate(indices):
            row = {name: batch[name][j] for name in batch}
            row.setdefault(ORIGIN_COLUMN, GOLD)
            rng = np.random.default_rng([seed, index])
            news = _new_pairs({c: row[c] for c in columns}, {c: spans[c][j] for c in columns}, n, p, rng, change)
            for new in [{}, *news]:
                extra = {label_column: None, ORIGIN_COLUMN: AUGMENTED} if new else {}
                for name in features:
                    out[name].append({**row, **new, **extra}.get(name))
        return out

    return dataset.map(expand, batched=True, batch_size=batch_size, with_indices=True, features=features,
                       new_fingerprint=key, desc=desc or f"Augmenting pairs (n={n}, p={p}, k={k})")
