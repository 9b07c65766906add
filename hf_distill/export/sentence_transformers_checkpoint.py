"""Siamese student -> sentence-transformers' folder layout: Transformer, Pooling, optional Normalize.

The backbone is written at the folder's root as a plain `AutoModel` checkpoint, `1_Pooling` holds
the student's pooling (mean, cls or max), `2_Normalize` is added on request. The files use the
classic module names (`sentence_transformers.models.*`) that every sentence-transformers release
since v2 loads, so `SentenceTransformer(path).encode(texts)` gives the student's `encode(texts)`.

The student's pair head is not part of the layout: a cosine head is the layout's own similarity
function; a classification head over (u, v, |u-v|) and the VIRT interaction layer are dropped
(the card says so), the embeddings stay exact.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..modeling import SiameseModel
from ..modeling.modeling_common import drop_local_path
from .errors import ExportError
from .student import max_sequence_length

__all__ = ["POOLING_FLAGS", "dropped_head", "save_sentence_transformer"]

POOLING_FLAGS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens"}
_OTHER_FLAGS = ("pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


def _modules(normalize: bool) -> list[dict]:
    modules = [("", "Transformer"), ("1_Pooling", "Pooling")] + ([("2_Normalize", "Normalize")] if normalize else [])
    return [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (path, kind) in enumerate(modules)
    ]


def _pooling_config(student: SiameseModel) -> dict:
    config = {"word_embedding_dimension": student.config.encoder.hidden_size}
    config.update({flag: mode == student.config.pooling for mode, flag in POOLING_FLAGS.items()})
    config.update(dict.fromkeys(_OTHER_FLAGS, False))
    config["include_prompt"] = True
    return config


def _write_json(path: Path, payload: dict | list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def dropped_head(student: SiameseModel) -> str | None:
    """What of the student the layout leaves out (None when the embeddings are all it had)."""
    if student.config.interaction == "virt":
        return "the VIRT interaction layer and the classification head (pair scoring); embeddings are exact"
    if student.config.head == "classification":
        return "the classification head over (u, v, |u-v|); embeddings are exact"
    return None


def save_sentence_transformer(student: SiameseModel, out_dir: str | Path, normalize: bool = False) -> None:
    """Write the student as a sentence-transformers model folder (loadable without hf_distill)."""
    if getattr(student, "output_projection", None) is not None:
        raise ExportError(
            f"the student has an output layer (output_dim={student.config.output_dim}, a distillation projection it "
            "kept), which the sentence-transformers layout written here does not carry; valid: a Siamese student "
            "without output_dim (train with the projection dropped)."
        )
    out = Path(out_dir)
    drop_local_path(student.backbone.config)
    student.backbone.save_pretrained(out)
    student.tokenizer.save_pretrained(out)
    _write_json(out / "modules.json", _modules(normalize))
    _write_json(out / "sentence_bert_config.json", {"max_seq_length": max_sequence_length(student), "do_lower_case": False})
    _write_json(out / "1_Pooling" / "config.json", _pooling_config(student))
    if normalize:
        (out / "2_Normalize").mkdir(exist_ok=True)
    _write_json(
        out / "config_sentence_transformers.json",
        {"prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine", "model_type": "SentenceTransformer"},
    )
