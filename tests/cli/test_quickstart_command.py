"""`hf-distill quickstart` (hf_distill/cli/quickstart_command.py) on the embedded demo set with a tiny backbone:
the teacher, the KD student on augmented pairs and the no-KD student; named labels; the comparison; progress
bars; one line, and no retries, when the Hub is off (HF_HUB_OFFLINE) or unreachable (hf_distill/cli/hub_access.py)."""

from __future__ import annotations

import argparse
import json
import logging
import time

from transformers import AutoModel, BertModel

from ..conftest import make_bert_config
from .conftest import results


def test_quickstart_compares_the_kd_student_on_augmented_pairs_with_the_no_kd_student(tiny_tokenizer, tmp_path, capsys,
                                                                                        monkeypatch, caplog):
    from hf_distill.cli import quickstart_command

    caplog.set_level(logging.INFO)  # conftest sets HF_HUB_OFFLINE=1: the Hub is off

    backbone = tmp_path / "backbone"  # 128 positions: the quickstart reads 128 tokens
    BertModel(make_bert_config(2, max_position_embeddings=128), add_pooling_layer=True).save_pretrained(backbone)
    tiny_tokenizer.save_pretrained(backbone)
    monkeypatch.setitem(quickstart_command.SPEED_SETTINGS, "min_seconds", 0.05)
    monkeypatch.setitem(quickstart_command.SPEED_SETTINGS, "max_pairs", 16)
    summary = quickstart_command.quickstart([
        "--model", str(backbone), "--output_dir", str(tmp_path), "--max_train_samples", "16", "--max_eval_samples", "16",
        "--teacher_epochs", "1", "--student_steps", "2", "--augment_n", "2", "--augment_p", "0.5", "--student_layers", "1",
    ])
    assert [row["model"] for row in summary["models"]] == ["teacher", "student, no KD", "student, KD + layers + augmentation"]
    assert summary["settings"]["augment_n"] == 2 and summary["settings"]["student_steps"] == 2
    defaults = quickstart_command.settings_of([])
    assert (defaults["augment_n"], defaults["layer_weight"]) == (0, 1.0)
    assert quickstart_command.kd_student_name(0) == "student, KD"  # --layer_weight 0: the logits alone
    assert [row["layers"] for row in summary["models"]] == [2, 1, 1]
    assert all(0 <= row["accuracy"] <= 1 and row["pairs_per_s"] > 0 for row in summary["models"])

    kd, plain = results(tmp_path / "student"), results(tmp_path / "student_no_kd")
    assert plain["train_samples"] == 16 < kd["train_samples"] <= 16 * 3  # the gold pairs and up to 2 augmented each
    for folder in ("teacher", "student", "student_no_kd"):  # labels named, not LABEL_0 / LABEL_1
        assert AutoModel.from_pretrained(tmp_path / folder).config.id2label == {0: "different", 1: "paraphrase"}
    history = json.loads((tmp_path / "student" / "trainer_state.json").read_text())["log_history"]
    assert any({"soft", "hidden", "attention", "embedding"} <= set(entry) for entry in history)  # logits and layers
    captured = capsys.readouterr()
    printed = captured.out
    assert "student, KD + layers + augmentation" in printed and "points over the same student without KD" in printed
    everything = "\n".join([captured.out, captured.err, caplog.text]).replace("\r", "\n")
    hub_lines = [line for line in everything.splitlines() if "hub" in line.lower()]
    assert hub_lines == ["[quickstart] the Hugging Face Hub is off (HF_HUB_OFFLINE is set) and nyu-mll/glue (mrpc) "
                         "is not in the local cache; using the embedded demo set"]
    assert "retrying" not in everything.lower()
    assert "1/1" in captured.err and "2/2" in captured.err  # the progress bars (teacher: 1 epoch of 1 step; students)


def test_the_hub_probe_answers_false_at_once_for_an_endpoint_that_refuses(monkeypatch):
    from hf_distill.cli.hub_access import hub_problem, hub_reachable

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    started = time.perf_counter()
    assert hub_reachable(timeout=3.0) is False
    assert time.perf_counter() - started < 5
    assert hub_problem(timeout=3.0).startswith("http://127.0.0.1:9: ")


def test_an_unreachable_hub_turns_the_process_offline_with_one_line(monkeypatch, tmp_path, capsys):
    import datasets
    from huggingface_hub import constants

    from hf_distill.cli import quickstart_command

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")  # restored (removed) after the test
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    args = argparse.Namespace(data_dir=None, output_dir=str(tmp_path), dataset_name="nyu-mll/glue",
                              dataset_config_name="mrpc", cache_dir=str(tmp_path / "cache"))
    started = time.perf_counter()
    hub = quickstart_command._hub_state(args, "sentence-transformers/all-MiniLM-L6-v2")
    data, description = quickstart_command._quickstart_data(args, "sentence-transformers/all-MiniLM-L6-v2", hub)
    assert time.perf_counter() - started < 10  # no "Retrying in 8s"
    assert constants.HF_HUB_OFFLINE and datasets.config.HF_HUB_OFFLINE and datasets.config.HF_DATASETS_OFFLINE
    assert data == {"data_dir": str(tmp_path / "demo_data")} and description.startswith("the embedded demo set")
    captured = capsys.readouterr()
    [line] = captured.out.splitlines()
    assert line.startswith("[quickstart] the Hugging Face Hub is unreachable (http://127.0.0.1:9: ")  # refused
    assert line.endswith(") and nyu-mll/glue (mrpc) is not in the local cache; using the embedded demo set")
    assert "retrying" not in (captured.out + captured.err).lower()


