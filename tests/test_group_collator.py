"""GroupCollator: each passage stays with its teacher score through shuffling; both student families."""

from __future__ import annotations

import pytest

from hf_distill.batch_keys import GROUP_LABELS, GROUP_MASK, GROUP_QUERY, GROUP_SCORES, student_view
from hf_distill.data import PairCollator
from hf_distill.group_collator import GroupCollator
from hf_distill.ranking_groups import sample_groups

from .test_ranking_groups import toy_ranking


def _distinct_scores(data):
    """A different score for every candidate, so a passage paired with another's score shows."""
    return {q: {c.doc_id: 100.0 * i + c.rank for c in cands} for i, (q, cands) in enumerate(data.candidates.items())}


def _groups(candidates: int = 6, group_size: int = 4):
    data = toy_ranking(queries=6, candidates=candidates, relevant=(0, 2))
    scores = _distinct_scores(data)
    expected = {(data.queries[q], c.text): scores[q][c.doc_id] for q, cands in data.candidates.items() for c in cands}
    return sample_groups(data, scores, group_size, seed=0), expected


def _decode(tokenizer, ids) -> str:
    return tokenizer.decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize("shuffle_seed", [0, 1, 2])
def test_cross_encoder_pairs_keep_their_teacher_scores_under_shuffling(tiny_tokenizer, shuffle_seed):
    groups, expected = _groups()
    rows = list(groups.shuffle(seed=shuffle_seed))
    collate = GroupCollator(tiny_tokenizer, siamese=False, max_length=64)
    for start in range(0, len(rows), 3):
        batch = collate(rows[start : start + 3])
        flat = 0
        for b, i in batch[GROUP_MASK].nonzero().tolist():
            joint = _decode(tiny_tokenizer, batch["input_ids"][flat])  # "query passage" without special tokens
            key = next(k for k in expected if f"{k[0]} {k[1]}" == joint)
            assert batch[GROUP_SCORES][b, i].item() == pytest.approx(expected[key])
            flat += 1
        assert flat == batch["input_ids"].shape[0]


def test_siamese_stack_holds_the_queries_then_every_passage_once(tiny_tokenizer):
    groups, expected = _groups(candidates=3, group_size=4)  # 3 candidates, 2 relevant: groups of 2 passages
    rows = list(groups.shuffle(seed=5))[:4]
    batch = GroupCollator(tiny_tokenizer, siamese=True, max_length=64)(rows)
    mask = batch[GROUP_MASK]
    assert batch["input_ids_a"].shape[0] == len(rows) + int(mask.sum()) and "input_ids" not in batch
    texts = [_decode(tiny_tokenizer, ids) for ids in batch["input_ids_a"]]
    assert texts[: len(rows)] == [r["query"] for r in rows]
    passages = iter(texts[len(rows):])
    for b, i in mask.nonzero().tolist():
        assert batch[GROUP_SCORES][b, i].item() == pytest.approx(expected[(texts[b], next(passages))])


def test_groups_of_different_sizes_are_padded_and_masked(tiny_tokenizer):
    rows = [
        {"qid": "a", "query": "a dog", "passages": ["the dog runs", "a cat", "rain"], "teacher_scores": [3.0, 1.0, 0.5],
         "passage_labels": [1, 0, 0]},
        {"qid": "a", "query": "a dog", "passages": ["the dog sits"], "teacher_scores": [2.0], "passage_labels": [1]},
        {"qid": "b", "query": "the sun", "passages": ["sunny day", "night"], "teacher_scores": [4.0, -1.0],
         "passage_labels": [1, 0]},
    ]
    batch = GroupCollator(tiny_tokenizer, siamese=False)(rows)
    assert batch[GROUP_MASK].tolist() == [[True, True, True], [True, False, False], [True, True, False]]
    assert batch[GROUP_SCORES].tolist() == [[3.0, 1.0, 0.5], [2.0, 0.0, 0.0], [4.0, -1.0, 0.0]]
    assert batch[GROUP_LABELS].tolist() == [[1, 0, 0], [1, -100, -100], [1, 0, -100]]
    assert batch[GROUP_QUERY].tolist() == [0, 0, 1] and batch["input_ids"].shape[0] == 6
    assert set(student_view(batch)) == {"input_ids", "token_type_ids", "attention_mask"}  # group keys stay with the losses


def test_pair_rows_go_to_the_pair_collator_and_bad_rows_are_refused(tiny_tokenizer):
    pairs = PairCollator(tiny_tokenizer, siamese=False, text_columns=("question", "answer"))
    collate = GroupCollator(tiny_tokenizer, siamese=False, pair_collator=pairs)
    batch = collate([{"question": "a dog", "answer": "the dog runs", "label": 1}])
    assert batch["labels"].tolist() == [1] and GROUP_MASK not in batch
    assert {"question", "answer", "label", "passages", "teacher_scores"} <= set(collate.columns())
    with pytest.raises(ValueError, match="without a 'passages' column"):
        GroupCollator(tiny_tokenizer, siamese=False)([{"question": "a", "answer": "b"}])
    with pytest.raises(ValueError, match="has 2 passages but 1 teacher_scores"):
        collate([{"qid": "x", "query": "a", "passages": ["b", "c"], "teacher_scores": [1.0]}])


def test_for_student_picks_the_family(tiny_siamese, tiny_cross_encoder):
    assert GroupCollator.for_student(tiny_siamese).siamese and not GroupCollator.for_student(tiny_cross_encoder).siamese
    tiny_cross_encoder.tokenizer = None
    with pytest.raises(ValueError, match="no tokenizer"):
        GroupCollator.for_student(tiny_cross_encoder)
