"""Seeing through wrappers: PEFT (LoRA...) and DDP/accelerate around an hf_distill model or a teacher."""

from __future__ import annotations

from torch import nn


def unwrap_model(model: nn.Module) -> nn.Module:
    """The model under PEFT / DDP wrappers (the hf_distill student, or a teacher's base model)."""
    while True:
        if hasattr(model, "module") and isinstance(model.module, nn.Module):
            model = model.module
        elif hasattr(model, "get_base_model"):
            model = model.get_base_model()
        else:
            return model


def is_peft(model: nn.Module) -> bool:
    """A PEFT model (LoRA...) whose adapters can be merged."""
    return hasattr(model, "peft_config") and hasattr(model, "merge_and_unload")
