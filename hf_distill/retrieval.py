"""Dense retrieval evaluation for Siamese students: embed a passage pool once, retrieve by cosine.

Re-ranking (`hf_distill.ranking.RankingEvaluator`) scores each query's first-stage candidates;
a bi-encoder can do more: embed every passage once and find each query's nearest passages in the
whole pool, with no first stage at all. `DenseRetrievalEvaluator` embeds the pool (progress bar),
takes each query's top k by cosine block by block (a block of passages at a time, so memory stays
at queries x block), and reports Recall@k, MRR@10, NDCG@10 and MAP of the retrieved lists.

The pool is every candidate passage of the `RankingData` (for the project's TREC DL copies: the
union of BM25's top 100 of each query, 4297 passages for DL19, 5396 for DL20), not the 8.8M
MS MARCO collection: numbers are comparable between models on the same pool, not to leaderboards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ._io import as_numpy
from .metrics import ranking_metrics
from .ranking import RankingData, load_trec_run

__all__ = ["DenseRetrievalEvaluator", "passage_pool", "recall_at_k", "top_k_cosine"]


def top_k_cosine(
    queries: torch.Tensor, passages: torch.Tensor, k: int, block_size: int = 4096
) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores, indices), each (Q, min(k, N)): every query's k most cosine-similar passages, best first.

    Passages are compared `block_size` at a time and merged with the best so far; equal scores keep
    the lower passage index first.
    """
    if k < 1 or block_size < 1:
        raise ValueError(f"k={k!r} and block_size={block_size!r} must be >= 1.")
    queries = F.normalize(queries.float(), dim=-1)
    passages = F.normalize(passages.float(), dim=-1)
    keep = min(k, passages.shape[0])
    best_scores = queries.new_full((queries.shape[0], 0), float("-inf"))
    best_indices = torch.zeros((queries.shape[0], 0), dtype=torch.long, device=queries.device)
    for start in range(0, passages.shape[0], block_size):
        block = queries @ passages[start : start + block_size].T
        indices = torch.arange(start, start + block.shape[1], device=queries.device).expand_as(block)
        scores = torch.cat([best_scores, block], dim=1)
        indices = torch.cat([best_indices, indices], dim=1)
        # stable sort by score (descending) after sorting by index: ties keep the lower index first
        order = torch.argsort(indices, dim=1)
        scores, indices = scores.gather(1, order), indices.gather(1, order)
        top = torch.argsort(scores, dim=1, descending=True, stable=True)[:, :keep]
        best_scores, best_indices = scores.gather(1, top), indices.gather(1, top)
    return best_scores, best_indices


def recall_at_k(qrels, run, query_ids, relevance_threshold: int = 1) -> float:
    """Mean over `query_ids` of |retrieved and relevant| / |relevant| (a query without relevant documents: 0)."""
    total = 0.0
    for qid in query_ids:
        relevant = {d for d, r in qrels.get(qid, {}).items() if r >= relevance_threshold}
        if relevant:
            total += len(relevant & set(run.get(qid, {}))) / len(relevant)
    return total / len(query_ids) if query_ids else 0.0


def passage_pool(data: RankingData) -> tuple[list[str], list[str]]:
    """(doc_ids, texts): every distinct candidate passage of `data`, in first-seen order."""
    pool: dict[str, str] = {}
    for qid, cands in data.candidates.items():
        for cand in cands:
            if pool.setdefault(cand.doc_id, cand.text) != cand.text:
                raise ValueError(
                    f"doc_id {cand.doc_id!r} names two different passages (query {qid!r}); dense retrieval needs "
                    "doc ids that are unique across queries (a TREC corpus), not per-query positions."
                )
    return list(pool), list(pool.values())


class DenseRetrievalEvaluator:
    """Retrieve each query's top k passages from the pool by cosine and score the lists.

    Call it with a model that has `.encode(texts)` (`SiameseModel`, a sentence-transformers model).
    Returns {"recall@k", "mrr@10", "ndcg@10", "map"} (raw, in [0, 1]), prefixed by `name + "_"`;
    MRR, MAP and recall count relevance >= `relevance_threshold` (TREC DL: 2), NDCG uses the graded
    labels; means are over every query of `data`.

    Example:
        >>> evaluator = DenseRetrievalEvaluator.from_trec("data/msmarco_trec_dl/dl19", relevance_threshold=2)
        >>> evaluator(siamese)  # {"dl19_dense_recall@100": ..., "dl19_dense_mrr@10": ..., "dl19_dense_ndcg@10": ...}
    """

    def __init__(
        self,
        data: RankingData,
        k: int = 100,
        cutoff: int = 10,
        batch_size: int = 32,
        block_size: int = 4096,
        relevance_threshold: int = 1,
        name: str = "",
        max_length: int | None = None,
        show_progress_bar: bool = True,
    ):
        for label, value in (("k", k), ("cutoff", cutoff), ("batch_size", batch_size), ("block_size", block_size)):
            if value < 1:
                raise ValueError(f"{label}={value!r} must be >= 1.")
        self.data = data
        self.doc_ids, self.texts = passage_pool(data)
        self.k, self.cutoff, self.batch_size, self.block_size = k, cutoff, batch_size, block_size
        self.relevance_threshold = relevance_threshold
        self.name = name
        self.max_length = max_length
        self.show_progress_bar = show_progress_bar

    @classmethod
    def from_trec(cls, folder: str | Path, name: str | None = None, **kwargs: Any) -> "DenseRetrievalEvaluator":
        """The evaluator of a TREC-layout folder (queries, corpus, qrels, candidates), named `<folder>_dense`."""
        return cls(load_trec_run(folder), name=name if name is not None else f"{Path(folder).name}_dense", **kwargs)

    def _encode(self, model: Any, texts: list[str]) -> torch.Tensor:
        kwargs: dict[str, Any] = {"batch_size": self.batch_size, "show_progress_bar": self.show_progress_bar}
        if self.max_length is not None:
            kwargs["max_length"] = self.max_length
        return torch.as_tensor(np.asarray(as_numpy(model.encode(texts, **kwargs)), dtype=np.float32))

    def retrieve(self, model: Any) -> dict[str, dict[str, float]]:
        """qid -> {doc_id: cosine} of each query's top k passages."""
        if not hasattr(model, "encode"):
            raise TypeError(f"{type(model).__name__} has no .encode(texts): dense retrieval needs a bi-encoder (SiameseModel).")
        qids = list(self.data.queries)
        if not qids or not self.texts:
            return {}
        passages = self._encode(model, self.texts)
        queries = self._encode(model, [self.data.queries[q] for q in qids])
        scores, indices = top_k_cosine(queries, passages, self.k, self.block_size)
        return {
            qid: {self.doc_ids[i]: s for s, i in zip(row_scores.tolist(), row_indices.tolist())}
            for qid, row_scores, row_indices in zip(qids, scores, indices)
        }

    def __call__(self, model: Any) -> dict[str, float]:
        run = self.retrieve(model)
        ranked = {qid: {d: float(len(docs) - i) for i, d in enumerate(docs)} for qid, docs in run.items()}  # strict order
        qids = list(self.data.queries)
        metrics = {f"recall@{self.k}": recall_at_k(self.data.qrels, run, qids, self.relevance_threshold)}
        metrics.update(
            ranking_metrics(self.data.qrels, ranked, query_ids=qids, relevance_threshold=self.relevance_threshold, k=self.cutoff)
        )
        prefix = f"{self.name}_" if self.name else ""
        return {prefix + key: value for key, value in metrics.items()}
