"""BM25 against a hand computation, and as the score_fn of RankingEvaluator."""

from __future__ import annotations

import math

import pytest

from hf_distill.bm25 import BM25, bm25_terms
from hf_distill.ranking import Candidate, RankingData, RankingEvaluator

CORPUS = ["The cat sat", "the dog", "cat cat dog bird"]  # N = 3 documents, mean length 3 terms


def test_scores_match_the_hand_computation():
    bm25 = BM25(CORPUS, k1=0.9, b=0.4)
    assert bm25_terms("The cat, sat!") == ["the", "cat", "sat"]
    assert (bm25.documents, bm25.mean_length) == (3, 3.0)
    idf_in_two, idf_in_one = math.log(1 + 1.5 / 2.5), math.log(1 + 2.5 / 1.5)  # n(t) = 2 and 1 of N = 3
    long_norm = 0.9 * (1 - 0.4 + 0.4 * 4 / 3)  # "cat cat dog bird": 4 terms
    assert bm25.score("cat", CORPUS[2]) == pytest.approx(idf_in_two * 2 * 1.9 / (2 + long_norm))
    assert bm25.score("bird", CORPUS[2]) == pytest.approx(idf_in_one * 1.9 / (1 + long_norm))
    assert bm25.score("the bird", CORPUS[0]) == pytest.approx(idf_in_two)  # |d| = avgdl: f (k1 + 1) / (f + k1) = 1
    assert bm25.score("cat cat", CORPUS[0]) == pytest.approx(2 * bm25.score("cat", CORPUS[0]))  # query repeats count
    assert bm25.score("fish", CORPUS[0]) == 0.0
    assert bm25([("cat", CORPUS[2]), ("fish", CORPUS[1])]) == [bm25.score("cat", CORPUS[2]), 0.0]


def test_length_normalisation_and_document_frequencies():
    assert BM25(["a", "a", "b"]).documents == 2  # each distinct text once
    flat = BM25(CORPUS, b=0.0)  # no length normalisation: a longer passage with the same count scores the same
    assert flat.score("dog", "the dog") == pytest.approx(flat.score("dog", "dog and many other words"))
    assert BM25(CORPUS).score("dog", "the dog") > BM25(CORPUS).score("dog", "dog and many other words")


def test_bad_settings_name_the_field_and_what_is_valid():
    with pytest.raises(ValueError, match="k1=0 is not valid; give a number > 0"):
        BM25(CORPUS, k1=0)
    with pytest.raises(ValueError, match=r"b=1.5 is not valid; give a number in \[0, 1\]"):
        BM25(CORPUS, b=1.5)
    with pytest.raises(ValueError, match=r"corpus has no words \(0 documents\)"):
        BM25([])
    with pytest.raises(ValueError, match=r"corpus has no words \(2 documents\)"):
        BM25(["", "?!"])


def test_ranking_evaluator_scores_bm25_over_the_candidates():
    texts = {"d1": "cats purr when happy", "d2": "dogs bark at night", "d3": "the stock market fell"}
    data = RankingData(
        queries={"q1": "why do cats purr", "q2": "when do dogs bark"},
        candidates={q: [Candidate(d, texts[d], None, r) for r, d in enumerate(order, 1)]
                    for q, order in (("q1", ["d3", "d2", "d1"]), ("q2", ["d1", "d3", "d2"]))},
        qrels={"q1": {"d1": 1}, "q2": {"d2": 1}},
    )
    bm25 = BM25.over_candidates(data)
    assert bm25.documents == 3
    assert RankingEvaluator(data, name="qa")(bm25)["qa_mrr@10"] == 1.0  # the first stage put both last
    assert RankingEvaluator(data, name="qa", first_stage=True)()["qa_mrr@10"] == pytest.approx(1 / 3)
