"""VIRT on real data: a Siamese student with and without virtual-interaction distillation, 3 seeds.

Arms (same initial weights, epochs, learning rate and batch; only the loss / head differ):

- Siamese baseline: MiniLM bi-encoder keeping k of its layers, softmax classifier over
  (u, v, |u-v|), gold labels only;
- + VIRT loss: the same, plus alpha * L_virt against the fine-tuned 6-layer MiniLM cross-encoder's
  X->Y / Y->X attention (`hf_distill.methods.virt`, alpha = 1);
- + VIRT loss + interaction layer: `interaction="virt"` (match-time interaction, embeddings independent);

and the teacher cross-encoder itself. After training, the embedding throughput (`encode`, the
same sentences) of the baseline and the VIRT-trained student is measured in alternating rounds:
VIRT must not slow the encoder down.

Splits: MRPC train -> test, RTE train -> validation (no labelled test), SNLI validation -> test
(the issue's protocol). The teacher is cached in .cache/teachers (see kd_glue.py).

Usage: python benchmarks/virt_glue.py --tasks mrpc rte snli --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time

import torch
from common import (
    CACHE, GLUE_TASKS, RESULTS, eval_metrics, last_terms, load_task, minilm_dir, smoke_option, start_results, write_results,
)
from kd_glue import teacher_for, training_args
from render import render_results, table

from hf_distill import SiameseModel
from hf_distill.metrics import compute_metrics_for
from hf_distill.modeling.modeling_common import keep_layers
from hf_distill.modeling.modeling_cross_encoder import select_layers
from hf_distill.trainer import DistillationTrainer

# task -> which file trains and which evaluates
SPLITS = {"mrpc": ("train", "test"), "rte": ("train", "validation"), "snli": ("validation", "test")}
ARMS = ("Siamese baseline", "+ VIRT loss", "+ VIRT loss + interaction")


def siamese_student(teacher, layers: int, strategy: str, interaction: bool, seed: int) -> SiameseModel:
    """The MiniLM bi-encoder keeping `layers` of its 6 layers, labelled like the teacher."""
    torch.manual_seed(seed)  # the same classifier initialisation for every arm
    student = SiameseModel.from_backbone(
        minilm_dir(),
        pooling="mean",
        head="classification",
        num_labels=teacher.config.num_labels,
        interaction="virt" if interaction else "none",
        id2label=dict(teacher.config.id2label),
        label2id=dict(teacher.config.label2id),
        attn_implementation="eager",
    )
    depth = student.backbone.config.num_hidden_layers
    if layers < depth:
        keep_layers(student.backbone, select_layers(depth, layers, strategy))
    return student


def encode_throughput(models: dict, sentences: list[str], rounds: int) -> dict[str, float]:
    """Sentences per second of `encode` for each model, models alternating within each round (median)."""
    samples: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(rounds):
        for name, model in models.items():
            model.eval()
            start = time.perf_counter()
            model.encode(sentences, batch_size=64)
            samples[name].append(len(sentences) / (time.perf_counter() - start))
    return {name: statistics.median(v) for name, v in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["mrpc", "rte", "snli"], choices=sorted(SPLITS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--student_layers", type=int, default=2, help="layers of the 6-layer bi-encoder the student keeps")
    parser.add_argument("--strategy", default="uniform")
    parser.add_argument("--epochs", type=float, default=1)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--virt_weight", type=float, default=1.0)
    parser.add_argument("--max_train", type=int, default=None, help="cut the training split to this many rows (budget)")
    parser.add_argument("--max_eval", type=int, default=None, help="smoke runs only: cut the evaluation split")
    parser.add_argument("--name", default="virt_glue")
    parser.add_argument("--append", action="store_true", help="keep the tasks already in results/NAME.json")
    parser.add_argument("--render", action="store_true", help="only rewrite results/NAME.md (and the pages showing it) from results/NAME.json")
    smoke_option(parser, tasks=["mrpc"], seeds=[0])
    opts = parser.parse_args()
    if opts.render:  # nothing runs: the table again from the JSON
        return render_results(opts.name, RESULTS)
    command = "python benchmarks/virt_glue.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])

    results, command = start_results(opts.name, opts, command)
    for task in opts.tasks:
        num_labels = GLUE_TASKS[task][3]
        train_file, eval_file = SPLITS[task]
        data = load_task(task, files={"train": train_file, "validation": eval_file})
        if opts.max_eval:
            data["validation"] = data["validation"].select(range(min(opts.max_eval, len(data["validation"]))))
        teacher, teacher_metrics, _ = teacher_for(task, data)  # trained on the whole training split
        if opts.max_train:
            data["train"] = data["train"].shuffle(seed=0).select(range(min(opts.max_train, len(data["train"]))))
        teacher.set_attn_implementation("eager")
        print(f"[{task}] teacher on {eval_file}: {teacher_metrics}", flush=True)
        task_results = {"splits": {"train": train_file, "eval": eval_file}, "train_rows": len(data["train"]),
                        "teacher": teacher_metrics, "arms": {}}
        results["tasks"][task] = task_results
        for seed in opts.seeds:  # seeds outermost: a cut-short run still has every arm
            trained = {}
            for arm in ARMS:
                virt = arm != "Siamese baseline"
                student = siamese_student(teacher, opts.student_layers, opts.strategy, "interaction" in arm, seed)
                extra = dict(alpha=0.0, virt_weight=opts.virt_weight if virt else 0.0, layer_mapping="uniform")
                output_dir = CACHE / "runs" / "virt" / task / arm.replace(" ", "_").replace("+", "plus") / str(seed)
                args = training_args(str(output_dir), task, opts.epochs, opts.lr, seed, **extra)
                trainer = DistillationTrainer(
                    model=student,
                    args=args,
                    teachers=[teacher] if virt else None,
                    train_dataset=data["train"],
                    compute_metrics=compute_metrics_for(num_labels),
                )
                start = time.perf_counter()
                trainer.train()
                seconds = time.perf_counter() - start
                metrics = eval_metrics(trainer, data["validation"])
                run = {"seed": seed, "train_seconds": seconds, **metrics, "terms": last_terms(trainer.state.log_history)}
                task_results["arms"].setdefault(arm, []).append(run)
                trained[arm] = student
                print(f"[{task}] {arm} seed {seed}: {metrics} ({seconds:.0f}s)", flush=True)
            sentences = list(data["validation"][GLUE_TASKS[task][1][0]])[:512]
            speed = encode_throughput({a: trained[a] for a in ARMS[:2]}, sentences, rounds=3)
            task_results.setdefault("encode_sentences_per_s", []).append({"seed": seed, **speed})
            write_results(opts.name, results, table("virt_glue", results), command)


if __name__ == "__main__":
    main()
