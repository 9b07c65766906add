"""Build the model card (README.md) of a trainer's student from what the trainer saw, and write it."""

from __future__ import annotations

import os
from importlib import resources
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ..wrappers import is_peft, unwrap_model
from .card_data import DistillationModelCardData
from .losses import citations, detect_methods, emd_pictures, has_teachers, loss_rows, mappings
from .models import PEFT_NAMES, architecture, backbone_config, display_name, human, is_hub_id, parameters
from .teacher_records import NAMELESS, describe, results_text, run_teachers
from .training import as_list, data_text, dataset_id, evaluation, hparams, task, versions

__all__ = ["build_model_card", "write_model_card"]

TEMPLATE_NAME = "distilled_student.md"


def _template_path(data: DistillationModelCardData) -> str:
    if data.template_path:
        return str(data.template_path)
    return str(resources.files("hf_distill") / "templates" / TEMPLATE_NAME)


def _card_metadata(trainer, data, student, siamese, methods, teacher_names, model_name, adapter_only) -> tuple[ModelCardData, list, str | None]:
    """Hub metadata (tags, base model, datasets, eval results) and the evaluation splits it came from."""
    pipeline_tag, task_name = task(student, siamese)
    base_model = as_list(data.base_model) or [n for n in teacher_names if is_hub_id(n)]
    if not base_model:
        backbone = getattr(backbone_config(student), "_name_or_path", "") or display_name(student)
        base_model = [backbone] if is_hub_id(backbone) else []
    train_id = dataset_id(trainer.train_dataset) if trainer.train_dataset is not None else None
    datasets = as_list(data.datasets) or ([train_id] if train_id else [])
    tags = ["hf_distill", *(["knowledge-distillation"] if has_teachers(trainer) or methods else [])]
    tags += [tag for method in methods for tag in method.tags]
    tags = list(dict.fromkeys([*tags, "bi-encoder" if siamese else "cross-encoder", *data.tags]))
    splits = evaluation(trainer)
    eval_id = (dataset_id(trainer.eval_dataset) if trainer.eval_dataset is not None else None) or (datasets[0] if datasets else None)
    eval_results = [
        EvalResult(
            task_type=pipeline_tag, task_name=task_name, dataset_type=eval_id or "custom",
            dataset_name=eval_id or f"{split['split']} set", dataset_split=split["split"], metric_type=metric,
            metric_name=metric.replace("_", " "), metric_value=round(value, 6),
        )
        for split in splits
        for metric, value in split["metrics"].items()
        if metric != "loss"
    ]
    card_data = ModelCardData(
        model_name=model_name, library_name="peft" if adapter_only else "transformers",
        pipeline_tag=pipeline_tag, tags=tags, base_model=(base_model[0] if len(base_model) == 1 else base_model) or None,
        datasets=datasets or None, language=data.language, license=data.license,
        metrics=list(dict.fromkeys(r.metric_type for r in eval_results)) or None, eval_results=eval_results or None,
    )
    return card_data, splits, eval_id


def _role(k: int, records: list[dict]) -> str:
    return f"teacher {k}" if len(records) > 1 else "teacher"


def _size_rows(trainer, student, records: list[dict], model_name) -> tuple[list[dict], str | None]:
    """One row per model whose size is known (parameters, shape) and the student's size as a share of the
    first teacher's."""
    student_params = parameters(student)
    rows = [{
        "role": "student" + (" (LoRA)" if is_peft(trainer.model) else ""), "name": model_name,
        "parameters": human(student_params), **architecture(student),
    }]
    for k, record in enumerate(records):
        if record.get("parameters"):
            rows.append({
                **{key: record.get(key, "?") for key in ("architecture", "layers", "hidden", "heads")},
                "role": _role(k, records), "name": record.get("name") or NAMELESS, "parameters": human(record["parameters"]),
            })
    first = records[0].get("parameters") if records else None
    ratio = f"{100 * student_params / first:.1f}%" if first else None
    return rows, ratio


def _notes(trainer, teachers, records: list[dict], adapter_only: bool) -> list[str]:
    """PEFT teachers and students, offline teachers, the teachers' own saved results."""
    notes = [f"teacher {k} is a PEFT model: its adapter is active during distillation." for k, t in enumerate(teachers) if is_peft(t)]
    if not teachers and getattr(trainer, "offline_columns", None):
        notes.append(
            f"Offline teachers: logits precomputed once into the columns {', '.join(trainer.offline_columns)} "
            f"(`hf_distill.teachers.add_teacher_logits`); teacher models: {', '.join(map(describe, records))}."
        )
    notes += [
        f"{_role(k, records).capitalize()} {describe(record)}, results saved with it: {results_text(record['results'])}."
        for k, record in enumerate(records) if results_text(record.get("results") or {})
    ]
    if is_peft(trainer.model):
        config = next(iter(trainer.model.peft_config.values()))
        trainable = parameters(trainer.model, trainable_only=True)
        kind = PEFT_NAMES.get(str(getattr(config.peft_type, "value", config.peft_type)), type(config).__name__)
        notes.append(
            f"The student was trained with {kind} "
            f"(r={getattr(config, 'r', '?')}, alpha={getattr(config, 'lora_alpha', '?')}, "
            f"target modules {sorted(getattr(config, 'target_modules', None) or [])}; {human(trainable)} trainable "
            "parameters)" + ("; this folder holds the adapter only." if adapter_only else "; the adapters are merged into these weights.")
        )
    return notes


