"""PEFT inside distillation: a LoRA student learns from a LoRA-adapted teacher; the merged student reloads alone."""

from __future__ import annotations

import json
import os

import pytest
import torch
from huggingface_hub import ModelCard
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModel

from hf_distill import CrossEncoderModel
from hf_distill.trainer import DistillationTrainer, unwrap_student
from tests.conftest import make_cross_encoder
from tests.test_trainer import make_args, pair_dataset

LORA = dict(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["query", "value"])


@pytest.fixture
def lora_teacher(tiny_tokenizer):
    """A 2-layer cross-encoder with a non-trivial LoRA adapter (B != 0), as after adapter fine-tuning."""
    base = make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1)
    base.config._name_or_path = "hf-distill-tests/tiny-lora-teacher"
    teacher = get_peft_model(base, LoraConfig(**LORA))
    with torch.no_grad():
        for name, parameter in teacher.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)
        base.head.out_proj.weight.normal_(std=2.0)  # confident logits: a soft loss worth learning
    return teacher


def _lora_student(tokenizer):
    base = make_cross_encoder(tokenizer, num_layers=1, seed=2)
    # The head is new: train it fully (modules_to_save), LoRA on the attention projections.
    return get_peft_model(base, LoraConfig(**LORA, modules_to_save=["head"]))


def _logits(model, batch) -> torch.Tensor:
    with torch.no_grad():
        return model(**{k: v for k, v in batch.items() if not k.startswith("teacher_") and k != "labels"}).logits


def test_lora_student_from_lora_teacher_merges_and_reloads(tmp_path, tiny_tokenizer, lora_teacher):
    student = _lora_student(tiny_tokenizer)
    data = pair_dataset(32)
    args = make_args(
        tmp_path, max_steps=4, learning_rate=1e-2, alpha=0.7, temperature=2.0, merge_adapters_on_save=True,
        save_strategy="steps", save_steps=4,
    )
    trainer = DistillationTrainer(model=student, args=args, teachers=lora_teacher, train_dataset=data)
    assert unwrap_student(trainer.model) is student.get_base_model()

    # The teacher runs with its adapter active (frozen, in eval mode, not part of the optimizer).
    assert not any(p.requires_grad for p in lora_teacher.parameters()) and not lora_teacher.training
    batch = trainer.data_collator([data[i] for i in range(8)])
    view = {k[len("teacher_0_"):]: v for k, v in batch.items() if k.startswith("teacher_0_")}
    (teacher_out,) = trainer._teacher_outputs(batch)
    with torch.no_grad():
        adapted = lora_teacher(**view).logits
        with lora_teacher.disable_adapter():  # (PEFT marks the adapter trainable again on exit: the test's doing)
            plain = lora_teacher(**view).logits
    torch.testing.assert_close(teacher_out.logits, adapted)
    assert not torch.allclose(adapted, plain, atol=1e-3), "the teacher's adapter changes nothing: vacuous test"
    teacher_before = {n: p.detach().clone() for n, p in lora_teacher.named_parameters()}
    frozen_before = {n: p.detach().clone() for n, p in student.named_parameters() if not p.requires_grad}
    trainable_before = {n: p.detach().clone() for n, p in student.named_parameters() if p.requires_grad}
    assert trainable_before and all("lora_" in n or "modules_to_save" in n for n in trainable_before)

    result = trainer.train()
    assert torch.isfinite(torch.tensor(result.training_loss))
    logs = [entry for entry in trainer.state.log_history if "soft" in entry]
    assert logs and all(entry["soft"] > 0 for entry in logs)
    # Only the adapters (and the head copy) moved; the base student and the teacher did not.
    assert any(not torch.equal(p, trainable_before[n]) for n, p in student.named_parameters() if n in trainable_before)
    for name, parameter in student.named_parameters():
        if name in frozen_before:
            assert torch.equal(parameter, frozen_before[name]), name
    for name, parameter in lora_teacher.named_parameters():
        assert torch.equal(parameter, teacher_before[name]), name

    # Checkpoints keep the adapter (resume works) and get no distillation card (PEFT may write its own README).
    checkpoint = tmp_path / "out" / "checkpoint-4"
    assert "adapter_config.json" in os.listdir(checkpoint) and "model.safetensors" not in os.listdir(checkpoint)
    assert not (checkpoint / "README.md").exists() or "knowledge-distillation" not in (checkpoint / "README.md").read_text()

    # The final save merges a copy: a complete, adapter-free student folder.
    trainer.save_model()
    out = tmp_path / "out"
    files = set(os.listdir(out))
    assert {"model.safetensors", "config.json", "modeling_cross_encoder.py", "tokenizer_config.json", "README.md"} <= files
    assert not files & {"adapter_config.json", "adapter_model.safetensors"}
    assert "AutoModel" in json.loads((out / "config.json").read_text())["auto_map"]
    assert isinstance(trainer.model, PeftModel), "the trainer's student must stay a PEFT model after the save"

    student.eval()
    reloaded = AutoModel.from_pretrained(out).eval()
    assert type(reloaded) is CrossEncoderModel and reloaded.tokenizer is not None
    assert not any("lora_" in n or "base_layer" in n or "modules_to_save" in n for n in reloaded.state_dict())
    torch.testing.assert_close(_logits(reloaded, batch), _logits(student, batch), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(_logits(reloaded, batch), _logits(make_cross_encoder(tiny_tokenizer, num_layers=1, seed=2), batch), atol=1e-4)

    card = ModelCard.load(out / "README.md")
    assert card.data.library_name == "transformers"
    assert {"knowledge-distillation", "logit-distillation"} <= set(card.data.tags)
    assert card.data.base_model == "hf-distill-tests/tiny-lora-teacher"
    assert "adapters are merged into these weights" in card.text and "its adapter is active" in card.text


def test_lora_student_saved_as_adapter_without_merging(tmp_path, tiny_tokenizer, lora_teacher):
    student = _lora_student(tiny_tokenizer)
    data = pair_dataset(16)
    trainer = DistillationTrainer(
        model=student, args=make_args(tmp_path, max_steps=2, learning_rate=1e-2), teachers=lora_teacher, train_dataset=data
    )
    trainer.train()
    trainer.save_model()
    out = tmp_path / "out"
    assert {"adapter_config.json", "adapter_model.safetensors", "README.md"} <= set(os.listdir(out))
    assert ModelCard.load(out / "README.md").data.library_name == "peft"
    batch = trainer.data_collator([data[i] for i in range(8)])
    base = make_cross_encoder(tiny_tokenizer, num_layers=1, seed=2)
    again = PeftModel.from_pretrained(base, out).eval()
    student.eval()
    torch.testing.assert_close(_logits(again, batch), _logits(student, batch), atol=1e-5, rtol=1e-5)


def test_merge_adapters_on_save_is_validated(tmp_path):
    with pytest.raises(ValueError, match="merge_adapters_on_save='yes' is not valid"):
        make_args(tmp_path, merge_adapters_on_save="yes")
