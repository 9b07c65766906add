"""README.md as a user reads it: short, its Python example runs, its paths and commands exist.

The code block after `<!-- readme-test -->` runs here on a tiny random teacher and a few rows: the
only changes are the Hub dataset and the model paths, replaced by local ones (each replaced text must
be in the block, so an edited example cannot silently stop being tested). CI reads the test command
on the first line after `<!-- test-command -->`.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from tests.conftest import make_cross_encoder

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
TEST_COMMAND = "HF_HUB_OFFLINE=1 python -m pytest -q -p no:cacheprovider tests"


def _marked_blocks(marker: str) -> list[str]:
    """The code of every fenced block right after `marker`."""
    return re.findall(rf"{re.escape(marker)}\n```\w*\n(.*?)\n```", README, re.DOTALL)


def test_readme_is_a_guide_not_a_notebook():
    # about 300 lines of guide; the rendered results summaries grow as benchmarks finish (the frontier: a row
    # per task and depth), within the bound of under 350
    assert len(README.splitlines()) < 350


def test_test_command_follows_its_marker():
    """.ci/run takes the first line after the marker that is not a code fence."""
    after = README.split("<!-- test-command -->\n", 1)[1].splitlines()
    assert next(line for line in after if not line.startswith("```")) == TEST_COMMAND


def _write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_distilling_example_runs(tmp_path, tiny_tokenizer, pairs, monkeypatch):
    """The "Distilling in Python" example, end to end: a student trains from the labelled set and is saved."""
    (code,) = _marked_blocks("<!-- readme-test -->")
    teacher_dir = tmp_path / "teacher"
    teacher = make_cross_encoder(tiny_tokenizer, num_layers=4)
    teacher.save_pretrained(teacher_dir)
    tiny_tokenizer.save_pretrained(teacher_dir)
    rows = [{"sentence1": a, "sentence2": b, "label": i % 2, "idx": i} for i, (a, b) in enumerate(pairs * 3)]  # GLUE's columns
    files = {"train": _write_jsonl(tmp_path / "train.jsonl", rows), "validation": _write_jsonl(tmp_path / "validation.jsonl", rows[:4])}
    replacements = {
        'load_dataset("nyu-mll/glue", "mrpc")': f'load_dataset("json", data_files={files!r})',
        '"outputs/teacher/mrpc"': repr(str(teacher_dir)),
        '"outputs/kd-mrpc"': repr(str(tmp_path / "kd-mrpc")),
    }
    for old, new in replacements.items():
        assert old in code, f"the README example no longer contains {old}: update this test with it"
        code = code.replace(old, new)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "README.md (readme-test)", "exec"), namespace)  # noqa: S102 (the README's own example)

    from hf_distill.batch_keys import logits_column

    assert logits_column(0) in namespace["train"].column_names  # the teacher labelled the training set
    assert namespace["trainer"].state.global_step > 0
    saved = tmp_path / "kd-mrpc"
    assert {"model.safetensors", "config.json", "README.md"} <= {p.name for p in saved.iterdir()}
    from transformers import AutoModel

    again = AutoModel.from_pretrained(saved)
    assert again.config.encoder.num_hidden_layers == 2


def _expand(path: str) -> list[str]:
    """`recipes/kd/{mrpc,stsb}.yaml` -> both paths."""
    parts = re.split(r"\{([^}]*)\}", path)
    choices = [[part] if i % 2 == 0 else part.split(",") for i, part in enumerate(parts)]
    return ["".join(combination) for combination in itertools.product(*choices)]


PATH = re.compile(r"`[^`]*?\b((?:recipes|docs|benchmarks|hf_distill|model_cards|tests)/[\w./{},*-]*\w)")


@pytest.mark.parametrize("path", sorted({m.group(1) for m in PATH.finditer(README)}))
def test_paths_in_readme_exist(path):
    for each in _expand(path):
        assert list(REPO.glob(each)), f"README.md names {each}, which does not exist"


def test_hf_distill_commands_in_readme_exist():
    from hf_distill.cli.dispatch import COMMANDS

    used = set(re.findall(r"hf-distill ([a-z][\w-]*)", README))
    assert used, "no hf-distill command found in README.md"
    assert used <= set(COMMANDS), f"README.md uses unknown commands: {sorted(used - set(COMMANDS))}"
