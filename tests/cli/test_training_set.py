"""Recipe keys for data beyond the gold set (hf_distill/cli/training_set.py): augment_*, transfer_*,
train_dataset_dir, through `hf-distill label` and `hf-distill train` on tiny models and data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from datasets import load_from_disk

from hf_distill.cli import main

from .conftest import FAST, error_line, results, write_recipe


def _recipe(cli_assets, tmp_path, **extra) -> str:
    settings = dict(teacher_name_or_path=cli_assets["teacher"], num_student_layers=1, data_dir=cli_assets["data"],
                    output_dir=str(tmp_path / "student"), precompute_teacher_logits=True, alpha=0.5, augment_n=2,
                    transfer_files=[cli_assets["transfer"]], transfer_columns=["a", "b"])
    return write_recipe(tmp_path / "recipe.yaml", **{**settings, **extra})


@pytest.fixture(scope="module")
def labelled(cli_assets, tmp_path_factory) -> tuple[str, str]:
    """(recipe, folder): the recipe's training set, augmented, joined by the transfer file, labelled and saved."""
    tmp_path = tmp_path_factory.mktemp("labelled")
    recipe = _recipe(cli_assets, tmp_path)
    assert main(["label", recipe, "--output", str(tmp_path / "set"), *FAST]) == 0
    return recipe, str(tmp_path / "set")


def test_label_saves_gold_augmented_and_transfer_rows_each_with_teacher_logits(labelled):
    _, folder = labelled
    saved = load_from_disk(folder)
    origins = saved["origin"]
    assert origins.count("gold") == 12 and origins.count("transfer") == 5 and 0 < origins.count("augmented") <= 24
    assert len(saved) == 12 + 5 + origins.count("augmented")
    labels = dict(zip(origins, saved["label"]))
    assert [label is None for label, origin in zip(saved["label"], origins) if origin != "gold"] == [True] * (len(saved) - 12)
    assert labels["gold"] in (0, 1)
    assert all(len(row) == 2 for row in saved["teacher_logits_0"])  # every row labelled by the (2-class) teacher
    gold = [s for s, o in zip(saved["sentence1"], origins) if o == "gold"]
    augmented = [s for s, o in zip(saved["sentence1"], origins) if o == "augmented"]
    assert set(augmented) - set(gold)  # new texts, not copies


def test_train_runs_on_the_augmented_transfer_set_it_labels(cli_assets, labelled, tmp_path):
    recipe, folder = labelled
    out = tmp_path / "run"
    assert main(["train", recipe, "--output_dir", str(out), "--max_steps", "2", "--save_strategy", "no",
                 "--logging_steps", "1", *FAST]) == 0
    assert results(out)["train_samples"] == len(load_from_disk(folder))  # the same rows as `label` saved
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    assert any("soft" in entry for entry in history)


def test_masked_lm_gives_the_candidates(cli_assets, labelled, tmp_path):
    recipe = _recipe(cli_assets, tmp_path, augment_masked_lm=cli_assets["masked_lm"], transfer_files=None, augment_n=3)
    assert main(["label", recipe, "--output", str(tmp_path / "set"), *FAST]) == 0
    saved = load_from_disk(str(tmp_path / "set"))
    by_lm = {s for s, o in zip(saved["sentence1"], saved["origin"]) if o == "augmented"}
    by_embeddings = {s for s, o in zip(load_from_disk(labelled[1])["sentence1"], load_from_disk(labelled[1])["origin"])
                     if o == "augmented"}
    assert by_lm and by_lm != by_embeddings and "transfer" not in saved["origin"]


def test_a_saved_set_trains_with_no_teacher(cli_assets, labelled, tmp_path, monkeypatch):
    """A student backbone, no teacher: the soft loss reads the saved logits."""
    from hf_distill.cli import train

    monkeypatch.setattr(train, "load_teacher_model", lambda *a, **k: pytest.fail("a teacher was loaded"))
    out = tmp_path / "reused"
    recipe = write_recipe(tmp_path / "reuse.yaml", model_name_or_path=cli_assets["backbone"], data_dir=cli_assets["data"],
                          train_dataset_dir=labelled[1], output_dir=str(out), alpha=0.5)
    assert main(["train", recipe, "--max_steps", "2", "--save_strategy", "no", "--logging_steps", "1", *FAST]) == 0
    assert results(out)["train_samples"] == len(load_from_disk(labelled[1]))
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    assert any("soft" in entry for entry in history)


def test_the_labelling_recipe_with_the_saved_set_never_runs_its_teacher(labelled, tmp_path, monkeypatch):
    """The recipe that labelled the set, pointed at it: the teacher is loaded (the student is cut from it) but
    its forward never runs: no augmentation, transfer or labelling again, and no online teacher."""
    from hf_distill.cli import train

    real = train.load_teacher_model

    def teacher_that_must_not_run(*args, **kwargs):
        teacher = real(*args, **kwargs)

        def refuse(module, inputs):  # the student cut from the teacher copies the hook: only the teacher refuses
            if module is teacher:
                pytest.fail("the teacher ran")

        teacher.register_forward_pre_hook(refuse)
        return teacher

    monkeypatch.setattr(train, "load_teacher_model", teacher_that_must_not_run)
    recipe, folder = labelled
    out = tmp_path / "again"
    assert main(["train", recipe, "--train_dataset_dir", folder, "--output_dir", str(out), "--max_steps", "2",
                 "--save_strategy", "no", *FAST]) == 0
    assert results(out)["train_samples"] == len(load_from_disk(folder))


@pytest.mark.parametrize(
    "override, message",
    [
        (["--augment_n", "-1"], "augment_n=-1 is not valid; give a number of new pairs per pair >= 0 (0: off)."),
        (["--augment_p", "1.5"], "augment_p=1.5 is not valid; give a probability in [0, 1]."),
        (["--augment_k", "0"], "augment_k=0 is not valid; give a number of candidates >= 1."),
        (["--augment_seed", "-3"], "augment_seed=-3 is not valid; give a seed >= 0."),
        (["--transfer_files", "missing.jsonl"], "transfer_files: 'missing.jsonl' is not a file;"),
        (["--transfer_columns", "a", "b", "c"], "transfer_columns=['a', 'b', 'c'] is not valid;"),
        (["--train_dataset_dir", "nowhere"], "train_dataset_dir='nowhere' is not a dataset saved with save_to_disk"),
        (["--teacher_name_or_path", "null", "--model_name_or_path", "m"], "augment_n=2 and transfer_files need teachers:"),
    ],
)
def test_invalid_values_fail_in_one_line_before_loading(cli_assets, tmp_path, capsys, monkeypatch, override, message):
    from hf_distill.cli import train

    monkeypatch.setattr(train, "load_data", lambda *a, **k: pytest.fail("data was loaded"))
    with pytest.raises(SystemExit) as exit_info:
        main(["train", _recipe(cli_assets, tmp_path), *override])
    assert exit_info.value.code == 2
    assert error_line(capsys.readouterr().err).startswith("hf-distill: error: " + message)


def test_transfer_columns_the_files_lack_are_named(cli_assets, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["label", _recipe(cli_assets, tmp_path, transfer_columns=["a", "question"]), "--output",
              str(tmp_path / "set"), *FAST])
    assert exit_info.value.code == 2
    error = error_line(capsys.readouterr().err)
    assert "transfer_files / transfer_columns:" in error and "'question'" in error
    assert not Path(tmp_path / "set").exists()
