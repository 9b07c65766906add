"""`hf-distill` errors a user meets: one line `hf-distill: error: ...` on stderr, exit status 2, no traceback
(--debug or HF_DISTILL_DEBUG=1 raises instead); `hf-distill --help` / `--version` without torch."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hf_distill.cli.train as train_module
from hf_distill.cli import ConfigError, main

from .conftest import FAST, pair_rows, write_jsonl, write_recipe


def failure(argv: list[str], capsys) -> str:
    """Run `hf-distill ARGV`: it must exit with 2 and write exactly one non-empty line to stderr; that line."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def recipe(path: Path, cli_assets, **settings) -> str:
    """A recipe over the tiny data and backbone, `settings` winning."""
    values = {"model_name_or_path": cli_assets["backbone"], "data_dir": cli_assets["data"],
              "output_dir": str(path.parent / "out")}
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_recipe(path, **{**values, **settings})


# ------------------------------------------------------------------------------ 1. missing model folders
def test_missing_teacher_names_the_recipe_that_writes_it(cli_assets, tmp_path, monkeypatch, capsys, no_loading):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "recipes" / "teacher").mkdir(parents=True)
    write_recipe(tmp_path / "recipes" / "teacher" / "pairs.yaml", output_dir="outputs/teacher/pairs")
    kd = recipe(tmp_path / "recipes" / "kd" / "pairs.yaml", cli_assets, model_name_or_path=None,
                teacher_name_or_path="outputs/teacher/pairs", num_student_layers=1)
    assert failure(["train", os.path.relpath(kd), *FAST], capsys) == (
        "hf-distill: error: teacher_name_or_path='outputs/teacher/pairs' does not exist: "
        "run 'hf-distill train recipes/teacher/pairs.yaml' first (it writes that folder)"
    )
    # the model to evaluate, written by the same kind of recipe
    evaluated = recipe(tmp_path / "recipes" / "eval.yaml", cli_assets, model_name_or_path="outputs/teacher/pairs")
    assert failure(["evaluate", evaluated, *FAST], capsys) == (
        "hf-distill: error: model_name_or_path='outputs/teacher/pairs' does not exist: "
        "run 'hf-distill train recipes/teacher/pairs.yaml' first (it writes that folder)"
    )


@pytest.mark.parametrize("field, path", [("model_name_or_path", "./no/such/model"),
                                         ("teacher_name_or_path", "outputs/teacher/nowhere")])
def test_missing_local_folder_without_a_recipe(cli_assets, tmp_path, monkeypatch, capsys, no_loading, field, path):
    monkeypatch.chdir(tmp_path)
    settings = {field: path, **({"num_student_layers": 1} if field == "teacher_name_or_path" else {})}
    assert failure(["train", recipe(tmp_path / "r.yaml", cli_assets, **settings), *FAST], capsys) == (
        f"hf-distill: error: {field}={path!r} does not exist: it is neither a local folder nor reachable on the Hub"
    )


# ------------------------------------------------------------------------------ 2. the Hub out of reach
def test_hub_model_not_cached_while_offline_fails_at_once(cli_assets, tmp_path, capsys, no_loading):
    path = recipe(tmp_path / "r.yaml", cli_assets, model_name_or_path="hf-distill-tests/no-such-model")
    assert failure(["train", path, *FAST], capsys) == (
        "hf-distill: error: model_name_or_path='hf-distill-tests/no-such-model' is not a local folder and not in the "
        "Hub cache, and the Hub is offline (HF_HUB_OFFLINE=1): give a local model folder instead (or download it once online)"
    )


def test_hub_dataset_not_cached_while_offline(cli_assets, tmp_path, capsys):
    path = recipe(tmp_path / "r.yaml", cli_assets, data_dir=None, dataset_name="hf-distill-tests/no-such-dataset",
                  dataset_config_name="pairs")
    assert failure(["train", path, *FAST], capsys) == (
        "hf-distill: error: dataset_name='hf-distill-tests/no-such-dataset' (dataset_config_name='pairs') is not in "
        "the local cache and the Hub is offline (HF_HUB_OFFLINE=1): give --data_dir DIR with train/validation/test "
        "JSON Lines files (train.jsonl, validation.jsonl, test.jsonl) instead"
    )


@pytest.fixture
def online(monkeypatch):
    """As if HF_HUB_OFFLINE were not set (the tests patch every load that would reach the network)."""
    import datasets
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)


