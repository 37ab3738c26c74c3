"""Every figure is declared once (kvreg/figures/declarations.py): outside kvreg/figures/, code reads it
from a view or evaluates its declaration (kvreg.figures.python.figure_value), never re-derives it.

Read from the syntax tree (comments and docstrings say "80 * 2**30" freely): no byte count is
divided or multiplied by 2**30 by hand, and no value computed by hand is stored under a declared
figure's name. Each exception is named below with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kvreg.figures.declarations import FIGURES

ROOT = Path(__file__).resolve().parent.parent
KVREG = ROOT / "kvreg"

# ---------------------------------------------------------------- bytes <-> GiB by hand

# Files where converting between bytes and GiB is the job itself.
GIB_FILES = {
    "kvreg/core/units.py": "parses and prints the sizes people type (80GiB is 80 x 2^30 bytes)",
    "kvreg/core/enginelog.py": "reads engine startup logs, which print GiB",
}
# Functions that turn an engine log's GiB readings into bytes, or hold registry bytes against them.
GIB_FUNCTIONS = {
    ("kvreg/app/calibrate.py", "_reported_gib"): "a GPU row's reported memory in GiB, to match and compare a log's total",
    ("kvreg/app/calibrate.py", "measured_terms"): "the log's measured terms (GiB) as deployment inputs' bytes",
    ("kvreg/app/calibrate.py", "sglang_in_use"): "SGLang's logged available memory (GiB) as bytes in use",
    ("kvreg/app/calibrate.py", "calibrate_plan_from_log"): "the log's measured terms (GiB) stored as a plan's bytes",
}


def _is_gib(node: ast.expr) -> bool:
    """2**30 in any spelling: 2**30, 1024**3, 1073741824, or the GIB constants."""
    if isinstance(node, ast.Name) and node.id in ("GIB", "GiB_bytes"):
        return True
    if isinstance(node, ast.Attribute) and node.attr == "GIB":
        return True
    try:
        value = ast.literal_eval(node) if isinstance(node, ast.Constant) else None
        if value is None and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            value = ast.literal_eval(node.left) ** ast.literal_eval(node.right)
    except (ValueError, TypeError):
        return False
    return isinstance(value, int) and not isinstance(value, bool) and value == 2**30


def gib_conversions(source: str) -> list[tuple[int, str | None, str]]:
    """(line, enclosing function, text) of each `x / 2**30`, `x * 2**30` and the like in `source`."""
    found = []

    def visit(node: ast.AST, function: str | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Mult, ast.FloorDiv))
                and (_is_gib(node.right) or (isinstance(node.op, ast.Mult) and _is_gib(node.left)))):
            found.append((node.lineno, function, ast.unparse(node)))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), None)
    return found


# ---------------------------------------------------------------- a figure's name given a hand-made value

# Names that are a declared figure's but hold something else here.
NAME_EXCEPTIONS = {
    ("kvreg/core/enginelog.py", "kv_cache_tokens"): "what the engine's log printed (or V0's blocks x block_size)",
    ("kvreg/core/enginelog.py", "max_concurrency"): "what the engine's log printed, compared with the figure",
    ("kvreg/export/xlsx.py", "fits"): "the letter of the sheet's fits column, for a conditional format",
    ("kvreg/report/compare.py", "reason"): "the text of an error reading the previous report",
}


def _is_read(value: ast.expr, name: str) -> bool:
    """A value that is not computed here: a constant, a name or field read (a view row's column), a
    .get() of one, or the declaration evaluated by figure_value(name, ...)."""
    if isinstance(value, (ast.Constant, ast.Name, ast.Attribute, ast.Subscript, ast.Dict)):
        return not any(isinstance(n, (ast.BinOp, ast.Call)) for n in ast.walk(value))
    if isinstance(value, ast.Call):
        f = value.func
        if isinstance(f, ast.Name) and f.id == "figure_value":
            return bool(value.args) and isinstance(value.args[0], ast.Constant) and value.args[0].value == name
        if isinstance(f, ast.Attribute) and f.attr == "get":
            return all(_is_read(a, name) for a in value.args)
    return False


def figure_assignments(source: str, figures: set[str]) -> list[tuple[int, str, str]]:
    """(line, figure, value) wherever `source` stores a value it computed under a figure's name: as a
    variable or attribute, a ["key"], a dict display's key or a keyword argument."""
    found = []
    for node in ast.walk(ast.parse(source)):
        pairs: list[tuple[str | None, ast.expr | None]] = []
        if isinstance(node, ast.Assign):
            pairs = [(_target_name(t), node.value) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            pairs = [(_target_name(node.target), node.value)]
        elif isinstance(node, ast.Dict):
            pairs = [(k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else None, v)
                     for k, v in zip(node.keys, node.values)]
        elif isinstance(node, ast.Call):
            pairs = [(k.arg, k.value) for k in node.keywords]
        for name, value in pairs:
            if name in figures and value is not None and not _is_read(value, name):
                found.append((node.lineno, name, ast.unparse(value)))
    return found


def _target_name(t: ast.expr) -> str | None:
    if isinstance(t, ast.Name):
        return t.id
    if isinstance(t, ast.Attribute):
        return t.attr
    if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
        return t.slice.value
    return None


def _sources():
    for path in sorted(KVREG.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith("kvreg/figures/"):
            yield rel, path.read_text(encoding="utf-8")


# ---------------------------------------------------------------- the checks


def test_no_bytes_to_gib_by_hand():
    found = [f"{rel}:{line} in {function}: {text}" for rel, source in _sources() if rel not in GIB_FILES
             for line, function, text in gib_conversions(source) if (rel, function) not in GIB_FUNCTIONS]
    assert found == [], "GiB figures are declared (memory_gib, kv_pool_gib_per_gpu, ...): read or figure_value them"


def test_no_figure_is_computed_by_hand():
    figures = set(FIGURES)
    found = [f"{rel}:{line}: {name} = {value}" for rel, source in _sources()
             for line, name, value in figure_assignments(source, figures) if (rel, name) not in NAME_EXCEPTIONS]
    assert found == [], "read the figure from its view or evaluate it with kvreg.figures.python.figure_value"


def test_every_exception_is_still_needed():
    """An exception whose code has gone must go too, or it would hide the next one."""
    sources = dict(_sources())
    for rel in GIB_FILES:
        assert rel in sources
    used = {(rel, f) for rel, s in sources.items() for _l, f, _t in gib_conversions(s)}
    assert set(GIB_FUNCTIONS) - used == set()
    figures = set(FIGURES)
    named = {(rel, n) for rel, s in sources.items() for _l, n, _v in figure_assignments(s, figures)}
    assert set(NAME_EXCEPTIONS) - named == set()
    assert {n for _rel, n in NAME_EXCEPTIONS} <= figures


# The checks can fail: the lines issue 14 removed, and their allowed forms.
@pytest.mark.parametrize("line, caught", [
    ('g["memory_gib"] = g["memory_bytes"] / 2**30 if g["memory_bytes"] else None', True),  # web/app.py before
    ('out["kv_cache_gib"] = measured["kv_pool_bytes_per_gpu"] / GIB', True),  # calibrate.py before
    ("gib = nbytes / (1024 ** 3)", True),
    ("gib = nbytes / 1073741824", True),
    ("nbytes = 80 * 2 ** 30", True),
    ('g["memory_gib"] = figure_value("memory_gib", g)', False),
    ('x = 2**30  # a constant alone converts nothing', False),
    ("n = nbytes / 2**20", False),  # MiB: another unit
])
def test_gib_check_catches(line, caught):
    assert bool(gib_conversions(line)) is caught


@pytest.mark.parametrize("line, caught", [
    ('g["memory_gib"] = g["memory_bytes"] / 2**30 if g["memory_bytes"] else None', True),  # web/app.py before
    ('row = {"weights_gb": r["weights_bytes"] / 1e9}', True),
    ("kv_pool_gib_per_gpu = pool / GIB", True),
    ("q.max_concurrency = round(pool / per_seq)", True),
    ('out(memory_gib=helper(g))', True),
    ('g["memory_gib"] = figure_value("kv_pool_gib_per_gpu", g)', True),  # another figure's declaration
    ('g["memory_gib"] = figure_value("memory_gib", g)', False),
    ('row = {"weights_gb": r["weights_gb"], "fits": r.get("fits")}', False),  # read from a view row
    ('totals = {"gpus_needed": 0}', False),
])
def test_name_check_catches(line, caught):
    assert bool(figure_assignments(line, set(FIGURES))) is caught
