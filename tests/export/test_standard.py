"""Standard checkpoints load without hf_distill and give the student's numbers.

One fresh Python process, with `hf_distill` blocked from import, loads every exported folder the
way a user of transformers, sentence-transformers or plain onnxruntime would, and prints what it
computed; the student's own outputs must match within 1e-5.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from .conftest import SEVEN_PAIRS

import sentence_transformers  # noqa: E402,F401  (a test dependency: the dev extra)
import onnxruntime  # noqa: E402,F401  (a test dependency: the dev extra)

TOLERANCE = 1e-5
TEXTS = list(dict.fromkeys(text for pair in SEVEN_PAIRS for text in pair))

_BLOCKED_RUN = textwrap.dedent(
    """
    import json, sys

    class BlockHfDistill:
        def find_spec(self, name, path=None, target=None):
            if name == "hf_distill" or name.startswith("hf_distill."):
                raise ImportError(f"{name} is blocked: the export must load without it")
            return None

    sys.meta_path.insert(0, BlockHfDistill())
    import numpy as np
    import onnxruntime
    import torch
    from sentence_transformers import CrossEncoder, SentenceTransformer
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    job = json.loads(sys.argv[1])
    pairs, texts, out = job["pairs"], job["texts"], {}
    first, second = [a for a, _ in pairs], [b for _, b in pairs]
    for name in ("regression", "classification"):
        folder = job[name]
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
        with torch.inference_mode():
            logits = model(**tokenizer(first, second, padding=True, truncation=True, return_tensors="pt")).logits
        out[name + "_transformers"] = logits.squeeze(-1).tolist() if logits.shape[1] == 1 else logits.tolist()
        out[name + "_crossencoder"] = CrossEncoder(folder, device="cpu").predict(pairs).tolist()
        out[name + "_config"] = {k: v for k, v in model.config.to_dict().items() if k in ("id2label", "problem_type", "auto_map")}
    for name in ("siamese", "max_pooling"):
        out[name + "_st"] = SentenceTransformer(job[name], device="cpu").encode(texts).tolist()
    session = onnxruntime.InferenceSession(job["regression"] + "/onnx/model.onnx")
    inputs = AutoTokenizer.from_pretrained(job["regression"])(first, second, padding=True, truncation=True, return_tensors="np")
    out["regression_onnx"] = session.run(None, {i.name: inputs[i.name] for i in session.get_inputs()})[0][:, 0].tolist()
    out["hf_distill_loaded"] = any(m == "hf_distill" or m.startswith("hf_distill.") for m in sys.modules)
    print("RESULT " + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def loaded_without_hf_distill(regression_export, classification_export, siamese_export, max_pooling_export, tmp_path_factory):
    """What the blocked process computed from each exported folder."""
    job = {
        "pairs": SEVEN_PAIRS,
        "texts": TEXTS,
        **{name: str(export[1].path) for name, export in (
            ("regression", regression_export), ("classification", classification_export),
            ("siamese", siamese_export), ("max_pooling", max_pooling_export),
        )},
    }
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONWARNINGS": "ignore"}
    run = subprocess.run(
        [sys.executable, "-c", _BLOCKED_RUN, json.dumps(job)],
        capture_output=True, text=True, check=False, env=env, cwd=tmp_path_factory.mktemp("elsewhere"), timeout=180,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _close(actual, expected) -> None:
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected, dtype=np.float64), atol=TOLERANCE, rtol=0)


def test_nothing_of_hf_distill_was_imported(loaded_without_hf_distill):
    assert loaded_without_hf_distill["hf_distill_loaded"] is False


@pytest.mark.parametrize("name", ["regression", "classification"])
def test_cross_encoder_loads_with_transformers_and_crossencoder(name, request, loaded_without_hf_distill):
    student, _ = request.getfixturevalue(f"{name}_export")
    expected = student.predict(SEVEN_PAIRS).numpy()
    _close(loaded_without_hf_distill[f"{name}_transformers"], expected)
    _close(loaded_without_hf_distill[f"{name}_crossencoder"], expected)  # raw logits: no sigmoid for one output


def test_labels_and_problem_type_travel(loaded_without_hf_distill):
    regression = loaded_without_hf_distill["regression_config"]
    classification = loaded_without_hf_distill["classification_config"]
    assert regression["problem_type"] == "regression"
    assert classification["problem_type"] == "single_label_classification"
    assert classification["id2label"] == {"0": "contradiction", "1": "entailment", "2": "neutral"}
    assert "auto_map" not in regression and "auto_map" not in classification  # no custom code anywhere


@pytest.mark.parametrize("name, normalize", [("siamese", True), ("max_pooling", False)])
def test_siamese_loads_with_sentence_transformer(name, normalize, request, loaded_without_hf_distill):
    student, _ = request.getfixturevalue(f"{name}_export")
    _close(loaded_without_hf_distill[f"{name}_st"], student.encode(TEXTS, normalize=normalize).numpy())


def test_onnx_graph_runs_with_plain_onnxruntime(regression_export, loaded_without_hf_distill):
    student, _ = regression_export
    _close(loaded_without_hf_distill["regression_onnx"], student.predict(SEVEN_PAIRS).numpy())


def test_folder_layouts(siamese_export, max_pooling_export, classification_export):
    siamese = siamese_export[1].path
    modules = json.loads((siamese / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    assert json.loads((siamese / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"] is True
    assert json.loads((max_pooling_export[1].path / "1_Pooling" / "config.json").read_text())["pooling_mode_max_tokens"]
    assert not (max_pooling_export[1].path / "2_Normalize").exists()
    assert json.loads((classification_export[1].path / "config.json").read_text())["architectures"] == [
        "BertForSequenceClassification"
    ]


def test_no_absolute_path_in_any_written_text(regression_export, classification_export, siamese_export, max_pooling_export):
    for _, result in (regression_export, classification_export, siamese_export, max_pooling_export):
        root = result.path.parent  # the test's temporary folder, which holds the student too
        for path in result.path.rglob("*"):
            if path.suffix in (".json", ".md", ".txt"):
                text = path.read_text(encoding="utf-8")
                assert str(root) not in text and "/tmp/" not in text, path
        assert "auto_map" not in (result.path / "config.json").read_text()


def test_a_student_with_a_kept_output_layer_is_refused_not_silently_cut(tmp_path, tiny_tokenizer):
    from hf_distill.export.errors import ExportError
    from hf_distill.export.sentence_transformers_checkpoint import save_sentence_transformer
    from tests.conftest import make_siamese

    student = make_siamese(tiny_tokenizer, head="cosine", num_labels=1)
    import torch

    student.add_output_layer(torch.nn.Linear(student.config.encoder.hidden_size, 8))
    with pytest.raises(ExportError, match=r"output layer \(output_dim=8"):
        save_sentence_transformer(student, tmp_path / "out")
    assert not (tmp_path / "out").exists()
