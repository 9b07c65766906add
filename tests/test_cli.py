"""`hf-distill` CLI: recipe + override merging, unknown keys, data folders, tiny end-to-end runs."""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path

import pytest
import scipy.stats
import torch
import yaml
from transformers import AutoModel, BertModel

from hf_distill import CrossEncoderModel, SiameseModel
from hf_distill.cli import (
    ConfigError,
    DataArguments,
    infer_labels,
    load_raw_datasets,
    main,
    parse_overrides,
    parse_train_config,
)

from .conftest import WORDS, make_bert_config, save_backbone_and_teacher

FAST = ["--max_steps", "2", "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8",
        "--report_to", "none", "--save_strategy", "no", "--use_cpu", "true", "--disable_tqdm", "true"]


def _rows(n: int, seed: int, label=lambda rng: rng.randint(0, 1)) -> list[dict]:
    rng = random.Random(seed)
    words = [w for w in WORDS if w.isalpha()]
    return [
        {"sentence1": " ".join(rng.choices(words, k=rng.randint(3, 7))),
         "sentence2": " ".join(rng.choices(words, k=rng.randint(3, 7))), "label": label(rng)}
        for _ in range(n)
    ]


def _write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _write_csv(path, rows) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _recipe(path, **settings) -> str:
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def assets(tmp_path_factory, tiny_tokenizer):
    """A plain tiny BERT backbone, a saved 4-layer cross-encoder teacher, and jsonl / csv data folders."""
    root = tmp_path_factory.mktemp("cli")
    backbone, teacher = save_backbone_and_teacher(root, tiny_tokenizer, backbone_layers=2, teacher_layers=4)

    jsonl = root / "jsonl"
    jsonl.mkdir()
    _write_jsonl(jsonl / "train.jsonl", _rows(24, 0))
    _write_jsonl(jsonl / "validation.jsonl", _rows(10, 1))
    _write_jsonl(jsonl / "test.jsonl", _rows(6, 2))
    text = root / "csv"
    text.mkdir()
    _write_csv(text / "train.csv", _rows(24, 3, lambda rng: rng.choice(["yes", "no"])))
    _write_csv(text / "dev.csv", _rows(10, 4, lambda rng: rng.choice(["yes", "no"])))
    sts = root / "sts"
    sts.mkdir()
    score_rows = [{"sentence1": r["sentence1"], "sentence2": r["sentence2"], "score": round(i * 0.37 % 5, 2)}
                  for i, r in enumerate(_rows(24, 5))]
    _write_jsonl(sts / "train.jsonl", score_rows[:16])
    _write_jsonl(sts / "validation.jsonl", score_rows[16:])
    return {"root": root, "backbone": str(backbone), "teacher": str(teacher), "jsonl": str(jsonl), "csv": str(text),
            "sts": str(sts)}


# ------------------------------------------------------------------------------ configuration
def test_recipe_and_overrides_merge_command_line_wins(tmp_path):
    recipe = _recipe(
        tmp_path / "r.yaml", model_name_or_path="some/model", teacher_name_or_path="some/teacher", num_student_layers=2,
        dataset_name="nyu-mll/glue", dataset_config_name="mrpc", output_dir=str(tmp_path / "out"),
        learning_rate="3e-5", num_train_epochs=5, alpha=0.5, layer_strategy=[1, 3], text_columns=["a", "b"],
    )
    model_args, data_args, args = parse_train_config(
        [recipe, "--learning_rate", "1e-4", "--alpha=0.9", "--data_dir", str(tmp_path), "--no_shared_projection",
         "--dataset_config_name", "null", "--text_columns", "x", "y"]
    )
    assert args.learning_rate == pytest.approx(1e-4) and args.alpha == pytest.approx(0.9)  # overrides win
    assert args.num_train_epochs == 5 and args.output_dir == str(tmp_path / "out")  # recipe values stay
    assert model_args.teacher_name_or_path == ["some/teacher"] and model_args.layer_strategy == [1, 3]
    assert data_args.data_dir == str(tmp_path) and data_args.dataset_config_name is None  # null: back to default
    assert args.shared_projection is False and args.text_columns == ["x", "y"]
    # a YAML "3e-5" (a string for PyYAML) still becomes a float; an unquoted `no` (a bool for PyYAML) stays "no"
    with open(recipe, "a", encoding="utf-8") as handle:
        handle.write("save_strategy: no\nuse_cpu: yes\n")
    _, _, args = parse_train_config([recipe])
    assert args.learning_rate == pytest.approx(3e-5)
    assert args.save_strategy == "no" and args.use_cpu is True


