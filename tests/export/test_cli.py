"""`hf-distill export` (`hf_distill.export.cli.main`): defaults by student kind, and errors as one line with exit code 2."""

from __future__ import annotations

import sys

import pytest
from transformers import BertModel

from ..conftest import make_bert_config, make_cross_encoder, make_siamese


def _run(capsys, *argv) -> tuple[int, str, str]:
    from hf_distill.export.cli import main

    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("hf-distill export: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def student_folders(tiny_tokenizer, tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    make_cross_encoder(tiny_tokenizer).save_pretrained(root / "cross")
    make_siamese(tiny_tokenizer, head="cosine", num_labels=1).save_pretrained(root / "siamese")
    BertModel(make_bert_config(1)).save_pretrained(root / "plain_bert")
    (root / "empty").mkdir()
    return root


@pytest.mark.parametrize("kind, expected", [("cross", "transformers"), ("siamese", "sentence-transformers")])
def test_default_format_follows_the_student(kind, expected, student_folders, tmp_path, capsys):
    code, out, err = _run(capsys, student_folders / kind, tmp_path / "out", "--no-speed")
    assert code == 0, err
    assert f"as {expected} to" in out and "max abs difference" in out
    assert (tmp_path / "out" / "README.md").exists()


@pytest.mark.parametrize(
    "folder, message",
    [
        ("missing", "does not exist"),
        ("empty", "has no config.json"),
        ("plain_bert", "is not an hf_distill student: its config.json has model_type='bert'"),
    ],
)
def test_bad_student_folders_fail_in_one_line(folder, message, student_folders, tmp_path, capsys):
    code, _, err = _run(capsys, student_folders / folder, tmp_path / "out")
    assert code == 2
    assert message in _one_error_line(err)


def test_missing_onnx_extra_fails_in_one_line(student_folders, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    code, _, err = _run(capsys, student_folders / "cross", tmp_path / "out", "--format", "onnx", "--no-speed")
    assert code == 2
    assert "pip install 'hf_distill[onnx]'" in _one_error_line(err)


def test_quantize_needs_onnx(student_folders, tmp_path, capsys):
    code, _, err = _run(capsys, student_folders / "cross", tmp_path / "out", "--format", "transformers", "--quantize", "int8")
    assert code == 2
    assert "applies to ONNX graphs" in _one_error_line(err)


def test_out_dir_cannot_be_the_student(student_folders, capsys):
    code, _, err = _run(capsys, student_folders / "cross", student_folders / "cross")
    assert code == 2
    assert "is the student folder" in _one_error_line(err)


def test_unknown_format_is_an_argparse_error(student_folders, tmp_path, capsys):
    code, _, err = _run(capsys, student_folders / "cross", tmp_path / "out", "--format", "tflite")
    assert code == 2 and "invalid choice" in err


def test_quantize_alone_implies_onnx(student_folders, tmp_path, capsys):
    import onnxruntime  # noqa: F401  (a test dependency: the dev extra)
    code, out, err = _run(capsys, student_folders / "siamese", tmp_path / "out", "--quantize", "int8", "--no-speed")
    assert code == 0, err
    assert "as onnx to" in out and "ONNX int8" in out
    assert (tmp_path / "out" / "onnx" / "model_qint8.onnx").exists()


def test_normalize_is_for_siamese_students(student_folders, tmp_path, capsys):
    code, _, err = _run(capsys, student_folders / "cross", tmp_path / "out", "--normalize")
    assert code == 2
    assert "applies to Siamese students only" in _one_error_line(err)


def test_a_model_without_tokenizer_is_refused(tmp_path):
    from hf_distill.export import ExportError, export_student

    student = make_cross_encoder(None).train()
    with pytest.raises(ExportError, match="has no tokenizer"):
        export_student(student, tmp_path)


def test_a_model_in_training_mode_gets_its_mode_back(tiny_tokenizer, tmp_path):
    from hf_distill.export import export_student

    student = make_cross_encoder(tiny_tokenizer).train()
    export_student(student, tmp_path, measure_speed=False)
    assert student.training
