"""`hf-distill`: train or evaluate a YAML recipe, score STS, run the quickstart, export a student.

    hf-distill train CONFIG.yaml [--field value ...]     fine-tune (no teacher) or distil (teachers given)
    hf-distill evaluate CONFIG.yaml [--field value ...]  evaluate model_name_or_path on validation / test
    hf-distill label CONFIG.yaml [...] --output DIR      label the training set with the teachers once, save it
    hf-distill sts-eval MODEL FILE.jsonl                  Spearman x100 of cosine similarity on an STS file
    hf-distill quickstart [--data_dir DIR] [--model M]    teacher fine-tuning + 2-layer KD student, end to end
    hf-distill export ...                                 standard formats (hf_distill.export)

A recipe is a flat YAML mapping of the fields of three dataclasses, in the style of
transformers' `run_glue.py`: `ModelArguments`, `DataArguments` and `DistillationArguments`
(every `TrainingArguments` field plus the distillation ones). `--field value` on the command
line overrides the recipe (`--field null` resets it to its default); an unknown key, in the
file or on the command line, is an error that lists the valid keys, raised before any model
or dataset is loaded. The commands use only `Trainer` machinery, so they run unchanged under
`torchrun` / `accelerate launch` (e.g. `torchrun --nproc_per_node 2 -m hf_distill.cli train ...`).

One module per job, imported on first use (so `hf-distill --help` loads no torch):

    errors              ConfigError
    arguments           ModelArguments, DataArguments, parse_layer_strategy
    recipes             YAML recipe + command-line overrides -> the three dataclasses; valid keys
    tasks               the pipelines a recipe's `task` names (pairs, embedding)
    recipe_task         which pipeline a recipe runs; `task: embedding` recipes through hf_distill.embedding_recipe
    lora                lora_* recipe keys: LoRA students and PEFT adapter teachers
    sources             model folders and Hub ids checked before loading; Hub load failures in one line
    data_files          a data file `datasets` cannot read: its first bad line
    splits              train / validation / test from local files or the Hub
    labels              label column, label inference (LabelInfo)
    models              teachers and the student (loaded, wrapped, or cut from a teacher)
    training_set        augmented and transfer pairs join the training set; the teachers label it
    early_stopping      early_stopping_patience: checked, completed, the metric, the callback
    train               `run`: check inputs, load data, build models, extend and label the training
                        set, settle the early-stopping metric, build the trainer, train, evaluate, test
    label_command       `hf-distill label` (`label`)
    sts_command         `hf-distill sts-eval` (`sts_eval`)
    quickstart_command  `hf-distill quickstart` (`quickstart`)
    dispatch            the dispatcher (`main`): reads the command, imports only what runs it; an error
                        is one line `hf-distill: error: ...` (exit 2), --debug shows its traceback

(No module is named like a function it exports: importing a submodule `quickstart` would
otherwise replace the function `hf_distill.cli.quickstart` with the module.)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> the module of this package that defines it
_EXPORTS = {
    "ConfigError": "errors",
    "ModelArguments": "arguments",
    "DataArguments": "arguments",
    "STUDENT_TYPES": "arguments",
    "parse_layer_strategy": "arguments",
    "check_keys": "recipes",
    "load_recipe": "recipes",
    "parse_overrides": "recipes",
    "parse_settings": "recipes",
    "parse_train_config": "recipes",
    "valid_keys": "recipes",
    "FILE_BUILDERS": "splits",
    "SPLIT_NAMES": "splits",
    "load_raw_datasets": "splits",
    "LABEL_ALTERNATIVES": "labels",
    "LabelInfo": "labels",
    "infer_labels": "labels",
    "build_student": "models",
    "count_parameters": "models",
    "load_teacher_model": "models",
    "TREC_FILES": "query_groups",
    "run": "train",
    "label": "label_command",
    "sts_eval": "sts_command",
    "DEMO_PAIRS": "quickstart_command",
    "GLUE": "quickstart_command",
    "MINILM_HUB_ID": "quickstart_command",
    "quickstart": "quickstart_command",
    "USAGE": "dispatch",
    "main": "dispatch",
}

__all__ = [
    "ConfigError",
    "DEMO_PAIRS",
    "DataArguments",
    "FILE_BUILDERS",
    "GLUE",
    "LABEL_ALTERNATIVES",
    "LabelInfo",
    "MINILM_HUB_ID",
    "ModelArguments",
    "SPLIT_NAMES",
    "STUDENT_TYPES",
    "TREC_FILES",
    "USAGE",
    "build_student",
    "check_keys",
    "count_parameters",
    "infer_labels",
    "label",
    "load_raw_datasets",
    "load_recipe",
    "load_teacher_model",
    "main",
    "parse_layer_strategy",
    "parse_overrides",
    "parse_settings",
    "parse_train_config",
    "quickstart",
    "run",
    "sts_eval",
    "valid_keys",
]

if TYPE_CHECKING:  # what the lazy attributes below resolve to, for type checkers and editors
    from .arguments import (
        STUDENT_TYPES,
        DataArguments,
        ModelArguments,
        parse_layer_strategy,
    )
    from .dispatch import USAGE, main
    from .errors import ConfigError
    from .label_command import label
    from .labels import LABEL_ALTERNATIVES, LabelInfo, infer_labels
    from .models import build_student, count_parameters, load_teacher_model
    from .quickstart_command import DEMO_PAIRS, GLUE, MINILM_HUB_ID, quickstart
    from .recipes import (
        check_keys,
        load_recipe,
        parse_overrides,
        parse_settings,
        parse_train_config,
        valid_keys,
    )
    from .splits import FILE_BUILDERS, SPLIT_NAMES, load_raw_datasets
    from .sts_command import sts_eval
    from .query_groups import TREC_FILES
    from .train import run


def __getattr__(name: str) -> Any:
    """`from hf_distill.cli import X` imports only the module that defines X."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
