"""Passage re-ranking: a MiniLM cross-encoder teacher and its 2/3-layer students (no KD, KD, Simplified TinyBERT).

Data (`../shared/data`): WikiQA (answer selection, questions with at least one correct answer, the
standard protocol) and TREC DL (MS MARCO passages, BM25 top-100). The teacher and every student
train on the same pointwise (query, passage, 0/1) pairs: WikiQA `train`, plus by default the 54
TREC DL 2020 queries' BM25 top-100 (relevance >= 2 counts as relevant), so that TREC DL 2019 stays
an unseen query set (zero-shot re-ranking). Reported:

- references: BM25 (the first-stage order) on DL19, and the zero-shot MiniLM bi-encoder
  (all-MiniLM-L6-v2, cosine) on WikiQA test and DL19;
- the 6-layer MiniLM cross-encoder teacher (fine-tuned once, cached in .cache/teachers), on the labels
  or (`--teacher_targets bi-encoder`) on the labels plus the bi-encoder's scores of the same pairs;
- k-layer students (the teacher's first k layers, embeddings and head: the Simplified TinyBERT
  initialisation, the same for every arm), same epochs / lr / batch / seeds, differing only in the loss:
  no KD (hard CE), KD (hard + soft at temperature T, teacher logits precomputed once),
  Simplified TinyBERT (hard + soft + attention-score MSE + hidden MSE + embedding MSE, uniform mapping),
  and the same with the attention term's weight scaled to W ("Simplified TinyBERT, attention xW",
  e.g. x0.05, `SCALED_TINYBERT`), or as the KL of the attention probabilities ("Simplified TinyBERT,
  attention KL", `KL_TINYBERT`);
- re-ranking throughput (pairs/s) of the teacher and each student, timed on the DL19 re-ranking
  itself (4,300 pairs, same batch and max_length), and the speed-up over the teacher, timed in turns
  with it on the same DL19 pairs (`paired_throughput`).

WikiQA: MRR@10, NDCG@10, MAP (relevance >= 1). DL19: NDCG@10 (graded), MRR@10 (relevance >= 2), MAP.

Usage: python benchmarks/ranking.py --student_layers 2 3 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import shutil
import sys
import time

import numpy as np
import torch
from common import (
    CACHE, DATA, RESULTS, last_terms, minilm_dir, run_arguments, smoke_option, start_results, timed, write_results,
)
from datasets import concatenate_datasets
from render import render_results, table

from transformers.trainer_utils import get_last_checkpoint

from hf_distill import CrossEncoderModel, SiameseModel
from hf_distill.batch_keys import logits_column
from hf_distill.ranking import RankingData, RankingEvaluator, load_qa_pairs, load_trec_run
from hf_distill.teachers import add_teacher_logits
from hf_distill.trainer import DistillationTrainer
from hf_distill.training_args import DistillationArguments

TEXT_COLUMNS = ["query", "passage"]
TEACHER_SEED = 42
# Simplified TinyBERT with the attention-score term scaled down: at the short student budgets here the
# unscaled term (MSE of raw scores, ~13 at the start against a hard CE of ~0.5) dominates the loss.
# "Simplified TinyBERT, attention xW" scales it by any W > 0; x0.05 is the one every comparison has.
SCALED_ATTENTION_WEIGHT = 0.05
SCALED_PREFIX = "Simplified TinyBERT, attention x"
SCALED_TINYBERT = f"{SCALED_PREFIX}{SCALED_ATTENTION_WEIGHT:g}"
# The same with the attention term as KL(teacher || student) of the attention probabilities (MiniLM's form,
# weight 1): a bounded term on the scale of the hard loss, instead of the raw scores' MSE scaled down by hand.
KL_TINYBERT = "Simplified TinyBERT, attention KL"
ARMS = ("no KD", "KD", "Simplified TinyBERT", SCALED_TINYBERT, KL_TINYBERT)


def attention_weight_of(arm: str) -> float | None:
    """The attention term's weight of a Simplified TinyBERT arm (1 unscaled); None for other arms."""
    if arm == "Simplified TinyBERT":
        return 1.0
    if not arm.startswith(SCALED_PREFIX):
        return None
    try:
        weight = float(arm[len(SCALED_PREFIX):])
    except ValueError:
        weight = float("nan")
    if not weight > 0:
        raise ValueError(f"arm {arm!r}: the attention weight after {SCALED_PREFIX!r} must be a number > 0")
    return weight


