"""Cross-encoder student: the backbone reads the joint pair, a head scores it.

Self-contained (relative imports only) so a saved model loads with ``trust_remote_code=True``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer, PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_hf_distill import CrossEncoderConfig
from .modeling_common import (
    TokenizerCarryingModel,
    build_backbone,
    detach_pooler,
    keep_layers,
    model_type_of,
    run_backbone,
    task_loss,
)

LAYER_STRATEGIES = ("first", "uniform")


@dataclass
class CrossEncoderOutput(ModelOutput):
    """Output of [`CrossEncoderModel`].

    Args:
        loss: cross-entropy (or MSE when num_labels == 1) when labels are given.
        logits: (B, num_labels).
        pooled: (B, hidden) the pair representation the head reads ([CLS] after dense + tanh).
        hidden_states: embedding output and every layer's output, on request.
        attentions: every layer's attention probabilities (B, heads, T, T), on request.
        query_states / key_states: every layer's per-head queries and keys (B, heads, T, d_head), on request.
    """

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    pooled: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    query_states: tuple[torch.Tensor, ...] | None = None
    key_states: tuple[torch.Tensor, ...] | None = None


class PairClassificationHead(nn.Module):
    """dense + tanh over [CLS], dropout, then the output layer (BERT pooler + classifier)."""

    def __init__(self, hidden_size: int, num_labels: int, dropout: float):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(hidden_size, num_labels)

    def forward(self, cls_state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pooled = torch.tanh(self.dense(cls_state))
        return self.out_proj(self.dropout(pooled)), pooled


class CrossEncoderModel(TokenizerCarryingModel):
    """A sequence-pair classifier/regressor over any `AutoModel` backbone.

    Example:
        >>> teacher = CrossEncoderModel.from_backbone("sentence-transformers/all-MiniLM-L6-v2", num_labels=2)
        >>> student = CrossEncoderModel.from_teacher(teacher, num_layers=2, strategy="uniform")
    """

    config_class = CrossEncoderConfig
    config: CrossEncoderConfig
    _extra_auto_classes = ("AutoModel",)

    def __init__(self, config: CrossEncoderConfig, backbone: PreTrainedModel | None = None):
        super().__init__(config)
        self.backbone = backbone if backbone is not None else build_backbone(config.encoder)
        self.head = PairClassificationHead(config.encoder.hidden_size, config.num_labels, config.classifier_dropout)
        self.post_init()

    # ------------------------------------------------------------------ building
    @classmethod
    def from_backbone(
        cls,
        backbone: str | os.PathLike | PreTrainedModel,
        tokenizer=None,
        num_labels: int = 2,
        **kwargs,
    ) -> "CrossEncoderModel":
        """Wrap a pretrained backbone (Hub id, local folder or model) with a fresh pair head.

        Keyword arguments that are `CrossEncoderConfig` fields (id2label, label2id,
        classifier_dropout, problem_type) configure the head; the others go to `AutoModel.from_pretrained`.
        """
        config_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _CROSS_ENCODER_FIELDS}
        config = CrossEncoderConfig(num_labels=num_labels, **config_kwargs)  # validate before loading weights
        if isinstance(backbone, (str, os.PathLike)):
            name = str(backbone)
            backbone = AutoModel.from_pretrained(name, **kwargs)
            tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(name)
        pooler = detach_pooler(backbone)
        config.encoder = backbone.config
        model = cls(config, backbone=backbone)
        if pooler is not None:
            model.head.dense.load_state_dict(pooler)
        model.tokenizer = tokenizer
        return model

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """Load a saved cross-encoder, or wrap a plain backbone checkpoint with a new head."""
        if "config" not in kwargs and model_type_of(pretrained_model_name_or_path, kwargs) != CrossEncoderConfig.model_type:
            return cls.from_backbone(str(pretrained_model_name_or_path), **kwargs)
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    @classmethod
    def from_teacher(
        cls,
        teacher: "CrossEncoderModel",
        num_layers: int,
        strategy: str | Sequence[int] = "first",
    ) -> "CrossEncoderModel":
        """A k-layer student that copies the teacher's embeddings, the chosen layers and the head.

        strategy: "first" (layers 0..k-1, Simplified TinyBERT), "uniform" (every L/k-th layer,
        ending with the last: TinyBERT's "skip" mapping), or an explicit list of 0-based indices.
        """
        depth = teacher.config.encoder.num_hidden_layers
        indices = select_layers(depth, num_layers, strategy)
        student = copy.deepcopy(teacher)
        student.requires_grad_(True)  # a frozen teacher still gives a trainable student
        student.train()
        keep_layers(student.backbone, indices)
        student.config.encoder = student.backbone.config
        student.tokenizer = teacher.tokenizer
        return student

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        output_query_key: bool = False,
        return_dict: bool = True,
        **_unused,
    ) -> CrossEncoderOutput:
        last_hidden_state, internals = run_backbone(
            self.backbone,
            input_ids,
            attention_mask,
            token_type_ids,
            output_hidden_states=bool(output_hidden_states),
            output_attentions=bool(output_attentions),
            output_query_key=output_query_key,
        )
        logits, pooled = self.head(last_hidden_state[:, 0])
        return CrossEncoderOutput(
            loss=task_loss(logits, labels) if labels is not None else None,
            logits=logits,
            pooled=pooled,
            **internals,
        )

    @torch.inference_mode()
    def predict(
        self,
        pairs: Sequence[tuple[str, str]],
        batch_size: int = 32,
        max_length: int | None = None,
        show_progress_bar: bool = False,
    ) -> torch.Tensor:
        """Score (a, b) pairs: (N,) scores for one output, else (N, num_labels) logits."""
        if self.tokenizer is None:
            raise ValueError("tokenizer=None: this model has no tokenizer; set model.tokenizer before predict().")
        was_training = self.training
        self.eval()
        starts = range(0, len(pairs), batch_size)
        if show_progress_bar:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc="Scoring", unit="batch")
        chunks = []
        for start in starts:
            first, second = zip(*pairs[start : start + batch_size])
            enc = self.tokenizer(
                list(first), list(second), padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            )
            chunks.append(self(**{k: v.to(self.device) for k, v in enc.items()}).logits.float().cpu())
        self.train(was_training)
        logits = torch.cat(chunks) if chunks else torch.empty(0, self.config.num_labels)
        return logits.squeeze(-1) if self.config.num_labels == 1 else logits


def select_layers(depth: int, num_layers: int, strategy: str | Sequence[int]) -> list[int]:
    """0-based indices of the teacher layers a k-layer student keeps."""
    if isinstance(strategy, str):
        if strategy not in LAYER_STRATEGIES:
            raise ValueError(f"strategy={strategy!r} is not valid; choose 'first', 'uniform' or a list of layer indices.")
        if not isinstance(num_layers, int) or not 1 <= num_layers <= depth:
            raise ValueError(f"num_layers={num_layers!r} is not valid; the teacher has {depth} layers, choose 1..{depth}.")
        if strategy == "first":
            return list(range(num_layers))
        return [(i + 1) * depth // num_layers - 1 for i in range(num_layers)]
    indices = list(strategy)
    if len(indices) != num_layers or len(set(indices)) != len(indices) or any(not 0 <= i < depth for i in indices):
        raise ValueError(
            f"strategy={indices!r} is not valid for num_layers={num_layers}: give {num_layers} distinct "
            f"0-based indices in 0..{depth - 1}."
        )
    return sorted(indices)


_CROSS_ENCODER_FIELDS = {"classifier_dropout", "id2label", "label2id", "problem_type"}
