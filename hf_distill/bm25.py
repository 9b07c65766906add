"""BM25: the lexical reference a re-ranker must beat, for collections that ship without a first-stage run.

TREC DL ships BM25's candidate order, and `RankingEvaluator(first_stage=True)` scores it. Answer-selection
sets (WikiQA, TrecQA) ship only each question's candidate sentences; `BM25` scores them, with document
frequencies counted over a corpus (typically every candidate of the collection). It is a plain
`score_fn(pairs) -> scores`, so `RankingEvaluator` takes it as it takes a model:

    >>> data = load_qa_pairs("data/wikiqa/test.jsonl")
    >>> RankingEvaluator(data, name="wikiqa_test")(BM25.over_candidates(data))

Scoring (Robertson et al. 1994; Lucene's idf, which is never negative), with f(t, d) the count of term t in d:

    score(q, d) = sum over the terms t of q of  idf(t) * f(t, d) * (k1 + 1) / (f(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t) = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))      N documents, n(t) of them hold t

A term repeated in the query counts each time (as Lucene's query of its terms). Terms are lowercased words
(`\\w+`), without stemming or stop words; k1 = 0.9, b = 0.4 are Anserini's defaults for passages.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = ["BM25", "bm25_terms"]

_WORD = re.compile(r"\w+")


def bm25_terms(text: str) -> list[str]:
    """The terms BM25 counts: lowercased words."""
    return _WORD.findall(text.lower())


class BM25:
    """BM25 scores of (query, passage) pairs, with document frequencies from `corpus` (see the module docstring).

    Args:
        corpus: the documents that set the document frequencies and the mean length; a passage scored later
            need not be one of them (its own length is used).
        k1: term-frequency saturation (> 0).
        b: length normalisation, in [0, 1].
    """

    def __init__(self, corpus: Iterable[str], k1: float = 0.9, b: float = 0.4):
        if not k1 > 0:
            raise ValueError(f"k1={k1!r} is not valid; give a number > 0.")
        if not 0 <= b <= 1:
            raise ValueError(f"b={b!r} is not valid; give a number in [0, 1].")
        self.k1, self.b = k1, b
        frequencies: Counter = Counter()
        lengths = []
        for document in dict.fromkeys(corpus):  # each distinct text once
            terms = bm25_terms(document)
            lengths.append(len(terms))
            frequencies.update(set(terms))
        if not any(lengths):
            raise ValueError(f"corpus has no words ({len(lengths)} documents); give at least one document with a word.")
        self.documents, self.mean_length = len(lengths), sum(lengths) / len(lengths)
        self.document_frequency = dict(frequencies)

    @classmethod
    def over_candidates(cls, data, **kwargs) -> BM25:
        """BM25 with the frequencies of every candidate passage of `data` (a `RankingData`)."""
        return cls((c.text for candidates in data.candidates.values() for c in candidates), **kwargs)

    def idf(self, term: str) -> float:
        n = self.document_frequency.get(term, 0)
        return math.log(1 + (self.documents - n + 0.5) / (n + 0.5))

    def score(self, query: str, passage: str) -> float:
        counts = Counter(bm25_terms(passage))
        norm = self.k1 * (1 - self.b + self.b * sum(counts.values()) / self.mean_length)
        return sum(self.idf(t) * counts[t] * (self.k1 + 1) / (counts[t] + norm) for t in bm25_terms(query) if counts[t])

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The score of each (query, passage) pair: what `RankingEvaluator` calls a score_fn."""
        return [self.score(query, passage) for query, passage in pairs]
