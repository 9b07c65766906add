"""From a YAML recipe and `--field value` overrides to the three argument dataclasses.

A recipe is a flat YAML mapping of the fields of `ModelArguments`, `DataArguments` and
`DistillationArguments`; the command line wins over the recipe (`--field null` resets a field to
its default). An unknown key, in the file or on the command line, is a `ConfigError` that lists
the valid keys, raised before any model or dataset is loaded.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from typing import Any

import yaml
from transformers import HfArgumentParser, TrainingArguments

from ..training_args import DistillationArguments
from .arguments import DataArguments, ModelArguments
from .early_stopping import early_stopping_settings
from .errors import ConfigError
from .lora import lora_defaults
from .training_set import check_needs_teachers


class _Parser(HfArgumentParser):
    """HfArgumentParser that raises `ConfigError` instead of exiting, and takes no abbreviations."""

    def __init__(self):
        super().__init__((ModelArguments, DataArguments, DistillationArguments), allow_abbrev=False)

    def error(self, message):
        raise ConfigError(message)


def _field_groups() -> dict[str, list[str]]:
    """Valid keys per dataclass, in declaration order (what `parse_settings` accepts)."""
    training = [f.name for f in dataclasses.fields(TrainingArguments) if f.init]
    distillation = [f.name for f in dataclasses.fields(DistillationArguments) if f.init and f.name not in set(training)]
    return {
        "model (ModelArguments)": [f.name for f in dataclasses.fields(ModelArguments)],
        "data (DataArguments)": [f.name for f in dataclasses.fields(DataArguments)],
        "distillation (DistillationArguments)": distillation,
        "training (transformers TrainingArguments)": training,
    }


def valid_keys() -> list[str]:
    return [name for names in _field_groups().values() for name in names]


def check_keys(settings: dict[str, Any], where: str) -> None:
    """Raise `ConfigError` naming every unknown key, with close matches and the full list of valid keys."""
    valid = valid_keys()
    unknown = [key for key in settings if key not in set(valid)]
    if not unknown:
        return
    described = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), valid, n=3, cutoff=0.6)
        described.append(f"{key!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""))
    groups = "\n".join(f"  {group}: {', '.join(names)}" for group, names in _field_groups().items())
    raise ConfigError(f"unknown key(s) in {where}: {', '.join(described)}.\nValid keys:\n{groups}")


def parse_overrides(tokens: list[str]) -> dict[str, Any]:
    """`--field value`, `--field=value`, `--field v1 v2` (lists), `--flag` (true), `--no_flag` (false)."""
    bool_fields = {f.name for dc in (ModelArguments, DataArguments, DistillationArguments) for f in dataclasses.fields(dc)
                   if f.type in (bool, "bool")}
    overrides: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or token == "--":
            raise ConfigError(f"unexpected argument {token!r}: overrides are written --field value.")
        key, has_value, value = token[2:].partition("=")
        key = key.replace("-", "_")
        i += 1
        if has_value:
            values = [value]
        else:
            values = []
            while i < len(tokens) and not tokens[i].startswith("--"):
                values.append(tokens[i])
                i += 1
        if key.startswith("no_") and key[3:] in bool_fields and key not in bool_fields and not values:
            key, values = key[3:], ["false"]
        overrides[key] = True if not values else values[0] if len(values) == 1 else values
    return overrides


def load_recipe(path: str | os.PathLike) -> dict[str, Any]:
    """A recipe: a flat YAML mapping (safe YAML: plain values, no Python objects), possibly empty. A tag
    safe YAML refuses, a syntax error or a top level that is no mapping is a `ConfigError` naming the line."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise ConfigError(f"recipe {str(path)!r} not found.") from None
    try:
        settings = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise _yaml_error(path, error) from error
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        lines = text.splitlines()
        first = next((i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith(("#", "---"))), 0)
        raise ConfigError(
            f"recipe {str(path)!r} line {first + 1}: the top level must be a mapping of field: value, "
            f"not a {type(settings).__name__}"
        )
    return settings


