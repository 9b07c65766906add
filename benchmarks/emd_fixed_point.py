"""Where BERT-EMD's cost attention drives the layer masses from the benchmark's starting costs (no training).

`emd_glue.py` found EMD below uniform (TinyBERT) mapping whenever the 2-layer student is cut from
teacher layers 3 and 6. Uniform mapping distils each student layer into the teacher layer it was
copied from; EMD could only match that if the cost-attention update moved the masses onto those
"origin" layers. This script asks whether the costs point there at all:

1. It cuts the student from the cached fine-tuned teacher exactly as `emd_glue.py` does and averages
   `EMDLayerLoss`'s hidden and attention cost matrices (the ones training uses) over the first
   `--examples` training pairs.
2. For each update rule (softmax at several `emd_temperature`s, plain normalisation, each with and
   without the official code's `add_softmax` smoothing, with hidden and attention masses averaged or
   `separate`), it applies the cost-attention update
   `--updates` times to those fixed costs, from uniform masses, as training would if the costs did
   not move, and reports the final masses, the flow, and the flow's share on the origin pairs
   (uniform mapping puts all of it there: 1.0).

Nothing trains; a few forward passes per task. The teachers come from `kd_glue.py`'s cache.

Usage: python benchmarks/emd_fixed_point.py --tasks stsb mrpc rte
"""

from __future__ import annotations

import argparse
import shlex
import sys

import torch
from common import GLUE_TASKS, RESULTS, load_task, smoke_option, start_results, write_results
from kd_glue import teacher_for
from render import render_results, table

from hf_distill import CrossEncoderModel
from hf_distill.losses.emd import EMDLayerLoss, earth_movers_flow
from hf_distill.modeling.modeling_cross_encoder import select_layers

# (mode, emd_temperature, add_softmax smoothing, separate hidden / attention masses)
RULES = (
    [("softmax", t, smooth, False) for smooth in (False, True) for t in (1.0, 2.0, 5.0, 10.0, 20.0)]
    + [("normalize", None, smooth, False) for smooth in (False, True)]
    + [(mode, t, smooth, True)
       for mode, t in (("softmax", 1.0), ("softmax", 2.0), ("normalize", None)) for smooth in (False, True)]
)


def starting_costs(task: str, strategy: str, examples: int, batch_size: int, max_length: int) -> tuple[dict, list[int]]:
    """Mean (L_S, L_T) hidden and attention costs of the freshly cut student, and the teacher layers (1-based) it keeps."""
    _, columns, _, _, _, _ = GLUE_TASKS[task]
    data = load_task(task)
    teacher, _, _ = teacher_for(task, data)
    teacher.set_attn_implementation("eager")
    student = CrossEncoderModel.from_teacher(teacher, 2, strategy)
    student.set_attn_implementation("eager")
    depth = teacher.config.encoder.num_hidden_layers
    origins = [i + 1 for i in select_layers(depth, 2, strategy)]
    width = teacher.config.encoder.hidden_size
    loss = EMDLayerLoss(2, depth, width, width).train()
    rows = data["train"].select(range(examples))
    teacher.eval()
    student.eval()  # no dropout: the costs of the weights as cut
    for start in range(0, examples, batch_size):
        chunk = rows[start : start + batch_size]
        batch = dict(teacher.tokenizer(chunk[columns[0]], chunk[columns[1]], truncation=True, max_length=max_length,
                                       padding=True, return_tensors="pt"))
        with torch.no_grad():
            teacher_out = teacher(**batch, output_hidden_states=True, output_query_key=True)
        with torch.enable_grad():  # EMDLayerLoss accumulates costs for the update only in a grad-enabled forward
            loss(student(**batch, output_hidden_states=True, output_query_key=True), [teacher_out], batch)
    costs = {kind: (loss._cost_sums[kind] / loss._cost_counts[kind]).to(torch.float64) for kind in loss.kinds}
    return costs, origins


def fixed_point(
    costs: dict, depth: int, mode: str, temperature: float | None, smooth: bool, separate: bool, updates: int
) -> dict:
    """Masses and flows after `updates` cost-attention updates on the same costs, from uniform masses."""
    loss = EMDLayerLoss(2, depth, 1, 1, projection=False)
    for _ in range(updates):
        for kind, cost in costs.items():
            loss._cost_sums[kind], loss._cost_counts[kind] = cost.clone(), 1
        masses = loss.update_weights(temperature or 1.0, mode, separate=separate, smooth=smooth)
    flows = {kind: earth_movers_flow(*loss.masses(kind), cost) for kind, cost in costs.items()}
    return {"masses": {name: m.tolist() for name, m in masses.items()},
            "flows": {kind: flow.tolist() for kind, flow in flows.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["stsb", "mrpc", "rte"], choices=["stsb", "mrpc", "rte"])
    parser.add_argument("--strategy", default="uniform", help="which teacher layers the student keeps (as emd_glue.py)")
    parser.add_argument("--examples", type=int, default=256, help="training pairs the costs are averaged over")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--max_length", type=int, default=128)
    parser.add_argument("--updates", type=int, default=300, help="cost-attention updates on the fixed costs")
    parser.add_argument("--name", default="emd_fixed_point")
    parser.add_argument("--append", action="store_true", help="keep the other tasks of results/NAME.json")
    parser.add_argument("--render", action="store_true", help="only rewrite results/NAME.md (and the pages showing it) from results/NAME.json")
    smoke_option(parser, tasks=["mrpc"], examples=8, batch_size=4, updates=3)
    opts = parser.parse_args()
    if opts.render:  # nothing runs: the table again from the JSON
        return render_results(opts.name, RESULTS)
    command = "python benchmarks/emd_fixed_point.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    results, command = start_results(opts.name, opts, command)
    torch.manual_seed(0)
    for task in opts.tasks:
        costs, origins = starting_costs(task, opts.strategy, opts.examples, opts.batch_size, opts.max_length)
        depth = next(iter(costs.values())).size(1)
        rules = [{"mode": mode, "temperature": t, "smooth": smooth, "separate": separate,
                  **fixed_point(costs, depth, mode, t, smooth, separate, opts.updates)}
                 for mode, t, smooth, separate in RULES]
        results["tasks"][task] = {"origins": origins, "costs": {k: c.tolist() for k, c in costs.items()}, "rules": rules}
        write_results(opts.name, results, table("emd_fixed_point", results), command)


if __name__ == "__main__":
    main()
