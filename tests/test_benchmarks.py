"""The benchmark scripts still run: each one's `--smoke` mode, end to end, on tiny random models.

`benchmarks/smoke.py` runs every script's smoke mode in one shared temporary folder, each in a
process of its own (forked after torch, transformers and hf_distill are imported once, which
keeps this file to well under a minute). Each test then reads what its script wrote there and
checks that the script's real steps ran: every arm trained and was evaluated, the terms each arm
switches on were logged, the tables list every row. The numbers of tiny random models mean
nothing, so no score is compared with a target; the structure of the results is.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"


def _benchmark(name: str):
    """A module of benchmarks/, imported the way the scripts import each other (benchmarks/ on sys.path)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


SCRIPTS = _benchmark("smoke").SCRIPTS
PROTECTED = (BENCHMARKS / "results", REPO / "docs")  # smoke runs must never write here


def _environment(smoke_dir: Path) -> dict[str, str]:
    return {**os.environ, "HF_DISTILL_SMOKE_DIR": str(smoke_dir), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _snapshot(names: set[str] | None = None) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file under the protected folders (only those named `names`, when given)."""
    return {
        str(path): (path.stat().st_size, path.stat().st_mtime_ns)
        for folder in PROTECTED if folder.exists() for path in folder.rglob("*")
        if path.is_file() and (names is None or path.name in names)
    }


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """Run every smoke mode once: (smoke folder, report {script: exit_code, seconds, log}, protected files before)."""
    folder = tmp_path_factory.mktemp("benchmarks_smoke")
    before = _snapshot()
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "smoke.py"), "--dir", str(folder)],
        cwd=REPO, env=_environment(folder), capture_output=True, text=True, timeout=600, check=False,
    )
    report_file = folder / "smoke_report.json"
    assert report_file.exists(), f"smoke.py wrote no report:\n{completed.stdout}\n{completed.stderr[-4000:]}"
    return folder, json.loads(report_file.read_text()), before


def _results(smoke, script: str, name: str | None = None) -> tuple[dict, str]:
    """The script's results json and md table, after checking that its smoke run exited 0."""
    folder, report, _ = smoke
    run = report[script]
    if run["exit_code"] != 0:
        pytest.fail(f"{script} --smoke exited {run['exit_code']}:\n{Path(run['log']).read_text()[-6000:]}")
    name = name or script.removesuffix(".py")
    return json.loads((folder / "results" / f"{name}.json").read_text()), (folder / "results" / f"{name}.md").read_text()


def _table_rows(table: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| ")]


def _takes_smoke(source: str) -> bool:
    """A --smoke option of its own, or the shared one."""
    return '"--smoke"' in source or "smoke_option(parser" in source


def test_every_script_has_a_smoke_run():
    """Every benchmark script (a file with a __main__; smoke.py and render.py are tools) takes --smoke; smoke.py runs those that use the shared
    `common.smoke_option` (the others have a --smoke of their own, tested by their owners' tests)."""
    scripts = {p.name for p in BENCHMARKS.glob("*.py") if '__name__ == "__main__"' in p.read_text()} - {"smoke.py", "render.py"}
    without = {name for name in scripts if not _takes_smoke((BENCHMARKS / name).read_text())}
    assert without == set(), f"benchmark scripts without --smoke: {sorted(without)}"
    for script in SCRIPTS:
        assert "smoke_option(parser" in (BENCHMARKS / script).read_text(), f"{script} does not use common.smoke_option"
    assert set(SCRIPTS) <= scripts


def test_smoke_outputs_stay_in_the_smoke_folder(smoke):
    folder, _, before = smoke
    written = {p.name for p in (folder / "results").iterdir()}
    assert len(written) >= 2 * len(SCRIPTS)  # a json and an md per script, plus EMD plots
    touched = {path for path, stat in _snapshot(written).items() if before.get(path) != stat}
    assert touched == set(), f"smoke runs wrote into {touched}"
    ranking, _ = _results(smoke, "ranking.py")
    assert Path(ranking["teacher"]["folder"]).is_relative_to(folder)  # the teacher cache too


def test_kd_glue(smoke):
    ARMS = _benchmark("kd_glue").ARMS
    results, table = _results(smoke, "kd_glue.py")
    assert set(results["tasks"]) == {"mrpc", "stsb"}
    for task, kind, metric in (("mrpc", "classification", "accuracy"), ("stsb", "regression", "spearman")):
        arms = results["tasks"][task]["arms"]
        assert list(arms) == list(ARMS[kind])
        assert all([run["seed"] for run in runs] == [0] and math.isfinite(runs[0][metric]) for runs in arms.values())
        rows = [row for row in _table_rows(table) if row[0] == task and row[2] == metric]
        assert [row[1] for row in rows] == ["teacher (6 layers)", *(f"student: {arm}" for arm in ARMS[kind])]


def test_emd_glue(smoke):
    results, table = _results(smoke, "emd_glue.py")
    folder = smoke[0] / "results"
    for task in ("mrpc", "stsb"):
        arms = results["tasks"][task]["arms"]
        assert list(arms) == ["no KD", "uniform", "EMD", "EMD smooth"]
        terms = {arm: set(runs[0]["terms"]) for arm, runs in arms.items()}
        assert terms["no KD"] == {"hard"}
        assert terms["uniform"] == {"hard", "soft", "hidden", "attention", "embedding"}
        for arm in ("EMD", "EMD smooth"):  # the EMD terms and the layer weights the cost attention moves
            assert {"emd_hidden", "emd_attention", "embedding", "w_hidden_student_1", "w_attention_teacher_6"} <= terms[arm]
        suffixes = {"EMD": "", "EMD smooth": "_smooth"}
        assert all((folder / f"emd_glue_{task}{s}_emd_flow.png").exists() for s in suffixes.values())
    assert "Train time per step, EMD / uniform (same run)" in table


def test_emd_summary_reads_emd_glue_results(smoke):
    results, _ = _results(smoke, "emd_summary.py")
    emd_glue, _ = _results(smoke, "emd_glue.py")
    assert [(row["file"], row["arm"]) for row in results["rows"]] == [("emd_glue", "EMD"), ("emd_glue", "EMD smooth")]
    for row in results["rows"]:
        assert set(row["tasks"]) == {"mrpc", "stsb"}  # no RTE in the smoke run: no three-task average
        assert "average" not in row
        for task, comparison in row["tasks"].items():
            runs = emd_glue["tasks"][task]["arms"]
            metric = "accuracy" if task == "mrpc" else "spearman"
            expected = 100 * runs[row["arm"]][0][metric] - 100 * runs["uniform"][0][metric]
            assert comparison["difference"] == pytest.approx(expected)


def test_emd_summary_from_the_command_line(smoke):
    """`python benchmarks/emd_summary.py --smoke`, as a user types it, writes what the forked run wrote."""
    folder = smoke[0]
    forked = (folder / "results" / "emd_summary.md").read_text()
    completed = subprocess.run(
        [sys.executable, "benchmarks/emd_summary.py", "--smoke"],
        cwd=REPO, env=_environment(folder), capture_output=True, text=True, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert (folder / "results" / "emd_summary.md").read_text() == forked
    assert f"outputs in {folder.resolve()}" in completed.stderr


def test_emd_fixed_point(smoke):
    RULES = _benchmark("emd_fixed_point").RULES
    results, _ = _results(smoke, "emd_fixed_point.py")
    task = results["tasks"]["mrpc"]
    assert task["origins"] == [3, 6]  # 2 of 6 teacher layers, uniform strategy
    assert [len(task["costs"][kind]) for kind in ("hidden", "attention")] == [2, 2]
    assert len(task["rules"]) == len(RULES)
    for rule in task["rules"]:
        for flow in rule["flows"].values():  # a transport plan moves all of the unit mass
            assert sum(map(sum, flow)) == pytest.approx(1.0, abs=1e-6)


def test_virt_glue(smoke):
    ARMS = _benchmark("virt_glue").ARMS
    results, _ = _results(smoke, "virt_glue.py")
    task = results["tasks"]["mrpc"]
    assert list(task["arms"]) == list(ARMS)
    assert "virt" not in task["arms"]["Siamese baseline"][0]["terms"]
    assert all("virt" in task["arms"][arm][0]["terms"] for arm in ARMS[1:])
    (speed,) = task["encode_sentences_per_s"]
    assert speed[ARMS[0]] > 0 and speed[ARMS[1]] > 0


def test_dvbert_two_teachers_two_tokenizers(smoke):
    results, table = _results(smoke, "dvbert.py")
    task = results["tasks"]["stsb"]
    assert set(task["teachers"]) == {"minilm", "mpnet"}
    arms = task["arms"]
    assert [arms[arm][0]["teachers"] for arm in arms] == [0, 1, 1, 2, 2]
    assert {"soft_0", "soft_1"} <= set(arms["DvBERT weighting K=2"][0]["terms"])  # one soft term per teacher
    assert "lambda" in arms["DvBERT annealing K=2"][0]["terms"]
    assert all(math.isfinite(runs[0]["stsb_test_spearman_cosine"]) for runs in arms.values())
    assert "| stsb | teacher mpnet > SBERT baseline on STS-B Spearman" in table


def test_ranking(smoke):
    ARMS = _benchmark("ranking").ARMS
    results, table = _results(smoke, "ranking.py")
    assert set(results["references"]) == {"BM25", "bi-encoder (zero-shot)"}
    students = results["students"]["2"]
    assert list(students) == list(ARMS)
    assert set(students["KD"][0]["terms"]) == {"hard", "soft"}
    assert {"attention", "hidden", "embedding"} <= set(students["Simplified TinyBERT, attention KL"][0]["terms"])
    throughput = results["throughput"]
    assert throughput["2"]["speedup"] == pytest.approx(sorted(throughput["2"]["speedups"])[2])  # median of 5 rounds
    assert sum(row[0].startswith("2-layer student: ") for row in _table_rows(table)) == len(ARMS)


def test_term_gradients(smoke):
    TERMS = _benchmark("term_gradients").TERMS
    results, _ = _results(smoke, "term_gradients.py")
    terms = results["students"]["2"]
    assert list(terms) == list(TERMS)
    assert terms["hard"]["grad_ratio_to_hard"] == 1.0
    assert all(terms[name]["grad_norm"] > 0 for name in TERMS)
    ranking, _ = _results(smoke, "ranking.py")
    assert results["teacher"] == ranking["teacher"]["folder"]  # the ranking run's cached teacher, reused


def test_inference_speed(smoke):
    results, _ = _results(smoke, "inference_speed.py")
    rows = results["rows"]
    configurations = {(r["teacher"], r["form"], r["layers"]) for r in rows}
    assert configurations == {(t, f, k) for t, depth in (("minilm", 6), ("mpnet", 4)) for f in ("cross", "siamese") for k in (depth, 2)}
    for row in rows:
        assert row["timed_batches"] == 2 and row["pairs_per_s"] == pytest.approx(row["batch"] / (row["ms_per_batch"] / 1000))
        if row["layers"] == row["teacher_layers"]:
            assert row["speedup"] == 1.0


def test_similarity_search(smoke):
    results, _ = _results(smoke, "similarity_search.py")
    cross = results["cross_encoder"]
    assert cross["total_s"]["40"] == pytest.approx(40 * 39 / 2 / cross["pairs_per_s"])
    assert set(results["siamese"]) == {"MiniLM-L6 bi-encoder", "2-layer bi-encoder student"}
    for runs in results["siamese"].values():
        for n, run in runs.items():
            pair = run["pair"]
            assert pair["i"] != pair["j"] and max(pair["i"], pair["j"]) < int(n)


def test_step_time(smoke):
    results, _ = _results(smoke, "step_time.py")
    median = results["median_ms"]
    assert [len(v) for v in results["samples_ms"].values()] == [2, 2, 2, 2]  # 5 steps, the first 3 dropped
    assert results["ratios"]["b/a"] == pytest.approx(median["b: precomputed logits"] / median["a: plain fine-tuning"])


def test_length_buckets(smoke):
    results, table = _results(smoke, "length_buckets.py")
    assert set(results["median_ms"]) == {"1", "2", "4", "8"} and results["speed_up"]["1"] == 1.0
    tokens = [results["computed_over_real_tokens"][k] for k in ("1", "2", "4", "8")]
    assert tokens[0] >= tokens[1] >= tokens[2] >= 1.0  # more groups pad less, never below the real tokens
    assert tokens[3] == tokens[0]  # smoke batches of 8 rows: too few for 8 groups, encoded whole
    assert results["speed_up"]["4"] == pytest.approx(results["median_ms"]["1"] / results["median_ms"]["4"])
    assert "| student_length_buckets |" in table


def test_step_breakdown(smoke):
    step_breakdown = _benchmark("step_breakdown")
    METHODS, RATIOS = step_breakdown.METHODS, step_breakdown.RATIOS
    results, _ = _results(smoke, "step_breakdown.py")
    assert list(results["breakdown"]) == [m.name for m in METHODS]
    emd = results["breakdown"]["BERT-EMD"]["16"]
    assert {"loss: EMDLayerLoss", "  of which EMD flow solve (POT)", "cost-attention update"} <= set(emd)
    plain = results["breakdown"]["fine-tuning (cross-encoder, no teacher)"]["16"]
    assert "teacher forward" in plain and "cost-attention update" not in plain
    assert set(results["ratios"]) == set(RATIOS)
    assert len(results["emd_growth"]) == 6


def test_frontier(smoke):
    """One row per (task, depth, arm, seed) with the issue's fields; one teacher per task; one budget per cell."""
    folder, report, _ = smoke
    assert report["frontier.py"]["exit_code"] == 0, Path(report["frontier.py"]["log"]).read_text()[-6000:]
    rows = json.loads((folder / "results" / "frontier.json").read_text())["rows"]
    frontier = _benchmark("frontier")
    expected = {(t, 2, arm, 0) for t in frontier.TASKS for arm in frontier.ARMS}
    expected |= {(t, 1, arm, 0) for t in frontier.TASKS for arm in frontier.ONE_LAYER_ARMS}
    assert {(r["task"], r["student_layers"], r["arm"], r["seed"]) for r in rows} == expected
    fields = {"task", "metric", "student_layers", "arm", "seed", "value", "teacher_value", "speed_up", "teacher_sha256"}
    assert all(fields <= set(r) and math.isfinite(r["value"]) and r["speed_up"] > 0 for r in rows)
    for task in frontier.TASKS:
        assert len({r["teacher_sha256"] for r in rows if r["task"] == task}) == 1
        for layers in (1, 2):
            cell = [r for r in rows if r["task"] == task and r["student_layers"] == layers]
            assert len({r["budget_steps"] for r in cell}) == 1 and all(r["steps"] <= r["budget_steps"] for r in cell)
    page = (folder / "results" / "frontier_docs" / "frontier.md").read_text()
    assert page.count("| 2 | ") == len(frontier.ARMS) * len(frontier.TASKS) and (folder / "results" / "frontier_docs" / "frontier_snli.png").exists()


def test_frontier_resumes_a_run_only_with_its_own_settings(tmp_path):
    """The last complete checkpoint left by a session cut short is picked up when its settings match, cleared when they
    do not."""
    import torch

    frontier = _benchmark("frontier")
    args = frontier.arguments(str(tmp_path / "run"), "stsb", 0, lr=5e-5, max_steps=100, eval_steps=25, alpha=0.5)
    checkpoint = tmp_path / "run" / "checkpoint-50"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text("{}")
    torch.save(args, checkpoint / "training_args.bin")
    (tmp_path / "run" / "checkpoint-75").mkdir()  # a save cut short: no trainer_state.json, no training_args.bin
    assert frontier.resumable(tmp_path / "run", args, frontier.RESUME_FIELDS) == str(checkpoint)
    other = frontier.arguments(str(tmp_path / "run"), "stsb", 0, lr=1e-4, max_steps=100, eval_steps=25, alpha=0.5)
    assert frontier.resumable(tmp_path / "run", other, frontier.RESUME_FIELDS) is None and not (tmp_path / "run").exists()


def test_quickstart(smoke):
    """One row per seed from the quickstart's own results: the three models' accuracy, the gaps, pairs/s, the wall time;
    the page renders them with the targets."""
    results, page = _results(smoke, "quickstart.py")
    fields = {"seed", "data", "minutes_wall", "teacher", "student_kd", "student_no_kd", "gap_teacher_kd", "gain_kd_over_no_kd",
              "pairs_per_s_teacher", "pairs_per_s_kd", "pairs_per_s_no_kd", "machine", "settings", "kd_student"}
    (row,) = results["rows"]
    assert row["seed"] == 42 and fields <= set(row) and "embedded demo set" in row["data"]
    assert row["gap_teacher_kd"] == pytest.approx(row["teacher"] - row["student_kd"]) and row["minutes_wall"] > 0
    assert all(0 <= row[key] <= 100 for key in ("teacher", "student_kd", "student_no_kd"))
    assert row["kd_student"] == "student, KD + layers" and row["settings"]["augment_n"] == 0
    assert row["settings"]["student_steps"] == 2 and row["settings"]["layer_weight"] == 1.0
    assert results["commands"] == ["python benchmarks/quickstart.py --smoke"]
    assert "| 42 | " in page and "Targets (issue #40 item 8):" in page
    assert "## student, KD + layers (settings differing from today's defaults: " in page  # the smoke run's few steps


def test_quickstart_rows_without_settings_read_their_options_over_the_first_defaults():
    """A row from before the quickstart recorded its settings ran FIRST_SETTINGS as its options changed them, and
    its KD student is named after its augment_n (the old quickstart called it "KD + augmentation" whatever it was)."""
    quickstart = _benchmark("quickstart")
    old = {"seed": 42, "options": [], "student_kd_aug": 72.5, "pairs_per_s_kd_aug": 600.0}
    assert quickstart.with_settings(old)["settings"] == quickstart.FIRST_SETTINGS
    assert quickstart.with_settings(old)["kd_student"] == "student, KD + augmentation"
    changed = quickstart.with_settings({**old, "options": ["--student_steps", "200", "--augment_n=0"]})
    assert changed["settings"] == {**quickstart.FIRST_SETTINGS, "student_steps": 200, "augment_n": 0}
    assert (changed["kd_student"], changed["student_kd"], changed["pairs_per_s_kd"]) == ("student, KD", 72.5, 600.0)
    # rows that recorded settings before --layer_weight existed distilled the logits alone
    logits_only = {"seed": 42, "options": [], "settings": {"augment_n": 0}, "kd_student": "student, KD"}
    assert quickstart.with_settings(logits_only)["settings"] == {"augment_n": 0, "layer_weight": 0.0}