def arm_name(arm: str) -> str:
    """argparse type for --arms: one of ARMS or a scaled Simplified TinyBERT arm, with a clear error otherwise."""
    try:
        if arm in ARMS or attention_weight_of(arm) is not None:
            return arm
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    raise argparse.ArgumentTypeError(f"unknown arm {arm!r}; valid: {', '.join(ARMS)}, or '{SCALED_PREFIX}W' (W > 0)")


def arm_arguments(arm: str, temperature: float) -> dict:
    """The only thing that differs between student arms: the loss terms."""
    if arm == "no KD":
        return dict(alpha=0.0)
    kd = dict(hard_weight=1.0, soft_weight=1.0, temperature=temperature)
    if arm == "KD":
        return kd
    layers = dict(hidden_weight=1.0, embedding_weight=1.0, layer_mapping="uniform")
    if arm == KL_TINYBERT:
        return dict(kd, **layers, attention_weight=1.0, attention_loss="kl")
    attention_weight = attention_weight_of(arm)
    if attention_weight is not None:
        return dict(kd, **layers, attention_weight=attention_weight, attention_loss="mse")
    raise ValueError(arm)


def training_args(output_dir: str, epochs: float, lr: float, seed: int, max_length: int, **extra) -> DistillationArguments:
    return run_arguments(output_dir, epochs, lr, seed, TEXT_COLUMNS, "label", max_length=max_length, **extra)


def load_data(train_sets: list[str]) -> tuple[object, dict[str, RankingData], list[tuple[RankingData, int | None]]]:
    """The pointwise training pairs, the evaluation collections, and the training collections they came from
    (each with the relevance threshold that makes its labels binary)."""
    wikiqa, trec = DATA / "wikiqa", DATA / "msmarco_trec_dl"
    if not wikiqa.exists() or not trec.exists():
        sys.exit(f"{wikiqa} or {trec} not found: the real datasets live in ../shared/data")
    sources: list[tuple[RankingData, int | None]] = []
    if "wikiqa" in train_sets:
        sources.append((load_qa_pairs(wikiqa / "train.jsonl"), None))
    if "dl20" in train_sets:
        sources.append((load_trec_run(trec / "dl20"), 2))
    train = concatenate_datasets([data.to_pairs(relevance_threshold=t) for data, t in sources])
    collections = {
        "wikiqa_validation": load_qa_pairs(wikiqa / "validation.jsonl"),
        "wikiqa_test": load_qa_pairs(wikiqa / "test.jsonl"),
        "dl19": load_trec_run(trec / "dl19"),
    }
    return train.select_columns(TEXT_COLUMNS + ["label"]), collections, sources


def smoke_subset(train, max_train: int | None):
    """Smoke runs (`--max_train N`): N random pairs (seed 0); all of `train` otherwise."""
    return train.shuffle(seed=0).select(range(min(max_train, len(train)))) if max_train else train


def zero_shot_bi_encoder() -> SiameseModel:
    """all-MiniLM-L6-v2 as it comes (mean pooling, cosine): the reference and the teacher's soft-target source."""
    return SiameseModel.from_backbone(minilm_dir(), pooling="mean", head="cosine").eval()


def bi_encoder_targets(sources: list[tuple[RankingData, int | None]], scale: float, max_length: int):
    """The teacher's training pairs with soft targets from the zero-shot bi-encoder (trained on MS MARCO).

    Each pair gets `teacher_logits_0` = [0, scale * z], z the bi-encoder's cosine standardised over its
    query's candidates: the cross-encoder learns the bi-encoder's order of every query's 100 BM25
    candidates (a ranking signal the few relevant DL20 labels alone do not give), besides the labels.
    """
    bi_encoder = zero_shot_bi_encoder()
    parts = []
    for data, threshold in sources:
        run = RankingEvaluator(data, batch_size=64, max_length=max_length).rerank(bi_encoder)
        standardised = {}
        for qid, scores in run.items():
            values = np.fromiter(scores.values(), dtype=np.float64)
            spread = values.std() or 1.0  # a single candidate, or all tied: only the centring
            standardised[qid] = {d: (s - values.mean()) / spread for d, s in scores.items()}
        pairs = data.to_pairs(relevance_threshold=threshold)
        logits = [[0.0, scale * standardised[q][d]] for q, d in zip(pairs["qid"], pairs["doc_id"])]
        parts.append(pairs.add_column(logits_column(0), logits))
    return concatenate_datasets(parts).select_columns(TEXT_COLUMNS + ["label", logits_column(0)])


