"""Render benchmarks/results/frontier.json: a table per task and a picture of quality against speed-up.

Used by `python benchmarks/frontier.py --render`; the test suite re-renders and compares with the
committed docs/results/frontier.md, so no number in it is typed by hand.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from render import mean_std

ARM_ORDER = ("no KD", "KD", "KD + aug", "layer + aug", "EMD + aug")
# Rows trained on random batches (before the frontier grouped batches by length) stay apart, labelled so.
RANDOM_BATCHES = " (random batches)"


def row_setting(row: dict, key: str):
    """A training setting of a row; rows without `sampler` predate the field and trained on random batches."""
    return row.get(key, "random" if key == "sampler" else None)


def arm_label(row: dict) -> str:
    """The row's arm, marked when its batches were random."""
    return row["arm"] + (RANDOM_BATCHES if row_setting(row, "sampler") == "random" else "")


def labels() -> list[str]:
    """Every arm label in table order."""
    return [label for arm in ARM_ORDER for label in (arm, arm + RANDOM_BATCHES)]
METRIC_NAMES = {"f1": "F1", "spearman": "Spearman", "accuracy": "accuracy"}


def cells(rows: list[dict]) -> dict:
    """(task, layers, arm) -> the runs of that cell, in seed order."""
    grouped: dict = defaultdict(list)
    for row in sorted(rows, key=lambda r: r["seed"]):
        grouped[(row["task"], row["student_layers"], arm_label(row))].append(row)
    return grouped


def _spread(values: list[float]) -> str:
    mean, std = mean_std(values)
    return f"{mean:.2f} ± {std:.2f}" if len(values) > 1 else f"{mean:.2f} (one seed)"


def table(rows: list[dict]) -> str:
    """Markdown: one table per task, one line per (depth, arm), values x100 on the test split."""
    grouped = cells(rows)
    lines = []
    for task in dict.fromkeys(r["task"] for r in rows):
        task_rows = [r for r in rows if r["task"] == task]
        metric = METRIC_NAMES.get(task_rows[0]["metric"], task_rows[0]["metric"])
        teachers = sorted({(r["teacher_sha256"][:12], round(r["teacher_value"], 2)) for r in task_rows})
        stops = {r.get("stop_metric") for r in task_rows} - {None, task_rows[0]["metric"]}
        stop = METRIC_NAMES.get(next(iter(stops)), next(iter(stops))) if len(stops) == 1 else None
        lines += [
            f"### {task.upper()} ({metric}, test split)",
            "",
            "Teacher (6-layer MiniLM cross-encoder): " + "; ".join(f"{value:.2f} (sha256 {sha}…)" for sha, value in teachers)
            + _teacher_stop_text(task_rows, stop) + ".",
            "",
            f"| layers | arm | {metric} mean ± std | % of teacher | seeds | speed-up | steps (budget) |"
            + (f" test {stop} (stopped on validation {stop}) |" if stop else ""),
            "| ---: | --- | ---: | ---: | ---: | ---: | --- |" + (" ---: |" if stop else ""),
        ]
        for layers in sorted({r["student_layers"] for r in task_rows}, reverse=True):
            for arm in labels():
                runs = grouped.get((task, layers, arm))
                if not runs:
                    continue
                mean, std = mean_std([r["value"] for r in runs])
                teacher = statistics.fmean(r["teacher_value"] for r in runs)
                share = 100 * mean / teacher if teacher else float("nan")
                speed = statistics.fmean(r["speed_up"] for r in runs)
                steps = ", ".join(f"{r['steps']} ({r['budget_steps']})" for r in runs)
                extra = f" {_spread([r.get('test_stop_metric', float('nan')) for r in runs])} |" if stop else ""
                lines.append(f"| {layers} | {arm} | {_spread([r['value'] for r in runs])} | {share:.1f}% | {len(runs)} | "
                             f"{speed:.2f}x | {steps} |{extra}")
        lines.append("")
    return "\n".join(lines)


def _teacher_stop_text(rows: list[dict], stop: str | None) -> str:
    """", test accuracy 80.93" when the students stop on another metric and the rows recorded the teacher's."""
    values = sorted({round(r["teacher_test_stop_metric"], 2) for r in rows if r.get("teacher_test_stop_metric") is not None})
    return f", test {stop} " + " / ".join(f"{v:.2f}" for v in values) if stop and values else ""


