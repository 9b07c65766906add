"""Property tests of `PairCollator`: any text (unicode, empty, very long, mixed lengths) gives consistent batches.

Siamese and cross-encoder views, and the VIRT-aligned views (`virt_alignment=True`, the teacher
sharing the student's tokenizer): no crash, every view truncated (student views and plain teacher
views to `max_length`; the aligned joint view holds both truncated sides, at most
`2 * max_length - 1` tokens), attention masks consistent with the padding, every row equal to
the tokenizer's own encoding of that row, and (VIRT) aligned positions holding the same token ids
in the student's side encodings and the teacher's joint encoding.
"""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_distill.alignment import ALIGNMENT_KEYS
from hf_distill.data import PairCollator

from .conftest import WORDS

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Texts: arbitrary unicode (accents, CJK, emoji, controls, combining marks...), empty or blank, known
# words (real tokens, word pieces), and very long texts of both kinds.
unicode_text = st.text(max_size=40)
word_text = st.lists(st.sampled_from(WORDS + ["xyz", "Qq", "naïve", "café", "日本", "🙂"]), max_size=15).map(" ".join)
long_text = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=100, max_size=400).map(" ".join),
    st.builds(lambda c, n: c * n, st.sampled_from(["é", "ab ", "日", "🙂 ", ". ", "x"]), st.integers(100, 800)),
)
text = st.one_of(st.just(""), st.sampled_from([" ", "\t\n", "\u200b", "\x00"]), unicode_text, word_text, long_text)
rows = st.lists(st.tuples(text, text, st.integers(0, 2)), min_size=1, max_size=5).map(
    lambda pairs: [{"sentence1": a, "sentence2": b, "label": label} for a, b, label in pairs]
)
max_lengths = st.sampled_from([8, 9, 16, 31, 32])


def collator(tokenizer, siamese: bool, max_length: int, virt: bool = False) -> PairCollator:
    return PairCollator(
        tokenizer=tokenizer,
        siamese=siamese,
        text_columns=("sentence1", "sentence2"),
        teacher_tokenizers=[tokenizer],
        label2id={"a": 0, "b": 1, "c": 2},
        max_length=max_length,
        virt_alignment=virt,
    )


def check_view(tokenizer, batch: dict, prefix: str, suffix: str, limit: int, expected: list[list[int]] | None) -> None:
    """Right padding consistent with the mask, width within `limit`, rows equal to the expected ids."""
    ids, mask = batch[f"{prefix}input_ids{suffix}"], batch[f"{prefix}attention_mask{suffix}"]
    assert ids.dtype == torch.long and ids.shape == mask.shape and ids.shape[0] == batch["labels"].shape[0]
    assert 2 <= ids.shape[1] <= limit
    lengths = mask.sum(1)
    assert int(lengths.max()) == ids.shape[1]  # padded to the longest row, no further
    positions = torch.arange(ids.shape[1]).expand_as(ids)
    assert torch.equal(mask.bool(), positions < lengths[:, None])  # 1s then 0s
    assert (ids[mask == 0] == tokenizer.pad_token_id).all()
    assert (ids[mask == 1] != tokenizer.pad_token_id).all()
    if f"{prefix}token_type_ids{suffix}" in batch:
        assert batch[f"{prefix}token_type_ids{suffix}"].shape == ids.shape
    if expected is not None:
        assert [row[: int(n)].tolist() for row, n in zip(ids, lengths)] == expected


def single(tokenizer, texts: list[str], max_length: int) -> list[list[int]]:
    return [tokenizer(t, truncation=True, max_length=max_length)["input_ids"] for t in texts]


def joint(tokenizer, first: list[str], second: list[str], max_length: int) -> list[list[int]]:
    # one pair at a time, but as a batch of one: `tokenizer("", "")` would drop the empty second text
    return [tokenizer([a], [b], truncation=True, max_length=max_length)["input_ids"][0] for a, b in zip(first, second)]


@SETTINGS
@given(batch_rows=rows, max_length=max_lengths)
def test_siamese_views(tiny_tokenizer, batch_rows, max_length):
    batch = collator(tiny_tokenizer, True, max_length)(batch_rows)
    first, second = [r["sentence1"] for r in batch_rows], [r["sentence2"] for r in batch_rows]
    check_view(tiny_tokenizer, batch, "", "_a", max_length, single(tiny_tokenizer, first, max_length))
    check_view(tiny_tokenizer, batch, "", "_b", max_length, single(tiny_tokenizer, second, max_length))
    check_view(tiny_tokenizer, batch, "teacher_0_", "", max_length, joint(tiny_tokenizer, first, second, max_length))
    assert batch["labels"].tolist() == [r["label"] for r in batch_rows]


@SETTINGS
@given(batch_rows=rows, max_length=max_lengths)
def test_cross_encoder_views(tiny_tokenizer, batch_rows, max_length):
    batch = collator(tiny_tokenizer, False, max_length)(batch_rows)
    first, second = [r["sentence1"] for r in batch_rows], [r["sentence2"] for r in batch_rows]
    expected = joint(tiny_tokenizer, first, second, max_length)
    check_view(tiny_tokenizer, batch, "", "", max_length, expected)
    check_view(tiny_tokenizer, batch, "teacher_0_", "", max_length, expected)
    # the pair's segments: 0 up to and including the first [SEP], 1 after it
    for row, ids in zip(batch["token_type_ids"], expected):
        boundary = ids.index(tiny_tokenizer.sep_token_id) + 1
        assert row[:boundary].eq(0).all() and row[boundary : len(ids)].eq(1).all()


