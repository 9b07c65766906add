"""hf_distill.metrics against hand-computed values."""

import math

import numpy as np
import pytest
import torch
from transformers import EvalPrediction

from hf_distill.metrics import (
    accuracy,
    classification_metrics,
    compute_metrics_for,
    f1,
    pearson,
    ranking_metrics,
    regression_metrics,
    spearman,
)


# ---------------------------------------------------------------------------- plain metrics
def test_accuracy():
    assert accuracy([1, 0, 1, 1], [1, 0, 0, 1]) == pytest.approx(0.75)
    assert accuracy(torch.tensor([2, 2]), np.array([2, 1])) == pytest.approx(0.5)


def test_f1_binary():
    # tp = 2, fp = 1, fn = 0 -> 2*2 / (2*2 + 1 + 0)
    assert f1([1, 0, 1, 1], [1, 0, 0, 1]) == pytest.approx(0.8)
    # tp = 1, fp = 1, fn = 2 -> 2 / 5
    assert f1([1, 1, 0, 0], [1, 0, 1, 1]) == pytest.approx(0.4)
    assert f1([0, 0, 0], [0, 0, 0]) == 0.0  # no positive anywhere: 0 like sklearn's zero_division=0


def test_f1_macro():
    preds = [0, 1, 2, 2, 1, 0]
    labels = [0, 1, 1, 2, 2, 0]
    # class 0: F1 1; class 1: tp 1, fp 1, fn 1 -> 0.5; class 2: tp 1, fp 1, fn 1 -> 0.5
    assert f1(preds, labels, average="macro") == pytest.approx((1 + 0.5 + 0.5) / 3)
    # class 1 predicted but never gold still counts (F1 0), like sklearn
    assert f1([0, 1], [0, 0], average="macro") == pytest.approx((2 / 3 + 0) / 2)
    with pytest.raises(ValueError, match="average"):
        f1(preds, labels, average="micro")


def test_pearson_and_spearman():
    # x = [1, 2, 3], y = [1, 2, 4]: cov sum 3, sxx 2, syy 42/9 -> 3 / sqrt(2 * 42 / 9)
    assert pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / math.sqrt(2 * 42 / 9))
    # ranks of y = [1, 3, 2, 4]: sum d^2 = 2 -> 1 - 6*2 / (4*15)
    assert spearman([1, 2, 3, 4], [10, 30, 20, 40]) == pytest.approx(0.8)
    # ties get average ranks: [1, 2.5, 2.5, 4] vs [1, 2, 3, 4] -> 4.5 / sqrt(4.5 * 5)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert spearman([3, 2, 1], [1, 2, 3]) == pytest.approx(-1.0)
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="pair up"):
        accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="pair up"):
        spearman([1, 2, 3], [1, 2])


# ---------------------------------------------------------------------------- Trainer builders
def test_classification_metrics_binary_with_tuple_predictions():
    logits = np.array([[0.1, 0.9], [2.0, -1.0], [0.0, 1.0], [0.3, 0.7]])  # argmax 1, 0, 1, 1
    pooled = np.zeros((4, 8))
    out = classification_metrics(EvalPrediction(predictions=(logits, pooled), label_ids=np.array([1, 0, 0, 1])))
    assert out == pytest.approx({"accuracy": 0.75, "f1": 0.8})


def test_classification_metrics_multiclass_uses_macro_f1():
    logits = np.eye(3)[[0, 1, 2, 2, 1, 0]]
    out = classification_metrics((logits, np.array([0, 1, 1, 2, 2, 0])))
    assert set(out) == {"accuracy", "f1_macro"}
    assert out["accuracy"] == pytest.approx(4 / 6)
    assert out["f1_macro"] == pytest.approx(2 / 3)


def test_classification_metrics_rejects_single_output():
    with pytest.raises(ValueError, match="regression_metrics"):
        classification_metrics(EvalPrediction(predictions=np.zeros((3, 1)), label_ids=np.zeros(3)))


