"""Every number in README.md and docs/ is rendered from benchmarks/results/*.json: none is typed by hand.

A page mixes prose with rendered blocks:

    <!-- rendered: NAME -->
    ...what render_block(NAME) returns...
    <!-- /rendered -->

NAME is a results file's stem (`kd_glue`: what its script writes into benchmarks/results/kd_glue.md,
the table under the command and machine that produced it) or a view, `VIEW:ARGUMENT`, of one or more
results files (`emd:emd_glue_first`, `summary:kd`; the views are in `render_views.py`). Relative links
in a block are written relative to benchmarks/results/ and rewritten for the page that holds the block.
Some scripts render a whole page of their own (`WHOLE_PAGES`: frontier, ranking, deployment, labelling,
embedding, quickstart); until their JSON exists the page says so and gives the command.

    python benchmarks/render.py            # rewrite benchmarks/results/*.md, then every block in README.md and docs/
    python benchmarks/render.py --check    # compare only; exit 1, naming every file or block that differs

Each benchmark script's `--render` rewrites its own results/NAME.md from the JSON, then does the same.
Nothing here imports torch or loads a model (tests/test_rendered_docs.py renders every block on every
test run); the whole-page renderers of deployment, labelling, embedding and quickstart live in their scripts, which
are imported only once their JSON exists, and a whole page is rewritten by its script's render mode.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
DOCS = REPO / "docs"
BLOCK = re.compile(r"<!-- rendered: (?P<name>[^>]+?) -->\n(?P<body>.*?)<!-- /rendered -->", re.DOTALL)
LINK = re.compile(r"(\]\()(?P<target>[^)\s]+)(\))")

# script (the file its results' command runs) -> "module:function" rendering its table from the JSON payload
TABLES = {
    "kd_glue": "render_glue:kd_glue",
    "dvbert": "render_glue:dvbert",
    "emd_glue": "render_glue:emd_glue",
    "emd_fixed_point": "render_glue:emd_fixed_point",
    "virt_glue": "render_glue:virt_glue",
    "ranking": "render_ranking:ranking",
    "term_gradients": "render_ranking:term_gradients",
    "inference_speed": "render_performance:inference_speed",
    "similarity_search": "render_performance:similarity_search",
    "step_breakdown": "render_performance:step_breakdown",
    "step_time": "render_performance:step_time",
    "length_buckets": "render_performance:length_buckets",
}
# scripts whose results/NAME.md is not "Command / Machine / table" but a text of their own
MARKDOWN = {"emd_summary": "render_glue:emd_summary"}


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _function(spec: str) -> Callable:
    module, name = spec.split(":")
    if str(HERE) not in sys.path:  # the scripts import each other by name, from benchmarks/
        sys.path.insert(0, str(HERE))
    return getattr(importlib.import_module(module), name)


def load(stem: str, folder: Path = RESULTS) -> dict:
    """benchmarks/results/STEM.json."""
    path = folder / f"{stem}.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: run its benchmark first (benchmarks/README.md)")
    return json.loads(path.read_text())


def script_of(payload: dict) -> str | None:
    """The script that wrote a results payload, read from its command ("python benchmarks/NAME.py ...")."""
    match = re.match(r"python benchmarks/(\w+)\.py", payload.get("command", ""))
    return match.group(1) if match else None


def has_results_markdown(payload: dict) -> bool:
    """Whether a results payload's NAME.md is rendered here (the scripts that write whole pages render their own)."""
    return script_of(payload) in {*TABLES, *MARKDOWN}


def table(script: str, payload: dict) -> str:
    """The script's markdown table of a payload, read as JSON reads it back (keys are strings)."""
    return _function(TABLES[script])(json.loads(json.dumps(payload)))


def results_markdown(payload: dict) -> str:
    """What benchmarks/results/NAME.md holds for a payload: the command, the machine, the table."""
    script = script_of(payload)
    if script in MARKDOWN:
        return _function(MARKDOWN[script])(payload) + "\n"
    return f"Command: `{payload['command']}`\n\nMachine: {payload['machine']}\n\n{table(script, payload)}\n"


def write_results_markdown(stem: str, folder: Path = RESULTS) -> Path:
    """Rewrite folder/STEM.md from folder/STEM.json (a script's `--render`)."""
    path = folder / f"{stem}.md"
    path.write_text(results_markdown(load(stem, folder)))
    return path


def render_results(stem: str, folder: Path = RESULTS) -> None:
    """A script's `--render`: folder/STEM.md again from folder/STEM.json, nothing run; for the real results
    (not a smoke folder) also every page that shows them."""
    print(write_results_markdown(stem, folder).read_text())
    if folder.resolve() == RESULTS.resolve():
        for line in render_all():
            print(f"rendered: {line}")


def render_block(name: str) -> str:
    """The content of the block NAME (see the module docstring), links relative to benchmarks/results/."""
    from render_views import VIEWS

    if ":" not in name and name not in VIEWS:
        return results_markdown(load(name)).strip("\n")
    view, _, argument = name.partition(":")
    if view not in VIEWS:
        raise KeyError(f"unknown rendered view {view!r} in block {name!r}; views: {', '.join(sorted(VIEWS))}")
    return VIEWS[view](argument).strip("\n")


