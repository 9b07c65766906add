"""Exported tiny students, built once per test session: the export tests read these folders.

Each student is a random 2-layer BERT (hidden 32) with the offline tiny tokenizer, saved in the
hf_distill format and exported with `export_student` (no speed measurement: that has its own test).
"""

from __future__ import annotations

import pytest

from ..conftest import SENTENCES, make_cross_encoder, make_siamese

# Seven pairs of different lengths: one batch of them pads.
SEVEN_PAIRS = list(zip(SENTENCES, reversed(SENTENCES)))
LABELS = {"id2label": {0: "contradiction", 1: "entailment", 2: "neutral"}}


def _export(tmp_path_factory, name: str, model, **options):
    from hf_distill.export import export_student

    folder = tmp_path_factory.mktemp(name)
    model.save_pretrained(folder / "student")
    result = export_student(folder / "student", folder / "exported", measure_speed=False, **options)
    return model, result


@pytest.fixture(scope="session")
def regression_export(tiny_tokenizer, tmp_path_factory):
    """A 1-output cross-encoder exported as ONNX with int8 (the standard checkpoint comes with it)."""
    model = make_cross_encoder(tiny_tokenizer, num_labels=1)
    return _export(tmp_path_factory, "regression", model, format="onnx", quantize="int8")


@pytest.fixture(scope="session")
def classification_export(tiny_tokenizer, tmp_path_factory):
    """A 3-class cross-encoder with label names, exported in its default format (transformers)."""
    label2id = {name: i for i, name in LABELS["id2label"].items()}
    model = make_cross_encoder(tiny_tokenizer, num_labels=3, label2id=label2id, **LABELS)
    return _export(tmp_path_factory, "classification", model)


@pytest.fixture(scope="session")
def siamese_export(tiny_tokenizer, tmp_path_factory):
    """A mean-pooling cosine-head Siamese student exported as ONNX with int8 and a Normalize module."""
    model = make_siamese(tiny_tokenizer, head="cosine", num_labels=1)
    return _export(tmp_path_factory, "siamese", model, format="onnx", quantize="int8", normalize=True)


@pytest.fixture(scope="session")
def max_pooling_export(tiny_tokenizer, tmp_path_factory):
    """A max-pooling Siamese student with a classification head, exported in its default format."""
    model = make_siamese(tiny_tokenizer, pooling="max", head="classification", num_labels=3)
    return _export(tmp_path_factory, "max_pooling", model)
