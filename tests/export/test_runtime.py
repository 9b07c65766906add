"""The ONNX runtime classes answer the evaluators' calls like the PyTorch students."""

from __future__ import annotations

import numpy as np
import pytest

from .conftest import SEVEN_PAIRS

import onnxruntime  # noqa: E402,F401  (a test dependency: the dev extra)


def test_sts_evaluator_runs_on_either(siamese_export):
    from hf_distill.evaluation import STSEvaluator
    from hf_distill.export import load_onnx_student

    student, result = siamese_export
    first, second = zip(*SEVEN_PAIRS)
    evaluator = STSEvaluator(first, second, [0.1, 0.5, 0.2, 0.9, 0.4, 0.3, 0.8], name="sts")
    on_student, on_onnx = evaluator(student), evaluator(load_onnx_student(result.path))
    assert on_onnx.keys() == on_student.keys() == {"sts_spearman_cosine", "sts_pearson_cosine"}
    assert on_onnx["sts_spearman_cosine"] == pytest.approx(on_student["sts_spearman_cosine"], abs=1e-6)
    assert on_onnx["sts_pearson_cosine"] == pytest.approx(on_student["sts_pearson_cosine"], abs=1e-3)


def test_classification_evaluator_runs_on_either(classification_export, tmp_path):
    from hf_distill.evaluation import PairClassificationEvaluator
    from hf_distill.export import export_student, load_onnx_student

    student, _ = classification_export
    exported = export_student(student, tmp_path / "onnx", format="onnx", measure_speed=False)  # a model, not a folder
    first, second = zip(*SEVEN_PAIRS)
    labels = ["entailment", "neutral", "contradiction", "neutral", "entailment", "neutral", "contradiction"]
    evaluator = PairClassificationEvaluator(first, second, labels, name="nli")  # label names: read from config.label2id
    runtime = load_onnx_student(exported.path)
    assert evaluator(runtime) == evaluator(student)
    assert runtime.predict(SEVEN_PAIRS).shape == (7, 3)


def test_ranking_evaluator_runs_on_either(regression_export):
    from hf_distill.export import load_onnx_student
    from hf_distill.ranking import RankingData, RankingEvaluator

    student, result = regression_export
    rows = [
        {"qid": "q1", "question": "a man plays the guitar .", "answer": "someone plays music", "label": 1},
        {"qid": "q1", "question": "a man plays the guitar .", "answer": "the cat sits on the chair", "label": 0},
        {"qid": "q1", "question": "a man plays the guitar .", "answer": "a woman sings a song", "label": 0},
        {"qid": "q2", "question": "it is a sunny day", "answer": "the sun is in the sky", "label": 1},
        {"qid": "q2", "question": "it is a sunny day", "answer": "a dog runs", "label": 0},
    ]
    data = RankingData.from_pairs(rows)
    evaluator = RankingEvaluator(data)
    assert evaluator(load_onnx_student(result.path)) == pytest.approx(evaluator(student))


def test_runtime_refuses_a_folder_without_a_graph(classification_export):
    from hf_distill.export import ExportError, load_onnx_student

    with pytest.raises(ExportError, match="holds no ONNX student"):
        load_onnx_student(classification_export[1].path)


def test_runtime_refuses_a_missing_int8_graph_and_the_wrong_class(tmp_path, siamese_export, classification_export):
    from hf_distill.export import ExportError, OnnxCrossEncoder, export_student

    student, _ = classification_export
    exported = export_student(student, tmp_path / "fp32_only", format="onnx", measure_speed=False)
    with pytest.raises(ExportError, match="no int8 graph"):
        OnnxCrossEncoder(exported.path, quantized=True)
    with pytest.raises(ExportError, match="bi-encoder graph, not a cross-encoder"):
        OnnxCrossEncoder(siamese_export[1].path)


def test_runtime_keeps_the_input_order(siamese_export):
    from hf_distill.export import load_onnx_student

    runtime = load_onnx_student(siamese_export[1].path)
    texts = [a for a, _ in SEVEN_PAIRS]
    batched = runtime.encode(texts, batch_size=3)
    one_by_one = np.stack([runtime.encode(t) for t in texts])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
