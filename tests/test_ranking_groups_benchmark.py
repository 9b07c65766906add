"""benchmarks/ranking_groups_render.py: the table and the #42 targets from result rows, checked by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from ranking_groups_render import render, targets  # noqa: E402


def _row(model, kind, wikiqa, trecqa, dl19, **extra):
    return {"model": model, "kind": kind, "wikiqa_test_mrr@10": wikiqa, "trecqa_test_mrr@10": trecqa, "dl19_ndcg@10": dl19,
            "speed_up": extra.pop("speed_up", 1.0), **extra}


ROWS = [
    _row("teacher", "teacher", 0.80, 0.80, 0.60),
    {"model": "BM25", "kind": "reference", "dl19_ndcg@10": 0.50, "wikiqa_test_mrr@10": 0.55, "trecqa_test_mrr@10": 0.82,
     "bm25": "DL19: its first-stage run"},
    _row("bi-encoder minilm (zero-shot)", "reference", 0.60, 0.70, 0.40),
    *[_row("KD, 3 layers", "student", 0.76, 0.76, 0.57, arm="KD", layers=3, seed=s, speed_up=2.0) for s in (0, 1)],
    _row("Margin-MSE, 3 layers", "student", 0.79, 0.78, 0.59, arm="Margin-MSE", layers=3, seed=0, speed_up=2.0),
    _row("Siamese Margin-MSE, 6 layers", "student", 0.65, 0.70, 0.45, arm="Siamese Margin-MSE", layers=None, seed=0,
         **{"dl19_dense_recall@100": 0.91, "dl20_dense_ndcg@10": 0.33}),
]


def test_targets_are_met_or_missed_with_their_distance():
    lines = targets(ROWS)
    assert lines[0] == "- teacher over BM25, WikiQA MRR@10 (points above): 25.00 against more than 0.00: met"
    assert lines[1] == "- teacher over BM25, TrecQA MRR@10 (points above): -2.00 against more than 0.00: missed by 2.00"
    assert lines[2] == "- teacher over BM25, DL19 NDCG@10 (points above): 10.00 against more than 0.00: met"
    wikiqa = next(line for line in lines if line.startswith("- 3-layer best student, WikiQA"))
    assert wikiqa.endswith("98.75% against 97.00%: met")  # Margin-MSE 79 of the teacher's 80
    dl19 = next(line for line in lines if line.startswith("- 3-layer best student, DL19"))
    assert dl19.endswith("98.33% against 97.00%: met")
    grouped = next(line for line in lines if line.startswith("- 3-layer best grouped"))
    assert grouped.endswith("2.33 against 1.00: met")  # Margin-MSE (79 + 78 + 59) / 3 = 72 against KD 69.67
    trecqa = [line for line in lines if "Siamese" in line][1]
    assert "a tie does not beat" in trecqa  # 70 = 70


def test_an_lce_arm_counts_as_a_grouped_loss():
    rows = [*ROWS, _row("Margin-MSE + LCE, 3 layers", "student", 0.80, 0.80, 0.62, arm="Margin-MSE + LCE", layers=3, seed=0)]
    grouped = next(line for line in targets(rows) if line.startswith("- 3-layer best grouped"))
    assert grouped.endswith("4.33 against 1.00: met")  # (80 + 80 + 62) / 3 = 74 against KD 69.67


def test_render_writes_the_page_and_the_picture(tmp_path):
    results = tmp_path / "ranking_groups.json"
    results.write_text(json.dumps({"command": "python benchmarks/ranking_groups.py", "machine": "test", "rows": ROWS}))
    tried = _row("KD, 3 layers", "student", 0.70, 0.70, 0.40, arm="KD", layers=3, seed=0)  # another setting's file
    (tmp_path / "ranking_groups_wikiqa_only.json").write_text(json.dumps({"rows": [ROWS[1], tried]}))
    text = render(results, tmp_path / "ranking.md", tmp_path / "ranking.png")
    other = text.split("## Other settings tried")[1]
    assert "| KD, 3 layers | 0 | trained on WikiQA train alone (`ranking_train_dirs: null`) | 70.00 | 70.00 | 40.00 | 60.00 |" in other
    assert "| KD, 3 layers | 0 | the recipe's settings (above) | 76.00 | 76.00 | 57.00 | 69.67 |" in other
    assert "BM25" not in other  # students only
    assert "| KD, 3 layers | 2 | 76.00 ± 0.00 | 76.00 ± 0.00 | 57.00 ± 0.00 | 69.67 | 95.0% | 2.00x |" in text
    # the dense table lists only the models that retrieved: here the Siamese student
    assert "| Siamese Margin-MSE, 6 layers | 1 | 91.00 | – | – | – | – | 33.00 |" in text and "| KD, 3 layers | 2 | 76" not in \
        text.split("## Dense retrieval")[1]
    assert (tmp_path / "ranking.png").stat().st_size > 0 and (tmp_path / "ranking.md").read_text() == text
    assert "BM25: DL19: its first-stage run." in text
    (tmp_path / "ranking_groups_wikiqa_only.json").write_text(json.dumps({"rows": [dict(tried, teacher_sha256="abcdef0123456789")]}))
    other = render(results, tmp_path / "ranking.md", tmp_path / "ranking.png").split("## Other settings tried")[1]
    assert "trained on WikiQA train alone (`ranking_train_dirs: null`), another teacher (abcdef012345…) |" in other


def test_smoke_mode_runs_every_arm_and_writes_only_in_its_folder(tmp_path):
    """`benchmarks/ranking_groups.py --smoke`: the teacher, the references and every arm through the recipes, on
    tiny random models; results and page in the smoke folder, nothing in benchmarks/results or docs."""
    import os
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    protected = [repo / "benchmarks" / "results" / "ranking_groups.json", repo / "docs" / "results" / "ranking.md"]
    before = {p: p.stat().st_mtime_ns for p in protected if p.exists()}
    env = {**os.environ, "HF_DISTILL_SMOKE_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    arms = ["KD", "Margin-MSE", "listwise KL", "Margin-MSE + LCE"]  # the default arms and one with the gold labels
    command = [sys.executable, str(repo / "benchmarks" / "ranking_groups.py"), "--smoke", "--arms", *arms]
    done = subprocess.run(command, cwd=repo, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((tmp_path / "results" / "ranking_groups.json").read_text())["rows"]
    assert {row.get("arm") for row in rows if row["kind"] == "student"} == {*arms, "Siamese Margin-MSE"}
    assert {"BM25", "bi-encoder minilm (zero-shot)", "bi-encoder mpnet (zero-shot)"} <= {row["model"] for row in rows}
    bm25 = next(row for row in rows if row["model"] == "BM25")
    assert {"wikiqa_test_mrr@10", "trecqa_test_mrr@10", "dl19_ndcg@10", "bm25"} <= set(bm25)
    siamese = next(row for row in rows if row.get("arm") == "Siamese Margin-MSE")
    assert {"dl19_dense_recall@100", "dl20_dense_ndcg@10", "trecqa_test_mrr@10"} <= set(siamese)
    assert (tmp_path / "docs" / "ranking.md").is_file() and (tmp_path / "docs" / "ranking_quality_speed.png").is_file()
    assert {p: p.stat().st_mtime_ns for p in protected if p.exists()} == before
