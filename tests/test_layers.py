"""The one-way layers (docs/ARCHITECTURE.md), checked by import-linter's contracts in pyproject.toml.

import-linter counts every import in a module, function-local ones too, so a lazy import cannot hide
an upward dependency or a cycle. Skipped only when import-linter is not installed on a developer's
machine; CI installs it with the test extra and fails instead of skipping.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _need(module: str):
    if os.environ.get("CI") == "true":
        return __import__(module)
    return pytest.importorskip(module, reason=f"{module} is not installed: pip install -e '.[test]'")


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def test_contracts_hold(capsys):
    _need("importlinter")
    from importlinter.cli import lint_imports

    code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Contracts: 3 kept, 0 broken." in out


def test_every_top_level_module_is_in_a_layer():
    """A new folder must take a place in the layers, or the contract would say nothing about it; and the floor
    plan is the folder list: no module lies loose in kvreg/ beside __init__ and __main__."""
    layers = next(c for c in _contracts() if c["id"] == "layers")["layers"]
    named = {name.strip() for layer in layers for name in layer.replace("|", ":").split(":")}
    found = {p.stem for p in (ROOT / "kvreg").glob("*.py") if p.stem != "__init__"}
    found |= {p.parent.name for p in (ROOT / "kvreg").glob("*/__init__.py")}
    assert found - named == set()
    assert named - found == set()  # and no layer names a module that is gone
    assert len(named) == 11  # __main__ and ten folders, one a layer
    loose = {p.name for p in (ROOT / "kvreg").glob("*.py")} - {"__init__.py", "__main__.py"}
    assert loose == set()


def test_no_import_cycle_between_modules():
    """Not even between siblings of one layer (which the layers contract lets import each other)."""
    grimp = _need("grimp")
    graph = grimp.build_graph("kvreg", cache_dir=None)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    cycles = _strongly_connected(edges)
    assert cycles == []


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: every group of two or more modules that import each other, directly or not."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _strongly_connected(edges) == [["a", "b", "c"]]


def test_core_loads_only_the_standard_library():
    """Importing every module of kvreg.core loads no other kvreg module and nothing outside the stdlib."""
    modules = sorted(f"kvreg.core.{p.stem}" for p in (ROOT / "kvreg" / "core").glob("*.py") if p.stem != "__init__")
    assert modules == ["kvreg.core.enginelog", "kvreg.core.errors", "kvreg.core.limits", "kvreg.core.rules",
                       "kvreg.core.text", "kvreg.core.units"]
    code = (f"import sys; before = set(sys.modules); import {', '.join(modules)}; "
            "new = sorted(m.split('.')[0] for m in set(sys.modules) - before); "
            "print(sorted(m for m in sys.modules if m.startswith('kvreg'))); "
            "print(sorted({m for m in new if m not in sys.stdlib_module_names and m != 'kvreg'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.splitlines() == [str(["kvreg", "kvreg.core", *modules]), "[]"]


# Commands import what they run inside the command function (start-up stays fast), so the CLI and
# the web page's handlers are the one place a function-local import needs no comment of its own.
COMMAND_PACKAGES = ("kvreg/cli/", "kvreg/web/")


def local_imports_without_a_reason(root: Path = ROOT) -> list[str]:
    """Every import inside a function, outside the command packages, that no comment explains: a comment on
    its line, or on a line of the run of imports, blank lines and comments just above it ("# lazy: ...")."""
    import ast

    found = []
    for path in sorted((root / "kvreg").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(COMMAND_PACKAGES):
            continue
        lines = path.read_text(encoding="utf-8").split("\n")
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and not _explained(lines, node.lineno):
                    found.append(f"{rel}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return sorted(set(found))


def _explained(lines: list[str], lineno: int) -> bool:
    i = lineno - 1
    if "#" in lines[i]:
        return True
    while i > 0:
        i -= 1
        text = lines[i].strip()
        if text.startswith("#"):
            return True
        if text and not text.startswith(("import ", "from ")):
            return False
    return False


def test_function_local_imports_say_why():
    """No import hides inside a function to dodge a cycle: a module imports what it uses at its top, and
    an import left in a function (a heavy library that only some calls need) says why."""
    assert local_imports_without_a_reason() == []


def test_an_unexplained_local_import_is_found(tmp_path):
    (tmp_path / "kvreg").mkdir()
    (tmp_path / "kvreg" / "m.py").write_text(
        "def f():\n    import json\n    return json\n\n\n"
        "def g():\n    # lazy: csv only for g\n    import csv\n    from io import StringIO\n    return csv, StringIO\n",
        encoding="utf-8")
    assert local_imports_without_a_reason(tmp_path) == ["kvreg/m.py:2: import json"]


def private_names_imported(root: Path = ROOT) -> list[str]:
    """Every `from kvreg.x import _name` (or relative) in kvreg/: a name another module needs is part of its
    module's interface and is named without the underscore."""
    import ast

    found = []
    for path in sorted((root / "kvreg").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("kvreg")):
                found += [f"{rel}:{node.lineno}: {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_names():
    assert private_names_imported() == []


def test_a_private_import_is_found(tmp_path):
    (tmp_path / "kvreg").mkdir()
    (tmp_path / "kvreg" / "m.py").write_text(
        "from kvreg.figures.views import GRAIN, _layers\nfrom .n import __version__, ok\n", encoding="utf-8")
    assert private_names_imported(tmp_path) == ["kvreg/m.py:1: _layers"]