def picture(rows: list[dict], task: str, path: Path) -> None:
    """Test value against measured speed-up, one marker per (depth, arm) cell, the teacher as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    task_rows = [r for r in rows if r["task"] == task]
    figure, axes = plt.subplots(figsize=(6, 4))
    teacher = statistics.fmean(r["teacher_value"] for r in task_rows)
    axes.axhline(teacher, color="black", linestyle="--", label=f"teacher (6 layers) {teacher:.1f}")
    markers = dict(zip(ARM_ORDER, "osD^v"))
    for arm in labels():
        points = [(k[1], runs) for k, runs in cells(task_rows).items() if k[2] == arm]
        if not points:
            continue
        xs = [statistics.fmean(r["speed_up"] for r in runs) for _, runs in points]
        ys = [statistics.fmean(r["value"] for r in runs) for _, runs in points]
        hollow = dict(facecolors="none", edgecolors="grey") if arm.endswith(RANDOM_BATCHES) else {}
        axes.scatter(xs, ys, marker=markers[arm.removesuffix(RANDOM_BATCHES)], label=arm, **hollow)
        for (layers, _), x, y in zip(points, xs, ys):
            axes.annotate(f"{layers}L", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    axes.set_xlabel("speed-up over the teacher (batch 32, seq 128, same run)")
    axes.set_ylabel(f"{METRIC_NAMES.get(task_rows[0]['metric'])} x100 (test)")
    axes.set_title(f"{task.upper()}: students of 1-3 layers")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def markdown(payload: dict) -> str:
    rows = payload["rows"]
    if not rows:
        return "# The quality-versus-speed frontier\n\nNo run has finished yet.\n"
    commands = "\n".join(f"    {c}" for c in payload.get("commands", []))
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    pictures = "\n".join(f"![{t}](frontier_{t}.png)" for t in tasks)
    return (
        "# The quality-versus-speed frontier\n\n"
        "Rendered by `python benchmarks/frontier.py --render` from `benchmarks/results/frontier.json` "
        f"({len(rows)} runs). Produced by:\n\n{commands}\n\n"
        "Students are cut from their teacher (`from_teacher`, strategy `uniform`), trained with early stopping on the "
        "validation split (best checkpoint kept) within the same step budget for every arm, and scored on the test "
        "split; speed-ups are measured in the same run as the row. Students train on batches of similar length "
        "(`train_sampling_strategy: group_by_length`); arms marked *(random batches)* ran before that and are kept "
        "apart.\n\n" + arms_line(rows) + "\n\n" + table(rows) + "\n" + pictures + "\n"
    )


def arms_line(rows: list[dict]) -> str:
    """What each arm trains on, with the augmentation factor of each task as its rows record it."""
    factors = {}
    for row in rows:
        if row.get("augment_n") is not None:
            factors.setdefault(row["task"], set()).add(row["augment_n"])
    named = ", ".join(f"{task} {'/'.join(str(n) for n in sorted(ns))}" for task, ns in factors.items())
    return ("Arms: *no KD* (gold pairs, hard labels); *KD* (gold pairs with the teacher's logits, alpha 0.5); "
            "*KD + aug* (the gold pairs and TinyBERT-style augmented pairs, every pair with the teacher's logits; "
            "augmented pairs learn from the teacher alone); *layer + aug* (KD + aug and uniform-mapping layer losses: "
            "hidden, attention, embedding); *EMD + aug* (KD + aug and BERT-EMD's layer losses). Augmented pairs per "
            f"gold pair: {named or 'none yet'}.")


def render(payload: dict, folder: Path) -> str:
    """Write frontier.md and frontier_{task}.png into `folder`; returns the markdown."""
    folder.mkdir(parents=True, exist_ok=True)
    text = markdown(payload)
    (folder / "frontier.md").write_text(text)
    for task in dict.fromkeys(r["task"] for r in payload["rows"]):
        picture(payload["rows"], task, folder / f"frontier_{task}.png")
    return text