@SETTINGS
@given(batch_rows=rows, max_length=max_lengths)
def test_virt_aligned_views(tiny_tokenizer, batch_rows, max_length):
    batch = collator(tiny_tokenizer, True, max_length, virt=True)(batch_rows)
    first, second = [r["sentence1"] for r in batch_rows], [r["sentence2"] for r in batch_rows]
    sides = {"a": single(tiny_tokenizer, first, max_length), "b": single(tiny_tokenizer, second, max_length)}
    # The student sees exactly the plain tokenizer's truncated encodings of each side.
    check_view(tiny_tokenizer, batch, "", "_a", max_length, sides["a"])
    check_view(tiny_tokenizer, batch, "", "_b", max_length, sides["b"])
    # The teacher's joint view is built from those same truncated sides: [CLS] A [SEP] B [SEP].
    expected_joint = [a + b[1:] for a, b in zip(sides["a"], sides["b"])]
    check_view(tiny_tokenizer, batch, "teacher_0_", "", 2 * max_length - 1, expected_joint)
    assert set(ALIGNMENT_KEYS) <= batch.keys()

    joint_ids, joint_types = batch["teacher_0_input_ids"], batch["teacher_0_token_type_ids"]
    structural = {tiny_tokenizer.cls_token_id, tiny_tokenizer.sep_token_id, tiny_tokenizer.pad_token_id}
    for side, segment in (("a", 0), ("b", 1)):
        student_ids = batch[f"input_ids_{side}"]
        where_student = batch[f"teacher_alignment_{side}_student"]
        where_teacher = batch[f"teacher_alignment_{side}_teacher"]
        valid = batch[f"teacher_alignment_{side}_mask"]
        assert where_student.shape == where_teacher.shape == valid.shape and valid.dtype == torch.bool
        for row in range(len(batch_rows)):
            content = sides[side][row][1:-1]  # the side's tokens without [CLS] / [SEP]
            n = int(valid[row].sum())
            assert n == len(content) and valid[row, :n].all()  # real entries first, then padding
            s, t = where_student[row, :n], where_teacher[row, :n]
            assert student_ids[row, s].tolist() == content
            assert joint_ids[row, t].tolist() == content  # the same token ids on both sides
            assert s.tolist() == list(range(1, n + 1))
            assert all(a < b for a, b in zip(t.tolist(), t.tolist()[1:]))  # in order
            assert joint_types[row, t].eq(segment).all()
            # [CLS] / [SEP] / padding are never aligned ([UNK] is content and may be)
            assert not any(i in structural for i in joint_ids[row, t].tolist())


def test_teacher_with_an_equivalent_tokenizer_reuses_the_cross_encoder_view(tiny_tokenizer, tiny_vocab_file, tmp_path):
    """A teacher whose tokenizer is equivalent to the student's gets the student's joint view (tokenised
    once, identical tensors); a differing tokenizer (here: another vocabulary) still gets its own."""
    from transformers import BertTokenizerFast

    equivalent = BertTokenizerFast(tiny_vocab_file)  # a separate object with the same vocabulary and settings
    tokens = open(tiny_vocab_file, encoding="utf-8").read().split("\n")
    specials = [t for t in tokens if t.startswith("[")]
    shuffled = tmp_path / "vocab.txt"  # the same tokens, other ids
    shuffled.write_text("\n".join(specials + [t for t in tokens if t and not t.startswith("[")][::-1]), encoding="utf-8")
    other_vocab = BertTokenizerFast(str(shuffled))
    calls = {"n": 0}

    class Counting(type(equivalent)):
        def __call__(self, *args, **kwargs):
            calls["n"] += 1
            return super().__call__(*args, **kwargs)

    equivalent.__class__ = Counting
    rows = [{"sentence1": "the cat sat", "sentence2": "a dog ran far", "label": 1}, {"sentence1": "hi", "sentence2": "x", "label": 0}]
    made = PairCollator(
        tokenizer=tiny_tokenizer, siamese=False, text_columns=("sentence1", "sentence2"),
        teacher_tokenizers=[equivalent, other_vocab], max_length=16,
    )
    calls["n"] = 0
    batch = made(rows)
    assert calls["n"] == 0  # the equivalent teacher's tokenizer is not called per batch
    assert made._reuses_student_view == [True, False]
    fresh = equivalent(["the cat sat", "hi"], ["a dog ran far", "x"], padding=True, truncation=True, max_length=16, return_tensors="pt")
    for name, value in fresh.items():
        assert torch.equal(batch[f"teacher_0_{name}"], value) and torch.equal(batch[name], value)
    # a Siamese student's views are per side: the teacher's joint view is tokenised on its own
    siamese = PairCollator(tokenizer=tiny_tokenizer, siamese=True, text_columns=("sentence1", "sentence2"),
                           teacher_tokenizers=[equivalent], max_length=16)
    assert siamese._reuses_student_view == [False] and torch.equal(siamese(rows)["teacher_0_input_ids"], fresh["input_ids"])
