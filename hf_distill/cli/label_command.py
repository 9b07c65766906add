"""`hf-distill label RECIPE.yaml [--field value ...] --output DIR`: label a training set once, save it.

The recipe's training split, extended as the recipe asks (augment_n, transfer_files), is labelled by
each of its teachers (a `teacher_logits_{k}` column per teacher) and written with
`datasets.Dataset.save_to_disk`. Launched with `torchrun` / `accelerate launch`, every process labels
its share of the batches. `hf-distill train RECIPE.yaml --train_dataset_dir DIR` then trains on the
saved set without running the teachers (unless layer losses need them online), as often as wanted.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from .errors import ConfigError
from .recipes import parse_train_config
from .sources import check_model_sources

USAGE = "usage: hf-distill label RECIPE.yaml [--field value ...] --output DIR"


def split_output(argv: list[str]) -> tuple[str, list[str]]:
    """(DIR, the other arguments) from `... --output DIR ...` or `--output=DIR`."""
    rest, output, tokens = [], None, list(argv)
    while tokens:
        token = tokens.pop(0)
        if token == "--output":
            if not tokens or tokens[0].startswith("--"):
                raise ConfigError(f"--output needs a folder. {USAGE}")
            output = tokens.pop(0)
        elif token.startswith("--output="):
            output = token.split("=", 1)[1]
        else:
            rest.append(token)
    if not output:
        raise ConfigError(f"--output DIR is missing: the folder the labelled set is saved to. {USAGE}")
    return output, rest


def label(argv: list[str]) -> str:
    """Label the recipe's training set with its teachers and save it to --output; returns the folder."""
    from transformers import set_seed

    from .query_groups import check_trec_folders
    from .recipe_task import recipe_task
    from .train import load_data, load_teachers, setup_logging
    from .training_set import describe_origins, extend_training_set, label_training_set

    output, rest = split_output(argv)
    if recipe_task(rest) == "embedding":
        raise ConfigError("hf-distill label labels the pairs of a task: pairs recipe; a task: embedding recipe computes "
                          "its teacher embeddings when it trains (hf-distill train RECIPE.yaml).")
    model_args, data_args, training_args = parse_train_config(rest)
    if not model_args.teacher_name_or_path:
        raise ConfigError("label needs teachers: teacher_name_or_path is not set in the recipe or on the command line.")
    if data_args.train_dataset_dir and Path(data_args.train_dataset_dir).resolve() == Path(output).resolve():
        raise ConfigError(f"--output {output!r} is the train_dataset_dir it reads; save the labelled set elsewhere.")
    check_model_sources(model_args, data_args, rest[0] if rest and not rest[0].startswith("--") else None,
                        student=False)
    check_trec_folders(data_args)  # ranking_train_dirs' candidate pairs join the set: before any loading
    setup_logging(training_args)
    set_seed(training_args.seed)
    splits = load_data(model_args, data_args, training_args, do_train=True)
    teachers, _ = load_teachers(model_args, splits, training_args.label_column)
    train = extend_training_set(splits.train, teachers, splits.text_columns, data_args, training_args)
    train, _ = label_training_set(train, teachers, splits.text_columns, data_args, training_args, always=True)
    with training_args.main_process_first(desc="saving the labelled set"):  # the others wait for the save
        if training_args.process_index == 0:
            train.save_to_disk(output)
            print(_next_steps(rest, output, describe_origins(train), len(teachers)), flush=True)
    return output


def _next_steps(rest: list[str], output: str, rows: str, teachers: int) -> str:
    recipe = rest[0] if rest and not rest[0].startswith("--") else "RECIPE.yaml"
    overrides = rest[1:] if rest and not rest[0].startswith("--") else rest
    command = shlex.join(["hf-distill", "train", recipe, *overrides, "--train_dataset_dir", output])
    return (
        f"[label] {rows} labelled by {teachers} teacher(s) -> {output}\n"
        f"Train on it (the teachers' logits come from the set: no teacher runs unless layer losses need one):\n"
        f"  {command}"
    )
