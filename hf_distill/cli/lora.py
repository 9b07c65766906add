"""LoRA from a recipe: the `lora_*` keys put PEFT adapters on the student, and a PEFT adapter folder
given as a teacher loads onto its base model.

The recipe side of the Python API's PEFT support (docs/peft.md): the student becomes a
`peft.get_peft_model` model (adapters on the attention projections, its new head trained fully as
`modules_to_save`), the trainer trains the adapters only and, with `merge_adapters_on_save` (on by
default for a LoRA recipe), saves a merged, complete student. Key names follow TRL's `ModelConfig`
(`lora_r`, `lora_alpha`, `lora_dropout`, `lora_target_modules`). Light at import: peft loads on use.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from typing import Any

from .errors import ConfigError
from .sources import looks_local

logger = logging.getLogger(__name__)

# Attention projections per backbone type where PEFT's own table has none.
EXTRA_TARGET_MODULES = {"mpnet": ["q", "v"], "distilbert": ["q_lin", "v_lin"]}
ADAPTER_CONFIG = "adapter_config.json"


def _positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def check_lora_arguments(model_args) -> None:
    """Validate and normalise the `lora_*` fields of `ModelArguments` (one `ConfigError` line each)."""
    r, alpha, dropout = model_args.lora_r, model_args.lora_alpha, model_args.lora_dropout
    if r is not None and (isinstance(r, bool) or not isinstance(r, int) or r < 0):
        raise ConfigError(f"lora_r={r!r} is not valid; give the LoRA rank, an integer >= 1 (0 or null: no LoRA).")
    if alpha is not None and not _positive_number(alpha):
        raise ConfigError(f"lora_alpha={alpha!r} is not valid; give a number > 0 (updates scale by lora_alpha / lora_r).")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ConfigError(f"lora_dropout={dropout!r} is not valid; give a probability in [0, 1).")
    targets = model_args.lora_target_modules
    if isinstance(targets, str):
        targets = targets.replace(",", " ").split()
    if targets is not None:
        targets = [name for t in targets for name in str(t).strip("[]").replace(",", " ").replace("'", " ").split()]
        if not targets:
            raise ConfigError(
                f"lora_target_modules={model_args.lora_target_modules!r} is not valid; give module names such as "
                "[query, value] (null: the backbone's attention projections)."
            )
    model_args.lora_target_modules = targets


def lora_defaults(settings: dict[str, Any]) -> dict[str, Any]:
    """Defaults a LoRA recipe implies: `merge_adapters_on_save: true`, so output_dir holds a complete student
    (an adapter alone needs its base, which a cut student or a new head never had saved)."""
    try:
        on = int(str(settings.get("lora_r") or 0)) > 0
    except ValueError:
        return {}  # the field's own check says what is wrong
    return {"merge_adapters_on_save": True} if on else {}


def target_modules(student, model_args) -> list[str]:
    """The recipe's `lora_target_modules`, else the attention query/value projections of the backbone type."""
    from peft import utils as peft_utils

    if model_args.lora_target_modules:
        return list(model_args.lora_target_modules)
    model_type = student.backbone.config.model_type
    targets = peft_utils.TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING.get(model_type) or EXTRA_TARGET_MODULES.get(model_type)
    if not targets:
        raise ConfigError(
            f"lora_target_modules is needed: no default is known for a {model_type!r} backbone; name its attention "
            "projections, e.g. [query, value]."
        )
    return list(targets)


def trained_fully(student) -> list[str]:
    """The student's modules outside the backbone that hold parameters (its head): trained fully."""
    return [name for name, child in student.named_children() if name != "backbone" and any(True for _ in child.parameters())]


def check_targets(student, targets: list[str]) -> None:
    """Every target names a module of the student (PEFT matches a name or a dotted suffix of one)."""
    from torch import nn

    names = [name for name, _ in student.named_modules()]
    missing = [t for t in targets if not any(n == t or n.endswith(f".{t}") for n in names)]
    if missing:
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in student.backbone.named_modules() if isinstance(m, nn.Linear)})
        raise ConfigError(
            f"lora_target_modules={targets!r} is not valid: {', '.join(map(repr, missing))} matches no module of the "
            f"student; its linear layers are named {', '.join(linear)}."
        )


def check_lora_student(student, model_args) -> None:
    """With `lora_r` > 0, the adapters' targets checked on the student as soon as it is built, before the
    training set is augmented or labelled (`wrap_lora_student` comes after both)."""
    if model_args.lora_r:
        check_targets(student, target_modules(student, model_args))


def wrap_lora_student(student, model_args):
    """The student with LoRA adapters when `lora_r` > 0 (PEFT injects them in place), else the student as it is."""
    if not model_args.lora_r:
        return student
    from peft import LoraConfig, get_peft_model

    r = model_args.lora_r
    targets = target_modules(student, model_args)
    config = LoraConfig(
        r=r, lora_alpha=model_args.lora_alpha or 2 * r, lora_dropout=model_args.lora_dropout,
        target_modules=targets, modules_to_save=trained_fully(student) or None,
    )
    check_targets(student, targets)
    wrapped = get_peft_model(student, config)
    trainable = sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
    total = sum(p.numel() for p in wrapped.parameters())
    logger.info("LoRA student: r=%d on %s, %d of %d parameters trained", r, targets, trainable, total)
    return wrapped


def adapter_config_file(path: str, kwargs: dict[str, Any]) -> str | None:
    """The `adapter_config.json` of a PEFT adapter folder or Hub repository, None for a complete model."""
    from transformers.utils import find_adapter_config_file

    hub = {k: kwargs[k] for k in ("revision", "cache_dir") if k in kwargs}
    try:
        return find_adapter_config_file(path, **hub)
    except (OSError, ValueError):
        return None


def load_lora_teacher(path: str, config_file: str, load_base):
    """A PEFT adapter teacher: its base model (`load_base(base_path)`, a fine-tuned hf_distill model) with the
    adapter loaded and active, frozen later like any teacher."""
    from peft import PeftModel

    from ..model_card.models import ADAPTER_PATH

    with open(config_file, encoding="utf-8") as handle:
        base_path = json.load(handle).get("base_model_name_or_path")
    if not base_path:
        raise ConfigError(
            f"teacher_name_or_path={path!r} is a PEFT adapter without base_model_name_or_path in {ADAPTER_CONFIG}; "
            "set it to the base teacher's folder or Hub id."
        )
    if looks_local(base_path) and not os.path.isdir(base_path):
        raise ConfigError(
            f"teacher_name_or_path={path!r} is a PEFT adapter whose base model {base_path!r} does not exist; "
            f"fix base_model_name_or_path in its {ADAPTER_CONFIG}."
        )
    teacher = PeftModel.from_pretrained(load_base(base_path), path)
    setattr(teacher, ADAPTER_PATH, path)  # so its model card names the adapter, not only its base
    logger.info("teacher %s: a PEFT adapter on %s", path, base_path)
    return teacher


def plain_teacher(teacher):
    """The teacher's weights as a plain model (a merged copy of a PEFT teacher), for cutting a student from it."""
    from ..wrappers import is_peft

    return copy.deepcopy(teacher).merge_and_unload() if is_peft(teacher) else teacher
