"""Cross-encoder student -> the backbone family's own `AutoModelForSequenceClassification` checkpoint.

The student's head is dense + tanh over [CLS], dropout, then an output layer. Two families of
transformers heads compute exactly that:

- BERT: the pooler (dense + tanh over [CLS]) then `classifier`: the head's dense becomes
  `bert.pooler.dense`, its output layer `classifier`;
- RoBERTa, XLM-RoBERTa, MPNet: `classifier.dense` + tanh + `classifier.out_proj`.

ELECTRA's and DistilBERT's heads use another activation (GELU, ReLU), so those students cannot
become their family's checkpoint: export them as ONNX (from the student itself) or keep the
hf_distill format. `export_student` reads the written folder back and fails unless it scores
like the student.
"""

from __future__ import annotations

from pathlib import Path

from transformers import AutoModelForSequenceClassification, PreTrainedModel

from ..modeling import CrossEncoderModel
from .errors import ExportError
from .student import portable_config

__all__ = ["HEAD_LAYOUTS", "IDENTITY_ACTIVATION", "save_sequence_classification", "sequence_classification_model"]

_POOLER_THEN_CLASSIFIER = {"head.dense": "{base}.pooler.dense", "head.out_proj": "classifier"}
_CLASSIFICATION_HEAD = {"head.dense": "classifier.dense", "head.out_proj": "classifier.out_proj"}
# backbone model_type -> where the student's head layers go in the family's *ForSequenceClassification
HEAD_LAYOUTS = {
    "bert": _POOLER_THEN_CLASSIFIER,
    "roberta": _CLASSIFICATION_HEAD,
    "xlm-roberta": _CLASSIFICATION_HEAD,
    "mpnet": _CLASSIFICATION_HEAD,
}
_MISMATCHED_HEADS = {
    "electra": "ELECTRA's classification head applies GELU where the student's head applies tanh",
    "distilbert": "DistilBERT's classification head applies ReLU where the student's head applies tanh",
}
# sentence-transformers' CrossEncoder reads this config field; identity keeps its scores equal to the student's
# logits (its default for one output is a sigmoid).
IDENTITY_ACTIVATION = "torch.nn.modules.linear.Identity"


def _head_layout(model_type: str) -> dict[str, str]:
    if model_type in HEAD_LAYOUTS:
        return HEAD_LAYOUTS[model_type]
    why = _MISMATCHED_HEADS.get(model_type, f"no verified head mapping exists for model_type={model_type!r}")
    raise ExportError(
        f"a {model_type} cross-encoder cannot be saved as a standard transformers checkpoint: {why} "
        f"(supported: {', '.join(sorted(HEAD_LAYOUTS))}); use --format onnx or keep the hf_distill format."
    )


def sequence_classification_model(student: CrossEncoderModel) -> PreTrainedModel:
    """The family's `*ForSequenceClassification` holding the student's weights, labels and problem type."""
    layout = _head_layout(student.config.encoder.model_type)
    config = portable_config(student.config.encoder)
    config.id2label = {int(i): label for i, label in student.config.id2label.items()}
    config.label2id = dict(student.config.label2id)
    config.problem_type = student.config.problem_type or (
        "regression" if student.config.num_labels == 1 else "single_label_classification"
    )
    config.classifier_dropout = student.config.classifier_dropout
    config.sentence_transformers = {"activation_fn": IDENTITY_ACTIVATION}
    target = AutoModelForSequenceClassification.from_config(config)
    config.architectures = [type(target).__name__]
    base = target.base_model_prefix
    state = {f"{base}.{name}": tensor for name, tensor in student.backbone.state_dict().items()}
    for source, destination in layout.items():
        for name, tensor in student.get_submodule(source).state_dict().items():
            state[f"{destination.format(base=base)}.{name}"] = tensor
    missing, unexpected = target.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ExportError(
            f"the {type(target).__name__} weights do not match the student's: missing {sorted(missing)}, "
            f"unexpected {sorted(unexpected)}."
        )
    return target.to(student.dtype).eval()


def save_sequence_classification(student: CrossEncoderModel, out_dir: str | Path) -> PreTrainedModel:
    """Write the standard checkpoint and the tokenizer to `out_dir`; return the model that was written."""
    model = sequence_classification_model(student)
    model.save_pretrained(out_dir)
    student.tokenizer.save_pretrained(out_dir)
    return model

