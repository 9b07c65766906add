"""End to end on tiny models: every method's loss terms are logged and fall; its state survives resume."""

from __future__ import annotations

import os
import statistics

import pytest
import torch
from safetensors.torch import load_file

from hf_distill import CrossEncoderModel
from hf_distill.callbacks import CostAttentionCallback
from hf_distill.losses import EMDLayerLoss
from hf_distill.methods import bert_emd, dvbert, simplified_tinybert, virt
from hf_distill.trainer import DISTILLATION_STATE_NAME
from tests.conftest import QUIET_CPU_TRAINING, make_cross_encoder, make_siamese
from tests.test_trainer import pair_dataset

TRAINING = dict(
    QUIET_CPU_TRAINING,
    learning_rate=2e-3,
    max_length=24,
    warmup_steps=0,
    lr_scheduler_type="constant",
)


def falls(history: list[dict], term: str, window: int = 4) -> bool:
    values = [entry[term] for entry in history if term in entry]
    assert len(values) >= 2 * window, f"{term} logged {len(values)} times"
    return statistics.fmean(values[-window:]) < statistics.fmean(values[:window])


@pytest.fixture
def teacher(tiny_tokenizer):
    """A random 4-layer teacher made confident (a random head is near uniform, which no hard label matches)."""
    model = make_cross_encoder(tiny_tokenizer, num_layers=4, seed=1, attn_implementation="sdpa")
    with torch.no_grad():
        model.head.out_proj.weight.mul_(30.0)
    return model


def teacher_labelled(teacher, n: int = 16):
    """Pairs labelled by the teacher itself, so hard and soft targets agree and both can fall."""
    data = pair_dataset(n)
    predicted = teacher.predict(list(zip(data["sentence1"], data["sentence2"]))).argmax(-1).tolist()
    return data.remove_columns("label").add_column("label", predicted)


