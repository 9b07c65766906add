"""Render benchmarks/results/ranking_groups.json: the table of docs/results/ranking.md, the #42 targets checked
against it, and one picture of quality against speed-up. No number in the page is typed by hand."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

from render_ranking import quality_cell

# (key in a row, column title): the three collections every model is scored on, x100
QUALITY = (("wikiqa_test_mrr@10", "WikiQA MRR@10"), ("trecqa_test_mrr@10", "TrecQA MRR@10"), ("dl19_ndcg@10", "DL19 NDCG@10"))
# dense retrieval of a bi-encoder over each TREC DL pool: (key in a row, column title), x100
DENSE = tuple((f"{year}_dense_{metric}", f"{year.upper()} {title}") for year in ("dl19", "dl20")
              for metric, title in (("recall@100", "R@100"), ("mrr@10", "MRR@10"), ("ndcg@10", "NDCG@10")))
GROUPED = ("Margin-MSE", "listwise KL", "Margin-MSE + LCE", "listwise KL + LCE")  # every grouped-loss arm


def cells(rows: list[dict]) -> dict[str, list[dict]]:
    """model name -> its runs (seeds), in the order the rows first appear."""
    grouped: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        grouped[row["model"]].append(row)
    return grouped


def value(runs: list[dict], key: str) -> float | None:
    """Mean over the runs of `key` x100, None when no run has it."""
    values = [100 * r[key] for r in runs if key in r]
    return statistics.fmean(values) if values else None


def overall(runs: list[dict]) -> float | None:
    """Mean of the three collections' headline metrics (x100)."""
    parts = [value(runs, key) for key, _ in QUALITY]
    return statistics.fmean(parts) if all(p is not None for p in parts) else None


def table(rows: list[dict]) -> list[str]:
    teacher = next((runs for runs in cells(rows).values() if runs[0]["kind"] == "teacher"), None)
    lines = [
        "| model | seeds | " + " | ".join(t for _, t in QUALITY) + " | mean | % of teacher | speed-up |",
        "| --- | ---: | " + " | ".join("---:" for _ in QUALITY) + " | ---: | ---: | ---: |",
    ]
    reference = overall(teacher) if teacher else None
    for name, runs in cells(rows).items():
        mean = overall(runs)
        speeds = [r["speed_up"] for r in runs if "speed_up" in r]
        cells_ = [name, str(len(runs)), *(quality_cell(runs, k) for k, _ in QUALITY),
                  f"{mean:.2f}" if mean is not None else "–",
                  f"{100 * mean / reference:.1f}%" if mean is not None and reference else "–",
                  f"{statistics.fmean(speeds):.2f}x" if speeds else "–"]
        lines.append("| " + " | ".join(cells_) + " |")
    return lines


def dense_table(rows: list[dict]) -> list[str]:
    """Dense retrieval of the bi-encoders (the models whose rows have it): the whole DL19 and DL20 pools by cosine."""
    lines = ["| model | seeds | " + " | ".join(t for _, t in DENSE) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in DENSE) + " |"]
    for name, runs in cells(rows).items():
        if any(key in run for run in runs for key, _ in DENSE):
            lines.append(f"| {name} | {len(runs)} | " + " | ".join(quality_cell(runs, k) for k, _ in DENSE) + " |")
    return lines


def _student(rows: list[dict], arm: str, layers: int | None) -> list[dict]:
    return [r for r in rows if r.get("arm") == arm and r.get("layers") == layers]


def _check(label: str, got: float | None, need: float, unit: str = "", strict: bool = False) -> str:
    """One target: met (got >= need, or > need when `strict`: "beats"), or missed with its distance."""
    if got is None:
        return f"- {label}: not measured"
    met = got > need if strict else got >= need
    verdict = "met" if met else f"missed by {need - got:.2f}{unit}" + (" (a tie does not beat)" if got == need else "")
    return f"- {label}: {got:.2f}{unit} against {'more than ' if strict else ''}{need:.2f}{unit}: {verdict}"


