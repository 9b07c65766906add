"""Re-ranking distillation over query groups (#42): pointwise KD, Margin-MSE and listwise KL students, and a
Siamese student distilled with Margin-MSE, against BM25, the zero-shot bi-encoders and the teacher.

Every model is trained through the shipped recipes (`hf-distill train`), so the benchmark runs what a user runs:

- teacher: `recipes/teacher/wikiqa.yaml` on a MiniLM (or, `--teacher_backbone mpnet`, MPNet) backbone, trained
  once and cached (or `--teacher PATH`, any fine-tuned hf_distill cross-encoder);
- k-layer cross-encoder students (k of the teacher's layers, the recipes' `layer_strategy`): "KD" = `recipes/simplified_tinybert/wikiqa.yaml`
  with its layer terms off and the logits precomputed (pointwise hard + soft), "Margin-MSE" =
  `recipes/ranking/cross_encoder_margin_mse.yaml`, "listwise KL" = `recipes/ranking/cross_encoder_listwise_kl.yaml`;
  on request (`--arms`), "Margin-MSE + LCE" and "listwise KL + LCE": the same recipes with `--group_ce_weight 1`;
- "Siamese Margin-MSE": `recipes/ranking/siamese_margin_mse.yaml` from the zero-shot all-MiniLM-L6-v2 bi-encoder.

All train on WikiQA train and are evaluated here on WikiQA test, TrecQA test (zero-shot) and TREC DL 2019
(zero-shot): MRR@10 (relevance >= 1; DL: >= 2), NDCG@10, MAP; bi-encoders also by dense retrieval of the
DL19 and DL20 passage pools (Recall@100, MRR@10, NDCG@10). Speed-up: each model re-ranks the same DL19
pairs in turns with the teacher (tokenisation included; a bi-encoder embeds the query and the passages).
Rows are appended to the JSON as they finish; a rerun skips the runs already there.

    python benchmarks/ranking_groups.py --student_layers 2 3 --seeds 0 1 2      # every run (hours on 2 CPU cores)
    python benchmarks/ranking_groups.py render                                 # docs/results/ranking.md + picture
    python benchmarks/ranking_groups.py bm25                                   # BM25's row alone (seconds, no teacher)
    python benchmarks/ranking_groups.py --smoke                                # tiny random models, seconds
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

SMOKE = "--smoke" in sys.argv[1:]
if SMOKE:  # before `common` reads them: data, caches and outputs in the smoke world (benchmarks/smoke.py)
    from smoke import smoke_world

    WORLD = smoke_world()
    os.environ["HF_DISTILL_SMOKE_DIR"] = str(WORLD.root)
    os.environ["HF_DISTILL_DATA"], os.environ["HF_DISTILL_CACHE"] = str(WORLD.data), str(WORLD.cache)

import numpy as np  # noqa: E402
from common import CACHE, DATA, REPO, file_sha256, machine, minilm_dir, mpnet_dir, timed  # noqa: E402
from ranking_groups_render import render  # noqa: E402

RESULTS = WORLD.results if SMOKE else REPO / "benchmarks" / "results"
DOCS = WORLD.root / "docs" if SMOKE else REPO / "docs" / "results"
NAME = "ranking_groups"
ARMS = ("KD", "Margin-MSE", "listwise KL")
# the grouped losses with the gold labels as well (LCE, `group_ce_weight`): pointwise KD learns from them too
LCE_ARMS = ("Margin-MSE + LCE", "listwise KL + LCE")
SIAMESE_ARM = "Siamese Margin-MSE"
RECIPES = {
    "KD": ("simplified_tinybert/wikiqa.yaml",
           ["--attention_weight", "0", "--hidden_weight", "0", "--embedding_weight", "0", "--precompute_teacher_logits", "true"]),
    "Margin-MSE": ("ranking/cross_encoder_margin_mse.yaml", []),
    "listwise KL": ("ranking/cross_encoder_listwise_kl.yaml", []),
    "Margin-MSE + LCE": ("ranking/cross_encoder_margin_mse.yaml", ["--group_ce_weight", "1"]),
    "listwise KL + LCE": ("ranking/cross_encoder_listwise_kl.yaml", ["--group_ce_weight", "1"]),
    SIAMESE_ARM: ("ranking/siamese_margin_mse.yaml", []),
}
SMOKE_RUN = ["--max_steps", "2", "--per_device_eval_batch_size", "8", "--max_length", "32", "--eval_strategy", "no",
             "--save_strategy", "no", "--load_best_model_at_end", "false", "--logging_steps", "1"]


def backbone(name: str) -> str:
    if SMOKE:
        return str(WORLD.minilm if name == "minilm" else WORLD.mpnet)
    return minilm_dir() if name == "minilm" else mpnet_dir()


def collections() -> dict:
    """name -> (RankingData, relevance threshold): the re-ranking sets every model is scored on."""
    from hf_distill.ranking import load_qa_pairs, load_trec_run

    trecqa = DATA / "trecqa" / "test.jsonl"
    if SMOKE and not trecqa.exists():  # the smoke world has no TrecQA: its WikiQA test file stands in
        trecqa = DATA / "wikiqa" / "test.jsonl"
    return {
        "wikiqa_test": (load_qa_pairs(DATA / "wikiqa" / "test.jsonl"), 1),
        "trecqa_test": (load_qa_pairs(trecqa), 1),
        "dl19": (load_trec_run(DATA / "msmarco_trec_dl" / "dl19"), 2),
    }


def evaluate(model, sets: dict, max_length: int, dense: bool) -> dict:
    """Re-ranking metrics on every collection; dense retrieval of the DL19 / DL20 pools for a bi-encoder."""
    from hf_distill.ranking import RankingEvaluator
    from hf_distill.retrieval import DenseRetrievalEvaluator

    metrics: dict = {}
    for name, (data, threshold) in sets.items():
        evaluator = RankingEvaluator(data, batch_size=32, relevance_threshold=threshold, name=name, max_length=max_length)
        metrics.update(evaluator(model))
    for year in ("dl19", "dl20") if dense else ():
        folder = DATA / "msmarco_trec_dl" / year
        metrics.update(DenseRetrievalEvaluator.from_trec(folder, relevance_threshold=2, max_length=max_length,
                                                         show_progress_bar=False)(model))
    return metrics


def cli_train(recipe: str, out: Path, overrides: list[str]) -> float:
    """`hf-distill train RECIPE` into `out` (evaluation is done here, not by the run); its seconds."""
    from hf_distill.cli import main

    argv = ["train", str(REPO / "recipes" / recipe), "--output_dir", str(out), "--data_dir", str(DATA / "wikiqa"),
            "--ranking_eval_dirs", "null", "--disable_tqdm", "true", "--report_to", "none", *overrides]
    start = time.perf_counter()
    if main(argv + (SMOKE_RUN if SMOKE else [])) != 0:
        sys.exit(f"hf-distill {' '.join(map(shlex.quote, argv))} failed")
    return time.perf_counter() - start


def teacher_folder(opts) -> Path:
    """The fine-tuned teacher: --teacher, or recipes/teacher/wikiqa.yaml on the chosen backbone, trained once."""
    if opts.teacher:
        return Path(opts.teacher)
    folder = CACHE / "teachers" / f"ranking-groups-{opts.teacher_backbone}-wikiqa"
    if not (folder / "config.json").exists():
        extra = ["--max_steps", "8"] if SMOKE else []
        if any(folder.glob("checkpoint-*")):  # a run cut short goes on from its last epoch's checkpoint
            extra += ["--resume_from_checkpoint", "last"]
        cli_train("teacher/wikiqa.yaml", folder, ["--model_name_or_path", backbone(opts.teacher_backbone),
                                                  "--seed", "42", "--retrieval_eval_dirs", "null", *extra])
    return folder


def throughput(model, pairs: list[tuple[str, str]], max_length: int) -> float:
    """Seconds to score `pairs`: a cross-encoder's joint pairs, or a bi-encoder's embeddings of every text."""
    if hasattr(model, "predict"):
        return timed(lambda: model.predict(pairs, batch_size=32, max_length=max_length))[1]
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    return timed(lambda: model.encode(texts, batch_size=32, max_length=max_length))[1]


def speed_up(model, teacher, data, max_length: int, rounds: int) -> float:
    """Median over rounds of teacher seconds / model seconds on the same DL19 pairs, timed in turns."""
    pairs = [(data.queries[q], c.text) for q, cands in data.candidates.items() for c in cands][: 64 if SMOKE else 512]
    throughput(model, pairs[:32], max_length), throughput(teacher, pairs[:32], max_length)  # warm-up
    ratios = []
    for _ in range(rounds):
        ratios.append(throughput(teacher, pairs, max_length) / throughput(model, pairs, max_length))
    return float(np.median(ratios))


def load(folder: Path):
    from transformers import AutoModel

    import hf_distill  # noqa: F401  (registers the student classes with AutoModel)

    return AutoModel.from_pretrained(str(folder)).eval()


class Results:
    """benchmarks/results/ranking_groups.json: settings, command, machine and one row per model run."""

    def __init__(self, command: str, settings: dict | None):
        """`settings` None keeps the file's settings and machine (a teacher-free row changes no run's settings or
        the machine its timings were measured on)."""
        self.path = RESULTS / f"{NAME}.json"
        kept = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.rows: list[dict] = kept.get("rows", [])
        if settings is None:
            settings, here = kept.get("settings", {}), kept.get("machine", machine())
        else:
            here = machine()
        self.payload = {"command": kept.get("command", command), "machine": here, "settings": settings}

    def has(self, **key) -> bool:
        return any(all(row.get(k) == v for k, v in key.items()) for row in self.rows)

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self.save()
        print(f"{row['model']}: " + ", ".join(f"{k} {v:.4f}" for k, v in row.items() if isinstance(v, float)), flush=True)

    def save(self) -> None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({**self.payload, "rows": self.rows}, indent=2) + "\n")


def bm25_reference(results: Results, sets: dict) -> None:
    """BM25 on every collection: DL19's own first-stage run; on WikiQA and TrecQA test, which ship none,
    `hf_distill.bm25.BM25` over each test set's candidate sentences. Added to the one BM25 row."""
    from hf_distill.bm25 import BM25
    from hf_distill.ranking import RankingEvaluator

    if not results.has(model="BM25"):
        dl19, threshold = sets["dl19"]
        results.add({"model": "BM25", "kind": "reference", **RankingEvaluator(dl19, relevance_threshold=threshold,
                                                                                name="dl19", first_stage=True)()})
    row = next(r for r in results.rows if r["model"] == "BM25")
    missing = [name for name in ("wikiqa_test", "trecqa_test") if f"{name}_mrr@10" not in row]
    for name in missing:
        data, threshold = sets[name]
        scorer = BM25.over_candidates(data)
        row.update(RankingEvaluator(data, relevance_threshold=threshold, name=name)(scorer))
        row["bm25"] = (f"DL19: the collection's first-stage run; WikiQA and TrecQA: hf_distill.bm25.BM25 (k1 {scorer.k1:g}, "
                       f"b {scorer.b:g}, lowercased words) over each test set's candidate sentences")
    if missing:
        results.save()


