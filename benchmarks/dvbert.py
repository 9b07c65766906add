"""DvBERT on real data: a Siamese student taught by K cross-encoders (MiniLM, MPNet), annealing vs loss weighting.

Tasks (`../shared/data`):

- snli: NLI classification, trained on SNLI `validation` (9,842 pairs; SNLI train is not available
  offline), evaluated by accuracy on SNLI `test` and, as in the paper, by STS-B `test` Spearman x100
  of cosine(u, v) (transfer, no STS training);
- stsb: STS-B regression (cosine head), trained on `train`, evaluated by Spearman x100 of cosine(u, v) on `test`.

Every student arm starts from the same MiniLM bi-encoder (all-MiniLM-L6-v2 keeping `--student_layers`
of its 6 layers, mean pooling; the same classifier initialisation per seed), gets the same epochs, lr
and batch, and differs only in its loss:

- SBERT baseline: the gold labels only;
- DvBERT, loss weighting: hard + sum_k soft_k (fixed weights 1);
- DvBERT, teacher annealing: lambda * hard + (1 - lambda) * sum_k soft_k, lambda = step / total;

each with K = 1 (the MiniLM teacher) and K = 2 (MiniLM + MPNet: two tokenizers). The teachers are
fine-tuned once (`kd_glue.teacher_for`, cached in .cache/teachers) and label the training set once
(logits cached in .cache/logits). Each teacher's own score is reported beside the students.

Usage: python benchmarks/dvbert.py --tasks stsb snli --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

import torch
from common import (
    CACHE, GLUE_TASKS, RESULTS, eval_metrics, last_terms, load_task, minilm_dir, smoke_option, start_results, write_results,
)
from datasets import load_from_disk
from kd_glue import training_args
from kd_glue import teacher_for as cached_teacher
from render import render_results, table

from hf_distill import SiameseModel
from hf_distill.batch_keys import logits_column, logits_columns
from hf_distill.evaluation import STSEvaluator
from hf_distill.metrics import compute_metrics_for
from hf_distill.modeling.modeling_common import keep_layers
from hf_distill.modeling.modeling_cross_encoder import select_layers
from hf_distill.teachers import add_teacher_logits
from hf_distill.trainer import DistillationTrainer

# task -> (train file, evaluation file)
SPLITS = {"snli": ("validation", "test"), "stsb": ("train", "test")}
TEACHERS = ("minilm", "mpnet")


def arms(num_teachers: int) -> dict[str, tuple[int, dict]]:
    """arm -> (teachers used, loss settings)."""
    table: dict[str, tuple[int, dict]] = {"SBERT baseline": (0, dict(alpha=0.0))}
    for k in range(1, num_teachers + 1):
        table[f"DvBERT weighting K={k}"] = (k, dict(hard_weight=1.0, soft_weight=1.0, teacher_reduction="sum"))
        table[f"DvBERT annealing K={k}"] = (k, dict(annealing="linear", teacher_reduction="sum"))
    return table


def siamese_student(task: str, teacher, layers: int, seed: int) -> SiameseModel:
    """The MiniLM bi-encoder keeping `layers` of its 6 layers (uniform), with the task's head, labelled like the teacher."""
    torch.manual_seed(seed)  # the same head initialisation for every arm
    regression = GLUE_TASKS[task][3] == 1
    labels = {} if regression else dict(id2label=dict(teacher.config.id2label), label2id=dict(teacher.config.label2id))
    student = SiameseModel.from_backbone(
        minilm_dir(), pooling="mean", head="cosine" if regression else "classification",
        num_labels=teacher.config.num_labels, **labels,
    )
    depth = student.backbone.config.num_hidden_layers
    if layers < depth:
        keep_layers(student.backbone, select_layers(depth, layers, "uniform"))
    return student


def labelled_train(task: str, train, teachers: dict) -> object:
    """The training split with one `teacher_logits_{k}` column per teacher (k in TEACHERS order), cached on disk."""
    folder = CACHE / "logits" / f"{task}-{'-'.join(teachers)}-{len(train)}"
    if folder.exists():
        return load_from_disk(str(folder))
    columns = list(GLUE_TASKS[task][1])
    for k, teacher in enumerate(teachers.values()):
        train = add_teacher_logits(train, teacher, columns, column=logits_column(k), batch_size=64, max_length=128)
    train.save_to_disk(str(folder))
    return train


