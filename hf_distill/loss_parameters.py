"""Loss-component parameters (projections) across processes: one start, averaged gradients, cleared after each step.

They live outside the DDP-wrapped student, so DDP neither broadcasts them at the start nor
all-reduces their gradients, and the Trainer only zeroes the student's gradients.
"""

from __future__ import annotations

import torch
from transformers import TrainerCallback

__all__ = ["LossParameterSync"]


class LossParameterSync(TrainerCallback):
    """Keeps the trainer's loss-component parameters identical on every rank and their gradients per step."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        """Start every rank from rank 0's parameters and buffers (each rank's RNG would initialise them differently)."""
        if self.trainer.accelerator.num_processes <= 1:
            return
        components = self.trainer.loss_components
        for tensor in [*components.parameters(), *components.buffers()]:
            torch.distributed.broadcast(tensor.data, src=0)

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.trainer.accelerator.num_processes <= 1:
            return
        for parameter in self.trainer.loss_components.parameters():
            if parameter.grad is not None:
                torch.distributed.all_reduce(parameter.grad, op=torch.distributed.ReduceOp.AVG)

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.trainer.loss_components.zero_grad(set_to_none=True)
