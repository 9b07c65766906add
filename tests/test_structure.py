"""The package's shape: no import circle among `hf_distill` modules, no file over 500 lines, no function over 80.

Imports count when they run as the module is imported: at module level, in class bodies, under
`if`/`try` (not under `if TYPE_CHECKING:`, which never runs), never inside a function. Every form
counts: `import hf_distill.x`, `from hf_distill.x import y`, `from .x import y`, `from . import x`
(an edge to the submodule x, or to the module whose name y is). A module importing a package it
sits in (`from . import y` or `from .. import y` inside the package) is no circle: Python has that
package half-initialised already, the usual re-export pattern.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hf_distill"
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under `package` (a package is named by its __init__)."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_time_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported (no function bodies, no TYPE_CHECKING blocks)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse)
            else:  # class bodies, if/else, try/except/finally, with, for, while, match: all run at import
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, None) or [])
                for clause in [*getattr(node, "handlers", []), *getattr(node, "cases", [])]:
                    visit(clause.body)

    visit(tree.body)
    return found


def imported_modules(name: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The package modules one import statement of module `name` (file `path`) loads."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        if node.level:
            package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            base = package[: len(package) - node.level + 1]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        targets = [source] + [f"{source}.{alias.name}" for alias in node.names]
    found = set()
    for target in targets:  # the deepest package module named (importing a.b.c runs a.b.c's own code)
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package modules it imports at import time, without edges into its own enclosing packages."""
    modules = module_files(package)
    graph = {}
    for name, path in modules.items():
        edges = set()
        for node in import_time_imports(ast.parse(path.read_text(), str(path))):
            edges |= imported_modules(name, path, node, modules)
        graph[name] = {target for target in edges if not name.startswith(target + ".")}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (a -> b -> ... -> a) per strongly connected group of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                connect(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return [_circle_through(min(group), set(group), graph) for group in groups]


def _circle_through(start: str, group: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest path start -> ... -> start inside `group` (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(graph[module] & group):
                if target == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if module != start else [start, start]
                if target not in previous:
                    previous[target] = module
                    following.append(target)
        frontier = following
    raise AssertionError(f"{start} is in a strongly connected group but on no circle")


def long_files(package: Path, limit: int = MAX_FILE_LINES) -> dict[str, int]:
    sizes = {str(path.relative_to(package.parent)): len(path.read_text().splitlines()) for path in module_files(package).values()}
    return {path: lines for path, lines in sizes.items() if lines > limit}


def long_functions(package: Path, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """"path:qualified name" -> lines (the `def` line to the last line of the body), for every function over `limit`."""
    found = {}

    def visit(node: ast.AST, where: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                lines = child.end_lineno - child.lineno + 1
                if not isinstance(child, ast.ClassDef) and lines > limit:
                    found[f"{where}:{name}"] = lines
                name += "."
            visit(child, where, name)

    for path in module_files(package).values():
        visit(ast.parse(path.read_text(), str(path)), str(path.relative_to(package.parent)), "")
    return found


# ---------------------------------------------------------------------------- the package


def test_hf_distill_has_no_import_circle():
    circles = import_circles(import_graph(PACKAGE))
    assert circles == [], "import circles: " + "; ".join(" -> ".join(circle) for circle in circles)


def test_no_file_in_hf_distill_over_500_lines():
    assert long_files(PACKAGE) == {}


def test_no_function_in_hf_distill_over_80_lines():
    assert long_functions(PACKAGE) == {}


def test_the_graph_sees_the_package_imports():
    """The walk finds the imports it should: a check over an empty graph would pass for nothing."""
    graph = import_graph(PACKAGE)
    assert "hf_distill.trainer" in graph and "hf_distill.losses.emd_costs" in graph
    assert {"hf_distill.batch_keys", "hf_distill.losses.registry", "hf_distill.model_card"} <= graph["hf_distill.trainer"]
    assert "hf_distill.losses.layers" in graph["hf_distill.losses.emd_costs"]  # `from .layers import ...`
    assert "hf_distill" not in graph["hf_distill.trainer"]  # no edge into an enclosing package


# ---------------------------------------------------------------------------- the checks themselves


def _package(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    return package


@pytest.mark.parametrize(
    "a, b",
    [
        ("from .b import g\n", "from .a import f\n"),
        ("from . import b\n", "import pkg.a\n"),
        ("from pkg.b import g\n", "try:\n    from .a import f\nexcept ImportError:\n    pass\n"),
        ("from .b import g\n", "class C:\n    from .a import f\n"),
    ],
    ids=["relative from-import", "from . import / absolute import", "absolute / under try", "class body"],
)
def test_a_circle_is_found(tmp_path, a, b):
    package = _package(tmp_path, {"a.py": a + "def f(): pass\n", "b.py": b + "def g(): pass\n"})
    assert import_circles(import_graph(package)) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_a_circle_through_a_package_init_is_found(tmp_path):
    package = _package(tmp_path, {
        "trainer.py": "from .card import write\n",
        "card/__init__.py": "from .render import write\n",
        "card/render.py": "from ..trainer import Trainer\nwrite = 1\n",
    })
    assert import_circles(import_graph(package)) == [["pkg.card", "pkg.card.render", "pkg.trainer", "pkg.card"]]


def test_imports_that_do_not_run_at_import_time_make_no_circle(tmp_path):
    package = _package(tmp_path, {
        "a.py": "from .b import g\ndef f():\n    from .b import g\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n"
                "def g():\n    from .a import f\n    return f\n",
        "sub/__init__.py": "from .leaf import x\n",
        "sub/leaf.py": "from . import other\nfrom .. import a\nx = 1\n",  # into its own package: no circle
        "sub/other.py": "",
    })
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == set()
    assert graph["pkg.sub.leaf"] == {"pkg.sub.other", "pkg.a"}
    assert import_circles(graph) == []


def test_long_files_and_functions_are_found(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    package = _package(tmp_path, {
        "short.py": "def fits():\n" + body,  # 80 lines: allowed
        "long.py": "class K:\n    def method(self):\n" + "    " + body.replace("\n    ", "\n        ") + "        y = 0\n"
                   + "\n" * 420,
    })
    assert long_functions(package) == {"pkg/long.py:K.method": 81}
    assert long_files(package) == {"pkg/long.py": 502}
