"""Every recipe under recipes/ runs end to end through `hf-distill train` on tiny models and a few rows,
and its output folder loads with `AutoModel.from_pretrained`.

Parametrized over the recipe files, so a new recipe is picked up: each runs unchanged but for the
overrides a tiny run needs, derived from its own keys: tiny models in place of its student and
teachers (a teacher folder's name says its task, e.g. outputs/teacher/snli-mpnet: SNLI, another
tokenizer), a tiny copy of ../shared/data in place of the project's data (and of a Hub dataset), two
steps on 8 rows. recipes/accelerate/ holds launcher configs (tests/test_distributed.py uses one).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from transformers import AutoModel, BertModel

from hf_distill import CrossEncoderModel, SiameseModel
from hf_distill.cli import main

from .conftest import WORDS, make_bert_config, make_cross_encoder, seed_everything
from .embedding_helpers import mpnet_backbone, other_tokenizer

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = "../shared/data"
# Recipes run through `hf-distill train` in another test, with the settings their method needs there.
RUN_ELSEWHERE = {
    "ranking/cross_encoder_margin_mse.yaml": "tests/test_query_group_recipes.py",
    "ranking/cross_encoder_listwise_kl.yaml": "tests/test_query_group_recipes.py",
    "ranking/siamese_margin_mse.yaml": "tests/test_query_group_recipes.py",
}
ALL_RECIPES = sorted(p.relative_to(REPO / "recipes").as_posix() for p in (REPO / "recipes").rglob("*.yaml")
                     if p.parent.name != "accelerate")
RECIPES = [name for name in ALL_RECIPES if name not in RUN_ELSEWHERE]
TINY = ["--max_steps", "2", "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8",
        "--max_length", "32", "--logging_steps", "1", "--use_cpu", "true", "--disable_tqdm", "true", "--report_to", "none"]
PAIR_ROWS = ["--max_train_samples", "8", "--max_eval_samples", "8", "--max_predict_samples", "8"]
# teacher task -> (num_labels, sorted label names or None), as the teacher recipes would have trained them
TASK_LABELS = {"mrpc": (2, None), "rte": (2, ["entailment", "not_entailment"]),
               "snli": (3, ["contradiction", "entailment", "neutral"]), "stsb": (1, None), "wikiqa": (2, None)}


def _say(rng: random.Random, k: int) -> str:
    return " ".join(rng.choices([w for w in WORDS if w.isalpha()], k=k))


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _tiny_data(root: Path) -> Path:
    """../shared/data in miniature: the same folders, files and columns, 12 random rows a split."""
    rng, data = random.Random(0), root / "data"

    def pairs() -> tuple[str, str]:
        return _say(rng, rng.randint(3, 7)), _say(rng, rng.randint(3, 7))

    for split in ("train", "validation", "test"):
        _write(data / "mrpc" / f"{split}.jsonl", [dict(zip(("sentence1", "sentence2"), pairs()), idx=i,
                                                       label=i % 2, id1=i, id2=i + 1) for i in range(12)])
        _write(data / "stsb" / f"{split}.jsonl", [dict(zip(("sentence1", "sentence2"), pairs()), score=i % 6 * 0.9,
                                                       genre="main") for i in range(12)])
        qa = [{"qid": f"Q{split}{q}", "question": _say(rng, 4), "doc_title": "t", "sid": f"D{q}-{c}",
               "answer": _say(rng, 6), "label": int(c == q % 4)} for q in range(6) for c in range(4)]
        _write(data / "wikiqa" / f"{split}.jsonl", qa)
    for split in ("train", "validation"):
        _write(data / "rte" / f"{split}.jsonl", [dict(zip(("premise", "hypothesis"), pairs()), idx=i,
                                                      label=TASK_LABELS["rte"][1][i % 2]) for i in range(12)])
    for split in ("validation", "test"):  # as the project's copy: no SNLI train split
        _write(data / "snli" / f"{split}.jsonl", [dict(zip(("premise", "hypothesis"), pairs()),
                                                       label=TASK_LABELS["snli"][1][i % 3]) for i in range(12)])
    for year in ("dl19", "dl20"):
        trec = data / "msmarco_trec_dl" / year
        _write(trec / "queries.jsonl", [{"qid": "1", "query": _say(rng, 3)}, {"qid": "2", "query": _say(rng, 3)}])
        _write(trec / "corpus.jsonl", [{"pid": str(p), "text": _say(rng, 8)} for p in range(4)])
        _write(trec / "qrels.jsonl", [{"qid": "1", "pid": "0", "relevance": 3}, {"qid": "2", "pid": "3", "relevance": 2}])
        _write(trec / "candidates.jsonl", [{"qid": q, "pid": str(p), "rank": p + 1, "score": 10.0 - p}
                                           for q in ("1", "2") for p in range(4)])
    return data


class World:
    """Tiny stand-ins for a recipe's models and data, built once and shared by the recipes."""

    def __init__(self, root: Path, tokenizer):
        self.root, self.tokenizer, self.teachers = root, tokenizer, {}
        self.data = _tiny_data(root)
        seed_everything(0)
        self.backbone = root / "minilm"  # 6 layers, as all-MiniLM-L6-v2 (embedding recipes keep [0, 5], [0, 2, 5])
        BertModel(make_bert_config(6)).save_pretrained(self.backbone)
        tokenizer.save_pretrained(self.backbone)
        self.embedding_teacher = root / "mpnet"  # a sentence-transformers folder: MPNet, its own tokenizer
        mpnet_backbone().save_pretrained(self.embedding_teacher)
        other_tokenizer(root).save_pretrained(self.embedding_teacher)
        (self.embedding_teacher / "modules.json").write_text(json.dumps(
            [{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
        (self.embedding_teacher / "1_Pooling").mkdir()
        (self.embedding_teacher / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))

    def teacher(self, path: str) -> str:
        """A tiny 6-layer cross-encoder (as the MiniLM teachers) for a recipe's teacher folder (its name: task[-mpnet])."""
        name = Path(path).name
        if name not in self.teachers:
            num_labels, names = TASK_LABELS[name.split("-")[0]]
            tokenizer = other_tokenizer(self.root) if "mpnet" in name else self.tokenizer
            labels = {"id2label": dict(enumerate(names)), "label2id": {n: i for i, n in enumerate(names)}} if names else {}
            folder = self.root / "teachers" / name
            make_cross_encoder(tokenizer, num_layers=6, seed=len(self.teachers), num_labels=num_labels,
                               **labels).save_pretrained(folder)
            self.teachers[name] = str(folder)
        return self.teachers[name]

    def local(self, value):
        """A recipe value with ../shared/data swapped for the tiny copy (strings and lists of them)."""
        if isinstance(value, list):
            return [self.local(v) for v in value]
        return str(self.data) + value[len(SHARED_DATA):] if isinstance(value, str) and value.startswith(SHARED_DATA) else value

    def overrides(self, recipe: dict, out: Path) -> list[str]:
        """The command line that runs `recipe` tiny: models, data and sizes; every other key as the recipe says."""
        args = ["--output_dir", str(out), *TINY]
        embedding = recipe.get("task") == "embedding"
        for key, value in recipe.items():
            if self.local(value) != value:
                args += [f"--{key}", *([self.local(value)] if isinstance(value, str) else self.local(value))]
        if recipe.get("model_name_or_path"):
            args += ["--model_name_or_path", str(self.backbone)]
        teachers = recipe.get("teacher_name_or_path") or []
        teachers = [teachers] if isinstance(teachers, str) else teachers
        if teachers:
            tiny = [str(self.embedding_teacher)] if embedding else [self.teacher(t) for t in teachers]
            args += ["--teacher_name_or_path", *tiny]
        if recipe.get("dataset_name"):  # a Hub dataset: its tiny local copy, as the recipes' "Offline:" lines say
            folder = self.data / (recipe.get("dataset_config_name") or recipe["dataset_name"].split("/")[-1])
            args += ["--dataset_name", "null", "--dataset_config_name", "null"]
            if (folder / "train.jsonl").exists():
                args += ["--data_dir", str(folder)]
            else:  # SNLI: validation trains, test evaluates; nothing left to stop on (as virt/snli.yaml's Offline line)
                args += ["--train_file", str(folder / "validation.jsonl"), "--test_file", str(folder / "test.jsonl"),
                         "--early_stopping_patience", "null", "--eval_strategy", "no", "--load_best_model_at_end", "false"]
        if "teacher_batch_size" in recipe:
            args += ["--teacher_batch_size", "8"]
        if embedding:
            return args + ["--max_train_sentences", "16", "--cache_dir", str(self.root / "cache")]
        return args + PAIR_ROWS


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_tokenizer) -> World:
    return World(tmp_path_factory.mktemp("recipes_world"), tiny_tokenizer)


def _expected_metrics(recipe: dict, args: list[str]) -> list[str]:
    """Metrics the recipe's keys promise in all_results.json (`args`: its tiny run's overrides)."""
    evaluated = "--eval_strategy" not in args or args[args.index("--eval_strategy") + 1] != "no"
    metrics = [f"eval_{recipe['metric_for_best_model']}"] if recipe.get("metric_for_best_model") and evaluated else []
    prefix = "eval" if recipe.get("task") == "embedding" else "test"
    metrics += [f"{prefix}_{Path(f).parent.name}_{Path(f).stem}_spearman_cosine" for f in recipe.get("sts_eval_files") or []]
    metrics += [f"test_{Path(d).name}_mrr@10" for d in recipe.get("ranking_eval_dirs") or []]
    return metrics + (["eval_rank_mrr@10", "test_rank_mrr@10"] if recipe.get("ranking_qid_column") else [])


def _expected_terms(recipe: dict) -> set[str]:
    """Loss terms the recipe switches on, as logged: each `*_weight` > 0, the teachers' soft loss, annealing's lambda."""
    terms = {key[: -len("_weight")] for key, value in recipe.items()
             if key.endswith("_weight") and isinstance(value, (int, float)) and value > 0}
    if recipe.get("annealing") == "linear":
        terms |= {"lambda", "hard", "soft"}
    if recipe.get("teacher_name_or_path") and recipe.get("alpha", 0.5) > 0 and recipe.get("task") != "embedding":
        terms.add("soft")
    teachers = recipe.get("teacher_name_or_path")
    if "soft" in terms and isinstance(teachers, list) and len(teachers) > 1:  # one soft term per teacher
        terms = (terms - {"soft"}) | {f"soft_{k}" for k in range(len(teachers))}
    return terms


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_runs_and_its_output_loads(world, tmp_path, name):
    recipe = yaml.safe_load((REPO / "recipes" / name).read_text(encoding="utf-8"))
    out = tmp_path / "out"
    args = world.overrides(recipe, out)
    assert main(["train", str(REPO / "recipes" / name), *args]) == 0
    results = json.loads((out / "all_results.json").read_text())
    missing = [m for m in _expected_metrics(recipe, args) if m not in results]
    assert not missing, f"{name}: {missing} not in {sorted(results)}"
    model = AutoModel.from_pretrained(out)
    siamese = recipe.get("student_type") == "siamese" or recipe.get("task") == "embedding"
    assert type(model) is (SiameseModel if siamese else CrossEncoderModel)
    if recipe.get("num_student_layers"):
        assert model.backbone.config.num_hidden_layers == recipe["num_student_layers"]
    assert model.tokenizer is not None and (out / "README.md").exists()
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    assert history[-1]["step"] == 2
    logged = {key for entry in history for key in entry}
    silent = [t for t in _expected_terms(recipe) if not any(k == t or k.startswith(f"{t}_") for k in logged)]
    assert not silent, f"{name}: loss terms {silent} never logged ({sorted(logged)})"


def test_recipes_run_elsewhere_are_run_there():
    for name, test_file in RUN_ELSEWHERE.items():
        assert name in ALL_RECIPES, f"{name} is gone: drop it from RUN_ELSEWHERE"
        assert Path(name).name in (REPO / test_file).read_text(), f"{test_file} does not run {name}"


@pytest.mark.parametrize("argv, message", [
    (["train", "recipes/embedding/minilm_l2.yaml", "--task", "sentences"], "task='sentences' is not valid; choose one of"),
    (["evaluate", "recipes/embedding/minilm_l2.yaml"], "hf-distill evaluate does not run task: embedding recipes"),
    (["train", "recipes/kd/mrpc.yaml", "--task", "embedding"], "a task: embedding recipe takes hf_distill.embedding_recipe's keys"),
])
def test_task_key_errors_are_one_line(argv, message, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error and error.startswith("hf-distill: error: ") and error.count("\n") == 1, error