def test_parse_overrides_forms():
    assert parse_overrides(["--a", "1", "--b=2", "--c", "x", "y", "--fp16", "--no_shared_projection"]) == {
        "a": "1", "b": "2", "c": ["x", "y"], "fp16": True, "shared_projection": "false"}
    with pytest.raises(ConfigError, match="--field value"):
        parse_overrides(["stray"])


@pytest.mark.parametrize("where", ["recipe", "command line"])
def test_unknown_key_lists_valid_keys_before_loading(tmp_path, capsys, no_loading, where):
    settings = dict(model_name_or_path="m", data_dir=str(tmp_path), output_dir=str(tmp_path / "o"))
    extra = []
    if where == "recipe":
        settings["lerning_rate"] = 1e-4
    else:
        extra = ["--lerning_rate", "1e-4"]
    with pytest.raises(SystemExit) as exit_info:
        main(["train", _recipe(tmp_path / "r.yaml", **settings), *extra])
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    assert "unknown key(s)" in message and "'lerning_rate' (did you mean 'learning_rate'" in message
    for valid in ("model_name_or_path", "teacher_name_or_path", "data_dir", "precompute_teacher_logits",
                  "temperature", "alpha", "per_device_train_batch_size"):
        assert valid in message
    with pytest.raises(ConfigError, match="Valid keys"):
        parse_train_config([str(tmp_path / "r.yaml"), *extra])


def test_bad_value_is_a_config_error(tmp_path, no_loading):
    recipe = _recipe(tmp_path / "r.yaml", model_name_or_path="m", data_dir=str(tmp_path), output_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="alpha"):
        parse_train_config([recipe, "--alpha", "2"])
    with pytest.raises(ConfigError, match="student_type"):
        parse_train_config([recipe, "--student_type", "bi_encoder"])
    with pytest.raises(ConfigError, match="model_name_or_path is missing"):
        parse_train_config([recipe, "--model_name_or_path", "null"])


# ------------------------------------------------------------------------------ data
def test_data_dir_jsonl_and_csv(assets):
    raw = load_raw_datasets(DataArguments(data_dir=assets["jsonl"]))
    assert sorted(raw) == ["test", "train", "validation"] and len(raw["train"]) == 24
    assert {"sentence1", "sentence2", "label"} <= set(raw["train"].column_names)
    assert infer_labels(raw["train"], "label", None).num_labels == 2

    raw = load_raw_datasets(DataArguments(data_dir=assets["csv"]))
    assert sorted(raw) == ["train", "validation"] and len(raw["validation"]) == 10  # dev.csv is the validation split
    labels = infer_labels(raw["train"], "label", None)
    assert labels.names == ["no", "yes"] and labels.label2id == {"no": 0, "yes": 1}
    with pytest.raises(ConfigError, match="no train/validation/test file"):
        load_raw_datasets(DataArguments(data_dir=str(assets["root"])))


# ------------------------------------------------------------------------------ end to end
def _results(folder) -> dict:
    return json.loads((folder / "all_results.json").read_text())


def _read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _saved(folder):
    """The model a run saved, in eval mode."""
    return AutoModel.from_pretrained(folder).eval()


@torch.no_grad()
def _pair_logits(model, first: str, second: str) -> torch.Tensor:
    """One pair alone through a saved cross-encoder (the runs here read at most 32 tokens)."""
    return model(**model.tokenizer(first, second, truncation=True, max_length=32, return_tensors="pt")).logits[0]


@torch.no_grad()
def _cosine(model, first: str, second: str) -> float:
    """Cosine of two sentences' embeddings, each encoded alone by a saved bi-encoder."""
    return float(torch.cosine_similarity(model.encode([first])[0], model.encode([second])[0], dim=0))


