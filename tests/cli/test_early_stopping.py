"""early_stopping_patience (hf_distill/cli/early_stopping.py): checked and completed before loading, the task's
metric by default, training stops before its cap and ends on the best checkpoint."""

from __future__ import annotations

import json

import pytest
import torch

from hf_distill.cli import main, parse_train_config, run

from .conftest import FAST, error_line, pair_rows, results, write_jsonl, write_recipe


def _recipe(cli_assets, tmp_path, **extra) -> str:
    settings = dict(model_name_or_path=cli_assets["backbone"], data_dir=cli_assets["data"],
                    output_dir=str(tmp_path / "out"), early_stopping_patience=2, eval_strategy="steps", eval_steps=3,
                    num_train_epochs=40, learning_rate=5e-3, save_total_limit=1, logging_steps=3)
    return write_recipe(tmp_path / "recipe.yaml", **{**settings, **extra})


def test_stops_before_the_cap_and_keeps_the_best_checkpoint(cli_assets, tmp_path, monkeypatch):
    """Validation accuracy scripted 0.5, 0.7, 0.6, 0.65: the best is the 2nd evaluation (step 6); patience 2
    stops training at the 4th (step 12) of a 120-step cap, and the saved model is checkpoint-6's."""
    from safetensors.torch import load_file

    from hf_distill import metrics

    scripted = iter([0.0, 0.5, 0.7, 0.6, 0.65, 0.0])  # first: the dummy batch that lists the task's metrics
    real = metrics.compute_metrics_for
    monkeypatch.setattr(metrics, "compute_metrics_for",
                        lambda n: lambda prediction: dict(real(n)(prediction), accuracy=next(scripted)))
    recipe = _recipe(cli_assets, tmp_path, save_total_limit=None)  # every checkpoint kept, to compare
    model_args, data_args, args = parse_train_config([recipe, *FAST])
    assert args.load_best_model_at_end and str(args.save_strategy.value) == "steps" and args.save_steps == 3
    assert args.metric_for_best_model is None  # the labels decide it
    run(model_args, data_args, args)
    assert args.metric_for_best_model == "accuracy" and args.greater_is_better is True

    out = tmp_path / "out"
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 12 < 40 * 12 // 4  # stopped early
    assert [e["eval_accuracy"] for e in state["log_history"] if "eval_accuracy" in e] == [0.5, 0.7, 0.6, 0.65]
    assert state["best_metric"] == 0.7 and state["best_model_checkpoint"] == str(out / "checkpoint-6")
    final, best, last = (load_file(folder / "model.safetensors") for folder in (out, out / "checkpoint-6", out / "checkpoint-12"))
    assert all(torch.equal(final[name], best[name]) for name in final)  # the best checkpoint was kept and saved
    assert not all(torch.equal(final[name], last[name]) for name in final)


def test_regression_stops_on_spearman(cli_assets, tmp_path):
    sts = tmp_path / "sts"
    sts.mkdir()
    for split, seed in (("train", 3), ("validation", 4)):
        rows = pair_rows(12, seed, label=False)
        write_jsonl(sts / f"{split}.jsonl", [dict(row, score=(i * 7 + seed) % 6 * 0.8) for i, row in enumerate(rows)])
    model_args, data_args, args = parse_train_config([_recipe(cli_assets, tmp_path, data_dir=str(sts)), *FAST,
                                                      "--max_steps", "6"])
    run(model_args, data_args, args)
    assert args.metric_for_best_model == "spearman" and args.greater_is_better is True
    assert "eval_spearman" in results(tmp_path / "out")


@pytest.mark.parametrize(
    "override, message",
    [
        (["--eval_strategy", "no"], "early_stopping_patience=2 needs evaluations: set eval_strategy to 'epoch' or 'steps' (it is 'no')."),
        (["--load_best_model_at_end", "false"], "early_stopping_patience=2 keeps the best checkpoint: load_best_model_at_end must be true"),
        (["--save_strategy", "epoch"], "early_stopping_patience=2 needs a checkpoint at every evaluation: save_strategy='epoch' must be eval_strategy='steps'"),
        (["--save_strategy", "steps", "--save_steps", "4"], "early_stopping_patience=2 needs a checkpoint at every evaluation: save_steps=4 must be a multiple of eval_steps=3."),
        (["--early_stopping_patience", "-2"], "early_stopping_patience=-2 is not valid; give a number of evaluations >= 1 (0 or null: off)."),
        (["--metric_for_best_model", "spearman"], "metric_for_best_model='spearman' is not reported on this task's validation split; choose one of accuracy, f1, loss."),
    ],
)
def test_inconsistent_settings_fail_in_one_line_before_any_model_loads(cli_assets, tmp_path, capsys, monkeypatch,
                                                                       override, message):
    from hf_distill.cli import train

    monkeypatch.setattr(train, "build_student", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(SystemExit) as exit_info:
        main(["train", _recipe(cli_assets, tmp_path), *override, *FAST])
    assert exit_info.value.code == 2
    assert error_line(capsys.readouterr().err).startswith("hf-distill: error: " + message)


def test_no_validation_split_is_refused(cli_assets, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", _recipe(cli_assets, tmp_path, data_dir=None, train_file=f"{cli_assets['data']}/train.jsonl"),
              *FAST])
    assert error_line(capsys.readouterr().err).startswith(
        "hf-distill: error: early_stopping_patience=2 needs a labelled validation split to stop on")


def test_off_by_default_and_with_zero(cli_assets, tmp_path):
    for extra in ([], ["--early_stopping_patience", "0"]):
        _, data_args, args = parse_train_config([_recipe(cli_assets, tmp_path, early_stopping_patience=None), *extra])
        assert not data_args.early_stopping_patience and not args.load_best_model_at_end