def targets(rows: list[dict]) -> list[str]:
    """#42's targets, each met or missed with its distance."""
    by_name = cells(rows)
    teacher = next((runs for runs in by_name.values() if runs[0]["kind"] == "teacher"), [])
    bm25 = by_name.get("BM25", [])
    lines = [_check(f"teacher over BM25, {title} (points above)", _diff(value(teacher, key), value(bm25, key)), 0.0,
                    strict=True) for key, title in QUALITY]
    for layers, share in ((3, 97.0), (2, 95.0)):
        for key, title in QUALITY:
            best = max((v for arm in (*GROUPED, "KD") if (v := value(_student(rows, arm, layers), key)) is not None),
                       default=None)
            teacher_value = value(teacher, key)
            got = 100 * best / teacher_value if best is not None and teacher_value else None
            lines.append(_check(f"{layers}-layer best student, {title}, % of teacher", got, share, "%"))
        kd = overall(_student(rows, "KD", layers))
        grouped = max((v for arm in GROUPED if (v := overall(_student(rows, arm, layers))) is not None), default=None)
        lines.append(_check(f"{layers}-layer best grouped loss over pointwise KD, mean of three (points)",
                            _diff(grouped, kd), 1.0))
    siamese = _student(rows, "Siamese Margin-MSE", None)
    zero_shot = by_name.get("bi-encoder minilm (zero-shot)", [])
    for key, title in QUALITY[:2]:
        lines.append(_check(f"Siamese Margin-MSE over the zero-shot MiniLM bi-encoder, {title} (points)",
                            _diff(value(siamese, key), value(zero_shot, key)), 0.0, strict=True))
    return lines