def references(results: Results, sets: dict, teacher, opts) -> None:
    """BM25 and the zero-shot MiniLM and MPNet bi-encoders (mean pooling, cosine)."""
    from hf_distill import SiameseModel

    bm25_reference(results, sets)
    for name in ("minilm", "mpnet"):
        label = f"bi-encoder {name} (zero-shot)"
        if not results.has(model=label, teacher_sha256=opts.teacher_sha256):  # its speed-up is over this teacher
            model = SiameseModel.from_backbone(backbone(name), pooling="mean", head="none").eval()
            speed = speed_up(model, teacher, sets["dl19"][0], opts.max_length, opts.rounds)
            results.add({"model": label, "kind": "reference", "speed_up": speed, "teacher_sha256": opts.teacher_sha256,
                         **evaluate(model, sets, opts.max_length, dense=True)})


def recipe_value(recipe: str, key: str, default=None):
    import yaml

    return yaml.safe_load((REPO / "recipes" / recipe).read_text()).get(key, default)


def student_start(recipe: str) -> str:
    """The recipe's `layer_strategy`: which teacher layers a cut student keeps (rows of another start run again)."""
    return str(recipe_value(recipe, "layer_strategy", "uniform"))


def train_dirs(recipe: str) -> list[Path]:
    """The recipe's `ranking_train_dirs` (TREC folders that join WikiQA train), found in this world's data."""
    return [DATA / "msmarco_trec_dl" / Path(folder).name for folder in recipe_value(recipe, "ranking_train_dirs") or []]