def evaluate(model, collections: dict[str, RankingData], max_length: int, names=None) -> dict:
    """Ranking metrics on each collection; DL19 also gives the re-ranking throughput (pairs/s)."""
    metrics: dict = {}
    for name, data in collections.items():
        if names is not None and name not in names:
            continue
        threshold = 2 if name.startswith("dl") else 1
        evaluator = RankingEvaluator(data, batch_size=32, relevance_threshold=threshold, name=name, max_length=max_length)
        start = time.perf_counter()
        metrics.update(evaluator(model))
        seconds = time.perf_counter() - start
        if name == "dl19":
            metrics["dl19_pairs_per_second"] = data.num_pairs / seconds
    return metrics


def paired_throughput(teacher, depths: list[int], data: RankingData, max_length: int, pairs: int = 512,
                      rounds: int = 5, batch_size: int = 32) -> dict:
    """Re-ranking throughput of the teacher and a k-layer student per depth, timed in turns in this process.

    The same `pairs` DL19 (query, passage) pairs, batch and max_length for every model, tokenisation
    included (as in re-ranking); each round times every model once, so the speed-up is the median of
    per-round ratios, not a ratio of runs made at different times on a shared machine."""
    sample = [(data.queries[q], c.text) for q, cands in data.candidates.items() for c in cands][:pairs]
    models = {"teacher": teacher}
    for layers in depths:
        models[str(layers)] = CrossEncoderModel.from_teacher(teacher, layers, "first").eval()
    seconds: dict[str, list[float]] = {name: [] for name in models}
    for model in models.values():  # warm-up
        model.predict(sample[:batch_size], batch_size=batch_size, max_length=max_length)
    for _ in range(rounds):
        for name, model in models.items():
            seconds[name].append(timed(lambda: model.predict(sample, batch_size=batch_size, max_length=max_length))[1])
    out: dict = {"pairs": len(sample), "rounds": rounds, "batch_size": batch_size,
                 "teacher_pairs_per_second": len(sample) / float(np.median(seconds["teacher"]))}
    for layers in depths:
        ratios = [t / s for t, s in zip(seconds["teacher"], seconds[str(layers)])]
        out[str(layers)] = {"pairs_per_second": len(sample) / float(np.median(seconds[str(layers)])),
                            "speedup": float(np.median(ratios)), "speedups": ratios}
    return out


def references(collections: dict[str, RankingData], max_length: int) -> dict:
    """BM25 (first-stage order) on DL19 and the zero-shot MiniLM bi-encoder everywhere."""
    bm25 = RankingEvaluator(collections["dl19"], relevance_threshold=2, name="dl19", first_stage=True)()
    bi_encoder = zero_shot_bi_encoder()
    return {"BM25": bm25, "bi-encoder (zero-shot)": evaluate(bi_encoder, collections, max_length)}


