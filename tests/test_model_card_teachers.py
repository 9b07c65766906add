"""Model cards name their teachers (hf_distill/model_card/teacher_records.py): a teacher object by its
name_or_path (a Hub id as is, a folder by its name, never an absolute path), with its size and the results
saved in its folder; offline teachers through the record `add_teacher_logits` leaves in the dataset; the
explicit fallback only for a model without any name."""

from __future__ import annotations

import json

import datasets
from huggingface_hub import ModelCard
from transformers import AutoModel

from hf_distill import CrossEncoderModel
from hf_distill.model_card import build_model_card
from hf_distill.model_card.teacher_records import NAMELESS, dataset_teachers, recorded_results
from hf_distill.teachers import add_teacher_logits
from hf_distill.trainer import DistillationTrainer
from tests.conftest import make_cross_encoder
from tests.test_trainer import make_args, pair_dataset

RESULTS = {"eval_accuracy": 0.8125, "eval_f1": 0.85, "eval_loss": 0.4, "eval_runtime": 1.5, "eval_samples": 8, "epoch": 3.0}


def _saved_teacher(tmp_path, tokenizer, name="mrpc-teacher"):
    """A 3-layer teacher saved in tmp_path/name with the results a Trainer writes, loaded back as an object."""
    folder = tmp_path / "runs" / name
    make_cross_encoder(tokenizer, num_layers=3, seed=1).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "eval_results.json").write_text(json.dumps(RESULTS))
    teacher = AutoModel.from_pretrained(str(folder))
    teacher.tokenizer = tokenizer
    return teacher, folder


def _card(trainer) -> str:
    return ModelCard(str(build_model_card(trainer))).text


def test_recorded_results_reads_the_metrics_a_trainer_saved(tmp_path):
    (tmp_path / "all_results.json").write_text(json.dumps({**RESULTS, "test_accuracy": 0.75, "train_loss": 0.3}))
    assert recorded_results(str(tmp_path)) == {"validation": {"accuracy": 0.8125, "f1": 0.85}, "test": {"accuracy": 0.75}}
    assert recorded_results(str(tmp_path / "missing")) == {}


def test_a_teacher_object_loaded_from_a_folder_is_named_by_the_folder_with_size_and_results(tmp_path, tiny_tokenizer):
    teacher, folder = _saved_teacher(tmp_path, tiny_tokenizer)
    assert teacher.config._name_or_path == str(folder)  # absolute: the card must not show it
    student = CrossEncoderModel.from_teacher(teacher, num_layers=1)
    trainer = DistillationTrainer(model=student, args=make_args(tmp_path), teachers=teacher, train_dataset=pair_dataset(8))
    text = _card(trainer)
    assert "distilled from `mrpc-teacher`" in text
    assert "| teacher | mrpc-teacher | CrossEncoderModel (bert) | 3 | 32 | 2 |" in text
    assert "Teacher `mrpc-teacher`, results saved with it: validation accuracy 0.8125, f1 0.85." in text
    assert str(tmp_path) not in text and NAMELESS not in text


def test_a_teacher_without_any_name_gets_the_explicit_fallback(tmp_path, tiny_tokenizer):
    teacher = make_cross_encoder(tiny_tokenizer, num_layers=3, seed=1)
    assert not teacher.config._name_or_path
    trainer = DistillationTrainer(
        model=CrossEncoderModel.from_teacher(teacher, num_layers=1), args=make_args(tmp_path), teachers=teacher,
        train_dataset=pair_dataset(8),
    )
    text = _card(trainer)
    assert f"distilled from {NAMELESS}, " in text and f"| teacher | {NAMELESS} | CrossEncoderModel (bert) | 3 |" in text
    assert "not recorded" not in text and "in-memory models" not in text


def test_an_offline_teacher_is_named_through_the_labelled_dataset(tmp_path, tiny_tokenizer):
    teacher, _ = _saved_teacher(tmp_path, tiny_tokenizer)
    labelled = add_teacher_logits(pair_dataset(8), teacher, ["sentence1", "sentence2"], max_length=32, progress=False)
    labelled.save_to_disk(str(tmp_path / "labelled"))  # as `hf-distill label` does; train reads it back
    reloaded = datasets.load_from_disk(str(tmp_path / "labelled")).select(range(6))
    assert dataset_teachers(reloaded)["teacher_logits_0"]["name"] == "mrpc-teacher"
    trainer = DistillationTrainer(
        model=CrossEncoderModel.from_teacher(teacher, num_layers=1), args=make_args(tmp_path), train_dataset=reloaded,
    )
    text = _card(trainer)
    assert "distilled from `mrpc-teacher`" in text and "teacher models: `mrpc-teacher`." in text
    assert "| teacher | mrpc-teacher | CrossEncoderModel (bert) | 3 | 32 | 2 |" in text
    assert "results saved with it: validation accuracy 0.8125, f1 0.85." in text
    assert str(tmp_path) not in text and "not recorded" not in text

    unnamed = reloaded.map(lambda row: row)  # a column labelled elsewhere, its record gone
    unnamed.info.description = ""
    trainer = DistillationTrainer(
        model=CrossEncoderModel.from_teacher(teacher, num_layers=1), args=make_args(tmp_path), train_dataset=unnamed,
    )
    assert "teacher models: the unnamed teacher of `teacher_logits_0` (name it with" in _card(trainer)
