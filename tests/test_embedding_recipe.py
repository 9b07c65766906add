"""recipes/embedding/*.yaml run end to end on tiny models with command-line overrides: sentences of a data
tree without its held-out files, a different-tokenizer teacher embedded offline (or online), the cut student
saved with its card, STS scored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from transformers import AutoModel, BertTokenizerFast

from hf_distill.cli.errors import ConfigError
from hf_distill.embedding_recipe import main, parse_embedding_recipe
from tests.conftest import TINY_VOCAB, make_bert_config, seed_everything
from tests.embedding_helpers import mpnet_backbone, other_tokenizer
from tests.test_embedding_distillation import texts

REPO = Path(__file__).resolve().parent.parent
RECIPES = sorted((REPO / "recipes" / "embedding").glob("*.yaml"))


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A data tree laid out as ../shared/data, a 6-layer 'MiniLM' and a sentence-transformers 'MPNet' folder."""
    root = tmp_path_factory.mktemp("embedding_world")
    data = root / "data"
    for split, seed in (("train", 1), ("validation", 2), ("test", 3)):
        first, second = texts(12, seed), texts(12, seed + 10)
        _write(data / "stsb" / f"{split}.jsonl", [{"sentence1": a, "sentence2": b, "score": float(i % 6)}
                                                 for i, (a, b) in enumerate(zip(first, second))])
    _write(data / "wikiqa" / "test.jsonl", [{"question": "who sings", "answer": "the man sings a song", "label": 1}])
    _write(data / "msmarco_trec_dl" / "dl19" / "queries.jsonl", [{"qid": "1", "query": "red car"}])
    seed_everything(0)
    minilm = root / "minilm"
    AutoModel.from_config(make_bert_config(6)).save_pretrained(minilm)
    (root / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(root / "vocab.txt"), do_lower_case=True, model_max_length=64).save_pretrained(minilm)
    mpnet = root / "mpnet"
    mpnet_backbone().save_pretrained(mpnet)
    other_tokenizer(root).save_pretrained(mpnet)
    (mpnet / "modules.json").write_text(json.dumps([{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (mpnet / "1_Pooling").mkdir()
    (mpnet / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    return root


def overrides(world: Path, out: Path, *extra: str) -> list[str]:
    data = world / "data"
    return [
        "--teacher_name_or_path", str(world / "mpnet"), "--model_name_or_path", str(world / "minilm"),
        "--sentence_dir", str(data), "--sts_eval_files", str(data / "stsb" / "validation.jsonl"), str(data / "stsb" / "test.jsonl"),
        "--cache_dir", str(world / "cache"), "--output_dir", str(out), "--max_steps", "3", "--per_device_train_batch_size", "8",
        "--max_length", "32", "--eval_steps", "1", "--save_steps", "1", "--logging_steps", "1", "--use_cpu", "true",
        "--teacher_batch_size", "8", *extra,
    ]


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.stem for r in RECIPES])
def test_each_recipe_runs_on_tiny_models_with_overrides(world, tmp_path, recipe):
    assert main([str(recipe), *overrides(world, tmp_path / "out")]) == 0
    results = json.loads((tmp_path / "out" / "all_results.json").read_text())
    held_out = {s for s in texts(12, 3) + texts(12, 13)}
    assert results["train_sentences"] == len({*texts(12, 1), *texts(12, 11), *texts(12, 2), *texts(12, 12)} - held_out)
    assert "eval_stsb_test_spearman_cosine" in results
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text())  # evaluated every step, stopping on validation
    scores = [e["eval_stsb_validation_spearman_cosine"] for e in state["log_history"] if "eval_stsb_validation_spearman_cosine" in e]
    assert len(scores) >= 3 and state["best_metric"] == max(scores[:3])
    student = AutoModel.from_pretrained(str(tmp_path / "out"))
    layers = yaml.safe_load(recipe.read_text())["num_student_layers"]
    assert student.config.encoder.num_hidden_layers == layers and student.encode(["a dog"]).shape == (1, 32)
    card = (tmp_path / "out" / "README.md").read_text()
    assert "distilled from `mpnet`" in card and "`similarity_structure`" in card


def test_online_teacher_both_losses_and_a_kept_projection(world, tmp_path):
    extra = ["--precompute_teacher_embeddings", "false", "--embedding_mse_weight", "1", "--similarity_kind", "mse",
             "--keep_projection", "true"]
    assert main([str(RECIPES[0]), *overrides(world, tmp_path / "out", *extra)]) == 0
    history = json.loads((tmp_path / "out" / "trainer_state.json").read_text())["log_history"]
    assert any("embedding_mse" in e and "similarity_structure" in e for e in history)
    assert AutoModel.from_pretrained(str(tmp_path / "out")).encode(["a dog"]).shape == (1, 48)


def test_unknown_keys_and_bad_values_are_one_clear_error(world, tmp_path, capsys):
    with pytest.raises(ConfigError, match="unknown key\\(s\\): 'similarity_weight' \\(did you mean 'similarity_structure_weight'"):
        parse_embedding_recipe([str(RECIPES[0]), "--similarity_weight", "1"])
    with pytest.raises(ConfigError, match="layer_strategy='a,b' is not valid"):
        parse_embedding_recipe([str(RECIPES[0]), "--layer_strategy", "a,b"])
    args = overrides(world, tmp_path / "out", "--similarity_structure_weight", "0")
    assert main([str(RECIPES[0]), *args]) == 2
    assert "embedding_mse_weight and similarity_structure_weight are both 0" in capsys.readouterr().err


def test_early_stopping_needs_evaluations_and_a_reported_metric(world, tmp_path, capsys):
    no_evaluations = overrides(world, tmp_path / "a", "--eval_strategy", "no", "--save_strategy", "no",
                               "--load_best_model_at_end", "false")
    assert main([str(RECIPES[0]), *no_evaluations]) == 2
    assert "early_stopping_patience=4 needs evaluations: set eval_strategy" in capsys.readouterr().err
    unreported = overrides(world, tmp_path / "b", "--metric_for_best_model", "stsb_dev_spearman_cosine")
    assert main([str(RECIPES[0]), *unreported]) == 2
    error = capsys.readouterr().err
    assert "metric_for_best_model='stsb_dev_spearman_cosine' is not valid" in error and "stsb_validation_spearman_cosine" in error
    with pytest.raises(ConfigError, match="early_stopping_patience=0 is not valid"):
        parse_embedding_recipe([str(RECIPES[0]), "--early_stopping_patience", "0"])


def test_early_stopping_stops_a_sentence_only_run_on_the_sts_metric(world, tmp_path):
    """Learning rate 0 keeps validation Spearman constant: patience 1 stops at the 2nd evaluation of a 10-step cap
    (the evaluators' metrics reach EarlyStoppingCallback although no eval_dataset is evaluated)."""
    out = tmp_path / "out"
    args = overrides(world, out, "--max_steps", "10", "--learning_rate", "0", "--early_stopping_patience", "1")
    assert main([str(RECIPES[0]), *args]) == 0
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2 and state["best_model_checkpoint"] == str(out / "checkpoint-1")


def test_evaluations_without_an_sts_file_fail_before_anything_loads(world, tmp_path, capsys, monkeypatch):
    """The recipes evaluate and keep the best checkpoint: with no STS file to score (and early stopping off), the run
    is refused before the sentences are embedded, naming the fields; with evaluations off it trains."""
    import hf_distill.embedding_recipe as embedding_recipe

    monkeypatch.setattr(embedding_recipe, "_sentence_data", lambda recipe: pytest.fail("loaded before the check"))
    unscored = overrides(world, tmp_path / "a", "--sts_eval_files", "null", "--early_stopping_patience", "null")
    assert main([str(RECIPES[0]), *unscored]) == 2
    error = capsys.readouterr().err
    assert "eval_strategy='steps' needs sts_eval_files" in error and "eval_strategy to 'no'" in error
    monkeypatch.undo()
    off = overrides(world, tmp_path / "b", "--sts_eval_files", "null", "--early_stopping_patience", "null", "--eval_strategy",
                    "no", "--save_strategy", "no", "--load_best_model_at_end", "false")
    assert main([str(RECIPES[0]), *off]) == 0


def test_sentences_train_in_blocks_of_neighbours_and_a_bad_block_size_exits_2(world, tmp_path, capsys):
    args = overrides(world, tmp_path / "a", "--train_block_size", "4")
    assert main([str(RECIPES[0]), *args]) == 0  # with the recipes' group_by_length: blocks of similar length
    refused = overrides(world, tmp_path / "b", "--train_block_size", "4", "--train_sampling_strategy", "sequential")
    assert main([str(RECIPES[0]), *refused]) == 2
    assert ("train_sampling_strategy (with train_block_size)='sequential' is not valid; choose one of 'random', "
            "'group_by_length'" in capsys.readouterr().err)
