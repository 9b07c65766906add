"""Every BERT-EMD comparison in one table: EMD minus uniform mapping, per task and on the three-task average.

Reads the `benchmarks/results/emd_glue*.json` files that `emd_glue.py` wrote (nothing is trained or
timed here) and writes `results/emd_summary.{json,md}`. One row per results file and EMD arm: the
student's start (`--strategy`), budget (epochs, one or two stages), beta, seeds; per task the EMD arm's
mean minus the uniform arm's mean (x100) and on how many seeds EMD >= uniform (paired by seed); and,
where the file holds all three tasks, the average of the tasks' main metric for both arms, which is
what the issue's target compares (EMD >= uniform). On MRPC and RTE it also counts the runs whose
accuracy is the validation set's majority-class share: students that predict one class throughout,
whose ties say nothing about the mapping.

Usage: python benchmarks/emd_summary.py             (python benchmarks/emd_summary.py --render: the .md from the JSON)
(smoke: reads what `emd_glue.py --smoke` wrote into the same $HF_DISTILL_SMOKE_DIR)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from functools import cache
from pathlib import Path

from common import DATA, GLUE_TASKS, RESULTS, SMOKE, smoke_option
from render import render_results
from render_glue import EMD_SUMMARY_TASKS, emd_summary

TASKS = {task: GLUE_TASKS[task][5] for task in EMD_SUMMARY_TASKS}  # the tasks' main metrics
STARTS = {"uniform": "layers 3, 6", "first": "layers 1, 2"}
COMMAND = "python benchmarks/emd_summary.py"


@cache
def majority_share(task: str) -> float | None:
    """Share of the most frequent label in the task's validation file (None for regression or without the data)."""
    path = DATA / GLUE_TASKS[task][0] / "validation.jsonl"
    if TASKS[task] != "accuracy" or not path.exists():
        return None
    labels = Counter(json.loads(line)["label"] for line in path.read_text().splitlines() if line.strip())
    return max(labels.values()) / sum(labels.values())


def by_seed(runs: list[dict], metric: str) -> dict[int, float]:
    return {run["seed"]: 100 * run[metric] for run in runs}


def compare(task: str, task_results: dict, emd_arm: str, metric: str) -> dict | None:
    """EMD minus uniform on one task: means, difference, and the seeds where EMD >= uniform."""
    arms = task_results["arms"]
    if emd_arm not in arms or "uniform" not in arms:
        return None
    emd, uniform = by_seed(arms[emd_arm], metric), by_seed(arms["uniform"], metric)
    paired = sorted(set(emd) & set(uniform))
    majority = majority_share(task)
    constant = {
        side: (None if majority is None else sum(abs(run[metric] - majority) < 1e-9 for run in arms[arm]))
        for side, arm in (("emd", emd_arm), ("uniform", "uniform"))
    }
    return {
        "emd": statistics.fmean(emd.values()),
        "uniform": statistics.fmean(uniform.values()),
        "difference": statistics.fmean(emd.values()) - statistics.fmean(uniform.values()),
        "per_seed": [emd[s] - uniform[s] for s in paired],
        "seeds_emd_at_least_uniform": sum(emd[s] >= uniform[s] for s in paired),
        "seeds": len(paired),
        "majority_class_runs": constant,
    }


def configuration(settings: dict) -> dict:
    stages = settings.get("stages", 1)
    return {
        "start": STARTS.get(settings["strategy"], settings["strategy"]),
        "budget": f"{settings['epochs']:g} epoch{'' if settings['epochs'] == 1 else 's'}" + (" x 2 stages" if stages == 2 else ""),
        "beta": "-" if stages == 2 else f"{settings['beta']:g}",  # stage 1 weighs the layer terms 1
    }


def summarise(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    tasks = data["tasks"]
    emd_arms = sorted({arm for t in tasks.values() for arm in t["arms"] if arm.startswith("EMD")})
    rows = []
    for emd_arm in emd_arms:
        per_task = {task: compare(task, tasks[task], emd_arm, metric) for task, metric in TASKS.items() if task in tasks}
        per_task = {task: c for task, c in per_task.items() if c is not None}
        row = {"file": path.stem, "arm": emd_arm, **configuration(data["settings"]), "tasks": per_task}
        if set(per_task) == set(TASKS):
            row["average"] = {
                side: statistics.fmean(c[side] for c in per_task.values()) for side in ("emd", "uniform")
            }
            row["target_holds"] = row["average"]["emd"] >= row["average"]["uniform"]
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--render", action="store_true", help="only rewrite results/emd_summary.md (and the pages showing it) from its JSON")
    smoke_option(parser)
    if parser.parse_args().render:
        return render_results("emd_summary", RESULTS)
    files = sorted(RESULTS.glob("emd_glue*.json"))
    if SMOKE and not files:
        sys.exit(f"no emd_glue*.json in {RESULTS}: run emd_glue.py --smoke with the same HF_DISTILL_SMOKE_DIR first")
    rows = [row for path in files for row in summarise(path)]
    payload = {"command": COMMAND, "rows": rows}
    (RESULTS / "emd_summary.json").write_text(json.dumps(payload, indent=2) + "\n")
    text = emd_summary(payload)
    (RESULTS / "emd_summary.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
