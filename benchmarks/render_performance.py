"""Tables of the performance benchmarks, from their results JSON: inference_speed, similarity_search,
step_breakdown (with its lockstep part) and step_time.

Each function takes the payload a script saved in benchmarks/results/NAME.json and returns the markdown
the script writes beside it; the scripts call the same functions while they run (on the payload as JSON
reads it back: dictionary keys are strings).
"""

from __future__ import annotations

from types import SimpleNamespace


def _opts(payload: dict) -> SimpleNamespace:
    return SimpleNamespace(**payload["settings"])


# ---------------------------------------------------------------------------- inference_speed
def inference_target(payload: dict) -> str:
    t = payload["target"]
    match = [
        r for r in payload["rows"]
        if (r["teacher"], r["form"], r["layers"], r["batch"], r["seq"]) == (t["teacher"], t["form"], t["layers"], t["batch"], t["seq"])
    ]
    where = f"{t['layers']}-layer MiniLM cross-encoder student vs the 6-layer teacher at batch {t['batch']}, seq {t['seq']}"
    if not match:
        return f"Target (speed-up >= {t['speedup']}x, {where}): not measured, that configuration is not in this grid."
    speedup = match[0]["speedup"]
    verdict = "holds" if speedup >= t["speedup"] else "does not hold"
    return f"Target: {where}: speed-up {speedup:.2f}x (target >= {t['speedup']}x, ideal {match[0]['ideal']:.1f}x): {verdict}."


def inference_rows(rows: list[dict]) -> list[str]:
    lines = [
        "| teacher | form | layers | batch | seq | pairs/s | ms/batch | timed | peak MB | +MB | speed-up | ideal | speed-up/ideal |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['teacher_name']} | {r['form']} | {r['layers']} | {r['batch']} | {r['seq']} | {r['pairs_per_s']:.1f} | "
            f"{r['ms_per_batch']:.1f} | {r['timed_batches']} | {r['peak_mb']:.0f} | {r['activation_mb']:.0f} | "
            f"{r['speedup']:.2f}x | {r['ideal']:.1f}x | {r['speedup_over_ideal']:.2f} |"
        )
    return lines


def inference_speed(payload: dict) -> str:
    opts, rows = _opts(payload), payload["rows"]
    slow = [r for r in rows if r["timed_batches"] < opts.batches]
    memory = "allocator peak (max_memory_allocated)" if payload["device"] == "cuda" else "process peak RSS (VmHWM after clear_refs)"
    lines = [
        f"Device: {payload['device']}. Attention: {', '.join(f'{k} {v}' for k, v in payload['attention'].items())}. fp32, inference_mode, eval.",
        "Inputs: real MRPC + STS-B train pairs, padded/truncated to exactly `seq` tokens per sequence (padding=\"max_length\"). "
        "Cross-encoder: one sequence per pair. Siamese: two sequences per pair (each side alone, two backbone passes) + cosine. "
        "Students keep k teacher layers (uniform strategy); the Siamese reference is the teacher's own bi-encoder form.",
        f"ms/batch: median of {opts.batches} timed batches after 1 warm-up batch; "
        f"configurations whose warm-up batch took > {opts.slow_s:g} s were timed on 1 batch ({len(slow)} of {len(rows)}, see `timed`). "
        f"Peak MB: {memory}; +MB: its increase over the memory in use right before the timed forwards (activations).",
        "Speed-up: pairs/s over the teacher's (same form, batch, seq); ideal: L_T/k.",
        "",
        inference_target(payload),
        "",
        *inference_rows(rows),
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- similarity_search
def duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds:,.0f} s ({seconds / size:.1f} {unit})"
    return f"{seconds:.2f} s"


def similarity_totals(payload: dict) -> list[str]:
    """Per N: the cross-encoder's (extrapolated) total and each bi-encoder's, and their ratio."""
    cross, siamese, ns = payload["cross_encoder"], payload["siamese"], payload["settings"]["ns"]
    lines = [
        "| N | cross-encoder s | " + " | ".join(f"{name} s | cross / {name}" for name in siamese) + " |",
        "| ---: | ---: | " + " | ".join("---: | ---:" for _ in siamese) + " |",
    ]
    for n in ns:
        cross_s = cross["total_s"][str(n)]
        cells = " | ".join(f"{runs[str(n)]['total_s']:.2f} | {cross_s / runs[str(n)]['total_s']:,.0f}x" for runs in siamese.values())
        lines.append(f"| {n:,} | {cross_s:,.0f} | {cells} |")
    return lines


