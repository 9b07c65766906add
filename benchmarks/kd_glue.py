"""Logit distillation on real GLUE data: a 2-layer student with and without KD, 3 seeds.

1. Fine-tune the 6-layer MiniLM cross-encoder teacher on the task (cached in .cache/teachers).
2. Precompute its logits on the training set once (`add_teacher_logits`, cached by fingerprint).
3. Build a 2-layer student with `CrossEncoderModel.from_teacher(strategy=...)`; every arm starts
   from the same copy and gets the same budget; only the loss differs: no KD (hard labels), or
   KD with alpha/temperature from a small sweep.

Usage: python benchmarks/kd_glue.py --tasks mrpc stsb --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import shlex
import shutil
import sys
import time

import torch
from transformers.trainer_utils import get_last_checkpoint

from common import (
    CACHE, GLUE_TASKS, RESULTS, eval_metrics, fast_bf16, label_maps, load_task, minilm_dir, mpnet_dir, run_arguments, smoke_option,
    write_results,
)
from render import render_results, table

from hf_distill import CrossEncoderModel
from hf_distill.metrics import compute_metrics_for
from hf_distill.teachers import add_teacher_logits
from hf_distill.trainer import DistillationTrainer
from hf_distill.training_args import DistillationArguments

TEACHER_SETTINGS = {"mrpc": dict(epochs=5, lr=5e-5), "stsb": dict(epochs=4, lr=5e-5), "rte": dict(epochs=5, lr=5e-5), "snli": dict(epochs=2, lr=5e-5)}
# MPNet-base (12 layers, hidden 768): a smaller learning rate, as for BERT-base; ~8x the MiniLM's time per step.
# The SNLI teacher trains under bf16 autocast (AMX here: 2.6-2.8 s per step of 16 x 64 tokens against 4.1-4.4 s
# in float32); its weights stay float32 and it is evaluated and labels the data in float32. Only where bf16 is
# fast (`common.fast_bf16`: CUDA, AMX or AVX-512 BF16); elsewhere it trains in float32.
MPNET_TEACHER_SETTINGS = {"stsb": dict(epochs=3, lr=2e-5), "snli": dict(epochs=2, lr=2e-5, bf16=True)}
TEACHER_BACKBONES = {"minilm": ("minilm-l6", minilm_dir, TEACHER_SETTINGS), "mpnet": ("mpnet", mpnet_dir, MPNET_TEACHER_SETTINGS)}
# arm -> (alpha, temperature); alpha = 0 is plain fine-tuning on gold labels (no KD).
ARMS = {
    "classification": {"no KD": (0.0, 1.0), "KD a=0.5 T=1": (0.5, 1.0), "KD a=0.9 T=4": (0.9, 4.0)},
    "regression": {"no KD": (0.0, 1.0), "KD a=0.5": (0.5, 1.0), "KD a=0.9": (0.9, 1.0)},
}


def training_args(output_dir: str, task: str, epochs: float, lr: float, seed: int, **extra) -> DistillationArguments:
    _, columns, label_column, _, label_scale, _ = GLUE_TASKS[task]
    return run_arguments(output_dir, epochs, lr, seed, columns, label_column, label_scale=label_scale, **extra)


def evaluate(model, data, task: str, args: DistillationArguments) -> dict:
    trainer = DistillationTrainer(model=model, args=args, compute_metrics=compute_metrics_for(model.config.num_labels))
    return eval_metrics(trainer, data)


def teacher_for(task: str, data, epochs: float | None = None, backbone: str = "minilm") -> tuple[CrossEncoderModel, dict, float]:
    """The fine-tuned cross-encoder teacher of `backbone` ("minilm": 6 layers, "mpnet": 12), trained once, then
    loaded from the cache. Training saves a checkpoint every 200 steps and resumes from the last one, so
    a long teacher (MPNet: about an hour on 2 cores) survives an interrupted session."""
    _, _, _, num_labels, _, _ = GLUE_TASKS[task]
    prefix, backbone_dir, all_settings = TEACHER_BACKBONES[backbone]
    folder = CACHE / "teachers" / f"{prefix}-{task}"
    settings = {**all_settings[task], **({"epochs": epochs} if epochs else {})}
    args = training_args(
        str(folder / "run"), task, settings["epochs"], settings["lr"], seed=42,
        save_strategy="steps", save_steps=200, save_total_limit=1, bf16=settings.get("bf16", False) and fast_bf16(),
    )
    seconds = 0.0
    if not (folder / "config.json").exists():
        torch.manual_seed(args.seed)  # the head's initialisation, whatever ran before in this process
        teacher = CrossEncoderModel.from_backbone(backbone_dir(), num_labels=num_labels, **label_maps(task))
        checkpoint = get_last_checkpoint(args.output_dir) if (folder / "run").is_dir() else None
        if checkpoint:
            print(f"[{task}] teacher {backbone}: resuming from {checkpoint}", flush=True)
        start = time.perf_counter()
        DistillationTrainer(model=teacher, args=args, train_dataset=data["train"]).train(resume_from_checkpoint=checkpoint)
        seconds = time.perf_counter() - start  # this process's share when resumed
        teacher.save_pretrained(folder)
        shutil.rmtree(folder / "run", ignore_errors=True)  # the checkpoints served their purpose
    teacher = CrossEncoderModel.from_pretrained(folder)
    return teacher, evaluate(teacher, data["validation"], task, dataclasses.replace(args, bf16=False)), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["mrpc", "stsb"], choices=sorted(GLUE_TASKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--student_layers", type=int, default=2)
    parser.add_argument("--strategy", default="uniform")
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--name", default="kd_glue")
    parser.add_argument("--teacher_epochs", type=float, default=None, help="override the teacher's epochs (TEACHER_SETTINGS)")
    parser.add_argument("--max_samples", type=int, default=None, help="smoke runs only: cut every split")
    parser.add_argument("--render", action="store_true", help="only rewrite results/NAME.md (and the pages showing it) from results/NAME.json")
    smoke_option(parser, seeds=[0], epochs=1, teacher_epochs=1)
    opts = parser.parse_args()
    if opts.render:  # nothing runs: the table again from the JSON
        return render_results(opts.name, RESULTS)
    command = "python benchmarks/kd_glue.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])

    teacher_settings = {t: {**v, **({"epochs": opts.teacher_epochs} if opts.teacher_epochs else {})} for t, v in TEACHER_SETTINGS.items()}
    results = {"settings": vars(opts), "teacher_settings": teacher_settings, "tasks": {}}
    for task in opts.tasks:
        _, columns, _, num_labels, _, metric = GLUE_TASKS[task]
        data = load_task(task)
        if opts.max_samples:
            data = data.map(lambda x: x).filter(lambda _, i: i < opts.max_samples, with_indices=True)
        teacher, teacher_metrics, teacher_seconds = teacher_for(task, data, opts.teacher_epochs)
        print(f"[{task}] teacher: {teacher_metrics}", flush=True)
        train = add_teacher_logits(data["train"], teacher, list(columns), batch_size=64, max_length=128)
        student_init = CrossEncoderModel.from_teacher(teacher, opts.student_layers, opts.strategy)
        arms = ARMS["regression" if num_labels == 1 else "classification"]
        task_results = {"teacher": teacher_metrics, "teacher_train_seconds": teacher_seconds, "arms": {}}
        results["tasks"][task] = task_results
        for seed in opts.seeds:  # seeds outermost: a cut-short run still has every arm
            for arm, (alpha, temperature) in arms.items():
                student = copy.deepcopy(student_init)
                args = training_args(
                    str(CACHE / "runs" / task / arm.replace(" ", "_") / str(seed)),
                    task, opts.epochs, opts.lr, seed, alpha=alpha, temperature=temperature,
                )
                start = time.perf_counter()
                DistillationTrainer(model=student, args=args, train_dataset=train if alpha > 0 else data["train"]).train()
                seconds = time.perf_counter() - start
                metrics = evaluate(student, data["validation"], task, args)
                task_results["arms"].setdefault(arm, []).append({"seed": seed, "train_seconds": seconds, **metrics})
                print(f"[{task}] {arm} seed {seed}: {metrics} ({seconds:.0f}s)", flush=True)
                write_results(opts.name, results, table("kd_glue", results), command)


if __name__ == "__main__":
    main()
