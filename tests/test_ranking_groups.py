"""Query groups: positives, seeded hard negatives from the candidates, and teacher scores computed once."""

from __future__ import annotations

import random

import pytest
import torch

from hf_distill.losses.group_scores import passage_scores
from hf_distill.ranking import Candidate, RankingData
from hf_distill.ranking_groups import candidate_pairs, candidate_scores, query_groups, sample_groups

from .conftest import WORDS, make_cross_encoder

TEXT_WORDS = [w for w in WORDS if w.isalpha()]


def toy_ranking(queries: int = 5, candidates: int = 6, seed: int = 0, relevant=(1,)) -> RankingData:
    """Queries q0.. with candidates qXdY (first-stage order), candidate positions in `relevant` judged 1
    (query 0: none), texts made of the tiny vocabulary's words (so tokenisation round-trips)."""
    rng = random.Random(seed)
    say = lambda k: " ".join(rng.choices(TEXT_WORDS, k=k))  # noqa: E731
    texts = {f"q{q}": say(3) for q in range(queries)}
    cands = {q: [Candidate(f"{q}d{j}", say(4 + j % 3), None, j + 1) for j in range(candidates)] for q in texts}
    qrels = {q: {f"{q}d{j}": 1 for j in relevant} for q in texts if q != "q0"}
    return RankingData(texts, cands, qrels, name="toy")


def toy_scores(data: RankingData) -> dict[str, dict[str, float]]:
    """A teacher's scores by hand: candidate j of a query scores 10 - j (the first stage's order)."""
    return {q: {c.doc_id: 10.0 - c.rank for c in cands} for q, cands in data.candidates.items()}


def test_gold_groups_start_with_each_positive_and_draw_unjudged_negatives():
    data = toy_ranking(relevant=(1, 4))
    groups = sample_groups(data, toy_scores(data), group_size=3, seed=0)
    assert len(groups) == 8  # queries q1..q4, two positives each; q0 has no positive: no group
    for row in groups:
        positive, *negatives = row["doc_ids"]
        assert positive.endswith(("d1", "d4")) and row["passage_labels"] == [1, 0, 0]
        assert len(negatives) == 2 and not any(n.endswith(("d1", "d4")) for n in negatives)
        assert row["teacher_scores"] == [toy_scores(data)[row["qid"]][d] for d in row["doc_ids"]]
        texts = {c.doc_id: c.text for c in data.candidates[row["qid"]]}
        assert row["passages"] == [texts[d] for d in row["doc_ids"]] and row["query"] == data.queries[row["qid"]]


def test_negatives_are_seeded_and_stay_within_the_depth():
    data = toy_ranking(candidates=12)
    first = sample_groups(data, toy_scores(data), 4, seed=1, negative_depth=6)
    again = sample_groups(data, toy_scores(data), 4, seed=1, negative_depth=6)
    other = sample_groups(data, toy_scores(data), 4, seed=2, negative_depth=6)
    assert first["doc_ids"] == again["doc_ids"] and first["doc_ids"] != other["doc_ids"]
    for row in first:
        assert all(int(d.split("d")[-1]) < 6 for d in row["doc_ids"][1:])


def test_small_candidate_lists_give_smaller_groups_down_to_the_positive_alone():
    data = toy_ranking(candidates=2, relevant=(0, 1))
    groups = sample_groups(data, toy_scores(data), group_size=8)
    assert {len(row["doc_ids"]) for row in groups} == {1}  # every candidate is relevant: no negative left


def test_teacher_positives_take_each_query_top_scored_candidate():
    data = toy_ranking()
    scores = toy_scores(data)
    scores["q0"]["q0d3"] = 50.0
    groups = sample_groups(data, scores, group_size=3, positives="teacher")
    assert len(groups) == 5 and groups[0]["doc_ids"][0] == "q0d3"
    assert all(row["doc_ids"][0].endswith("d0") for row in groups.select(range(1, 5)))


@pytest.mark.parametrize("bad, message", [
    (dict(group_size=0), "group_size=0"), (dict(positives="best"), "positives='best'"),
    (dict(negative_depth=0), "negative_depth=0"), (dict(relevance_threshold=5), "no query group"),
])
def test_bad_settings_are_one_clear_line(bad, message):
    data = toy_ranking()
    settings = {"group_size": 3, **bad}
    with pytest.raises(ValueError, match=message):
        sample_groups(data, toy_scores(data), **settings)


def test_a_candidate_without_a_score_is_refused():
    data = toy_ranking()
    scores = toy_scores(data)
    del scores["q2"]["q2d3"]
    with pytest.raises(ValueError, match="no teacher score for 1 candidates of query 'q2'"):
        sample_groups(data, scores, 3)


def test_the_teacher_scores_every_candidate_once_and_the_cache_answers_after(tmp_path, tiny_tokenizer):
    data = toy_ranking(queries=3, candidates=4)
    teacher = make_cross_encoder(tiny_tokenizer, seed=3)
    calls = []
    teacher.register_forward_hook(lambda module, args, out: calls.append(1))
    groups = query_groups(data, teacher, group_size=3, cache_dir=tmp_path, progress=False)
    assert calls  # the teacher ran
    for row in groups:
        enc = tiny_tokenizer([row["query"]] * len(row["passages"]), row["passages"], padding=True, return_tensors="pt")
        with torch.no_grad():
            expected = passage_scores(teacher(**enc).logits)
        assert row["teacher_scores"] == pytest.approx(expected.tolist(), abs=1e-5)
    calls.clear()
    again = query_groups(data, teacher, group_size=3, seed=7, cache_dir=tmp_path, progress=False)
    assert not calls and len(again) == len(groups)  # other negatives, the same cached scores: no teacher ran


def test_several_teachers_are_averaged(tmp_path, tiny_tokenizer):
    data = toy_ranking(queries=2, candidates=3)
    teachers = [make_cross_encoder(tiny_tokenizer, seed=s) for s in (3, 4)]
    pairs = candidate_pairs(data, tmp_path)
    both = candidate_scores(pairs, teachers, progress=False)
    each = [candidate_scores(pairs, [t], progress=False) for t in teachers]
    assert both["q1"]["q1d2"] == pytest.approx((each[0]["q1"]["q1d2"] + each[1]["q1"]["q1d2"]) / 2)
