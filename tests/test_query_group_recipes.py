"""The recipes of recipes/ranking/ end to end through `hf-distill train`, on tiny models and a few rows:
query groups built from the training split, scored once by the teacher, trained with the group losses,
evaluated by re-ranking (and dense retrieval for the Siamese student)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hf_distill.cli import main

from .test_cli import _ranking_folders, assets  # noqa: F401  (assets: a module fixture of tiny saved models)

RECIPES = Path(__file__).resolve().parents[1] / "recipes" / "ranking"
TINY = ["--max_steps", "3", "--per_device_train_batch_size", "2", "--per_device_eval_batch_size", "8", "--max_length", "32",
        "--ranking_group_size", "3", "--eval_strategy", "no", "--save_strategy", "no", "--load_best_model_at_end", "false",
        "--logging_steps", "1", "--use_cpu", "true", "--disable_tqdm", "true", "--report_to", "none"]


@pytest.fixture(scope="module")
def ranking(assets, tmp_path_factory) -> dict[str, str]:
    """test_cli's tiny backbone and 4-layer teacher, with an answer-selection folder and a TREC folder."""
    qa, trec = _ranking_folders(tmp_path_factory.mktemp("ranking_recipes"))
    return {**assets, "qa": str(qa), "trec": str(trec)}


def _results(folder: Path) -> dict:
    return json.loads((folder / "all_results.json").read_text())


def _logged_terms(folder: Path) -> set[str]:
    state = json.loads((folder / "trainer_state.json").read_text())
    return {key for entry in state["log_history"] for key in entry}


@pytest.mark.parametrize("recipe, term", [
    ("cross_encoder_margin_mse.yaml", "margin_mse"), ("cross_encoder_listwise_kl.yaml", "listwise_kl"),
])
def test_cross_encoder_recipes_train_on_query_groups(ranking, tmp_path, recipe, term):
    out = tmp_path / "student"
    assert main(["train", str(RECIPES / recipe), "--teacher_name_or_path", ranking["teacher"], "--data_dir", ranking["qa"],
                 "--ranking_eval_dirs", ranking["trec"], "--output_dir", str(out), *TINY]) == 0
    results = _results(out)
    for prefix in ("eval_rank", "test_rank", "test_trec19"):
        assert 0.0 <= results[f"{prefix}_mrr@10"] <= 1.0
    assert term in _logged_terms(out) and "hard" not in _logged_terms(out)
    assert f"`{term}`" in (out / "README.md").read_text()


def test_siamese_recipe_with_trec_training_queries_and_dense_retrieval(ranking, tmp_path):
    out = tmp_path / "siamese"
    assert main(["train", str(RECIPES / "siamese_margin_mse.yaml"), "--model_name_or_path", ranking["backbone"],
                 "--teacher_name_or_path", ranking["teacher"], "--data_dir", ranking["qa"], "--ranking_eval_dirs",
                 ranking["trec"], "--retrieval_eval_dirs", ranking["trec"], "--ranking_train_dirs", ranking["trec"],
                 "--trec_relevance_threshold", "1", "--in_batch_weight", "0.1", "--output_dir", str(out), *TINY]) == 0
    results = _results(out)
    for metric in ("recall@100", "mrr@10", "ndcg@10"):
        assert 0.0 <= results[f"test_trec19_dense_{metric}"] <= 1.0
    assert results["test_trec19_dense_recall@100"] == 1.0  # the pool holds 4 passages: all are retrieved
    assert {"margin_mse", "in_batch"} <= _logged_terms(out)


@pytest.mark.parametrize("extra, message", [
    (["--hard_weight", "0.5"], "set hard_weight: 0"),
    (["--teacher_name_or_path", "null", "--num_student_layers", "null", "--model_name_or_path", "BACKBONE"],
     "needs teacher_name_or_path"),
    (["--ranking_group_size", "0"], "ranking_group_size=0 is not valid"),
    (["--retrieval_eval_dirs", "/nowhere"], "retrieval_eval_dirs: '/nowhere' lacks"),
])
def test_group_settings_fail_before_training(ranking, tmp_path, capsys, extra, message):
    common = ["train", str(RECIPES / "cross_encoder_margin_mse.yaml"), "--teacher_name_or_path", ranking["teacher"],
              "--data_dir", ranking["qa"], "--ranking_eval_dirs", ranking["trec"], "--output_dir", str(tmp_path / "o"), *TINY]
    with pytest.raises(SystemExit):
        main([*common, *(ranking["backbone"] if value == "BACKBONE" else value for value in extra)])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o" / "all_results.json").exists()


