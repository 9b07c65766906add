"""Offline evaluation metrics: classification, correlation and ranking, ready for `Trainer(compute_metrics=...)`.

Why here and not `evaluate.load(...)`: `evaluate` downloads each metric script from the Hub,
which fails offline. These are plain NumPy/SciPy functions (ranking goes through `ir_measures`).

Scale convention: **every function in this module returns the raw value**, as scikit-learn,
SciPy, `evaluate` and the transformers `run_glue.py` example do: accuracy and F1 in [0, 1],
Pearson and Spearman correlations in [-1, 1], MRR/NDCG/MAP in [0, 1]. Papers usually print
these x100; multiply when you print a table. (The STS evaluator in `hf_distill.evaluation`
reports x100 by default, as DvBERT and SBERT do; its keys say `_cosine`.)

Metric names (dict keys) are bare (`accuracy`, `f1`, `spearman`, `mrr@10`...): the Trainer
prefixes them with `eval_` (or the `metric_key_prefix` you pass), so `metric_for_best_model`
is e.g. `"spearman"` or `"eval_spearman"`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from scipy import stats

__all__ = [
    "accuracy",
    "classification_metrics",
    "compute_metrics_for",
    "f1",
    "pearson",
    "ranking_metrics",
    "regression_metrics",
    "spearman",
]


# ---------------------------------------------------------------------------- plain metrics
def accuracy(predictions: Iterable, labels: Iterable) -> float:
    """Fraction of predicted class ids equal to the gold ones (in [0, 1])."""
    preds, golds = _paired(predictions, labels)
    if preds.size == 0:
        raise ValueError("accuracy of zero examples is undefined.")
    return float((preds == golds).mean())


def f1(predictions: Iterable, labels: Iterable, average: str = "binary", pos_label: int = 1) -> float:
    """F1 of predicted class ids (in [0, 1]), scikit-learn's definition.

    average="binary": F1 of class `pos_label` (MRPC, QQP convention). average="macro": the
    unweighted mean of per-class F1 over the classes present in labels or predictions (NLI).
    A class with no true and no predicted positives scores 0 (sklearn's zero_division=0).
    """
    preds, golds = _paired(predictions, labels)
    if average == "binary":
        return _f1_of_class(preds, golds, pos_label)
    if average == "macro":
        classes = np.union1d(preds, golds)
        if classes.size == 0:
            raise ValueError("macro F1 of zero examples is undefined.")
        return float(np.mean([_f1_of_class(preds, golds, c) for c in classes]))
    raise ValueError(f"average={average!r} is not valid; choose 'binary' or 'macro'.")


def pearson(predictions: Iterable, labels: Iterable) -> float:
    """Pearson correlation in [-1, 1] (NaN when either side is constant)."""
    preds, golds = _paired(predictions, labels, dtype=np.float64)
    if preds.size < 2 or np.ptp(preds) == 0 or np.ptp(golds) == 0:
        return float("nan")
    return float(stats.pearsonr(preds, golds)[0])


def spearman(predictions: Iterable, labels: Iterable) -> float:
    """Spearman rank correlation in [-1, 1] (ties get average ranks; NaN when a side is constant)."""
    preds, golds = _paired(predictions, labels, dtype=np.float64)
    if preds.size < 2 or np.ptp(preds) == 0 or np.ptp(golds) == 0:
        return float("nan")
    return float(stats.spearmanr(preds, golds)[0])


# ---------------------------------------------------------------------------- Trainer builders
def classification_metrics(eval_pred: Any) -> dict[str, float]:
    """`compute_metrics` for a classification head: argmax of the logits against the label ids.

    Two classes: {"accuracy", "f1"} (F1 of class 1). More: {"accuracy", "f1_macro"}.
    Accepts an `EvalPrediction` (or a (predictions, label_ids) tuple); when the model returns
    several tensors the predictions are a tuple and the logits are its first element.
    """
    logits, labels = _unpack(eval_pred)
    if logits.ndim != 2 or logits.shape[-1] < 2:
        raise ValueError(
            f"classification_metrics needs logits of shape (N, num_labels >= 2), got {logits.shape}; "
            "use regression_metrics for a single-output head."
        )
    preds = logits.argmax(axis=-1)
    labels = labels.reshape(-1).astype(np.int64)
    if logits.shape[-1] == 2:
        return {"accuracy": accuracy(preds, labels), "f1": f1(preds, labels)}
    return {"accuracy": accuracy(preds, labels), "f1_macro": f1(preds, labels, average="macro")}


def regression_metrics(eval_pred: Any) -> dict[str, float]:
    """`compute_metrics` for a single-output head (STS-B regression, Siamese cosine head): {"pearson", "spearman"}.

    Predictions of shape (N,) or (N, 1); raw correlations in [-1, 1].
    """
    scores, labels = _unpack(eval_pred)
    if scores.ndim == 2 and scores.shape[-1] == 1:
        scores = scores[:, 0]
    if scores.ndim != 1:
        raise ValueError(f"regression_metrics needs predictions of shape (N,) or (N, 1), got {scores.shape}.")
    labels = labels.reshape(-1)
    return {"pearson": pearson(scores, labels), "spearman": spearman(scores, labels)}


def compute_metrics_for(num_labels: int) -> Callable[[Any], dict[str, float]]:
    """The `compute_metrics` matching a head: 1 output -> regression_metrics, >= 2 -> classification_metrics."""
    if not isinstance(num_labels, int) or num_labels < 1:
        raise ValueError(f"num_labels={num_labels!r} is not valid; give 1 (regression) or the number of classes.")
    return regression_metrics if num_labels == 1 else classification_metrics


# ---------------------------------------------------------------------------- ranking
def ranking_metrics(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    query_ids: Iterable[str] | None = None,
    relevance_threshold: int = 1,
    k: int = 10,
) -> dict[str, float]:
    """Mean MRR@k, NDCG@k and MAP over a fixed query set, computed with `ir_measures`.

    qrels: qid -> {doc_id: graded relevance}; run: qid -> {doc_id: score} (higher = better).
    Returns {"mrr@k": RR(rel=relevance_threshold)@k, "ndcg@k": nDCG@k with the graded labels
    (trec_eval linear gains; the ideal ranking uses every judged document, retrieved or not),
    "map": AP(rel=relevance_threshold) over the whole run}.

    The mean is over `query_ids` (default: the queries of `qrels`); a query with no retrieved
    document, no judgement or no relevant document scores 0 on every measure (ir_measures
    averages over the queries it returns, which need not be all of them). Queries outside the
    set are ignored. Ties in `run` are resolved by the caller: ir_measures' providers do not
    break them the same way (see `hf_distill.ranking.RankingEvaluator`).
    """
    import ir_measures
    from ir_measures import AP, RR, nDCG

    qids = list(dict.fromkeys(query_ids if query_ids is not None else qrels))
    if not qids:
        raise ValueError("ranking_metrics needs at least one query.")
    names = {
        RR(rel=relevance_threshold) @ k: f"mrr@{k}",
        nDCG @ k: f"ndcg@{k}",
        AP(rel=relevance_threshold): "map",
    }
    wanted = set(qids)
    qrels_in = {q: {d: int(r) for d, r in docs.items()} for q, docs in qrels.items() if q in wanted and docs}
    run_in = {q: {d: float(s) for d, s in docs.items()} for q, docs in run.items() if q in wanted and docs}
    totals = dict.fromkeys(names.values(), 0.0)
    if qrels_in and run_in:
        for metric in ir_measures.iter_calc(list(names), qrels_in, run_in):
            totals[names[metric.measure]] += float(metric.value)
    return {name: total / len(qids) for name, total in totals.items()}


# ---------------------------------------------------------------------------- helpers
def _f1_of_class(preds: np.ndarray, golds: np.ndarray, positive: Any) -> float:
    tp = np.sum((preds == positive) & (golds == positive))
    fp = np.sum((preds == positive) & (golds != positive))
    fn = np.sum((preds != positive) & (golds == positive))
    denominator = 2 * tp + fp + fn
    return float(2 * tp / denominator) if denominator else 0.0


def _paired(predictions: Iterable, labels: Iterable, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    preds = np.asarray(_to_numpy(predictions), dtype=dtype).reshape(-1)
    golds = np.asarray(_to_numpy(labels), dtype=dtype).reshape(-1)
    if preds.shape != golds.shape:
        raise ValueError(f"{preds.size} predictions but {golds.size} labels: they must pair up one to one.")
    return preds, golds


def _unpack(eval_pred: Any) -> tuple[np.ndarray, np.ndarray]:
    """(predictions, label_ids) of an EvalPrediction or tuple; the first array of a tuple of outputs."""
    if hasattr(eval_pred, "predictions"):
        predictions, labels = eval_pred.predictions, eval_pred.label_ids
    else:
        predictions, labels = eval_pred[0], eval_pred[1]
    while isinstance(predictions, tuple):  # several model outputs: logits come first
        predictions = predictions[0]
    while isinstance(labels, tuple):  # several label columns: the task labels come first
        labels = labels[0]
    if labels is None:
        raise ValueError("compute_metrics got no label_ids: does the eval dataset have a 'labels'/'label' column?")
    return np.asarray(_to_numpy(predictions), dtype=np.float64), np.asarray(_to_numpy(labels))


def _to_numpy(values: Any) -> Any:
    if hasattr(values, "detach"):  # torch.Tensor
        return values.detach().float().cpu().numpy()
    return values
