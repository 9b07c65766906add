"""Offline labelling (`add_teacher_logits`): length batching, order, cache keyed on teacher AND tokenizer."""

from __future__ import annotations

import json

import pytest
import torch
from datasets import Dataset, load_dataset
from transformers import BertTokenizerFast

from hf_distill.process_shards import shard_plan
from hf_distill.teachers import add_teacher_logits, labelling_fingerprint, teacher_logit_columns
from tests.conftest import PAIRS, SENTENCES, TINY_VOCAB, make_cross_encoder

COLUMNS = ["sentence1", "sentence2"]


def rows(n: int) -> list[dict]:
    """Pairs of many lengths, in an order that length sorting changes."""
    return [{"sentence1": SENTENCES[i % 7], "sentence2": " ".join(SENTENCES[(i * 3) % 7].split()[: 1 + i % 5]), "label": i % 2}
            for i in range(n)]


def alone(teacher, tokenizer, first: str, second: str) -> torch.Tensor:
    enc = tokenizer(first, second, truncation=True, max_length=32, return_tensors="pt")
    with torch.no_grad():
        return teacher(**enc).logits[0]


def counting_forwards(teacher) -> dict:
    """Counts the rows the teacher sees (a forward hook)."""
    seen = {"rows": 0}
    teacher.register_forward_hook(lambda module, args, kwargs, out: seen.__setitem__("rows", seen["rows"] + len(kwargs["input_ids"])),
                                  with_kwargs=True)
    return seen


def test_length_batched_column_is_each_row_alone_in_row_order(tiny_tokenizer):
    teacher = make_cross_encoder(tiny_tokenizer, seed=3, num_labels=3)
    data = Dataset.from_list(rows(11))
    labelled = add_teacher_logits(data, teacher, COLUMNS, batch_size=4, max_length=32, progress=False)
    assert labelled.column_names == [*data.column_names, "teacher_logits_0"]
    for i, row in enumerate(labelled):
        expected = alone(teacher, tiny_tokenizer, row["sentence1"], row["sentence2"])
        assert torch.allclose(torch.tensor(row["teacher_logits_0"]), expected, atol=1e-5), i
    unsorted = add_teacher_logits(data, teacher, COLUMNS, batch_size=4, max_length=32, sort_by_length=False, progress=False)
    assert torch.allclose(torch.tensor(unsorted["teacher_logits_0"]), torch.tensor(labelled["teacher_logits_0"]), atol=1e-5)


def test_second_column_is_numbered_and_teacher_state_is_restored(tiny_tokenizer):
    teacher = make_cross_encoder(tiny_tokenizer, seed=3)
    teacher.train()
    teacher.head.requires_grad_(False)
    data = add_teacher_logits(Dataset.from_list(rows(5)), teacher, COLUMNS, max_length=32, progress=False)
    data = add_teacher_logits(data, teacher, COLUMNS, max_length=32, progress=False)
    assert teacher_logit_columns(data.column_names) == ["teacher_logits_0", "teacher_logits_1"]
    assert data["teacher_logits_0"] == data["teacher_logits_1"]
    assert teacher.training and all(p.requires_grad for p in teacher.backbone.parameters())
    assert not any(p.requires_grad for p in teacher.head.parameters())


def _file_dataset(tmp_path) -> Dataset:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows(9)), encoding="utf-8")
    return load_dataset("json", data_files=str(path), cache_dir=str(tmp_path / "cache"))["train"]


def swapped_vocab(tmp_path, first: str, second: str) -> BertTokenizerFast:
    """The tiny vocabulary with two words' ids swapped: another tokenizer of the same size."""
    vocab = list(TINY_VOCAB)
    i, j = vocab.index(first), vocab.index(second)
    vocab[i], vocab[j] = vocab[j], vocab[i]
    path = tmp_path / "swapped_vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab_file=str(path), do_lower_case=True, model_max_length=64)


