"""Model cards for distilled students, filled from what the `DistillationTrainer` saw.

`DistillationTrainer.save_model()` (the final save, not checkpoints) and `push_to_hub()` write
`README.md` next to the student. Nothing is typed by hand: the card reads the trainer's
teachers, loss components, callbacks, `DistillationArguments`, datasets and log history, as
sentence-transformers' `model_card.py` does. What the trainer cannot know (license, language,
a Hub id for a local teacher, measured speed) goes into `trainer.model_card_data`.

Metadata (YAML front matter, parsed by `huggingface_hub.ModelCard`):

- `library_name: transformers`: the folder is a plain transformers checkpoint that
  `AutoModel.from_pretrained(..., trust_remote_code=True)` loads (config `auto_map` + modeling
  files). `transformers` is a library the Hub knows (code snippet, download counting);
  `hf_distill` is not registered there, so it is a tag instead. An adapter-only PEFT folder
  (`merge_adapters_on_save=False`) says `library_name: peft`, as PEFT's own cards do.
- `tags`: `hf_distill`, `knowledge-distillation` (when a teacher was used), one tag per method
  found (`logit-distillation`, `dvbert` + `teacher-annealing`, `tinybert`, `bert-emd`, `virt`)
  and the student family (`cross-encoder` or `bi-encoder`).
- `base_model`: the teachers' (else the student backbone's) `name_or_path` when it is a Hub id.
- `datasets`: the Hub id of the training set when the trainer can tell (datasets cache path).
- `metrics` and `model-index`: the last value of every metric of every evaluation logged.

Template: `hf_distill/templates/distilled_student.md` (Jinja2, rendered by
`huggingface_hub.ModelCard.from_template`); see `model_cards/README.md`.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import warnings
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from typing import Any

import torch
from huggingface_hub import EvalResult, ModelCard, ModelCardData
from transformers import TrainerCallback, TrainingArguments

__all__ = [
    "CITATIONS",
    "DistillationModelCardData",
    "ModelCardCallback",
    "build_model_card",
    "detect_methods",
    "measure_speed",
    "write_card_on_save",
    "write_model_card",
]

TEMPLATE_NAME = "distilled_student.md"
EMD_PICTURES = (("emd_flow.png", "BERT-EMD flow matrix"), ("emd_layer_weights.png", "BERT-EMD layer weights"))
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_CACHED_HUB_DATASET = re.compile(r"[/\\]([^/\\]+?)___([^/\\]+?)[/\\]")
_NOT_METRICS = ("runtime", "samples_per_second", "steps_per_second", "epoch", "samples")
_SPLIT_OF_PREFIX = {"eval": "validation", "test": "test"}
_PEFT_NAMES = {"LORA": "LoRA", "ADALORA": "AdaLoRA", "LOHA": "LoHa", "LOKR": "LoKr", "IA3": "IA3", "DORA": "DoRA"}

# ---------------------------------------------------------------------------------------- citations
CITATIONS: dict[str, dict[str, str]] = {
    "hinton2015": {
        "title": "Distilling the Knowledge in a Neural Network (Hinton et al., 2015)",
        "bibtex": """@misc{hinton2015distilling,
  title         = {Distilling the Knowledge in a Neural Network},
  author        = {Hinton, Geoffrey and Vinyals, Oriol and Dean, Jeff},
  year          = {2015},
  eprint        = {1503.02531},
  archivePrefix = {arXiv},
  primaryClass  = {stat.ML}
}""",
    },
    "dvbert": {
        "title": "DvBERT: Dual-View Distilled BERT for Sentence Embedding (Cheng, SIGIR 2021)",
        "bibtex": """@inproceedings{cheng2021dvbert,
  title         = {Dual-View Distilled {BERT} for Sentence Embedding},
  author        = {Cheng, Xingyi},
  booktitle     = {Proceedings of the 44th International ACM SIGIR Conference on Research and Development in Information Retrieval},
  year          = {2021},
  eprint        = {2104.08675},
  archivePrefix = {arXiv}
}""",
    },
    "tinybert": {
        "title": "TinyBERT: Distilling BERT for Natural Language Understanding (Jiao et al., Findings of EMNLP 2020)",
        "bibtex": """@inproceedings{jiao2020tinybert,
  title         = {{TinyBERT}: Distilling {BERT} for Natural Language Understanding},
  author        = {Jiao, Xiaoqi and Yin, Yichun and Shang, Lifeng and Jiang, Xin and Chen, Xiao and Li, Linlin and Wang, Fang and Liu, Qun},
  booktitle     = {Findings of the Association for Computational Linguistics: EMNLP 2020},
  year          = {2020},
  eprint        = {1909.10351},
  archivePrefix = {arXiv}
}""",
    },
    "simplified_tinybert": {
        "title": "Simplified TinyBERT: Knowledge Distillation for Document Retrieval (Chen et al., 2020)",
        "bibtex": """@misc{chen2020simplified,
  title         = {Simplified {TinyBERT}: Knowledge Distillation for Document Retrieval},
  author        = {Chen, Xuanang and He, Ben and Hui, Kai and Sun, Le and Sun, Yingfei},
  year          = {2020},
  eprint        = {2009.07531},
  archivePrefix = {arXiv}
}""",
    },
    "bert_emd": {
        "title": "BERT-EMD: Many-to-Many Layer Mapping for BERT Compression with Earth Mover's Distance (Li et al., EMNLP 2020)",
        "bibtex": """@inproceedings{li2020bertemd,
  title         = {{BERT-EMD}: Many-to-Many Layer Mapping for {BERT} Compression with Earth Mover's Distance},
  author        = {Li, Jianquan and Liu, Xiaokang and Zhao, Honghong and Xu, Ruifeng and Yang, Min and Jin, Yaohong},
  booktitle     = {Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year          = {2020},
  eprint        = {2010.06133},
  archivePrefix = {arXiv}
}""",
    },
    "virt": {
        "title": "VIRT: Improving Representation-based Text Matching via Virtual Interaction (Li et al.)",
        "bibtex": """@misc{li2021virt,
  title         = {{VIRT}: Improving Representation-based Models for Text Matching through Virtual Interaction},
  author        = {Li, Dan and Yang, Yang and Tang, Hongyin and Wang, Jingang and Xu, Tong and Wu, Wei and Chen, Enhong},
  year          = {2021},
  eprint        = {2112.04195},
  archivePrefix = {arXiv}
}""",
    },
}


@dataclass(frozen=True)
class Method:
    """A distillation method the card can name: Hub tags, a one-line description, citations."""

    key: str
    name: str
    tags: tuple[str, ...]
    reference: str
    description: str
    citations: tuple[str, ...]


METHODS: dict[str, Method] = {
    method.key: method
    for method in (
        Method(
            "logit_kd", "Logit distillation", ("logit-distillation",), "Hinton et al., 2015, arXiv:1503.02531",
            "the student matches the teachers' temperature-softened predictions (KL, or MSE for one score).",
            ("hinton2015",),
        ),
        Method(
            "dvbert", "DvBERT teacher annealing", ("dvbert", "teacher-annealing"), "Cheng, SIGIR 2021, arXiv:2104.08675",
            "the weight lambda of the gold-label loss rises linearly from 0 to 1 over training while the teachers' "
            "soft loss gets 1 - lambda, so training starts from the teachers and ends on the labels.",
            ("dvbert",),
        ),
        Method(
            "tinybert", "TinyBERT layer distillation", ("tinybert",), "Chen et al., 2020, arXiv:2009.07531",
            "embedding, hidden-state and attention losses between mapped student and teacher layers, trained in "
            "one stage with the prediction losses (Simplified TinyBERT).",
            ("simplified_tinybert", "tinybert"),
        ),
        Method(
            "bert_emd", "BERT-EMD", ("bert-emd",), "Li et al., EMNLP 2020, arXiv:2010.06133",
            "many-to-many layer mapping: every student layer learns from every teacher layer, weighted by the "
            "Earth Mover's Distance flow, with layer weights re-estimated by cost attention after each step.",
            ("bert_emd",),
        ),
        Method(
            "virt", "VIRT", ("virt",), "Li et al., arXiv:2112.04195",
            "the Siamese student's virtual X-to-Y attention maps are distilled from the cross-encoder's "
            "attention between the two texts; inference stays independent per text.",
            ("virt",),
        ),
    )
}


# ---------------------------------------------------------------------------------------- user data
@dataclass
class DistillationModelCardData:
    """What the trainer cannot infer; set fields on `trainer.model_card_data` before saving.

    Args:
        model_name: title of the card (default: `hub_model_id`, else the output folder's name).
        language, license: Hub metadata (e.g. "en", "apache-2.0").
        tags: extra Hub tags, added to the inferred ones.
        base_model: Hub id(s) of the model(s) the student derives from (default: the teachers'
            `name_or_path` when they are Hub ids, else the student backbone's).
        datasets: Hub id(s) of the training data (default: inferred from the datasets cache path).
        teachers: names of teachers the trainer never saw (offline, precomputed logits).
        speed: filled by `measure_speed` (or by hand): {"rows": [{"name", "pairs_per_s"}...], ...}.
        template_path: another Jinja2 template (default: the packaged `distilled_student.md`).
    """

    model_name: str | None = None
    language: str | list[str] | None = None
    license: str | None = None
    tags: list[str] = field(default_factory=list)
    base_model: str | list[str] | None = None
    datasets: str | list[str] | None = None
    teachers: list[str] = field(default_factory=list)
    speed: dict[str, Any] | None = None
    template_path: str | None = None

    def update(self, **values: Any) -> None:
        """Set the given fields that are not None (tags are merged, not replaced)."""
        names = {f.name for f in fields(self)}
        for name, value in values.items():
            if value is None:
                continue
            if name not in names:
                raise ValueError(f"{name}={value!r} is not a model card field; valid: {', '.join(sorted(names))}.")
            if name == "tags":
                value = [value] if isinstance(value, str) else list(value)
                self.tags = list(dict.fromkeys([*self.tags, *value]))
            else:
                setattr(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------- inspection
def _unwrap(model):
    from .trainer import unwrap_student

    return unwrap_student(model)


def _is_peft(model) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def _name_of(model) -> str:
    config = getattr(_unwrap(model), "config", None)
    return str(getattr(config, "_name_or_path", "") or getattr(config, "name_or_path", "") or "")


def _is_hub_id(name: str | None) -> bool:
    return bool(name) and bool(_HUB_ID.match(name)) and not os.path.exists(name)


def _backbone_config(model):
    config = _unwrap(model).config
    return getattr(config, "encoder", None) or config


def _architecture(model) -> dict[str, Any]:
    inner = _unwrap(model)
    config = _backbone_config(model)
    family = type(inner).__name__
    return {
        "architecture": f"{family} ({getattr(config, 'model_type', '?')})",
        "layers": getattr(config, "num_hidden_layers", "?"),
        "hidden": getattr(config, "hidden_size", "?"),
        "heads": getattr(config, "num_attention_heads", "?"),
    }


def _parameters(model, trainable_only: bool = False) -> int:
    """Parameters of the model as saved (adapters and PEFT's copies of `modules_to_save` left out), or the trainable ones."""
    if trainable_only:
        return sum(p.numel() for p in model.parameters() if p.requires_grad)
    return sum(
        p.numel() for name, p in _unwrap(model).named_parameters() if "lora_" not in name and ".modules_to_save." not in name
    )


def _human(count: int) -> str:
    return f"{count / 1e6:.2f}M" if count >= 1e6 else f"{count / 1e3:.1f}K" if count >= 1e3 else str(count)


def _num_layers(model) -> int | None:
    return getattr(_backbone_config(model), "num_hidden_layers", None)


def _term_weight(trainer, term: str) -> float:
    from .trainer import TERM_WEIGHT_FIELDS

    if term in TERM_WEIGHT_FIELDS:
        return float(getattr(trainer.args, TERM_WEIGHT_FIELDS[term]))
    return float(trainer.term_weights.get(term, 1.0))


def _component_terms(component) -> list[str]:
    """The loss terms a component returns, by its type."""
    from .losses.emd import EMDLayerLoss
    from .losses.layers import AttentionLoss, EmbeddingLoss, HiddenStateLoss

    if isinstance(component, HiddenStateLoss):
        return ["hidden"]
    if isinstance(component, AttentionLoss):
        return ["attention"]
    if isinstance(component, EmbeddingLoss):
        return ["embedding"]
    if isinstance(component, EMDLayerLoss):
        return [f"emd_{kind}" for kind in component.kinds]
    if getattr(component, "requires_alignment", False) or "virt" in type(component).__name__.lower():
        return ["virt"]
    return []


def _has_teachers(trainer) -> bool:
    return bool(getattr(trainer, "teachers", None) or getattr(trainer, "offline_columns", None))


def detect_methods(trainer) -> list[Method]:
    """The methods this trainer runs, from its teachers, loss components (with weight > 0) and annealing."""
    found: list[str] = []
    if _has_teachers(trainer):
        annealed = trainer.args.annealing == "linear"
        _, soft = trainer.args.prediction_weights(None)
        if annealed or soft > 0:
            found.append("logit_kd")
        if annealed:
            found.append("dvbert")
    active = [t for c in trainer.loss_components for t in _component_terms(c) if _term_weight(trainer, t) > 0]
    emd = any(term.startswith("emd_") for term in active)
    # BERT-EMD transfers embeddings with the same loss as TinyBERT: alone next to EMD it is part of BERT-EMD.
    if {"hidden", "attention"} & set(active) or ("embedding" in active and not emd):
        found.append("tinybert")
    if emd:
        found.append("bert_emd")
    if "virt" in active:
        found.append("virt")
    return [METHODS[key] for key in found]


# ---------------------------------------------------------------------------------------- pieces of the card
def _loss_terms(trainer) -> tuple[str, str, list[dict[str, str]]]:
    """The total loss as a formula, a note on its schedule, and one row per term (name, weight, description)."""
    args = trainer.args
    teachers = _has_teachers(trainer)
    labels = getattr(trainer, "_has_labels", True)
    rows: list[dict[str, str]] = []
    parts: list[str] = []
    if not teachers:
        parts.append("hard")
        rows.append({"name": "hard", "weight": "1", "description": "task loss on the gold labels (no teacher: fine-tuning)"})
    elif args.annealing == "linear":
        parts.append("λ·hard + (1 − λ)·soft")
        rows.append({"name": "hard", "weight": "λ", "description": "cross-entropy (MSE for one score) on the gold labels"})
        rows.append({"name": "soft", "weight": "1 − λ", "description": _soft_description(trainer)})
    else:
        hard, soft = args.prediction_weights(None)
        if labels and hard > 0:
            parts.append(f"{hard:g}·hard")
            rows.append({"name": "hard", "weight": f"{hard:g}", "description": "cross-entropy (MSE for one score) on the gold labels"})
        if soft > 0:
            parts.append(f"{soft:g}·soft")
            rows.append({"name": "soft", "weight": f"{soft:g}", "description": _soft_description(trainer)})
    for component in trainer.loss_components:
        for term in _component_terms(component):
            weight = _term_weight(trainer, term)
            if weight <= 0:
                continue
            parts.append(f"{weight:g}·{term}")
            rows.append({"name": term, "weight": f"{weight:g}", "description": _term_description(component, term, args)})
    note = ", with `λ = global_step / max_steps` rising linearly from 0 to 1" if teachers and args.annealing == "linear" else ""
    return "L = " + " + ".join(parts), note, rows


def _soft_description(trainer) -> str:
    args = trainer.args
    count = len(trainer.teachers) or len(trainer.offline_columns)
    combine = f", {args.teacher_reduction} over {count} teachers" if count > 1 else ""
    return f"τ²·KL(teacher ‖ student) at temperature τ = {args.temperature:g} (MSE for one score){combine}"


def _term_description(component, term: str, args) -> str:
    name = type(component).__name__
    if term == "hidden":
        return "MSE between projected student hidden states and the mapped teacher layers (real tokens only)"
    if term == "attention":
        kind = getattr(component, "kind", "mse")
        what = "pre-softmax attention scores (MSE)" if kind == "mse" else "attention distributions (KL)"
        return f"{what} of mapped layers, averaged over heads and real tokens"
    if term == "embedding":
        return "MSE between the projected student embedding output and the teacher's"
    if term.startswith("emd_"):
        kind = term[len("emd_"):]
        return f"Σ F·D over all student × teacher {kind} layer pairs, F the EMD flow ({name})"
    if term == "virt":
        return "MSE between the student's virtual X↔Y attention and the teacher's cross attention"
    return name


def _mappings(trainer) -> list[str]:
    student_layers = _num_layers(trainer.model)
    teacher = trainer.teachers[0] if getattr(trainer, "teachers", None) else None
    teacher_layers = _num_layers(teacher) if teacher is not None else None
    lines: list[str] = []
    for component in trainer.loss_components:
        terms = [t for t in _component_terms(component) if _term_weight(trainer, t) > 0]
        if not terms or student_layers is None or teacher_layers is None:
            continue
        if terms[0].startswith("emd_"):
            weights = {k: ", ".join(f"{float(x):.3f}" for x in v) for k, v in component.layer_weights().items()}
            detail = "; ".join(f"{k.replace('_', ' ')} weights [{v}]" for k, v in weights.items())
            lines.append(
                f"BERT-EMD ({', '.join(terms)}): all {student_layers} × {teacher_layers} student × teacher layer pairs, "
                f"weighted by the EMD flow; final {detail}."
            )
            continue
        if terms[0] == "embedding":
            lines.append("embedding: student embedding output (layer 0) → teacher embedding output (layer 0).")
            continue
        mapping = getattr(component, "mapping", None)
        if mapping is None:
            continue
        try:
            pairs = mapping.pairs(student_layers, teacher_layers)
        except ValueError as error:
            lines.append(f"{terms[0]}: {error}")
            continue
        text = ", ".join(f"{i} → {j}" for i, j in pairs)
        label = getattr(mapping, "name", type(mapping).__name__)
        lines.append(f"{terms[0]} ({label}; student layer → teacher layer, 1-based): {text}.")
    return lines


def _emd_pictures(trainer, output_dir: str) -> list[dict[str, str]]:
    """The EMD pictures in the output folder (copied there from `args.output_dir` when saving elsewhere)."""
    pictures = []
    for filename, alt in EMD_PICTURES:
        target = os.path.join(output_dir, filename)
        source = os.path.join(trainer.args.output_dir, filename)
        if not os.path.exists(target) and os.path.exists(source) and os.path.abspath(source) != os.path.abspath(target):
            os.makedirs(output_dir, exist_ok=True)
            shutil.copyfile(source, target)
        if os.path.exists(target):
            pictures.append({"alt": alt, "path": filename})
    return pictures


def _dataset_id(dataset) -> str | None:
    """The Hub id of a dataset loaded from the Hub (from its cache path), else None."""
    for part in dataset.values() if isinstance(dataset, dict) else [dataset]:
        for cache in getattr(part, "cache_files", None) or []:
            match = _CACHED_HUB_DATASET.search(cache.get("filename", ""))
            if match:
                return f"{match.group(1)}/{match.group(2)}"
    return None


def _as_list(value) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [v for v in value if v]


def _evaluation(trainer) -> list[dict[str, Any]]:
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


def _task(student, siamese: bool) -> tuple[str, str]:
    """(pipeline_tag, task name) for the student."""
    if siamese:
        return "sentence-similarity", "Sentence Similarity"
    if student.config.num_labels == 1:
        return "text-ranking", "Text Ranking"
    return "text-classification", "Text Classification"


def _hparams(trainer, methods: list[Method], world_size: int) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """The distillation fields that matter for the methods run (and any other changed from its default), and training's."""
    args = trainer.args
    keys = {m.key for m in methods}
    shown = ["temperature", "annealing", "max_length"]
    if args.annealing != "linear":
        shown += ["hard_weight", "soft_weight"] if args.hard_weight is not None or args.soft_weight is not None else ["alpha"]
    if len(getattr(trainer, "teachers", []) or getattr(trainer, "offline_columns", [])) > 1:
        shown.append("teacher_reduction")
    if keys & {"tinybert", "bert_emd", "virt"}:
        shown += ["hidden_weight", "attention_weight", "embedding_weight", "attention_loss", "layer_mapping", "shared_projection"]
    if "bert_emd" in keys:
        shown += ["emd_weight", "emd_temperature", "emd_update", "emd_separate_weights", "emd_smooth_weights"]
    if "virt" in keys:
        shown.append("virt_weight")
    base = {f.name for f in fields(TrainingArguments)}
    hidden = {"merge_adapters_on_save", "measure_speed_on_save"}
    for f in fields(args):
        if f.name in base or f.name in hidden or not f.init or f.name in shown:
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


def _versions() -> dict[str, str]:
    import huggingface_hub
    import transformers

    from . import __version__

    versions = {"hf_distill": __version__, "transformers": transformers.__version__, "torch": torch.__version__}
    try:
        import peft

        versions["peft"] = peft.__version__
    except ImportError:  # pragma: no cover - peft is a dependency
        pass
    versions["huggingface_hub"] = huggingface_hub.__version__
    return versions


def _template_path(data: DistillationModelCardData) -> str:
    if data.template_path:
        return str(data.template_path)
    return str(resources.files("hf_distill") / "templates" / TEMPLATE_NAME)


# ---------------------------------------------------------------------------------------- the card
def build_model_card(trainer, output_dir: str | None = None, adapter_only: bool | None = None) -> ModelCard:
    """The model card of the trainer's student, as `huggingface_hub.ModelCard` (not written).

    Args:
        trainer: a `DistillationTrainer` (trained or not).
        output_dir: the folder the card describes (for the EMD pictures); default `args.output_dir`.
        adapter_only: the folder holds a PEFT adapter, not the merged student (default: a PEFT
            student saved without `merge_adapters_on_save`).
    """
    from .modeling import SiameseModel

    args = trainer.args
    output_dir = output_dir or args.output_dir
    data: DistillationModelCardData = getattr(trainer, "model_card_data", None) or DistillationModelCardData()
    student = _unwrap(trainer.model)
    siamese = isinstance(student, SiameseModel)
    if adapter_only is None:
        adapter_only = _is_peft(trainer.model) and not getattr(args, "merge_adapters_on_save", False)
    methods = detect_methods(trainer)
    teachers = list(getattr(trainer, "teachers", []) or [])
    world_size = getattr(trainer.accelerator, "num_processes", 1) if hasattr(trainer, "accelerator") else 1

    model_name = data.model_name or (args.hub_model_id or "").split("/")[-1] or os.path.basename(os.path.abspath(output_dir))
    repo_id = args.hub_model_id or model_name
    pipeline_tag, task_name = _task(student, siamese)

    # ---- metadata
    teacher_names = [_name_of(t) for t in teachers] or list(data.teachers)
    base_model = _as_list(data.base_model) or [n for n in teacher_names if _is_hub_id(n)]
    if not base_model:
        backbone = getattr(_backbone_config(student), "_name_or_path", "") or _name_of(student)
        base_model = [backbone] if _is_hub_id(backbone) else []
    train_id = _dataset_id(trainer.train_dataset) if trainer.train_dataset is not None else None
    datasets = _as_list(data.datasets) or ([train_id] if train_id else [])
    tags = ["hf_distill"]
    if _has_teachers(trainer) or methods:
        tags.append("knowledge-distillation")
    for method in methods:
        tags.extend(method.tags)
    tags.append("bi-encoder" if siamese else "cross-encoder")
    tags.extend(data.tags)
    tags = list(dict.fromkeys(tags))

    evaluation = _evaluation(trainer)
    eval_id = (_dataset_id(trainer.eval_dataset) if trainer.eval_dataset is not None else None) or (datasets[0] if datasets else None)
    eval_results = [
        EvalResult(
            task_type=pipeline_tag,
            task_name=task_name,
            dataset_type=eval_id or "custom",
            dataset_name=eval_id or f"{split['split']} set",
            dataset_split=split["split"],
            metric_type=metric,
            metric_name=metric.replace("_", " "),
            metric_value=round(value, 6),
        )
        for split in evaluation
        for metric, value in split["metrics"].items()
        if metric != "loss"
    ]
    card_data = ModelCardData(
        model_name=model_name,
        library_name="peft" if adapter_only else "transformers",
        pipeline_tag=pipeline_tag,
        tags=tags,
        base_model=(base_model[0] if len(base_model) == 1 else base_model) or None,
        datasets=datasets or None,
        language=data.language,
        license=data.license,
        metrics=list(dict.fromkeys(r.metric_type for r in eval_results)) or None,
        eval_results=eval_results or None,
    )

    # ---- body
    student_params = _parameters(student)
    size_rows = [
        {
            "role": "student" + (" (LoRA)" if _is_peft(trainer.model) else ""),
            "name": model_name,
            "parameters": _human(student_params),
            **_architecture(student),
        }
    ]
    for k, teacher in enumerate(teachers):
        size_rows.append(
            {
                "role": f"teacher {k}" if len(teachers) > 1 else "teacher",
                "name": teacher_names[k] or "(in memory)",
                "parameters": _human(_parameters(teacher)),
                **_architecture(teacher),
            }
        )
    size_ratio = f"{100 * student_params / _parameters(teachers[0]):.1f}%" if teachers else None

    notes = []
    for k, teacher in enumerate(teachers):
        if _is_peft(teacher):
            notes.append(f"teacher {k} is a PEFT model: its adapter is active during distillation.")
    if not teachers and getattr(trainer, "offline_columns", None):
        names = ", ".join(f"`{n}`" for n in data.teachers) or "not recorded"
        notes.append(
            f"Offline teachers: logits precomputed once into the columns {', '.join(trainer.offline_columns)} "
            f"(`hf_distill.teachers.add_teacher_logits`); teacher models: {names}."
        )
    if _is_peft(trainer.model):
        config = next(iter(trainer.model.peft_config.values()))
        trainable = _parameters(trainer.model, trainable_only=True)
        kind = _PEFT_NAMES.get(str(getattr(config.peft_type, "value", config.peft_type)), type(config).__name__)
        notes.append(
            f"The student was trained with {kind} "
            f"(r={getattr(config, 'r', '?')}, alpha={getattr(config, 'lora_alpha', '?')}, "
            f"target modules {sorted(getattr(config, 'target_modules', None) or [])}; {_human(trainable)} trainable "
            "parameters)" + ("; this folder holds the adapter only." if adapter_only else "; the adapters are merged into these weights.")
        )

    loss_formula, loss_note, terms = _loss_terms(trainer)
    distillation_hparams, training_hparams = _hparams(trainer, methods, world_size)
    summary = _summary(student, siamese, methods, teacher_names, student_params, size_ratio)
    versions = _versions()
    citations = [CITATIONS[key] for method in methods for key in method.citations]
    speed = _speed_rows(data.speed)
    train_result = next((e for e in reversed(trainer.state.log_history) if "train_loss" in e), None)
    training_result = (
        f"Training ran {trainer.state.global_step} optimizer steps on {world_size} process(es); "
        f"mean training loss {train_result['train_loss']:.4f}." if train_result else None
    )
    return _render(
        card_data,
        _template_path(data),
        model_name=model_name,
        repo_id=repo_id,
        summary=summary,
        adapter_only=adapter_only,
        base_student=_name_of(student) or "path/to/base/student",
        siamese=siamese,
        num_labels=student.config.num_labels,
        methods=methods,
        methods_text=", ".join(m.name for m in methods) or "none (plain fine-tuning on the gold labels)",
        loss_formula=loss_formula,
        loss_note=loss_note,
        terms=terms,
        size_rows=size_rows,
        size_ratio=size_ratio,
        notes=notes,
        speed=speed,
        mappings=_mappings(trainer),
        emd_pictures=_emd_pictures(trainer, output_dir),
        data_text=_data_text(trainer, datasets),
        distillation_hparams=distillation_hparams,
        training_hparams=training_hparams,
        training_result=training_result,
        evaluation=[
            {
                "title": f"{split['split']} set" + (f" ({eval_id})" if eval_id else ""),
                "metrics": [{"name": m, "value": f"{v:.4f}"} for m, v in split["metrics"].items()],
            }
            for split in evaluation
        ],
        versions=versions,
        citations=citations,
    )


def _render(card_data: ModelCardData, template_path: str, **values: Any) -> ModelCard:
    """Like `ModelCard.from_template`, with Jinja2's trim_blocks/lstrip_blocks so block tags leave no blank lines."""
    import jinja2

    with open(template_path, encoding="utf-8") as handle:
        template = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True).from_string(handle.read())
    return ModelCard(template.render(card_data=card_data.to_yaml(), **values))


def _summary(student, siamese, methods, teacher_names, params, ratio) -> str:
    config = _backbone_config(student)
    family = "Siamese bi-encoder" if siamese else "cross-encoder"
    shape = f"{getattr(config, 'num_hidden_layers', '?')}-layer {getattr(config, 'model_type', '')} {family}".replace("  ", " ")
    text = f"A {shape} ({_human(params)} parameters, `hf_distill.{type(student).__name__}`)"
    if not methods:
        return text + " fine-tuned with `hf_distill.DistillationTrainer` (no teacher)."
    names = [n for n in teacher_names if n] or ["in-memory teachers"]
    who = ", ".join(f"`{n}`" for n in names)
    size = f", {ratio} of the teacher's size" if ratio else ""
    return f"{text} distilled from {who}{size} with {', '.join(m.name for m in methods)}, by `hf_distill.DistillationTrainer`."


def _data_text(trainer, datasets: list[str]) -> str:
    train = trainer.train_dataset
    if train is None:
        return "No training set was given to the trainer."
    rows = len(train) if hasattr(train, "__len__") else "?"
    collator = trainer.data_collator
    columns = getattr(collator, "text_columns", None)
    label = trainer.args.label_column if getattr(trainer, "_has_labels", True) else None
    where = f"[{datasets[0]}](https://huggingface.co/datasets/{datasets[0]})" if datasets else "local data"
    parts = [f"{rows} training pairs from {where}"]
    if columns:
        parts.append(f"text columns `{columns[0]}` / `{columns[1]}`")
    parts.append(f"label column `{label}`" if label else "no gold labels (teachers only)")
    return "; ".join(parts) + "."


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


# ---------------------------------------------------------------------------------------- speed
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
    from .trainer import TEACHER_PREFIX

    size = min(max_pairs, len(dataset))
    batch_size = batch_size or trainer.args.per_device_eval_batch_size
    rows = [dataset[i] for i in range(size)]
    batches = [trainer.data_collator(rows[i : i + batch_size]) for i in range(0, size, batch_size)]
    device = trainer.args.device

    def student_view(batch):
        return {k: v.to(device) for k, v in batch.items() if not k.startswith(TEACHER_PREFIX) and k != "labels"}

    def teacher_view(batch, k):
        prefix = f"{TEACHER_PREFIX}{k}_"
        return {key[len(prefix):]: v.to(device) for key, v in batch.items() if key.startswith(prefix)}

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

    student = _unwrap(trainer.model)
    results = [{"name": "student", "pairs_per_s": pairs_per_second(student, student_view)}]
    if getattr(trainer, "run_teachers_online", False):
        for k, teacher in enumerate(trainer.teachers):
            name = "teacher" if len(trainer.teachers) == 1 else f"teacher {k}"
            results.append({"name": name, "pairs_per_s": pairs_per_second(teacher, lambda b, k=k: teacher_view(b, k))})
    results.sort(key=lambda row: row["name"] != "student")
    device_name = torch.cuda.get_device_name(device) if getattr(device, "type", "cpu") == "cuda" else f"CPU, {torch.get_num_threads()} thread(s)"
    speed = {"rows": results, "setting": f"{size} pairs, batch {batch_size}, max_length {trainer.args.max_length}, {device_name}"}
    if hasattr(trainer, "model_card_data"):
        trainer.model_card_data.speed = speed
    return speed


# ---------------------------------------------------------------------------------------- refresh
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