def _yaml_error(path: str | os.PathLike, error: yaml.YAMLError) -> ConfigError:
    """One line for YAML that safe loading refuses: where (line, column) and what (an unsafe tag, a syntax error)."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = str(getattr(error, "problem", None) or error).strip()
    found = re.search(r"tag '([^']+)'", problem)
    if isinstance(error, yaml.constructor.ConstructorError) and found:
        tag = found.group(1).replace("tag:yaml.org,2002:", "!!")
        return ConfigError(
            f"recipe {str(path)!r}{where}: the YAML tag {tag!r} is not allowed (a recipe holds plain values only; "
            "it is read with yaml.safe_load)"
        )
    context = getattr(error, "context", None)
    detail = f"{context}: {problem}" if context else problem
    return ConfigError(f"recipe {str(path)!r}{where}: invalid YAML ({' '.join(detail.split())})")


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in ("null", "~"))


def _to_argv(settings: dict[str, Any], parser: _Parser) -> list[str]:
    """Settings (YAML types or strings) as command-line tokens, so argparse converts every type."""
    actions = {action.dest: action for action in parser._actions if action.option_strings}
    argv: list[str] = []
    for key, value in settings.items():
        if _is_null(value):
            continue  # back to the default
        action = actions[key]
        if isinstance(value, bool):
            if getattr(action.type, "__name__", "") == "string_to_bool":
                tokens = ["true" if value else "false"]
            else:  # YAML 1.1 reads an unquoted `no` / `yes` as a bool: `save_strategy: no` means "no"
                tokens = ["yes" if value else "no"]
        elif isinstance(value, (list, tuple)):
            if action.nargs in ("+", "*"):
                tokens = [json.dumps(v) if isinstance(v, dict) else str(v) for v in value]
                if not tokens:
                    continue
            else:
                tokens = [",".join(str(v) for v in value)]
        elif isinstance(value, dict):
            tokens = [json.dumps(value)]
        else:
            tokens = [str(value)]
        argv += [f"--{key}", *tokens]
    return argv


def parse_settings(settings: dict[str, Any], where: str = "the settings"):
    """(ModelArguments, DataArguments, DistillationArguments) from a flat mapping of field values,
    checked across the three (data beyond the gold set needs teachers; early stopping's evaluations,
    checkpoints and best model) and completed for early stopping."""
    check_keys(settings, where)
    settings = {**lora_defaults(settings), **settings}
    given = {key: value for key, value in settings.items() if not _is_null(value)}
    # with early stopping, transformers' own (several-line) strategy checks wait for ours
    first = {**settings, "load_best_model_at_end": False} if "early_stopping_patience" in given else settings
    model_args, data_args, training_args = _parse(first)
    check_needs_teachers(model_args, data_args)
    extra = early_stopping_settings(given, data_args, training_args)
    if extra:
        model_args, data_args, training_args = _parse({**settings, **extra})
        if "metric_for_best_model" not in given:  # `run` picks the task's main metric once the labels are known
            training_args.metric_for_best_model = None
            if "greater_is_better" not in given:
                training_args.greater_is_better = None
    return model_args, data_args, training_args


def _parse(settings: dict[str, Any]):
    parser = _Parser()
    try:
        return parser.parse_args_into_dataclasses(args=_to_argv(settings, parser), look_for_args_file=False)
    except ConfigError:
        raise
    except ValueError as error:  # the dataclasses' own checks (__post_init__)
        raise ConfigError(str(error)) from error


def parse_train_config(argv: list[str]):
    """`CONFIG.yaml [--field value ...]` -> the three dataclasses (the command line wins over the recipe)."""
    argv = list(argv)
    recipe: dict[str, Any] = {}
    where = "the command line"
    if argv and not argv[0].startswith("--"):
        path = argv.pop(0)
        recipe = load_recipe(path)
        check_keys(recipe, path)
        where = f"{path} or the command line"
    overrides = parse_overrides(argv)
    check_keys(overrides, "the command line")
    return parse_settings({**recipe, **overrides}, where)


def describe_keys() -> str:
    """Every valid recipe key, grouped by dataclass (`hf-distill keys`)."""
    return "\n".join(f"{group}:\n  {', '.join(names)}" for group, names in _field_groups().items())


def print_fields_help(command: str) -> None:
    """`hf-distill train --help`: the usage line, then every field with its help."""
    print(f"usage: hf-distill {command} CONFIG.yaml [--field value ...]\n")
    _Parser().print_help()
