"""DistillationTrainer: the training step, logged terms, teachers online vs offline, resume, bad input."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from datasets import Dataset

from hf_distill.callbacks import TeacherAnnealingCallback
from hf_distill.losses.logits import hard_loss, soft_loss
from hf_distill.teachers import add_teacher_logits
from hf_distill.trainer import DistillationTrainer
from hf_distill.training_args import DistillationArguments
from tests.conftest import QUIET_CPU_TRAINING, WORDS, make_cross_encoder, make_siamese


def pair_dataset(n: int = 32, regression: bool = False, seed: int = 0) -> Dataset:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        rows.append(
            {
                "sentence1": " ".join(rng.choices(WORDS[:60], k=rng.randint(2, 9))),
                "sentence2": " ".join(rng.choices(WORDS[:60], k=rng.randint(2, 9))),
                "label": rng.random() if regression else rng.randint(0, 1),
            }
        )
    return Dataset.from_list(rows)


def make_args(tmp_path, **overrides) -> DistillationArguments:
    values = dict(QUIET_CPU_TRAINING, output_dir=str(tmp_path / "out"), max_steps=4, learning_rate=1e-3, max_length=32)
    values.update(overrides)
    return DistillationArguments(**values)


@pytest.fixture
def teacher(tiny_tokenizer):
    return make_cross_encoder(tiny_tokenizer, num_layers=3, seed=1)


def student_of(teacher):
    from hf_distill import CrossEncoderModel

    return CrossEncoderModel.from_teacher(teacher, num_layers=1, strategy="first")


# ---------------------------------------------------------------------------- the step
@pytest.mark.parametrize("num_teachers", [1, 2])
@pytest.mark.parametrize("regression", [False, True])
@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_annealed_loss_is_the_hand_mixture(tmp_path, tiny_tokenizer, num_teachers, regression, lam):
    num_labels = 1 if regression else 2
    teachers = [make_cross_encoder(tiny_tokenizer, num_layers=2, seed=s, num_labels=num_labels) for s in (1, 2)][:num_teachers]
    student = make_cross_encoder(tiny_tokenizer, num_layers=1, seed=3, num_labels=num_labels)
    data = pair_dataset(8, regression=regression)
    trainer = DistillationTrainer(
        model=student, args=make_args(tmp_path, annealing="linear", temperature=2.0), teachers=teachers, train_dataset=data
    )
    next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, TeacherAnnealingCallback)).current_lambda = lam
    batch = trainer.data_collator([data[i] for i in range(8)])
    loss = trainer.compute_loss(student, batch)

    with torch.no_grad():
        z_s = student(**{k: v for k, v in batch.items() if not k.startswith("teacher_") and k != "labels"}).logits
        hard = hard_loss(z_s, batch["labels"])
        soft = sum(soft_loss(z_s, t(**dict(tiny_tokenizer(list(data["sentence1"]), list(data["sentence2"]), padding=True, truncation=True, max_length=32, return_tensors="pt"))).logits, 2.0) for t in teachers)
    assert loss.item() == pytest.approx(lam * hard.item() + (1 - lam) * soft.item(), rel=1e-5, abs=1e-7)


def test_fixed_weighting_uses_alpha_or_explicit_weights(tmp_path, teacher, tiny_tokenizer):
    data = pair_dataset(8)
    student = student_of(teacher)
    pairs = tiny_tokenizer(list(data["sentence1"]), list(data["sentence2"]), padding=True, truncation=True, max_length=32,
                           return_tensors="pt")
    with torch.no_grad():  # by hand, not from the trainer's components: cross-entropy and KL (T = 1) of both models' logits
        z_s, z_t = student(**pairs).logits, teacher(**pairs).logits
    hard = F.cross_entropy(z_s, torch.tensor(data["label"])).item()
    soft = (F.softmax(z_t, -1) * (F.log_softmax(z_t, -1) - F.log_softmax(z_s, -1))).sum(-1).mean().item()
    for overrides, (w_hard, w_soft) in [({"alpha": 0.3}, (0.7, 0.3)), ({"hard_weight": 2.0, "soft_weight": 0.25}, (2.0, 0.25))]:
        trainer = DistillationTrainer(model=student, args=make_args(tmp_path, **overrides), teachers=teacher, train_dataset=data)
        loss = trainer.compute_loss(student, trainer.data_collator([data[i] for i in range(8)]))
        assert loss.item() == pytest.approx(w_hard * hard + w_soft * soft, rel=1e-5)


def test_offline_and_online_teachers_give_the_same_loss(tmp_path, teacher):
    data = pair_dataset(8)
    student = student_of(teacher)
    online = DistillationTrainer(model=student, args=make_args(tmp_path), teachers=teacher, train_dataset=data)
    offline_data = add_teacher_logits(data, teacher, ["sentence1", "sentence2"], max_length=32)
    offline = DistillationTrainer(model=student, args=make_args(tmp_path), train_dataset=offline_data)
    assert offline.run_teachers_online is False and offline.offline_columns == ["teacher_logits_0"]
    rows = list(range(8))
    loss_online = online.compute_loss(student, online.data_collator([data[i] for i in rows]))
    loss_offline = offline.compute_loss(student, offline.data_collator([offline_data[i] for i in rows]))
    assert loss_offline.item() == pytest.approx(loss_online.item(), rel=1e-5)


def test_online_teacher_outputs_carry_no_graph_and_the_teacher_gets_no_gradient(tmp_path, teacher):
    """Teachers run under no_grad: their outputs (queries/keys included) are plain tensors without grad_fn,
    usable by the losses without copies, and a training step leaves every teacher parameter without .grad."""
    data = pair_dataset(8)
    student = student_of(teacher)
    trainer = DistillationTrainer(
        model=student, args=make_args(tmp_path, attention_weight=1.0, hidden_weight=1.0), teachers=teacher, train_dataset=data
    )
    inputs = trainer.data_collator([data[i] for i in range(8)])
    (output,) = trainer._teacher_outputs(inputs)
    for tensor in [output.logits, *output.hidden_states, *output.query_states, *output.key_states]:
        assert not tensor.requires_grad and tensor.grad_fn is None and not tensor.is_inference()
    trainer.compute_loss(student, inputs).backward()
    assert all(p.grad is None for p in teacher.parameters())
    assert any(p.grad is not None for p in student.parameters())


def id_shuffled(tokenizer):
    """The same WordPiece vocabulary under another id for every token: a second, incompatible tokenizer."""
    from transformers import BertTokenizerFast

    vocab = dict(tokenizer.get_vocab())
    return BertTokenizerFast(vocab={token: (index * 7) % len(vocab) for token, index in vocab.items()}, do_lower_case=True)


def test_siamese_student_with_teachers_of_another_tokenizer(tmp_path, tiny_tokenizer, teacher):
    """Logit distillation mixes tokenizers: each teacher reads its own joint view."""
    other = id_shuffled(tiny_tokenizer)
    teacher.tokenizer = other
    student = make_siamese(tiny_tokenizer, num_labels=2)
    student.train()
    data = pair_dataset(8)
    trainer = DistillationTrainer(model=student, args=make_args(tmp_path), teachers=teacher, train_dataset=data)
    batch = trainer.data_collator([data[i] for i in range(8)])
    assert {"input_ids_a", "input_ids_b", "teacher_0_input_ids"} <= set(batch)
    expected = other(list(data["sentence1"]), list(data["sentence2"]), padding=True, truncation=True, max_length=32, return_tensors="pt")
    assert torch.equal(batch["teacher_0_input_ids"], expected["input_ids"])
    assert torch.isfinite(trainer.compute_loss(student, batch))


def test_logits_of_two_teachers_with_their_own_tokenizers_line_up_with_their_rows(tmp_path, tiny_tokenizer):
    """Precomputed columns from teachers of different tokenizers: row i of `teacher_logits_k` is teacher k
    on row i alone (batched labelling pads rows of other lengths), and a shuffled batch keeps each row's logits."""
    tokenizers = [tiny_tokenizer, id_shuffled(tiny_tokenizer)]
    teachers = [make_cross_encoder(tok, num_layers=2, seed=s, num_labels=3).eval() for s, tok in zip((1, 2), tokenizers)]
    data = pair_dataset(11)
    for teacher in teachers:
        data = add_teacher_logits(data, teacher, ["sentence1", "sentence2"], batch_size=4, max_length=32)
    columns = ["teacher_logits_0", "teacher_logits_1"]
    assert set(columns) <= set(data.column_names)
    for i, row in enumerate(data):
        for k, (teacher, tok) in enumerate(zip(teachers, tokenizers)):
            alone = tok(row["sentence1"], row["sentence2"], truncation=True, max_length=32, return_tensors="pt")
            with torch.no_grad():
                expected = teacher(**alone).logits[0]
            assert torch.allclose(torch.tensor(row[columns[k]]), expected, atol=1e-5), (i, k)
    first = torch.tensor(data[columns[0]])
    assert not torch.allclose(first[0], first[1]) and not torch.allclose(first, torch.tensor(data[columns[1]]))

    student = make_siamese(tiny_tokenizer, num_labels=3)
    trainer = DistillationTrainer(model=student, args=make_args(tmp_path), train_dataset=data)
    order = [7, 2, 10, 0, 5]
    batch = trainer.data_collator([data[i] for i in order])
    for column in columns:
        assert torch.allclose(batch[column], torch.tensor([data[i][column] for i in order]))


