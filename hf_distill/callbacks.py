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


class CostAttentionCallback(TrainerCallback, ExportableState):
    """BERT-EMD cost attention: after every optimizer step, re-weight the layers by their transport cost.

    Calls `update_weights` of every `EMDLayerLoss` the trainer holds (on every rank: the costs
    are averaged across processes, so the weights stay identical), records the weight
    trajectory (saved in `trainer_state.json`), and at the end of training draws the final
    flow matrix and the trajectories as PNGs in the output folder.

    Args:
        temperature: tau_emd of the softmax update.
        mode: "softmax" (w~ / tau_emd) or "normalize" (w~ / sum w~).
        separate: keep attention and hidden weights separate instead of averaging them.
        smooth: one more softmax over each weight vector after the update (the official code's
            `add_softmax`), which keeps the weights from collapsing onto one layer.
    """

    def __init__(
        self, temperature: float = 1.0, mode: str = "softmax", separate: bool = False, history=None, smooth: bool = False
    ):
        if temperature <= 0:
            raise ValueError(f"emd_temperature={temperature!r} must be > 0.")
        if mode not in ("softmax", "normalize"):
            raise ValueError(f"emd_update={mode!r} is not valid; choose 'softmax' or 'normalize'.")
        self.temperature = temperature
        self.mode = mode
        self.separate = separate
        self.smooth = smooth
        self.history: list[dict] = list(history or [])
        self.components: list = []

    def bind(self, components) -> "CostAttentionCallback":
        """Attach the EMD loss components whose weights this callback updates."""
        self.components = [c for c in components if hasattr(c, "update_weights")]
        return self

    def on_step_end(self, args, state, control, **kwargs):
        for component in self.components:
            component.update_weights(temperature=self.temperature, mode=self.mode, separate=self.separate, smooth=self.smooth)
        if self.components:
            weights = {k: [round(float(x), 6) for x in v] for k, v in self.components[0].layer_weights().items()}
            self.history.append({"step": state.global_step, **weights})

    def on_train_end(self, args, state, control, **kwargs):
        if self.components and state.is_world_process_zero:
            from .plots import plot_emd_flow, plot_layer_weights

            plot_emd_flow(self.components[0], args.output_dir)
            plot_layer_weights(self.history, args.output_dir)

    def state(self) -> dict:
        return {
            "args": {"temperature": self.temperature, "mode": self.mode, "separate": self.separate, "smooth": self.smooth},
            "attributes": {"history": self.history},
        }
