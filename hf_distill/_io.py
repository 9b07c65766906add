"""Small helpers shared by the evaluators: numbers to NumPy, model detection, JSON Lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def as_numpy(values: Any) -> np.ndarray:
    """A float64 array from a list, NumPy array or torch tensor."""
    if hasattr(values, "detach"):  # torch.Tensor
        values = values.detach().float().cpu().numpy()
    return np.asarray(values, dtype=np.float64)


def is_module(obj: Any) -> bool:
    """True for a torch module (a model to score with), False for a plain scoring function."""
    try:
        import torch

        return isinstance(obj, torch.nn.Module)
    except ImportError:  # pragma: no cover
        return False


def read_jsonl(path: Path) -> list[dict]:
    """Every non-empty line of a JSON Lines file."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist.")
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