# ---------------------------------------------------------------------------- logging
def test_every_term_and_lambda_is_logged_and_loss_is_their_weighted_mean(tmp_path, teacher):
    data = pair_dataset(32)
    student = student_of(teacher)
    args = make_args(tmp_path, max_steps=4, logging_steps=2, gradient_accumulation_steps=2, per_device_train_batch_size=4, alpha=0.4)
    trainer = DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=data)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "hard" in entry]
    assert len(logs) == 2
    for entry in logs:
        assert {"loss", "hard", "soft"} <= set(entry)
        # Trainer's loss and our terms are both means over the same micro-batches.
        assert entry["loss"] == pytest.approx(0.6 * entry["hard"] + 0.4 * entry["soft"], rel=1e-3)


def test_lambda_rises_linearly_and_is_logged(tmp_path, teacher):
    data = pair_dataset(32)
    trainer = DistillationTrainer(
        model=student_of(teacher), args=make_args(tmp_path, max_steps=4, annealing="linear"), teachers=teacher, train_dataset=data
    )
    trainer.train()
    lambdas = [entry["lambda"] for entry in trainer.state.log_history if "lambda" in entry]
    assert lambdas == pytest.approx([0.0, 0.25, 0.5, 0.75])
    assert TeacherAnnealingCallback.lambda_at(10, 10) == 1.0 and TeacherAnnealingCallback.lambda_at(3, 12) == 0.25


