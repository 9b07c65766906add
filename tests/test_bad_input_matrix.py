"""Bad input that the other test files leave out (the full table, with where each case is tested: docs/bad_input.md).

Every case fails before training with an error that names the field, the value and what is valid;
a non-finite loss during training stops it, naming the step and the loss term.
"""

from __future__ import annotations

import math

import pytest
import torch

from hf_distill import CrossEncoderModel
from hf_distill.data import PairCollator
from hf_distill.trainer import DistillationTrainer
from tests.conftest import make_cross_encoder
from tests.test_trainer import make_args, pair_dataset


@pytest.fixture
def teacher(tiny_tokenizer):
    return make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1)


def student_of(teacher):
    return CrossEncoderModel.from_teacher(teacher, num_layers=1, strategy="first")


@pytest.fixture
def no_training(monkeypatch):
    """Fail if a check lets the run get as far as a training step."""

    def refuse(*args, **kwargs):
        raise AssertionError("training started before the bad input was refused")

    monkeypatch.setattr(DistillationTrainer, "training_step", refuse)


# ---------------------------------------------------------------------------- argument ranges
WEIGHTS = ("hidden_weight", "attention_weight", "embedding_weight", "emd_weight", "virt_weight", "hard_weight", "soft_weight")


@pytest.mark.parametrize("field", ["temperature", "emd_temperature", "label_scale"])
@pytest.mark.parametrize("value", [-1.0, 0, math.nan, math.inf])
def test_temperatures_and_scales_must_be_positive_and_finite(tmp_path, field, value):
    with pytest.raises(ValueError, match=rf"^{field}={value!r} is out of range; it must be > 0\.0 \(a finite number\)"):
        make_args(tmp_path, **{field: value})


@pytest.mark.parametrize("field", WEIGHTS)
@pytest.mark.parametrize("value", [-0.5, math.nan, math.inf, "1", True])
def test_weights_must_be_finite_and_non_negative(tmp_path, field, value):
    with pytest.raises(ValueError, match=rf"^{field}={value!r} is out of range; it must be >= 0\.0 \(a finite number\)"):
        make_args(tmp_path, **{field: value})


@pytest.mark.parametrize("value", [-0.1, 1.01, math.nan, None])
def test_alpha_must_be_in_the_unit_interval(tmp_path, value):
    with pytest.raises(ValueError, match=rf"^alpha={value!r} is out of range; it must be >= 0\.0 and <= 1\.0"):
        make_args(tmp_path, alpha=value)


@pytest.mark.parametrize("value", [4, -1])
def test_max_length_too_small(tmp_path, value):
    with pytest.raises(ValueError, match=rf"^max_length={value} is out of range; it must be >= 8"):
        make_args(tmp_path, max_length=value)


@pytest.mark.parametrize(
    "field, value, valid",
    [
        ("attention_loss", "cos", "'mse', 'kl'"),
        ("emd_update", "max", "'softmax', 'normalize'"),
        ("teacher_dtype", "int8", "'auto', 'float32', 'bfloat16', 'float16'"),
    ],
)
def test_choices_list_the_valid_values(tmp_path, field, value, valid):
    with pytest.raises(ValueError, match=rf"^{field}='{value}' is not valid; choose one of {valid}\.$"):
        make_args(tmp_path, **{field: value})


def test_soft_weight_without_any_teacher(tmp_path, teacher):
    with pytest.raises(ValueError, match=r"soft_weight=1.0 but no teachers and no teacher_logits_\* columns were given"):
        DistillationTrainer(model=student_of(teacher), args=make_args(tmp_path, soft_weight=1.0), train_dataset=pair_dataset(8))


@pytest.mark.parametrize("value", [-1.0, math.nan, "2"])
def test_term_weights_out_of_range(tmp_path, teacher, value):
    with pytest.raises(ValueError, match=r"term_weights\['soft'\]=.* is out of range; it must be >= 0 \(a finite number\)"):
        DistillationTrainer(
            model=student_of(teacher), args=make_args(tmp_path), teachers=teacher, term_weights={"soft": value},
            train_dataset=pair_dataset(8),
        )