def test_cache_is_reused_for_the_same_tokenizer_and_relabels_for_another(tmp_path, tiny_tokenizer):
    """Issue #39: the fingerprint left the tokenizer out, so another tokenizer got the stale cached logits."""
    teacher = make_cross_encoder(tiny_tokenizer, seed=3)
    seen = counting_forwards(teacher)
    data = _file_dataset(tmp_path)
    first = add_teacher_logits(data, teacher, COLUMNS, max_length=32, progress=False)
    assert seen["rows"] == 9
    again = add_teacher_logits(data, teacher, COLUMNS, max_length=32, progress=False)
    assert seen["rows"] == 9 and again["teacher_logits_0"] == first["teacher_logits_0"]  # read from the cache

    other = swapped_vocab(tmp_path, "man", "guitar")
    relabelled = add_teacher_logits(data, teacher, COLUMNS, tokenizer=other, max_length=32, progress=False)
    assert relabelled._fingerprint != first._fingerprint
    assert seen["rows"] == 18, "the other tokenizer must relabel, not reuse the cache"
    expected = alone(teacher, other, data[0]["sentence1"], data[0]["sentence2"])
    assert torch.allclose(torch.tensor(relabelled[0]["teacher_logits_0"]), expected, atol=1e-5)
    assert not torch.allclose(torch.tensor(relabelled[0]["teacher_logits_0"]), torch.tensor(first[0]["teacher_logits_0"]))


@pytest.mark.parametrize("change", ["vocab", "lower_case", "truncation_side", "max_length", "weights"])
def test_labelling_fingerprint_moves_with_tokenizer_teacher_and_truncation(tmp_path, tiny_tokenizer, tiny_vocab_file, change):
    teacher = make_cross_encoder(tiny_tokenizer, seed=3)
    data = Dataset.from_list(rows(3))
    before = labelling_fingerprint(data, teacher, tiny_tokenizer, COLUMNS, 32, "teacher_logits_0")
    tokenizer, max_length = BertTokenizerFast(vocab_file=tiny_vocab_file, do_lower_case=True, model_max_length=64), 32
    if change == "vocab":
        tokenizer = swapped_vocab(tmp_path, "dog", "cat")
    elif change == "lower_case":
        tokenizer = BertTokenizerFast(vocab_file=tiny_vocab_file, do_lower_case=False, model_max_length=64)
    elif change == "truncation_side":
        tokenizer.truncation_side = "left"
    elif change == "max_length":
        max_length = 16
    else:
        teacher = make_cross_encoder(tiny_tokenizer, seed=4)
    after = labelling_fingerprint(data, teacher, tokenizer, COLUMNS, max_length, "teacher_logits_0")
    assert after != before


def test_fingerprint_is_stable_across_calls_that_set_truncation(tiny_tokenizer):
    """A fast tokenizer's backend keeps the last call's truncation: the key must not depend on it."""
    teacher = make_cross_encoder(tiny_tokenizer, seed=3)
    data = Dataset.from_list(rows(3))
    before = labelling_fingerprint(data, teacher, tiny_tokenizer, COLUMNS, 32, "teacher_logits_0")
    tiny_tokenizer(*map(list, zip(*PAIRS)), truncation=True, max_length=7, padding="max_length")
    assert labelling_fingerprint(data, teacher, tiny_tokenizer, COLUMNS, 32, "teacher_logits_0") == before


def test_one_process_labels_everything_and_bad_arguments_name_the_field(tiny_tokenizer):
    assert shard_plan(None, "key") == shard_plan(True, "key") == shard_plan(False, "key") == (0, 1)
    with pytest.raises(ValueError, match=r"shard='yes' is not valid"):
        shard_plan("yes", "key")
    teacher = make_cross_encoder(tiny_tokenizer, seed=3)
    with pytest.raises(ValueError, match=r"text_columns=\['sentence1', 'nope'\] is not valid"):
        add_teacher_logits(Dataset.from_list(rows(2)), teacher, ["sentence1", "nope"])
    with pytest.raises(ValueError, match=r"shard=1.5 is not valid"):
        add_teacher_logits(Dataset.from_list(rows(2)), teacher, COLUMNS, shard=1.5, progress=False)


def test_empty_dataset_gets_no_teacher_call(tiny_tokenizer):
    teacher = make_cross_encoder(tiny_tokenizer, seed=3)
    seen = counting_forwards(teacher)
    empty = Dataset.from_list(rows(2)).select([])
    assert len(add_teacher_logits(empty, teacher, COLUMNS, progress=False)) == 0 and seen["rows"] == 0

