"""Passage re-ranking data and evaluation: load either ranking layout, train pointwise, re-rank and score.

Two layouts are found in practice (and in `shared/data/`):

* **labelled pairs grouped by query** (answer selection: WikiQA, TrecQA): one row per
  (question, candidate answer, 0/1 label) with a `qid` column -> `load_qa_pairs`;
* **the TREC layout** (MS MARCO / TREC DL): `queries.jsonl` {qid, query}, `corpus.jsonl`
  {pid, text}, `qrels.jsonl` {qid, pid, relevance}, `candidates.jsonl` {qid, pid, rank, score}
  (a first-stage run, e.g. BM25 top-100) -> `load_trec_run`.

Both give a `RankingData`: queries, each query's first-stage candidates with their texts,
and graded judgements. `RankingData.to_pairs()` makes the pointwise (query, passage, label)
training set; `RankingEvaluator` re-ranks every query's candidates with a model and reports
MRR@10, NDCG@10 and MAP through `hf_distill.metrics.ranking_metrics` (ir_measures).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ._io import as_numpy as _as_numpy, is_module as _is_module, read_jsonl as _read_jsonl
from .metrics import ranking_metrics

__all__ = ["Candidate", "RankingData", "RankingEvaluator", "load_qa_pairs", "load_trec_run"]

class Candidate(NamedTuple):
    """One first-stage candidate of a query: its id, text, first-stage score (None if unknown) and 1-based rank."""

    doc_id: str
    text: str
    score: float | None
    rank: int


@dataclass
class RankingData:
    """Queries, their first-stage candidates (in first-stage order) and graded judgements.

    Attributes:
        queries: qid -> query text; these queries are the evaluation set (one missing from
            `candidates` or `qrels` scores 0).
        candidates: qid -> [Candidate], sorted by first-stage rank.
        qrels: qid -> {doc_id: graded relevance}; may judge documents that are not candidates
            (they count in the ideal DCG). Unjudged candidates are irrelevant (0).
        name: a label for logs and metric prefixes.
    """

    queries: dict[str, str]
    candidates: dict[str, list[Candidate]]
    qrels: dict[str, dict[str, int]]
    name: str = ""
    _pair_count: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        unknown = set(self.candidates) - set(self.queries)
        if unknown:
            raise ValueError(f"candidates for {len(unknown)} qids that have no query text, e.g. {sorted(unknown)[:3]}.")
        for qid, cands in self.candidates.items():
            ids = [c.doc_id for c in cands]
            if len(set(ids)) != len(ids):
                raise ValueError(f"query {qid!r} lists the same doc_id twice among its candidates.")
        self._pair_count = sum(len(c) for c in self.candidates.values())

    def __len__(self) -> int:
        return len(self.queries)

    def __repr__(self) -> str:
        return f"RankingData(name={self.name!r}, queries={len(self.queries)}, pairs={self._pair_count})"

    @property
    def num_pairs(self) -> int:
        """Number of (query, candidate) pairs."""
        return self._pair_count

    # ------------------------------------------------------------------ building
    @classmethod
    def from_pairs(
        cls,
        rows: Iterable[Mapping[str, Any]],
        only_answerable: bool = True,
        clean: bool = False,
        qid_column: str = "qid",
        query_column: str = "question",
        passage_column: str = "answer",
        label_column: str = "label",
        doc_id_column: str | None = None,
        name: str = "",
    ) -> "RankingData":
        """Group labelled (query, passage, label) rows by `qid_column`; row order is the first-stage order.

        only_answerable: keep only queries with at least one candidate labelled > 0 (the
            standard answer-selection protocol: WikiQA test keeps 243 of 633 questions).
        clean: also drop queries whose candidates are all positive (the "clean" setting).
        doc_id_column: candidate id column (unique within a query); by default `sid` when the
            rows have it, else the candidate's 0-based position within its query.
        """
        queries: dict[str, str] = {}
        grouped: dict[str, list[tuple[Any, str, int]]] = {}
        for row in rows:
            qid = str(row[qid_column])
            queries.setdefault(qid, str(row[query_column]))
            id_column = doc_id_column or ("sid" if "sid" in row else None)
            position = len(grouped.get(qid, ()))
            doc_id = str(row[id_column]) if id_column else str(position)
            grouped.setdefault(qid, []).append((doc_id, str(row[passage_column]), int(row[label_column])))

        candidates: dict[str, list[Candidate]] = {}
        qrels: dict[str, dict[str, int]] = {}
        for qid, items in grouped.items():
            labels = [label for _, _, label in items]
            if only_answerable and max(labels) <= 0:
                continue
            if clean and min(labels) > 0:
                continue
            candidates[qid] = [Candidate(d, text, None, i + 1) for i, (d, text, _) in enumerate(items)]
            qrels[qid] = {d: label for d, _, label in items}
        return cls({qid: queries[qid] for qid in candidates}, candidates, qrels, name=name)

    # ------------------------------------------------------------------ views
    def to_pairs(self, relevance_threshold: int | None = None):
        """Pointwise pairs as a `datasets.Dataset` with columns qid, doc_id, query, passage, label.

        label is the graded relevance (unjudged = 0), or 1/0 for relevance >= `relevance_threshold`
        when one is given (binary training targets, e.g. threshold 2 for TREC DL).
        """
        from datasets import Dataset

        columns: dict[str, list] = {"qid": [], "doc_id": [], "query": [], "passage": [], "label": []}
        for qid, cands in self.candidates.items():
            judged = self.qrels.get(qid, {})
            for cand in cands:
                relevance = judged.get(cand.doc_id, 0)
                columns["qid"].append(qid)
                columns["doc_id"].append(cand.doc_id)
                columns["query"].append(self.queries[qid])
                columns["passage"].append(cand.text)
                if relevance_threshold is not None:
                    relevance = int(relevance >= relevance_threshold)
                columns["label"].append(relevance)
        return Dataset.from_dict(columns)

    def first_stage_run(self) -> dict[str, dict[str, float]]:
        """The first-stage order as a run: qid -> {doc_id: score}, strictly decreasing with rank."""
        return {
            qid: {c.doc_id: float(len(cands) - i) for i, c in enumerate(sorted(cands, key=lambda c: c.rank))}
            for qid, cands in self.candidates.items()
            if cands
        }


# ---------------------------------------------------------------------------- loaders
def load_qa_pairs(
    path: str | Path,
    only_answerable: bool = True,
    clean: bool = False,
    name: str | None = None,
    **columns: str,
) -> RankingData:
    """Load an answer-selection jsonl (WikiQA, TrecQA: qid, question, answer, label) as `RankingData`.

    only_answerable=True keeps the questions with at least one correct answer (the standard
    MAP/MRR protocol); `clean` also drops all-correct questions. `columns` renames the expected
    columns (qid_column, query_column, passage_column, label_column, doc_id_column).
    """
    path = Path(path)
    return RankingData.from_pairs(
        _read_jsonl(path),
        only_answerable=only_answerable,
        clean=clean,
        name=name if name is not None else f"{path.parent.name}-{path.stem}",
        **columns,
    )


def load_trec_run(folder: str | Path, depth: int | None = None, name: str | None = None) -> RankingData:
    """Load the TREC layout (queries, corpus, qrels, candidates jsonl files in `folder`) as `RankingData`.

    Every query of queries.jsonl is kept (one without candidates scores 0); every judgement of
    qrels.jsonl is kept (judged passages outside the candidates still count in the ideal DCG).
    Candidates are ordered by `rank` (by descending `score`, file order on ties, when there is
    no rank); `depth` keeps the first `depth` of each query.
    """
    folder = Path(folder)
    queries = {str(r["qid"]): str(r["query"]) for r in _read_jsonl(folder / "queries.jsonl")}
    corpus = {str(r["pid"]): str(r["text"]) for r in _read_jsonl(folder / "corpus.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    for r in _read_jsonl(folder / "qrels.jsonl"):
        qrels.setdefault(str(r["qid"]), {})[str(r["pid"])] = int(r["relevance"])

    rows: dict[str, list[dict]] = {}
    for r in _read_jsonl(folder / "candidates.jsonl"):
        rows.setdefault(str(r["qid"]), []).append(r)
    candidates: dict[str, list[Candidate]] = {}
    for qid, items in rows.items():
        if qid not in queries:
            raise ValueError(f"{folder / 'candidates.jsonl'}: qid {qid!r} is not in queries.jsonl.")
        if all("rank" in r for r in items):
            items = sorted(items, key=lambda r: int(r["rank"]))
        else:
            items = sorted(items, key=lambda r: -float(r["score"]))
        missing = [str(r["pid"]) for r in items if str(r["pid"]) not in corpus]
        if missing:
            raise ValueError(
                f"{folder / 'corpus.jsonl'} has no text for {len(missing)} candidates of qid {qid!r}, "
                f"e.g. {missing[:3]}."
            )
        items = items[:depth] if depth is not None else items
        candidates[qid] = [
            Candidate(str(r["pid"]), corpus[str(r["pid"])], float(r["score"]) if "score" in r else None, i + 1)
            for i, r in enumerate(items)
        ]
    return RankingData(queries, candidates, qrels, name=name if name is not None else folder.name)


# ---------------------------------------------------------------------------- evaluation
class RankingEvaluator:
    """Re-rank each query's candidates with a model and report MRR@k, NDCG@k and MAP.

    Call it with a `CrossEncoderModel` (anything with `.predict(pairs)`: a 1-output head's
    score; for 2 classes the logit difference of class `positive_label` over the other, i.e.
    its log-odds, which orders like its softmax or log-softmax; for more classes the
    log-softmax of `positive_label`), a `SiameseModel` (anything with `.encode(texts)`: cosine
    of the query and passage embeddings), or a plain `score_fn(list[(query, passage)]) -> scores`
    (called on chunks of `batch_size` pairs).

    Returns {"mrr@k", "ndcg@k", "map"} (raw, in [0, 1]), prefixed by `name + "_"` when a name
    is given; the Trainer adds `eval_`, e.g. `eval_dl19_ndcg@10`. Binary measures (MRR, MAP)
    count relevance >= `relevance_threshold` as relevant (TREC DL: 2; WikiQA/TrecQA: 1);
    NDCG uses the graded labels. The mean is over all queries of `data`: a query without
    candidates or relevant documents scores 0. Equal scores are ordered by first-stage rank
    (ir_measures' providers break ties differently, so the run handed to them has none).
    `first_stage=True` ignores the model and scores the first-stage order (the BM25 reference).

    Example:
        >>> evaluator = RankingEvaluator(load_trec_run("data/msmarco_trec_dl/dl19"), relevance_threshold=2, name="dl19")
        >>> evaluator(cross_encoder)  # {"dl19_mrr@10": ..., "dl19_ndcg@10": ..., "dl19_map": ...}
    """

    def __init__(
        self,
        data: RankingData,
        batch_size: int = 32,
        relevance_threshold: int = 1,
        name: str = "",
        k: int = 10,
        max_length: int | None = None,
        first_stage: bool = False,
        positive_label: int = 1,
        show_progress_bar: bool = False,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r} must be >= 1.")
        if k < 1:
            raise ValueError(f"k={k!r} must be >= 1.")
        self.data = data
        self.batch_size = batch_size
        self.relevance_threshold = relevance_threshold
        self.name = name
        self.k = k
        self.max_length = max_length
        self.first_stage = first_stage
        self.positive_label = positive_label
        self.show_progress_bar = show_progress_bar

    def __call__(self, model: Any = None) -> dict[str, float]:
        """Metrics of the model's re-ranking (or of the first-stage order when `first_stage=True`)."""
        if self.first_stage:
            run = self.data.first_stage_run()
        elif model is None:
            raise ValueError("RankingEvaluator needs a model or score_fn (or first_stage=True).")
        else:
            run = _strict_order(self.rerank(model), self.data.candidates)
        metrics = ranking_metrics(
            self.data.qrels, run, query_ids=self.data.queries, relevance_threshold=self.relevance_threshold, k=self.k
        )
        prefix = f"{self.name}_" if self.name else ""
        return {prefix + key: value for key, value in metrics.items()}

    def rerank(self, model: Any) -> dict[str, dict[str, float]]:
        """The model's raw score of every candidate: qid -> {doc_id: score}."""
        keys = [(qid, c.doc_id) for qid, cands in self.data.candidates.items() for c in cands]
        pairs = [(self.data.queries[qid], c.text) for qid, cands in self.data.candidates.items() for c in cands]
        scores = self._score(model, pairs) if pairs else np.zeros(0)
        run: dict[str, dict[str, float]] = {}
        for (qid, doc_id), score in zip(keys, scores):
            run.setdefault(qid, {})[doc_id] = float(score)
        return run

    # ------------------------------------------------------------------ scoring
    def _score(self, model: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
        if hasattr(model, "predict"):
            scores = self._cross_encoder_scores(model, pairs)
        elif hasattr(model, "encode"):
            scores = self._bi_encoder_scores(model, pairs)
        elif _is_module(model) or not callable(model):
            raise TypeError(
                f"{type(model).__name__} cannot score pairs: pass a model with .predict(pairs) (CrossEncoderModel), "
                ".encode(texts) (SiameseModel), or a score_fn(list[(query, passage)]) -> scores."
            )
        else:
            chunks = [
                _as_numpy(model(pairs[start : start + self.batch_size])).reshape(-1)
                for start in range(0, len(pairs), self.batch_size)
            ]
            scores = np.concatenate(chunks)
        if scores.shape != (len(pairs),):
            raise ValueError(f"the model returned {scores.shape} scores for {len(pairs)} pairs.")
        return scores

    def _cross_encoder_scores(self, model: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
        # Longest pairs first so each batch pads little; the original order is restored after.
        order = sorted(range(len(pairs)), key=lambda i: -(len(pairs[i][0]) + len(pairs[i][1])))
        kwargs: dict[str, Any] = {"batch_size": self.batch_size, "show_progress_bar": self.show_progress_bar}
        if self.max_length is not None:
            kwargs["max_length"] = self.max_length
        logits = _as_numpy(model.predict([pairs[i] for i in order], **kwargs))
        if logits.ndim == 2 and logits.shape[1] == 1:
            logits = logits[:, 0]
        if logits.ndim == 2:
            pos = self.positive_label
            if not 0 <= pos < logits.shape[1]:
                raise ValueError(f"positive_label={pos} is not a class of a {logits.shape[1]}-class head.")
            if logits.shape[1] == 2:
                logits = logits[:, pos] - logits[:, 1 - pos]
            else:
                shifted = logits - logits.max(axis=1, keepdims=True)
                logits = shifted[:, pos] - np.log(np.exp(shifted).sum(axis=1))
        scores = np.empty(len(pairs), dtype=np.float64)
        scores[order] = logits
        return scores

    def _bi_encoder_scores(self, model: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
        kwargs: dict[str, Any] = {"batch_size": self.batch_size}
        if self.show_progress_bar:
            kwargs["show_progress_bar"] = True
        if self.max_length is not None:
            kwargs["max_length"] = self.max_length
        query_texts = list(dict.fromkeys(q for q, _ in pairs))
        passage_texts = list(dict.fromkeys(p for _, p in pairs))
        queries = _unit_rows(_as_numpy(model.encode(query_texts, **kwargs)))
        passages = _unit_rows(_as_numpy(model.encode(passage_texts, **kwargs)))
        q_index = {t: i for i, t in enumerate(query_texts)}
        p_index = {t: i for i, t in enumerate(passage_texts)}
        q_rows = queries[[q_index[q] for q, _ in pairs]]
        p_rows = passages[[p_index[p] for _, p in pairs]]
        return (q_rows * p_rows).sum(axis=1)


# ---------------------------------------------------------------------------- helpers
def _strict_order(
    run: Mapping[str, Mapping[str, float]], candidates: Mapping[str, list[Candidate]]
) -> dict[str, dict[str, float]]:
    """Replace scores by strictly decreasing ones: by score, ties (and NaN, last) by first-stage rank."""
    strict: dict[str, dict[str, float]] = {}
    for qid, scores in run.items():
        rank = {c.doc_id: c.rank for c in candidates.get(qid, ())}
        key = lambda d: (-scores[d] if not np.isnan(scores[d]) else np.inf, rank.get(d, 0))  # noqa: E731
        ordered = sorted(scores, key=key)
        strict[qid] = {d: float(len(ordered) - i) for i, d in enumerate(ordered)}
    return strict


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)
