"""A small expression tree for figure declarations, compiled to SQLite, PostgreSQL and Excel.

One tree, one generator per target (sqlglot's shape). The quirks each target needs are
handled here, once, so a declaration never has to think about them:

- Division is always real division (SQLite would truncate ``7/2`` to 3) and a zero divisor
  gives NULL in SQL (PostgreSQL would raise) and ``#DIV/0!`` in Excel.
- ``floor``/``ceil`` do not rely on SQLite's optional math functions, and never use
  ``CAST(x AS INTEGER)`` on PostgreSQL (it rounds there, but truncates in SQLite).
- Booleans are stored as 0/1 integers everywhere so the three targets agree on a value.
- Literals are typed for PostgreSQL (``DOUBLE PRECISION``, never single-precision ``REAL``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Callable, Iterable


class Expr:
    """Base node. Arithmetic and comparison operators build new nodes."""

    def _wrap(self, other) -> "Expr":
        return other if isinstance(other, Expr) else Const(other)

    def __add__(self, o):
        return Op("+", self, self._wrap(o))

    def __radd__(self, o):
        return Op("+", self._wrap(o), self)

    def __sub__(self, o):
        return Op("-", self, self._wrap(o))

    def __rsub__(self, o):
        return Op("-", self._wrap(o), self)

    def __mul__(self, o):
        return Op("*", self, self._wrap(o))

    def __rmul__(self, o):
        return Op("*", self._wrap(o), self)

    def __truediv__(self, o):
        return Op("/", self, self._wrap(o))

    def __rtruediv__(self, o):
        return Op("/", self._wrap(o), self)

    def __lt__(self, o):
        return Op("<", self, self._wrap(o))

    def __le__(self, o):
        return Op("<=", self, self._wrap(o))

    def __gt__(self, o):
        return Op(">", self, self._wrap(o))

    def __ge__(self, o):
        return Op(">=", self, self._wrap(o))

    def eq(self, o):
        return Op("=", self, self._wrap(o))

    def ne(self, o):
        return Op("<>", self, self._wrap(o))

    def children(self) -> Iterable["Expr"]:
        return ()

    def walk(self) -> Iterable["Expr"]:
        """This node and every node below it (depth first)."""
        stack: list[Expr] = [self]
        while stack:
            e = stack.pop()
            yield e
            stack.extend(e.children())


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int | float | str | None

    def __repr__(self):
        return repr(self.value)


@dataclass(frozen=True, eq=False)
class Input(Expr):
    """A column of the relation a view is computed over (a registry field or a plan setting)."""

    name: str

    def __repr__(self):
        return self.name


@dataclass(frozen=True, eq=False)
class Ref(Expr):
    """Another figure, by name."""

    name: str

    def __repr__(self):
        return self.name


@dataclass(frozen=True, eq=False)
class Op(Expr):
    op: str
    a: Expr
    b: Expr

    def children(self):
        return (self.a, self.b)

    def __repr__(self):
        return f"({self.a!r} {self.op} {self.b!r})"


@dataclass(frozen=True, eq=False)
class Func(Expr):
    """ceil, floor, min, max, if, and, or, not, isnull, coalesce, concat, fmt, grouped, mod, contains."""

    name: str
    args: tuple[Expr, ...]

    def children(self):
        return self.args

    def __repr__(self):
        return f"{self.name}({', '.join(map(repr, self.args))})"


def _e(x) -> Expr:
    return x if isinstance(x, Expr) else Const(x)


def ceil(x):
    return Func("ceil", (_e(x),))


def floor(x):
    return Func("floor", (_e(x),))


def least(a, b):
    return Func("min", (_e(a), _e(b)))


def greatest(a, b):
    return Func("max", (_e(a), _e(b)))


def if_(cond, then, otherwise):
    return Func("if", (_e(cond), _e(then), _e(otherwise)))


def and_(*xs):
    return Func("and", tuple(_e(x) for x in xs))


def or_(*xs):
    return Func("or", tuple(_e(x) for x in xs))


def not_(x):
    return Func("not", (_e(x),))


def isnull(x):
    return Func("isnull", (_e(x),))


def coalesce(a, b):
    return Func("coalesce", (_e(a), _e(b)))


def concat(*xs):
    return Func("concat", tuple(_e(x) for x in xs))


def fmt(x, decimals: int):
    """A number as text with a fixed number of decimals (for reasons shown to users)."""
    return Func("fmt", (_e(x), Const(decimals)))


def grouped(x):
    """A whole number as text with thousands separators, 8192 -> "8,192" (for reasons shown to users)."""
    return Func("grouped", (_e(x),))


def mod(a, b):
    return Func("mod", (_e(a), _e(b)))


def contains(text, needle: str):
    """1 when `text` holds `needle`, letters of either case (what vLLM's `"a100" in device_name.lower()` asks);
    `needle` is lower-case letters and digits, so no target reads it as a pattern."""
    assert needle.isalnum() and needle == needle.lower(), needle
    return Func("contains", (_e(text), Const(needle)))


# --------------------------------------------------------------------------- compilers

Resolver = Callable[[str], str]


class _Compiler:
    """Shared walk; subclasses say how each construct is spelled in their target."""

    concat_op = " || "

    def __init__(self, inputs: Resolver, refs: Resolver):
        self.inputs = inputs
        self.refs = refs

    def compile(self, e: Expr) -> str:
        if isinstance(e, Const):
            return self.const(e.value)
        if isinstance(e, Input):
            return self.inputs(e.name)
        if isinstance(e, Ref):
            return self.refs(e.name)
        if isinstance(e, Op):
            a, b = self.compile(e.a), self.compile(e.b)
            if e.op == "/":
                return self.divide(a, b)
            if e.op in ("<", "<=", ">", ">=", "=", "<>"):
                return self.compare(e.op, a, b)
            return f"({a} {e.op} {b})"
        if isinstance(e, Func):
            if e.name == "fmt":
                # The decimals are a digit count spelled into a format string, not a SQL value
                # (PostgreSQL would otherwise get `CAST(2 AS BIGINT)` inside TO_CHAR's pattern).
                return self.f_fmt(self.compile(e.args[0]), int(e.args[1].value))
            return getattr(self, "f_" + e.name)(*[self.compile(x) for x in e.args])
        raise TypeError(f"not an expression: {e!r}")


class SqlCompiler(_Compiler):
    dialect = "sqlite"

    def __init__(self, inputs: Resolver, refs: Resolver, never_null: Callable[[Expr], bool] | None = None):
        """`never_null(e)`: whether SQL can never give NULL for `e` (kvreg.figures.facts.never_null_in_sql);
        min/max of two such expressions is SQLite's own min()/max(). Without it, every min/max is the
        CASE that skips a NULL."""
        super().__init__(inputs, refs)
        self.never_null = never_null

    def const(self, v):
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return repr(v)
        return "'" + str(v).replace("'", "''") + "'"

    def divide(self, a, b):
        # SQLite's x / 0 is NULL already (PostgreSQL's raises: PostgresCompiler adds NULLIF).
        return f"(({a}) * 1.0 / {b})"

    def compare(self, op, a, b):
        return f"(CASE WHEN {a} {op} {b} THEN 1 ELSE 0 END)"

    # A condition (if's test, and/or/not's operands) is compiled as an SQL condition, not as a 0/1
    # value tested with `<> 0`: a comparison is `a < b`, isnull is `x IS NULL`, and/or/not nest
    # without a CASE each. Only the WHEN sees it, where NULL and false act alike, so the value is
    # the same; the text is shorter, and every connection parses the views' text and prepares
    # their expression trees again (about half the time of a plan command).
    def condition(self, e: Expr) -> str:
        if isinstance(e, Op) and e.op in ("<", "<=", ">", ">=", "=", "<>"):
            return f"({self.compile(e.a)} {e.op} {self.compile(e.b)})"
        if isinstance(e, Func) and e.name in ("and", "or"):
            return "(" + f" {e.name.upper()} ".join(self.condition(x) for x in e.args) + ")"
        if isinstance(e, Func) and e.name == "not":
            return f"(NOT {self.condition(e.args[0])})"
        if isinstance(e, Func) and e.name == "isnull":
            return f"({self.compile(e.args[0])} IS NULL)"
        return f"({self.compile(e)}) <> 0"

    def compile(self, e: Expr) -> str:
        if (isinstance(e, Func) and e.name in ("min", "max") and self.never_null is not None
                and self.never_null(e.args[0]) and self.never_null(e.args[1])):
            a, b = self.compile(e.args[0]), self.compile(e.args[1])
            # Of equal values SQLite's min() returns the last and max() the first: both keep `a` on a
            # tie, as the CASE does (2 and 2.0 are equal but print differently).
            return f"min({b}, {a})" if e.name == "min" else f"max({a}, {b})"
        if isinstance(e, Func) and e.name == "if":
            c, t, o = e.args
            return f"(CASE WHEN {self.condition(c)} THEN {self.compile(t)} ELSE {self.compile(o)} END)"
        if isinstance(e, Func) and e.name in ("and", "or", "not"):
            return f"(CASE WHEN {self.condition(e)} THEN 1 ELSE 0 END)"
        return super().compile(e)

    def f_isnull(self, x):
        return f"(CASE WHEN {x} IS NULL THEN 1 ELSE 0 END)"

    def f_coalesce(self, a, b):
        return f"COALESCE({a}, {b})"

    def f_min(self, a, b):
        # SQLite's scalar min() returns NULL if any argument is NULL; PostgreSQL's LEAST() and Excel's
        # MIN() skip NULLs. The CASE skips them too, on both SQL targets, whichever side is NULL.
        return f"(CASE WHEN {b} IS NULL OR {a} <= {b} THEN {a} ELSE {b} END)"

    def f_max(self, a, b):
        return f"(CASE WHEN {b} IS NULL OR {a} >= {b} THEN {a} ELSE {b} END)"

    def f_floor(self, x):
        # CAST truncates toward zero in SQLite; step down for negative non-integers (a comparison
        # is 0 or 1 there; NULL stays NULL, as NULL + 0 was).
        return f"(CAST({x} AS INTEGER) - ({x} < CAST({x} AS INTEGER)))"

    def f_ceil(self, x):
        return f"(CAST({x} AS INTEGER) + ({x} > CAST({x} AS INTEGER)))"

    def f_mod(self, a, b):
        return f"({a} % {b})"  # NULL when b is 0, as SQLite's x / 0

    def f_contains(self, text, needle):
        return f"(CASE WHEN instr(lower({text}), {needle}) > 0 THEN 1 ELSE 0 END)"

    def f_concat(self, *xs):
        return "(" + self.concat_op.join(xs) + ")"

    def f_fmt(self, x, d):
        # printf turns NULL into '0.00'; PostgreSQL's TO_CHAR keeps it NULL.
        return f"(CASE WHEN {x} IS NULL THEN NULL ELSE printf('%.{d}f', {x}) END)"

    def f_grouped(self, x):
        # printf's ',' flag groups the digits of %d (SQLite 3.38 and later)
        return f"(CASE WHEN {x} IS NULL THEN NULL ELSE printf('%,d', {x}) END)"


class PostgresCompiler(SqlCompiler):
    dialect = "postgresql"

    def const(self, v):
        if isinstance(v, float):
            return f"CAST({v!r} AS DOUBLE PRECISION)"
        if isinstance(v, int) and not isinstance(v, bool):
            return f"CAST({v} AS BIGINT)"
        return super().const(v)

    def divide(self, a, b):
        return f"(CAST({a} AS DOUBLE PRECISION) / NULLIF({b}, 0))"

    def f_floor(self, x):
        return f"CAST(FLOOR({x}) AS BIGINT)"

    def f_ceil(self, x):
        return f"CAST(CEIL({x}) AS BIGINT)"

    def f_mod(self, a, b):
        return f"MOD({a}, NULLIF({b}, 0))"

    def f_contains(self, text, needle):
        # strpos, not PostgreSQL's LIKE or SQLite's instr: the needle is compared as text
        return f"(CASE WHEN strpos(lower({text}), CAST({needle} AS TEXT)) > 0 THEN 1 ELSE 0 END)"

    def f_fmt(self, x, d):
        return f"TRIM(TO_CHAR(CAST({x} AS NUMERIC), 'FM999999999999990.{'0' * int(d)}'))"

    def f_grouped(self, x):
        return f"TO_CHAR(CAST({x} AS NUMERIC), 'FM999,999,999,999,990')"


class ExcelCompiler(_Compiler):
    """Cell formulas (without the leading '='). Only functions LibreOffice 7.4 and Excel 2010 share."""

    def const(self, v):
        if v is None:
            return '""'
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, (int, float)):
            return repr(v) if isinstance(v, float) else str(v)
        return '"' + str(v).replace('"', '""') + '"'

    def divide(self, a, b):
        return f"({a}/{b})"

    def compare(self, op, a, b):
        return f"IF({a}{op}{b},1,0)"

    def f_if(self, c, t, o):
        return f"IF({c}<>0,{t},{o})"

    def f_and(self, *xs):
        return "IF(AND(" + ",".join(f"{x}<>0" for x in xs) + "),1,0)"

    def f_or(self, *xs):
        return "IF(OR(" + ",".join(f"{x}<>0" for x in xs) + "),1,0)"

    def f_not(self, x):
        return f"IF({x}<>0,0,1)"

    def f_isnull(self, x):
        return f'IF(ISBLANK({x}),1,IF({x}="",1,0))'

    def f_coalesce(self, a, b):
        return f'IF(OR(ISBLANK({a}),{a}=""),{b},{a})'

    def f_min(self, a, b):
        return f"MIN({a},{b})"

    def f_max(self, a, b):
        return f"MAX({a},{b})"

    def f_floor(self, x):
        return f"INT({x})"

    def f_ceil(self, x):
        return f"-INT(-({x}))"

    def f_mod(self, a, b):
        return f"MOD({a},{b})"

    def f_contains(self, text, needle):
        # SEARCH ignores case; the needle has no ? or * for it to read as a wildcard
        return f"IF(ISNUMBER(SEARCH({needle},{text})),1,0)"

    def f_concat(self, *xs):
        return "(" + "&".join(xs) + ")"

    def f_fmt(self, x, d):
        return f'FIXED({x},{d},TRUE)'

    def f_grouped(self, x):
        return f"FIXED({x},0,FALSE)"


class PythonEvaluator:
    """Evaluates a tree on Python values with SQL semantics (NULL -> None). Used by tests and
    by input validation that must agree with the views (for example, which TPs are valid)."""

    def __init__(self, inputs: Callable[[str], object], refs: Callable[[str], object]):
        self.inputs = inputs
        self.refs = refs

    def eval(self, e: Expr):
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Input):
            return self.inputs(e.name)
        if isinstance(e, Ref):
            return self.refs(e.name)
        if isinstance(e, Op):
            a, b = self.eval(e.a), self.eval(e.b)
            if a is None or b is None:
                # The compiled comparison is a CASE: a NULL operand makes it 0, not NULL.
                return 0 if e.op in _COMPARISONS else None
            if e.op == "+":
                return a + b
            if e.op == "-":
                return a - b
            if e.op == "*":
                return a * b
            if e.op == "/":
                return None if b == 0 else a / b
            return int({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "=": a == b, "<>": a != b}[e.op])
        if isinstance(e, Func):
            n = e.name
            if n == "if":
                c = self.eval(e.args[0])
                return self.eval(e.args[1]) if c else self.eval(e.args[2])
            vals = [self.eval(x) for x in e.args]
            if n == "and":
                return int(all(vals))
            if n == "or":
                return int(any(vals))
            if n == "not":
                return int(not vals[0])
            if n == "isnull":
                return int(vals[0] is None)
            if n == "coalesce":
                return vals[0] if vals[0] is not None else vals[1]
            if n in ("min", "max"):
                present = [v for v in vals if v is not None]
                return (min if n == "min" else max)(present) if present else None
            if any(v is None for v in vals):
                return None
            if n == "floor":
                return math.floor(vals[0])
            if n == "ceil":
                return math.ceil(vals[0])
            if n == "mod":
                # SQLite's % and PostgreSQL's MOD keep the dividend's sign (-7 mod 3 = -1); Python's % does not.
                return None if vals[1] == 0 else _remainder(vals[0], vals[1])
            if n == "concat":
                return "".join(str(v) for v in vals)
            if n == "contains":
                return int(vals[1] in str(vals[0]).lower())
            if n == "fmt":
                return _fixed(vals[0], vals[1])
            if n == "grouped":
                return f"{int(vals[0]):,}"
        raise TypeError(f"not an expression: {e!r}")


_COMPARISONS = ("<", "<=", ">", ">=", "=", "<>")


def _fixed(x, decimals: int) -> str:
    """`x` with `decimals` decimals, halves rounded away from zero on the shortest decimal form of x:
    what SQLite's printf, PostgreSQL's TO_CHAR and Excel's FIXED print (2.675 -> 2.68, 0.25 -> 0.3),
    where Python's own format rounds the exact binary value (2.675 -> 2.67, 0.25 -> 0.2)."""
    q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-int(decimals)), rounding=ROUND_HALF_UP)
    return f"{q:f}"


def _remainder(a, b):
    """The remainder with the dividend's sign, as SQLite's % and PostgreSQL's MOD give it."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r