def sts_test() -> STSEvaluator:
    from common import DATA

    return STSEvaluator.from_jsonl(DATA / "stsb" / "test.jsonl", name="stsb_test", batch_size=64, max_length=128)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["stsb", "snli"], choices=sorted(SPLITS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--teachers", nargs="+", default=list(TEACHERS), choices=TEACHERS, help="K = 1 uses the first")
    parser.add_argument("--student_layers", type=int, default=3, help="layers of the 6-layer bi-encoder the student keeps")
    parser.add_argument("--epochs", type=float, default=1)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--max_train", type=int, default=None, help="smoke runs only: cut the training split")
    parser.add_argument("--max_eval", type=int, default=None, help="smoke runs only: cut the evaluation split")
    parser.add_argument("--arms", nargs="+", default=None, help="run only these arms (names as in the table); default all")
    parser.add_argument("--name", default="dvbert")
    parser.add_argument(
        "--append", action="store_true",
        help="keep the other tasks in results/NAME.json, and this task's runs of seeds not in --seeds (finish a cut-short run)",
    )
    parser.add_argument("--render", action="store_true", help="only rewrite results/NAME.md (and the pages showing it) from results/NAME.json")
    smoke_option(parser, tasks=["stsb"], seeds=[0])
    opts = parser.parse_args()
    if opts.render:  # nothing runs: the table again from the JSON
        return render_results(opts.name, RESULTS)
    unknown = sorted(set(opts.arms or ()) - set(arms(len(opts.teachers))))
    if unknown:  # before any teacher trains
        parser.error(f"--arms: unknown {unknown}; valid: {sorted(arms(len(opts.teachers)))}")
    command = "python benchmarks/dvbert.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    previous_path = RESULTS / f"{opts.name}.json"
    previous = json.loads(previous_path.read_text())["tasks"] if opts.append and previous_path.exists() else {}
    results, command = start_results(opts.name, opts, command)
    sts = sts_test()

    for task in opts.tasks:
        train_file, eval_file = SPLITS[task]
        data = load_task(task, files={"train": train_file, "validation": eval_file})
        if opts.max_eval:
            data["validation"] = data["validation"].select(range(min(opts.max_eval, len(data["validation"]))))
        teachers, task_results = {}, {"splits": {"train": train_file, "eval": eval_file}, "teachers": {}, "arms": {}}
        for arm, runs in previous.get(task, {}).get("arms", {}).items():  # --append: earlier seeds stay
            kept = [run for run in runs if run["seed"] not in opts.seeds]
            if kept:
                task_results["arms"][arm] = kept
        for name in opts.teachers:
            teacher, metrics, seconds = cached_teacher(task, data, backbone=name)
            teachers[name] = teacher.eval()
            task_results["teachers"][name] = {**metrics, "train_seconds": seconds}
            print(f"[{task}] teacher {name} on {eval_file}: {metrics}", flush=True)
        if opts.max_train:  # after the teachers, which train (once, cached) on the whole split
            data["train"] = data["train"].select(range(min(opts.max_train, len(data["train"]))))
        train = labelled_train(task, data["train"], teachers)
        results["tasks"][task] = task_results
        num_labels = GLUE_TASKS[task][3]
        for seed in opts.seeds:  # seeds outermost: a cut-short run still has every arm
            for arm, (k, losses) in arms(len(teachers)).items():
                if opts.arms and arm not in opts.arms:
                    continue
                student = siamese_student(task, next(iter(teachers.values())), opts.student_layers, seed)
                dropped = logits_columns(train.column_names)[k:]  # the arm's first k teachers stay
                output_dir = CACHE / "runs" / "dvbert" / task / arm.replace(" ", "_").replace("=", "") / str(seed)
                args = training_args(str(output_dir), task, opts.epochs, opts.lr, seed, **losses)
                trainer = DistillationTrainer(
                    model=student, args=args, train_dataset=train.remove_columns(dropped),
                    compute_metrics=compute_metrics_for(num_labels),
                )
                start = time.perf_counter()
                trainer.train()
                seconds = time.perf_counter() - start
                student.eval()
                metrics = {**eval_metrics(trainer, data["validation"]), **sts(student)}
                run = {"seed": seed, "teachers": k, "train_seconds": seconds, **metrics,
                       "terms": last_terms(trainer.state.log_history)}
                task_results["arms"].setdefault(arm, []).append(run)
                print(f"[{task}] {arm} seed {seed}: {metrics} ({seconds:.0f}s)", flush=True)
                write_results(opts.name, results, table("dvbert", results), command)


if __name__ == "__main__":
    main()
