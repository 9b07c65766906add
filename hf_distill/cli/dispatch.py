"""The `hf-distill` dispatcher: reads the command, then imports only the module that runs it.

Light at import (no torch, transformers or datasets before the command is parsed), so
`hf-distill --help` and `hf-distill --version` answer at once.

An error the user can fix (`ConfigError`) is one line, `hf-distill: error: ...`, and exit status 2;
`--debug` anywhere on the command line (or HF_DISTILL_DEBUG=1) raises it instead, traceback and all
(`--debug underflow_overflow` / `--debug tpu_metrics_debug` stay TrainingArguments' own `debug` field).
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys

from .errors import ConfigError

USAGE = """usage: hf-distill COMMAND ...

commands:
  train CONFIG.yaml [--field value ...]     fine-tune (no teacher) or distil a student; see recipes/
  evaluate CONFIG.yaml [--field value ...]  evaluate model_name_or_path on the validation/test splits
  label CONFIG.yaml [--field value ...] --output DIR
                                            label the training set with the teachers once, save it
                                            (then train with --train_dataset_dir DIR)
  sts-eval MODEL FILE.jsonl                 Spearman x100 of cosine similarity (sentence1, sentence2, score)
  quickstart [--data_dir DIR] [--model M]   fine-tune a teacher, distil a 2-layer student from its logits
                                            and layers, compare it with the same student without KD
  export ...                                write a trained student in standard formats (hf_distill.export)
  keys                                      list every valid recipe key

`hf-distill train --help` describes every field; `hf-distill --version` prints the version;
--debug (or HF_DISTILL_DEBUG=1) shows the traceback of an error."""

DEBUG_FLAG = "--debug"
# commands that load models: the console script registers hf_distill's models with AutoModel for them
MODEL_COMMANDS = ("train", "evaluate", "label", "sts-eval", "quickstart", "export")


def _asks_help(rest: list[str]) -> bool:
    """`hf-distill COMMAND --help`: answered from the fields alone, loading no model code."""
    return bool(rest) and rest[0] in ("-h", "--help")


def _run_recipe(command: str, rest: list[str]) -> int:
    from .recipes import parse_train_config, print_fields_help

    if _asks_help(rest):  # the fields only: no model code, no data code
        print_fields_help(command)
        return 0
    from .recipe_task import recipe_task, run_embedding_task
    from .train import run

    if recipe_task(rest) == "embedding":  # its own keys: hf_distill.embedding_recipe
        run_embedding_task(command, rest)
        return 0
    recipe = rest[0] if rest and not rest[0].startswith("--") else None
    run(*parse_train_config(rest), do_train=command == "train", recipe=recipe)
    return 0


def _train(rest: list[str]) -> int:
    return _run_recipe("train", rest)


def _evaluate(rest: list[str]) -> int:
    return _run_recipe("evaluate", rest)


def _label(rest: list[str]) -> int:
    from . import label_command

    if _asks_help(rest):
        print(f"{label_command.USAGE}\n\n{label_command.__doc__.strip()}")
        return 0
    label_command.label(rest)
    return 0


def _sts_eval(rest: list[str]) -> int:
    from .sts_command import sts_eval

    sts_eval(rest)
    return 0


def _quickstart(rest: list[str]) -> int:
    from .quickstart_command import quickstart

    quickstart(rest)
    return 0


def _export(rest: list[str]) -> int:
    try:
        from ..export.cli import main as export_main
    except ModuleNotFoundError as error:
        if not (error.name or "").startswith("hf_distill.export"):
            raise  # hf_distill.export is there but lacks one of its own dependencies: say which
        print("export needs hf_distill.export (not installed)", file=sys.stderr)
        return 2
    status = export_main(rest)
    return 0 if status is None else status


def _keys(rest: list[str]) -> int:
    from .recipes import describe_keys

    print(describe_keys())
    return 0


COMMANDS = {"train": _train, "evaluate": _evaluate, "label": _label, "sts-eval": _sts_eval,
            "quickstart": _quickstart, "export": _export, "keys": _keys}


def _version() -> str:
    from .. import __version__

    return f"hf_distill {__version__}"


# TrainingArguments has a `debug` field of its own (transformers' DebugOption values): `--debug underflow_overflow`
# sets that field; a `--debug` followed by anything else is the flag.
TRAINING_DEBUG_OPTIONS = ("underflow_overflow", "tpu_metrics_debug")


def _training_debug_value(token: str | None) -> bool:
    words = (token or "").replace(",", " ").split()
    return bool(words) and all(word in TRAINING_DEBUG_OPTIONS for word in words)


def debugging(argv: list[str]) -> bool:
    """--debug on the command line (removed from `argv`; not the `--debug OPTION` override of TrainingArguments'
    own field) or HF_DISTILL_DEBUG set to anything but 0 / false."""
    flag, index = False, 0
    while index < len(argv):
        following = argv[index + 1] if index + 1 < len(argv) else None
        if argv[index] == DEBUG_FLAG and not _training_debug_value(following):
            del argv[index]
            flag = True
        else:
            index += 1
    return flag or os.environ.get("HF_DISTILL_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def main(argv: list[str] | None = None) -> int:
    """Run `hf-distill COMMAND ...`; the exit status (a `ConfigError` exits with 2 and one message,
    or raises with --debug)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = debugging(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        print(_version())
        return 0
    command, rest = argv[0], argv[1:]
    try:
        if command not in COMMANDS:
            close = difflib.get_close_matches(command, list(COMMANDS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown command {command!r}{hint}\n{USAGE}")
        if command in MODEL_COMMANDS and not (_asks_help(rest)):
            importlib.import_module("hf_distill.modeling")  # registers the models (lazy in the console script)
        return COMMANDS[command](rest)
    except (ConfigError, ValueError) as error:
        if debug or not (isinstance(error, ConfigError) or checked_input(error)):
            raise
        print(f"hf-distill: error: {' '.join(str(error).split())}" if not isinstance(error, ConfigError)
              else f"hf-distill: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


# Modules whose ValueErrors are input checks worded for the user (field, value, what is valid).
CHECKING_MODULES = ("hf_distill.", "transformers.training_args", "transformers.trainer")


def checked_input(error: ValueError) -> bool:
    """Whether `error` is an input check: raised by a `raise` statement of hf_distill or the Trainer (its
    innermost frame), so the CLI prints it as one line. Any other ValueError (`int("x")` inside hf_distill,
    a library's inside) is a defect and keeps its traceback."""
    import linecache

    traceback = error.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    if traceback is None:
        return False
    module = traceback.tb_frame.f_globals.get("__name__", "")
    if module not in ("transformers.training_args", "transformers.trainer") and not module.startswith("hf_distill."):
        return False
    line = linecache.getline(traceback.tb_frame.f_code.co_filename, traceback.tb_lineno).strip()
    return line.startswith("raise ")
