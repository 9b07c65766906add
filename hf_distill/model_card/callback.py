"""The card follows the run: written at the final save, refreshed when later evaluations log metrics."""

from __future__ import annotations

import os
import warnings

from transformers import TrainerCallback

from .render import write_model_card
from .speed import measure_speed

__all__ = ["ModelCardCallback", "write_card_on_save"]


def write_card_on_save(trainer, output_dir: str, adapter_only: bool) -> str | None:
    """What a final `save_model` does for the card: measure speed if asked, write README.md, remember the folder.

    A card that cannot be built only warns: the student is already saved, and a long run must not
    fail at its very end for its documentation.
    """
    try:
        if getattr(trainer.args, "measure_speed_on_save", False):
            measure_speed(trainer)
        path = write_model_card(trainer, output_dir, adapter_only=adapter_only)
    except Exception as error:  # noqa: BLE001 - reported, not swallowed
        warnings.warn(f"the model card for {output_dir} was not written: {type(error).__name__}: {error}", stacklevel=2)
        return None
    for callback in trainer.callback_handler.callbacks:  # later evaluations refresh this card
        if isinstance(callback, ModelCardCallback):
            callback.remember(output_dir, adapter_only)
    return path


class ModelCardCallback(TrainerCallback):
    """Rewrite the cards already written by a final `save_model` when new evaluation metrics are logged.

    A script that saves and then evaluates (as `hf-distill train` does) still gets the metrics in
    its card. Main process only.
    """

    def __init__(self, trainer):
        self.trainer = trainer
        self.folders: dict[str, bool] = {}  # folder -> adapter_only

    def remember(self, folder: str, adapter_only: bool) -> None:
        self.folders[os.path.abspath(folder)] = adapter_only

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not self.folders or not state.is_world_process_zero or not logs:
            return
        if any(key.startswith(("eval_", "test_")) for key in logs):
            for folder, adapter_only in self.folders.items():
                if os.path.isdir(folder):
                    try:
                        write_model_card(self.trainer, folder, adapter_only=adapter_only)
                    except Exception as error:  # noqa: BLE001 - reported, not swallowed
                        warnings.warn(f"the model card in {folder} was not refreshed: {type(error).__name__}: {error}")
