"""Token alignment between a Siamese student's separate views and a cross-encoder's joint view (VIRT)."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_distill.alignment import ALIGNMENT_KEYS, check_same_tokenizer, tokenize_aligned
from hf_distill.data import PairCollator

from .conftest import WORDS

X, Y = "a man plays the guitar .", "someone plays music"


def tokens(tokenizer, ids: torch.Tensor) -> list[str]:
    return tokenizer.convert_ids_to_tokens(ids.tolist())


def test_hand_made_pair_positions_one_by_one(tiny_tokenizer):
    aligned = tokenize_aligned(tiny_tokenizer, [X], [Y], max_length=32)
    # Student views: [CLS] a man plays the guitar . [SEP] and [CLS] someone plays music [SEP].
    assert tokens(tiny_tokenizer, aligned.side_a["input_ids"][0]) == ["[CLS]", "a", "man", "plays", "the", "guitar", ".", "[SEP]"]
    assert tokens(tiny_tokenizer, aligned.side_b["input_ids"][0]) == ["[CLS]", "someone", "plays", "music", "[SEP]"]
    # Teacher view: [CLS] a man plays the guitar . [SEP] someone plays music [SEP], segments 0 then 1.
    joint = tokens(tiny_tokenizer, aligned.joint["input_ids"][0])
    assert joint == ["[CLS]", "a", "man", "plays", "the", "guitar", ".", "[SEP]", "someone", "plays", "music", "[SEP]"]
    assert aligned.joint["token_type_ids"][0].tolist() == [0] * 8 + [1] * 4

    align = aligned.alignment
    assert align["a_student"][0].tolist() == [1, 2, 3, 4, 5, 6]
    assert align["a_teacher"][0].tolist() == [1, 2, 3, 4, 5, 6]
    assert align["a_mask"][0].tolist() == [True] * 6
    assert align["b_student"][0].tolist() == [1, 2, 3]
    assert align["b_teacher"][0].tolist() == [8, 9, 10]
    assert align["b_mask"][0].tolist() == [True] * 3
    # Position by position, the same token on both sides.
    expected = {"a": ["a", "man", "plays", "the", "guitar", "."], "b": ["someone", "plays", "music"]}
    views = {"a": aligned.side_a["input_ids"][0], "b": aligned.side_b["input_ids"][0]}
    for side, words in expected.items():
        for k, word in enumerate(words):
            student_position = int(align[f"{side}_student"][0, k])
            teacher_position = int(align[f"{side}_teacher"][0, k])
            assert tiny_tokenizer.convert_ids_to_tokens(int(views[side][student_position])) == word
            assert joint[teacher_position] == word


def test_word_pieces_padding_and_special_tokens_are_handled(tiny_tokenizer):
    aligned = tokenize_aligned(tiny_tokenizer, [X, "xyz cat"], [Y, "The Dog!"], max_length=32)
    align = aligned.alignment
    # Example 2: X = x ##y ##z cat (word pieces count as tokens), Y = the dog !
    assert tokens(tiny_tokenizer, aligned.joint["input_ids"][1])[:10] == [
        "[CLS]", "x", "##y", "##z", "cat", "[SEP]", "the", "dog", "!", "[SEP]"
    ]
    assert align["a_student"][1].tolist() == [1, 2, 3, 4, 0, 0]
    assert align["a_teacher"][1].tolist() == [1, 2, 3, 4, 0, 0]
    assert align["a_mask"][1].tolist() == [True] * 4 + [False] * 2
    assert align["b_student"][1].tolist() == [1, 2, 3]
    assert align["b_teacher"][1].tolist() == [6, 7, 8]
    assert align["b_mask"][1].tolist() == [True] * 3
    # Special tokens and padding never appear among aligned positions.
    for side, view in (("a", aligned.side_a), ("b", aligned.side_b)):
        picked = view["input_ids"].gather(1, align[f"{side}_student"])[align[f"{side}_mask"]]
        assert not set(picked.tolist()) & set(tiny_tokenizer.all_special_ids)
        assert bool(view["attention_mask"].gather(1, align[f"{side}_student"])[align[f"{side}_mask"]].all())


def test_student_views_equal_the_plain_tokenizer(tiny_tokenizer):
    first, second = [X, "xyz cat", "it is a sunny day"], [Y, "The Dog!", "rain"]
    for max_length in (32, 5):
        aligned = tokenize_aligned(tiny_tokenizer, first, second, max_length=max_length)
        for texts, view in ((first, aligned.side_a), (second, aligned.side_b)):
            plain = tiny_tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            assert view.keys() == plain.keys()
            for key in plain:
                assert torch.equal(view[key], plain[key]), (max_length, key)
    # Without truncation the joint view is the tokenizer's own pair encoding.
    aligned = tokenize_aligned(tiny_tokenizer, first, second, max_length=32)
    plain = tiny_tokenizer(first, second, padding=True, return_tensors="pt")
    for key in plain:
        assert torch.equal(aligned.joint[key], plain[key]), key


def test_truncation_is_the_same_on_both_sides(tiny_tokenizer):
    aligned = tokenize_aligned(tiny_tokenizer, [X], [Y], max_length=5)  # 3 content tokens per side
    assert tokens(tiny_tokenizer, aligned.side_a["input_ids"][0]) == ["[CLS]", "a", "man", "plays", "[SEP]"]
    joint = tokens(tiny_tokenizer, aligned.joint["input_ids"][0])
    assert joint == ["[CLS]", "a", "man", "plays", "[SEP]", "someone", "plays", "music", "[SEP]"]
    assert aligned.alignment["a_student"][0].tolist() == [1, 2, 3]
    assert aligned.alignment["a_teacher"][0].tolist() == [1, 2, 3]
    assert aligned.alignment["b_teacher"][0].tolist() == [5, 6, 7]

    left = copy.deepcopy(tiny_tokenizer)
    left.truncation_side = "left"
    aligned = tokenize_aligned(left, [X], [Y], max_length=5)
    assert tokens(left, aligned.joint["input_ids"][0])[:5] == ["[CLS]", "the", "guitar", ".", "[SEP]"]
    assert tokens(left, aligned.side_a["input_ids"][0]) == ["[CLS]", "the", "guitar", ".", "[SEP]"]


def test_left_padding_shifts_the_positions(tiny_tokenizer):
    left = copy.deepcopy(tiny_tokenizer)
    left.padding_side = "left"
    aligned = tokenize_aligned(left, [X, "xyz cat"], [Y, "The Dog!"], max_length=32)
    align = aligned.alignment
    assert aligned.side_a["attention_mask"][1].tolist() == [0, 0, 1, 1, 1, 1, 1, 1]
    assert align["a_student"][1].tolist()[:4] == [3, 4, 5, 6]
    assert align["b_teacher"][1].tolist() == [8, 9, 10]  # joint rows: 12 vs 10 tokens -> shift 2
    for side, view in (("a", aligned.side_a), ("b", aligned.side_b)):
        mask = align[f"{side}_mask"]
        student_ids = view["input_ids"].gather(1, align[f"{side}_student"])[mask]
        teacher_ids = aligned.joint["input_ids"].gather(1, align[f"{side}_teacher"])[mask]
        assert torch.equal(student_ids, teacher_ids)


@settings(max_examples=25, deadline=None)
@given(
    first=st.lists(st.lists(st.sampled_from(WORDS + ["xyz", "Qq"]), min_size=0, max_size=12).map(" ".join), min_size=1, max_size=4),
    data=st.data(),
    max_length=st.integers(3, 12),
)
def test_aligned_positions_hold_the_same_tokens(tiny_tokenizer, first, data, max_length):
    second = data.draw(st.lists(st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join), min_size=len(first), max_size=len(first)))
    aligned = tokenize_aligned(tiny_tokenizer, first, second, max_length=max_length)
    for side, view, texts in (("a", aligned.side_a, first), ("b", aligned.side_b, second)):
        align = aligned.alignment
        for row, text in enumerate(texts):
            count = min(len(tiny_tokenizer.tokenize(text)), max_length - 2)
            assert int(align[f"{side}_mask"][row].sum()) == count
            mask = align[f"{side}_mask"][row]
            student_ids = view["input_ids"][row][align[f"{side}_student"][row][mask]]
            teacher_ids = aligned.joint["input_ids"][row][align[f"{side}_teacher"][row][mask]]
            assert student_ids.tolist() == teacher_ids.tolist()
            assert student_ids.tolist() == tiny_tokenizer(text, add_special_tokens=False)["input_ids"][:count]


def test_collator_with_alignment(tiny_tokenizer):
    rows = [{"sentence1": X, "sentence2": Y, "label": 1}, {"sentence1": "xyz cat", "sentence2": "The Dog!", "label": 0}]
    common = dict(tokenizer=tiny_tokenizer, siamese=True, text_columns=("sentence1", "sentence2"), max_length=32)
    plain = PairCollator(teacher_tokenizers=[tiny_tokenizer], **common)(rows)
    batch = PairCollator(teacher_tokenizers=[tiny_tokenizer, tiny_tokenizer], virt_alignment=True, **common)(rows)
    assert set(ALIGNMENT_KEYS) <= batch.keys()
    for key in plain:  # student views, teacher view (no truncation here) and labels are unchanged
        assert torch.equal(batch[key], plain[key]), key
    assert torch.equal(batch["teacher_1_input_ids"], plain["teacher_0_input_ids"])  # other teachers keep their view
    assert batch["teacher_alignment_b_teacher"].tolist() == [[8, 9, 10], [6, 7, 8]]


def test_collator_refuses_what_cannot_be_aligned(tiny_tokenizer):
    from transformers import BertTokenizerFast

    common = dict(tokenizer=tiny_tokenizer, text_columns=("sentence1", "sentence2"), virt_alignment=True)
    with pytest.raises(ValueError, match="virt_alignment=True needs siamese=True"):
        PairCollator(siamese=False, teacher_tokenizers=[tiny_tokenizer], **common)
    with pytest.raises(ValueError, match="virt_alignment=True needs teacher_tokenizers"):
        PairCollator(siamese=True, **common)
    vocab = dict(tiny_tokenizer.get_vocab())
    other = BertTokenizerFast(vocab={t: (i * 7) % len(vocab) for t, i in vocab.items()}, do_lower_case=True)
    with pytest.raises(ValueError, match=r"teacher_tokenizers\[0\]=.*differs from the student's tokenizer"):
        PairCollator(siamese=True, teacher_tokenizers=[other], **common)
    check_same_tokenizer(tiny_tokenizer, copy.deepcopy(tiny_tokenizer))  # equal copies pass
    with pytest.raises(ValueError, match="max_length=2 leaves no room"):
        tokenize_aligned(tiny_tokenizer, [X], [Y], max_length=2)
    with pytest.raises(ValueError, match="one Y per X"):
        tokenize_aligned(tiny_tokenizer, [X, X], [Y], max_length=8)
