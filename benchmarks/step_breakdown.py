"""Where a distillation step's time goes, per method, and what each method adds to the step.

Part 1, breakdown: for every method, the trainer's own pieces (collator, `_teacher_outputs`, the
student forward, each loss component, backward, optimizer, callbacks) are run one after the other
on the same batches and timed separately; for BERT-EMD the POT flow solve is timed inside the
loss, and for attention-reading methods the student forward is also timed without the query/key
capture, so the capture's cost is a difference measured on the same batch. Reported as ms and as
fractions of the step, at several sequence lengths (texts are made long enough that truncation
fixes the length).

Part 2, full steps: `DistillationTrainer.train()` steps of each arm, all arms training at once in
lockstep (`lockstep.py`: one optimizer step each in turn, timed by a callback, the next batch's
loading included), on fresh trainers every round. Ratios are paired step by step (step i of two
arms ran seconds apart, which cancels the machine's drift), median and quartiles. Ratios: BERT-EMD over the same loss with the uniform
(TinyBERT) mapping (target <= 1.05), VIRT over the same Siamese student with logit KD only
(target <= 1.10), the KD teacher reading either the pair truncated to the sequence length or,
like VIRT's, the joint view of both whole sides (up to twice as long): the second ratio is what
the VIRT loss itself adds.

Part 3, EMD growth: the two L_S x L_T cost matrices (forward + backward) and the flow solves on
synthetic hidden states and queries/keys (`score_cost_matrix`), for several depths.

Usage: python benchmarks/step_breakdown.py [--seq_lens 64 128 256 --steps 8 --full_steps 20 --rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import shlex
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field

import torch
from common import RESULTS, SCRATCH, load_task, minilm_dir, smoke_option, timing_arguments, write_results
from lockstep import paired_step_ratio, train_in_lockstep
from render import render_results, table

import hf_distill.losses.emd as emd_module
from hf_distill import CrossEncoderModel, SiameseModel
from hf_distill.batch_keys import student_view
from hf_distill.losses.emd import EMDLayerLoss, earth_movers_flow, layer_cost_matrix, score_cost_matrix, score_cost_method
from hf_distill.teachers import add_teacher_logits
from hf_distill.trainer import DistillationTrainer

COLUMNS = ["sentence1", "sentence2"]


@dataclass
class Method:
    """One arm: the student, whether the teacher runs online, and the loss weights."""

    name: str
    siamese: bool
    online_teacher: bool
    precomputed_logits: bool = False
    weights: dict = field(default_factory=dict)
    # Siamese only: the teacher reads VIRT's joint view (both sides whole, built from the student's
    # token ids) instead of the pair truncated to the sequence length
    joint_teacher_view: bool = False


METHODS = [
    Method("fine-tuning (cross-encoder, no teacher)", False, False, weights=dict(alpha=0.0)),
    Method("KD, precomputed logits (cross-encoder)", False, False, True, dict(alpha=0.5)),
    Method("KD, online teacher (cross-encoder)", False, True, weights=dict(alpha=0.5)),
    Method(
        "Simplified TinyBERT (uniform mapping)", False, True,
        weights=dict(alpha=0.5, hidden_weight=1.0, attention_weight=1.0, embedding_weight=1.0),
    ),
    Method("BERT-EMD", False, True, weights=dict(alpha=0.5, emd_weight=1.0, embedding_weight=1.0)),
    Method("Siamese KD, online teacher", True, True, weights=dict(alpha=0.5)),
    Method("Siamese KD, online teacher on VIRT's joint view", True, True, weights=dict(alpha=0.5), joint_teacher_view=True),
    Method("VIRT (Siamese)", True, True, weights=dict(alpha=0.5, virt_weight=1.0)),
    Method("DvBERT (Siamese, precomputed logits, annealing)", True, False, True, dict(annealing="linear")),
]
RATIOS = {  # name -> (arm, reference arm, target)
    "EMD overhead: BERT-EMD / Simplified TinyBERT (uniform)": (
        "BERT-EMD", "Simplified TinyBERT (uniform mapping)", 1.05),
    "VIRT overhead: VIRT / Siamese KD (online teacher)": ("VIRT (Siamese)", "Siamese KD, online teacher", 1.10),
    "VIRT loss overhead: VIRT / Siamese KD (teacher on the same joint view)": (
        "VIRT (Siamese)", "Siamese KD, online teacher on VIRT's joint view", 1.10),
}


def long_texts(data, rows: int, seq: int):
    """MRPC pairs whose sides are made just long enough (consecutive sentences joined, ~20 tokens each)
    that truncation to `seq` tokens sets the length of every pair and of every side."""
    s1, s2 = list(data["sentence1"]), list(data["sentence2"])
    n, per_side = len(s1), seq // 16 + 1
    return data.select(range(rows)).map(
        lambda _, i: {c: " ".join(src[(i + j) % n] for j in range(per_side)) for c, src in (("sentence1", s1), ("sentence2", s2))},
        with_indices=True,
    )


def build_trainer(method: Method, teacher, cross_init, siamese_init, train, seq: int, batch: int, steps: int):
    student = copy.deepcopy(siamese_init if method.siamese else cross_init)
    args = timing_arguments(str(SCRATCH / "hf_distill_step_breakdown"), steps, batch, seq, text_columns=COLUMNS, **method.weights)
    trainer = DistillationTrainer(
        model=student,
        args=args,
        teachers=[teacher] if method.online_teacher else None,
        train_dataset=train,
    )
    if method.joint_teacher_view:  # the collator VIRT gets, for a KD-only arm: same teacher input, no VIRT loss
        trainer.data_collator = dataclasses.replace(trainer.data_collator, virt_alignment=True)
    return trainer


class FlowTimer:
    """Times every POT solve made by EMDLayerLoss while active (patches the module's `earth_movers_flow`)."""

    def __init__(self):
        self.seconds = 0.0

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return earth_movers_flow(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    @contextlib.contextmanager
    def active(self):
        emd_module.earth_movers_flow = self
        try:
            yield self
        finally:
            emd_module.earth_movers_flow = earth_movers_flow


def timed(times: dict, name: str, fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    times[name] += time.perf_counter() - start
    return result


def breakdown(trainer: DistillationTrainer, steps: int) -> dict[str, float]:
    """Median ms of each piece of the step over `steps` batches (after one warm-up step)."""
    model = trainer.model
    model.train()
    optimizer = trainer.create_optimizer()
    loader = iter(trainer.get_train_dataloader())
    requires = trainer.requires
    flags = dict(
        output_hidden_states="hidden_states" in requires,
        output_attentions="attentions" in requires,
        output_query_key="query_key" in requires,
    )
    captures = any(flags.values())
    cost_callbacks = [c for c in trainer.callback_handler.callbacks if hasattr(c, "components")]
    samples: dict[str, list[float]] = defaultdict(list)
    for step in range(steps + 1):
        times: dict[str, float] = defaultdict(float)
        flow_timer = FlowTimer()
        start = time.perf_counter()
        batch = timed(times, "data (collate)", next, loader)
        inputs = trainer._prepare_inputs(batch)
        student_inputs = student_view(inputs)
        teacher_outs = timed(times, "teacher forward", trainer._teacher_outputs, inputs)
        student_out = timed(times, "student forward", model, **student_inputs, **flags)
        terms = {}
        with flow_timer.active():
            for component in trainer.loss_components:
                name = f"loss: {type(component).__name__}"
                terms.update(timed(times, name, component, student_out, teacher_outs, inputs))
        if any(isinstance(c, EMDLayerLoss) for c in trainer.loss_components):
            times["  of which EMD flow solve (POT)"] = flow_timer.seconds
        weights = trainer.term_weights_now(has_teachers=bool(teacher_outs))
        loss = sum(weights[name] * value for name, value in terms.items() if name in weights)
        timed(times, "backward", loss.backward)
        timed(times, "optimizer", lambda: (optimizer.step(), optimizer.zero_grad(), trainer.loss_components.zero_grad()))
        for callback in cost_callbacks:
            timed(times, "cost-attention update", callback.on_step_end, trainer.args, trainer.state, trainer.control)
        times["step (sum)"] = time.perf_counter() - start
        if captures:  # the same forward without the hidden/attention capture: its cost is the difference
            first = time.perf_counter()
            with torch.no_grad():
                model(**student_inputs)
            second = time.perf_counter()
            with torch.no_grad():
                model(**student_inputs, **flags)
            third = time.perf_counter()
            times["  capture cost (no-grad forward with - without)"] = (third - second) - (second - first)
        del loss, student_out, teacher_outs, terms
        if step == 0:
            continue  # warm-up
        for name, seconds in times.items():
            samples[name].append(seconds * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def full_steps(methods, teacher, cross_init, siamese_init, train_for, seq, batch, steps, rounds) -> dict[str, list[list[float]]]:
    """ms per `trainer.train()` step of each arm (step + next batch's loading), one list per round; in every round
    all arms train in lockstep (`lockstep.train_in_lockstep`: one step each in turn), on fresh trainers."""
    samples: dict[str, list[list[float]]] = defaultdict(list)
    for _ in range(rounds):
        trainers = [build_trainer(m, teacher, cross_init, siamese_init, train_for(m), seq, batch, steps) for m in methods]
        for method, times in zip(methods, train_in_lockstep(trainers)):
            samples[method.name].append([t * 1000 for t in times])
    return samples


def paired_ratio(arm_rounds: list[list[float]], reference_rounds: list[list[float]], warmup: int = 3) -> dict:
    """The median over steps of arm step i / reference step i (one lockstep rotation apart), pooled over rounds.

    The machine's speed drifts within minutes; two arms' step i ran seconds apart, so their ratio
    cancels the drift. The first `warmup` steps of each round are dropped (trainers still setting up).
    """
    arm = [t for times in arm_rounds for t in times[warmup:]]
    reference = [t for times in reference_rounds for t in times[warmup:]]
    return paired_step_ratio(arm, reference, warmup=0)


def emd_growth(depths, seq: int, batch: int, heads: int, repeats: int) -> list[dict]:
    """Cost matrices (forward + backward; attention costs from queries and keys) and POT solves for synthetic layers."""
    rows = []
    generator = torch.Generator().manual_seed(0)
    for student_layers, teacher_layers, dim in depths:
        mask = torch.ones(batch, seq)
        width = dim // heads

        def states(layers: int, *shape: int, grad: bool = False) -> torch.Tensor:
            return torch.randn(layers, *shape, generator=generator).requires_grad_(grad)

        hidden_s, hidden_t = states(student_layers, batch, seq, dim, grad=True), states(teacher_layers, batch, seq, dim)
        qs, ks = (states(student_layers, batch, heads, seq, width, grad=True) for _ in range(2))
        qt, kt = (states(teacher_layers, batch, heads, seq, width) for _ in range(2))
        loss = EMDLayerLoss(student_layers, teacher_layers, dim, dim)
        timings: dict[str, list[float]] = defaultdict(list)
        for _ in range(repeats + 1):
            for method in ("gram", "maps"):  # the attention costs from Gram matrices, and from materialised score maps
                start = time.perf_counter()
                hidden_cost = layer_cost_matrix(hidden_s, hidden_t, mask)
                attention_cost = score_cost_matrix(qs, ks, qt, kt, mask, method=method)
                (hidden_cost.sum() + attention_cost.sum()).backward()
                timings[method].append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            for kind, cost in (("hidden", hidden_cost), ("attention", attention_cost)):
                earth_movers_flow(*loss.masses(kind), cost)
            timings["solve"].append((time.perf_counter() - start) * 1000)
        rows.append(dict(
            student_layers=student_layers, teacher_layers=teacher_layers, hidden=dim, seq=seq, batch=batch, heads=heads,
            cost_ms=statistics.median(timings["gram"][1:]), maps_cost_ms=statistics.median(timings["maps"][1:]),
            solve_ms=statistics.median(timings["solve"][1:]),
        ))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq_lens", nargs="+", type=int, default=[64, 128, 256])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8, help="breakdown: timed steps per method and length")
    parser.add_argument("--full_seq", type=int, default=128, help="full steps: sequence length")
    parser.add_argument("--full_steps", type=int, default=20, help="full steps: steps per arm and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--student_layers", type=int, default=2)
    parser.add_argument("--methods", nargs="+", default=None, help="only the methods whose name contains one of these")
    parser.add_argument("--skip_breakdown", action="store_true", help="no part 1 (breakdown)")
    parser.add_argument("--skip_full", action="store_true", help="no part 2 (full-step comparison)")
    parser.add_argument("--skip_growth", action="store_true", help="no part 3 (EMD cost growth)")
    parser.add_argument("--growth_seq_lens", nargs="+", type=int, default=[64, 128, 256], help="part 3: sequence lengths")
    parser.add_argument("--name", default="step_breakdown")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite results/NAME.md (and the pages showing it) from results/NAME.json; "
                             "the column of what `score_cost_matrix` picks follows the current code")
    smoke_option(parser, seq_lens=[16], batch=4, steps=1, full_seq=16, full_steps=5, rounds=1, growth_seq_lens=[8])
    opts = parser.parse_args()
    if opts.render:  # nothing runs; which way `score_cost_matrix` picks follows the current code
        path = RESULTS / f"{opts.name}.json"
        saved = json.loads(path.read_text())
        pick_cost_methods(saved.get("emd_growth", []))
        path.write_text(json.dumps(saved, indent=2) + "\n")
        return render_results(opts.name, RESULTS)
    command = "python benchmarks/step_breakdown.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    torch.manual_seed(0)

    rows = max(opts.steps + 2, opts.full_steps + 2) * opts.batch
    mrpc = load_task("mrpc", splits=("train",))["train"].shuffle(seed=0)
    data = {seq: long_texts(mrpc, rows, seq) for seq in {*opts.seq_lens, opts.full_seq}}
    teacher = CrossEncoderModel.from_backbone(minilm_dir(), num_labels=2, attn_implementation="eager").eval()
    cross_init = CrossEncoderModel.from_teacher(teacher, opts.student_layers, "uniform")
    siamese_init = SiameseModel.from_backbone(minilm_dir(), pooling="mean", num_labels=2, attn_implementation="eager")
    with_logits = {}

    def train_for(method: Method, seq: int):
        if not method.precomputed_logits:
            return data[seq]
        if seq not in with_logits:
            with_logits[seq] = add_teacher_logits(data[seq], teacher, COLUMNS, max_length=seq)
        return with_logits[seq]

    results: dict = {"settings": vars(opts), "breakdown": {}, "full_steps_ms": {}, "ratios": {}, "emd_growth": []}
    methods = [m for m in METHODS if not opts.methods or any(part in m.name for part in opts.methods)]
    for seq in [] if opts.skip_breakdown else opts.seq_lens:
        for method in methods:
            trainer = build_trainer(method, teacher, cross_init, siamese_init, train_for(method, seq), seq, opts.batch, opts.steps)
            results["breakdown"].setdefault(method.name, {})[seq] = breakdown(trainer, opts.steps)
            print(f"[breakdown seq {seq}] {method.name}: {results['breakdown'][method.name][seq]}", flush=True)

    if not opts.skip_full:
        compared = [m for m in methods if m.name in {n for pair in RATIOS.values() for n in pair[:2]}]
        samples = full_steps(
            compared, teacher, cross_init, siamese_init, lambda m: train_for(m, opts.full_seq),
            opts.full_seq, opts.batch, opts.full_steps, opts.rounds,
        )
        results["full_steps_ms"] = {name: statistics.median([t for r in v for t in r[3:]]) for name, v in samples.items()}
        results["full_steps_round_ms"] = {name: [statistics.median(r[3:]) for r in v] for name, v in samples.items()}
        results["full_steps_samples_ms"] = dict(samples)  # every step, in lockstep order, per round
        for label, (arm, reference, target) in RATIOS.items():
            if arm not in samples or reference not in samples:
                continue
            ratio = paired_ratio(samples[arm], samples[reference])
            results["ratios"][label] = {**ratio, "target": target, "holds": ratio["measured"] <= target}

    if not opts.skip_growth:
        depths = [(2, 6, 384), (3, 6, 384), (4, 6, 384), (6, 6, 384), (4, 12, 768), (6, 12, 768)]
        for seq in opts.growth_seq_lens:
            results["emd_growth"] += emd_growth(depths, seq, opts.batch, 12, repeats=3)
    pick_cost_methods(results["emd_growth"])
    write_results(opts.name, results, table("step_breakdown", results), command)


def pick_cost_methods(rows: list[dict]) -> None:
    """Each EMD growth row's `auto`: the way `score_cost_matrix(method="auto")` computes the attention costs there."""
    for r in rows:
        r["auto"] = score_cost_method(r["student_layers"], r["teacher_layers"], r["seq"], r["hidden"] // r["heads"])


if __name__ == "__main__":
    main()
