"""`hf-distill quickstart` (hf_distill/cli/quickstart_command.py) on the embedded demo set with a tiny backbone:
the teacher, the KD student on augmented pairs and the no-KD student; named labels; the comparison."""

from __future__ import annotations

import json

from transformers import AutoModel, BertModel

from ..conftest import make_bert_config
from .conftest import results


def test_quickstart_compares_the_kd_student_on_augmented_pairs_with_the_no_kd_student(tiny_tokenizer, tmp_path, capsys,
                                                                                        monkeypatch):
    from hf_distill.cli import quickstart_command

    backbone = tmp_path / "backbone"  # 128 positions: the quickstart reads 128 tokens
    BertModel(make_bert_config(2, max_position_embeddings=128), add_pooling_layer=True).save_pretrained(backbone)
    tiny_tokenizer.save_pretrained(backbone)
    monkeypatch.setitem(quickstart_command.SPEED_SETTINGS, "min_seconds", 0.05)
    monkeypatch.setitem(quickstart_command.SPEED_SETTINGS, "max_pairs", 16)
    summary = quickstart_command.quickstart([
        "--model", str(backbone), "--output_dir", str(tmp_path), "--max_train_samples", "16", "--max_eval_samples", "16",
        "--teacher_epochs", "1", "--student_steps", "2", "--augment_n", "2", "--augment_p", "0.5", "--student_layers", "1",
    ])
    assert [row["model"] for row in summary["models"]] == ["teacher", "student, no KD", "student, KD + augmentation"]
    assert [row["layers"] for row in summary["models"]] == [2, 1, 1]
    assert all(0 <= row["accuracy"] <= 1 and row["pairs_per_s"] > 0 for row in summary["models"])

    kd, plain = results(tmp_path / "student"), results(tmp_path / "student_no_kd")
    assert plain["train_samples"] == 16 < kd["train_samples"] <= 16 * 3  # the gold pairs and up to 2 augmented each
    for folder in ("teacher", "student", "student_no_kd"):  # labels named, not LABEL_0 / LABEL_1
        assert AutoModel.from_pretrained(tmp_path / folder).config.id2label == {0: "different", 1: "paraphrase"}
    history = json.loads((tmp_path / "student" / "trainer_state.json").read_text())["log_history"]
    assert any("soft" in entry for entry in history)
    printed = capsys.readouterr().out
    assert "student, KD + augmentation" in printed and "points over the same student without KD" in printed
