"""Siamese bi-encoder student: one backbone encodes each side of a pair independently.

Self-contained (relative imports only) so a saved model loads with ``trust_remote_code=True``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoModel, AutoTokenizer, PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_hf_distill import SiameseConfig
from .modeling_common import (
    TokenizerCarryingModel,
    build_backbone,
    detach_pooler,
    in_length_buckets,
    model_type_of,
    pool_tokens,
    run_backbone,
    task_loss,
)
from .virt_interaction import VirtInteraction


@dataclass
class SiameseEncoding(ModelOutput):
    """One side encoded: pooled embedding, token states and, on request, per-layer internals."""

    embeddings: torch.Tensor | None = None
    last_hidden_state: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    query_states: tuple[torch.Tensor, ...] | None = None
    key_states: tuple[torch.Tensor, ...] | None = None


@dataclass
class SiameseOutput(ModelOutput):
    """Output of [`SiameseModel`].

    Args:
        loss: task loss (cross-entropy, or MSE for the cosine head) when labels are given.
        logits: (B, num_labels) class scores, or (B, 1) cosine similarity; None for head="none".
        embeddings_a / embeddings_b: pooled sentence embeddings u and v (each side alone, also with
            interaction="virt", whose logits come from the interaction layer instead).
        side_a / side_b: [`SiameseEncoding`] of each side (hidden states, attentions, queries/keys on request).
    """

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    embeddings_a: torch.Tensor | None = None
    embeddings_b: torch.Tensor | None = None
    side_a: SiameseEncoding | None = None
    side_b: SiameseEncoding | None = None


class SiameseModel(TokenizerCarryingModel):
    """A bi-encoder: u = pool(encoder(a)), v = pool(encoder(b)); a head scores the pair.

    Example:
        >>> model = SiameseModel.from_backbone("sentence-transformers/all-MiniLM-L6-v2", head="cosine")
        >>> embeddings = model.encode(["A man is eating.", "Someone eats."], normalize=True)
    """

    config_class = SiameseConfig
    config: SiameseConfig

    def __init__(self, config: SiameseConfig, backbone: PreTrainedModel | None = None):
        super().__init__(config)
        self.backbone = backbone if backbone is not None else build_backbone(config.encoder)
        hidden = config.encoder.hidden_size
        self.dropout = nn.Dropout(config.classifier_dropout)
        # an optional learned output layer on the pooled embeddings (a distillation projection kept by the student)
        self.output_projection = nn.Linear(hidden, config.output_dim) if config.output_dim else None
        if config.interaction == "virt":
            # u = pool([H_X ; X~]) has 2 * hidden features; the head reads [u; v; |u-v|; max(u, v)] (+ u*v).
            self.interaction = VirtInteraction()
            features = (5 if config.use_product else 4) * 2 * hidden
        else:
            features = (4 if config.use_product else 3) * self.embedding_dim
        if config.head == "classification":
            self.classifier = nn.Linear(features, config.num_labels)
        self.post_init()

    @property
    def embedding_dim(self) -> int:
        """Width of the sentence embeddings: `output_dim` when the model has an output layer, else the backbone's."""
        return self.config.output_dim or self.config.encoder.hidden_size

    def add_output_layer(self, layer: nn.Linear) -> None:
        """Make `layer` (Linear(hidden, d)) the output layer of the embeddings; `config.output_dim` becomes d.

        Only for heads that do not read the embedding width (cosine, none) and without interaction.
        """
        hidden = self.config.encoder.hidden_size
        if not isinstance(layer, nn.Linear) or layer.in_features != hidden:
            raise ValueError(f"add_output_layer({layer!r}) is not valid; give an nn.Linear with in_features={hidden}.")
        if self.config.head == "classification" or self.config.interaction != "none" or self.output_projection is not None:
            raise ValueError(
                f"add_output_layer needs a model without an output layer, with head 'cosine' or 'none' and no interaction; "
                f"this one has head={self.config.head!r}, interaction={self.config.interaction!r}, output_dim={self.config.output_dim}."
            )
        self.output_projection = layer.to(device=self.device, dtype=self.dtype)
        self.config.output_dim = layer.out_features

    # ------------------------------------------------------------------ building
    @classmethod
    def from_backbone(
        cls,
        backbone: str | os.PathLike | PreTrainedModel,
        tokenizer=None,
        pooling: str = "mean",
        head: str = "classification",
        num_labels: int = 2,
        **kwargs,
    ) -> "SiameseModel":
        """Wrap a pretrained backbone (Hub id, local folder or model) as a Siamese student.

        Extra keyword arguments that are `SiameseConfig` fields (use_product, id2label, label2id,
        classifier_dropout...) configure the student; the others (attn_implementation, dtype,
        revision...) go to `AutoModel.from_pretrained`.
        """
        config_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _SIAMESE_FIELDS}
        if head == "cosine":
            num_labels = 1
        probe = SiameseConfig(pooling=pooling, head=head, num_labels=num_labels, **config_kwargs)  # validate first
        if isinstance(backbone, (str, os.PathLike)):
            name = str(backbone)
            backbone = AutoModel.from_pretrained(name, **kwargs)
            tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(name)
        detach_pooler(backbone)
        probe.encoder = backbone.config
        model = cls(probe, backbone=backbone)
        model.tokenizer = tokenizer
        return model

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """Load a saved Siamese student, or wrap a plain backbone checkpoint (like sentence-transformers)."""
        if "config" not in kwargs and model_type_of(pretrained_model_name_or_path, kwargs) != SiameseConfig.model_type:
            return cls.from_backbone(str(pretrained_model_name_or_path), **kwargs)
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    # ------------------------------------------------------------------ forward
    def encode_side(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        output_query_key: bool = False,
        length_buckets: int = 1,
    ) -> SiameseEncoding:
        """Encode one side alone and pool it. `length_buckets` > 1 encodes its rows in that many groups of similar
        length, each padded to its own longest (`in_length_buckets`): the same embeddings, less padding; only
        without the internals (hidden states, attentions, queries/keys)."""
        if length_buckets > 1 and not (output_hidden_states or output_attentions or output_query_key):
            embeddings, last_hidden_state = in_length_buckets(
                self._pooled, input_ids, attention_mask, token_type_ids, length_buckets)
            return SiameseEncoding(embeddings=embeddings, last_hidden_state=last_hidden_state)
        last_hidden_state, internals = run_backbone(
            self.backbone,
            input_ids,
            attention_mask,
            token_type_ids,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            output_query_key=output_query_key,
        )
        return SiameseEncoding(embeddings=self._pool(last_hidden_state, attention_mask), last_hidden_state=last_hidden_state,
                               **internals)

    def _pool(self, last_hidden_state: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The sentence embeddings of token states: pooled, then through the output layer if there is one."""
        embeddings = pool_tokens(last_hidden_state, attention_mask, self.config.pooling)
        return self.output_projection(embeddings) if self.output_projection is not None else embeddings

    def _pooled(self, input_ids, attention_mask, token_type_ids=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(pooled embeddings, last hidden state) of one side, without internals."""
        last_hidden_state, _ = run_backbone(self.backbone, input_ids, attention_mask, token_type_ids)
        return self._pool(last_hidden_state, attention_mask), last_hidden_state

    def score(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor | None:
        """Apply the head to two embeddings: class logits (B, C) or cosine (B, 1).

        With interaction="virt", u and v are the interaction outputs of `interact` (2 * hidden wide)
        and the classifier reads [u; v; |u-v|; max(u, v)] (+ u*v).
        """
        if self.config.head == "cosine":
            return F.cosine_similarity(u, v, dim=-1).unsqueeze(-1)
        if self.config.head == "classification":
            features = [u, v, (u - v).abs()]
            if self.config.interaction == "virt":
                features.append(torch.maximum(u, v))
            if self.config.use_product:
                features.append(u * v)
            return self.classifier(self.dropout(torch.cat(features, dim=-1)))
        return None

    def interact(
        self,
        side_a: SiameseEncoding,
        side_b: SiameseEncoding,
        attention_mask_a: torch.Tensor,
        attention_mask_b: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The VIRT-adapted interaction (interaction="virt"): pooled [H_X ; X~] and [H_Y ; Y~].

        X~ = mean_h softmax(Q_X K_Y^T / sqrt(d_head) + mask_Y) H_Y with the last layer's own
        queries/keys (see `virt_interaction`). Each side must come from `encode_side(...,
        output_query_key=True)`, so encodings can be computed once, stored, and matched later.
        """
        for name, side in (("side_a", side_a), ("side_b", side_b)):
            if side.query_states is None or side.key_states is None or side.last_hidden_state is None:
                raise ValueError(
                    f"{name} has query_states=None: the VIRT interaction needs each side's last hidden state and "
                    "last-layer queries/keys; encode it with encode_side(..., output_query_key=True)."
                )
        fused_a, fused_b = self.interaction(
            side_a.last_hidden_state, side_a.query_states[-1], side_a.key_states[-1], attention_mask_a,
            side_b.last_hidden_state, side_b.query_states[-1], side_b.key_states[-1], attention_mask_b,
        )
        pooling = self.config.pooling
        return pool_tokens(fused_a, attention_mask_a, pooling), pool_tokens(fused_b, attention_mask_b, pooling)

    def forward(
        self,
        input_ids_a: torch.Tensor,
        attention_mask_a: torch.Tensor,
        input_ids_b: torch.Tensor | None = None,
        attention_mask_b: torch.Tensor | None = None,
        token_type_ids_a: torch.Tensor | None = None,
        token_type_ids_b: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        output_query_key: bool = False,
        return_dict: bool = True,
        length_buckets: int = 1,
        **_unused,
    ) -> SiameseOutput:
        """Encode each side (`length_buckets`: see `encode_side`), score the pair with the head when there are two."""
        virt = self.config.interaction == "virt" and input_ids_b is not None
        flags = dict(
            output_hidden_states=bool(output_hidden_states),
            output_attentions=bool(output_attentions),
            output_query_key=output_query_key or virt,  # the VIRT interaction reads the last layer's queries/keys
            length_buckets=length_buckets,
        )
        side_a = self.encode_side(input_ids_a, attention_mask_a, token_type_ids_a, **flags)
        side_b = None
        logits = None
        if input_ids_b is not None:
            side_b = self.encode_side(input_ids_b, attention_mask_b, token_type_ids_b, **flags)
            if virt:
                logits = self.score(*self.interact(side_a, side_b, attention_mask_a, attention_mask_b))
            else:
                logits = self.score(side_a.embeddings, side_b.embeddings)
        loss = task_loss(logits, labels) if labels is not None and logits is not None else None
        return SiameseOutput(
            loss=loss,
            logits=logits,
            embeddings_a=side_a.embeddings,
            embeddings_b=side_b.embeddings if side_b is not None else None,
            side_a=side_a,
            side_b=side_b,
        )

    # ------------------------------------------------------------------ inference
    @torch.inference_mode()
    def encode(
        self,
        texts: str | Sequence[str],
        batch_size: int = 32,
        show_progress_bar: bool = False,
        normalize: bool = False,
        max_length: int | None = None,
        convert_to_numpy: bool = False,
    ):
        """Embed sentences in batches (longest first, order restored), like `SentenceTransformer.encode`."""
        if self.tokenizer is None:
            raise ValueError("tokenizer=None: this model has no tokenizer; set model.tokenizer before encode().")
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r} must be >= 1.")
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        was_training = self.training
        self.eval()
        chunks = []
        starts = range(0, len(texts), batch_size)
        if show_progress_bar:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc="Encoding", unit="batch")
        for start in starts:
            batch = [texts[i] for i in order[start : start + batch_size]]
            enc = self.tokenizer(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            enc = {k: v.to(self.device) for k, v in enc.items()}
            side = self.encode_side(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))
            chunks.append(side.embeddings.float())
        self.train(was_training)
        stacked = torch.cat(chunks) if chunks else torch.empty(0, self.embedding_dim)
        embeddings = torch.empty_like(stacked)
        embeddings[torch.tensor(order, dtype=torch.long)] = stacked
        if normalize:
            embeddings = F.normalize(embeddings, dim=-1)
        embeddings = embeddings[0] if single else embeddings
        return embeddings.cpu().numpy() if convert_to_numpy else embeddings


_SIAMESE_FIELDS = {"use_product", "interaction", "classifier_dropout", "id2label", "label2id", "problem_type", "output_dim"}
