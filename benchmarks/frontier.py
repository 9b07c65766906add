"""The quality-versus-speed frontier: 1-, 2- and 3-layer cross-encoder students of one fixed MiniLM teacher.

For MRPC (F1), STS-B (Spearman) and SNLI (accuracy), one seeded 6-layer MiniLM cross-encoder
teacher per task (cached outside git; its sha256 in every row), and students cut from it
(`from_teacher`, strategy "uniform"), each trained with:

- no KD: the gold training set, hard labels only;
- KD: the gold set with the teacher's logits (alpha 0.5, tau 1);
- KD + aug: the gold set plus N TinyBERT-style augmented pairs per pair (teacher-labelled; rows
  without a gold label learn from the teacher alone);
- layer + aug: KD + aug plus uniform-mapping layer losses (hidden, attention, embedding; weight beta);
- EMD + aug: KD + aug plus BERT-EMD's layer losses (all layers by Earth Mover's Distance, cost attention; beta).

Every arm of a (task, depth) gets the same initialisation and the same step budget (`--budget_epochs`
over the augmented set), evaluates on the validation split every `--eval_every` steps, stops early
after `--patience` evaluations without improvement (on `STOP_METRIC`: accuracy for MRPC, whose F1 rewards
calling every pair a paraphrase), keeps its best checkpoint, and is scored on the test split (SNLI: trained
on its validation split less a held-out 1,000 pairs, stopped on those).
The speed-up over the teacher is measured in the same run (batch 32, sequence 128, padded).

One row per (task, student_layers, arm, seed) is appended to benchmarks/results/frontier.json as
runs finish; rows already there are skipped, so the run can stop and go on.

    python benchmarks/frontier.py --tasks mrpc stsb snli --layers 2 3 1 --seeds 0 1 2   # then renders
    python benchmarks/frontier.py --render      # docs/results/frontier.md and one picture per task, from the rows
    python benchmarks/frontier.py --smoke       # tiny random models and data (benchmarks/smoke.py)
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import time
from pathlib import Path

from common import CACHE, REPO, RESULTS, file_sha256, label_maps, load_task, machine, minilm_dir, resumable, run_arguments, smoke_option
from frontier_render import row_setting

from hf_distill import CrossEncoderModel
from hf_distill.augmentation import augment_pairs
from hf_distill.metrics import compute_metrics_for
from hf_distill.speed import pairs_per_second
from hf_distill.teachers import add_teacher_logits
from hf_distill.trainer import DistillationTrainer

RESULTS_JSON = RESULTS / "frontier.json"
DOCS = REPO / "docs" / "results"
# task -> text columns, label column, num_labels, label scale, metric, files {split: file}, teacher epochs
TASKS = {
    "mrpc": (("sentence1", "sentence2"), "label", 2, 1.0, "f1", {"train": "train", "validation": "validation", "test": "test"}, 5),
    "stsb": (("sentence1", "sentence2"), "score", 1, 5.0, "spearman", {"train": "train", "validation": "validation", "test": "test"}, 4),
    "snli": (("premise", "hypothesis"), "label", 3, 1.0, "accuracy", {"train": "validation", "test": "test"}, 2),
}
SNLI_HELD_OUT = 1000
# The validation metric early stopping watches. MRPC's F1 is not it: predicting "paraphrase" for every pair
# scores about 80 F1 (two thirds of the pairs are paraphrases), so stopping on F1 kept barely trained students
# that did just that (every augmented arm peaked at the first evaluation). Accuracy has no such free floor.
STOP_METRIC = {"mrpc": "accuracy", "stsb": "spearman", "snli": "accuracy"}
# arm -> soft weight alpha, whether it trains on the augmented set, and its layer mapping: None (logits only),
# "uniform" (student layer i to teacher layer i * L / k: hidden, attention, embedding) or "emd" (BERT-EMD:
# every layer to every layer by Earth Mover's Distance, cost attention, as `methods.bert_emd`)
ARMS = {
    "no KD": dict(alpha=0.0, augmented=False, layers=None),
    "KD": dict(alpha=0.5, augmented=False, layers=None),
    "KD + aug": dict(alpha=0.5, augmented=True, layers=None),
    "layer + aug": dict(alpha=0.5, augmented=True, layers="uniform"),
    "EMD + aug": dict(alpha=0.5, augmented=True, layers="emd"),
}
ONE_LAYER_ARMS = ("no KD", "KD + aug")
# Augmented pairs per training pair, sized so one 2-layer student run takes about 30 minutes on 2 cores.
AUGMENT_N = {"mrpc": 8, "stsb": 8, "snli": 4}


def load_splits(task: str):
    """train / validation / test as datasets; SNLI's validation split becomes train + a held-out validation."""
    data = load_task(task, files=TASKS[task][5])  # saved by content: the cached labels outlive a fresh ../shared
    if task == "snli":
        split = data["train"].train_test_split(test_size=min(SNLI_HELD_OUT, len(data["train"]) // 4), seed=0)
        data["train"], data["validation"] = split["train"], split["test"]
    return data


def arguments(output_dir: str, task: str, seed: int, **extra):
    columns, label_column, _, label_scale, _, _, _ = TASKS[task]
    return run_arguments(output_dir, extra.pop("epochs", 1.0), extra.pop("lr", 1e-4), seed, columns, label_column,
                         label_scale=label_scale, **extra)


def evaluate(model, dataset, task: str, seed: int = 0) -> tuple[float, float]:
    """The task metric and the early-stopping metric (`STOP_METRIC`) x100 of `model` on `dataset`, one pass."""
    trainer = DistillationTrainer(model=model, args=arguments(str(CACHE / "frontier" / "eval"), task, seed),
                                  compute_metrics=compute_metrics_for(model.config.num_labels))
    metrics = trainer.evaluate(dataset)
    return 100 * metrics[f"eval_{TASKS[task][4]}"], 100 * metrics[f"eval_{STOP_METRIC[task]}"]


def teacher_for(task: str, data) -> tuple[CrossEncoderModel, str, tuple[float, float]]:
    """The task's teacher (trained once with seed 42, fixed epochs), its weights' sha256 and its test values
    (task metric, stopping metric)."""
    folder = CACHE / "frontier" / "teachers" / task
    if not (folder / "model.safetensors").exists():
        _, _, num_labels, _, _, _, epochs = TASKS[task]
        import torch

        torch.manual_seed(42)
        teacher = CrossEncoderModel.from_backbone(minilm_dir(), num_labels=num_labels, **label_maps(task))
        args = arguments(str(folder / "run"), task, 42, epochs=epochs, lr=5e-5)
        start = time.perf_counter()
        DistillationTrainer(model=teacher, args=args, train_dataset=data["train"]).train()
        print(f"[{task}] teacher trained in {time.perf_counter() - start:.0f}s", flush=True)
        teacher.save_pretrained(folder)
        shutil.rmtree(folder / "run", ignore_errors=True)
    teacher = CrossEncoderModel.from_pretrained(folder)
    return teacher, file_sha256(folder / "model.safetensors"), evaluate(teacher, data["test"], task)


def training_sets(task: str, data, teacher, augment_n: int) -> dict:
    """Gold rows alone, gold rows with teacher logits, and gold + augmented rows with teacher logits (cached)."""
    columns = list(TASKS[task][0])
    label = TASKS[task][1]
    augmented = augment_pairs(data["train"], columns, teacher.tokenizer, embeddings=teacher, n=augment_n, seed=0,
                              label_column=label)
    return {
        "gold": data["train"],
        "gold+logits": add_teacher_logits(data["train"], teacher, columns, batch_size=64, max_length=128),
        "augmented+logits": add_teacher_logits(augmented, teacher, columns, batch_size=64, max_length=128),
    }


def train_arm(task: str, arm: str, layers: int, seed: int, teacher, sets: dict, data, opts) -> dict:
    """One student: cut from the teacher, trained with early stopping on validation, scored on test."""
    from transformers import EarlyStoppingCallback

    settings = ARMS[arm]
    metric = STOP_METRIC[task]
    train = sets["augmented+logits"] if settings["augmented"] else sets["gold+logits"] if settings["alpha"] > 0 else sets["gold"]
    budget = max(1, opts.budget_epochs * len(sets["augmented+logits"]) // 16)
    layer_weights = {
        None: {}, "uniform": dict(hidden_weight=opts.beta, attention_weight=opts.beta, embedding_weight=opts.beta),
        "emd": dict(emd_weight=opts.beta, embedding_weight=opts.beta, emd_smooth_weights=True),
    }[settings["layers"]]
    folder = CACHE / "frontier" / "runs" / task / f"L{layers}" / arm.replace(" ", "_").replace("+", "plus") / str(seed)
    args = arguments(
        str(folder), task, seed, lr=opts.lr, max_steps=budget, alpha=settings["alpha"], temperature=1.0,
        eval_strategy="steps", eval_steps=opts.eval_every, save_strategy="steps", save_steps=opts.eval_every,
        save_total_limit=1, load_best_model_at_end=True, metric_for_best_model=metric, greater_is_better=True,
        train_sampling_strategy=opts.sampler, **layer_weights,
    )
    student = CrossEncoderModel.from_teacher(teacher, layers, "uniform")
    if settings["layers"]:
        for model in (student, teacher):
            model.set_attn_implementation("eager")
    trainer = DistillationTrainer(
        model=student, args=args, teachers=[teacher] if settings["layers"] else None, train_dataset=train,
        eval_dataset=data["validation"], compute_metrics=compute_metrics_for(student.config.num_labels),
        callbacks=[EarlyStoppingCallback(early_stopping_patience=opts.patience)],
    )
    start = time.perf_counter()
    checkpoint = resumable(folder, args, RESUME_FIELDS)
    trainer.train(resume_from_checkpoint=checkpoint)
    seconds = time.perf_counter() - start  # this process's share when resumed (the row says so)
    for model in (trainer.model, teacher):
        model.set_attn_implementation("sdpa")  # speed and test value with the fast attention, for every arm
    best = trainer.state.best_metric
    value, stop_value = evaluate(trainer.model, data["test"], task, seed)
    speed = speed_of(trainer.model, teacher, list(zip(*(data["test"][c][:256] for c in TASKS[task][0]))), opts.speed_seconds)
    shutil.rmtree(folder, ignore_errors=True)  # checkpoints served their purpose
    return dict(value=value, stop_metric=metric, test_stop_metric=stop_value,
                validation_best=100 * best if best is not None else None, steps=trainer.state.global_step,
                budget_steps=budget, train_rows=len(train), train_seconds=round(seconds, 1), resumed=checkpoint is not None,
                student_pairs_per_s=speed["student"], teacher_pairs_per_s=speed["teacher"],
                speed_up=speed["teacher"] and speed["student"] / speed["teacher"])


# what an arm's run depends on beyond its folder (task, depth, arm, seed): a checkpoint of other values is not resumed
RESUME_FIELDS = ("learning_rate", "max_steps", "eval_steps", "save_steps", "seed", "alpha", "temperature",
                 "hidden_weight", "attention_weight", "embedding_weight", "emd_weight", "per_device_train_batch_size",
                 "metric_for_best_model", "train_sampling_strategy")


def speed_of(student, teacher, pairs, seconds: float, rounds: int = 3) -> dict[str, float]:
    """Pairs/s of student and teacher, alternating `rounds` times and keeping each one's best: another
    process on the machine can only slow a round down, so the best round is the least disturbed."""
    best = {"student": 0.0, "teacher": 0.0}
    for _ in range(rounds):
        for name, model in (("student", student), ("teacher", teacher)):
            rate = pairs_per_second(model, pairs, batch_size=32, max_length=128, min_seconds=seconds, padding="max_length")
            best[name] = max(best[name], rate)
    return best


def load_rows(path: Path = RESULTS_JSON) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"rows": []}


def append_row(row: dict, command: str, path: Path = RESULTS_JSON) -> None:
    """Add one finished run to the results file (read again first: another process may have added rows)."""
    payload = load_rows(path)
    payload["rows"].append(row)
    payload["commands"] = sorted(set(payload.get("commands", [])) | {command})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")


def augment_n(opts, task: str) -> int:
    return opts.augment_n if opts.augment_n is not None else AUGMENT_N[task]


def plan(opts) -> list[tuple[int, int, str, str]]:
    """(seed, layers, task, arm) in the order they run: seeds outermost, so a cut-short run covers every cell once."""
    order = []
    for seed in opts.seeds:
        for layers in opts.layers:
            for task in opts.tasks:
                arms = ONE_LAYER_ARMS if layers == 1 else tuple(ARMS)
                order += [(seed, layers, task, arm) for arm in arms if arm in opts.arms]
    return order


def run(opts) -> None:
    command = "python benchmarks/frontier.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    settings = dict(lr=opts.lr, eval_every=opts.eval_every, patience=opts.patience, budget_epochs=opts.budget_epochs,
                    sampler=opts.sampler)
    done = {(r["task"], r["student_layers"], r["arm"], r["seed"]) for r in load_rows(opts.results)["rows"]
            if all(row_setting(r, key) == value for key, value in settings.items())  # a run with other settings runs again
            and r.get("stop_metric") == STOP_METRIC[r["task"]]}
    loaded: dict = {}
    for seed, layers, task, arm in plan(opts):
        if (task, layers, arm, seed) in done:
            continue
        if task not in loaded:
            data = load_splits(task)
            if opts.max_rows:
                data = {k: v.select(range(min(opts.max_rows, len(v)))) for k, v in data.items()}
            teacher, digest, (teacher_value, teacher_stop) = teacher_for(task, data)
            print(f"[{task}] teacher {TASKS[task][4]} {teacher_value:.2f} (test), sha256 {digest[:12]}", flush=True)
            loaded[task] = (data, teacher, digest, teacher_value, teacher_stop,
                            training_sets(task, data, teacher, augment_n(opts, task)))
        data, teacher, digest, teacher_value, teacher_stop, sets = loaded[task]
        result = train_arm(task, arm, layers, seed, teacher, sets, data, opts)
        row = dict(task=task, metric=TASKS[task][4], student_layers=layers, arm=arm, seed=seed, teacher_value=teacher_value,
                   teacher_test_stop_metric=teacher_stop, teacher_sha256=digest, augment_n=augment_n(opts, task),
                   augment_change="one", **settings,
                   machine=machine(), **result)
        append_row(row, command, opts.results)
        share = 100 * row["value"] / teacher_value if teacher_value else float("nan")
        print(f"[{task}] L{layers} {arm} seed {seed}: {row['value']:.2f} ({share:.1f}% of {teacher_value:.2f}), "
              f"{row['speed_up']:.2f}x, {row['steps']} steps, {row['train_seconds']:.0f}s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--render", action="store_true", help="only render docs/results/frontier.md and pictures from the rows")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--layers", nargs="+", type=int, default=[2, 3, 1])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--augment_n", type=int, default=None, help="augmented pairs per training pair (default: AUGMENT_N)")
    parser.add_argument("--budget_epochs", type=int, default=3, help="step budget: epochs over the augmented set, every arm")
    parser.add_argument("--eval_every", type=int, default=125)
    parser.add_argument("--patience", type=int, default=6)
    # 1e-4 was too high: with warmup over the first 10% of the budget, every MRPC arm's validation F1 peaked at
    # the first evaluation (step 250, learning rate ~4e-5) and fell once the rate passed ~8e-5.
    parser.add_argument("--lr", type=float, default=5e-5)
    # group_by_length: batches of similar length, padded little (random batches of 16 pad MRPC, STS-B and SNLI
    # pairs to 1.4x, 1.9x and 1.7x their tokens, grouped ones to about 1.02x); rows of another sampler run again
    parser.add_argument("--sampler", default="group_by_length", choices=["group_by_length", "random"],
                        help="train_sampling_strategy of every student")
    parser.add_argument("--beta", type=float, default=0.01, help="weight of each layer loss in the 'layer + aug' and 'EMD + aug' arms")
    parser.add_argument("--speed_seconds", type=float, default=3.0)
    parser.add_argument("--max_rows", type=int, default=None, help="cut every split (quick checks)")
    parser.add_argument("--results", type=Path, default=RESULTS_JSON, help="the rows file")
    parser.add_argument("--docs", type=Path, default=DOCS, help="where the table and pictures are rendered")
    smoke_option(parser, layers=[2, 1], seeds=[0], augment_n=2, budget_epochs=1, eval_every=2, patience=2,
                 speed_seconds=0.05, docs=RESULTS / "frontier_docs")
    opts = parser.parse_args()
    if not opts.render:
        run(opts)
    from frontier_render import render

    render(load_rows(opts.results), opts.docs)


if __name__ == "__main__":
    main()