def test_hub_dataset_unreachable_online(cli_assets, tmp_path, monkeypatch, capsys, online):
    import datasets

    def no_connection(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'someone/pairs' on the Hub (ConnectTimeout)")

    monkeypatch.setattr(datasets, "load_dataset", no_connection)
    path = recipe(tmp_path / "r.yaml", cli_assets, data_dir=None, dataset_name="someone/pairs")
    assert failure(["train", path, *FAST], capsys) == (
        "hf-distill: error: dataset_name='someone/pairs' could not be loaded from the Hub (ConnectionError: Couldn't "
        "reach 'someone/pairs' on the Hub (ConnectTimeout)): give --data_dir DIR with train/validation/test JSON Lines "
        "files (train.jsonl, validation.jsonl, test.jsonl) instead"
    )


def test_hub_model_unreachable_online(cli_assets, tmp_path, monkeypatch, capsys, online):
    def no_connection(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.\nCheck your connection.")

    monkeypatch.setattr(train_module, "build_student", no_connection)
    path = recipe(tmp_path / "r.yaml", cli_assets, model_name_or_path="someone/model")
    assert failure(["train", path, *FAST], capsys) == (
        "hf-distill: error: model_name_or_path='someone/model' is neither a local folder nor reachable on the Hub "
        "(OSError: We couldn't connect to 'https://huggingface.co' to load the files.): give a local model folder instead"
    )


# ------------------------------------------------------------------------------ 3. malformed data files
def test_broken_json_line_names_file_and_line(cli_assets, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    train = data / "train.jsonl"
    lines = [json.dumps(row) for row in pair_rows(6, 0)]
    lines[2] = '{"sentence1": "a man", "sentence2": "a dog" "label": 1}'
    train.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert failure(["train", recipe(tmp_path / "r.yaml", cli_assets, data_dir=str(data)), *FAST], capsys) == (
        f"hf-distill: error: train file {str(train)!r} line 3 is not valid JSON (Expecting ',' delimiter, "
        "column 45): fix or remove that line"
    )


def test_csv_row_with_extra_field_names_file_and_line(cli_assets, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    train = data / "train.csv"
    train.write_text("sentence1,sentence2,label\na man,a dog,1\nthe cat,sits,0,extra\nit rains,sun,1\n", encoding="utf-8")
    assert failure(["train", recipe(tmp_path / "r.yaml", cli_assets, data_dir=str(data)), *FAST], capsys) == (
        f"hf-distill: error: train file {str(train)!r} line 3 has 4 fields where the header has 3: fix or remove that line"
    )


# ------------------------------------------------------------------------------ 4. unsafe or malformed recipes
@pytest.mark.parametrize("text, message", [
    ('model_name_or_path: m\nseed: !!python/object/apply:os.system ["echo hacked"]\n',
     ("line 2, column 7: the YAML tag '!!python/object/apply:os.system' is not allowed (a recipe holds plain values "
      "only; it is read with yaml.safe_load)")),
    ("model_name_or_path: m\nlearning_rate: [1e-4\nseed: 1\n",
     "line 3, column 5: invalid YAML (while parsing a flow sequence: expected ',' or ']', but got ':')"),
    ("model_name_or_path: m\n  seed: 1\n", "line 2, column 7: invalid YAML (mapping values are not allowed here)"),
    ("# a list, not a mapping\n- model_name_or_path: m\n",
     "line 2: the top level must be a mapping of field: value, not a list"),
])
def test_unsafe_or_malformed_recipe_names_file_and_line(tmp_path, capsys, text, message):
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    assert failure(["train", str(path)], capsys) == f"hf-distill: error: recipe {str(path)!r} {message}"


# ------------------------------------------------------------------------------ 5. non-finite regression labels
@pytest.mark.parametrize("split, row, value", [("train", 2, math.nan), ("validation", 1, math.inf)])
def test_non_finite_regression_label_is_refused_before_training(cli_assets, tmp_path, capsys, no_loading_models,
                                                                split, row, value):
    data = tmp_path / "sts"
    data.mkdir()
    files = {}
    for name, n, seed in (("train", 6, 0), ("validation", 4, 1)):
        rows = [dict(r, score=round(1.5 + i * 0.7, 2)) for i, r in enumerate(pair_rows(n, seed, label=False))]
        if name == split:
            rows[row]["score"] = value
        files[name] = write_jsonl(data / f"{name}.jsonl", rows)  # json writes NaN / Infinity
    shown = "nan" if math.isnan(value) else "inf"
    assert failure(["train", recipe(tmp_path / "r.yaml", cli_assets, data_dir=str(data)), *FAST], capsys) == (
        f"hf-distill: error: {split} file {files[split]!r}, row {row} (counting from 0), column 'score': {shown} is "
        "not a finite number; a regression label must be finite (1 such row: fix or drop them)"
    )


@pytest.fixture
def no_loading_models(monkeypatch):
    """Fail the test if a model loads (the data may)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the bad labels were refused")

    monkeypatch.setattr(train_module, "build_models", refuse)


# ------------------------------------------------------------------------------ --debug
def test_debug_flag_or_variable_raises_with_the_traceback(tmp_path, monkeypatch, capsys):
    path = tmp_path / "r.yaml"
    path.write_text("- not a mapping\n", encoding="utf-8")
    for argv in (["--debug", "train", str(path)], ["train", str(path), "--debug"]):
        with pytest.raises(ConfigError, match="the top level must be a mapping"):
            main(argv)
    monkeypatch.setenv("HF_DISTILL_DEBUG", "1")
    with pytest.raises(ConfigError, match="the top level must be a mapping"):
        main(["train", str(path)])
    monkeypatch.setenv("HF_DISTILL_DEBUG", "0")
    assert failure(["train", str(path)], capsys).startswith("hf-distill: error: recipe")


# ------------------------------------------------------------------------------ 6. fast --help / --version
LIGHT_HELP = """
import sys
sys.argv[0] = "hf-distill"
import hf_distill.cli.dispatch as dispatch
assert dispatch.main(["--help"]) == 0 and dispatch.main(["--version"]) == 0
heavy = sorted(m for m in ("torch", "transformers", "datasets") if m in sys.modules)
assert not heavy, heavy
"""


def test_console_script_help_and_version_import_no_torch():
    done = subprocess.run([sys.executable, "-c", LIGHT_HELP], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: hf-distill COMMAND")
    script = Path(sys.executable).with_name("hf-distill")
    if not script.is_file():
        pytest.skip("the hf-distill console script is not installed next to this Python")
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert version.returncode == 0 and version.stdout.startswith("hf_distill "), version.stderr


def test_train_help_still_lists_the_fields(capsys):
    assert main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: hf-distill train CONFIG.yaml") and "--teacher_name_or_path" in out


# ------------------------------------------------------------------------------ input checks deeper down
def late_failure(argv: list[str], capsys) -> str:
    """Like `failure` for a check that needs the loaded models: loading bars may come first, then the one
    error line and no traceback."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("hf-distill: error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def test_value_errors_of_input_checks_are_one_line_and_defects_keep_their_traceback(cli_assets, tmp_path, capsys,
                                                                                    tiny_tokenizer, monkeypatch):
    from tests.conftest import make_cross_encoder

    shallow = tmp_path / "one_layer_teacher"
    make_cross_encoder(tiny_tokenizer, num_layers=1, seed=2).save_pretrained(shallow)
    capsys.readouterr()
    deeper = recipe(tmp_path / "deeper.yaml", cli_assets, model_name_or_path=cli_assets["teacher"],
                    teacher_name_or_path=str(shallow), layer_mapping="uniform", hidden_weight=1.0)
    assert late_failure(["train", deeper, *FAST], capsys).endswith(
        "num_student_layers=2 > num_teacher_layers=1; give explicit pairs instead.")
    # the Trainer's own check: evaluation every epoch needs a validation split
    no_eval = recipe(tmp_path / "no_eval.yaml", cli_assets, eval_strategy="epoch", early_stopping_patience=None,
                     validation_file=None)
    (tmp_path / "train_only").mkdir()
    (tmp_path / "train_only" / "train.jsonl").write_text((Path(cli_assets["data"]) / "train.jsonl").read_text())
    line = late_failure(["train", no_eval, "--data_dir", str(tmp_path / "train_only"), *FAST], capsys)
    assert "eval" in line, line
    # inside hf_distill, a raise statement is an input check (one line); int("x") is a defect (traceback)
    probe = probe_module(tmp_path)
    plain = recipe(tmp_path / "plain.yaml", cli_assets)
    monkeypatch.setattr(train_module, "run", probe.check)
    assert failure(["train", plain, *FAST], capsys) == "hf-distill: error: width=-1 is not valid; give a width >= 1."
    monkeypatch.setattr(train_module, "run", probe.defect)
    with pytest.raises(ValueError, match="invalid literal"):
        main(["train", plain, *FAST])
    monkeypatch.setattr(train_module, "run", lambda *a, **k: int("not a number"))  # outside hf_distill
    with pytest.raises(ValueError, match="invalid literal"):
        main(["train", plain, *FAST])


def probe_module(folder: Path):
    """A module named inside hf_distill, from a file (so its lines are readable like the package's)."""
    import importlib.util

    path = folder / "probe.py"
    path.write_text("def check(*args, **kwargs):\n    raise ValueError('width=-1 is not valid; give a width >= 1.')\n\n\n"
                    "def defect(*args, **kwargs):\n    return int('not a number')\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("hf_distill.cli._probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_debug_option_of_the_training_arguments_is_not_the_debug_flag(tmp_path, capsys):
    """`--debug underflow_overflow` sets TrainingArguments.debug (a valid key), as before the flag existed."""
    from hf_distill.cli.dispatch import debugging

    argv = ["train", "r.yaml", "--debug", "underflow_overflow", "--seed", "1"]
    assert debugging(argv) is False and argv == ["train", "r.yaml", "--debug", "underflow_overflow", "--seed", "1"]
    argv = ["--debug", "train", "r.yaml", "--debug", "tpu_metrics_debug", "--debug"]
    assert debugging(argv) is True and argv == ["train", "r.yaml", "--debug", "tpu_metrics_debug"]
    path = tmp_path / "r.yaml"
    path.write_text("model_name_or_path: ./no/such/model\n", encoding="utf-8")
    # parsed as a field (no 'unexpected argument'), and no traceback: the recipe's own error comes out as one line
    assert failure(["train", str(path), "--debug", "underflow_overflow", "--output_dir", str(tmp_path / "o")],
                   capsys) == "hf-distill: error: no data: give dataset_name (Hub) or data_dir (local train/validation/test files)."