def similarity_search(payload: dict) -> str:
    opts, cross, siamese = _opts(payload), payload["cross_encoder"], payload["siamese"]
    lines = [
        f"Device: {payload['device']}. fp32, inference_mode, eval. Sentences: unique STS-B sentences (train + validation + test), "
        "shuffled (seed 0), the first N. Batch 64, dynamic padding, max_length 128 for both approaches.",
        f"Cross-encoder: MiniLM-L6 (num_labels=1), {opts.pair_sample:,} random pairs of the N={max(opts.ns):,} sentences scored "
        f"in {cross['sample_s']:.2f} s after one warm-up batch = {cross['pairs_per_s']:.1f} pairs/s; "
        "**its times are extrapolated linearly** to N(N-1)/2 pairs (tokenisation included).",
        "Bi-encoder: measured directly. Encode = tokenise + forward of the N sentences (longest first, order restored); "
        f"search = cosine-similarity matrix in blocks of {opts.block} rows, diagonal masked, argmax "
        "(+MB: memory it added).",
        "",
        "| approach | N | forward passes | encode s | search s | search +MB | total |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in opts.ns:
        pairs = n * (n - 1) // 2
        lines.append(f"| MiniLM-L6 cross-encoder (extrapolated) | {n:,} | {pairs:,} pairs | | | | {duration(cross['total_s'][str(n)])} |")
        for name, runs in siamese.items():
            r = runs[str(n)]
            lines.append(
                f"| {name} | {n:,} | {n:,} sentences | {r['encode_s']:.2f} | {r['search_s']:.3f} | {r['search_mb']:.0f} "
                f"| {duration(r['total_s'])} |"
            )
    lines += ["", *similarity_totals(payload)]
    lines += ["", "Most similar pair found:", "", "| model | N | cosine | sentence a | sentence b |", "| --- | ---: | ---: | --- | --- |"]
    for name, runs in siamese.items():
        for n in opts.ns:
            p = runs[str(n)]["pair"]
            lines.append(f"| {name} | {n:,} | {p['cosine']:.4f} | {p['a'].replace('|', '/')} | {p['b'].replace('|', '/')} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- step_breakdown
SHARE_GROUPS = {
    "teacher fwd": lambda p: p == "teacher forward",
    "student fwd": lambda p: p == "student forward",
    "backward": lambda p: p == "backward",
    "loss terms": lambda p: p.startswith("loss: "),
    "collate": lambda p: p == "data (collate)",
    "optimizer": lambda p: p == "optimizer",
    "EMD solve + update": lambda p: "EMD flow solve" in p or p == "cost-attention update",
    "capture": lambda p: p.strip().startswith("capture cost"),
}


def breakdown_shares(breakdown: dict, seqs: list[int] | None = None) -> list[str]:
    """One row per method and length (all lengths, or `seqs`): the step's ms and each group of parts as a share of it."""
    lines = ["| method | seq | step ms | " + " | ".join(SHARE_GROUPS) + " |", "| --- | ---: | ---: |" + " ---: |" * len(SHARE_GROUPS)]
    for seq in seqs or sorted({int(seq) for by_seq in breakdown.values() for seq in by_seq}):
        for method, by_seq in breakdown.items():
            parts = by_seq.get(str(seq))
            if parts is None:
                continue
            total = parts["step (sum)"]
            cells = []
            for keep in SHARE_GROUPS.values():
                chosen = [v for k, v in parts.items() if keep(k)]
                cells.append(f"{100 * sum(chosen) / total:.0f}%" if chosen else "–")
            lines.append(f"| {method} | {seq} | {total:.0f} | " + " | ".join(cells) + " |")
    return lines


def breakdown_parts(breakdown: dict) -> list[str]:
    """Every part of every method's step, per length: ms and share."""
    lines = []
    for method, by_seq in breakdown.items():
        seqs = list(by_seq)
        parts = [p for p in by_seq[seqs[0]] if p != "step (sum)"]
        lines += [f"**{method}**", "", "| part | " + " | ".join(f"seq {s}" for s in seqs) + " |", "| --- |" + " ---: |" * len(seqs)]
        for part in parts:
            cells = []
            for s in seqs:
                value, total = by_seq[s].get(part, 0.0), by_seq[s]["step (sum)"]
                cells.append(f"{value:.1f} ({100 * value / total:.0f}%)")
            lines.append(f"| {part} | " + " | ".join(cells) + " |")
        lines += ["| step | " + " | ".join(f"{by_seq[s]['step (sum)']:.1f}" for s in seqs) + " |", ""]
    return lines


def lockstep(payload: dict) -> list[str]:
    """Part 2: the arms' full `train()` steps in lockstep, and the paired ratios against their targets."""
    opts, rounds = _opts(payload), payload.get("full_steps_round_ms", {})
    return [
        f"### Full `trainer.train()` steps (seq {opts.full_seq}, {opts.rounds} round(s) x {opts.full_steps} steps, all arms in "
        "lockstep, first 3 steps of a round dropped, median ms)",
        "",
        "| arm | ms/step | per round (median) |",
        "| --- | ---: | --- |",
        *(f"| {name} | {ms:.1f} | {', '.join(f'{r:.0f}' for r in rounds.get(name, []))} |"
          for name, ms in payload["full_steps_ms"].items()),
        "",
        "Ratios: the median over steps of arm step i / reference step i (one lockstep rotation apart), with quartiles.",
        "",
        "| ratio | measured | quartiles | steps | target | holds |",
        "| --- | ---: | --- | ---: | ---: | --- |",
        *(f"| {k} | {v['measured']:.3f} | {v['q1']:.3f} - {v['q3']:.3f} | {v['steps']} | <= {v['target']:.2f} | "
          f"{'yes' if v['holds'] else 'no'} |" for k, v in payload["ratios"].items()),
    ]


def emd_growth(payload: dict) -> list[str]:
    """Part 3: EMD cost matrices and flow solves by depth; `auto` is what `score_cost_matrix(method="auto")` picks."""
    return [
        "| L_S x L_T | hidden | seq | batch | cost matrices fwd+bwd, Gram | same, score maps | maps / Gram | auto picks | 2 POT solves |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
        *(f"| {r['student_layers']} x {r['teacher_layers']} | {r['hidden']} | {r['seq']} | {r['batch']} | "
          f"{r['cost_ms']:.1f} | {r['maps_cost_ms']:.1f} | {r['maps_cost_ms'] / r['cost_ms']:.2f} | {r['auto']} | "
          f"{r['solve_ms']:.2f} |" for r in payload["emd_growth"]),
    ]


def step_breakdown(payload: dict) -> str:
    opts = _opts(payload)
    lines = [
        f"MiniLM-L6 teacher (6 layers, eager attention); cross-encoder students keep {opts.student_layers} of its layers; "
        f"Siamese students are the 6-layer MiniLM bi-encoder; batch {opts.batch}; median of {opts.steps} steps after a "
        "warm-up; every sequence truncated to exactly the given length.",
        "",
    ]
    if payload["breakdown"]:
        lines += ["### Shares of the step", "", *breakdown_shares(payload["breakdown"]), ""]
        lines += ["### Breakdown (ms per step, share of the step in brackets)", "", *breakdown_parts(payload["breakdown"])]
    if payload["full_steps_ms"]:
        lines += lockstep(payload)
    if payload["emd_growth"]:
        lines += ["", "### EMD cost matrices and flow solves by depth (synthetic layers, 12 heads, median ms)", "", *emd_growth(payload)]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- step_time
def step_time(payload: dict) -> str:
    opts, median, ratios, targets = _opts(payload), payload["median_ms"], payload["ratios"], payload["targets"]
    return "\n".join([
        f"MiniLM-L6 teacher, {opts.student_layers}-layer student, batch {opts.batch}, max_length {opts.seq}, "
        f"{opts.rounds} rounds x {opts.steps} steps (first 3 of each dropped), median ms per step.",
        "",
        "| arm | median ms/step | steps timed |",
        "| --- | ---: | ---: |",
        *(f"| {arm} | {median[arm]:.1f} | {len(payload['samples_ms'][arm])} |" for arm in median),
        "",
        "| ratio | measured | target | holds |",
        "| --- | ---: | ---: | --- |",
        *(f"| {k} | {v:.3f} | <= {targets[k]:.2f} | {'yes' if v <= targets[k] else 'no'} |" for k, v in ratios.items()),
    ])


# ---------------------------------------------------------------------------- length_buckets
def length_buckets(payload: dict) -> str:
    opts, median = _opts(payload), payload["median_ms"]
    tokens, speed_up = payload["computed_over_real_tokens"], payload["speed_up"]
    return "\n".join([
        f"3-layer MiniLM Siamese student, similarity-structure loss, batch {opts.batch}, max_length {opts.seq}, blocks of 8 "
        f"neighbouring sentences grouped by length (the embedding recipes' batches; first {opts.sentences} of their "
        f"sentences); {opts.rounds} rounds x {opts.steps} steps (first 3 of each dropped), median ms per step.",
        "",
        "| student_length_buckets | median ms/step | speed-up over 1 | computed / real tokens | steps timed |",
        "| ---: | ---: | ---: | ---: | ---: |",
        *(f"| {k} | {median[k]:.1f} | {speed_up[k]:.2f}x | {tokens[k]:.2f} | {len(payload['samples_ms'][k])} |" for k in median),
    ])
