"""The one error every `hf-distill` command reports as `hf-distill: error: ...` (exit status 2)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A recipe or command line that cannot run (unknown key, bad value, inconsistent data/model)."""
