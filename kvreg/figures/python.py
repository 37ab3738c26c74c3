"""The Python target: a figure's expression tree evaluated on Python values, with SQL's semantics.

NULL is None: arithmetic on it gives None, a comparison with it gives 0 (the compiled comparison is
a CASE), a zero divisor gives None, min/max skip it. Used for the values no view carries (a GPU row
in `kvreg gpu list` and the report's GPU table: `figure_value`, `with_figures`), for a figure at a
number of users the candidate's view row was not read for (kvreg.app.optimize), and by the tests that
hold the views to the declarations. One evaluator: the same tree the SQL and Excel targets compile.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Callable

from kvreg.core.units import fixed

from .declarations import FIGURES, inputs_of
from .expr import Expr, Input, Ref, names, walk

_ARITH = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
_COMPARE = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
            ">=": lambda a, b: a >= b, "=": lambda a, b: a == b, "<>": lambda a, b: a != b}


class PythonEvaluator:
    """`inputs(name)` and `refs(name)` give a name's value."""

    def __init__(self, inputs: Callable[[str], object], refs: Callable[[str], object]):
        self.inputs = inputs
        self.refs = refs

    def eval(self, e: Expr):
        return walk(e, self)

    def _args(self, e):
        return [walk(x, self) for x in e.args]

    def const(self, e):
        return e.value

    def input(self, e):
        return self.inputs(e.name)

    def ref(self, e):
        return self.refs(e.name)

    def arith(self, e):
        a, b = walk(e.a, self), walk(e.b, self)
        return None if a is None or b is None else _ARITH[e.op](a, b)

    def divide(self, e):
        a, b = walk(e.a, self), walk(e.b, self)
        return None if a is None or b is None or b == 0 else a / b

    def compare(self, e):
        a, b = walk(e.a, self), walk(e.b, self)
        # The compiled comparison is a CASE: a NULL operand makes it 0, not NULL.
        return 0 if a is None or b is None else int(_COMPARE[e.op](a, b))

    def f_if(self, e):
        c, t, o = e.args
        return walk(t, self) if walk(c, self) else walk(o, self)

    def f_and(self, e):
        return int(all(self._args(e)))

    def f_or(self, e):
        return int(any(self._args(e)))

    def f_not(self, e):
        return int(not walk(e.args[0], self))

    def f_isnull(self, e):
        return int(walk(e.args[0], self) is None)

    def f_coalesce(self, e):
        a, b = self._args(e)
        return a if a is not None else b

    def _present(self, e, pick):
        present = [v for v in self._args(e) if v is not None]
        return pick(present) if present else None

    def f_min(self, e):
        return self._present(e, min)

    def f_max(self, e):
        return self._present(e, max)

    def _strict(self, e, fn):
        vals = self._args(e)
        return None if any(v is None for v in vals) else fn(*vals)

    def f_floor(self, e):
        return self._strict(e, math.floor)

    def f_ceil(self, e):
        return self._strict(e, math.ceil)

    def f_mod(self, e):
        # SQLite's % and PostgreSQL's MOD keep the dividend's sign (-7 mod 3 = -1); Python's % does not.
        return self._strict(e, lambda a, b: None if b == 0 else _remainder(a, b))

    def f_concat(self, e):
        return self._strict(e, lambda *vals: "".join(str(v) for v in vals))

    def f_contains(self, e):
        return self._strict(e, lambda text, needle: int(needle in str(text).lower()))

    def f_fmt(self, e):
        return self._strict(e, _fixed)

    def f_grouped(self, e):
        return self._strict(e, lambda x: f"{int(x):,}")


def _fixed(x, decimals: int) -> str:
    """fmt's text: kvreg.core.units.fixed (halves away from zero on the shortest decimal form)."""
    return fixed(x, decimals)



def _remainder(a, b):
    """The remainder with the dividend's sign, as SQLite's % and PostgreSQL's MOD give it."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


# --------------------------------------------------------------------------- a row no view carries


def evaluate(e: Expr, row: Mapping[str, object]):
    """The expression on one row of inputs (column name -> value), the figures it refers to evaluated
    from their declarations. A name the row does not hold is refused: such a figure is read from the
    view that has its inputs."""
    memo: dict[str, object] = {}

    def value(name: str):
        if name in row:
            return row[name]
        if name not in FIGURES:
            raise ValueError(f"{name} is not in the row: read this figure from its view")
        if name not in memo:
            memo[name] = walk(FIGURES[name].expr, ev)
        return memo[name]

    ev = PythonEvaluator(value, value)
    return ev.eval(e)


def figure_value(name: str, row: Mapping[str, object]):
    """The declared figure `name` for one row of inputs (column name -> value)."""
    return evaluate(FIGURES[name].expr, row)


def _figures_of(table: str) -> tuple[str, ...]:
    """The figures a row of `table` alone gives: they read its inputs only, through the figures they
    refer to (each declared before the figures that refer to it)."""
    have, given = set(inputs_of(table)), {}
    for name, f in FIGURES.items():
        given[name] = (all(n in have for n in names(f.expr, (Input,)))
                       and all(given.get(r, False) for r in names(f.expr, (Ref,))))
    return tuple(n for n in FIGURES if given[n])


# What `kvreg gpu list`, the web page and the report show beside a GPU's own columns: the GPU's memory
# in GiB, a figure a GPU row alone gives (held below). Other such figures (the latency model's link
# bandwidth) are read from the views where they are used.
GPU_FIGURES = ("memory_gib",)
assert set(GPU_FIGURES) <= set(_figures_of("gpu")), "a GPU figure reads only the GPU's own inputs"


def with_gpu_figures(row: Mapping[str, object]) -> dict:
    """A GPU row with every figure its inputs give (GPU_FIGURES) added."""
    return {**row, **{n: figure_value(n, row) for n in GPU_FIGURES}}
