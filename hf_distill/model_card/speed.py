"""Time the student and its online teachers on the same pairs, for the card's speed table."""

from __future__ import annotations

import torch

from ..batch_keys import student_view, teacher_view
from ..speed import time_batches
from ..wrappers import unwrap_model

__all__ = ["measure_speed"]


def measure_speed(trainer, dataset=None, max_pairs: int = 256, batch_size: int | None = None, min_seconds: float = 1.0) -> dict:
    """Time the student and every online teacher on the same pairs; stores and returns the speed for the card.

    Pairs come from `dataset` (default: the eval set, else the training set), at most `max_pairs`,
    batched by the trainer's own collator (`per_device_eval_batch_size`). Each model is timed by
    `hf_distill.speed.time_batches`: one warm-up batch, then whole passes for at least `min_seconds`.
    """
    dataset = dataset if dataset is not None else trainer.eval_dataset if trainer.eval_dataset is not None else trainer.train_dataset
    if isinstance(dataset, dict):
        dataset = next(iter(dataset.values()))
    if dataset is None or len(dataset) == 0:
        raise ValueError("measure_speed needs pairs: give a dataset, or a trainer with an eval or training set.")
    size = min(max_pairs, len(dataset))
    batch_size = batch_size or trainer.args.per_device_eval_batch_size
    rows = [dataset[i] for i in range(size)]
    batches = [trainer.data_collator(rows[i : i + batch_size]) for i in range(0, size, batch_size)]
    device = trainer.args.device

    def rate(model, view) -> float:
        """Pairs/s with the one speed meter (`hf_distill.speed.time_batches`), the model's mode restored."""
        was_training = model.training
        model.eval()
        try:
            inputs = [{k: v.to(device) for k, v in view(batch).items()} for batch in batches]
            return time_batches(lambda batch: model(**batch), inputs, size, min_seconds, torch.device(device))
        finally:
            model.train(was_training)

    student = unwrap_model(trainer.model)
    results = [{"name": "student", "pairs_per_s": rate(student, lambda batch: student_view(batch, labels=False))}]
    if getattr(trainer, "run_teachers_online", False):
        for k, teacher in enumerate(trainer.teachers):
            name = "teacher" if len(trainer.teachers) == 1 else f"teacher {k}"
            results.append({"name": name, "pairs_per_s": rate(teacher, lambda batch, k=k: teacher_view(batch, k))})
    results.sort(key=lambda row: row["name"] != "student")
    device_name = torch.cuda.get_device_name(device) if getattr(device, "type", "cpu") == "cuda" else f"CPU, {torch.get_num_threads()} thread(s)"
    speed = {"rows": results, "setting": f"{size} pairs, batch {batch_size}, max_length {trainer.args.max_length}, {device_name}"}
    if hasattr(trainer, "model_card_data"):
        trainer.model_card_data.speed = speed
    return speed