def test_plain_fine_tuning_without_teachers_is_the_task_loss(tmp_path, tiny_tokenizer):
    student = make_cross_encoder(tiny_tokenizer, num_layers=1)
    data = pair_dataset(8)
    trainer = DistillationTrainer(model=student, args=make_args(tmp_path), train_dataset=data)
    batch = trainer.data_collator([data[i] for i in range(8)])
    assert trainer.compute_loss(student, batch).item() == pytest.approx(student(**batch).loss.item(), rel=1e-6)


# ---------------------------------------------------------------------------- resume
def _train(tmp_path, teacher, data, resume=None, max_steps=8):
    student = student_of(teacher)
    student.config.classifier_dropout = 0.0
    args = make_args(
        tmp_path, max_steps=max_steps, save_strategy="steps", save_steps=4, annealing="linear", per_device_train_batch_size=4
    )
    trainer = DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=data)
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def test_resume_from_checkpoint_ends_with_the_same_weights(tmp_path, tiny_tokenizer):
    teacher = make_cross_encoder(tiny_tokenizer, num_layers=3, seed=1)
    teacher.backbone.config.hidden_dropout_prob = 0.1  # dropout in the student makes RNG restoring matter
    data = pair_dataset(40)
    full = _train(tmp_path / "full", teacher, data)
    partial_dir = tmp_path / "partial"
    _train(partial_dir, teacher, data, max_steps=8).state  # writes checkpoint-4 and checkpoint-8
    resumed = _train(partial_dir, teacher, data, resume=str(partial_dir / "out" / "checkpoint-4"))
    for (name, a), (_, b) in zip(full.model.state_dict().items(), resumed.model.state_dict().items()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0, msg=f"{name} differs after resume")
    annealing = [cb for cb in resumed.callback_handler.callbacks if isinstance(cb, TeacherAnnealingCallback)]
    assert len(annealing) == 1 and annealing[0].current_lambda == pytest.approx(7 / 8)