# ---------------------------------------------------------------------------- attention implementations
@pytest.mark.parametrize("implementation", ["sdpa", "flash_attention_2"])
@pytest.mark.parametrize("who", ["student", "teacher"])
@pytest.mark.parametrize("weight", ["attention_weight", "emd_weight"])
def test_attention_losses_need_eager_on_both_sides(tmp_path, tiny_tokenizer, implementation, who, weight):
    teacher = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1)
    student = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=2)
    model = student if who == "student" else teacher
    model.backbone.config._attn_implementation = implementation  # flash-attn itself is not installed on CPU
    name = "student" if who == "student" else r"teachers\[0\]"
    with pytest.raises(ValueError, match=rf"{name} uses attn_implementation='{implementation}'; attention losses need 'eager'"):
        DistillationTrainer(model=student, args=make_args(tmp_path, **{weight: 1.0}), teachers=teacher, train_dataset=pair_dataset(8))


# ---------------------------------------------------------------------------- labels
@pytest.mark.parametrize("overrides", [dict(annealing="linear"), dict(alpha=1.0, hard_weight=0.5)])
def test_hard_loss_without_labels_under_annealing_or_explicit_weight(tmp_path, teacher, overrides):
    data = pair_dataset(8).remove_columns("label")
    with pytest.raises(ValueError, match=r"label_column='label' is not in the training set \(columns \['sentence1', 'sentence2'\]\)"):
        DistillationTrainer(model=student_of(teacher), args=make_args(tmp_path, **overrides), teachers=teacher, train_dataset=data)


def _named(tiny_tokenizer):
    return make_cross_encoder(tiny_tokenizer, num_layers=1, id2label={0: "no", 1: "yes"}, label2id={"no": 0, "yes": 1})


@pytest.mark.parametrize("split", ["train", "eval"])
def test_unknown_string_label_is_refused_before_training(tmp_path, tiny_tokenizer, no_training, split):
    good = pair_dataset(8).map(lambda row: {"label": ["no", "yes"][row["label"]]})
    bad = good.map(lambda row, i: {"label": "maybe" if i == 5 else row["label"]}, with_indices=True)
    datasets = {"train_dataset": bad if split == "train" else good, "eval_dataset": bad if split == "eval" else good}
    with pytest.raises(ValueError, match=rf"label='maybe' \(column 'label' of the {split} dataset.*valid labels: \['no', 'yes'\]"):
        DistillationTrainer(model=_named(tiny_tokenizer), args=make_args(tmp_path), **datasets).train()


def test_class_id_out_of_range_is_refused_before_training(tmp_path, tiny_tokenizer, no_training):
    data = pair_dataset(8).map(lambda row, i: {"label": 2 if i == 3 else row["label"]}, with_indices=True)
    with pytest.raises(ValueError, match=r"label=2 \(column 'label' of the train dataset.*valid: 0\.\.1 \(num_labels=2\) or -100"):
        DistillationTrainer(model=make_cross_encoder(tiny_tokenizer, num_layers=1), args=make_args(tmp_path), train_dataset=data)


def test_valid_labels_pass_the_check(tmp_path, tiny_tokenizer):
    """Label names, -100 (no gold label) and regression scores pass, and reach the batch as the model reads them."""
    classes = pair_dataset(8)["label"]
    named = pair_dataset(8).map(lambda row: {"label": ["no", "yes"][row["label"]]})
    ignored = pair_dataset(8).map(lambda row, i: {"label": -100 if i == 0 else row["label"]}, with_indices=True)
    scores = pair_dataset(8, regression=True)  # regression scores are not class ids
    cases = [
        (_named(tiny_tokenizer), named, torch.tensor(classes)),  # "no"/"yes" -> label2id
        (make_cross_encoder(tiny_tokenizer, num_layers=1), ignored, torch.tensor([-100, *classes[1:]])),
        (make_cross_encoder(tiny_tokenizer, num_layers=1, num_labels=1), scores, torch.tensor(scores["label"])),
    ]
    for model, data, expected in cases:
        trainer = DistillationTrainer(model=model, args=make_args(tmp_path), train_dataset=data)
        labels = trainer.data_collator([data[i] for i in range(len(data))])["labels"]
        torch.testing.assert_close(labels, expected.to(labels.dtype))


