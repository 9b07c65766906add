"""Names of the embedding benchmark's rows: a student and how its run's settings differ from a fixed base.

A row's name keeps its meaning when a recipe's defaults change: "distilled l3" is always a run with the
first recipes' settings (`NAMING_BASE`), and a run with other settings says which, e.g.
"distilled l3, blocks of 8" or "distilled l3, random batches, lr 3e-05". `recipe_model` names the rows of
the recipes as they are now, which the targets and the README summary read.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

RECIPES = Path(__file__).resolve().parents[1] / "recipes" / "embedding"
STUDENTS = {"l3": ("minilm_l3.yaml", 3, [0, 2, 5]), "l2": ("minilm_l2.yaml", 2, [0, 5])}

# option of benchmarks/embedding.py -> (the recipe key it overrides, how a row's name shows it)
VARIANT_OPTIONS = {
    "sampler": ("train_sampling_strategy", "{} batches"),
    "lr": ("learning_rate", "lr {:g}"),
    "batch": ("per_device_train_batch_size", "batch {}"),
    "epochs": ("num_train_epochs", "{:g} epochs"),
    "train_block_size": ("train_block_size", "blocks of {}"),
    "patience": ("early_stopping_patience", "patience {}"),
    "temperature": ("similarity_temperature", "temperature {:g}"),
}
# the settings of the embedding recipes' first rows, which every name is relative to
NAMING_BASE = {"train_sampling_strategy": "group_by_length", "learning_rate": 1e-4, "per_device_train_batch_size": 64,
               "num_train_epochs": 5, "train_block_size": None, "early_stopping_patience": 4,
               "similarity_temperature": 0.05}


def variant(student: str, opts) -> str:
    """What a row's name adds for a run whose settings (the recipe's, overridden by `opts`) differ from
    `NAMING_BASE`: "" for those, e.g. ", random batches, lr 3e-05" for `--sampler random --lr 3e-5`."""
    import yaml

    if getattr(opts, "smoke", False):  # smoke runs shrink every setting on tiny models: their rows name none
        return ""
    recipe = yaml.safe_load((RECIPES / STUDENTS[student][0]).read_text())
    recipe.setdefault("train_sampling_strategy", "random")
    parts = []
    for option, (key, shown) in VARIANT_OPTIONS.items():
        value = getattr(opts, option, None)
        value = recipe.get(key) if value is None else value
        if value is not None and value != NAMING_BASE[key]:
            parts.append(shown.format(value))
    return "".join(f", {part}" for part in parts)


def recipe_model(student: str) -> str:
    """The name of the rows run with the recipe's own settings now, e.g. "distilled l3"."""
    return f"distilled {student}{variant(student, SimpleNamespace())}"
