"""Facts about the student and teachers for the card: names (never an absolute local path), sizes, shapes."""

from __future__ import annotations

import os
import re
from typing import Any

from ..wrappers import unwrap_model

ADAPTER_PATH = "adapter_name_or_path"  # set on a PEFT teacher by the loader: where its adapter came from
__all__ = ["ADAPTER_PATH", "architecture", "backbone_config", "display_name", "display_path", "human", "is_hub_id",
           "num_layers", "parameters"]

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
PEFT_NAMES = {"LORA": "LoRA", "ADALORA": "AdaLoRA", "LOHA": "LoHa", "LOKR": "LoKr", "IA3": "IA3", "DORA": "DoRA"}


def is_hub_id(name: str | None) -> bool:
    """`owner/name` that is not a folder here."""
    return bool(name) and bool(_HUB_ID.match(name)) and not os.path.exists(name)


def display_name(model) -> str:
    """The model's `name_or_path` as the card may show it: a Hub id as is, a local path by its folder name only.
    A PEFT adapter teacher (`ADAPTER_PATH` set when it was loaded) is named by its adapter and its base."""
    config = getattr(unwrap_model(model), "config", None)
    name = display_path(str(getattr(config, "_name_or_path", "") or getattr(config, "name_or_path", "") or ""))
    adapter = getattr(model, ADAPTER_PATH, None)
    return f"{display_path(adapter)} (a PEFT adapter on {name or 'an unnamed base'})" if adapter else name


def display_path(name: str) -> str:
    """A Hub id as is; a local path by its folder name only (a card never shows an absolute path)."""
    if not name or is_hub_id(name):
        return name
    if os.path.isabs(name) or os.path.exists(name):
        return os.path.basename(os.path.normpath(name))
    return name


def backbone_config(model):
    """The transformer's config (an hf_distill model's `config.encoder`, else the model's own)."""
    config = unwrap_model(model).config
    return getattr(config, "encoder", None) or config


def architecture(model) -> dict[str, Any]:
    """Class, family, layers, width and heads of a model."""
    config = backbone_config(model)
    return {
        "architecture": f"{type(unwrap_model(model)).__name__} ({getattr(config, 'model_type', '?')})",
        "layers": getattr(config, "num_hidden_layers", "?"),
        "hidden": getattr(config, "hidden_size", "?"),
        "heads": getattr(config, "num_attention_heads", "?"),
    }


def parameters(model, trainable_only: bool = False) -> int:
    """Parameters of the model as saved (adapters and PEFT's copies of `modules_to_save` left out), or the trainable ones."""
    if trainable_only:
        return sum(p.numel() for p in model.parameters() if p.requires_grad)
    return sum(
        p.numel() for name, p in unwrap_model(model).named_parameters() if "lora_" not in name and ".modules_to_save." not in name
    )


def human(count: int) -> str:
    """12345678 -> '12.35M'."""
    return f"{count / 1e6:.2f}M" if count >= 1e6 else f"{count / 1e3:.1f}K" if count >= 1e3 else str(count)


def num_layers(model) -> int | None:
    return getattr(backbone_config(model), "num_hidden_layers", None)
