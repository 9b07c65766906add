"""Query groups for ranking distillation: (query, n passages, the teacher's n scores, the n gold labels).

Margin-MSE and listwise KL compare a query's passages with each other, so they train on groups
rather than pairs. A group is built from `RankingData` (either layout: answer-selection rows
grouped by a query id, or a TREC folder of queries, corpus, qrels and first-stage candidates):

1. `candidate_pairs`: one row per (query, candidate), saved once in the `datasets` cache (keyed by
   its content) so that labelling it is cached too;
2. `candidate_scores`: each teacher scores every candidate once with `add_teacher_logits` (the
   labelling path of pairs: length-batched, progress bar, cached by data, weights and tokenizer,
   sharded across processes); a teacher's score is its `passage_scores` (log-odds of the positive
   class for two classes); several teachers are averaged (an ensemble teacher);
3. `sample_groups`: per positive, n - 1 negatives drawn with a seed from the query's first-stage
   candidates (hard negatives: BM25's top ones), each passage with its precomputed score.

`query_groups` runs the three. Drawing other negatives (another seed, depth or group size) reuses
the cached scores: no teacher runs again.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Mapping, Sequence

import torch

from .batch_keys import logits_column
from .content_cache import saved_by_content
from .group_collator import GROUP_COLUMNS
from .losses.group_scores import passage_scores
from .ranking import Candidate, RankingData

__all__ = ["POSITIVES", "candidate_pairs", "candidate_scores", "query_groups", "sample_groups"]

POSITIVES = ("gold", "teacher")
_PAIR_COLUMNS = ("query", "passage")


def candidate_pairs(data: RankingData, cache_dir: str | os.PathLike | None = None):
    """Every (query, candidate) of `data` as a `datasets.Dataset` (qid, doc_id, query, passage, label),
    saved under the `datasets` cache (or `cache_dir`) by a digest of its content, so labels added by
    `add_teacher_logits` are cached with it; in memory when `datasets` caching is disabled."""
    import datasets

    pairs = data.to_pairs()
    if not datasets.is_caching_enabled() or len(pairs) == 0:
        return pairs
    digest = hashlib.sha256(json.dumps(pairs.to_dict(), sort_keys=True).encode()).hexdigest()[:32]
    return saved_by_content(pairs, digest, "candidates", cache_dir)


def candidate_scores(
    pairs,
    teachers: Sequence,
    batch_size: int = 64,
    max_length: int = 128,
    positive_label: int = 1,
    device: str | torch.device | None = None,
    progress: bool = True,
) -> dict[str, dict[str, float]]:
    """qid -> {doc_id: score}: every teacher's score of every candidate pair (averaged over teachers),
    from `add_teacher_logits` columns (computed once, then read from the `datasets` cache)."""
    from .teachers import add_teacher_logits

    if not teachers:
        raise ValueError("teachers=[] is not valid: query groups need a teacher to score every candidate.")
    total = torch.zeros(len(pairs), dtype=torch.float64)
    for k, teacher in enumerate(teachers):
        column = logits_column(k)
        if column not in pairs.column_names:
            pairs = add_teacher_logits(
                pairs, teacher, _PAIR_COLUMNS, column=column, batch_size=batch_size, max_length=max_length,
                device=device, desc=f"Teacher {k} scores every candidate", progress=progress,
            )
        logits = torch.tensor(pairs[column], dtype=torch.float64).reshape(len(pairs), -1)
        total += passage_scores(logits, positive_label)
    scores: dict[str, dict[str, float]] = {}
    for qid, doc_id, score in zip(pairs["qid"], pairs["doc_id"], (total / len(teachers)).tolist()):
        scores.setdefault(str(qid), {})[str(doc_id)] = float(score)
    return scores


def _anchors(cands: list[Candidate], judged: Mapping[str, int], scores: Mapping[str, float], positives: str,
             threshold: int) -> list[Candidate]:
    """The positives a query's groups start from: every gold-relevant candidate, or the teacher's top one."""
    if positives == "gold":
        return [c for c in cands if judged.get(c.doc_id, 0) >= threshold]
    return [min(cands, key=lambda c: (-scores[c.doc_id], c.rank))] if cands else []


def sample_groups(
    data: RankingData,
    scores: Mapping[str, Mapping[str, float]],
    group_size: int,
    seed: int = 42,
    positives: str = "gold",
    relevance_threshold: int = 1,
    negative_depth: int | None = None,
):
    """Query groups as a `datasets.Dataset`: qid, query, doc_ids, passages, teacher_scores, passage_labels.

    One group per positive (`positives="gold"`: each candidate judged >= `relevance_threshold`; queries
    without one give no group) or per query (`"teacher"`: its top-scored candidate). The other
    n - 1 passages are negatives drawn without replacement, seeded by (seed, qid, positive), from the
    query's first `negative_depth` candidates that are not judged relevant; a query with fewer keeps
    a smaller group (down to its positive alone). Labels are the graded judgements (unjudged: 0).
    """
    from datasets import Dataset

    _check_group_settings(group_size, positives, relevance_threshold, negative_depth)
    columns: dict[str, list] = {GROUP_COLUMNS[k]: [] for k in ("qid", "query", "doc_ids", "passages", "scores", "labels")}
    for qid, cands in data.candidates.items():
        judged = data.qrels.get(qid, {})
        query_scores = _query_scores(scores, qid, cands)
        pool = [c for c in cands[:negative_depth] if judged.get(c.doc_id, 0) < relevance_threshold]
        for anchor in _anchors(cands, judged, query_scores, positives, relevance_threshold):
            negatives = [c for c in pool if c.doc_id != anchor.doc_id]
            rng = random.Random(f"{seed}/{qid}/{anchor.doc_id}")
            group = [anchor, *rng.sample(negatives, min(group_size - 1, len(negatives)))]
            columns[GROUP_COLUMNS["qid"]].append(qid)
            columns[GROUP_COLUMNS["query"]].append(data.queries[qid])
            columns[GROUP_COLUMNS["doc_ids"]].append([c.doc_id for c in group])
            columns[GROUP_COLUMNS["passages"]].append([c.text for c in group])
            columns[GROUP_COLUMNS["scores"]].append([query_scores[c.doc_id] for c in group])
            columns[GROUP_COLUMNS["labels"]].append([int(judged.get(c.doc_id, 0)) for c in group])
    if not columns[GROUP_COLUMNS["qid"]]:
        raise ValueError(
            f"no query group in {data.name or 'the data'}: no query has a candidate judged >= relevance_threshold="
            f"{relevance_threshold}; lower the threshold or use positives='teacher'."
        )
    return Dataset.from_dict(columns)


def _query_scores(scores: Mapping[str, Mapping[str, float]], qid: str, cands: list[Candidate]) -> Mapping[str, float]:
    found = scores.get(qid, {})
    missing = [c.doc_id for c in cands if c.doc_id not in found]
    if missing:
        raise ValueError(f"no teacher score for {len(missing)} candidates of query {qid!r}, e.g. {missing[:3]}; "
                         "score every candidate first (candidate_scores).")
    return found


def _check_group_settings(group_size: int, positives: str, relevance_threshold: int, negative_depth: int | None) -> None:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size={group_size!r} is not valid; give the passages per group (>= 1: a positive and "
                         "group_size - 1 negatives).")
    if positives not in POSITIVES:
        raise ValueError(f"positives={positives!r} is not valid; choose one of {', '.join(map(repr, POSITIVES))}.")
    if relevance_threshold < 1:
        raise ValueError(f"relevance_threshold={relevance_threshold!r} is not valid; give a relevance >= 1.")
    if negative_depth is not None and negative_depth < 1:
        raise ValueError(f"negative_depth={negative_depth!r} is not valid; give a number of candidates >= 1 (None: all).")


def query_groups(
    data: RankingData,
    teachers,
    group_size: int = 8,
    seed: int = 42,
    positives: str = "gold",
    relevance_threshold: int = 1,
    negative_depth: int | None = None,
    batch_size: int = 64,
    max_length: int = 128,
    positive_label: int = 1,
    device: str | torch.device | None = None,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
):
    """Query groups of `data` scored by `teachers` (one model or a list, averaged): `candidate_pairs`,
    `candidate_scores` (cached), then `sample_groups`. See those for the arguments.

    Example:
        >>> groups = query_groups(load_qa_pairs("data/wikiqa/train.jsonl"), teacher, group_size=8)
        >>> groups[0]["passages"][0], groups[0]["teacher_scores"]  # the positive first, n scores
    """
    _check_group_settings(group_size, positives, relevance_threshold, negative_depth)
    teachers = list(teachers) if isinstance(teachers, (list, tuple)) else [teachers]
    pairs = candidate_pairs(data, cache_dir)
    scores = candidate_scores(pairs, teachers, batch_size, max_length, positive_label, device, progress)
    return sample_groups(data, scores, group_size, seed, positives, relevance_threshold, negative_depth)