def build_model_card(trainer, output_dir: str | None = None, adapter_only: bool | None = None) -> ModelCard:
    """The model card of the trainer's student, as `huggingface_hub.ModelCard` (not written).

    Args:
        trainer: a `DistillationTrainer` (trained or not).
        output_dir: the folder the card describes (for the EMD pictures); default `args.output_dir`.
        adapter_only: the folder holds a PEFT adapter, not the merged student (default: a PEFT
            student saved without `merge_adapters_on_save`).
    """
    from ..modeling import SiameseModel

    args = trainer.args
    output_dir = output_dir or args.output_dir
    data: DistillationModelCardData = getattr(trainer, "model_card_data", None) or DistillationModelCardData()
    student = unwrap_model(trainer.model)
    siamese = isinstance(student, SiameseModel)
    if adapter_only is None:
        adapter_only = is_peft(trainer.model) and not getattr(args, "merge_adapters_on_save", False)
    methods = detect_methods(trainer)
    teachers = list(getattr(trainer, "teachers", []) or [])
    records = run_teachers(trainer, list(data.teachers))
    world_size = getattr(trainer.accelerator, "num_processes", 1) if hasattr(trainer, "accelerator") else 1
    model_name = data.model_name or (args.hub_model_id or "").split("/")[-1] or os.path.basename(os.path.abspath(output_dir))
    teacher_names = [record.get("name") or "" for record in records]
    card_data, splits, eval_id = _card_metadata(trainer, data, student, siamese, methods, teacher_names, model_name, adapter_only)
    size_rows, size_ratio = _size_rows(trainer, student, records, model_name)
    loss_formula, loss_note, terms = loss_rows(trainer)
    distillation_hparams, training_hparams = hparams(trainer, methods, world_size)
    train_result = next((e for e in reversed(trainer.state.log_history) if "train_loss" in e), None)
    return _render(
        card_data, _template_path(data),
        model_name=model_name, repo_id=args.hub_model_id or model_name,
        summary=_summary(student, siamese, methods, records, parameters(student), size_ratio),
        adapter_only=adapter_only, base_student=display_name(student) or "path/to/base/student", siamese=siamese,
        num_labels=student.config.num_labels, methods=methods,
        methods_text=", ".join(m.name for m in methods) or "none (plain fine-tuning on the gold labels)",
        loss_formula=loss_formula, loss_note=loss_note, terms=terms, size_rows=size_rows, size_ratio=size_ratio,
        notes=_notes(trainer, teachers, records, adapter_only), speed=_speed_rows(data.speed), mappings=mappings(trainer),
        emd_pictures=emd_pictures(trainer, output_dir), data_text=data_text(trainer, as_list(card_data.datasets)),
        distillation_hparams=distillation_hparams, training_hparams=training_hparams,
        training_result=(
            f"Training ran {trainer.state.global_step} optimizer steps on {world_size} process(es); "
            f"mean training loss {train_result['train_loss']:.4f}." if train_result else None
        ),
        evaluation=[
            {
                "title": f"{split['split']} set" + (f" ({eval_id})" if eval_id else ""),
                "metrics": [{"name": m, "value": f"{v:.4f}"} for m, v in split["metrics"].items()],
            }
            for split in splits
        ],
        versions=versions(), citations=citations(trainer, methods),
    )


def _render(card_data: ModelCardData, template_path: str, **values: Any) -> ModelCard:
    """Like `ModelCard.from_template`, with Jinja2's trim_blocks/lstrip_blocks so block tags leave no blank lines."""
    import jinja2

    with open(template_path, encoding="utf-8") as handle:
        template = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True).from_string(handle.read())
    return ModelCard(template.render(card_data=card_data.to_yaml(), **values))


def _summary(student, siamese, methods, records: list[dict], params, ratio) -> str:
    config = backbone_config(student)
    family = "Siamese bi-encoder" if siamese else "cross-encoder"
    shape = f"{getattr(config, 'num_hidden_layers', '?')}-layer {getattr(config, 'model_type', '')} {family}".replace("  ", " ")
    text = f"A {shape} ({human(params)} parameters, `hf_distill.{type(student).__name__}`)"
    if not methods:
        return text + " fine-tuned with `hf_distill.DistillationTrainer` (no teacher)."
    who = ", ".join(map(describe, records)) or "teacher logits whose teacher the training set does not name"
    size = f", {ratio} of the teacher's size" if ratio else ""
    return f"{text} distilled from {who}{size} with {', '.join(m.name for m in methods)}, by `hf_distill.DistillationTrainer`."


def _speed_rows(speed: dict[str, Any] | None) -> dict[str, Any] | None:
    """Rows of the speed table; speed-ups are relative to the last row (a teacher, when one was timed)."""
    if not speed or not speed.get("rows"):
        return None
    reference = speed["rows"][-1]
    rows = [
        {
            "name": row["name"],
            "pairs_per_s": f"{float(row['pairs_per_s']):.1f}",
            "speedup": f"{float(row['pairs_per_s']) / float(reference['pairs_per_s']):.1f}x",
        }
        for row in speed["rows"]
    ]
    setting = speed.get("setting")
    return {"rows": rows, "reference": reference["name"], "setting": f" ({setting})" if setting else ""}


def write_model_card(trainer, output_dir: str | None = None, adapter_only: bool | None = None) -> str:
    """Write README.md (the card) into `output_dir` (default `args.output_dir`); returns its path."""
    output_dir = output_dir or trainer.args.output_dir
    os.makedirs(output_dir, exist_ok=True)
    card = build_model_card(trainer, output_dir, adapter_only=adapter_only)
    path = os.path.join(output_dir, "README.md")
    card.save(path)
    return path
