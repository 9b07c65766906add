"""Every number in README.md and docs/ is what its results JSON renders (`benchmarks/render.py`).

Each rendered block of every page, each benchmarks/results/NAME.md and each page a benchmark writes
whole is rendered again from benchmarks/results/*.json and compared: a table edited by hand, a JSON
rerun without rendering, or a renderer changed without rendering again fails here, with the command
that fixes it. Rendering loads no model and imports no torch, so this file takes seconds. It also
checks that every relative link in README.md and docs/ points at a file (and heading) that exists.
"""

from __future__ import annotations

import difflib
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
FIX = "run `python benchmarks/render.py` (or the benchmark's --render) and commit what it rewrites"


def _module(name: str):
    """A module of benchmarks/, imported the way the scripts import each other (benchmarks/ on sys.path)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


render = _module("render")


def _diff(expected: str, actual: str) -> str:
    return "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(), "rendered from JSON", "committed", lineterm="", n=1))


def _blocks() -> list:
    return [
        pytest.param(page, name, body, id=f"{page.relative_to(REPO).as_posix()}::{name}")
        for page in render.pages() for name, body in render.blocks(page.read_text())
    ]


@pytest.mark.parametrize(("page", "name", "body"), _blocks())
def test_rendered_block_is_what_its_json_renders(page, name, body):
    fresh = render.relink(render.render_block(name), page)
    assert body == fresh, f"{page.relative_to(REPO)}, block {name!r} differs from its JSON; {FIX}\n{_diff(fresh, body)}"


def _results_files() -> list[Path]:
    return [path for path in sorted(render.RESULTS.glob("*.json")) if render.has_results_markdown(json.loads(path.read_text()))]


@pytest.mark.parametrize("path", _results_files(), ids=lambda p: p.stem)
def test_results_markdown_is_what_its_json_renders(path):
    markdown = path.with_suffix(".md")
    fresh = render.results_markdown(json.loads(path.read_text()))
    assert markdown.exists() and markdown.read_text() == fresh, (
        f"{markdown.relative_to(REPO)} differs from {path.name}; {FIX}\n{_diff(fresh, markdown.read_text() if markdown.exists() else '')}"
    )


@pytest.mark.parametrize("page", list(render.WHOLE_PAGES), ids=lambda p: p.name)
def test_whole_page_is_its_json_or_says_there_is_none(page):
    assert render.whole_page_problem(page) is None, f"{render.whole_page_problem(page)}; {FIX}"


def test_results_pages_and_readme_show_rendered_tables():
    """The method pages and the performance page hold rendered blocks (none of their numbers typed), and
    the README's results summary is rendered too."""
    pages = [p for p in (REPO / "docs" / "results").glob("*.md") if p not in render.WHOLE_PAGES] + [REPO / "docs" / "performance.md"]
    assert {p.stem for p in pages} >= {"kd", "dvbert", "bert_emd", "virt", "simplified_tinybert", "performance"}
    for page in pages:
        assert render.blocks(page.read_text()), f"{page.relative_to(REPO)} has no rendered block"
    readme = {name for name, _ in render.blocks((REPO / "README.md").read_text())}
    methods = ("kd", "dvbert", "bert_emd", "virt", "simplified_tinybert", "frontier", "ranking_groups", "embedding", "pending")
    assert {f"summary:{method}" for method in methods} <= readme


def test_rendering_imports_no_torch():
    """Blocks and results tables render from JSON alone: no torch, transformers or hf_distill import."""
    code = "\n".join([
        "import json, sys",
        "sys.path.insert(0, 'benchmarks')",
        "import render",
        "for page in render.pages():",
        "    for name, _ in render.blocks(page.read_text()):",
        "        render.render_block(name)",
        "for path in render.RESULTS.glob('*.json'):",
        "    payload = json.loads(path.read_text())",
        "    if render.has_results_markdown(payload):",
        "        render.results_markdown(payload)",
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers', 'hf_distill', 'datasets', 'numpy'}))",
    ])
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def test_refresh_rewrites_a_stale_block_and_its_links(tmp_path):
    page = REPO / "docs" / "results" / "example.md"  # never written: only its place matters for the links
    stale = "intro\n\n<!-- rendered: emd_summary -->\n| typed | by hand |\n<!-- /rendered -->\n\nafter\n"
    fresh = render.refresh(stale, page)
    assert fresh.startswith("intro\n\n<!-- rendered: emd_summary -->\nCommand: `python benchmarks/emd_summary.py`")
    assert fresh.endswith("<!-- /rendered -->\n\nafter\n") and "typed by hand" not in fresh
    assert "](../../benchmarks/results/emd_glue.md)" in fresh  # written for benchmarks/results/, moved to the page
    assert render.refresh(fresh, page) == fresh