POINTWISE = ["--ranking_group_size", "null", "--margin_mse_weight", "0", "--hard_weight", "0.5", "--soft_weight", "0.5",
             "--precompute_teacher_logits", "true"]


def test_pointwise_training_takes_the_trec_candidates_as_transfer_pairs(ranking, tmp_path, caplog):
    from hf_distill.ranking import load_trec_run

    out = tmp_path / "pointwise"
    gold = sum(1 for _ in open(Path(ranking["qa"]) / "train.jsonl"))
    candidates = len(load_trec_run(ranking["trec"]).to_pairs())
    with caplog.at_level("INFO", logger="hf_distill.cli.training_set"):
        assert main(["train", str(RECIPES / "cross_encoder_margin_mse.yaml"), "--teacher_name_or_path", ranking["teacher"],
                     "--data_dir", ranking["qa"], "--ranking_eval_dirs", ranking["trec"], "--ranking_train_dirs",
                     ranking["trec"], "--output_dir", str(out), *TINY, *POINTWISE]) == 0
    assert f"training set: {gold} gold + {candidates} transfer rows" in caplog.text
    assert {"hard", "soft"} <= _logged_terms(out)


def test_pointwise_trec_candidates_need_a_teacher(ranking, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", str(RECIPES / "cross_encoder_margin_mse.yaml"), "--teacher_name_or_path", "null",
              "--num_student_layers", "null", "--model_name_or_path", ranking["backbone"], "--data_dir", ranking["qa"],
              "--ranking_train_dirs", ranking["trec"], "--output_dir", str(tmp_path / "o"), *TINY, *POINTWISE])
    assert "ranking_train_dirs needs teachers" in capsys.readouterr().err


@pytest.mark.parametrize("folders", ["ranking_train_dirs", "ranking_eval_dirs", "retrieval_eval_dirs"])
@pytest.mark.parametrize("command", ["train", "label"])
def test_a_missing_trec_folder_fails_before_anything_loads(ranking, tmp_path, capsys, monkeypatch, command, folders):
    import hf_distill.cli.train as train_module

    monkeypatch.setattr(train_module, "load_data", lambda *a, **k: pytest.fail("data loaded before the folders' check"))
    output = ["--output", str(tmp_path / "labelled")] if command == "label" else []
    trec = {"ranking_train_dirs": ranking["trec"], "ranking_eval_dirs": ranking["trec"], folders: "/nowhere"}
    with pytest.raises(SystemExit):
        main([command, str(RECIPES / "cross_encoder_margin_mse.yaml"), "--teacher_name_or_path", ranking["teacher"],
              "--data_dir", ranking["qa"], *(token for name, folder in trec.items() for token in (f"--{name}", folder)),
              "--output_dir", str(tmp_path / "o"), *TINY, *POINTWISE, *output])
    assert f"{folders}: '/nowhere' lacks" in capsys.readouterr().err


def test_pointwise_trec_candidates_need_a_pair_of_text_columns(ranking, tmp_path, capsys):
    sentences = tmp_path / "sentences"
    sentences.mkdir()
    (sentences / "train.jsonl").write_text("".join(json.dumps({"sentence": f"s {i}", "label": i % 2}) + "\n" for i in range(4)))
    with pytest.raises(SystemExit):  # one sentence column, inferred: no (query, passage) pair to put them in
        main(["train", str(RECIPES / "cross_encoder_margin_mse.yaml"), "--teacher_name_or_path", ranking["teacher"],
              "--data_dir", str(sentences), "--text_columns", "null", "--ranking_qid_column", "null",
              "--ranking_eval_dirs", ranking["trec"], "--ranking_train_dirs", ranking["trec"], "--output_dir",
              str(tmp_path / "o"), *TINY, *POINTWISE])
    assert "ranking_train_dirs needs two text_columns (query, passage) for its candidate pairs; the training set's " \
           "text_columns are ['sentence']" in capsys.readouterr().err
