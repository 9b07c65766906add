"""The pipelines a recipe's `task` key names: `pairs` (the default) and `embedding` (see `recipe_task`)."""

from __future__ import annotations

from .errors import ConfigError

TASKS = ("pairs", "embedding")


def check_task(task) -> str:
    """`task` when it names a pipeline, else one `ConfigError` line."""
    if task not in TASKS:
        raise ConfigError(f"task={task!r} is not valid; choose one of {', '.join(map(repr, TASKS))}.")
    return task
