"""The models of a run: fine-tuned teachers, and the student loaded, wrapped or cut from a teacher."""

from __future__ import annotations

import copy
from typing import Any

from .arguments import ModelArguments
from .errors import ConfigError
from .labels import LabelInfo
from .lora import plain_teacher


def _load_kwargs(model_args: ModelArguments) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"revision": model_args.model_revision}
    if model_args.cache_dir:
        kwargs["cache_dir"] = model_args.cache_dir
    if model_args.trust_remote_code:
        kwargs["trust_remote_code"] = True
    if model_args.attn_implementation:
        kwargs["attn_implementation"] = model_args.attn_implementation
    return kwargs


def saved_model_type(path: str, kwargs: dict[str, Any]) -> str | None:
    """The `model_type` in the config saved at `path` (a folder or a Hub id), None when there is none."""
    from ..modeling.modeling_common import model_type_of

    return model_type_of(path, kwargs)


def load_teacher_model(path: str, model_args: ModelArguments):
    """A fine-tuned hf_distill teacher (cross-encoder, or Siamese) with its tokenizer, or a PEFT adapter on one."""
    from transformers import AutoModel

    from ..modeling import CrossEncoderConfig, SiameseConfig
    from .lora import adapter_config_file, load_lora_teacher

    kwargs = _load_kwargs(model_args)
    adapter = adapter_config_file(path, kwargs)
    if adapter:
        return load_lora_teacher(path, adapter, lambda base: load_teacher_model(base, model_args))
    if saved_model_type(path, kwargs) not in (CrossEncoderConfig.model_type, SiameseConfig.model_type):
        raise ConfigError(
            f"teacher_name_or_path={path!r} is not a fine-tuned hf_distill model (its config has no hf_distill "
            "model_type): fine-tune it first with a teacher recipe (recipes/teacher/*.yaml)."
        )
    teacher = AutoModel.from_pretrained(path, **kwargs)
    if getattr(teacher, "tokenizer", None) is None:
        raise ConfigError(f"teacher {path!r} was saved without a tokenizer; save it with model.tokenizer set.")
    return teacher


def _head_settings(model_args: ModelArguments, labels: LabelInfo) -> dict[str, Any]:
    """Config fields of a new head: num_labels, the label names if any, the classifier dropout if set."""
    head: dict[str, Any] = {"num_labels": labels.num_labels}
    if labels.names:
        head.update(id2label=dict(enumerate(labels.names)), label2id=labels.label2id)
    if model_args.classifier_dropout is not None:
        head["classifier_dropout"] = model_args.classifier_dropout
    return head


def _cross_encoder_student(model_args, path, saved_type, head, kwargs, teachers, k):
    """A saved cross-encoder, a backbone with a new head, or the first teacher; cut to k layers if k."""
    from ..modeling import CrossEncoderConfig, CrossEncoderModel, SiameseConfig

    if path and saved_type == SiameseConfig.model_type:
        raise ConfigError(f"model_name_or_path={path!r} is a Siamese model; set student_type: siamese.")
    if path and saved_type == CrossEncoderConfig.model_type:
        source = CrossEncoderModel.from_pretrained(path, **kwargs)
    elif path:
        source = CrossEncoderModel.from_backbone(path, **head, **kwargs)
    else:
        source = plain_teacher(teachers[0])
        if not isinstance(source, CrossEncoderModel):
            raise ConfigError("a cross-encoder student is cut from a cross-encoder teacher; the first teacher is not one.")
    return CrossEncoderModel.from_teacher(source, k, model_args.layer_strategy) if k else source


def _siamese_student(model_args, path, saved_type, head, kwargs, teachers, k):
    """A saved Siamese model, or a new one over a backbone (a cross-encoder's or teacher's, copied); k layers if k."""
    from ..modeling import (
        CrossEncoderConfig,
        CrossEncoderModel,
        SiameseConfig,
        SiameseModel,
        select_layers,
    )
    from ..modeling.modeling_common import keep_layers

    siamese = dict(pooling=model_args.pooling, head=model_args.head, use_product=model_args.use_product,
                   interaction=model_args.interaction, **head)
    if path and saved_type == SiameseConfig.model_type:
        student = SiameseModel.from_pretrained(path, **kwargs)
    else:
        if path and saved_type == CrossEncoderConfig.model_type:
            donor = CrossEncoderModel.from_pretrained(path, **kwargs)
        elif path:
            donor = None
        else:
            donor = plain_teacher(teachers[0])
        if donor is not None:  # a cross-encoder's (or teacher's) backbone, copied
            backbone = copy.deepcopy(donor.backbone)
            student = SiameseModel.from_backbone(backbone, tokenizer=donor.tokenizer, **siamese)
        else:
            student = SiameseModel.from_backbone(path, **siamese, **kwargs)
    if k:
        depth = student.backbone.config.num_hidden_layers
        keep_layers(student.backbone, select_layers(depth, k, model_args.layer_strategy))
        student.config.encoder = student.backbone.config
    return student


def build_student(model_args: ModelArguments, labels: LabelInfo, teachers: list, do_train: bool = True):
    """The model to train: loaded or wrapped from model_name_or_path, or cut from the first teacher."""
    from transformers import AutoTokenizer

    kwargs = _load_kwargs(model_args)
    path = model_args.model_name_or_path
    if not path and not teachers:
        raise ConfigError("model_name_or_path is missing: give the model to evaluate (e.g. a trained output_dir).")
    saved_type = saved_model_type(path, kwargs) if path else None
    k = model_args.num_student_layers if do_train else None  # `evaluate` scores the saved model as it is
    build = _cross_encoder_student if model_args.student_type == "cross_encoder" else _siamese_student
    student = build(model_args, path, saved_type, _head_settings(model_args, labels), kwargs, teachers, k)
    if model_args.tokenizer_name:
        student.tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name, revision=model_args.model_revision)
    if student.tokenizer is None:
        raise ConfigError(f"the model {path!r} carries no tokenizer; set tokenizer_name.")
    if do_train:
        check_head(student, labels, f"model_name_or_path={path!r}" if path else "the student")
    return student


def check_head(model, labels: LabelInfo, what: str) -> None:
    """Refuse a model whose head does not fit the data's labels (num_labels, label names)."""
    config = model.config
    if config.num_labels != labels.num_labels:
        raise ConfigError(
            f"{what} predicts num_labels={config.num_labels} but the data needs {labels.num_labels} "
            "(1 = regression); use a model trained for these labels, or set num_labels."
        )
    if labels.names:
        missing = [name for name in labels.names if name not in (config.label2id or {})]
        if missing:
            raise ConfigError(
                f"{what} has label2id={dict(config.label2id or {})}, which lacks the data's labels {missing}."
            )


def count_parameters(model) -> int:
    """All parameters of `model`, trainable or not."""
    return sum(p.numel() for p in model.parameters())
