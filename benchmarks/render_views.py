"""Views of the results for README.md and docs/: short tables and per-seed comparisons, rendered from the JSON.

A block `<!-- rendered: VIEW:ARGUMENT -->` is `VIEWS[VIEW](ARGUMENT)` (see `render.py`). Nothing here is
measured or typed: every number is read from benchmarks/results/*.json. Links are written relative to
benchmarks/results/ (render.relink moves them to the page).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable

from embedding_names import STUDENTS, recipe_model
from frontier_render import RANDOM_BATCHES, arm_label
from glue_tasks import GLUE_TASKS
from ranking_groups_render import GROUPED, QUALITY, training_line
from render import (
    DOCS,
    NO_RESULTS,
    RESULTS,
    WHOLE_PAGES,
    has_rows,
    load,
    mean_std,
    results_markdown,
)
from render_performance import (
    breakdown_shares,
    emd_growth,
    inference_rows,
    inference_target,
    lockstep,
)
from render_ranking import quality_cell, speed_up_cell

TASK_NAMES = {"mrpc": "MRPC", "stsb": "STS-B", "rte": "RTE", "snli": "SNLI"}
METRIC_NAMES = {"accuracy": "accuracy", "spearman": "Spearman", "f1": "F1"}
STB = "Simplified TinyBERT, attention x0.05"  # the scaled arm every re-ranking comparison has


def _cell(values: list[float]) -> str:
    mean, std = mean_std(values)
    return f"{mean:.2f} ± {std:.2f}" if len(values) > 1 else f"{mean:.2f}"


def _epochs(epochs: float) -> str:
    return f"{epochs:g} epoch" + ("" if epochs == 1 else "s")


def _signed(values: list[float]) -> str:
    return ", ".join(f"{round(v, 2) + 0.0:+.2f}" for v in values)


def _per_seed(runs: list[dict], key: str, scale: float = 100.0) -> dict[int, float]:
    return {run["seed"]: scale * run[key] for run in runs if key in run}


def _paired(arm: dict[int, float], reference: dict[int, float]) -> list[float]:
    """arm minus reference, seed by seed, over the seeds both have."""
    return [arm[seed] - reference[seed] for seed in sorted(set(arm) & set(reference))]


def _seeds(runs: list[dict]) -> str:
    seeds = sorted(run["seed"] for run in runs)
    return ", ".join(map(str, seeds))


def task_metric(task: str, metric: str | None = None) -> str:
    return f"{TASK_NAMES[task]} {METRIC_NAMES[metric or GLUE_TASKS[task][5]]}"


# ---------------------------------------------------------------------------- speed
def speed_up(form: str, layers: int, batch: int = 32, seq: int = 128) -> str:
    """A MiniLM student's speed-up over its 6-layer teacher in one form ("cross", "siamese"), from inference_speed."""
    path = RESULTS / "inference_speed.json"
    if not path.exists():
        return "–"
    rows = [r for r in load("inference_speed")["rows"]
            if (r["teacher"], r["form"], r["layers"], r["batch"], r["seq"]) == ("minilm", form, layers, batch, seq)]
    return f"{rows[0]['speedup']:.2f}x" if rows else "–"


