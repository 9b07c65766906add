"""Inference speed of k-layer students against their teachers, as cross-encoders and as Siamese bi-encoders.

For each teacher (MiniLM 6L-384, MPNet 12L-768) and its students keeping k of its layers
(uniform strategy, `CrossEncoderModel.from_teacher`), in both forms:

- cross-encoder: the pair is read jointly, one sequence of `seq` tokens per pair;
- Siamese: each side is read alone (two sequences of `seq` tokens, two backbone passes), then cosine;
  the teacher's own bi-encoder form is the reference for the Siamese students.

Inputs are real MRPC + STS-B pairs padded/truncated to exactly `seq` tokens (padding="max_length"),
so the length is controlled. Reported per (teacher, form, layers, batch, seq): pairs/s and ms per
batch (median of the timed batches after one warm-up batch), peak memory (process peak RSS on CPU,
allocator peak on CUDA) and its increase over the memory in use before the timed forwards
(activations), and each student's speed-up over its teacher next to the ideal layer ratio L_T/k.
Configurations whose warm-up batch takes longer than --slow_s are timed on a single batch.

Usage: python benchmarks/inference_speed.py [--teachers minilm mpnet --ks 2 3 4 --batch_sizes 32 64 --seq_lens 64 128 256 --batches 3]
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
import time

import torch
from common import RESULTS, PeakMemory, device, minilm_dir, mpnet_dir, siamese_form, smoke_option, text_pairs, timed, write_results
from render import render_results, table

from hf_distill import CrossEncoderModel
from hf_distill.speed import pair_batches

TEACHERS = {"minilm": ("MiniLM-L6-384", minilm_dir), "mpnet": ("MPNet-L12-768", mpnet_dir)}
TARGET = {"teacher": "minilm", "form": "cross", "layers": 2, "batch": 32, "seq": 128, "speedup": 2.7}


def measure(model, inputs: dict[str, torch.Tensor], batches: int, slow_s: float, on: torch.device) -> dict:
    """One warm-up forward, then `batches` timed forwards (1 when the warm-up took > slow_s) under a peak-memory probe."""
    with torch.inference_mode():
        _, warm_s = timed(lambda: model(**inputs))
        count = 1 if warm_s > slow_s else batches
        with PeakMemory(on) as memory:
            times = [timed(lambda: model(**inputs))[1] for _ in range(count)]
    batch = inputs["attention_mask" if "attention_mask" in inputs else "attention_mask_a"].size(0)
    median_s = statistics.median(times)
    return {
        "pairs_per_s": batch / median_s,
        "ms_per_batch": median_s * 1000,
        "timed_batches": count,
        "warmup_ms": warm_s * 1000,
        "peak_mb": memory.peak_mb,
        "activation_mb": memory.increase_mb,
        "times_ms": [t * 1000 for t in times],
    }


def add_speedups(rows: list[dict]) -> None:
    """Each row's pairs/s over its teacher's (same teacher, form, batch, seq) and the ideal ratio L_T/k."""
    reference = {(r["teacher"], r["form"], r["batch"], r["seq"]): r for r in rows if r["layers"] == r["teacher_layers"]}
    for row in rows:
        ref = reference[(row["teacher"], row["form"], row["batch"], row["seq"])]
        row["speedup"] = row["pairs_per_s"] / ref["pairs_per_s"]
        row["ideal"] = row["teacher_layers"] / row["layers"]
        row["speedup_over_ideal"] = row["speedup"] / row["ideal"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teachers", nargs="+", choices=sorted(TEACHERS), default=["minilm", "mpnet"])
    parser.add_argument("--ks", nargs="+", type=int, default=[2, 3, 4], help="layers kept by the students")
    parser.add_argument("--batch_sizes", nargs="+", type=int, default=[32, 64])
    parser.add_argument("--seq_lens", nargs="+", type=int, default=[64, 128, 256])
    parser.add_argument("--batches", type=int, default=3, help="timed batches per configuration, after 1 warm-up")
    parser.add_argument("--slow_s", type=float, default=5.0, help="time 1 batch only where the warm-up batch takes longer")
    parser.add_argument("--name", default="inference_speed")
    parser.add_argument("--render", action="store_true", help="only rewrite results/NAME.md (and the pages showing it) from results/NAME.json")
    smoke_option(parser, ks=[2], batch_sizes=[4], seq_lens=[16], batches=2)
    opts = parser.parse_args()
    if opts.render:  # nothing runs: the table again from the JSON
        return render_results(opts.name, RESULTS)
    command = "python benchmarks/inference_speed.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    torch.manual_seed(0)
    on = device()

    pairs = text_pairs(("mrpc", "stsb"))
    random.Random(0).shuffle(pairs)
    rows: list[dict] = []
    attention: dict[str, str] = {}
    start = time.perf_counter()
    for key in opts.teachers:
        name, path = TEACHERS[key]
        teacher = CrossEncoderModel.from_backbone(path(), num_labels=1).eval().to(on)
        depth = teacher.config.encoder.num_hidden_layers
        attention[name] = teacher.config.encoder._attn_implementation
        for layers in [depth, *sorted(set(opts.ks) - {depth}, reverse=True)]:
            cross = teacher if layers == depth else CrossEncoderModel.from_teacher(teacher, layers, "uniform").eval()
            for form, model in (("cross", cross), ("siamese", siamese_form(cross))):
                for batch in opts.batch_sizes:
                    for seq in opts.seq_lens:
                        # one batch of exactly `seq` tokens per sequence, as `model` reads it (the joint pair, or
                        # each side alone for the Siamese form): the shared meter's tokenisation (hf_distill.speed)
                        (inputs,) = pair_batches(model, pairs[:batch], batch, seq, teacher.tokenizer, padding="max_length")
                        row = {"teacher": key, "teacher_name": name, "teacher_layers": depth, "form": form,
                               "layers": layers, "batch": batch, "seq": seq}
                        row.update(measure(model, inputs, opts.batches, opts.slow_s, on))
                        rows.append(row)
                        print(f"[{time.perf_counter() - start:6.0f}s] {name} {form} {layers}L batch {batch} seq {seq}: "
                              f"{row['pairs_per_s']:.1f} pairs/s, {row['timed_batches']} timed", file=sys.stderr, flush=True)
            del cross
        del teacher

    add_speedups(rows)
    order = {key: i for i, key in enumerate(opts.teachers)}
    rows.sort(key=lambda r: (order[r["teacher"]], r["form"], r["batch"], r["seq"], -r["layers"]))
    payload = {"rows": rows, "target": TARGET, "device": on.type, "attention": attention,
               "wall_s": time.perf_counter() - start, "settings": vars(opts)}
    write_results(opts.name, payload, table("inference_speed", payload), command)


if __name__ == "__main__":
    main()