def _hand_ranking_metrics(scored: dict[str, dict[str, tuple[float, int]]], threshold: int) -> dict[str, float]:
    """MRR@10, NDCG@10 (linear gains) and MAP over queries {qid: {doc: (model score, graded relevance)}}."""
    mrr = ndcg = average_precision = 0.0
    for docs in scored.values():
        ranked = [relevance for _, relevance in sorted(docs.values(), key=lambda item: -item[0])][:10]
        hits = [rank for rank, relevance in enumerate(ranked, 1) if relevance >= threshold]
        mrr += 1 / hits[0] if hits else 0.0
        relevant = sum(relevance >= threshold for _, relevance in docs.values())
        average_precision += sum(i / rank for i, rank in enumerate(hits, 1)) / relevant if relevant else 0.0
        ideal = sorted((relevance for _, relevance in docs.values()), reverse=True)[:10]
        best = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal, 1))
        ndcg += sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ranked, 1)) / best if best else 0.0
    return {"mrr@10": mrr / len(scored), "ndcg@10": ndcg / len(scored), "map": average_precision / len(scored)}


def test_train_teacher_end_to_end(assets, tmp_path):
    """Plain fine-tuning of a backbone (no teacher), string labels from csv: label2id from sorted names."""
    out = tmp_path / "teacher"
    recipe = _recipe(tmp_path / "teacher.yaml", model_name_or_path=assets["backbone"], data_dir=assets["csv"],
                     output_dir="overridden", learning_rate=1e-3, max_length=32)
    assert main(["train", recipe, "--output_dir", str(out), *FAST]) == 0
    results = _results(out)
    assert {"train_loss", "eval_accuracy", "eval_f1", "student_parameters"} <= set(results)
    model = AutoModel.from_pretrained(out)
    assert isinstance(model, CrossEncoderModel) and model.backbone.config.num_hidden_layers == 2
    assert dict(model.config.label2id) == {"no": 0, "yes": 1} and model.tokenizer is not None

    # `evaluate` scores the saved model as it is
    evaluated = tmp_path / "evaluated"
    assert main(["evaluate", "--model_name_or_path", str(out), "--data_dir", assets["csv"], "--max_length", "32",
                 "--output_dir", str(evaluated), "--report_to", "none", "--use_cpu", "true"]) == 0
    assert _results(evaluated)["eval_accuracy"] == pytest.approx(results["eval_accuracy"])


@pytest.mark.parametrize("precompute", [False, True])
def test_train_kd_end_to_end(assets, tmp_path, precompute):
    """A 2-layer student cut from a 4-layer teacher (uniform: layers 1 and 3), online or precomputed logits."""
    out = tmp_path / "student"
    recipe = _recipe(tmp_path / "kd.yaml", teacher_name_or_path=assets["teacher"], num_student_layers=2,
                     layer_strategy="uniform", data_dir=assets["jsonl"], output_dir=str(out), alpha=0.5,
                     temperature=2.0, precompute_teacher_logits=precompute, max_length=32)
    assert main(["train", recipe, *FAST, "--logging_steps", "1"]) == 0
    results = _results(out)
    assert {"train_loss", "eval_accuracy", "test_accuracy"} <= set(results)
    student = AutoModel.from_pretrained(out)
    assert isinstance(student, CrossEncoderModel) and student.backbone.config.num_hidden_layers == 2
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    assert any("soft" in entry for entry in history)  # the teacher was used
    test_rows = _read_jsonl(Path(assets["jsonl"]) / "test.jsonl")  # the reported score is the saved student's
    correct = [int(_pair_logits(student.eval(), r["sentence1"], r["sentence2"]).argmax()) == r["label"] for r in test_rows]
    assert results["test_accuracy"] == pytest.approx(sum(correct) / len(correct))


