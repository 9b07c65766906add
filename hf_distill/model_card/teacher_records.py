"""What a card says about each teacher: its name (never an absolute path), size and recorded results.

An online teacher is described from the model object; a teacher whose logits were precomputed
(`add_teacher_logits`) is gone by the time the student is saved, so its record travels with the
labelled dataset: JSON on one line of the dataset's `info.description`, which `map`, `select`,
`concatenate_datasets` and `save_to_disk` / `load_from_disk` keep.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..wrappers import unwrap_model
from .models import architecture, display_name, parameters

__all__ = ["NAMELESS", "dataset_teachers", "describe", "record_teacher", "recorded_results", "results_text", "run_teachers",
           "teacher_record"]

NAMELESS = "an in-memory teacher without a name_or_path"
RESULT_FILES = ("eval_results.json", "test_results.json", "all_results.json")  # what Trainer.save_metrics writes
_SPLITS = {"eval": "validation", "test": "test"}
_NOT_METRICS = ("loss", "runtime", "samples_per_second", "steps_per_second", "samples", "epoch")
_MARK = "hf_distill teachers: "


def recorded_results(folder: str) -> dict[str, dict[str, float]]:
    """{split: {metric: value}} from the results a `Trainer` saved into the model's folder (eval_results.json,
    test_results.json, all_results.json); {} when the folder holds none."""
    results: dict[str, dict[str, float]] = {}
    for file in RESULT_FILES:
        path = os.path.join(folder, file)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                saved = json.load(handle)
        except (OSError, ValueError):
            continue
        for key, value in saved.items() if isinstance(saved, dict) else ():
            prefix, _, metric = key.partition("_")
            if prefix in _SPLITS and metric and not metric.endswith(_NOT_METRICS) and _is_number(value):
                results.setdefault(_SPLITS[prefix], {}).setdefault(metric, float(value))
    return results


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def teacher_record(model) -> dict[str, Any]:
    """{name, architecture, layers, hidden, heads, parameters, results} of a teacher model: its name_or_path
    as `display_name` shows it ("" when it has none), and the results saved in its folder when it has one."""
    config = getattr(unwrap_model(model), "config", None)
    path = str(getattr(config, "_name_or_path", "") or "")
    return {
        "name": display_name(model), **architecture(model), "parameters": parameters(model),
        "results": recorded_results(path) if path and os.path.isdir(path) else {},
    }


def record_teacher(dataset, column: str, model):
    """`dataset` whose description records `model` (`teacher_record`) as the teacher of `column`."""
    records = dict(dataset_teachers(dataset), **{column: teacher_record(model)})
    lines = [line for line in (dataset.info.description or "").splitlines() if not line.startswith(_MARK)]
    dataset.info.description = "\n".join([*lines, _MARK + json.dumps(records, sort_keys=True)])
    return dataset


def dataset_teachers(dataset) -> dict[str, dict[str, Any]]:
    """{column: teacher record} that `record_teacher` left in the dataset's description ({} when none)."""
    info = getattr(dataset, "info", None)
    for line in (getattr(info, "description", None) or "").splitlines():
        if line.startswith(_MARK):
            try:
                records = json.loads(line[len(_MARK):])
            except ValueError:
                return {}
            return records if isinstance(records, dict) else {}
    return {}


def run_teachers(trainer, given: list) -> list[dict[str, Any]]:
    """One record per teacher of the run: the online teachers' own; else `given` (model_card_data.teachers:
    names or records); else, per offline logits column, what the training set recorded ({} when nothing)."""
    teachers = list(getattr(trainer, "teachers", []) or [])
    if teachers:
        return [teacher_record(teacher) for teacher in teachers]
    if given:
        return [dict(entry) if isinstance(entry, dict) else {"name": str(entry)} for entry in given]
    dataset = getattr(trainer, "train_dataset", None)
    recorded = dataset_teachers(dataset) if dataset is not None else {}
    return [dict(recorded.get(column) or {}, column=column) for column in getattr(trainer, "offline_columns", []) or []]


def describe(record: dict[str, Any]) -> str:
    """How the card names a teacher: `name`; NAMELESS for a model without one; for a precomputed column
    whose teacher the dataset does not record, what to do about it."""
    if record.get("name"):
        return f"`{record['name']}`"
    if "column" in record and "parameters" not in record:
        return f"the unnamed teacher of `{record['column']}` (name it with `trainer.model_card_data.teachers`)"
    return NAMELESS


def results_text(results: dict[str, dict[str, float]]) -> str:
    """'validation accuracy 0.8125, f1 0.8571; test accuracy 0.8' from {split: {metric: value}}."""
    return "; ".join(
        f"{split} " + ", ".join(f"{metric} {value:.4g}" for metric, value in metrics.items())
        for split, metrics in results.items() if metrics
    )
