"""How hard each Simplified TinyBERT loss term pulls on a re-ranking student at its initialisation.

For the cached re-ranking teacher of `benchmarks/ranking.py` (trained there, or here on a cache miss,
with the same options) and a k-layer student cut from it (its first k layers, as every ranking arm
starts), this measures on real training batches, for every unweighted term (hard, soft, attention,
hidden, embedding): its value, and the L2 norm of its gradient with respect to the student's
parameters (the projections W_e / W_h are loss parameters and not counted), each averaged over the
batches. The ratio of a term's gradient norm to the hard term's says how much of a step's direction
it sets; for the attention term it is also given at each weight in `--attention_weights`
(the weighted gradient is the weight times the unweighted one).

Why: the attention-score MSE is two orders of magnitude larger than the prediction terms, so the
weight that keeps it from dominating the update depends on the student's depth.

Usage: python benchmarks/term_gradients.py --student_layers 2 3 --batches 8
"""

from __future__ import annotations

import argparse
import shlex
import sys

import torch
from common import CACHE, RESULTS, mean_std, smoke_option, write_results
from ranking import arm_arguments, load_data, teacher_for, training_args
from render import render_results, table

from hf_distill import CrossEncoderModel
from hf_distill.trainer import DistillationTrainer

TERMS = ("hard", "soft", "attention", "hidden", "embedding")


def term_gradients(teacher: CrossEncoderModel, layers: int, train, batches: int, max_length: int) -> dict:
    """Per term: mean value and mean gradient norm (student parameters) over `batches` batches of 16."""
    student = CrossEncoderModel.from_teacher(teacher, layers, "first")
    student.set_attn_implementation("eager")
    args = training_args(str(CACHE / "runs" / "term_gradients"), 1, 1e-4, 0, max_length, **arm_arguments("Simplified TinyBERT", 1.0))
    subset = train.shuffle(seed=0).select(range(batches * args.per_device_train_batch_size))
    trainer = DistillationTrainer(model=student, args=args, teachers=[teacher], train_dataset=subset)
    parameters = [p for p in student.parameters() if p.requires_grad]
    values: dict[str, list[float]] = {name: [] for name in TERMS}
    norms: dict[str, list[float]] = {name: [] for name in TERMS}
    student.train()
    for batch in trainer.get_train_dataloader():
        terms = trainer.loss_terms(student, batch)[0]
        for name in TERMS:
            grads = torch.autograd.grad(terms[name], parameters, retain_graph=True, allow_unused=True)
            norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads if g is not None))
            values[name].append(terms[name].item())
            norms[name].append(norm.item())
    out: dict = {}
    for name in TERMS:
        norm_mean, norm_std = mean_std(norms[name])
        out[name] = {"value": mean_std(values[name])[0], "grad_norm": norm_mean, "grad_norm_std": norm_std}
    for name in TERMS:
        out[name]["grad_ratio_to_hard"] = out[name]["grad_norm"] / out["hard"]["grad_norm"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student_layers", nargs="+", type=int, default=[2, 3])
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--attention_weights", nargs="+", type=float, default=[1.0, 0.05, 0.03, 0.01])
    parser.add_argument("--train_sets", nargs="+", default=["wikiqa", "dl20"], choices=["wikiqa", "dl20"])
    parser.add_argument("--teacher_epochs", type=float, default=1)
    parser.add_argument("--teacher_lr", type=float, default=5e-5)
    parser.add_argument("--teacher_targets", default="bi-encoder", choices=["labels", "bi-encoder"])
    parser.add_argument("--teacher_soft_scale", type=float, default=1.0)
    parser.add_argument("--max_length", type=int, default=128)
    parser.add_argument("--name", default="term_gradients")
    parser.add_argument("--render", action="store_true", help="only rewrite results/NAME.md (and the pages showing it) from results/NAME.json")
    smoke_option(parser, student_layers=[2], batches=2)
    opts = parser.parse_args()
    if opts.render:  # nothing runs: the table again from the JSON
        return render_results(opts.name, RESULTS)
    if opts.batches < 1:
        parser.error(f"--batches must be >= 1, got {opts.batches}")
    opts.max_train = None  # teacher_for's cache key: the full training set, as in ranking.py
    command = "python benchmarks/term_gradients.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    torch.manual_seed(0)
    train, _, sources = load_data(opts.train_sets)
    teacher, info = teacher_for(train, sources, opts)
    results: dict = {"settings": vars(opts), "teacher": info["folder"], "batches": opts.batches,
                     "max_length": opts.max_length, "students": {}}
    for layers in opts.student_layers:
        results["students"][str(layers)] = term_gradients(teacher, layers, train, opts.batches, opts.max_length)
        print(f"[{layers} layers] {results['students'][str(layers)]}", flush=True)
    write_results(opts.name, results, table("term_gradients", results), command)


if __name__ == "__main__":
    main()