def test_train_siamese_regression_on_score_column(assets, tmp_path, capsys):
    """An STS-style folder with a float `score` column: regression (num_labels 1), label_scale applied."""
    out = tmp_path / "siamese"
    assert main(["train", "--model_name_or_path", assets["backbone"], "--student_type", "siamese", "--head", "cosine",
                 "--data_dir", assets["sts"], "--label_scale", "5", "--output_dir", str(out), *FAST]) == 0
    assert {"eval_spearman", "eval_pearson"} <= set(_results(out))
    model = AutoModel.from_pretrained(out)
    assert isinstance(model, SiameseModel) and model.config.num_labels == 1

    # sts-eval prints scipy's Spearman (x100) of the cosines of the validation pairs; training's eval_spearman agrees
    rows = _read_jsonl(Path(assets["sts"]) / "validation.jsonl")
    expected = 100 * scipy.stats.spearmanr([_cosine(model.eval(), r["sentence1"], r["sentence2"]) for r in rows],
                                           [r["score"] for r in rows]).statistic
    capsys.readouterr()
    assert main(["sts-eval", str(out), f"{assets['sts']}/validation.jsonl"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["spearman_cosine"] == pytest.approx(expected, abs=0.006)  # printed to 2 decimals
    assert 100 * _results(out)["eval_spearman"] == pytest.approx(expected, abs=1e-4)


# recipes/accelerate holds launcher configs; recipes/embedding says `task: embedding` and has its own keys
# (hf_distill.embedding_recipe); every recipe runs on tiny models in tests/test_recipes.py
SHIPPED_RECIPES = sorted(p for p in (Path(__file__).resolve().parents[1] / "recipes").rglob("*.yaml")
                         if p.parent.name not in ("accelerate", "embedding"))


@pytest.mark.parametrize("recipe", SHIPPED_RECIPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shipped_recipe_parses(recipe):
    """Each recipe in recipes/ names only known fields with valid values (no run: the data is on the Hub)."""
    model_args, data_args, args = parse_train_config([str(recipe)])
    assert args.output_dir and (model_args.model_name_or_path or model_args.teacher_name_or_path)
    assert data_args.dataset_name or data_args.data_dir or data_args.train_file


def _ranking_folders(root: Path) -> tuple[Path, Path]:
    """An answer-selection folder (qid, question, answer, label) and a TREC-layout folder, tiny and random."""
    rng = random.Random(7)
    words = [w for w in WORDS if w.isalpha()]
    say = lambda k: " ".join(rng.choices(words, k=k))  # noqa: E731
    qa = root / "qa"
    qa.mkdir()
    for split, queries in (("train", 6), ("validation", 4), ("test", 3)):
        questions = [say(4) for _ in range(queries)]  # one question per qid, 3 candidate answers, one correct
        rows = [{"qid": f"{split}{q}", "question": questions[q], "answer": say(6), "label": int(c == q % 3)}
                for q in range(queries) for c in range(3)]
        _write_jsonl(qa / f"{split}.jsonl", rows)
    trec = root / "trec19"
    trec.mkdir()
    _write_jsonl(trec / "queries.jsonl", [{"qid": "1", "query": say(3)}, {"qid": "2", "query": say(3)}])
    _write_jsonl(trec / "corpus.jsonl", [{"pid": str(p), "text": say(8)} for p in range(4)])
    _write_jsonl(trec / "qrels.jsonl", [{"qid": "1", "pid": "0", "relevance": 3}, {"qid": "2", "pid": "3", "relevance": 1}])
    _write_jsonl(trec / "candidates.jsonl", [{"qid": q, "pid": str(p), "rank": p + 1, "score": 10.0 - p}
                                             for q in ("1", "2") for p in range(4)])
    return qa, trec


def test_train_with_ranking_evaluation(assets, tmp_path):
    """ranking_qid_column re-ranks validation and test per query, ranking_eval_dirs a TREC folder (zero-shot)."""
    qa, trec = _ranking_folders(tmp_path)
    out = tmp_path / "ranker"
    assert main(["train", "--model_name_or_path", assets["backbone"], "--data_dir", str(qa), "--text_columns",
                 "question", "answer", "--ranking_qid_column", "qid", "--ranking_eval_dirs", str(trec),
                 "--output_dir", str(out), "--max_length", "32", *FAST]) == 0
    results = _results(out)
    model = _saved(out)

    def log_odds(query: str, passage: str) -> float:  # the 2-class ranker's score: logit 1 - logit 0
        logits = _pair_logits(model, query, passage)
        return float(logits[1] - logits[0])

    for split in ("validation", "test"):  # answer selection: relevance = label, threshold 1
        scored: dict = {}
        for row in _read_jsonl(qa / f"{split}.jsonl"):
            scored.setdefault(row["qid"], {})[row["answer"]] = (log_odds(row["question"], row["answer"]), row["label"])
        prefix = "eval_rank" if split == "validation" else "test_rank"
        assert {m: results[f"{prefix}_{m}"] for m in ("mrr@10", "ndcg@10", "map")} == pytest.approx(
            _hand_ranking_metrics(scored, threshold=1))
    # TREC layout: graded judgements, threshold 2; query 2's only judged passage (relevance 1) never counts as a hit
    queries = {r["qid"]: r["query"] for r in _read_jsonl(trec / "queries.jsonl")}
    corpus = {r["pid"]: r["text"] for r in _read_jsonl(trec / "corpus.jsonl")}
    qrels = {(r["qid"], r["pid"]): r["relevance"] for r in _read_jsonl(trec / "qrels.jsonl")}
    scored = {}
    for r in _read_jsonl(trec / "candidates.jsonl"):
        relevance = qrels.get((r["qid"], r["pid"]), 0)
        scored.setdefault(r["qid"], {})[r["pid"]] = (log_odds(queries[r["qid"]], corpus[r["pid"]]), relevance)
    expected = _hand_ranking_metrics(scored, threshold=2)
    assert {m: results[f"test_trec19_{m}"] for m in ("mrr@10", "ndcg@10", "map")} == pytest.approx(expected)
    assert results["test_trec19_mrr@10"] <= 0.5
    assert {"eval_accuracy", "test_accuracy"} <= set(results)


def test_ranking_options_fail_before_training(assets, tmp_path, capsys):
    qa, trec = _ranking_folders(tmp_path)
    common = ["train", "--model_name_or_path", assets["backbone"], "--data_dir", str(qa), "--text_columns", "question",
              "answer", "--output_dir", str(tmp_path / "o"), *FAST]
    (trec / "qrels.jsonl").rename(tmp_path / "moved.jsonl")
    for extra, message in (
        (["--ranking_eval_dirs", str(trec)], "ranking_eval_dirs: '" + str(trec) + "' lacks qrels.jsonl"),
        (["--ranking_qid_column", "question_id"], "ranking_qid_column='question_id' is not a column of the validation split"),
    ):
        with pytest.raises(SystemExit):
            main([*common, *extra])
        assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # nothing trained


def test_siamese_nli_student_scores_sts_files_at_the_end(assets, tmp_path):
    """sts_eval_files: an NLI-style classifier is also scored on an STS file by cosine (DvBERT's SNLI -> STS-B)."""
    out = tmp_path / "nli"
    sts_file = Path(assets["sts"]) / "validation.jsonl"
    assert main(["train", "--model_name_or_path", assets["backbone"], "--student_type", "siamese", "--data_dir",
                 assets["jsonl"], "--sts_eval_files", str(sts_file), "--output_dir", str(out), *FAST]) == 0
    results = _results(out)
    model, rows = _saved(out), _read_jsonl(sts_file)  # scipy's Spearman (x100) of the saved student's cosines
    expected = scipy.stats.spearmanr([_cosine(model, r["sentence1"], r["sentence2"]) for r in rows], [r["score"] for r in rows])
    assert results["test_sts_validation_spearman_cosine"] == pytest.approx(100 * expected.statistic, abs=1e-4)
    assert "test_accuracy" in results


# ------------------------------------------------------------------------------ dispatcher, export, quickstart
LIGHT_DISPATCH = """
import pathlib, sys, types
root = pathlib.Path(sys.argv[1])
stub = types.ModuleType("hf_distill")  # the package without its __init__ (which loads the models)
stub.__path__ = [str(root)]
stub.__version__ = "9.9"
sys.modules["hf_distill"] = stub
from hf_distill.cli import main
assert main(["--help"]) == 0 and main(["--version"]) == 0
print(sorted(m for m in ("torch", "transformers", "datasets") if m in sys.modules))
"""


def test_dispatcher_answers_help_and_version_without_heavy_imports(tmp_path):
    import subprocess
    import sys

    import hf_distill

    root = Path(hf_distill.__file__).parent
    done = subprocess.run([sys.executable, "-c", LIGHT_DISPATCH, str(root)], capture_output=True, text=True, check=True)
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("usage: hf-distill COMMAND") and "export" in done.stdout
    assert "hf_distill 9.9" in lines and lines[-1] == "[]"  # no torch / transformers / datasets imported


def test_python_dash_m_runs_the_cli():
    import subprocess
    import sys

    import hf_distill

    done = subprocess.run([sys.executable, "-m", "hf_distill.cli", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"hf_distill {hf_distill.__version__}"


def test_export_command_calls_hf_distill_export_or_says_it_is_missing(monkeypatch, capsys):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "hf_distill.export", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "hf_distill.export.cli", None)  # (an earlier test may have imported it)
    assert main(["export", "out"]) == 2
    assert capsys.readouterr().err.strip() == "export needs hf_distill.export (not installed)"

    seen = []
    package, module = types.ModuleType("hf_distill.export"), types.ModuleType("hf_distill.export.cli")
    module.main = lambda argv: seen.append(argv) or 7
    monkeypatch.setitem(sys.modules, "hf_distill.export", package)
    monkeypatch.setitem(sys.modules, "hf_distill.export.cli", module)
    assert main(["export", "out", "--format", "onnx"]) == 7 and seen == [["out", "--format", "onnx"]]


def test_public_names_are_functions_not_modules():
    """No submodule shadows an exported function (importing `cli.quickstart` as a module would)."""
    from hf_distill import cli
    from hf_distill.cli import (  # every job module imported first
        dispatch,
        quickstart_command,
        sts_command,
    )

    assert dispatch.main is cli.main and quickstart_command.quickstart is cli.quickstart
    assert sts_command.sts_eval is cli.sts_eval and sorted(cli.__all__) == sorted(cli._EXPORTS)
    for name in cli.__all__:
        assert not isinstance(getattr(cli, name), type(cli)), name
    assert callable(cli.main) and callable(cli.quickstart) and callable(cli.sts_eval) and callable(cli.run)


def test_quickstart_end_to_end_on_the_embedded_demo_set(tiny_tokenizer, tmp_path, capsys, monkeypatch):
    """Offline: the Hub dataset fails, the demo set (hf_distill/demo/) is used; teacher, student, speed, table."""
    from hf_distill.cli import DEMO_PAIRS, quickstart, quickstart_command

    assert DEMO_PAIRS.is_file() and DEMO_PAIRS.parent.name == "demo"
    backbone = tmp_path / "backbone"  # 128 positions: the quickstart reads 128 tokens
    BertModel(make_bert_config(2, max_position_embeddings=128), add_pooling_layer=True).save_pretrained(backbone)
    tiny_tokenizer.save_pretrained(backbone)
    monkeypatch.setitem(quickstart_command.SPEED_SETTINGS, "min_seconds", 0.05)
    monkeypatch.setitem(quickstart_command.SPEED_SETTINGS, "max_pairs", 16)
    summary = quickstart(["--model", str(backbone), "--output_dir", str(tmp_path), "--max_train_samples", "16",
                          "--max_eval_samples", "16", "--teacher_epochs", "1", "--student_steps", "2", "--augment_n", "1",
                          "--student_layers", "1"])
    assert "embedded demo set hf_distill/demo/demo_pairs.jsonl" in summary["data"]
    teacher, _, student = summary["models"]  # the teacher, the no-KD student, the KD student
    assert (teacher["layers"], student["layers"]) == (2, 1) and student["parameters"] < teacher["parameters"]
    assert teacher["pairs_per_s"] > 0 and student["pairs_per_s"] > 0
    # the accuracy reported is the saved student's on the first 16 validation pairs
    saved, rows = _saved(tmp_path / "student"), _read_jsonl(tmp_path / "demo_data" / "validation.jsonl")[:16]
    with torch.no_grad():
        predicted = [int(saved(**saved.tokenizer(r["sentence1"], r["sentence2"], return_tensors="pt")).logits.argmax()) for r in rows]
    gold = [saved.config.label2id[r["label"]] for r in rows]  # the demo labels are named
    assert student["accuracy"] == pytest.approx(sum(p == g for p, g in zip(predicted, gold)) / len(rows))
    assert json.loads((tmp_path / "quickstart_results.json").read_text())["models"] == summary["models"]
    assert "speed-up" in capsys.readouterr().out