def test_relink_leaves_absolute_and_anchor_links():
    page = REPO / "README.md"
    text = "[a](x.md) [b](https://example.org/y.md) [c](#results) [d](x.md#part) ![e](f.png)"
    assert render.relink(text, page) == (
        "[a](benchmarks/results/x.md) [b](https://example.org/y.md) [c](#results) "
        "[d](benchmarks/results/x.md#part) ![e](benchmarks/results/f.png)"
    )


def test_unknown_view_is_named():
    with pytest.raises(KeyError, match="unknown rendered view 'nonsense'"):
        render.render_block("nonsense:kd_glue")


# ---------------------------------------------------------------------------- README summaries of whole pages
views = _module("render_views")


def _ranking_row(model: str, kind: str, wikiqa: float | None, speed: float | None = None, **extra) -> dict:
    row = {"model": model, "kind": kind, "teacher_sha256": "a" * 64, **extra}
    if wikiqa is not None:
        row.update({"wikiqa_test_mrr@10": wikiqa, "trecqa_test_mrr@10": wikiqa - 0.1, "dl19_ndcg@10": wikiqa - 0.2})
    if speed is not None:
        row["speed_up"] = speed
    return row


def _student(arm: str, layers: int | None, seed: int, wikiqa: float, speed: float) -> dict:
    return _ranking_row(f"{arm}, {layers or 6} layers", "student", wikiqa, speed, arm=arm, layers=layers, seed=seed)


def _table_rows(lines: list[str]) -> dict[str, list[str]]:
    return {cells[0]: cells[1:] for line in lines[4:] if (cells := [c.strip() for c in line.strip("|").split("|")])}


def test_summary_ranking_groups_means_per_arm_and_depth(tmp_path, monkeypatch):
    rows = [_ranking_row("teacher (minilm cross-encoder)", "teacher", 0.8, 1.0), {"model": "BM25", "kind": "reference", "dl19_ndcg@10": 0.5},
            _ranking_row("bi-encoder minilm (zero-shot)", "reference", 0.7, 1.2),
            _ranking_row("bi-encoder mpnet (zero-shot)", "reference", 0.75, 0.5),  # not in the summary
            _student("KD", 2, 0, 0.60, 3.0), _student("KD", 2, 1, 0.62, 3.2), _student("Margin-MSE", 3, 0, 0.70, 2.0),
            _student("Margin-MSE", 2, 0, 0.58, 3.0), _student("listwise KL", 2, 0, 0.59, 3.0),  # the README keeps KL
            _student("Siamese Margin-MSE", None, 0, 0.72, 1.1),
            {**_student("KD", 2, 2, 0.10, 9.0), "teacher_sha256": "b" * 64}]  # another teacher's: left out
    (tmp_path / "ranking_groups.json").write_text(json.dumps({"command": "python benchmarks/ranking_groups.py", "rows": rows}))
    monkeypatch.setattr(views, "RESULTS", tmp_path)
    lines = views.summary_ranking_groups()
    assert "bbbbbbbbbbbb" not in "\n".join(lines) and "Rows of teacher weights aaaaaaaaaaaa… only" in lines[0]
    table = _table_rows(lines)
    assert list(table) == ["teacher (minilm cross-encoder)", "BM25", "bi-encoder minilm (zero-shot)", "3-layer student: Margin-MSE",
                           "2-layer student: KD", "2-layer student: listwise KL", "6-layer student: Siamese Margin-MSE"]
    assert "Per depth: pointwise KD and the best grouped loss" in lines[0]
    assert table["2-layer student: KD"] == ["2", "61.00 ± 1.41", "51.00 ± 1.41", "41.00 ± 1.41", "3.10 ± 0.14x"]
    assert table["BM25"] == ["1", "–", "–", "50.00", "–"]
    assert table["teacher (minilm cross-encoder)"] == ["1", "80.00", "70.00", "60.00", "1.00x"]


