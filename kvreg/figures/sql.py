"""The SQL target: a figure's expression tree as an SQL expression, for SQLite and PostgreSQL.

Every construct is spelled here, once; where the two databases differ, a flag of the dialect
(`Dialect`) says so, and the compiler reads the flag, never the dialect's name:

- Division is always real division (SQLite would truncate ``7/2`` to 3) and a zero divisor
  gives NULL (SQLite does; PostgreSQL would raise: ``zero_divide_raises`` adds NULLIF).
- ``floor``/``ceil`` do not rely on SQLite's optional math functions, and never use
  ``CAST(x AS INTEGER)`` on PostgreSQL (``cast_rounds``: it rounds there, but truncates in SQLite).
- Booleans are 0/1 integers, as in the workbook and in Python.
- Literals are typed for PostgreSQL (``typed_literals``: ``DOUBLE PRECISION``, never
  single-precision ``REAL``).

The views (kvreg.figures.views) and the procurement aggregates (kvreg.figures.aggregates) say
what to compile; this module says how.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .expr import Expr, walk

Resolver = Callable[[str], str]


@dataclass(frozen=True)
class Dialect:
    name: str
    typed_literals: bool  # CAST(1.5 AS DOUBLE PRECISION), CAST(2 AS BIGINT): PostgreSQL types a bare literal narrowly
    zero_divide_raises: bool  # x / 0 and MOD(x, 0) raise (PostgreSQL): the divisor goes through NULLIF
    cast_rounds: bool  # CAST(x AS INTEGER) rounds (PostgreSQL): floor/ceil are FLOOR/CEIL, not CAST arithmetic
    printf: bool  # printf() formats numbers (SQLite); else TO_CHAR (PostgreSQL)
    instr: bool  # instr() finds text (SQLite); else strpos (PostgreSQL)
    native_min_max: bool  # scalar min()/max() of two values that are never NULL (SQLite; see SqlCompiler)
    # LEAST()/GREATEST() for every min/max (PostgreSQL): they skip NULLs and keep the first of equal values,
    # as kvreg's min/max do, and name each operand once where the CASE names one three times (nested, the
    # latency limits' SQL grew to 68 KB for one figure).
    least_greatest: bool
    sum_widens: bool  # SUM of integers is NUMERIC (PostgreSQL; Decimal in Python): an integer sum is cast back
    # An OFFSET keeps a subquery or CTE its own step: both databases otherwise flatten one read once,
    # pasting its expressions into every reference above it (10x slower to prepare and to run).
    fence: str
    # What follows a step's name and AS: PostgreSQL plans a chain of inlined CTEs for about 450 ms per
    # query (the execution takes 5 ms); MATERIALIZED makes each layer planned on its own (74 ms).
    cte_step: str


SQLITE = Dialect("sqlite", typed_literals=False, zero_divide_raises=False, cast_rounds=False, printf=True,
                 instr=True, native_min_max=True, least_greatest=False, sum_widens=False, fence=" LIMIT -1 OFFSET 0",
                 cte_step="")
POSTGRESQL = Dialect("postgresql", typed_literals=True, zero_divide_raises=True, cast_rounds=True, printf=False,
                     instr=False, native_min_max=False, least_greatest=True, sum_widens=True, fence=" OFFSET 0",
                     cte_step=" MATERIALIZED")
DIALECTS = {d.name: d for d in (SQLITE, POSTGRESQL)}


def fence(dialect: str) -> str:
    """What ends a subquery or CTE that must stay its own step (Dialect.fence)."""
    return DIALECTS[dialect].fence


def step_as(dialect: str) -> str:
    """`AS` for a CTE that is a step of its own, with what the dialect needs after it (Dialect.cte_step)."""
    return "AS" + DIALECTS[dialect].cte_step


def integer_sum(total: str, dialect: str) -> str:
    """An SQL sum of integers, as an integer in every dialect (Dialect.sum_widens)."""
    return f"CAST({total} AS BIGINT)" if DIALECTS[dialect].sum_widens else total


class SqlCompiler:
    """An expression in one dialect; `inputs(name)` and `refs(name)` spell a column.

    `never_null(e)`: whether SQL can never give NULL for `e` (kvreg.figures.facts.never_null_in_sql);
    where the dialect has `native_min_max`, min/max of two such expressions is the database's own
    min()/max(). Without it, every min/max is the CASE that skips a NULL, or, where the dialect has
    `least_greatest`, LEAST()/GREATEST(), which skip NULLs themselves.

    The walk's context is whether the node is compiled as a condition (an `if`'s test, the operands
    of and/or/not) rather than as a 0/1 value: a comparison is then `a < b`, isnull `x IS NULL`, and
    and/or/not nest without a CASE each. Only a WHEN sees a condition, where NULL and false act
    alike, so the value is the same; the text is shorter, and every connection parses the views'
    text and prepares their expression trees again (about half the time of a plan command).
    """

    def __init__(self, inputs: Resolver, refs: Resolver, never_null: Callable[[Expr], bool] | None = None,
                 dialect: str = "sqlite"):
        self.inputs = inputs
        self.refs = refs
        self.never_null = never_null
        self.d = DIALECTS[dialect]

    def compile(self, e: Expr) -> str:
        """`e` as a value."""
        return walk(e, self, False)

    def _condition(self, e: Expr) -> str:
        return walk(e, self, True)

    def _tested(self, e: Expr) -> str:
        """A construct whose SQL is a value, asked for as a condition: tested against 0."""
        return f"({self.compile(e)}) <> 0"

    # ---- names and constants

    def const(self, e, cond):
        v = e.value
        if self.d.typed_literals and isinstance(v, float):
            text = f"CAST({v!r} AS DOUBLE PRECISION)"
        elif self.d.typed_literals and isinstance(v, int) and not isinstance(v, bool):
            text = f"CAST({v} AS BIGINT)"
        elif v is None:
            text = "NULL"
        elif isinstance(v, bool):
            text = "1" if v else "0"
        elif isinstance(v, (int, float)):
            text = repr(v) if isinstance(v, float) else str(v)
        else:
            text = "'" + str(v).replace("'", "''") + "'"
        return f"({text}) <> 0" if cond else text

    def input(self, e, cond):
        return f"({self.inputs(e.name)}) <> 0" if cond else self.inputs(e.name)

    def ref(self, e, cond):
        return f"({self.refs(e.name)}) <> 0" if cond else self.refs(e.name)

    # ---- operators

    def arith(self, e, cond):
        if cond:
            return self._tested(e)
        return f"({self.compile(e.a)} {e.op} {self.compile(e.b)})"

    def divide(self, e, cond):
        if cond:
            return self._tested(e)
        a, b = self.compile(e.a), self.compile(e.b)
        if self.d.zero_divide_raises:
            return f"(CAST({a} AS DOUBLE PRECISION) / NULLIF({b}, 0))"
        return f"(({a}) * 1.0 / {b})"  # x / 0 is NULL already

    def compare(self, e, cond):
        a, b = self.compile(e.a), self.compile(e.b)
        if cond:
            return f"({a} {e.op} {b})"
        return f"(CASE WHEN {a} {e.op} {b} THEN 1 ELSE 0 END)"

    # ---- conditions

    def f_if(self, e, cond):
        if cond:
            return self._tested(e)
        c, t, o = e.args
        return f"(CASE WHEN {self._condition(c)} THEN {self.compile(t)} ELSE {self.compile(o)} END)"

    def _logic(self, e, cond, text):
        return text if cond else f"(CASE WHEN {text} THEN 1 ELSE 0 END)"

    def f_and(self, e, cond):
        return self._logic(e, cond, "(" + " AND ".join(self._condition(x) for x in e.args) + ")")

    def f_or(self, e, cond):
        return self._logic(e, cond, "(" + " OR ".join(self._condition(x) for x in e.args) + ")")

    def f_not(self, e, cond):
        return self._logic(e, cond, f"(NOT {self._condition(e.args[0])})")

    def f_isnull(self, e, cond):
        x = self.compile(e.args[0])
        return f"({x} IS NULL)" if cond else f"(CASE WHEN {x} IS NULL THEN 1 ELSE 0 END)"

    # ---- functions

    def _func(self, e, cond, spell):
        """A function whose SQL is a value: `spell` gets its compiled arguments."""
        if cond:
            return self._tested(e)
        return spell(*[self.compile(x) for x in e.args])

    def f_coalesce(self, e, cond):
        return self._func(e, cond, lambda a, b: f"COALESCE({a}, {b})")

    def _min_max(self, e, cond, op):
        if cond:
            return self._tested(e)
        a, b = self.compile(e.args[0]), self.compile(e.args[1])
        if self.d.least_greatest:
            return f"LEAST({a}, {b})" if op == "<=" else f"GREATEST({a}, {b})"
        if (self.d.native_min_max and self.never_null is not None and self.never_null(e.args[0])
                and self.never_null(e.args[1])):
            # Of equal values SQLite's min() returns the last and max() the first: both keep `a` on a
            # tie, as the CASE does (2 and 2.0 are equal but print differently).
            return f"min({b}, {a})" if op == "<=" else f"max({a}, {b})"
        # SQLite's scalar min() returns NULL if any argument is NULL; PostgreSQL's LEAST() and Excel's
        # MIN() skip NULLs. The CASE skips them too, on both SQL targets, whichever side is NULL.
        return f"(CASE WHEN {b} IS NULL OR {a} {op} {b} THEN {a} ELSE {b} END)"

    def f_min(self, e, cond):
        return self._min_max(e, cond, "<=")

    def f_max(self, e, cond):
        return self._min_max(e, cond, ">=")

    def f_floor(self, e, cond):
        if self.d.cast_rounds:
            return self._func(e, cond, lambda x: f"CAST(FLOOR({x}) AS BIGINT)")
        # CAST truncates toward zero in SQLite; step down for negative non-integers (a comparison
        # is 0 or 1 there; NULL stays NULL, as NULL + 0 was).
        return self._func(e, cond, lambda x: f"(CAST({x} AS INTEGER) - ({x} < CAST({x} AS INTEGER)))")

    def f_ceil(self, e, cond):
        if self.d.cast_rounds:
            return self._func(e, cond, lambda x: f"CAST(CEIL({x}) AS BIGINT)")
        return self._func(e, cond, lambda x: f"(CAST({x} AS INTEGER) + ({x} > CAST({x} AS INTEGER)))")

    def f_mod(self, e, cond):
        if self.d.zero_divide_raises:
            return self._func(e, cond, lambda a, b: f"MOD({a}, NULLIF({b}, 0))")
        return self._func(e, cond, lambda a, b: f"({a} % {b})")  # NULL when b is 0, as x / 0

    def f_contains(self, e, cond):
        if self.d.instr:
            return self._func(e, cond, lambda t, n: f"(CASE WHEN instr(lower({t}), {n}) > 0 THEN 1 ELSE 0 END)")
        # strpos, not PostgreSQL's LIKE or SQLite's instr: the needle is compared as text
        return self._func(e, cond, lambda t, n: f"(CASE WHEN strpos(lower({t}), CAST({n} AS TEXT)) > 0 THEN 1 ELSE 0 END)")

    def f_concat(self, e, cond):
        return self._func(e, cond, lambda *xs: "(" + " || ".join(xs) + ")")

    def f_fmt(self, e, cond):
        if cond:
            return self._tested(e)
        # The decimals are a digit count spelled into a format string, not an SQL value
        # (PostgreSQL would otherwise get `CAST(2 AS BIGINT)` inside TO_CHAR's pattern).
        x, d = self.compile(e.args[0]), int(e.args[1].value)
        if self.d.printf:
            # printf turns NULL into '0.00'; PostgreSQL's TO_CHAR keeps it NULL.
            return f"(CASE WHEN {x} IS NULL THEN NULL ELSE printf('%.{d}f', {x}) END)"
        return f"TRIM(TO_CHAR(CAST({x} AS NUMERIC), 'FM999999999999990.{'0' * d}'))"

    def f_grouped(self, e, cond):
        if self.d.printf:
            # printf's ',' flag groups the digits of %d (SQLite 3.38 and later)
            return self._func(e, cond, lambda x: f"(CASE WHEN {x} IS NULL THEN NULL ELSE printf('%,d', {x}) END)")
        return self._func(e, cond, lambda x: f"TO_CHAR(CAST({x} AS NUMERIC), 'FM999,999,999,999,990')")


def compiler(dialect: str, prefix: str = "src.", never_null: Callable[[Expr], bool] | None = None) -> SqlCompiler:
    """The compiler for one layer of a view: every name is a column `prefix + name` of the layer below."""
    resolve = lambda name: f"{prefix}{name}"  # noqa: E731 - every name is a column of the layer below
    return SqlCompiler(resolve, resolve, never_null, dialect)

