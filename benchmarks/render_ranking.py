"""Tables of the re-ranking benchmarks, from their results JSON: ranking (Simplified TinyBERT on WikiQA and
TREC DL 2019) and term_gradients.

Each function takes the payload a script saved in benchmarks/results/NAME.json and returns the markdown
the script writes beside it; the scripts call the same functions while they run.
"""

from __future__ import annotations

from types import SimpleNamespace

from render import mean_std

# (collection, metric) of every quality column, in table order
COLUMNS = [("wikiqa_test", "mrr@10"), ("wikiqa_test", "ndcg@10"), ("wikiqa_test", "map"), ("dl19", "ndcg@10"), ("dl19", "mrr@10")]
TEACHER_LAYERS = 6


def quality_cell(runs: list[dict], key: str) -> str:
    """Mean ± std over the runs of `key` x100 ("–" when no run has it; no std for one run)."""
    values = [100 * r[key] for r in runs if key in r]
    if not values:
        return "–"
    mean, std = mean_std(values)
    return f"{mean:.2f} ± {std:.2f}" if len(values) > 1 else f"{mean:.2f}"


def speed_up_cell(ratio: float | None, layers: int | None) -> str:
    """"2.73x (0.91 of 3x)": the speed-up and its share of the ideal layer ratio."""
    if not ratio or not layers:
        return "–"
    ideal = TEACHER_LAYERS / layers
    return f"{ratio:.2f}x ({ratio / ideal:.2f} of {ideal:g}x)"


def _row(name: str, runs: list[dict], teacher_speed: float | None, layers: int | None, paired: dict | None = None) -> str:
    cells = [quality_cell(runs, f"{collection}_{metric}") for collection, metric in COLUMNS]
    speeds = [r["dl19_pairs_per_second"] for r in runs if "dl19_pairs_per_second" in r]
    speed = mean_std(speeds)[0] if speeds else None
    ratio = None
    if paired and layers:  # timed in turns with the teacher (ranking.paired_throughput)
        ratio = paired["speedup"]
    elif speed and teacher_speed and layers:
        ratio = speed / teacher_speed
    return f"| {name} | {' | '.join(cells)} | {f'{speed:.0f}' if speed else '–'} | {speed_up_cell(ratio, layers)} |"


def _description(opts: SimpleNamespace, payload: dict) -> str:
    throughput = payload.get("throughput")
    return (
        f"Training pairs: {payload['train_pairs']} ({' + '.join(opts.train_sets)}; DL20 relevance >= 2 as positive). "
        f"Teacher: all-MiniLM-L6-v2 as a 2-class cross-encoder, {opts.teacher_epochs:g} epochs, lr {opts.teacher_lr:g}, "
        + ("trained on the labels. " if opts.teacher_targets == "labels" else
           f"trained on the labels plus the zero-shot bi-encoder's per-query standardised scores (scale {opts.teacher_soft_scale:g}). ")
        + f"Students: the teacher's first k layers, {opts.epochs:g} epoch(s), lr {opts.lr:g}, batch 16, T {opts.temperature:g}; "
        f"seeds {opts.seeds}; max_length {opts.max_length}. WikiQA test: 243 questions with a correct answer; "
        "DL19: 43 queries, BM25 top-100 (zero-shot: no DL19 query in training). Mean ± std over seeds, x100. "
        "Throughput: pairs/s while re-ranking DL19 (4,300 pairs, batch 32); "
        + (f"speed-up: the teacher and each student re-ranking the same {throughput['pairs']} DL19 pairs "
           f"(batch {throughput['batch_size']}, tokenisation included) in turns, median of "
           f"{throughput['rounds']} per-round ratios (teacher {throughput['teacher_pairs_per_second']:.0f} pairs/s), "
           if throughput else "speed-up: the student's pairs/s over the teacher's, ")
        + "and its share of the ideal layer ratio."
    )


# options that files written before they existed did not record, at the values those runs had
RANKING_DEFAULTS = {"teacher_targets": "labels", "teacher_soft_scale": 1.0}


def ranking(payload: dict) -> str:
    """References, teacher, and every student arm: mean ± std over seeds (x100), throughput, speed-up; loss terms."""
    lines = [
        _description(SimpleNamespace(**{**RANKING_DEFAULTS, **payload["settings"]}), payload),
        "",
        "| model | WikiQA MRR@10 | WikiQA NDCG@10 | WikiQA MAP | DL19 NDCG@10 | DL19 MRR@10 | pairs/s | speed-up |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, metrics in payload.get("references", {}).items():
        lines.append(_row(name, [metrics], None, None))
    teacher = payload.get("teacher")
    teacher_speed = teacher.get("dl19_pairs_per_second") if teacher else None
    if teacher:
        lines.append(_row("teacher cross-encoder (6 layers)", [teacher], None, None))
    for earlier in payload.get("earlier_teachers", []):  # the same recipe trained before: the older runs' teacher
        lines.append(_row("teacher cross-encoder (6 layers), earlier training", [earlier], None, None))
    students = payload.get("students", {})
    for layers, arms in students.items():
        for arm, runs in arms.items():
            lines.append(_row(f"{layers}-layer student: {arm}", runs, teacher_speed, int(layers),
                              payload.get("throughput", {}).get(str(layers))))
    term_lines = []
    for layers, arms in students.items():
        for arm, runs in arms.items():
            first, last = runs[0].get("first_terms", {}), runs[0].get("terms", {})
            falls = ", ".join(f"{k} {first[k]:.4g} -> {last[k]:.4g}" for k in first if k in last)
            if falls:
                term_lines.append(f"| {layers} | {arm} | {falls} |")
    if term_lines:
        lines += ["", "Loss terms, first and last logged value (seed of the first run):", "",
                  "| layers | arm | terms |", "| --- | --- | --- |", *term_lines]
    return "\n".join(lines)


def term_gradients(payload: dict) -> str:
    weights = payload["settings"]["attention_weights"]
    lines = [
        f"Student: the ranking teacher's first k layers; {payload['batches']} training batches of 16 pairs "
        f"(max_length {payload['max_length']}, shuffle seed 0); every term unweighted; gradient norms over the "
        "student's parameters, mean over batches.",
        "",
        "| layers | term | value | grad norm | grad norm / hard's |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for layers, terms in payload["students"].items():
        for name, t in terms.items():
            lines.append(f"| {layers} | {name} | {t['value']:.4g} | {t['grad_norm']:.4g} ± {t['grad_norm_std']:.2g} | "
                         f"{t['grad_ratio_to_hard']:.3g} |")
    lines += ["", "Attention term's gradient norm over the hard term's, at each weight:", "",
              "| layers | " + " | ".join(f"x{w:g}" for w in weights) + " |",
              "| --- | " + " | ".join("---:" for _ in weights) + " |"]
    for layers, terms in payload["students"].items():
        ratio = terms["attention"]["grad_ratio_to_hard"]
        lines.append(f"| {layers} | " + " | ".join(f"{w * ratio:.3g}" for w in weights) + " |")
    return "\n".join(lines)