# ---------------------------------------------------------------------------- bad input
def test_hard_loss_without_labels_is_refused(tmp_path, teacher):
    data = pair_dataset(8).remove_columns("label")
    with pytest.raises(ValueError, match="label_column='label' is not in the training set"):
        DistillationTrainer(model=student_of(teacher), args=make_args(tmp_path), teachers=teacher, train_dataset=data)
    # Pure soft distillation needs no labels.
    DistillationTrainer(model=student_of(teacher), args=make_args(tmp_path, alpha=1.0), teachers=teacher, train_dataset=data)


def test_teacher_with_other_labels_is_refused(tmp_path, tiny_tokenizer, teacher):
    three_way = make_cross_encoder(tiny_tokenizer, num_layers=1, num_labels=3)
    with pytest.raises(ValueError, match=r"teachers\[0\].num_labels=2 differs from the student's num_labels=3"):
        DistillationTrainer(model=three_way, args=make_args(tmp_path), teachers=teacher, train_dataset=pair_dataset(8))
    renamed = student_of(teacher)
    renamed.config.id2label, renamed.config.label2id = {0: "no", 1: "yes"}, {"no": 0, "yes": 1}
    teacher.config.id2label, teacher.config.label2id = {0: "yes", 1: "no"}, {"yes": 0, "no": 1}
    with pytest.raises(ValueError, match="label2id"):
        DistillationTrainer(model=renamed, args=make_args(tmp_path), teachers=teacher, train_dataset=pair_dataset(8))


def test_missing_text_columns_and_empty_data_are_refused(tmp_path, teacher):
    data = pair_dataset(8).rename_column("sentence2", "other")
    with pytest.raises(ValueError, match=r"text_columns=\['sentence1', 'sentence2'\] not found .* missing \['sentence2'\]"):
        DistillationTrainer(model=student_of(teacher), args=make_args(tmp_path, text_columns=["sentence1", "sentence2"]), train_dataset=data)
    with pytest.raises(ValueError, match="no known pair of text columns"):
        DistillationTrainer(model=student_of(teacher), args=make_args(tmp_path), train_dataset=data)
    with pytest.raises(ValueError, match="train_dataset is empty"):
        DistillationTrainer(model=student_of(teacher), args=make_args(tmp_path), train_dataset=pair_dataset(8).select([]))


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("temperature", 0.0, r"temperature=0.0 is out of range; it must be > 0"),
        ("alpha", 1.5, r"alpha=1.5 is out of range; it must be >= 0.0 and <= 1.0"),
        ("annealing", "cosine", r"annealing='cosine' is not valid; choose one of 'none', 'linear'"),
        ("teacher_reduction", "max", r"teacher_reduction='max' is not valid"),
        ("hidden_weight", -1.0, r"hidden_weight=-1.0 is out of range"),
        ("text_columns", ["only_one"], r"text_columns=\['only_one'\] is not valid"),
    ],
)
def test_arguments_are_validated(tmp_path, field, value, message):
    with pytest.raises(ValueError, match=message):
        make_args(tmp_path, **{field: value})


def test_string_labels_map_through_label2id_and_unknown_names_fail(tmp_path, tiny_tokenizer):
    student = make_cross_encoder(tiny_tokenizer, num_layers=1, num_labels=2, id2label={0: "no", 1: "yes"}, label2id={"no": 0, "yes": 1})
    data = pair_dataset(8).map(lambda row: {"label": ["no", "yes"][row["label"]]})
    trainer = DistillationTrainer(model=student, args=make_args(tmp_path), train_dataset=data)
    batch = trainer.data_collator([data[i] for i in range(4)])
    assert batch["labels"].tolist() == [{"no": 0, "yes": 1}[v] for v in list(data["label"])[:4]]
    with pytest.raises(ValueError, match=r"label='maybe' is not in the model's label2id; valid labels: \['no', 'yes'\]"):
        trainer.data_collator([{**data[0], "label": "maybe"}])


def test_non_finite_loss_stops_training_naming_the_term(tmp_path, teacher):
    student = student_of(teacher)
    data = pair_dataset(8)
    trainer = DistillationTrainer(model=student, args=make_args(tmp_path), teachers=teacher, train_dataset=data)
    batch = trainer.data_collator([data[i] for i in range(8)])
    with torch.no_grad():
        student.head.out_proj.bias.fill_(float("nan"))
    with pytest.raises(FloatingPointError, match=r"step 0.*\['hard', 'soft'\]"):
        trainer.compute_loss(student, batch)


