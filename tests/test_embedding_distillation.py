"""Embedding teachers end to end in `DistillationTrainer`: another tokenizer and width teaching from sentences
alone and from pairs, online and offline alike; the projection through save, load and resume; DvBERT with a
cross-encoder and a bi-encoder teacher in one annealed run, both in the model card."""

from __future__ import annotations

import random

import pytest
import torch
from datasets import Dataset
from transformers import AutoModel

from hf_distill.callbacks import TeacherAnnealingCallback
from hf_distill.losses.embedding_mse import EmbeddingMSELoss
from hf_distill.losses.similarity_structure import SimilarityStructureLoss
from hf_distill.model_card import build_model_card
from hf_distill.teacher_embeddings import add_teacher_embeddings
from hf_distill.teachers import add_teacher_logits
from hf_distill.trainer import DistillationTrainer
from tests.conftest import WORDS, make_cross_encoder, make_siamese
from tests.embedding_helpers import TEACHER_WIDTH, embedding_teacher
from tests.test_trainer import make_args

EMBEDDING_TERMS = dict(embedding_mse_weight=1.0, similarity_structure_weight=1.0, hard_weight=0.0, soft_weight=0.0)


def texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS[:60], k=rng.randint(2, 9))) for _ in range(n)]


def cosine_student(tokenizer, **kwargs):
    return make_siamese(tokenizer, head="cosine", num_labels=1, **kwargs)


def logged(trainer, term: str) -> list[float]:
    return [entry[term] for entry in trainer.state.log_history if term in entry]


def falls(values: list[float]) -> bool:
    third = max(1, len(values) // 3)
    return sum(values[-third:]) / third < 0.5 * sum(values[:third]) / third


def test_another_tokenizer_and_width_teaches_a_student_from_sentences_alone(tmp_path, tiny_tokenizer):
    teacher = embedding_teacher(tmp_path)
    student = cosine_student(tiny_tokenizer)
    data = Dataset.from_dict({"sentence": texts(48)})
    args = make_args(tmp_path, max_steps=36, learning_rate=3e-3, **EMBEDDING_TERMS)
    trainer = DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=data)
    mse = next(c for c in trainer.loss_components if isinstance(c, EmbeddingMSELoss))
    assert (mse.student_dim, mse.teacher_dim) == (32, TEACHER_WIDTH) and mse.projection.weight.shape == (TEACHER_WIDTH, 32)
    trainer.train()
    assert falls(logged(trainer, "embedding_mse")) and falls(logged(trainer, "similarity_structure"))
    assert not logged(trainer, "hard") and not logged(trainer, "soft")
    card = str(build_model_card(trainer))
    assert "Embedding distillation" in card and "Similarity-structure distillation" in card and "reimers2020multilingual" in card


def test_offline_embeddings_give_the_online_loss_and_train_without_a_teacher(tmp_path, tiny_tokenizer):
    teacher = embedding_teacher(tmp_path)
    data = Dataset.from_dict({"sentence1": texts(16), "sentence2": texts(16, seed=1)})
    student = cosine_student(tiny_tokenizer)
    args = make_args(tmp_path, **EMBEDDING_TERMS)
    online = DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=data)
    stored = add_teacher_embeddings(data, teacher, ["sentence1", "sentence2"], max_length=32, progress=False)
    offline = DistillationTrainer(model=student, args=args, train_dataset=stored)
    assert offline.offline_embeddings == ["teacher_embeddings_0_a", "teacher_embeddings_0_b"] and not offline.teachers
    offline_mse = next(c for c in offline.loss_components if isinstance(c, EmbeddingMSELoss))
    offline_mse.load_state_dict(next(c for c in online.loss_components if isinstance(c, EmbeddingMSELoss)).state_dict())
    rows = list(range(8))
    loss_online = online.compute_loss(student, online.data_collator([data[i] for i in rows]))
    loss_offline = offline.compute_loss(student, offline.data_collator([stored[i] for i in rows]))
    assert loss_offline.item() == pytest.approx(loss_online.item(), rel=1e-5)
    offline.args.max_steps = 24
    offline.args.learning_rate = 3e-3
    offline.train()
    assert falls(logged(offline, "embedding_mse"))


def _projection(trainer) -> torch.Tensor:
    return next(c for c in trainer.loss_components if isinstance(c, EmbeddingMSELoss)).projection.weight.detach().clone()


def test_the_projection_survives_checkpoint_and_resume_and_is_dropped_from_the_saved_student(tmp_path, tiny_tokenizer):
    teacher = embedding_teacher(tmp_path)
    data = Dataset.from_dict({"sentence": texts(32)})
    settings = dict(max_steps=6, save_strategy="steps", save_steps=3, learning_rate=3e-3, **EMBEDDING_TERMS)
    full = DistillationTrainer(model=cosine_student(tiny_tokenizer), args=make_args(tmp_path, **settings), teachers=teacher,
                               train_dataset=data)
    full.train()
    resumed = DistillationTrainer(model=cosine_student(tiny_tokenizer), args=make_args(tmp_path, **settings), teachers=teacher,
                                  train_dataset=data)
    resumed.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-3"))
    assert torch.allclose(_projection(resumed), _projection(full), atol=1e-6)
    assert not torch.allclose(_projection(resumed), _projection(
        DistillationTrainer(model=cosine_student(tiny_tokenizer), args=make_args(tmp_path, **settings), teachers=teacher,
                            train_dataset=data)))
    full.save_model(str(tmp_path / "student"))
    saved = AutoModel.from_pretrained(str(tmp_path / "student"))
    assert saved.config.output_dim is None and saved.encode(["a dog runs"]).shape == (1, 32)