def test_summary_embedding_means_per_student_and_loss(tmp_path, monkeypatch):
    def row(model, layers, stsb, speedup, **extra):
        return {"model": model, "layers": layers, "stsb_spearman": stsb, "wikiqa_mrr@10": stsb - 10, "speedup": speedup, **extra}

    monkeypatch.setattr(views, "recipe_model", lambda student: f"distilled {student}, blocks of 8")  # the recipes now
    l3, l2 = "distilled l3, blocks of 8", "distilled l2, blocks of 8"
    rows = [row("teacher all-mpnet-base-v2", 12, 83.0, 1.0), row("all-MiniLM-L6-v2", 6, 82.0, 8.0),
            row("all-MiniLM-L6-v2 first 3 layers", 3, 55.0, 20.0),  # not in the summary
            row("distilled l3", 3, 78.0, 10.0, loss="both", seed=42),  # the first recipes' settings
            row("distilled l3, projection kept", 3, 77.0, 10.0, loss="both", seed=42),  # on the page only
            row(l3, 3, 80.0, 10.0, loss="mse", seed=42), row(l3, 3, 81.0, 11.0, loss="mse", seed=43),
            row(l3 + ", lr 1e-05", 3, 90.0, 10.0, loss="mse", seed=42),  # other settings: on the page only
            row(l2, 2, 78.0, 20.0, loss="both", seed=42)]
    (tmp_path / "embedding.json").write_text(json.dumps({"command": "python benchmarks/embedding.py", "rows": rows}))
    monkeypatch.setattr(views, "RESULTS", tmp_path)
    table = _table_rows(views.summary_embedding())
    assert list(table) == ["teacher all-mpnet-base-v2", "all-MiniLM-L6-v2", "distilled l3", l3, l2]
    assert table["teacher all-mpnet-base-v2"] == ["12", "zero-shot", "1", "83.00", "73.00", "1.00x"]
    assert table[l3] == ["3", "mse", "2", "80.50 ± 0.71", "70.50 ± 0.71", "10.50 ± 0.71x"]


@pytest.mark.parametrize(("method", "stem", "command"), [("ranking_groups", "ranking", "python benchmarks/ranking_groups.py"),
                                                         ("embedding", "embedding", "python benchmarks/embedding.py")])
@pytest.mark.parametrize("payload", [None, {"command": "x", "rows": []}], ids=["no file", "no rows"])
def test_summary_without_results_says_so_with_its_command(tmp_path, monkeypatch, method, stem, command, payload):
    if payload is not None:
        (tmp_path / f"{method}.json").write_text(json.dumps(payload))  # a summary's name is its JSON's
    monkeypatch.setattr(views, "RESULTS", tmp_path)
    lines = views.SUMMARIES[method]()
    assert len(lines) == 1 and lines[0].startswith(render.NO_RESULTS) and f"`{command}`" in lines[0]
    assert f"](../../docs/results/{stem}.md)" in lines[0]


def test_summary_pending_leaves_out_benchmarks_with_their_own_summary(tmp_path, monkeypatch):
    pages = {render.DOCS / "results" / f"{stem}.md": render.WholePage(tmp_path / f"{stem}.json", lambda _: "", f"{stem}.py")
             for stem in ("frontier", "ranking", "embedding", "labelling")}
    monkeypatch.setattr(views, "WHOLE_PAGES", pages)
    assert views.summary_pending() == ["Not run yet (each page gives its command): [labelling throughput](../../docs/results/labelling.md)."]
    (tmp_path / "labelling.json").write_text(json.dumps({"rows": [{"x": 1}]}))
    assert views.summary_pending() == ["Every benchmark without a summary above has results."]


# ---------------------------------------------------------------------------- links
LINK = re.compile(r"(?<!`)\[[^\]]*\]\((?P<target>[^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {_anchor(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.MULTILINE)}


def _link_pages() -> list[Path]:
    return [REPO / "README.md", BENCHMARKS / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


@pytest.mark.parametrize("page", _link_pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_point_at_existing_files(page):
    broken = []
    for match in LINK.finditer(FENCE.sub("", page.read_text())):
        target = match.group("target")
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no {resolved.relative_to(REPO) if resolved.is_relative_to(REPO) else resolved})")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no heading #{anchor} in {resolved.relative_to(REPO)})")
    assert not broken, f"{page.relative_to(REPO)}: broken links: {broken}"