def _other_teacher(tmp_path, seed: int = 3):
    """A cross-encoder teacher with its own tokenizer (another id order) and another width and head count."""
    from transformers import BertTokenizerFast

    from hf_distill import CrossEncoderConfig, CrossEncoderModel
    from tests.conftest import SPECIAL_TOKENS, TINY_VOCAB, make_bert_config, seed_everything

    vocab = tmp_path / "other_vocab.txt"
    vocab.write_text("\n".join(SPECIAL_TOKENS + [t for t in reversed(TINY_VOCAB) if t not in SPECIAL_TOKENS]) + "\n")
    seed_everything(seed)
    config = CrossEncoderConfig(
        encoder=make_bert_config(2, hidden_size=48, num_attention_heads=3).to_dict(), attn_implementation="sdpa",
        num_labels=2, classifier_dropout=0.0,
    )
    teacher = CrossEncoderModel(config).eval()
    teacher.tokenizer = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True, model_max_length=64)
    return teacher


def test_dvbert_two_teachers_with_virt_trains_layer_losses_reading_the_first_teacher_only(tmp_path, tiny_tokenizer):
    """VIRT reads teacher 0 only: a second teacher with another tokenizer, width and heads gives logits alone."""
    from tests.conftest import make_siamese

    first = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1)
    second = _other_teacher(tmp_path)
    student = make_siamese(tiny_tokenizer, num_labels=2)
    args = make_args(tmp_path, annealing="linear", virt_weight=1.0, max_steps=3)
    trainer = DistillationTrainer(model=student, args=args, teachers=[first, second], train_dataset=pair_dataset(16))
    batch = trainer._prepare_inputs(trainer.data_collator([pair_dataset(16)[i] for i in range(4)]))
    outputs = trainer._teacher_outputs(batch)
    assert outputs[0].query_states is not None and getattr(outputs[1], "query_states", None) is None
    trainer.train()
    logged = [e for e in trainer.state.log_history if "virt" in e]
    assert len(logged) == 3 and all(k in logged[0] for k in ("hard", "soft_0", "soft_1", "lambda"))


def test_precomputed_logits_ignored_by_layer_losses_say_so(tmp_path, tiny_tokenizer):
    teacher = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1)
    data = add_teacher_logits(pair_dataset(8), teacher, ["sentence1", "sentence2"], max_length=24)
    with pytest.warns(UserWarning, match=r"precomputed teacher_logits_0, but the layer losses \(HiddenStateLoss\) need the teachers online"):
        trainer = DistillationTrainer(model=make_cross_encoder(tiny_tokenizer, 2, seed=2), args=make_args(tmp_path, hidden_weight=1.0),
                                      teachers=teacher, train_dataset=data)
    assert trainer.run_teachers_online


@pytest.mark.parametrize("bad", ["unifrom", "1:2,2", "0:1", "1:x", "1:2,1:2"])
def test_layer_mapping_strings_are_checked_in_the_arguments(tmp_path, bad):
    with pytest.raises(ValueError, match=r"^layer_mapping=.* is not valid"):
        make_args(tmp_path, layer_mapping=bad)


def test_callbacks_hear_each_evaluation_once_with_the_evaluators_metrics(tmp_path, teacher):
    """on_evaluate (what EarlyStoppingCallback reads) runs once per evaluation, with the eval set's and the
    evaluators' metrics together, so an evaluator's metric (rank_mrr@10, an STS Spearman) can stop training."""
    from transformers import TrainerCallback

    heard = []

    class Listener(TrainerCallback):
        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            heard.append(sorted(metrics))

    trainer = DistillationTrainer(model=student_of(teacher), args=make_args(tmp_path, max_steps=2), teachers=teacher,
                                  train_dataset=pair_dataset(8), eval_dataset=pair_dataset(4, seed=1),
                                  evaluators=[lambda model: {"probe": 1.0}], callbacks=[Listener()])
    trainer.evaluate()
    assert len(heard) == 1 and {"eval_loss", "eval_probe"} <= set(heard[0])
    trainer.evaluate(eval_dataset={"a": pair_dataset(4, seed=2), "b": pair_dataset(4, seed=3)})
    assert len(heard) == 2 and {"eval_a_loss", "eval_b_loss", "eval_probe"} <= set(heard[1])