def test_a_kept_projection_is_the_saved_students_output_layer_and_resumes_with_it(tmp_path, tiny_tokenizer):
    teacher = embedding_teacher(tmp_path)
    data = Dataset.from_dict({"sentence": texts(32)})
    settings = dict(max_steps=6, save_strategy="steps", save_steps=3, learning_rate=3e-3, **EMBEDDING_TERMS)

    def trainer():
        kept = EmbeddingMSELoss(32, TEACHER_WIDTH, keep_projection=True)
        return DistillationTrainer(model=cosine_student(tiny_tokenizer), args=make_args(tmp_path, **settings), teachers=teacher,
                                   train_dataset=data, loss_components=[kept])

    full = trainer()
    full.train()
    assert not full.distillation_state() and full.model.output_projection.out_features == TEACHER_WIDTH
    resumed = trainer()
    resumed.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-3"))
    assert torch.allclose(resumed.model.output_projection.weight, full.model.output_projection.weight, atol=1e-6)
    full.save_model(str(tmp_path / "student"))
    saved = AutoModel.from_pretrained(str(tmp_path / "student"))
    assert saved.config.output_dim == TEACHER_WIDTH
    sentences = ["a dog runs in the park", "someone sings"]
    assert torch.allclose(saved.encode(sentences), full.model.encode(sentences), atol=1e-5)
    assert "the student's output layer" in str(build_model_card(full))


def _labelled_pairs(n: int) -> Dataset:
    rng = random.Random(3)
    return Dataset.from_dict({"sentence1": texts(n, 4), "sentence2": texts(n, 5), "label": [rng.random() for _ in range(n)]})


def test_dvbert_with_a_cross_encoder_and_a_bi_encoder_teacher_anneals_and_the_card_reports_both(tmp_path, tiny_tokenizer):
    cross = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1, num_labels=1)
    cross.save_pretrained(tmp_path / "cross-teacher")
    embedding_teacher(tmp_path).save_pretrained(tmp_path / "bi-teacher")
    teachers = [str(tmp_path / "cross-teacher"), str(tmp_path / "bi-teacher")]
    args = make_args(tmp_path, max_steps=8, annealing="linear", learning_rate=3e-3)
    trainer = DistillationTrainer(model=cosine_student(tiny_tokenizer), args=args, teachers=teachers, train_dataset=_labelled_pairs(32))
    batch = trainer._prepare_inputs(trainer.data_collator([trainer.train_dataset[i] for i in range(4)]))
    cross_out, bi_out = trainer._teacher_outputs(batch)
    assert bi_out.logits.shape == (4, 1) and torch.allclose(
        bi_out.logits.squeeze(-1), torch.cosine_similarity(bi_out.embeddings_a, bi_out.embeddings_b), atol=1e-6)
    trainer.train()
    lambdas = logged(trainer, "lambda")
    assert lambdas == sorted(lambdas) and lambdas[0] < 0.2 and lambdas[-1] > 0.8
    assert logged(trainer, "soft_0") and logged(trainer, "soft_1") and logged(trainer, "hard")
    assert next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, TeacherAnnealingCallback))
    card = str(build_model_card(trainer))
    assert "cross-teacher" in card and "bi-teacher" in card and "DvBERT teacher annealing" in card
    assert "| teacher 0 | cross-teacher" in card and "| teacher 1 | bi-teacher" in card and "SiameseModel (mpnet)" in card
    assert "`soft_0`" in card and "`soft_1`" in card


def test_dvbert_offline_reads_the_bi_encoders_cosine_column_beside_the_cross_encoders_logits(tmp_path, tiny_tokenizer):
    cross = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1, num_labels=1)
    data = add_teacher_logits(_labelled_pairs(16), cross, ["sentence1", "sentence2"], max_length=32, progress=False)
    data = add_teacher_embeddings(data, embedding_teacher(tmp_path), ["sentence1", "sentence2"], max_length=32,
                                  cosine_column="teacher_logits_1", progress=False)
    trainer = DistillationTrainer(model=cosine_student(tiny_tokenizer), args=make_args(tmp_path, max_steps=4, annealing="linear"),
                                  train_dataset=data)
    assert trainer.offline_columns == ["teacher_logits_0", "teacher_logits_1"] and not trainer.run_teachers_online
    trainer.train()
    assert logged(trainer, "soft_0") and logged(trainer, "soft_1")


def test_configured_components_replace_the_weight_built_ones(tmp_path, tiny_tokenizer):
    teacher = embedding_teacher(tmp_path)
    given = [SimilarityStructureLoss(kind="mse"), EmbeddingMSELoss(32, TEACHER_WIDTH, normalize=True)]
    trainer = DistillationTrainer(model=cosine_student(tiny_tokenizer), args=make_args(tmp_path, **EMBEDDING_TERMS), teachers=teacher,
                                  train_dataset=Dataset.from_dict({"sentence": texts(8)}), loss_components=given)
    assert [type(c).__name__ for c in trainer.loss_components] == ["PredictionLoss", "SimilarityStructureLoss", "EmbeddingMSELoss"]
    rows = str(build_model_card(trainer))
    assert "MSE" in rows and "L2-normalised" in rows


def test_an_embedding_loss_without_teacher_or_precomputed_embeddings_is_refused_before_training(tmp_path, tiny_tokenizer):
    data = Dataset.from_dict({"sentence": texts(8)})
    for weight in ("embedding_mse_weight", "similarity_structure_weight"):
        args = make_args(tmp_path, hard_weight=0.0, soft_weight=0.0, **{weight: 1.0})
        with pytest.raises(ValueError, match=f"{weight} > 0 needs an embedding teacher .* or precomputed teacher_embeddings_0_a"):
            DistillationTrainer(model=cosine_student(tiny_tokenizer), args=args, train_dataset=data)
