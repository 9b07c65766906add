"""Pieces shared by the Siamese and cross-encoder students: pooling, backbone access,
query/key capture, and the tokenizer that travels with a saved model.

Self-contained (imports only torch and transformers) so that it is copied next to a saved
model and works with ``trust_remote_code=True`` where ``hf_distill`` is not installed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedModel, PretrainedConfig

EAGER = "eager"
_QUERY_KEY_NAMES = (("query", "key"), ("q", "k"), ("q_lin", "k_lin"), ("q_proj", "k_proj"))
_TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "vocab.txt")


def pool_tokens(token_states: torch.Tensor, attention_mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Turn token states (B, T, d) into one vector per sequence, ignoring padding."""
    if mode == "cls":
        return token_states[:, 0]
    mask = attention_mask.unsqueeze(-1).to(token_states.dtype)
    if mode == "mean":
        return (token_states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    if mode == "max":
        filled = token_states.masked_fill(mask == 0, torch.finfo(token_states.dtype).min)
        return filled.max(1).values
    raise ValueError(f"pooling={mode!r} is not valid; choose one of 'mean', 'cls', 'max'.")


def backbone_layers(backbone: nn.Module) -> nn.ModuleList:
    """The list of transformer blocks of a BERT-family backbone."""
    for path in ("encoder.layer", "transformer.layer", "encoder.layers", "layers"):
        module = backbone
        for part in path.split("."):
            module = getattr(module, part, None)
            if module is None:
                break
        if isinstance(module, nn.ModuleList):
            return module
    raise ValueError(f"cannot find the transformer layers of {type(backbone).__name__}; expected encoder.layer or similar.")


def keep_layers(backbone: PreTrainedModel, indices: Sequence[int]) -> None:
    """Keep only the given transformer blocks (in order) and update the backbone config."""
    layers = backbone_layers(backbone)
    kept = nn.ModuleList([layers[i] for i in indices])
    for new_index, layer in enumerate(kept):
        for sub in layer.modules():
            if hasattr(sub, "layer_idx"):
                sub.layer_idx = new_index
    parent_path = {id(m): name for name, m in backbone.named_modules()}[id(layers)]
    parent = backbone.get_submodule(parent_path.rsplit(".", 1)[0]) if "." in parent_path else backbone
    setattr(parent, parent_path.rsplit(".", 1)[-1], kept)
    backbone.config.num_hidden_layers = len(indices)


def attention_implementation(backbone: PreTrainedModel) -> str:
    return getattr(backbone.config, "_attn_implementation", None) or EAGER


def require_eager_attention(backbone: PreTrainedModel, what: str = "output_attentions=True") -> None:
    """Attention probabilities only exist with eager attention: fail loudly instead of returning nothing."""
    implementation = attention_implementation(backbone)
    if implementation != EAGER:
        raise ValueError(
            f"{what} needs attention probabilities, but the backbone uses attn_implementation={implementation!r}, "
            "which does not return them; valid: 'eager'. Load the model with attn_implementation=\"eager\"."
        )


def _is_projection(module: nn.Module | None) -> bool:
    """An nn.Linear, or an adapter wrapping one (a PEFT LoRA layer keeps it as `base_layer`)."""
    return isinstance(module, nn.Linear) or isinstance(getattr(module, "base_layer", None), nn.Linear)


def _query_key_modules(layer: nn.Module) -> tuple[nn.Module, nn.Module]:
    modules = dict(layer.named_modules())
    for query_name, key_name in _QUERY_KEY_NAMES:
        for name, module in modules.items():
            if name.split(".")[-1] == query_name and _is_projection(module):
                key = modules.get(name.rsplit(".", 1)[0] + "." + key_name if "." in name else key_name)
                if _is_projection(key):
                    return module, key
    raise ValueError(f"cannot find the query/key projections in {type(layer).__name__}.")


@contextlib.contextmanager
def capture_queries_keys(backbone: PreTrainedModel) -> Iterator[dict[str, list[torch.Tensor]]]:
    """Record every layer's per-head queries and keys, shape (B, heads, T, d_head), during a forward pass.

    Forward hooks on the query/key projections: no model code is forked, gradients flow
    through the recorded tensors, and the hooks are removed on exit.
    """
    heads = backbone.config.num_attention_heads
    record: dict[str, list[torch.Tensor]] = {"queries": [], "keys": []}

    def recorder(kind: str):
        def hook(_module, _inputs, output):
            batch, length, width = output.shape
            record[kind].append(output.view(batch, length, heads, width // heads).transpose(1, 2))

        return hook

    handles = []
    for layer in backbone_layers(backbone):
        query, key = _query_key_modules(layer)
        handles.append(query.register_forward_hook(recorder("queries")))
        handles.append(key.register_forward_hook(recorder("keys")))
    try:
        yield record
    finally:
        for handle in handles:
            handle.remove()


def run_backbone(
    backbone: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    token_type_ids: torch.Tensor | None = None,
    output_hidden_states: bool | None = False,
    output_attentions: bool | None = False,
    output_query_key: bool = False,
) -> tuple[torch.Tensor, dict[str, tuple[torch.Tensor, ...] | None]]:
    """One backbone pass: the last hidden state and the internals asked for, None where not asked.

    Both students read the same internals (hidden_states, attentions, query_states, key_states);
    the dict's keys are their output fields.
    """
    if output_attentions:
        require_eager_attention(backbone)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if token_type_ids is not None:
        inputs["token_type_ids"] = token_type_ids
    capture = capture_queries_keys(backbone) if output_query_key else contextlib.nullcontext()
    with capture as record:
        out = backbone(**inputs, output_hidden_states=output_hidden_states, output_attentions=output_attentions, return_dict=True)
    internals = {
        "hidden_states": out.hidden_states if output_hidden_states else None,
        "attentions": out.attentions if output_attentions else None,
        "query_states": tuple(record["queries"]) if record else None,
        "key_states": tuple(record["keys"]) if record else None,
    }
    return out.last_hidden_state, internals


def in_length_buckets(encode, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      token_type_ids: torch.Tensor | None, buckets: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`encode(input_ids, attention_mask, token_type_ids) -> (pooled (B, d), token states (B, T, d))` run on
    `buckets` groups of rows of similar length, each cut to its own longest row, then put back in row order.

    A row's encoding does not depend on the padding after it, so the result is `encode` on the whole batch
    (token states are zero past each group's width, where they are padding), with less padding computed: a
    batch of mixed lengths pads every row to its longest. Left-padded batches, and batches of fewer than two
    rows per bucket, are encoded whole.
    """
    rows, width = input_ids.shape
    lengths = attention_mask.sum(dim=1)
    right_padded = bool((attention_mask.cumprod(dim=1).sum(dim=1) == lengths).all())
    if buckets <= 1 or rows < 2 * buckets or not right_padded:
        return encode(input_ids, attention_mask, token_type_ids)
    groups = torch.tensor_split(torch.argsort(lengths, stable=True), buckets)
    pooled, states = [], []
    for group in groups:
        cut = max(1, int(lengths[group].max()))
        types = token_type_ids[group, :cut] if token_type_ids is not None else None
        vectors, tokens = encode(input_ids[group, :cut], attention_mask[group, :cut], types)
        pooled.append(vectors)
        states.append(F.pad(tokens, (0, 0, 0, width - cut)))
    back = torch.argsort(torch.cat(groups))
    return torch.cat(pooled)[back], torch.cat(states)[back]


def detach_pooler(backbone: PreTrainedModel) -> dict | None:
    """Remove the backbone's pooler (unused pooler weights break DDP); return its dense weights if any."""
    pooler = getattr(backbone, "pooler", None)
    if pooler is None:
        return None
    backbone.pooler = None
    dense = getattr(pooler, "dense", None)
    return {k: v.detach().clone() for k, v in dense.state_dict().items()} if isinstance(dense, nn.Linear) else None


def build_backbone(config: PretrainedConfig) -> PreTrainedModel:
    """A randomly initialised backbone without its pooler."""
    backbone = AutoModel.from_config(config)
    detach_pooler(backbone)
    return backbone


def drop_local_path(config: PretrainedConfig) -> None:
    """Forget a `_name_or_path` that is a folder on this machine: meaningless elsewhere, and it would reach the Hub."""
    source = getattr(config, "_name_or_path", "")
    if source and (os.path.isabs(source) or os.path.exists(source)):
        config._name_or_path = ""


class TokenizerCarryingModel(PreTrainedModel):
    """Base class: the tokenizer is saved next to the weights and loaded back with them."""

    base_model_prefix = "backbone"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_attention_backend = True

    tokenizer = None
    _extra_auto_classes: tuple[str, ...] = ()

    def get_input_embeddings(self) -> nn.Module:
        return self.backbone.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.backbone.set_input_embeddings(value)

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs):
        if self._auto_class is not None and self._extra_auto_classes:
            target = f"{type(self).__module__.rsplit('.', 1)[-1]}.{type(self).__name__}"
            auto_map = getattr(self.config, "auto_map", None) or {}  # absent until the first save
            self.config.auto_map = {**auto_map, **dict.fromkeys(self._extra_auto_classes, target)}
        if getattr(self.config, "encoder", None) is not None:
            drop_local_path(self.config.encoder)
        super().save_pretrained(save_directory, *args, **kwargs)
        if self.tokenizer is not None and kwargs.get("is_main_process", True):
            self.tokenizer.save_pretrained(save_directory)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        model.tokenizer = _maybe_load_tokenizer(pretrained_model_name_or_path, kwargs)
        return model


def _maybe_load_tokenizer(name_or_path, kwargs: dict):
    """The tokenizer saved with the model, or None when the folder has none."""
    path = str(name_or_path)
    if os.path.isdir(path) and not any(os.path.exists(os.path.join(path, f)) for f in _TOKENIZER_FILES):
        return None
    hub_kwargs = {
        k: kwargs[k] for k in ("revision", "token", "cache_dir", "local_files_only", "trust_remote_code") if k in kwargs
    }
    try:
        return AutoTokenizer.from_pretrained(path, **hub_kwargs)
    except (OSError, ValueError):
        return None


def task_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy for class logits, MSE for a single score."""
    if logits.size(-1) == 1:
        return F.mse_loss(logits.squeeze(-1).float(), labels.float())
    return F.cross_entropy(logits.float(), labels.long())


def model_type_of(name_or_path, kwargs: dict) -> str | None:
    """The `model_type` of a checkpoint's config, without loading weights."""
    hub_kwargs = {k: kwargs[k] for k in ("revision", "token", "cache_dir", "local_files_only") if k in kwargs}
    return AutoConfig.from_pretrained(name_or_path, trust_remote_code=kwargs.get("trust_remote_code"), **hub_kwargs).model_type