def perturbed(model, scale: float = 0.05, seed: int = 0):
    """Move a student copied from its teacher away from it, so its layer losses start high."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * scale)
    return model


def test_simplified_tinybert_terms_fall(tmp_path, teacher):
    method = simplified_tinybert(teacher, num_layers=2, temperature=2.0)
    assert method.student.config.encoder.num_hidden_layers == 2
    perturbed(method.student)
    args = method.arguments(output_dir=str(tmp_path), max_steps=40, **TRAINING)
    trainer = method.trainer(args, train_dataset=teacher_labelled(teacher))
    trainer.train()
    for term in ("hard", "soft", "hidden", "attention", "embedding"):
        assert falls(trainer.state.log_history, term), term


def test_bert_emd_terms_fall_weights_move_and_pictures_are_drawn(tmp_path, teacher):
    method = bert_emd(teacher, num_layers=2, beta=1.0, alpha=0.5)
    perturbed(method.student)
    args = method.arguments(output_dir=str(tmp_path), max_steps=40, **TRAINING)
    trainer = method.trainer(args, train_dataset=teacher_labelled(teacher))
    trainer.train()
    for term in ("emd_hidden", "emd_attention", "embedding", "soft", "hard"):
        assert falls(trainer.state.log_history, term), term
    emd = next(c for c in trainer.loss_components if isinstance(c, EMDLayerLoss))
    assert not torch.allclose(emd.hidden_teacher_weights, torch.full((4,), 0.25, dtype=torch.float64))
    assert "w_hidden_teacher_4" in trainer.state.log_history[0]
    assert os.path.exists(tmp_path / "emd_flow.png") and os.path.exists(tmp_path / "emd_layer_weights.png")


def test_dvbert_two_teachers_offline_with_annealing(tmp_path, tiny_tokenizer):
    teachers = [make_cross_encoder(tiny_tokenizer, num_layers=2, seed=s, num_labels=2) for s in (1, 2)]
    for teacher in teachers:
        with torch.no_grad():  # confident teachers: the student starts far from them
            teacher.head.dense.weight.mul_(10.0)
            teacher.head.out_proj.weight.mul_(30.0)
    student = make_siamese(tiny_tokenizer, num_labels=2)
    student.train()
    method = dvbert(student, teachers, num_labels=2)
    data = method.label(teacher_labelled(teachers[0]), ["sentence1", "sentence2"], max_length=24)
    assert {"teacher_logits_0", "teacher_logits_1"} <= set(data.column_names)
    args = method.arguments(output_dir=str(tmp_path), max_steps=40, **TRAINING)
    trainer = method.trainer(args, train_dataset=data)
    assert trainer.teachers == [] and trainer.offline_columns == ["teacher_logits_0", "teacher_logits_1"]
    trainer.train()
    history = trainer.state.log_history
    # Annealing hands the loss from the teachers to the labels: soft terms fall while they lead
    # (lambda < 0.5), the hard term falls over the run.
    for term in ("soft_0", "soft_1"):
        assert falls([e for e in history if e.get("lambda", 1.0) < 0.5], term), term
    assert falls(history, "hard")
    lambdas = [e["lambda"] for e in trainer.state.log_history if "lambda" in e]
    assert lambdas[0] == 0.0 and lambdas[-1] == pytest.approx(39 / 40)


def test_dvbert_loss_weighting_alternative_has_fixed_weights(tmp_path, tiny_tokenizer):
    teacher = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1, num_labels=1)
    method = dvbert(make_siamese(tiny_tokenizer, head="cosine", num_labels=1), [teacher], task="regression", annealing=False, soft_weight=0.7, hard_weight=0.3)
    args = method.arguments(output_dir=str(tmp_path), max_steps=2, **TRAINING)
    assert (args.annealing, args.hard_weight, args.soft_weight) == ("none", 0.3, 0.7)


def test_projections_and_emd_weights_survive_resume_and_stay_out_of_the_student(tmp_path, teacher):
    def run(max_steps, resume=None):
        method = bert_emd(teacher, num_layers=2, beta=1.0)
        extra = dict(TRAINING, save_strategy="steps", save_steps=3)
        args = method.arguments(output_dir=str(tmp_path / "run"), max_steps=max_steps, embedding_weight=1.0, **extra)
        trainer = method.trainer(args, train_dataset=pair_dataset(24))
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(6)
    state = load_file(str(tmp_path / "run" / "checkpoint-3" / DISTILLATION_STATE_NAME))
    assert any("projection" in key for key in state) and any(key.endswith("teacher_weights") for key in state)
    resumed = run(6, resume=str(tmp_path / "run" / "checkpoint-3"))
    for (name, a), (_, b) in zip(full.loss_components.state_dict().items(), resumed.loss_components.state_dict().items()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0, msg=name)
    callback = [cb for cb in resumed.callback_handler.callbacks if isinstance(cb, CostAttentionCallback)][0]
    assert callback.smooth is True  # the preset's official-code add_softmax, restored with the callback's args
    assert [entry["step"] for entry in callback.history] == [1, 2, 3, 4, 5, 6]  # restored from trainer_state.json, then extended
    resumed.save_model(str(tmp_path / "student"))
    saved = load_file(str(tmp_path / "student" / "model.safetensors"))
    assert not any("projection" in key or "weights" in key.split(".")[-1] for key in saved)
    reloaded = CrossEncoderModel.from_pretrained(str(tmp_path / "student"))
    assert reloaded.config.encoder.num_hidden_layers == 2


def test_layer_losses_refuse_a_teacher_with_another_tokenizer(tmp_path, tiny_tokenizer, teacher):
    from transformers import BertTokenizerFast

    from hf_distill.trainer import DistillationTrainer
    from hf_distill.training_args import DistillationArguments

    vocab = dict(tiny_tokenizer.get_vocab())
    other = BertTokenizerFast(vocab={token: (i * 7) % len(vocab) for token, i in vocab.items()})
    student = CrossEncoderModel.from_teacher(teacher, 2)
    teacher.tokenizer = other
    args = DistillationArguments(output_dir=str(tmp_path), hidden_weight=1.0, report_to="none", use_cpu=True)
    with pytest.raises(ValueError, match="uses another tokenizer .* need the same tokenizer"):
        DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=pair_dataset(8))


def test_attention_losses_refuse_sdpa(tmp_path, tiny_tokenizer, teacher):
    from hf_distill.trainer import DistillationTrainer
    from hf_distill.training_args import DistillationArguments

    student = make_cross_encoder(tiny_tokenizer, num_layers=2, attn_implementation="sdpa")
    args = DistillationArguments(output_dir=str(tmp_path), attention_weight=1.0, report_to="none", use_cpu=True)
    with pytest.raises(ValueError, match=r"student uses attn_implementation='sdpa'; attention losses need 'eager'"):
        DistillationTrainer(model=student, args=args, teachers=teacher, train_dataset=pair_dataset(8))


def test_virt_preset_terms_fall(tmp_path, tiny_tokenizer):
    teacher = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1)
    with torch.no_grad():  # peaky teacher attention: a random one is near uniform, with nothing to learn
        for layer in teacher.backbone.encoder.layer:
            layer.attention.self.query.weight.mul_(5.0)
            layer.attention.self.key.weight.mul_(5.0)
    student = make_siamese(tiny_tokenizer, num_labels=2, interaction="virt")
    student.train()
    method = virt(teacher, student, alpha=10.0)  # the virt term is tiny next to random labels' hard loss
    args = method.arguments(output_dir=str(tmp_path), max_steps=30, **{**TRAINING, "learning_rate": 1e-3})
    assert (args.virt_weight, args.alpha) == (10.0, 0.0)
    trainer = method.trainer(args, train_dataset=pair_dataset(16))
    trainer.train()
    assert falls(trainer.state.log_history, "virt")


def _trainer(method, tmp_path, **overrides):
    args = method.arguments(output_dir=str(tmp_path), max_steps=1, **{**TRAINING, **overrides})
    return method.trainer(args, train_dataset=pair_dataset(8))


def _callbacks(trainer, kind):
    return [c for c in trainer.callback_handler.callbacks if isinstance(c, kind)]


def test_overriding_bert_emd_arguments_changes_the_built_callback(tmp_path, tiny_tokenizer):
    method = bert_emd(make_cross_encoder(tiny_tokenizer, num_layers=4, seed=1), num_layers=2)
    default = _callbacks(_trainer(method, tmp_path), CostAttentionCallback)
    assert [(c.mode, c.temperature, c.smooth) for c in default] == [("softmax", 1.0, True)]
    changed = _callbacks(_trainer(method, tmp_path, emd_update="normalize", emd_temperature=5.0), CostAttentionCallback)
    assert [(c.mode, c.temperature) for c in changed] == [("normalize", 5.0)]
    assert not any(isinstance(c, EMDLayerLoss) for c in _trainer(method, tmp_path, emd_weight=0.0).loss_components)


def test_two_trainers_from_one_preset_share_no_component(tmp_path, tiny_tokenizer):
    method = bert_emd(make_cross_encoder(tiny_tokenizer, num_layers=4, seed=1), num_layers=2)
    first, second = _trainer(method, tmp_path), _trainer(method, tmp_path)
    emd = [next(c for c in t.loss_components if isinstance(c, EMDLayerLoss)) for t in (first, second)]
    assert emd[0] is not emd[1]
    with torch.no_grad():
        emd[0].hidden_student_weights.fill_(0.9)
    assert emd[1].hidden_student_weights.tolist() == [0.5, 0.5]


def test_overriding_virt_weight_and_temperature_changes_the_loss(tmp_path, tiny_tokenizer):
    from hf_distill.losses import VirtualInteractionLoss

    teacher = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1)
    method = virt(teacher, make_siamese(tiny_tokenizer, num_labels=2))
    assert _trainer(method, tmp_path, virt_weight=0.25).term_weights_now()["virt"] == 0.25
    assert not any(isinstance(c, VirtualInteractionLoss) for c in _trainer(method, tmp_path, virt_weight=0.0).loss_components)
    tinybert = simplified_tinybert(make_cross_encoder(tiny_tokenizer, num_layers=4, seed=1), num_layers=2, temperature=5.0)
    assert _trainer(tinybert, tmp_path).loss_components[0].temperature == 5.0
    assert _trainer(tinybert, tmp_path, temperature=2.0).loss_components[0].temperature == 2.0


def test_overriding_dvbert_annealing_removes_the_annealing_callback(tmp_path, tiny_tokenizer):
    from hf_distill.callbacks import TeacherAnnealingCallback

    teachers = [make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1), make_cross_encoder(tiny_tokenizer, num_layers=2, seed=2)]
    method = dvbert(make_siamese(tiny_tokenizer, num_labels=2), teachers, num_labels=2)
    assert len(_callbacks(_trainer(method, tmp_path), TeacherAnnealingCallback)) == 1
    plain = _trainer(method, tmp_path, annealing="none")
    assert _callbacks(plain, TeacherAnnealingCallback) == []
    assert plain.term_weights_now() == {"hard": 0.5, "soft_0": 0.5, "soft_1": 0.5}


def test_a_preset_callback_given_by_hand_is_refused(tmp_path, tiny_tokenizer):
    method = bert_emd(make_cross_encoder(tiny_tokenizer, num_layers=4, seed=1), num_layers=2)
    args = method.arguments(output_dir=str(tmp_path), max_steps=1, **TRAINING)
    with pytest.raises(ValueError, match=r"callbacks=\[CostAttentionCallback\(...\)\] is not valid: the trainer builds it"):
        method.trainer(args, train_dataset=pair_dataset(8), callbacks=[CostAttentionCallback()])
