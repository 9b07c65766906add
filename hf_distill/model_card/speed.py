"""Time the student and its online teachers on the same pairs, for the card's speed table."""

from __future__ import annotations

import time

import torch

from ..batch_keys import student_view, teacher_view
from ..wrappers import unwrap_model

__all__ = ["measure_speed"]


@torch.inference_mode()
def measure_speed(trainer, dataset=None, max_pairs: int = 256, batch_size: int | None = None, min_seconds: float = 1.0) -> dict:
    """Time the student and every online teacher on the same pairs; stores and returns the speed for the card.

    Pairs come from `dataset` (default: the eval set, else the training set), at most `max_pairs`,
    batched by the trainer's own collator (`per_device_eval_batch_size`). Each model is run
    over all batches repeatedly for at least `min_seconds` after one warm-up pass.
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

    def student_inputs(batch):
        return {k: v.to(device) for k, v in student_view(batch, labels=False).items()}

    def teacher_inputs(batch, k):
        return {key: v.to(device) for key, v in teacher_view(batch, k).items()}

    def pairs_per_second(model, view) -> float:
        was_training = model.training
        model.eval()
        model(**view(batches[0]))
        done, start = 0, time.perf_counter()
        while True:
            for batch in batches:
                model(**view(batch))
            done += size
            if time.perf_counter() - start >= min_seconds:
                break
        model.train(was_training)
        return done / (time.perf_counter() - start)

    student = unwrap_model(trainer.model)
    results = [{"name": "student", "pairs_per_s": pairs_per_second(student, student_inputs)}]
    if getattr(trainer, "run_teachers_online", False):
        for k, teacher in enumerate(trainer.teachers):
            name = "teacher" if len(trainer.teachers) == 1 else f"teacher {k}"
            results.append({"name": name, "pairs_per_s": pairs_per_second(teacher, lambda b, k=k: teacher_inputs(b, k))})
    results.sort(key=lambda row: row["name"] != "student")
    device_name = torch.cuda.get_device_name(device) if getattr(device, "type", "cpu") == "cuda" else f"CPU, {torch.get_num_threads()} thread(s)"
    speed = {"rows": results, "setting": f"{size} pairs, batch {batch_size}, max_length {trainer.args.max_length}, {device_name}"}
    if hasattr(trainer, "model_card_data"):
        trainer.model_card_data.speed = speed
    return speed
