"""Callbacks that carry distillation schedules, with state that survives `resume_from_checkpoint`."""

from __future__ import annotations

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

ANNEALING_SCHEDULES = ("linear",)


class TeacherAnnealingCallback(TrainerCallback, ExportableState):
    """Teacher annealing (BAM, DvBERT): lambda = step / total_steps, rising 0 -> 1.

    The trainer mixes `lambda * hard + (1 - lambda) * soft`, so training starts from the
    teachers and ends on the gold labels. lambda is set at the beginning of every optimizer
    step, logged with the losses, and saved in `trainer_state.json` (ExportableState).
    """

    def __init__(self, schedule: str = "linear", current_lambda: float = 0.0):
        if schedule not in ANNEALING_SCHEDULES:
            raise ValueError(f"annealing={schedule!r} is not valid; choose one of {ANNEALING_SCHEDULES}.")
        self.schedule = schedule
        self.current_lambda = current_lambda

    @staticmethod
    def lambda_at(step: int, total_steps: int) -> float:
        return min(1.0, step / total_steps) if total_steps > 0 else 1.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.current_lambda = self.lambda_at(state.global_step, state.max_steps)

    def on_step_begin(self, args, state, control, **kwargs):
        self.current_lambda = self.lambda_at(state.global_step, state.max_steps)

    def state(self) -> dict:
        return {"args": {"schedule": self.schedule}, "attributes": {"current_lambda": self.current_lambda}}
