"""The one error every `hf-distill` command reports as `hf-distill: error: ...` (exit status 2)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A recipe or command line that cannot run (unknown key, bad value, inconsistent data/model)."""


def first_line(error: BaseException, limit: int = 160) -> str:
    """'Type: first line of the message' (cut at `limit` characters), for one-line reports of a library error."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:limit]}" if text else type(error).__name__