def teacher_for(train, sources, opts) -> tuple[CrossEncoderModel, dict]:
    """The fine-tuned 6-layer MiniLM cross-encoder (trained once, then loaded from the cache; training saves a
    checkpoint every 200 steps and resumes from the last one, so an interrupted session loses little).

    `--teacher_targets labels`: cross-entropy on the binary labels of `train`; `bi-encoder`: the same
    labels plus a soft term towards the zero-shot bi-encoder's per-query standardised scores
    (`bi_encoder_targets`, weight 1 each)."""
    smoke = f"-smoke{opts.max_train}" if opts.max_train else ""
    targets = "" if opts.teacher_targets == "labels" else f"-bienc{opts.teacher_soft_scale:g}"
    folder = CACHE / "teachers" / f"minilm-l6-rank-{'-'.join(opts.train_sets)}-e{opts.teacher_epochs:g}{targets}{smoke}"
    info: dict = {"folder": str(folder), "targets": opts.teacher_targets}
    if not (folder / "config.json").exists():
        torch.manual_seed(TEACHER_SEED)  # the head's initialisation, whatever ran before in this process
        teacher = CrossEncoderModel.from_backbone(minilm_dir(), num_labels=2)
        extra: dict = {}
        if opts.teacher_targets == "bi-encoder":
            train = bi_encoder_targets(sources, opts.teacher_soft_scale, opts.max_length)
            train = smoke_subset(train, opts.max_train)
            extra = dict(hard_weight=1.0, soft_weight=1.0, temperature=1.0)
        args = training_args(str(folder / "run"), opts.teacher_epochs, opts.teacher_lr, TEACHER_SEED, opts.max_length,
                             save_strategy="steps", save_steps=200, save_total_limit=1, **extra)
        checkpoint = get_last_checkpoint(args.output_dir) if (folder / "run").is_dir() else None
        start = time.perf_counter()
        DistillationTrainer(model=teacher, args=args, train_dataset=train).train(resume_from_checkpoint=checkpoint)
        info["train_seconds"] = time.perf_counter() - start  # this process's share when resumed
        teacher.save_pretrained(folder)
        shutil.rmtree(folder / "run", ignore_errors=True)  # the checkpoints served their purpose
    teacher = CrossEncoderModel.from_pretrained(folder).eval()
    teacher.set_attn_implementation("eager")
    return teacher, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student_layers", nargs="*", type=int, default=[2, 3], help="none: the teacher only")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), type=arm_name,
                        help=f"any of {', '.join(ARMS)}, or '{SCALED_PREFIX}W' for another attention weight W > 0")
    parser.add_argument("--train_sets", nargs="+", default=["wikiqa", "dl20"], choices=["wikiqa", "dl20"])
    parser.add_argument("--teacher_epochs", type=float, default=3)
    parser.add_argument("--teacher_lr", type=float, default=5e-5)
    parser.add_argument("--teacher_targets", default="labels", choices=["labels", "bi-encoder"],
                        help="the teacher's targets: the binary labels, or the labels plus the zero-shot bi-encoder's scores")
    parser.add_argument("--teacher_soft_scale", type=float, default=1.0,
                        help="bi-encoder targets: the standardised score's scale in the positive-class logit")
    parser.add_argument("--epochs", type=float, default=1, help="student epochs")
    parser.add_argument("--lr", type=float, default=1e-4, help="student learning rate")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max_length", type=int, default=128)
    parser.add_argument("--max_train", type=int, default=None, help="smoke runs only: N random training pairs")
    parser.add_argument("--max_queries", type=int, default=None, help="smoke runs only: the first N queries of each collection")
    parser.add_argument("--name", default="ranking")
    parser.add_argument("--append", action="store_true",
                        help="keep the references, teacher scores and every student run of results/NAME.json this command does not redo")
    parser.add_argument("--render", action="store_true", help="only rewrite results/NAME.md (and the pages showing it) from results/NAME.json")
    # smoke: the teacher term_gradients.py reads by default (bi-encoder targets, 1 epoch), so its smoke run reuses it
    smoke_option(parser, student_layers=[2], seeds=[0], teacher_epochs=1, teacher_targets="bi-encoder")
    opts = parser.parse_args()
    if opts.render:  # nothing runs: the table again from the JSON
        return render_results(opts.name, RESULTS)
    command = "python benchmarks/ranking.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    previous_path = RESULTS / f"{opts.name}.json"
    previous = json.loads(previous_path.read_text()) if opts.append and previous_path.exists() else {}
    opts.tasks = []
    results, command = start_results(opts.name, opts, command)

    train, collections, sources = load_data(opts.train_sets)
    train = smoke_subset(train, opts.max_train)
    if opts.max_queries:
        collections = {name: _first_queries(data, opts.max_queries) for name, data in collections.items()}
    results["train_pairs"] = len(train)
    results["references"] = previous.get("references") or references(collections, opts.max_length)
    print(f"references: {results['references']}", flush=True)

    teacher, info = teacher_for(train, sources, opts)
    if previous.get("teacher") and "train_seconds" not in info:
        results["teacher"] = previous["teacher"]  # loaded from the cache: the same weights as the kept runs'
    else:
        results["teacher"] = {**info, **evaluate(teacher, collections, opts.max_length)}
        if previous.get("teacher"):  # trained again (a new machine's empty cache): the kept runs had the old one
            results["earlier_teachers"] = previous.get("earlier_teachers", []) + [previous["teacher"]]
            changes = {k: v - previous["teacher"][k] for k, v in results["teacher"].items()
                       if k.startswith(("wikiqa_test", "dl19")) and isinstance(v, float) and k in previous["teacher"]}
            print(f"teacher trained again; change from the kept runs' teacher: {changes}", flush=True)
    print(f"teacher: {results['teacher']}", flush=True)
    if opts.student_layers:
        # --append keeps the other depths' speed-ups (each a ratio timed within its own run)
        results["throughput"] = {**previous.get("throughput", {}),
                                 **paired_throughput(teacher, opts.student_layers, collections["dl19"], opts.max_length)}
        print(f"throughput: {results['throughput']}", flush=True)
    soft_train = add_teacher_logits(train, teacher, TEXT_COLUMNS, batch_size=64, max_length=opts.max_length)

    results["students"] = kept_student_runs(previous.get("students", {}), opts.student_layers, opts.arms, opts.seeds)
    for layers in opts.student_layers:
        student_init = CrossEncoderModel.from_teacher(teacher, layers, "first")
        student_init.set_attn_implementation("eager")
        per_arm: dict = results["students"].setdefault(str(layers), {})
        for seed in opts.seeds:  # seeds outermost: a cut-short run still has every arm
            for arm in opts.arms:
                student = copy.deepcopy(student_init)
                output_dir = CACHE / "runs" / "ranking" / f"L{layers}" / arm.replace(" ", "_") / str(seed)
                args = training_args(str(output_dir), opts.epochs, opts.lr, seed, opts.max_length,
                                     **arm_arguments(arm, opts.temperature))
                online = arm.startswith("Simplified TinyBERT")  # layer terms need the teacher's hidden states
                trainer = DistillationTrainer(
                    model=student,
                    args=args,
                    teachers=[teacher] if online else None,
                    train_dataset=soft_train if arm == "KD" else train,
                )
                start = time.perf_counter()
                trainer.train()
                seconds = time.perf_counter() - start
                student.eval()
                reported = evaluate(student, collections, opts.max_length, names=("wikiqa_test", "dl19"))
                run = {"seed": seed, "train_seconds": seconds, **reported}
                run["terms"] = last_terms(trainer.state.log_history)
                run["first_terms"] = first_terms(trainer.state.log_history)
                per_arm.setdefault(arm, []).append(run)
                print(f"[{layers} layers] {arm} seed {seed}: {run}", flush=True)
                write_results(opts.name, results, table("ranking", results), command)
    write_results(opts.name, results, table("ranking", results), command)


def kept_student_runs(previous: dict, depths: list[int], arms: list[str], seeds: list[int]) -> dict:
    """What `--append` keeps of the earlier students: every run except those this command trains again
    (a depth in `depths`, an arm in `arms` and a seed in `seeds`), so a new arm joins the earlier ones."""
    kept: dict = {}
    for layers, per_arm in previous.items():
        for arm, runs in per_arm.items():
            rerun = int(layers) in depths and arm in arms
            runs = [run for run in runs if not (rerun and run["seed"] in seeds)]
            if runs:
                kept.setdefault(layers, {})[arm] = runs
    return kept


def _first_queries(data: RankingData, n: int) -> RankingData:
    qids = list(data.queries)[:n]
    return RankingData({q: data.queries[q] for q in qids}, {q: data.candidates[q] for q in qids if q in data.candidates},
                       {q: data.qrels[q] for q in qids if q in data.qrels}, name=data.name)


def first_terms(log_history: list[dict]) -> dict:
    """The first logged value of every loss term (with `last_terms`: did each term fall?)."""
    for entry in log_history:
        if "loss" in entry:
            return last_terms([entry])
    return {}


if __name__ == "__main__":
    main()
