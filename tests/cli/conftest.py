"""Shared by the CLI tests: a tiny backbone, a saved tiny teacher, a masked LM, pair files, recipe helpers."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from transformers import BertForMaskedLM

from ..conftest import WORDS, make_bert_config, save_backbone_and_teacher

FAST = ["--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8", "--report_to", "none",
        "--use_cpu", "true", "--disable_tqdm", "true", "--max_length", "32"]


def pair_rows(n: int, seed: int, names=("sentence1", "sentence2"), label=True) -> list[dict]:
    rng = random.Random(seed)
    words = [w for w in WORDS if w.isalpha()]
    rows = []
    for _ in range(n):
        row = {name: " ".join(rng.choices(words, k=rng.randint(3, 7))) for name in names}
        if label:
            row["label"] = rng.randint(0, 1)
        rows.append(row)
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def write_recipe(path: Path, **settings) -> str:
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return str(path)


def error_line(stderr: str) -> str:
    """The `hf-distill: error: ...` message, checked to be the last thing written and one line long
    (progress bars of data loading may come before it)."""
    message = stderr[stderr.index("hf-distill: error: "):].strip()
    assert "\n" not in message, message
    return message


def results(folder) -> dict:
    return json.loads((Path(folder) / "all_results.json").read_text())


@pytest.fixture(scope="package")
def cli_assets(tmp_path_factory, tiny_tokenizer) -> dict[str, str]:
    """A tiny backbone, a saved 2-layer teacher, a tiny masked LM, train/validation files and a transfer file
    whose text columns are named `a` and `b`."""
    root = tmp_path_factory.mktemp("cli_assets")
    backbone, teacher = save_backbone_and_teacher(root, tiny_tokenizer, backbone_layers=1, teacher_layers=2)
    masked_lm = root / "masked_lm"
    BertForMaskedLM(make_bert_config(1)).save_pretrained(masked_lm)
    tiny_tokenizer.save_pretrained(masked_lm)
    data = root / "data"
    data.mkdir()
    write_jsonl(data / "train.jsonl", pair_rows(12, 0))
    write_jsonl(data / "validation.jsonl", pair_rows(10, 1))
    transfer = write_jsonl(root / "transfer.jsonl", pair_rows(5, 2, names=("a", "b"), label=False))
    return {"root": str(root), "backbone": str(backbone), "teacher": str(teacher), "masked_lm": str(masked_lm),
            "data": str(data), "transfer": transfer}
