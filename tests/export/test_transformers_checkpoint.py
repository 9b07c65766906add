"""Each backbone family maps to its own sequence-classification head, or is refused in one clear line."""

from __future__ import annotations

import copy
import json

import pytest
from transformers import ElectraConfig, MPNetConfig, RobertaConfig, XLMRobertaConfig

from ..conftest import TINY_VOCAB, make_bert_config, seed_everything
from .conftest import SEVEN_PAIRS

TINY = {
    "vocab_size": len(TINY_VOCAB), "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 37, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "pad_token_id": 0,
}
POSITIONS = {"max_position_embeddings": 70}  # RoBERTa's positions start after the padding index


def _student(encoder_config, tokenizer, num_labels: int = 2):
    from hf_distill import CrossEncoderConfig, CrossEncoderModel

    seed_everything(0)
    config = CrossEncoderConfig(
        encoder=encoder_config.to_dict(), num_labels=num_labels, classifier_dropout=0.0, attn_implementation="eager"
    )
    model = CrossEncoderModel(config)
    model.tokenizer = tokenizer
    return model.eval()


def _without_token_types(tokenizer):
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    return tokenizer


FAMILIES = {
    "bert": (lambda: make_bert_config(2), "BertForSequenceClassification", False),
    "roberta": (lambda: RobertaConfig(**TINY, **POSITIONS, type_vocab_size=2), "RobertaForSequenceClassification", False),
    "xlm-roberta": (lambda: XLMRobertaConfig(**TINY, **POSITIONS, type_vocab_size=2), "XLMRobertaForSequenceClassification", False),
    "mpnet": (lambda: MPNetConfig(**TINY, **POSITIONS), "MPNetForSequenceClassification", True),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_maps_to_its_own_head_with_the_same_scores(family, tiny_tokenizer, tmp_path):
    from hf_distill.export import export_student

    make_config, architecture, no_token_types = FAMILIES[family]
    tokenizer = _without_token_types(tiny_tokenizer) if no_token_types else tiny_tokenizer
    student = _student(make_config(), tokenizer, num_labels=1 if family == "mpnet" else 2)
    result = export_student(student, tmp_path, measure_speed=False, pairs=SEVEN_PAIRS)
    assert result.format == "transformers"
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == [architecture]
    assert result.parity["transformers / CrossEncoder"]["max_abs_diff"] <= 1e-5


def test_electra_is_refused_in_one_line_and_still_exports_to_onnx(tiny_tokenizer, tmp_path):
    import onnxruntime  # noqa: F401  (a test dependency: the dev extra)
    from hf_distill.export import ExportError, export_student

    student = _student(ElectraConfig(**TINY, **POSITIONS, embedding_size=16), tiny_tokenizer)
    with pytest.raises(ExportError, match="GELU where the student's head applies tanh") as refused:
        export_student(student, tmp_path / "standard", measure_speed=False)
    assert "\n" not in str(refused.value) and "--format onnx" in str(refused.value)
    result = export_student(student, tmp_path / "onnx", format="onnx", measure_speed=False, pairs=SEVEN_PAIRS)
    assert not (tmp_path / "onnx" / "config.json").exists() and (tmp_path / "onnx" / "tokenizer.json").exists()
    assert result.parity["ONNX fp32"]["max_abs_diff"] <= 1e-4
    assert any("No standard checkpoint" in note for note in result.notes)
