"""Checkpoints that resume exactly: the loss components' state beside the Trainer's, written atomically.

A checkpoint folder is complete once `trainer_state.json` is in it (the Trainer writes it last);
`distillation_state.safetensors` (projections, EMD layer weights) is written before, through a
temporary file and `os.replace`, so a crash while saving never leaves half of it.
"""

from __future__ import annotations

import os
import re

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

__all__ = [
    "DISTILLATION_STATE_NAME",
    "check_complete",
    "last_complete_checkpoint",
    "load_distillation_state",
    "save_distillation_state",
]

DISTILLATION_STATE_NAME = "distillation_state.safetensors"


def last_complete_checkpoint(folder: str) -> str | None:
    """The highest-numbered `checkpoint-N` in `folder` that holds `trainer_state.json` (written last), or None."""
    if not os.path.isdir(folder):
        return None
    steps = []
    for name in os.listdir(folder):
        match = re.fullmatch(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)", name)
        if match and os.path.isfile(os.path.join(folder, name, TRAINER_STATE_NAME)):
            steps.append((int(match.group(1)), name))
    return os.path.join(folder, max(steps)[1]) if steps else None


def resolve_resume(resume_from_checkpoint, output_dir: str):
    """`True` (or a recipe's 'true' / 'last') -> the last complete checkpoint in `output_dir` (an error when there is
    none); else as given."""
    if isinstance(resume_from_checkpoint, str) and resume_from_checkpoint.lower() in ("true", "last"):
        resume_from_checkpoint = True
    if resume_from_checkpoint is not True:
        return resume_from_checkpoint
    found = last_complete_checkpoint(output_dir)
    if found is None:
        raise ValueError(
            f"resume_from_checkpoint=True but output_dir={output_dir!r} holds no complete checkpoint "
            f"(a {PREFIX_CHECKPOINT_DIR}-N folder with {TRAINER_STATE_NAME}); give a checkpoint path or start afresh."
        )
    return found


def check_complete(checkpoint: str) -> None:
    """Refuse a checkpoint folder without `trainer_state.json` (the run stopped while saving it)."""
    if os.path.isfile(os.path.join(checkpoint, TRAINER_STATE_NAME)):
        return
    previous = last_complete_checkpoint(os.path.dirname(os.path.abspath(checkpoint)))
    raise ValueError(
        f"resume_from_checkpoint={str(checkpoint)!r} is incomplete: it has no {TRAINER_STATE_NAME} "
        "(the run stopped while saving it). Resume from a complete checkpoint"
        + (f", e.g. {previous!r}" if previous else "")
        + " (resume_from_checkpoint=True picks the last complete one)."
    )


def distillation_state(components: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and buffers of every loss component (projections, EMD layer weights), on the CPU."""
    return {k: v.detach().cpu().contiguous() for k, v in components.state_dict().items()}


def save_distillation_state(components: nn.Module, folder: str) -> None:
    """Write the components' state into `folder` atomically (nothing when they hold none)."""
    state = distillation_state(components)
    if not state:
        return
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, DISTILLATION_STATE_NAME + ".tmp")
    save_file(state, temporary)
    os.replace(temporary, os.path.join(folder, DISTILLATION_STATE_NAME))


def load_distillation_state(components: nn.Module, folder: str, device: str) -> None:
    """Restore the components' state from `folder`; a missing file is an error when they hold state."""
    path = os.path.join(folder, DISTILLATION_STATE_NAME)
    if os.path.exists(path):
        components.load_state_dict(load_file(path, device=device))
    elif distillation_state(components):
        raise FileNotFoundError(
            f"{path} is missing: the checkpoint has no distillation state (projections, EMD weights) to resume."
        )
