"""A declared figure evaluated in Python, for a row that no view carries (a GPU in `kvreg gpu list`,
in the report's GPU table): the same expression tree the SQL and Excel compilers read, so the value
is the declaration's, never a second formula.

Arithmetic only (constants, inputs, other figures, + - * /), with SQL's rules: NULL in, NULL out; a
zero divisor gives NULL. A figure with functions (if, ceil, ...) is read from its view instead.
"""

from __future__ import annotations

from collections.abc import Mapping

from .declarations import FIGURES
from .expr import Const, Expr, Input, Op, Ref

_ARITHMETIC = {"+": float.__add__, "-": float.__sub__, "*": float.__mul__, "/": float.__truediv__}


def figure_value(name: str, row: Mapping[str, object]) -> float | None:
    """The declared figure `name` for one row of inputs (column name -> value)."""
    return evaluate(FIGURES[name].expr, row)


def evaluate(e: Expr, row: Mapping[str, object]) -> float | None:
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Input):
        return row[e.name]
    if isinstance(e, Ref):
        return evaluate(FIGURES[e.name].expr, row)
    if isinstance(e, Op) and e.op in _ARITHMETIC:
        a, b = evaluate(e.a, row), evaluate(e.b, row)
        if a is None or b is None or (e.op == "/" and b == 0):
            return None
        return _ARITHMETIC[e.op](float(a), float(b))
    raise ValueError(f"{e!r} is not arithmetic: read this figure from its view")
