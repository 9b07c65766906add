"""Offline teacher embeddings (`add_teacher_embeddings`): each sentence as embedded alone, in row order;
pairs, float16 storage, the cosine column; cached by data, teacher and tokenizer; split across processes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from datasets import Dataset, load_dataset
from transformers import BertTokenizerFast

import hf_distill.teacher_embeddings as offline
from hf_distill.process_shards import gather_rows
from hf_distill.teacher_embeddings import add_teacher_embeddings, embedding_fingerprint, precomputed_teacher_config
from tests.conftest import SENTENCES
from tests.embedding_helpers import TEACHER_WIDTH, embed_alone, embedding_teacher


def sentences(n: int) -> list[str]:
    """Sentences of many lengths, with repeats (embedded once each)."""
    return [" ".join(SENTENCES[(i * 3) % 7].split()[: 1 + i % 6]) for i in range(n)]


def test_each_sentence_is_embedded_as_alone_in_row_order(tmp_path):
    teacher = embedding_teacher(tmp_path)
    data = Dataset.from_dict({"sentence": sentences(13)})
    out = add_teacher_embeddings(data, teacher, ["sentence"], batch_size=4, max_length=32, progress=False)
    assert out.column_names == ["sentence", "teacher_embeddings_0_a"]
    expected = embed_alone(teacher, data["sentence"])
    assert torch.allclose(torch.tensor(out["teacher_embeddings_0_a"]), expected, atol=1e-5)
    assert precomputed_teacher_config(out).hidden_size == TEACHER_WIDTH and precomputed_teacher_config(data) is None
    again = add_teacher_embeddings(out, teacher, ["sentence"], max_length=32, progress=False)  # the next teacher index
    assert again.column_names[-1] == "teacher_embeddings_1_a"


def test_pairs_get_both_sides_float16_storage_and_the_cosine_score(tmp_path):
    teacher = embedding_teacher(tmp_path)
    rows = sentences(10)
    data = Dataset.from_dict({"sentence1": rows, "sentence2": rows[::-1]})
    out = add_teacher_embeddings(data, teacher, ["sentence1", "sentence2"], max_length=32, dtype="float16",
                                 cosine_column="teacher_logits_1", progress=False)
    assert out.features["teacher_embeddings_0_a"].feature.dtype == "float16"
    a, b = (torch.tensor(np.asarray(out[c], dtype=np.float32)) for c in ("teacher_embeddings_0_a", "teacher_embeddings_0_b"))
    assert torch.allclose(a, embed_alone(teacher, rows), atol=2e-3) and torch.allclose(b, embed_alone(teacher, rows[::-1]), atol=2e-3)
    cosine = F.cosine_similarity(embed_alone(teacher, rows), embed_alone(teacher, rows[::-1]))
    assert torch.allclose(torch.tensor(out["teacher_logits_1"]).squeeze(-1), cosine, atol=1e-5)


def test_bad_arguments_are_refused(tmp_path):
    teacher = embedding_teacher(tmp_path)
    data = Dataset.from_dict({"sentence": ["a dog"]})
    with pytest.raises(ValueError, match=r"text_columns=\['text'\] is not valid for this dataset"):
        add_teacher_embeddings(data, teacher, ["text"], progress=False)
    with pytest.raises(ValueError, match="dtype='int8' is not valid; choose one of 'float32', 'float16'"):
        add_teacher_embeddings(data, teacher, ["sentence"], dtype="int8", progress=False)
    with pytest.raises(ValueError, match="cosine_column='teacher_logits_0' needs two text columns"):
        add_teacher_embeddings(data, teacher, ["sentence"], cosine_column="teacher_logits_0", progress=False)


def _file_dataset(tmp_path) -> Dataset:
    path = tmp_path / "sentences.jsonl"
    path.write_text("".join(json.dumps({"sentence": s}) + "\n" for s in sentences(9)), encoding="utf-8")
    return load_dataset("json", data_files=str(path), cache_dir=str(tmp_path / "cache"))["train"]


def test_cache_is_reused_for_the_same_teacher_and_tokenizer_and_recomputed_for_another(tmp_path):
    teacher = embedding_teacher(tmp_path)
    seen = {"rows": 0}
    teacher.backbone.register_forward_hook(lambda m, a, k, o: seen.__setitem__("rows", seen["rows"] + len(k["input_ids"])), with_kwargs=True)
    data = _file_dataset(tmp_path)
    distinct = len(set(data["sentence"]))
    first = add_teacher_embeddings(data, teacher, ["sentence"], max_length=32, progress=False)
    assert seen["rows"] == distinct
    again = add_teacher_embeddings(data, teacher, ["sentence"], max_length=32, progress=False)
    assert seen["rows"] == distinct and again["teacher_embeddings_0_a"] == first["teacher_embeddings_0_a"]
    other = BertTokenizerFast(vocab_file=str(tmp_path / "other_vocab.txt"), do_lower_case=False,
                              model_max_length=64, model_input_names=["input_ids", "attention_mask"])  # another setting
    add_teacher_embeddings(data, teacher, ["sentence"], tokenizer=other, max_length=32, progress=False)
    assert seen["rows"] == 2 * distinct


@pytest.mark.parametrize("change", ["pooling", "dtype", "max_length", "weights"])
def test_fingerprint_moves_with_pooling_storage_truncation_and_weights(tmp_path, change):
    teacher = embedding_teacher(tmp_path)
    data = Dataset.from_dict({"sentence": ["a dog"]})
    settings = dict(max_length=32, k=0, dtype="float32", cosine_column=None)
    before = embedding_fingerprint(data, teacher, teacher.tokenizer, ["sentence"], **settings)
    if change == "pooling":
        teacher.config.pooling = "cls"
    elif change == "weights":
        teacher = embedding_teacher(tmp_path, seed=8)
    else:
        settings[change] = {"dtype": "float16", "max_length": 16}[change]
    assert embedding_fingerprint(data, teacher, teacher.tokenizer, ["sentence"], **settings) != before


def test_two_processes_embed_their_shares_of_the_batches_and_together_give_the_one_process_vectors(tmp_path, monkeypatch):
    teacher = embedding_teacher(tmp_path)
    data = Dataset.from_dict({"sentence": sentences(30)})
    reference = torch.tensor(add_teacher_embeddings(data, teacher, ["sentence"], batch_size=3, max_length=32, progress=False)
                             ["teacher_embeddings_0_a"])
    shares = []

    def keep_share(indices, values, total, world):
        shares.append((list(indices), list(values)))
        return torch.zeros(total, TEACHER_WIDTH)

    monkeypatch.setattr(offline, "gather_rows", keep_share)
    for rank in (0, 1):
        monkeypatch.setattr(offline, "shard_plan", lambda shard, key, rank=rank: (rank, 2))
        add_teacher_embeddings(data, teacher, ["sentence"], batch_size=3, max_length=32, shard=True, progress=False)
    (rows0, out0), (rows1, out1) = shares
    distinct = len(set(data["sentence"]))
    assert abs(len(rows0) - len(rows1)) <= 1 and sum(len(r) for r in rows0 + rows1) == distinct
    vectors = gather_rows(rows0 + rows1, out0 + out1, distinct, 1)
    order = list(dict.fromkeys(data["sentence"]))
    assert torch.allclose(vectors[[order.index(s) for s in data["sentence"]]], reference, atol=1e-6)
