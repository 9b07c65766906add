"""Teachers that embed: built from a backbone, a sentence-transformers folder or a saved Siamese model;
each reads its own tokenization (collator views per side), pairs scored by cosine; sentences alone."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from hf_distill.data import PairCollator, infer_text_columns
from hf_distill.embedding_teachers import embedding_column, embedding_columns, embedding_dim, embeds, load_embedding_teacher
from hf_distill.modeling import SiameseModel
from tests.conftest import PAIRS, make_cross_encoder, make_siamese
from tests.embedding_helpers import TEACHER_WIDTH, embedding_teacher, mpnet_backbone, other_tokenizer


def test_a_backbone_becomes_a_mean_pooling_cosine_teacher_that_scores_pairs_by_cosine(tmp_path):
    teacher = embedding_teacher(tmp_path)
    assert isinstance(teacher, SiameseModel) and teacher.config.head == "cosine" and teacher.config.pooling == "mean"
    assert embeds(teacher) and embedding_dim(teacher) == TEACHER_WIDTH
    a = teacher.tokenizer([p[0] for p in PAIRS], padding=True, return_tensors="pt")
    b = teacher.tokenizer([p[1] for p in PAIRS], padding=True, return_tensors="pt")
    with torch.no_grad():
        out = teacher(a["input_ids"], a["attention_mask"], b["input_ids"], b["attention_mask"])
    assert out.embeddings_a.shape == (3, TEACHER_WIDTH)
    assert torch.allclose(out.logits.squeeze(-1), F.cosine_similarity(out.embeddings_a, out.embeddings_b), atol=1e-6)


def _sentence_transformers_folder(tmp_path, pooling_flag: str):
    folder = tmp_path / "st_model"
    mpnet_backbone().save_pretrained(folder)
    other_tokenizer(tmp_path).save_pretrained(folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]))
    (folder / "1_Pooling").mkdir()
    flags = {"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({**flags, pooling_flag: True, "word_embedding_dimension": 48}))
    return folder


def test_a_sentence_transformers_folder_brings_its_pooling_and_a_saved_teacher_loads_back(tmp_path):
    folder = _sentence_transformers_folder(tmp_path, "pooling_mode_cls_token")
    teacher = load_embedding_teacher(str(folder))
    assert teacher.config.pooling == "cls" and teacher.tokenizer is not None
    assert load_embedding_teacher(str(folder), pooling="max").config.pooling == "max"  # an explicit choice wins
    teacher.save_pretrained(tmp_path / "saved")
    again = load_embedding_teacher(str(tmp_path / "saved"))
    assert again.config.pooling == "cls"
    text = ["a man plays the guitar"]
    assert torch.allclose(again.encode(text), teacher.encode(text), atol=1e-6)
    with pytest.raises(ValueError, match="pooling='mean' differs from the saved Siamese teacher's 'cls'"):
        load_embedding_teacher(str(tmp_path / "saved"), pooling="mean")


def test_a_teacher_without_tokenizer_or_of_another_kind_is_refused(tmp_path):
    with pytest.raises(ValueError, match="carries no tokenizer"):
        load_embedding_teacher(mpnet_backbone())
    with pytest.raises(ValueError, match="teacher=3 is not valid"):
        load_embedding_teacher(3)
    with pytest.raises(ValueError, match="does not embed sentences"):
        embedding_dim(make_cross_encoder())


def test_collator_gives_an_embedding_teacher_each_side_in_its_own_tokenization(tmp_path, tiny_tokenizer):
    teacher_tokenizer = other_tokenizer(tmp_path)
    collator = PairCollator(tiny_tokenizer, siamese=True, text_columns=["sentence1", "sentence2"],
                            teacher_tokenizers=[tiny_tokenizer, teacher_tokenizer], teacher_embeds=[False, True], label_column=None)
    rows = [{"sentence1": a, "sentence2": b} for a, b in PAIRS]
    batch = collator(rows)
    first = teacher_tokenizer([a for a, _ in PAIRS], padding=True, return_tensors="pt")
    assert torch.equal(batch["teacher_1_input_ids_a"], first["input_ids"])
    assert "teacher_1_token_type_ids_a" not in batch and "teacher_1_input_ids" not in batch
    joint = tiny_tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt")
    assert torch.equal(batch["teacher_0_input_ids"], joint["input_ids"])  # a cross-encoder teacher keeps the joint pair


def test_sentences_alone_give_side_a_only_and_pass_precomputed_embeddings_through(tmp_path, tiny_tokenizer):
    assert infer_text_columns(["sentence", "id"]) == ("sentence",)
    column = embedding_column(0)
    assert embedding_columns(["teacher_embeddings_1_b", "teacher_logits_0", column, "teacher_embeddings_1_a"]) == [
        column, "teacher_embeddings_1_a", "teacher_embeddings_1_b"]
    collator = PairCollator(tiny_tokenizer, siamese=True, text_columns=["sentence"], teacher_tokenizers=[other_tokenizer(tmp_path)],
                            teacher_embeds=[True], label_column=None, teacher_embedding_columns=[column])
    batch = collator([{"sentence": "a dog runs", column: [0.5, 1.0]}, {"sentence": "the cat", column: [0.25, 2.0]}])
    assert {"input_ids_a", "teacher_0_input_ids_a"} <= set(batch) and "input_ids_b" not in batch
    assert batch[column].dtype == torch.float32 and batch[column].tolist() == [[0.5, 1.0], [0.25, 2.0]]
    student = make_siamese(tiny_tokenizer, head="cosine", num_labels=1)
    out = student(**{k: v for k, v in batch.items() if not k.startswith("teacher_")})
    assert out.logits is None and out.embeddings_a.shape == (2, 32)


def test_sentences_alone_are_refused_for_a_cross_encoder_and_for_virt(tiny_tokenizer):
    with pytest.raises(ValueError, match=r"text_columns=\['sentence'\] \(sentences alone\) needs a Siamese student"):
        PairCollator(tiny_tokenizer, siamese=False, text_columns=["sentence"])
    with pytest.raises(ValueError, match="teacher_embeds has 2 entries for 1 teacher tokenizers"):
        PairCollator(tiny_tokenizer, siamese=True, text_columns=["a", "b"], teacher_tokenizers=[tiny_tokenizer],
                     teacher_embeds=[True, False])
