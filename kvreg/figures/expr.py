"""A small expression tree for figure declarations, and the one walk every target plugs into.

One tree; one module per target, each owning every construct and its dialect's quirks
(sqlglot's shape): kvreg.figures.sql (SQLite, PostgreSQL), kvreg.figures.excel (cell formulas),
kvreg.figures.python (values), kvreg.figures.doc (the methodology's formulas), and the schema's
facts about a tree (kvreg.figures.facts). Each is a class with a method per construct that
`walk()` calls; the questions about which names a tree reads go through `nodes()`/`names()`.
A declaration never has to think about a target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator


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


# --------------------------------------------------------------------------- the walk


def walk(e: Expr, target, *context):
    """The one traversal every target plugs into: the target's method for the construct at `e`.

    A target (kvreg.figures.sql, .excel, .python, .doc, and the schema's facts) is an object with a
    method per construct: ``const``, ``input``, ``ref``, ``arith`` (+ - *), ``divide``, ``compare``
    (< <= > >= = <>) and ``f_<name>`` for each function (``f_if``, ``f_min``, ...). Each gets the
    node and the `context` it was walked with, and walks the children it needs (``walk(child,
    target, ...)``) itself, in the order and context it needs them: SQL compiles a condition
    differently from a value, Excel guards a run of arithmetic once, Python skips the branch an
    ``if`` does not take."""
    if isinstance(e, Const):
        return target.const(e, *context)
    if isinstance(e, Input):
        return target.input(e, *context)
    if isinstance(e, Ref):
        return target.ref(e, *context)
    if isinstance(e, Op):
        if e.op == "/":
            return target.divide(e, *context)
        if e.op in COMPARISONS:
            return target.compare(e, *context)
        return target.arith(e, *context)
    if isinstance(e, Func):
        return getattr(target, "f_" + e.name)(e, *context)
    raise TypeError(f"not an expression: {e!r}")


def nodes(e: Expr) -> Iterator[Expr]:
    """Every node of the tree, each before its children, children left to right (the figures it
    refers to are not entered: a Ref is one node)."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(tuple(x.children())))


# names() by (tree, kinds): a tree never changes once built (frozen, compared by identity), and compiling
# the views asks for the same figures' names hundreds of thousands of times (12 million nodes walked for
# one `kvreg db upgrade` before this). The tree is held by its key, so an identity is never reused; the
# declarations' trees and their subtrees are a few tens of thousands, and a process that builds trees of its own
# (none does today) would empty the memo past _NAMES_KEPT rather than grow it.
_NAMES: dict[tuple[Expr, tuple[type, ...]], tuple[str, ...]] = {}
_NAMES_KEPT = 200_000


def names(e: Expr, kinds: tuple[type, ...] = (Input, Ref)) -> list[str]:
    """The names of the inputs and figures (`kinds`) the tree reads, in first-seen order."""
    found = _NAMES.get((e, kinds))
    if found is None:
        out: list[str] = []
        for x in nodes(e):
            if isinstance(x, kinds) and x.name not in out:
                out.append(x.name)
        if len(_NAMES) >= _NAMES_KEPT:
            _NAMES.clear()
        found = _NAMES[e, kinds] = tuple(out)
    return list(found)


COMPARISONS = ("<", "<=", ">", ">=", "=", "<>")