def test_the_usage_line_describes_the_default_kd_student():
    """`hf-distill --help` says what the quickstart's KD student trains on by default (no augmented pairs: AUGMENT_N 0)."""
    from hf_distill.cli import dispatch, quickstart_command

    lines = dispatch.USAGE.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("quickstart"))
    described = " ".join(lines[start:start + 2])
    assert ("augmented" in described) == bool(quickstart_command.AUGMENT_N) and "without KD" in described
    assert ("layers" in described) == bool(quickstart_command.LAYER_WEIGHT)  # the layer terms (LAYER_WEIGHT 1)


def _refused_line(monkeypatch, tmp_path, capsys, option: str, value: str) -> str:
    """The quickstart run with one bad option: exit 2 before the Hub is asked; its one error line."""
    import pytest

    from hf_distill.cli import dispatch, quickstart_command

    monkeypatch.setattr(quickstart_command, "_hub_state", lambda *_: pytest.fail("the Hub was asked before the check"))
    with pytest.raises(SystemExit) as exit_info:
        dispatch.main(["quickstart", "--model", "m", "--output_dir", str(tmp_path), option, value])
    assert exit_info.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    return line


def test_a_bad_number_is_one_line_before_the_hub_the_data_or_the_teacher(monkeypatch, tmp_path, capsys):
    for value in ("-1", "nan", "inf"):
        line = _refused_line(monkeypatch, tmp_path, capsys, "--layer_weight", value)
        assert line == (f"hf-distill: error: --layer_weight={float(value)!r} is not valid; give a finite number >= 0 "
                        "(0: the teacher's logits alone).")
    bad = {"--augment_n": ("-1", "-1"), "--augment_p": ("1.5", "1.5"), "--alpha": ("2", "2.0"),
           "--temperature": ("0", "0.0"), "--student_steps": ("0", "0"), "--student_layers": ("0", "0")}
    for option, (value, shown) in bad.items():
        line = _refused_line(monkeypatch, tmp_path, capsys, option, value)
        assert line.startswith(f"hf-distill: error: {option}={shown} is not valid; give ")


def test_the_eval_cap_and_the_seed_are_checked_before_the_hub_too(monkeypatch, tmp_path, capsys):
    """--max_eval_samples 0 and a seed numpy refuses used to pass the check and fail after the Hub and the data."""
    bad = {"--max_eval_samples": ("0", "a whole number >= 1"), "--seed": ("-1", "a whole number in [0, 2**32 - 1]")}
    for option, (value, what) in bad.items():
        line = _refused_line(monkeypatch, tmp_path, capsys, option, value)
        assert line.startswith(f"hf-distill: error: {option}={value} is not valid; give {what}")


def test_the_layer_terms_go_to_the_kd_student_alone_and_layer_weight_0_keeps_the_precomputed_logits(monkeypatch, tmp_path):
    """The KD student (default) reads an online teacher's layers, both loaded with eager attention; `--layer_weight 0`
    labels the logits once and adds no layer term; the no-KD student never gets a teacher or a layer term."""
    from hf_distill.cli import quickstart_command
    from hf_distill.losses.registry import switch_arguments

    def runs(argv: list[str]) -> dict[str, tuple]:
        calls = []
        monkeypatch.setattr(quickstart_command, "run", lambda *parsed: calls.append(parsed) or {})
        args = quickstart_command._parser().parse_args(["--output_dir", str(tmp_path), *argv])
        quickstart_command._train_teacher_and_student(args, "backbone", {"data_dir": str(tmp_path)}, tmp_path)
        return dict(zip(("teacher", "kd", "no_kd"), calls))

    def weights(training_args) -> dict[str, float]:
        return {name: getattr(training_args, name) for name in switch_arguments() if getattr(training_args, name)}

    layers = runs([])
    model_args, data_args, training_args = layers["kd"]
    assert model_args.attn_implementation == "eager" and model_args.teacher_name_or_path == [str(tmp_path / "teacher")]
    assert not data_args.precompute_teacher_logits and training_args.attention_loss == "mse"
    assert weights(training_args) == {"hidden_weight": 1.0, "attention_weight": 1.0, "embedding_weight": 1.0}
    logits = runs(["--layer_weight", "0"])
    model_args, data_args, training_args = logits["kd"]
    assert model_args.attn_implementation is None and data_args.precompute_teacher_logits and weights(training_args) == {}
    for model_args, _, training_args in (layers["no_kd"], logits["no_kd"]):
        assert not model_args.teacher_name_or_path and training_args.alpha == 0.0 and weights(training_args) == {}
