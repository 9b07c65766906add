"""Which pipeline a recipe runs, from its `task` key (the command line's `--task` wins).

- `pairs` (the default): a cross-encoder or Siamese student on text pairs (`cli/train.py`), with the
  keys of `ModelArguments`, `DataArguments` and `DistillationArguments`;
- `embedding`: a sentence-embedding teacher into a Siamese student from unlabelled sentences
  (`hf_distill.embedding_recipe`), with the keys of `EmbeddingRecipeArguments` and `DistillationArguments`.

So `hf-distill train RECIPE.yaml` runs every recipe under recipes/; the key is read before the
recipe is parsed, since the two pipelines know different keys.
"""

from __future__ import annotations

import logging

from .errors import ConfigError
from .tasks import check_task


def recipe_task(argv: list[str]) -> str:
    """The task of `RECIPE.yaml [--field value ...]`: `--task`, else the recipe's `task`, else 'pairs'."""
    from .recipes import load_recipe, parse_overrides

    path = argv[0] if argv and not argv[0].startswith("--") else None
    settings = load_recipe(path) if path else {}
    overrides = parse_overrides(argv[1:] if path else argv)
    task = overrides.get("task", settings.get("task"))
    if task is None or (isinstance(task, str) and task.strip().lower() in ("null", "~")):
        return "pairs"
    return check_task(task)


def run_embedding_task(command: str, argv: list[str]) -> None:
    """`hf-distill train` on a `task: embedding` recipe: `hf_distill.embedding_recipe` with the same arguments."""
    if command != "train":
        raise ConfigError(
            f"hf-distill {command} does not run task: embedding recipes; `hf-distill train` scores their sts_eval_files "
            "at the end, and `hf-distill sts-eval MODEL FILE.jsonl` scores a saved student."
        )
    from ..embedding_recipe import parse_embedding_recipe, run_embedding_recipe

    if not logging.getLogger().handlers:
        logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", level=logging.INFO)
    try:
        arguments = parse_embedding_recipe(argv)
    except ConfigError as error:
        if str(error).startswith("unknown key"):
            raise ConfigError(f"{error}; a task: embedding recipe takes hf_distill.embedding_recipe's keys.") from None
        raise
    run_embedding_recipe(*arguments)