# ---------------------------------------------------------------------------- datasets
def test_eval_set_missing_columns_or_empty(tmp_path, teacher):
    student = student_of(teacher)
    with pytest.raises(ValueError, match=r"text_columns=\['sentence1', 'sentence2'\] not found in the eval dataset: missing \['sentence2'\]"):
        DistillationTrainer(
            model=student, args=make_args(tmp_path), teachers=teacher, train_dataset=pair_dataset(8),
            eval_dataset=pair_dataset(4).rename_column("sentence2", "hypothesis"),
        )
    with pytest.raises(ValueError, match=r"eval_dataset\['test'\] is empty \(0 rows\)"):
        DistillationTrainer(
            model=student, args=make_args(tmp_path), teachers=teacher, train_dataset=pair_dataset(8),
            eval_dataset={"dev": pair_dataset(4), "test": pair_dataset(4).select([])},
        )


def test_empty_dataset_is_refused_with_a_custom_collator(tmp_path, tiny_tokenizer, teacher):
    collator = PairCollator(tokenizer=tiny_tokenizer, siamese=False, text_columns=("sentence1", "sentence2"))
    with pytest.raises(ValueError, match=r"train_dataset is empty \(0 rows\)"):
        DistillationTrainer(
            model=student_of(teacher), args=make_args(tmp_path), teachers=teacher, data_collator=collator,
            train_dataset=pair_dataset(8).select([]),
        )


# ---------------------------------------------------------------------------- non-finite loss during training
def test_non_finite_layer_term_stops_training_at_its_step(tmp_path, tiny_tokenizer):
    """NaN enters one term (the hidden-state projection) at step 2: train() stops there, naming only that term."""
    from transformers import TrainerCallback

    from hf_distill.losses import HiddenStateLoss

    teacher = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1)
    student = student_of(teacher)

    class PoisonAtStep2(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 2:
                hidden = next(c for c in trainer.loss_components if isinstance(c, HiddenStateLoss))
                with torch.no_grad():
                    next(hidden.parameters()).fill_(float("nan"))

    args = make_args(tmp_path, hidden_weight=1.0, max_steps=6, per_device_train_batch_size=4)
    trainer = DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=pair_dataset(16), callbacks=[PoisonAtStep2()])
    with pytest.raises(FloatingPointError, match=r"non-finite loss nan at step 2; non-finite terms: \['hidden'\]"):
        trainer.train()
    assert trainer.state.global_step == 2
    assert all(torch.isfinite(p).all() for p in student.parameters())  # the bad step never reached the optimizer


# ---------------------------------------------------------------------------- the table in the docs
def test_every_test_named_in_the_bad_input_table_exists():
    import ast
    import re
    from pathlib import Path

    tests = Path(__file__).parent
    table = (tests.parent / "docs" / "bad_input.md").read_text(encoding="utf-8")
    references, current = [], None
    for file, name in re.findall(r"`(?:([\w/]+\.py))?::(test_\w+)", table):
        current = file or current
        references.append((current, name))
    assert len(references) >= 30
    defined: dict[str, set[str]] = {}
    for file, name in references:
        if file not in defined:
            tree = ast.parse((tests / file).read_text(encoding="utf-8"))
            defined[file] = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert name in defined[file], f"docs/bad_input.md names {file}::{name}, which does not exist"
