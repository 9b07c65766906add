"""LoRA from recipes through `hf-distill train`: `lora_r` trains adapters only and saves a merged student;
a PEFT adapter folder loads as a teacher onto its base model; bad values are one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModel

from hf_distill import CrossEncoderModel, SiameseModel
from hf_distill.cli import main

from ..conftest import seed_everything
from .conftest import FAST, error_line, results

RUN = [*FAST, "--max_steps", "2", "--save_strategy", "no", "--logging_steps", "1"]


@pytest.fixture(scope="module")
def lora_teacher(cli_assets, tmp_path_factory) -> str:
    """A PEFT adapter folder on cli_assets' teacher, with non-zero B (as after adapter fine-tuning)."""
    folder = tmp_path_factory.mktemp("lora_teacher") / "adapter"
    seed_everything(3)
    teacher = get_peft_model(AutoModel.from_pretrained(cli_assets["teacher"]),
                             LoraConfig(r=4, lora_alpha=8, target_modules=["query", "value"]))
    with torch.no_grad():
        for name, parameter in teacher.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)
    teacher.save_pretrained(folder)
    assert json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"] == cli_assets["teacher"]
    return str(folder)


def _state(folder) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in AutoModel.from_pretrained(folder).state_dict().items()}


def test_lora_student_trains_adapters_only_and_saves_merged(cli_assets, tmp_path):
    out = tmp_path / "lora"
    assert main(["train", "--teacher_name_or_path", cli_assets["teacher"], "--num_student_layers", "2",
                 "--data_dir", cli_assets["data"], "--lora_r", "4", "--lora_dropout", "0", "--learning_rate", "1e-2",
                 "--output_dir", str(out), *RUN]) == 0
    assert not {"adapter_config.json", "adapter_model.safetensors"} & set(os.listdir(out))
    student = AutoModel.from_pretrained(out)
    assert type(student) is CrossEncoderModel and student.tokenizer is not None
    saved = student.state_dict()
    assert not any("lora_" in k or "base_layer" in k or "modules_to_save" in k for k in saved)
    teacher = _state(cli_assets["teacher"])  # 2 layers kept of 2: the student starts as the teacher
    assert saved.keys() == teacher.keys()
    moved = {k for k in saved if not torch.equal(saved[k], teacher[k])}
    # merged adapters on query/value, and the head trained fully; nothing else moved
    assert moved and all(".query." in k or ".value." in k or k.startswith("head.") for k in moved), sorted(moved)
    assert any(k.endswith("attention.self.query.weight") for k in moved) and any(k.startswith("head.") for k in moved)
    assert not any(".query.bias" in k or ".value.bias" in k for k in moved)  # LoRA changes weights, not biases
    card = (out / "README.md").read_text()
    assert "adapters are merged into these weights" in card and "train_runtime" in results(out)


def test_lora_siamese_student_with_own_targets_can_keep_the_adapter(cli_assets, tmp_path):
    out = tmp_path / "adapter"
    assert main(["train", "--model_name_or_path", cli_assets["backbone"], "--student_type", "siamese",
                 "--data_dir", cli_assets["data"], "--lora_r", "2", "--lora_target_modules", "query,key",
                 "--merge_adapters_on_save", "false", "--output_dir", str(out), *RUN]) == 0
    config = json.loads((out / "adapter_config.json").read_text())
    assert sorted(config["target_modules"]) == ["key", "query"] and config["modules_to_save"] == ["classifier"]
    assert config["r"] == 2 and config["lora_alpha"] == 4  # default alpha: 2 x r


