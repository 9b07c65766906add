"""The exported student's README.md: how to load each format, measured parity and speed."""

from __future__ import annotations

import pytest

from ..conftest import make_cross_encoder


@pytest.fixture(scope="module")
def card_with_speed(tiny_tokenizer, tmp_path_factory):
    import onnxruntime  # noqa: F401  (a test dependency: the dev extra)
    from hf_distill.export import export_student

    folder = tmp_path_factory.mktemp("card")
    student = make_cross_encoder(tiny_tokenizer, num_labels=1)
    result = export_student(student, folder, format="onnx", quantize="int8")
    return result, (folder / "README.md").read_text()


def test_card_says_how_to_load_every_format_in_the_folder(card_with_speed):
    _, card = card_with_speed
    for snippet in (
        "AutoModelForSequenceClassification.from_pretrained",
        "CrossEncoder(",
        "load_onnx_student(",
        "onnxruntime.InferenceSession(",
        "onnx/model_qint8.onnx",
    ):
        assert snippet in card


def test_card_shows_measured_parity_and_speed(card_with_speed):
    result, card = card_with_speed
    assert set(result.speed) == {"PyTorch fp32", "ONNX fp32", "ONNX int8"}
    for label, speed in result.speed.items():
        assert speed["batch1_p50_ms"] > 0 and speed["throughput_rows_per_s"] > 0
        assert f"| {label} |" in card
    for label, entry in result.parity.items():
        assert f"{entry['max_abs_diff']:.2e}" in card


def test_siamese_card_names_what_was_not_exported(siamese_export, max_pooling_export):
    assert "Not exported" not in (siamese_export[1].path / "README.md").read_text()  # a cosine head: nothing lost
    card = (max_pooling_export[1].path / "README.md").read_text()
    assert "Not exported: the classification head over (u, v, |u-v|)" in card
    assert "SentenceTransformer(" in card and "load_onnx_student" not in card
