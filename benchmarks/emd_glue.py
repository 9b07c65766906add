"""BERT-EMD on real GLUE data: a 2-layer student with no KD, uniform layer mapping (TinyBERT) or EMD, 3 seeds.

Every arm starts from the same 2-layer copy of the fine-tuned 6-layer MiniLM teacher (cached by
`kd_glue.py`), gets the same epochs, learning rate and batch, and differs only in the loss:

- no KD: cross-entropy / MSE on the gold labels;
- uniform: beta * (hidden MSE + attention-score MSE + embedding MSE) with student layer i -> teacher
  layer i * L_T / L_S, plus alpha * soft + (1 - alpha) * hard (TinyBERT's one-to-one mapping);
- EMD: beta * (EMD_hidden + EMD_attention + embedding MSE) + alpha * soft + (1 - alpha) * hard, with
  the cost-attention update of the layer weights after every step (`hf_distill.methods.bert_emd`).

Wall time per arm is recorded in the same run, so the EMD overhead over uniform mapping is a ratio
measured on the same machine state. The flow heatmap and weight trajectories of the last EMD run of
each task are copied next to the results.

With `--stages 2` every arm trains twice for `--epochs` each, as TinyBERT's task distillation does
(the official BERT-EMD code's `--one_step False` mode; its default is the one summed loss): stage 1
distils the intermediate layers only (the arm's layer terms, weight 1, no prediction loss), stage 2
the prediction layer only (alpha * soft + (1 - alpha) * hard, no layer terms), starting from stage
1's student. Stage 2 is the same for both layer arms, so they differ only in the mapping that shaped
the layers. No KD trains on the hard loss in both stages (the same steps and learning-rate
schedules). The EMD / uniform time ratio is then stage 1's.

Usage: python benchmarks/emd_glue.py --tasks mrpc rte stsb --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import shutil
import sys
import time
from pathlib import Path

from common import (
    CACHE, GLUE_TASKS, RESULTS, eval_metrics, last_terms, load_task, smoke_option, start_results, write_results,
)
from kd_glue import teacher_for, training_args
from render import render_results, table

from hf_distill import CrossEncoderModel
from hf_distill.metrics import compute_metrics_for
from hf_distill.trainer import DistillationTrainer

BETA, ALPHA = 0.01, 0.8  # bert_emd preset defaults (the official code's)


def arm_arguments(arm: str, beta: float, alpha: float) -> dict:
    """The only thing that differs between arms: the loss weights."""
    if arm == "no KD":
        return dict(alpha=0.0)
    if arm == "uniform":
        return dict(alpha=alpha, hidden_weight=beta, attention_weight=beta, embedding_weight=beta, layer_mapping="uniform")
    if arm == "EMD":
        return dict(alpha=alpha, emd_weight=beta, embedding_weight=beta, emd_temperature=1.0, emd_update="softmax")
    if arm == "EMD normalize":  # the cost-attention update without the softmax sharpening
        return dict(alpha=alpha, emd_weight=beta, embedding_weight=beta, emd_update="normalize")
    if arm == "EMD smooth":  # the official code's default: softmax update, then add_softmax over the weights
        return dict(alpha=alpha, emd_weight=beta, embedding_weight=beta, emd_update="softmax", emd_smooth_weights=True)
    raise ValueError(arm)


def stage_arguments(arm: str, stage: int, beta: float, alpha: float) -> dict:
    """Two-stage task distillation: stage 1 the arm's layer terms alone (weight 1), stage 2 the prediction loss alone."""
    if arm == "no KD":
        return arm_arguments(arm, beta, alpha)
    if stage == 1:
        return dict(arm_arguments(arm, 1.0, alpha), hard_weight=0.0, soft_weight=0.0)
    return dict(alpha=alpha)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["mrpc", "rte", "stsb"], choices=sorted(GLUE_TASKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=["no KD", "uniform", "EMD"],
                        choices=["no KD", "uniform", "EMD", "EMD normalize", "EMD smooth"])
    parser.add_argument("--student_layers", type=int, default=2)
    parser.add_argument("--strategy", default="uniform", help="which teacher layers the student keeps")
    parser.add_argument("--epochs", type=float, default=1, help="epochs (of each stage with --stages 2)")
    parser.add_argument("--stages", type=int, default=1, choices=[1, 2],
                        help="1: one summed loss; 2: layer terms first, then the prediction loss (TinyBERT's task distillation)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--beta", type=float, default=BETA, help="weight of the layer terms (both layer arms)")
    parser.add_argument("--alpha", type=float, default=ALPHA, help="soft-loss share of the prediction loss")
    parser.add_argument("--name", default="emd_glue")
    parser.add_argument("--append", action="store_true",
                        help="keep the other tasks, and the other arms of these tasks, of results/NAME.json")
    parser.add_argument("--max_samples", type=int, default=None, help="smoke runs only: cut every split")
    parser.add_argument("--render", action="store_true", help="only rewrite results/NAME.md (and the pages showing it) from results/NAME.json")
    smoke_option(parser, tasks=["mrpc", "stsb"], seeds=[0], arms=["no KD", "uniform", "EMD", "EMD smooth"])
    opts = parser.parse_args()
    if opts.render:  # nothing runs: the table again from the JSON
        return render_results(opts.name, RESULTS)
    command = "python benchmarks/emd_glue.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])

    previous_path = RESULTS / f"{opts.name}.json"
    previous = json.loads(previous_path.read_text())["tasks"] if opts.append and previous_path.exists() else {}
    results, command = start_results(opts.name, opts, command)
    for task in opts.tasks:
        _, columns, _, num_labels, _, metric = GLUE_TASKS[task]
        data = load_task(task)
        if opts.max_samples:
            data = data.filter(lambda _, i: i < opts.max_samples, with_indices=True)
        teacher, teacher_metrics, teacher_seconds = teacher_for(task, data)
        teacher.set_attn_implementation("eager")
        print(f"[{task}] teacher: {teacher_metrics}", flush=True)
        student_init = CrossEncoderModel.from_teacher(teacher, opts.student_layers, opts.strategy)
        student_init.set_attn_implementation("eager")
        # --append keeps this task's other arms (e.g. adding "EMD normalize" beside the earlier three)
        kept = {a: runs for a, runs in previous.get(task, {}).get("arms", {}).items() if a not in opts.arms}
        task_results = {"teacher": teacher_metrics, "teacher_train_seconds": teacher_seconds, "arms": kept}
        results["tasks"][task] = task_results
        for seed in opts.seeds:  # seeds outermost: a cut-short run still has every arm
            for arm in opts.arms:
                student = copy.deepcopy(student_init)
                output_dir = CACHE / "runs" / "emd" / task / arm.replace(" ", "_") / str(seed)
                stages = [arm_arguments(arm, opts.beta, opts.alpha)] if opts.stages == 1 else [
                    stage_arguments(arm, stage, opts.beta, opts.alpha) for stage in (1, 2)
                ]
                stage_runs = []
                for stage, extra in enumerate(stages, start=1):
                    stage_dir = output_dir if opts.stages == 1 else output_dir / f"stage{stage}"
                    args = training_args(str(stage_dir), task, opts.epochs, opts.lr, seed, **extra)
                    trainer = DistillationTrainer(
                        model=student,
                        args=args,
                        teachers=[teacher] if arm != "no KD" else None,
                        train_dataset=data["train"],
                        compute_metrics=compute_metrics_for(num_labels),
                    )
                    start = time.perf_counter()
                    trainer.train()
                    stage_runs.append({
                        "train_seconds": time.perf_counter() - start, "steps": trainer.state.global_step,
                        "terms": last_terms(trainer.state.log_history),
                    })
                    if arm.startswith("EMD") and stage == 1:
                        keep_plots(trainer, opts.name, task, arm)
                    student = trainer.model
                seconds = sum(r["train_seconds"] for r in stage_runs)
                metrics = eval_metrics(trainer, data["validation"])
                run = {"seed": seed, "train_seconds": seconds, "steps": sum(r["steps"] for r in stage_runs), **metrics}
                run["terms"] = stage_runs[-1]["terms"]
                if opts.stages == 2:  # the layer stage's own time, steps and last terms (the EMD overhead lives there)
                    run["stage1"] = stage_runs[0]
                task_results["arms"].setdefault(arm, []).append(run)
                print(f"[{task}] {arm} seed {seed}: {metrics} ({seconds:.0f}s) stages {stage_runs}", flush=True)
                write_results(opts.name, results, table("emd_glue", results), command)


def keep_plots(trainer: DistillationTrainer, name: str, task: str, arm: str) -> None:
    """Copy the EMD run's flow heatmap and weight trajectories next to the results (NAME_TASK[_ARM]_*.png)."""
    suffix = "" if arm == "EMD" else "_" + arm.split()[-1]
    for png in Path(trainer.args.output_dir).glob("*.png"):
        shutil.copy(png, RESULTS / f"{name}_{task}{suffix}_{png.name}")


if __name__ == "__main__":
    main()