# ---------------------------------------------------------------------------- BERT-EMD
def emd(stem: str) -> str:
    """An emd_glue results file in short: the arms' means per task, the average, EMD minus uniform per seed."""
    payload = load(stem)
    tasks = payload["tasks"]
    arms = list(dict.fromkeys(arm for t in tasks.values() for arm in t["arms"]))
    emd_arms = [arm for arm in arms if arm.startswith("EMD") and all("uniform" in t["arms"] for t in tasks.values())]
    lines = ["| task | teacher | " + " | ".join(arms) + "".join(f" | {arm} - uniform, per seed" for arm in emd_arms) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in arms) + " | ---:" * len(emd_arms) + " |"]
    averages: dict[str, list[float]] = {}
    for task, t in tasks.items():
        metric = GLUE_TASKS[task][5]
        cells = []
        for arm in arms:
            runs = t["arms"].get(arm, [])
            values = list(_per_seed(runs, metric).values())
            cells.append(_cell(values) if values else "–")
            if values:
                averages.setdefault(arm, []).append(statistics.fmean(values))
        diffs = [_signed(_paired(_per_seed(t["arms"][arm], metric), _per_seed(t["arms"]["uniform"], metric)))
                 for arm in emd_arms]
        lines.append(f"| {task_metric(task)} | {100 * t['teacher'][metric]:.2f} | " + " | ".join(cells + diffs) + " |")
    if len(tasks) > 1:
        means = [f"{statistics.fmean(averages[arm]):.2f}" if len(averages.get(arm, [])) == len(tasks) else "–" for arm in arms]
        lines.append("| average | – | " + " | ".join(means + ["–"] * len(emd_arms)) + " |")
    lines += ["", f"Full table: [{stem}.md]({stem}.md). Command: `{payload['command']}`"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- re-ranking
def ranking_paired(stem: str) -> str:
    """A ranking results file's arms against KD (and KD against no KD), seed by seed, on both collections."""
    payload = load(stem)
    keys = (("wikiqa_test_mrr@10", "WikiQA MRR@10"), ("dl19_ndcg@10", "DL19 NDCG@10"))
    lines = ["| layers | comparison | " + " | ".join(f"{title} per seed | mean" for _, title in keys) + " |",
             "| ---: | --- | " + " | ".join("--- | ---:" for _ in keys) + " |"]
    for layers, arms in payload.get("students", {}).items():
        pairs = [(arm, "KD") for arm in arms if arm not in ("KD", "no KD")]
        pairs += [("KD", "no KD")] if "no KD" in arms else []
        for arm, reference in pairs:
            if arm not in arms or reference not in arms:
                continue
            cells = []
            for key, _ in keys:
                diffs = _paired(_per_seed(arms[arm], key), _per_seed(arms[reference], key))
                cells += [_signed(diffs), f"{statistics.fmean(diffs):+.2f}" if diffs else "–"]
            lines.append(f"| {layers} | {arm} - {reference} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- DvBERT
def dvbert_paired(stem: str) -> str:
    """Teacher annealing against the baseline and against loss weighting, seed by seed, per task and K."""
    payload = load(stem)
    lines = ["| task | K | metric | annealing - SBERT baseline, per seed | mean | annealing - weighting, per seed | mean |",
             "| --- | ---: | --- | --- | ---: | --- | ---: |"]
    for task, t in payload["tasks"].items():
        arms = t["arms"]
        metrics = [("stsb_test_spearman_cosine", 1.0, "STS-B Spearman")] + ([("accuracy", 100.0, "SNLI accuracy")] if task == "snli" else [])
        for k in range(1, len(t["teachers"]) + 1):
            annealing, weighting = f"DvBERT annealing K={k}", f"DvBERT weighting K={k}"
            if annealing not in arms or "SBERT baseline" not in arms:
                continue
            for key, scale, title in metrics:
                ours = _per_seed(arms[annealing], key, scale)
                gain = _paired(ours, _per_seed(arms["SBERT baseline"], key, scale))
                margin = _paired(ours, _per_seed(arms[weighting], key, scale)) if weighting in arms else []
                lines.append(f"| {task} | {k} | {title} | {_signed(gain)} | {statistics.fmean(gain):+.2f} | "
                             f"{_signed(margin) or '–'} | {f'{statistics.fmean(margin):+.2f}' if margin else '–'} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- performance
def inference(argument: str) -> str:
    """inference_speed's rows at one batch size and length ("32x128"), with the target line."""
    batch, seq = (int(x) for x in argument.split("x"))
    payload = load("inference_speed")
    rows = [r for r in payload["rows"] if r["batch"] == batch and r["seq"] == seq]
    return "\n".join([inference_target(payload), "", *inference_rows(rows), "",
                      f"Every batch size and length: [inference_speed.md](inference_speed.md). Command: `{payload['command']}`"])


def shares(stem: str) -> str:
    payload = load(stem)
    return "\n".join([*breakdown_shares(payload["breakdown"]), "", f"Command: `{payload['command']}`"])


def lockstep_view(stem: str) -> str:
    return "\n".join(lockstep(load(stem))[2:])  # without its heading: the page has its own


def emd_growth_view(stem: str) -> str:
    return "\n".join(emd_growth(load(stem)))


def performance_targets(_: str) -> str:
    """Every performance target with its measured value and the results file it comes from."""
    lines = ["| target | measured | holds | from |", "| --- | ---: | --- | --- |"]
    step_time = load("step_time")
    names = {"b/a": "distillation from precomputed logits / plain fine-tuning step",
             "c/(a+d)": "online teacher / (student step + teacher forward)"}
    for key, value in step_time["ratios"].items():
        target = step_time["targets"][key]
        lines.append(f"| {names.get(key, key)} <= {target:.2f} | {value:.3f} | {'yes' if value <= target else 'no'} | "
                     "[step_time](step_time.md) |")
    for name, ratio in load("step_breakdown")["ratios"].items():
        lines.append(f"| {name} <= {ratio['target']:.2f} (paired steps) | {ratio['measured']:.3f} | "
                     f"{'yes' if ratio['holds'] else 'no'} | [step_breakdown](step_breakdown.md) |")
    speed = load("inference_speed")
    t = speed["target"]
    rows = [r for r in speed["rows"] if (r["teacher"], r["form"], r["layers"], r["batch"], r["seq"])
            == (t["teacher"], t["form"], t["layers"], t["batch"], t["seq"])]
    if rows:
        lines.append(f"| {t['layers']}-layer re-ranking throughput >= {t['speedup']}x the 6-layer teacher's (batch {t['batch']}, "
                     f"seq {t['seq']}) | {rows[0]['speedup']:.2f}x | {'yes' if rows[0]['speedup'] >= t['speedup'] else 'no'} | "
                     "[inference_speed](inference_speed.md) |")
    return "\n".join(lines)


def full(stem: str) -> str:
    """A results file's whole markdown (as a plain block NAME renders it)."""
    return results_markdown(load(stem))


# ---------------------------------------------------------------------------- README summaries
def summary_kd() -> list[str]:
    parts = [load(stem) for stem in ("kd_glue", "kd_glue_stsb") if (RESULTS / f"{stem}.json").exists()]
    first = parts[0]["settings"]
    lines = [f"{first['student_layers']}-layer students cut from a fine-tuned 6-layer MiniLM cross-encoder, "
             f"{_epochs(first['epochs'])}, seeds {', '.join(map(str, first['seeds']))}; validation split, x100; "
             "speed-up: batch 32, 128 tokens.", "",
             "| task | teacher (6 layers) | student, no KD | student, best KD arm | speed-up |", "| --- | ---: | ---: | ---: | ---: |"]
    for payload in parts:
        layers = payload["settings"]["student_layers"]
        for task, t in payload["tasks"].items():
            metric = GLUE_TASKS[task][5]
            means = {arm: mean_std([100 * r[metric] for r in runs]) for arm, runs in t["arms"].items()}
            best = max((arm for arm in means if arm != "no KD"), key=lambda arm: means[arm][0])
            lines.append(f"| {task_metric(task)} | {100 * t['teacher'][metric]:.2f} | {_cell([100 * r[metric] for r in t['arms']['no KD']])} | "
                         f"{_cell([100 * r[metric] for r in t['arms'][best]])} ({best.removeprefix('KD ')}) | {speed_up('cross', layers)} |")
    return lines


def summary_dvbert() -> list[str]:
    payload = load("dvbert_k2")
    s = payload["settings"]
    lines = [f"Siamese students keeping {s['student_layers']} of all-MiniLM-L6-v2's 6 layers, {_epochs(s['epochs'])}, "
             f"teachers {' + '.join(s['teachers'])} cross-encoders (K = {len(s['teachers'])}); test splits, x100; speed-up "
             "over the 6-layer bi-encoder, batch 32, 128 tokens.", "",
             "| task (train -> eval) | metric | teachers | SBERT baseline | DvBERT weighting | DvBERT annealing | speed-up |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    k = len(s["teachers"])
    for task, t in payload["tasks"].items():
        where = f"{TASK_NAMES[task]} ({t['splits']['train']} -> {t['splits']['eval']})"
        metrics = [("accuracy", 100.0, "SNLI accuracy"), ("stsb_test_spearman_cosine", 1.0, "STS-B Spearman (transfer)")] \
            if task == "snli" else [("stsb_test_spearman_cosine", 1.0, "STS-B Spearman")]
        own = "accuracy" if task == "snli" else "spearman"
        for i, (key, scale, title) in enumerate(metrics):
            teachers = ", ".join(f"{name} {100 * m[own]:.2f}" for name, m in t["teachers"].items()) if i == 0 else "–"
            cells = [_cell(list(_per_seed(t["arms"][arm], key, scale).values())) if arm in t["arms"] else "–"
                     for arm in ("SBERT baseline", f"DvBERT weighting K={k}", f"DvBERT annealing K={k}")]
            lines.append(f"| {where} | {title} | {teachers} | " + " | ".join(cells) + f" | {speed_up('siamese', s['student_layers'])} |")
    return lines


EMD_STARTS = (("emd_glue_beta001_e3", "layers 3, 6"), ("emd_glue_first_beta001_e3", "layers 1, 2"))


def summary_bert_emd() -> list[str]:
    """Uniform mapping against BERT-EMD for the two ways of cutting the student, at the preset's beta and budget."""
    files = [(load(stem), start) for stem, start in EMD_STARTS]
    s = files[0][0]["settings"]
    lines = [f"{s['student_layers']}-layer cross-encoders cut from teacher layers 3 and 6 (`uniform`, the preset's) or 1 and 2 "
             f"(`first`), {_epochs(s['epochs'])}, beta {s['beta']:g}, seeds {', '.join(map(str, s['seeds']))}; validation "
             "split, x100; speed-up: batch 32, 128 tokens.", "",
             "| task | teacher (6 layers) | " + " | ".join(f"{start}: uniform mapping | {start}: BERT-EMD" for _, start in files)
             + " | speed-up |",
             "| --- | ---: | " + " | ".join("---: | ---:" for _ in files) + " | ---: |"]
    averages: dict[tuple[str, str], list[float]] = {}
    for task in files[0][0]["tasks"]:
        metric = GLUE_TASKS[task][5]
        teachers = list(dict.fromkeys(f"{100 * payload['tasks'][task]['teacher'][metric]:.2f}" for payload, _ in files))
        cells = []
        for payload, start in files:
            for arm in ("uniform", "EMD smooth"):
                values = [100 * r[metric] for r in payload["tasks"][task]["arms"][arm]]
                averages.setdefault((start, arm), []).append(statistics.fmean(values))
                cells.append(_cell(values))
        lines.append(f"| {task_metric(task)} | {' / '.join(teachers)} | {' | '.join(cells)} | {speed_up('cross', s['student_layers'])} |")
    lines.append("| average | – | " + " | ".join(f"{statistics.fmean(v):.2f}" for v in averages.values()) + " | – |")
    return lines


def summary_virt() -> list[str]:
    payload = load("virt_glue")
    s = payload["settings"]
    lines = [f"Siamese students keeping {s['student_layers']} of all-MiniLM-L6-v2's 6 layers, {_epochs(s['epochs'])} on "
             f"{s['max_train']:,} pairs, VIRT alpha {s['virt_weight']:g}, seeds {', '.join(map(str, s['seeds']))}; accuracy x100; "
             "speed-up over the 6-layer bi-encoder, batch 32, 128 tokens.", "",
             "| task (train -> eval) | teacher cross-encoder | Siamese baseline | + VIRT loss | speed-up |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for task, t in payload["tasks"].items():
        cells = [_cell([100 * r["accuracy"] for r in t["arms"][arm]]) for arm in ("Siamese baseline", "+ VIRT loss")]
        lines.append(f"| {TASK_NAMES[task]} ({t['splits']['train']} -> {t['splits']['eval']}) | {100 * t['teacher']['accuracy']:.2f} | "
                     + " | ".join(cells) + f" | {speed_up('siamese', s['student_layers'])} |")
    return lines


def summary_simplified_tinybert() -> list[str]:
    payload = load("ranking_bienc_e1")
    s = payload["settings"]
    lines = [f"Students made of the re-ranking teacher's first k layers, {_epochs(s['epochs'])}, seeds "
             f"{', '.join(map(str, s['seeds']))}; WikiQA test and TREC DL 2019 (zero-shot), x100; speed-up: the same DL19 "
             "pairs re-ranked in turns with the teacher.", "",
             "| model | WikiQA MRR@10 | DL19 NDCG@10 | speed-up |", "| --- | ---: | ---: | ---: |"]
    rows = [(name, [metrics], None) for name, metrics in payload["references"].items()]
    rows.append(("teacher cross-encoder (6 layers)", [payload["teacher"]], None))
    for layers, arms in sorted(payload["students"].items()):
        rows += [(f"{layers}-layer student: {arm}", arms[arm], int(layers)) for arm in ("no KD", "KD", STB) if arm in arms]
    for name, runs, layers in rows:
        ratio = payload.get("throughput", {}).get(str(layers), {}).get("speedup") if layers else None
        speed = speed_up_cell(ratio, layers).split(" (")[0]
        lines.append(f"| {name} | {quality_cell(runs, 'wikiqa_test_mrr@10')} | {quality_cell(runs, 'dl19_ndcg@10')} | {speed} |")
    return lines


def summary_frontier() -> list[str]:
    """Per task and depth: the teacher, the no-KD student, the best distilled arm (mean over its seeds), the
    measured speed-up, how many runs; and the pictures. Nothing until the benchmark has rows."""
    path = RESULTS / "frontier.json"
    rows = json.loads(path.read_text())["rows"] if path.exists() else []
    if not rows:
        return ["No finished run yet: [its page](../../docs/results/frontier.md) gives the command."]
    lines = ["Cross-encoder students cut from a fixed 6-layer MiniLM teacher, trained to convergence (early stopping) "
             "within one step budget per arm; test splits, x100, mean ± std over seeds; speed-up measured in the same "
             "run (batch 32, 128 tokens).", "",
             "| task | teacher | layers | no KD | best distilled arm | % of teacher | speed-up | runs |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    cells: dict[tuple, dict[str, list[dict]]] = {}
    for row in rows:
        cells.setdefault((row["task"], row["metric"], row["student_layers"]), {}).setdefault(arm_label(row), []).append(row)
    for (task, metric, layers), arms in sorted(cells.items(), key=lambda item: (item[0][0], -item[0][2])):
        teacher = statistics.fmean(r["teacher_value"] for runs in arms.values() for r in runs)
        distilled = {arm: statistics.fmean(r["value"] for r in runs) for arm, runs in arms.items() if not arm.startswith("no KD")}
        best = max(distilled, key=distilled.get) if distilled else None
        plain_arm = next((arm for arm in ("no KD", "no KD" + RANDOM_BATCHES) if arm in arms), None)
        plain = f"{_cell([r['value'] for r in arms[plain_arm]])}{plain_arm[5:]}" if plain_arm else "not run"
        best_cell = f"{_cell([r['value'] for r in arms[best]])} ({best.replace(RANDOM_BATCHES, ', random batches')})" if best else "not run"
        share = f"{100 * distilled[best] / teacher:.1f}%" if best else "—"
        speed = statistics.fmean(r["speed_up"] for runs in arms.values() for r in runs)
        runs = sum(len(runs) for runs in arms.values())
        lines.append(f"| {task.upper()} {metric} | {teacher:.2f} | {layers} | {plain} | {best_cell} | {share} | "
                     f"{speed:.2f}x | {runs} |")
    tasks = sorted({row["task"] for row in rows})
    lines += ["", " ".join(f"![{task}](../../docs/results/frontier_{task}.png)" for task in tasks)]
    return lines


def _no_results(page: str) -> list[str]:
    """One line for a whole page's summary while its benchmark has no rows: the command, and the page."""
    whole = WHOLE_PAGES[DOCS / "results" / f"{page}.md"]
    return [f"{NO_RESULTS}: `{whole.command}` writes them ([its page](../../docs/results/{page}.md) gives the full command)."]


def _rows(stem: str) -> list[dict]:
    path = RESULTS / f"{stem}.json"
    return json.loads(path.read_text()).get("rows", []) if path.exists() else []


def _speed(runs: list[dict], key: str) -> str:
    values = [r[key] for r in runs if key in r]
    return f"{_cell(values)}x" if values else "–"


def _same_teacher(rows: list[dict]) -> tuple[list[dict], str | None]:
    """The rows of the latest teacher's weights (BM25 depends on none), and a note naming them when rows of others
    were left out."""
    teachers = [r for r in rows if r.get("kind") == "teacher"]
    if not teachers:
        return rows, None
    sha = teachers[-1].get("teacher_sha256")
    kept = [r for r in rows if r.get("teacher_sha256") == sha or (r.get("kind") == "reference" and "speed_up" not in r)]
    name = f"{sha[:12]}…" if sha else "not recorded"
    return kept, (f" Rows of teacher weights {name} only (the page has every row)." if len(kept) < len(rows) else None)


def _kd_and_best_grouped(students: dict[tuple, list[dict]]) -> dict[tuple, list[dict]]:
    """Per cross-encoder depth, pointwise KD and the grouped loss with the best mean over the three collections (of
    its seed means); every Siamese arm. Keeps the README's summary short: the page has every arm."""
    def mean_quality(runs: list[dict]) -> float:
        return statistics.mean(statistics.mean(r[key] for r in runs) for key, _ in QUALITY)

    kept = {key: runs for key, runs in students.items() if key[1] is None or key[0] not in GROUPED}
    for layers in {layers for _, layers in students if layers is not None}:
        grouped = [key for key in students if key[1] == layers and key[0] in GROUPED]
        if grouped:
            best = max(grouped, key=lambda key: mean_quality(students[key]))
            kept[best] = students[best]
    return kept


def summary_ranking_groups() -> list[str]:
    """The teacher, BM25, the zero-shot MiniLM bi-encoder and, per depth, pointwise KD and the best grouped loss
    (`_kd_and_best_grouped`): mean ± std over seeds of the three collections' headline metrics and of the speed-up.
    One line until the benchmark has rows."""
    rows, note = _same_teacher(_rows("ranking_groups"))
    if not rows:
        return _no_results("ranking")
    lines = [f"Re-ranking students of a cross-encoder teacher; training data: {training_line(rows)}, pointwise (KD) or "
             "over query groups; WikiQA test, TrecQA test and TREC DL 2019 (both zero-shot), x100, mean ± std over seeds; "
             "speed-up: the same DL19 pairs re-ranked in turns with the teacher. Per depth: pointwise KD and the best "
             "grouped loss by the mean of the three (the page has every arm)." + (note or ""), "",
             "| model | seeds | " + " | ".join(title for _, title in QUALITY) + " | speed-up |",
             "| --- | ---: | " + " | ".join("---:" for _ in QUALITY) + " | ---: |"]
    named = [("teacher", [r for r in rows if r.get("kind") == "teacher"]),
             ("BM25", [r for r in rows if r["model"] == "BM25"]),
             ("bi-encoder minilm (zero-shot)", [r for r in rows if r["model"] == "bi-encoder minilm (zero-shot)"])]
    students: dict[tuple, list[dict]] = {}
    for row in rows:
        if row.get("kind") == "student":
            students.setdefault((row["arm"], row["layers"]), []).append(row)
    shown = _kd_and_best_grouped(students)
    for (arm, layers), runs in sorted(shown.items(), key=lambda item: (item[0][1] is None, -(item[0][1] or 0), item[0][0])):
        named.append((f"{layers or 6}-layer student: {arm}", runs))
    for name, runs in named:
        if runs:
            name = runs[0]["model"] if name == "teacher" else name
            lines.append(f"| {name} | {len(runs)} | " + " | ".join(quality_cell(runs, key) for key, _ in QUALITY)
                         + f" | {_speed(runs, 'speed_up')} |")
    return lines


def summary_embedding() -> list[str]:
    """The teacher and all-MiniLM-L6-v2 zero-shot, and every (student, loss) under its recipe's settings as they are
    now (`recipe_model`) and as they were first ("distilled l3"): mean ± std over seeds of STS-B test Spearman,
    WikiQA MRR@10 and the speed-up. Rows of other settings ("distilled l3, lr 3e-05") and those scored with the
    projection kept are on the page only. One line until the benchmark has rows."""
    rows = _rows("embedding")
    if not rows:
        return _no_results("embedding")
    lines = [("all-mpnet-base-v2 distilled into MiniLM students from sentences alone (`recipes/embedding/`); STS-B test "
              "Spearman and WikiQA test MRR@10 by cosine, x100, mean ± std over seeds; speed-up: encoding speed over the "
              "teacher's, timed in the same process."), "",
             "| model | layers | loss | seeds | STS-B test Spearman | WikiQA test MRR@10 | speed-up |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    recipe_models = {"all-MiniLM-L6-v2", *(name for s in STUDENTS for name in (recipe_model(s), f"distilled {s}"))}
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["model"].startswith("teacher") or row["model"] in recipe_models:
            groups.setdefault((row["model"], row.get("loss")), []).append(row)
    order = sorted(groups, key=lambda key: (not key[0].startswith("teacher"), key[0].startswith("distilled")))
    for model, loss in order:
        runs = groups[(model, loss)]
        lines.append(f"| {model} | {runs[0]['layers']} | {loss or 'zero-shot'} | {len(runs)} | "
                     f"{_cell([r['stsb_spearman'] for r in runs])} | {_cell([r['wikiqa_mrr@10'] for r in runs])} | "
                     f"{_speed(runs, 'speedup')} |")
    return lines


PAGE_TITLES = {"frontier": "quality against speed-up", "ranking": "re-ranking over query groups", "deployment": "ONNX and int8",
               "labelling": "labelling throughput", "embedding": "embedding teachers", "quickstart": "the quickstart, end to end"}
# whole pages with a summary of their own (page stem -> summary), which says itself that the benchmark has not run
OWN_SUMMARY = {"frontier": "frontier", "ranking": "ranking_groups", "embedding": "embedding"}


def summary_pending() -> list[str]:
    """The result pages whose benchmark has not written its JSON yet, but for those with a summary of their own."""
    pending = [page for page, whole in WHOLE_PAGES.items()
               if not has_rows(whole.results) and OWN_SUMMARY.get(page.stem) not in SUMMARIES]
    if not pending:
        return ["Every benchmark without a summary above has results."]
    links = [f"[{PAGE_TITLES.get(page.stem, page.stem)}](../../docs/results/{page.name})" for page in pending]
    return ["Not run yet (each page gives its command): " + ", ".join(links) + "."]


SUMMARIES: dict[str, Callable[[], list[str]]] = {
    "kd": summary_kd, "dvbert": summary_dvbert, "bert_emd": summary_bert_emd, "virt": summary_virt,
    "simplified_tinybert": summary_simplified_tinybert, "frontier": summary_frontier,
    "ranking_groups": summary_ranking_groups, "embedding": summary_embedding, "pending": summary_pending,
}


def summary(method: str) -> str:
    return "\n".join(SUMMARIES[method]())


VIEWS: dict[str, Callable[[str], str]] = {
    "full": full, "emd": emd, "ranking_paired": ranking_paired, "dvbert_paired": dvbert_paired, "inference": inference,
    "shares": shares, "lockstep": lockstep_view, "emd_growth": emd_growth_view, "performance_targets": performance_targets,
    "summary": summary,
}
