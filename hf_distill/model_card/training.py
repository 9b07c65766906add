"""What the card says about the run: data, evaluation results, hyperparameters, library versions."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

import torch
from transformers import TrainingArguments

from ..citations import Method
from ..losses.registry import switch_arguments
from .losses import active_terms

__all__ = ["as_list", "data_text", "dataset_id", "evaluation", "hparams", "task", "versions"]

_CACHED_HUB_DATASET = re.compile(r"[/\\]([^/\\]+?)___([^/\\]+?)[/\\]")
_NOT_METRICS = ("runtime", "samples_per_second", "steps_per_second", "epoch", "samples")
_SPLIT_OF_PREFIX = {"eval": "validation", "test": "test"}


def dataset_id(dataset) -> str | None:
    """The Hub id of a dataset loaded from the Hub (from its cache path), else None."""
    for part in dataset.values() if isinstance(dataset, dict) else [dataset]:
        for cache in getattr(part, "cache_files", None) or []:
            match = _CACHED_HUB_DATASET.search(cache.get("filename", ""))
            if match:
                return f"{match.group(1)}/{match.group(2)}"
    return None


def as_list(value) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [v for v in value if v]


def evaluation(trainer) -> list[dict[str, Any]]:
    """The last value of every metric, per prefix (`eval_` -> validation, `test_` -> test), from the log history."""
    latest: dict[str, dict[str, float]] = {}
    for entry in trainer.state.log_history:
        for key, value in entry.items():
            prefix, _, metric = key.partition("_")
            if prefix not in _SPLIT_OF_PREFIX or not metric or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if metric.endswith(_NOT_METRICS):
                continue
            latest.setdefault(prefix, {})[metric] = float(value)
    return [
        {"prefix": prefix, "split": _SPLIT_OF_PREFIX.get(prefix, prefix), "metrics": metrics}
        for prefix, metrics in latest.items()
        if metrics
    ]


def task(student, siamese: bool) -> tuple[str, str]:
    """(pipeline_tag, task name) for the student."""
    if siamese:
        return "sentence-similarity", "Sentence Similarity"
    if student.config.num_labels == 1:
        return "text-ranking", "Text Ranking"
    return "text-classification", "Text Classification"


def hparams(trainer, methods: list[Method], world_size: int) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """The distillation fields that matter for the methods run (and any other changed from its default), and training's."""
    args = trainer.args
    keys = {m.key for m in methods}
    components = list({id(a.component): a.component for a in active_terms(trainer)}.values())
    shown = ["temperature", "annealing", "max_length"]
    if args.annealing != "linear":
        shown += ["hard_weight", "soft_weight"] if args.hard_weight is not None or args.soft_weight is not None else ["alpha"]
    if len(getattr(trainer, "teachers", []) or getattr(trainer, "offline_columns", [])) > 1:
        shown.append("teacher_reduction")
    shown += [c.switch for c in components if c.switch]
    if any(c.layer_outputs for c in components):
        shown += ["attention_loss", "layer_mapping", "shared_projection"]
    if "bert_emd" in keys:
        shown += ["emd_temperature", "emd_update", "emd_separate_weights", "emd_smooth_weights"]
    base = {f.name for f in fields(TrainingArguments)}
    switches = set(switch_arguments()) - set(shown)  # weights of components that are off: 0, nothing to show
    hidden = {"merge_adapters_on_save", "measure_speed_on_save"}
    for f in fields(args):
        if f.name in base or f.name in hidden or not f.init or f.name in shown or f.name in switches:
            continue
        default = f.default_factory() if callable(f.default_factory) else f.default
        if getattr(args, f.name) != default:
            shown.append(f.name)
    order = [f.name for f in fields(args)]
    distillation = [(name, _format(getattr(args, name))) for name in sorted(shown, key=order.index)]
    batch = args.per_device_train_batch_size * args.gradient_accumulation_steps * world_size
    steps = args.max_steps if args.max_steps and args.max_steps > 0 else None
    training = [
        ("learning_rate", _format(args.learning_rate)),
        ("per_device_train_batch_size", args.per_device_train_batch_size),
        ("gradient_accumulation_steps", args.gradient_accumulation_steps),
        ("processes", world_size),
        ("total_train_batch_size", batch),
        ("max_steps", steps) if steps else ("num_train_epochs", _format(args.num_train_epochs)),
        ("optim", getattr(args.optim, "value", args.optim)),
        ("lr_scheduler_type", getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)),
        ("warmup_steps", _format(args.warmup_steps)),
        ("weight_decay", _format(args.weight_decay)),
        ("precision", "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32"),
        ("seed", args.seed),
    ]
    return distillation, training


def _format(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return value


def versions() -> dict[str, str]:
    import huggingface_hub
    import transformers

    from .. import __version__

    versions = {"hf_distill": __version__, "transformers": transformers.__version__, "torch": torch.__version__}
    try:
        import peft

        versions["peft"] = peft.__version__
    except ImportError:  # pragma: no cover - peft is a dependency
        pass
    versions["huggingface_hub"] = huggingface_hub.__version__
    return versions


def data_text(trainer, datasets: list[str]) -> str:
    train = trainer.train_dataset
    if train is None:
        return "No training set was given to the trainer."
    rows = len(train) if hasattr(train, "__len__") else "?"
    collator = trainer.data_collator
    columns = getattr(collator, "text_columns", None)
    label = trainer.args.label_column if getattr(trainer, "_has_labels", True) else None
    where = f"[{datasets[0]}](https://huggingface.co/datasets/{datasets[0]})" if datasets else "local data"
    parts = [f"{rows} training {'pairs' if not columns or len(columns) > 1 else 'sentences'} from {where}"]
    if columns:
        parts.append(f"text column{'s' if len(columns) > 1 else ''} " + " / ".join(f"`{c}`" for c in columns))
    parts.append(f"label column `{label}`" if label else "no gold labels (teachers only)")
    return "; ".join(parts) + "."