def training_data(recipe: str) -> str:
    """What the recipe trains on, e.g. "wikiqa+dl20" (rows of other data run again)."""
    return "+".join(["wikiqa", *(folder.name for folder in train_dirs(recipe))])


def student_runs(results: Results, sets: dict, teacher, folder: Path, opts) -> None:
    """Every (depth, arm, seed) cross-encoder student and every seed of the Siamese student not yet in the results."""
    from hf_distill.checkpointing import last_complete_checkpoint

    plan = [(layers, arm) for layers in opts.student_layers for arm in opts.arms]
    plan += [(None, SIAMESE_ARM)] if opts.siamese else []
    for seed in opts.seeds:  # seeds outermost: a cut-short run still has every arm
        for layers, arm in plan:
            recipe, extra = RECIPES[arm]
            start = student_start(recipe) if layers else "all-MiniLM-L6-v2"
            data = training_data(recipe)
            if results.has(arm=arm, layers=layers, seed=seed, teacher_sha256=opts.teacher_sha256, student_start=start,
                           train_data=data):
                continue
            depth = ["--num_student_layers", str(layers)] if layers else ["--model_name_or_path", backbone("minilm")]
            depth += ["--ranking_train_dirs", *map(str, train_dirs(recipe))] if train_dirs(recipe) else []
            # a checkpoint of another start or other data is not resumed
            depth_dir = f"L{layers}-{start}-{data}" if layers else f"siamese-{data}"
            out = CACHE / "runs" / NAME / opts.teacher_sha256[:12] / depth_dir / arm.replace(" ", "_") / str(seed)
            last = last_complete_checkpoint(str(out))  # a run cut short goes on (not from a save it cut short)
            resume = ["--resume_from_checkpoint", last] if last else []
            seconds = cli_train(recipe, out, ["--teacher_name_or_path", str(folder), "--seed", str(seed),
                                              "--retrieval_eval_dirs", "null", *depth, *extra, *resume,
                                              *(["--ranking_group_size", "3"] if SMOKE and arm != "KD" else [])])
            student = load(out)
            speed = speed_up(student, teacher, sets["dl19"][0], opts.max_length, opts.rounds)
            row = {"model": f"{arm}, {layers or 6} layers", "kind": "student", "arm": arm, "layers": layers, "seed": seed,
                   "teacher_sha256": opts.teacher_sha256, "student_start": start, "train_data": data, "train_seconds": seconds,
                   "resumed": last is not None,
                   "speed_up": speed}
            results.add({**row, **evaluate(student, sets, opts.max_length, dense=layers is None)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="run", choices=["run", "render", "bm25"],
                        help="run: every missing row; render: the page from the JSON; bm25: only BM25's row (no teacher)")
    parser.add_argument("--student_layers", nargs="*", type=int, default=[2, 3])
    parser.add_argument("--arms", nargs="*", default=list(ARMS), choices=[*ARMS, *LCE_ARMS],
                        help=f"cross-encoder arms (default: {', '.join(ARMS)}; also {', '.join(LCE_ARMS)})")
    parser.add_argument("--no_siamese", dest="siamese", action="store_false", help="skip the Siamese student")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--teacher", default=None, help="a fine-tuned hf_distill cross-encoder (default: trained here)")
    parser.add_argument("--teacher_backbone", default="minilm", choices=["minilm", "mpnet"])
    parser.add_argument("--teacher_description", default=None,
                        help="how --teacher was trained, shown on the page (default: recipes/teacher/wikiqa.yaml on the backbone)")
    parser.add_argument("--max_length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds of each speed-up")
    parser.add_argument("--smoke", action="store_true", help="tiny random models and data in a temporary folder")
    opts = parser.parse_args()
    if SMOKE:
        opts.student_layers, opts.seeds, opts.rounds, opts.max_length = opts.student_layers[:1], opts.seeds[:1], 1, 32
    if opts.command == "render":
        print(render(RESULTS / f"{NAME}.json", DOCS / "ranking.md", DOCS / "ranking_quality_speed.png"))
        return
    command = "python benchmarks/ranking_groups.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    settings = {k: v for k, v in vars(opts).items() if k != "command"}
    results = Results(command, None if opts.command == "bm25" else settings)
    sets = collections()
    if opts.command == "bm25":
        bm25_reference(results, sets)
        print(render(RESULTS / f"{NAME}.json", DOCS / "ranking.md", DOCS / "ranking_quality_speed.png"))
        return
    folder = teacher_folder(opts)
    teacher = load(folder)
    opts.teacher_sha256 = file_sha256(folder / "model.safetensors")  # in every row that depends on the teacher
    if not results.has(kind="teacher", teacher_sha256=opts.teacher_sha256):
        trained = opts.teacher_description or f"`recipes/teacher/wikiqa.yaml` on {opts.teacher_backbone} (WikiQA train)"
        results.add({"model": f"teacher ({opts.teacher_backbone} cross-encoder)", "kind": "teacher", "teacher": str(folder),
                     "trained": trained, "teacher_sha256": opts.teacher_sha256, "speed_up": 1.0,
                     **evaluate(teacher, sets, opts.max_length, dense=False)})
    references(results, sets, teacher, opts)
    student_runs(results, sets, teacher, folder, opts)
    print(render(RESULTS / f"{NAME}.json", DOCS / "ranking.md", DOCS / "ranking_quality_speed.png"))


if __name__ == "__main__":
    main()