def relink(text: str, page: Path) -> str:
    """Rewrite the relative links of a block rendered for benchmarks/results/ so that they work from `page`."""

    def move(match: re.Match) -> str:
        target = match.group("target")
        if re.match(r"[a-z]+:|#|/", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        moved = os.path.relpath(RESULTS / path, page.resolve().parent).replace(os.sep, "/")
        return f"{match.group(1)}{moved}{'#' + anchor if anchor else ''}{match.group(3)}"

    return LINK.sub(move, text)


def blocks(text: str) -> list[tuple[str, str]]:
    """(name, content) of every rendered block of a page, content without its surrounding newlines."""
    return [(m.group("name"), m.group("body").strip("\n")) for m in BLOCK.finditer(text)]


def refresh(text: str, page: Path) -> str:
    """The page with every rendered block rendered again."""
    return BLOCK.sub(lambda m: f"<!-- rendered: {m.group('name')} -->\n{relink(render_block(m.group('name')), page)}\n"
                               "<!-- /rendered -->", text)


def pages() -> list[Path]:
    """README.md and every markdown page under docs/."""
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


# ---------------------------------------------------------------------------- whole pages
def _frontier(path: Path) -> str:
    return _function("frontier_render:markdown")(json.loads(path.read_text()))


def _ranking_groups(path: Path) -> str:
    with tempfile.TemporaryDirectory() as folder:  # its render also draws the picture
        return _function("ranking_groups_render:render")(path, Path(folder) / "ranking.md", Path(folder) / "ranking_quality_speed.png")


def _labelling(path: Path) -> str:
    return _function("labelling:render")(json.loads(path.read_text()))


def _deployment(path: Path) -> str:
    return _function("deployment:render")(json.loads(path.read_text()))


def _quickstart(path: Path) -> str:
    return _function("quickstart:render")(json.loads(path.read_text()))


def _embedding(path: Path) -> str:
    with tempfile.TemporaryDirectory() as folder:
        return _function("embedding:render")(SimpleNamespace(results=path.parent, docs=Path(folder)))


@dataclass(frozen=True)
class WholePage:
    """A page a script renders whole: its results JSON, the page's text from it, the script and its render mode."""

    results: Path
    text: Callable[[Path], str]
    script: str
    render_mode: str = "--render"

    @property
    def command(self) -> str:
        return f"python benchmarks/{self.script}"

    def write(self) -> None:
        """The script's own render mode: the page and its pictures (it may import torch: a subprocess)."""
        subprocess.run([sys.executable, str(HERE / self.script), self.render_mode], cwd=REPO, check=True, capture_output=True)


WHOLE_PAGES = {
    DOCS / "results" / "frontier.md": WholePage(RESULTS / "frontier.json", _frontier, "frontier.py"),
    DOCS / "results" / "ranking.md": WholePage(RESULTS / "ranking_groups.json", _ranking_groups, "ranking_groups.py", "render"),
    DOCS / "results" / "labelling.md": WholePage(RESULTS / "labelling.json", _labelling, "labelling.py"),
    DOCS / "results" / "deployment.md": WholePage(RESULTS / "deployment.json", _deployment, "deployment.py"),
    DOCS / "results" / "embedding.md": WholePage(RESULTS / "embedding.json", _embedding, "embedding.py"),
    DOCS / "results" / "quickstart.md": WholePage(RESULTS / "quickstart.json", _quickstart, "quickstart.py"),
}
NO_RESULTS = "No results yet"


def has_rows(path: Path) -> bool:
    """Whether a whole page's JSON exists with something to show (frontier's file can exist with no rows)."""
    return path.exists() and json.loads(path.read_text()).get("rows", True) != []


def whole_page_problem(page: Path) -> str | None:
    """What is wrong with a whole page: it differs from its JSON's render, or, without results, lacks the note."""
    whole = WHOLE_PAGES[page]
    text = page.read_text() if page.exists() else ""
    if has_rows(whole.results):
        return None if text == whole.text(whole.results) else f"{page.relative_to(REPO)}: differs from what {whole.results.name} renders"
    if NO_RESULTS not in text or whole.command not in text:
        return f"{page.relative_to(REPO)}: no {whole.results.name} yet, so the page must say {NO_RESULTS!r} and give `{whole.command}`"
    return None


# ---------------------------------------------------------------------------- all of it
def render_all(check: bool = False) -> list[str]:
    """Render every results/*.md, whole page and block; write them (or, with `check`, only compare). Returns the differences."""
    differences = []

    def settle(path: Path, fresh: str, what: str) -> None:
        if path.read_text() != fresh:
            differences.append(what)
            if not check:
                path.write_text(fresh)

    for json_path in sorted(RESULTS.glob("*.json")):
        payload = json.loads(json_path.read_text())
        if has_results_markdown(payload):
            settle(json_path.with_suffix(".md"), results_markdown(payload), f"{json_path.with_suffix('.md').relative_to(REPO)}")
    for page, whole in WHOLE_PAGES.items():
        if problem := whole_page_problem(page):
            differences.append(problem)
            if not check and has_rows(whole.results):
                whole.write()
    for page in pages():
        text = page.read_text()
        fresh = refresh(text, page)
        if fresh != text:
            old, new = dict(blocks(text)), dict(blocks(fresh))
            names = [name for name in new if old.get(name) != new[name]]
            settle(page, fresh, f"{page.relative_to(REPO)}: blocks {', '.join(names)}")
    return differences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when anything differs")
    opts = parser.parse_args()
    differences = render_all(check=opts.check)
    for line in differences:
        print(("differs: " if opts.check else "rendered: ") + line)
    if opts.check and differences:
        sys.exit(1)


if __name__ == "__main__":
    main()
