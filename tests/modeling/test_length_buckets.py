"""Encoding a batch in groups of similar length (`in_length_buckets`, `SiameseModel(length_buckets=...)`): the whole
batch's embeddings, with less padding; the trainer's `student_length_buckets` switch and its checks."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset

from hf_distill.modeling.modeling_common import in_length_buckets
from hf_distill.trainer import DistillationTrainer
from tests.conftest import make_cross_encoder, make_siamese
from tests.embedding_helpers import embedding_teacher
from tests.test_embedding_distillation import EMBEDDING_TERMS, cosine_student, texts
from tests.test_trainer import make_args


def _batch(tokenizer, sentences: list[str], side: str = "right") -> dict:
    tokenizer.padding_side = side
    try:
        return dict(tokenizer(sentences, padding=True, return_tensors="pt"))
    finally:
        tokenizer.padding_side = "right"


def test_buckets_give_the_whole_batchs_embeddings_and_real_token_states(tiny_tokenizer):
    model = make_siamese(tiny_tokenizer, head="cosine", num_labels=1).eval()
    batch = _batch(tiny_tokenizer, texts(10, seed=3))
    lengths = batch["attention_mask"].sum(1)
    assert lengths.min() < lengths.max()  # mixed lengths: the case buckets are for
    whole = model.encode_side(**batch)
    widths = []

    def encode(ids, mask, types):
        widths.append(ids.shape[1])
        return model._pooled(ids, mask, types)

    embeddings, states = in_length_buckets(encode, batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], 3)
    torch.testing.assert_close(embeddings, whole.embeddings, atol=1e-5, rtol=0)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(states[real], whole.last_hidden_state[real], atol=1e-5, rtol=0)
    # 3 groups of 4, 3, 3 rows, shortest first, each cut to its own longest row
    longest = torch.sort(lengths).values
    assert widths == [int(longest[3]), int(longest[6]), int(longest[9])] and widths[0] < batch["input_ids"].shape[1]
    bucketed = model.encode_side(**batch, length_buckets=3)
    torch.testing.assert_close(bucketed.embeddings, whole.embeddings, atol=1e-5, rtol=0)


def test_left_padding_small_batches_and_internals_encode_the_batch_whole(tiny_tokenizer):
    model = make_siamese(tiny_tokenizer, head="cosine", num_labels=1).eval()
    calls = []

    def encode(ids, mask, types):
        calls.append(ids.shape)
        return model._pooled(ids, mask, types)

    left = _batch(tiny_tokenizer, texts(8, seed=3), side="left")
    in_length_buckets(encode, left["input_ids"], left["attention_mask"], left["token_type_ids"], 2)
    few = _batch(tiny_tokenizer, texts(3, seed=3))
    in_length_buckets(encode, few["input_ids"], few["attention_mask"], few["token_type_ids"], 2)
    assert calls == [left["input_ids"].shape, few["input_ids"].shape]  # one call each: whole
    with_states = model.encode_side(**_batch(tiny_tokenizer, texts(8)), output_hidden_states=True, length_buckets=2)
    assert with_states.hidden_states is not None


def test_the_trainer_encodes_in_buckets_while_training_and_the_terms_fall(tmp_path, tiny_tokenizer, monkeypatch):
    teacher = embedding_teacher(tmp_path)
    data = Dataset.from_dict({"sentence": texts(48)})
    student = cosine_student(tiny_tokenizer)
    seen = []
    forward = type(student).forward
    monkeypatch.setattr(type(student), "forward",
                        lambda self, *a, **k: (self is student and seen.append(k.get("length_buckets", 1)),
                                               forward(self, *a, **k))[1])  # the student's calls (the teacher is Siamese too)
    args = make_args(tmp_path, max_steps=36, learning_rate=3e-3, student_length_buckets=2, **EMBEDDING_TERMS)
    trainer = DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=data)
    rows = trainer.data_collator([data[i] for i in range(8)])
    student.train()  # no dropout in the tiny model: the bucketed loss is the whole batch's
    bucketed = trainer.compute_loss(student, rows).item()
    trainer.args.student_length_buckets = 1
    assert bucketed == pytest.approx(trainer.compute_loss(student, rows).item(), rel=1e-5)
    assert seen[-2:] == [2, 1]
    trainer.args.student_length_buckets = 2
    trainer.train()
    values = [entry["similarity_structure"] for entry in trainer.state.log_history if "similarity_structure" in entry]
    assert sum(values[-3:]) < 0.5 * sum(values[:3]) and 2 in seen


def test_bad_settings_are_refused_before_training(tmp_path, tiny_tokenizer):
    with pytest.raises(ValueError, match="student_length_buckets=0 is not valid; give a whole number >= 1"):
        make_args(tmp_path, student_length_buckets=0)
    data = Dataset.from_dict({"sentence1": texts(8), "sentence2": texts(8, seed=1), "label": [0, 1] * 4})
    with pytest.raises(ValueError, match="student_length_buckets=2 is not valid for a CrossEncoderModel"):
        DistillationTrainer(model=make_cross_encoder(tiny_tokenizer), args=make_args(tmp_path, student_length_buckets=2),
                            train_dataset=data)
    siamese = make_siamese(tiny_tokenizer, num_labels=2)
    with pytest.raises(ValueError, match="student_length_buckets=2 is not valid with losses on the student's hidden_states"):
        DistillationTrainer(model=siamese, teachers=make_cross_encoder(tiny_tokenizer), train_dataset=data,
                            args=make_args(tmp_path, student_length_buckets=2, hidden_weight=1.0))


def test_a_cross_encoder_student_is_refused_before_any_teacher_loads(tmp_path, tiny_tokenizer):
    """The student's kind is known at once: a teacher path (here one that cannot load) is never read first."""
    data = Dataset.from_dict({"sentence1": texts(8), "sentence2": texts(8, seed=1), "label": [0, 1] * 4})
    with pytest.raises(ValueError, match="student_length_buckets=2 is not valid for a CrossEncoderModel"):
        DistillationTrainer(model=make_cross_encoder(tiny_tokenizer), teachers=str(tmp_path / "no_such_teacher"),
                            args=make_args(tmp_path, student_length_buckets=2), train_dataset=data)


def test_a_virt_student_is_refused(tmp_path, tiny_tokenizer):
    data = Dataset.from_dict({"sentence1": texts(8), "sentence2": texts(8, seed=1), "label": [0, 1] * 4})
    virt = make_siamese(tiny_tokenizer, num_labels=2, interaction="virt")
    with pytest.raises(ValueError, match="student_length_buckets=2 is not valid for a student with interaction='virt'"):
        DistillationTrainer(model=virt, args=make_args(tmp_path, student_length_buckets=2), train_dataset=data)