def _diff(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def picture(rows: list[dict], path: Path) -> None:
    """Mean quality of the three collections against the measured speed-up, one marker per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, runs in cells(rows).items():
        quality, speeds = overall(runs), [r["speed_up"] for r in runs if "speed_up" in r]
        if quality is None or not speeds:
            continue
        marker = {"teacher": "*", "reference": "s"}.get(runs[0]["kind"], "o")
        ax.scatter(statistics.fmean(speeds), quality, marker=marker, s=80)
        ax.annotate(name, (statistics.fmean(speeds), quality), fontsize=7, xytext=(4, 3), textcoords="offset points")
    ax.set_xlabel("speed-up over the teacher (DL19 re-ranking, same pairs)")
    ax.set_ylabel("quality (mean of the 3 headline metrics, x100)")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}x"))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def teachers_line(rows: list[dict]) -> str:
    """Which teacher (sha256 of its weights) the teacher-dependent rows used, so mixed teachers show."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.get("kind") != "reference" or "speed_up" in row:
            sha = row.get("teacher_sha256")
            name = f"{sha[:12]}…" if sha else "not recorded"
            counts[name] = counts.get(name, 0) + 1
    return "Teacher weights (sha256) of the rows that depend on the teacher: " + ", ".join(
        f"{sha} ({n} rows)" for sha, n in counts.items()) + "."


# rows of the same benchmark under other settings, kept in their own files beside the main one: what was tried
TRIED = {
    "ranking_groups_first_layers.json": "cut from the teacher's first k layers (`layer_strategy: first`)",
    "ranking_groups_wikiqa_only.json": "trained on WikiQA train alone (`ranking_train_dirs: null`)",
}


def tried_table(rows: list[dict], folder: Path) -> list[str]:
    """Each student of the other settings' files beside the same model and seed under the recipes' settings."""
    lines = ["| model | seed | setting | " + " | ".join(t for _, t in QUALITY) + " | mean |",
             "| --- | ---: | --- | " + " | ".join("---:" for _ in QUALITY) + " | ---: |"]
    for file, setting in TRIED.items():
        path = folder / file
        for row in json.loads(path.read_text())["rows"] if path.exists() else []:
            if row.get("kind") != "student":
                continue
            shipped = [r for r in rows if r["model"] == row["model"] and r.get("seed") == row.get("seed")]
            sha = row.get("teacher_sha256")
            other = sha and not any(r.get("teacher_sha256") == sha for r in rows if r.get("kind") == "teacher")
            label = f"{setting}, another teacher ({sha[:12]}…)" if other else setting
            for label, runs in ((label, [row]), ("the recipe's settings (above)", shipped)):
                if runs:
                    mean = overall(runs)
                    values = [quality_cell(runs, k) for k, _ in QUALITY] + [f"{mean:.2f}" if mean is not None else "–"]
                    lines.append(f"| {row['model']} | {row.get('seed')} | {label} | " + " | ".join(values) + " |")
    return lines if len(lines) > 2 else []


def tried_section(rows: list[dict], folder: Path) -> list[str]:
    table_ = tried_table(rows, folder)
    if not table_:
        return []
    return ["## Other settings tried", "", "The same benchmark with one setting changed (the teacher of the rows above "
            "unless a row names another); "
            "each student beside the same model and seed under the recipes' settings, where that has run.", "",
            *table_, ""]


def bm25_line(rows: list[dict]) -> list[str]:
    """Where BM25's values come from, as its row says (nothing before the row has the field)."""
    how = next((row["bm25"] for row in rows if row.get("model") == "BM25" and row.get("bm25")), None)
    return [f"BM25: {how}.", ""] if how else []


def teacher_trained(rows: list[dict]) -> str:
    """How the teacher was trained, as its row says (rows from before the field: the default recipe)."""
    teacher = next((row for row in rows if row.get("kind") == "teacher"), {})
    return teacher.get("trained", "`recipes/teacher/wikiqa.yaml` (WikiQA train)")


def _starts(rows: list[dict]) -> str:
    """Which teacher layers the cross-encoder students keep (the recipes' `layer_strategy`), from the rows."""
    starts = sorted({r["student_start"] for r in rows if r.get("kind") == "student" and r.get("layers") and r.get("student_start")})
    named = {"uniform": "every L/k-th layer (`uniform`: 3 and 6 of 6 at k = 2; 2, 4 and 6 at k = 3)", "first": "the first k layers"}
    return "cross-encoder students are cut from the teacher: " + (" / ".join(named.get(s, s) for s in starts) or "none yet")


def training_line(rows: list[dict]) -> str:
    """What the students train on, from the rows (rows from before the field: WikiQA train alone)."""
    named = {"wikiqa": "WikiQA train", "wikiqa+dl20": "WikiQA train + DL20 (its BM25 candidates: query groups for the "
             "grouped losses, teacher-labelled transfer pairs for pointwise KD)"}
    found: dict[str, list[str]] = {}
    for row in (r for r in rows if r.get("kind") == "student"):
        kinds = found.setdefault(row.get("train_data", "wikiqa"), [])
        kind = "cross-encoder" if row.get("layers") else "Siamese"
        if kind not in kinds:
            kinds.append(kind)
    parts = [f"the {' and '.join(kinds)} students on {named.get(data, data)}" for data, kinds in found.items()]
    return "; ".join(parts) or "no student yet"


def render(results: Path, page: Path, image: Path) -> str:
    """Write `page` (markdown) and `image` (PNG) from the results JSON; returns the page."""
    payload = json.loads(results.read_text())
    rows = payload["rows"]
    picture(rows, image)
    text = "\n".join([
        "# Re-ranking distillation over query groups (#42)", "",
        f"Command: `{payload['command']}`", "", f"Machine: {payload['machine']}", "",
        f"The teacher: {teacher_trained(rows)}. Training data: {training_line(rows)} (query groups of 8, the teacher's "
        f"scores precomputed once; pointwise KD on pairs); {_starts(rows)}. Every model is "
        "scored on WikiQA test, TrecQA test and TREC DL 2019 (both zero-shot); values x100, mean ± std over seeds. "
        "Speed-up: the same DL19 pairs re-ranked in turns with the teacher (a bi-encoder embeds the query and every passage).", "",
        teachers_line(rows), "", *bm25_line(rows), *table(rows), "", "## Dense retrieval", "",
        "The bi-encoders search the pool of each TREC DL collection (the union of BM25's top 100 of every query: "
        "4,297 passages for DL19, 5,396 for DL20) by cosine; relevance >= 2; values x100.", "",
        *dense_table(rows), "", "## Targets", "", *targets(rows), "", f"![quality against speed-up]({image.name})", "",
        *tried_section(rows, results.parent),
    ])
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text)
    return text