def test_regression_metrics_accepts_column_and_tuple():
    scores = np.array([[1.0], [2.0], [3.0], [4.0]])
    gold = np.array([10.0, 30.0, 20.0, 40.0])
    out = regression_metrics(EvalPrediction(predictions=(scores, np.zeros((4, 3))), label_ids=gold))
    assert set(out) == {"pearson", "spearman"}
    assert out["spearman"] == pytest.approx(0.8)
    # x - 2.5 = [-1.5, -.5, .5, 1.5], y - 25 = [-15, 5, -5, 15]: cov sum 40, sxx 5, syy 500
    assert out["pearson"] == pytest.approx(40 / math.sqrt(5 * 500))
    assert regression_metrics((scores[:, 0], gold)) == pytest.approx(out)


def test_compute_metrics_for():
    assert compute_metrics_for(1) is regression_metrics
    assert compute_metrics_for(2) is classification_metrics
    assert compute_metrics_for(3) is classification_metrics
    with pytest.raises(ValueError):
        compute_metrics_for(0)


# ---------------------------------------------------------------------------- ranking
# Hand example, relevance threshold 2 (TREC DL convention), linear gains, log2(rank + 1) discount.
QRELS = {
    "q1": {"a": 3, "b": 2, "c": 1, "d": 0, "e": 2},  # e is judged but never retrieved
    "q2": {"x": 1, "y": 0},  # nothing reaches relevance 2
    "q3": {"z": 2},  # no candidates at all
    "q4": {"w": 0},  # no relevant document
}
RUN = {
    "q1": {"c": 4.0, "a": 3.0, "d": 2.0, "b": 1.0},
    "q2": {"x": 2.0, "y": 1.0},
    "q4": {"w": 1.0},
    "other": {"a": 1.0},  # not an evaluated query: ignored
}
Q1_DCG = 1 / math.log2(2) + 3 / math.log2(3) + 0 + 2 / math.log2(5)
Q1_IDCG = 3 + 2 / math.log2(3) + 2 / math.log2(4) + 1 / math.log2(5)
Q1_NDCG = Q1_DCG / Q1_IDCG  # 0.659485
Q1_RR = 1 / 2  # first doc with relevance >= 2 (a) at rank 2
Q1_AP = (1 / 2 + 2 / 4) / 3  # a at 2, b at 4, e never retrieved
Q2_NDCG = 1.0  # graded: x (relevance 1) first is the ideal order


def test_ranking_metrics_hand_example():
    out = ranking_metrics(QRELS, RUN, relevance_threshold=2)
    assert set(out) == {"mrr@10", "ndcg@10", "map"}
    assert out["mrr@10"] == pytest.approx(Q1_RR / 4)
    assert out["ndcg@10"] == pytest.approx((Q1_NDCG + Q2_NDCG) / 4)
    assert out["map"] == pytest.approx(Q1_AP / 4)
    assert Q1_NDCG == pytest.approx(0.659485, abs=1e-6)


def test_ranking_metrics_counts_unjudged_and_unretrieved_queries_as_zero():
    out = ranking_metrics(QRELS, RUN, query_ids=["q1", "q2", "q3", "q4", "q5"], relevance_threshold=2)
    assert out["mrr@10"] == pytest.approx(Q1_RR / 5)
    assert out["ndcg@10"] == pytest.approx((Q1_NDCG + Q2_NDCG) / 5)


def test_ranking_metrics_threshold_one_makes_q2_relevant():
    out = ranking_metrics(QRELS, RUN, query_ids=["q1", "q2"], relevance_threshold=1)
    assert out["mrr@10"] == pytest.approx((1.0 + 1.0) / 2)  # c (1) and x (1) are first
    # q1 relevant = a, b, c, e: c@1, a@2, b@4 -> (1 + 1 + 3/4) / 4; q2: x@1 -> 1
    assert out["map"] == pytest.approx(((1 + 1 + 3 / 4) / 4 + 1.0) / 2)


def test_ranking_metrics_cutoff():
    run = {"q": {f"d{i}": float(100 - i) for i in range(1, 12)}}  # d11 is at rank 11
    out = ranking_metrics({"q": {"d11": 1}}, run, relevance_threshold=1)
    assert out["mrr@10"] == 0.0
    assert out["ndcg@10"] == 0.0
    assert out["map"] == pytest.approx(1 / 11)
    assert ranking_metrics({"q": {"d11": 1}}, run, k=11)["mrr@11"] == pytest.approx(1 / 11)


def test_ranking_metrics_no_query_is_an_error():
    with pytest.raises(ValueError):
        ranking_metrics({}, {})
