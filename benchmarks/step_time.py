"""Step time of distillation vs plain fine-tuning, measured in one run on the same batches.

    (a) plain student fine-tuning step              (DistillationTrainer, no teacher)
    (b) distillation from precomputed logits        (teacher_logits_0 column)
    (c) distillation with an online teacher         (teacher forward every step)
    (d) teacher forward alone                       (inference mode, same batches)

Targets: b/a <= 1.05 and c/(a+d) <= 1.10. Arms run in alternating rounds so that drift of
the machine hits all of them alike; the median step time of each arm is reported.

Usage: python benchmarks/step_time.py [--steps 30 --rounds 3 --batch 16 --seq 64]
"""

from __future__ import annotations

import argparse
import copy
import shlex
import statistics
import sys
import time

import torch
from common import RESULTS, SCRATCH, load_task, minilm_dir, smoke_option, timing_arguments, write_results
from render import render_results, table
from transformers import TrainerCallback

from hf_distill import CrossEncoderModel
from hf_distill.batch_keys import logits_column
from hf_distill.speed import pair_batches
from hf_distill.teachers import add_teacher_logits
from hf_distill.trainer import DistillationTrainer


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step (data collation, forward, backward, optimizer)."""

    def __init__(self):
        self.times: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter() - self._start)


def run_arm(student_init, train, steps: int, batch: int, seq: int, teacher=None) -> list[float]:
    alpha = 0.5 if (teacher is not None or logits_column(0) in train.column_names) else 0.0
    args = timing_arguments(str(SCRATCH / "hf_distill_step_time"), steps, batch, seq, alpha=alpha)
    timer = StepTimer()
    trainer = DistillationTrainer(
        model=copy.deepcopy(student_init), args=args, teachers=teacher, train_dataset=train, callbacks=[timer]
    )
    trainer.train()
    return timer.times[3:]  # drop warm-up steps


def teacher_forward_times(teacher, train, steps: int, batch: int, seq: int) -> list[float]:
    """Seconds per batch of the teacher tokenising the pairs and scoring them (as the online arm's teacher does)."""
    times = []
    for start in range(0, steps * batch, batch):
        rows = train.select(range(start, start + batch))
        pairs = list(zip(rows["sentence1"], rows["sentence2"]))
        t0 = time.perf_counter()
        (inputs,) = pair_batches(teacher, pairs, batch, seq)  # the joint pair, padded to the longest, truncated to seq
        with torch.inference_mode():
            teacher(**inputs)
        times.append(time.perf_counter() - t0)
    return times[3:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--student_layers", type=int, default=2)
    parser.add_argument("--name", default="step_time")
    parser.add_argument("--render", action="store_true", help="only rewrite results/NAME.md (and the pages showing it) from results/NAME.json")
    smoke_option(parser, steps=5, rounds=1, batch=4, seq=16)
    opts = parser.parse_args()
    if opts.render:  # nothing runs: the table again from the JSON
        return render_results(opts.name, RESULTS)
    command = "python benchmarks/step_time.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    torch.manual_seed(0)

    data = load_task("mrpc", splits=("train",))["train"].shuffle(seed=0).select(range(opts.steps * opts.batch + opts.batch))
    teacher = CrossEncoderModel.from_backbone(minilm_dir(), num_labels=2).eval()
    student_init = CrossEncoderModel.from_teacher(teacher, opts.student_layers, "uniform")
    with_logits = add_teacher_logits(data, teacher, ["sentence1", "sentence2"], max_length=opts.seq)

    samples = {"a: plain fine-tuning": [], "b: precomputed logits": [], "c: online teacher": [], "d: teacher forward": []}
    for _ in range(opts.rounds):
        samples["a: plain fine-tuning"] += run_arm(student_init, data, opts.steps, opts.batch, opts.seq)
        samples["b: precomputed logits"] += run_arm(student_init, with_logits, opts.steps, opts.batch, opts.seq)
        samples["c: online teacher"] += run_arm(student_init, data, opts.steps, opts.batch, opts.seq, teacher=teacher)
        samples["d: teacher forward"] += teacher_forward_times(teacher, data, opts.steps, opts.batch, opts.seq)
    median = {arm: statistics.median(times) * 1000 for arm, times in samples.items()}
    a, b, c, d = (median[k] for k in samples)
    ratios = {"b/a": b / a, "c/(a+d)": c / (a + d)}
    targets = {"b/a": 1.05, "c/(a+d)": 1.10}
    payload = {"median_ms": median, "ratios": ratios, "targets": targets,
               "samples_ms": {k: [t * 1000 for t in v] for k, v in samples.items()}, "settings": vars(opts)}
    write_results(opts.name, payload, table("step_time", payload), command)


if __name__ == "__main__":
    main()
