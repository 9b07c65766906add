"""The one error export raises, and the check for an optional extra.

`hf-distill export` prints an `ExportError` as one line and exits 2: each message says what is
wrong and what to do, so a user never needs the traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["ExportError", "require_extra"]


class ExportError(ValueError):
    """A student cannot be exported as asked; the message says why and what would work."""


def require_extra(module: str, purpose: str, extra: str = "onnx") -> ModuleType:
    """Import an optional dependency, or fail with the `pip install` line that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ExportError(
            f"{purpose} needs the {module!r} package, which is not installed: pip install 'hf_distill[{extra}]'"
        ) from error