def test_lora_teacher_folder_loads_onto_its_base(cli_assets, lora_teacher, tmp_path, caplog):
    """A student cut from the adapter teacher starts from the adapted weights (learning rate 0: unchanged)."""
    out = tmp_path / "cut"
    assert main(["train", "--teacher_name_or_path", lora_teacher, "--num_student_layers", "2", "--data_dir",
                 cli_assets["data"], "--learning_rate", "0", "--output_dir", str(out), *RUN]) == 0
    saved = AutoModel.from_pretrained(out).state_dict()
    base = _state(cli_assets["teacher"])
    merged = get_peft_model_merged(cli_assets["teacher"], lora_teacher)
    for key, value in saved.items():
        torch.testing.assert_close(value, merged[key], msg=key)
    assert not torch.equal(saved["backbone.encoder.layer.0.attention.self.query.weight"],
                           base["backbone.encoder.layer.0.attention.self.query.weight"])
    card = (out / "README.md").read_text()
    named = f"adapter (a PEFT adapter on {os.path.basename(cli_assets['teacher'])})"
    assert "teacher 0 is a PEFT model" in card and named in card

    # labelled once by the adapter teacher (precomputed logits) for a Siamese LoRA student
    out = tmp_path / "siamese"
    assert main(["train", "--teacher_name_or_path", lora_teacher, "--model_name_or_path", cli_assets["backbone"],
                 "--student_type", "siamese", "--data_dir", cli_assets["data"], "--precompute_teacher_logits", "true",
                 "--lora_r", "2", "--output_dir", str(out), *RUN]) == 0
    assert type(AutoModel.from_pretrained(out)) is SiameseModel
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    assert any("soft" in entry for entry in history)
    assert named in (out / "README.md").read_text()  # recorded by the labelling, the teacher gone by then


def get_peft_model_merged(base: str, adapter: str) -> dict[str, torch.Tensor]:
    from peft import PeftModel

    merged = PeftModel.from_pretrained(AutoModel.from_pretrained(base), adapter).merge_and_unload()
    return merged.state_dict()


@pytest.mark.parametrize("extra, message", [
    (["--lora_r", "-1"], "lora_r=-1 is not valid; give the LoRA rank"),
    (["--lora_r", "four"], "invalid int value: 'four'"),
    (["--lora_r", "4", "--lora_alpha", "0"], "lora_alpha=0.0 is not valid; give a number > 0"),
    (["--lora_r", "4", "--lora_dropout", "1"], "lora_dropout=1.0 is not valid; give a probability in [0, 1)"),
    (["--lora_r", "4", "--lora_target_modules", "qkv"], "lora_target_modules=['qkv'] is not valid: 'qkv' matches no module"),
])
def test_bad_lora_values_are_one_line(cli_assets, tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--teacher_name_or_path", cli_assets["teacher"], "--num_student_layers", "1", "--data_dir",
              cli_assets["data"], "--output_dir", str(tmp_path / "o"), *RUN, *extra])
    assert exit_info.value.code == 2
    assert message in error_line(capsys.readouterr().err)
    assert not (tmp_path / "o" / "all_results.json").exists()


def test_adapter_teacher_without_its_base_is_one_line(lora_teacher, cli_assets, tmp_path, capsys):
    folder = Path(tmp_path / "orphan")
    folder.mkdir()
    config = json.loads((Path(lora_teacher) / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps({**config, "base_model_name_or_path": str(tmp_path / "gone")}))
    with pytest.raises(SystemExit):
        main(["train", "--teacher_name_or_path", str(folder), "--num_student_layers", "1", "--data_dir",
              cli_assets["data"], "--output_dir", str(tmp_path / "o"), *RUN])
    assert "is a PEFT adapter whose base model" in error_line(capsys.readouterr().err)


def test_bad_lora_targets_are_refused_before_augmentation_and_labelling(cli_assets, tmp_path, capsys, monkeypatch):
    import hf_distill.cli.train as train_module

    def refuse(*args, **kwargs):
        raise AssertionError("the training set was augmented or labelled before lora_target_modules was checked")

    monkeypatch.setattr(train_module, "extend_training_set", refuse)
    monkeypatch.setattr(train_module, "label_training_set", refuse)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--teacher_name_or_path", cli_assets["teacher"], "--num_student_layers", "1", "--data_dir",
              cli_assets["data"], "--augment_n", "2", "--output_dir", str(tmp_path / "o"), *RUN,
              "--lora_r", "4", "--lora_target_modules", "qkv"])
    assert exit_info.value.code == 2
    assert "lora_target_modules=['qkv'] is not valid: 'qkv' matches no module" in error_line(capsys.readouterr().err)
