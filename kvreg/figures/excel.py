"""The Excel target: a figure's expression tree as a cell formula (without the leading '=').

Every construct is spelled here, once, with functions LibreOffice 7.4 and Excel 2010 share (no
construct needs a spelling of its own for either, so there is no flag for them). One flag changes
the spelling: `null_safe`.

- Plain (`null_safe=False`): every cell holds a value. The procurement aggregates' Summary
  (kvreg.figures.aggregates) compiles so, guarding its few blank GPU inputs itself.
- `null_safe=True`: SQL's NULL semantics, where NULL is an empty cell or "", so a cell agrees
  with the views. SQL gives NULL for arithmetic on a NULL, 0 for a comparison or a condition on
  NULL, and NULL for a zero divisor; Excel would give #VALUE! (``"" * 2``), TRUE (``"" > 0``) and
  #DIV/0!. Each maximal run of strict operations (+ - * /, INT, MOD, FIXED, &) gets one guard
  listing the cells in it that may be blank, so the formula stays readable:
  ``IF(OR(B3="",C3=""),"",B3*C3*730)``; a divisor the schema does not keep positive gets a zero
  test. What cannot be NULL compiles as the plain spelling does, with a shorter isnull/coalesce
  (a blank cell and a formula's "" both equal "": ISBLANK adds nothing) and a condition written
  as one (a>b) rather than as a flag tested against 0 (IF(a>b,1,0)<>0): formula length is most of
  the workbook's write time (XlsxWriter runs its regular expressions over every formula).

How NULLs travel through a formula depends on which inputs may be NULL and which the schema keeps
above zero (kvreg.figures.facts, from the input declarations). The branches of an IF know what
its condition tested (`Facts`), so ``IF(ISBLANK(M3), ..., M3)`` needs no guard on M3. Where the
formulas sit in a sheet is kvreg.export.excel_layout's business.
"""

from __future__ import annotations

from typing import Callable

from .expr import COMPARISONS, Const, Expr, Func, Input, Op, Ref, walk
from .facts import NO_FACTS, Facts, branch_facts, is_positive, may_be_null

Resolver = Callable[[str], str]

# The walk's context is (facts, how): what the branches above know, and how the node is wanted:
# as a value (None), as a condition (COND: null_safe only), or inside a strict run its caller
# guards (a _Run collecting the run's cells that may be blank).
COND = "condition"


class _Run:
    """The cells of a strict run that may be blank (in first-seen order); `null`: one is always NULL."""

    def __init__(self):
        self.terms: list[str] = []
        self.null = False


# What SQL makes NULL when an operand is NULL: + - * / and these functions.
_STRICT_FUNCS = {"floor", "ceil", "mod", "fmt", "grouped", "concat"}


def _is_strict(e: Expr) -> bool:
    return (isinstance(e, Op) and e.op not in COMPARISONS) or (isinstance(e, Func) and e.name in _STRICT_FUNCS)


def _any_blank(terms: list[str]) -> str:
    tests = [f'{t}=""' for t in terms]
    return tests[0] if len(tests) == 1 else "OR(" + ",".join(tests) + ")"


class ExcelCompiler:
    """Cell formulas; `inputs(name)` and `refs(name)` spell a cell."""

    def __init__(self, inputs: Resolver, refs: Resolver, *, null_safe: bool = False):
        self.inputs = inputs
        self.refs = refs
        self.null_safe = null_safe

    def compile(self, e: Expr) -> str:
        return walk(e, self, NO_FACTS, None)

    def _v(self, e: Expr, facts: Facts) -> str:
        return walk(e, self, facts, None)

    def _flag(self, e: Expr, facts: Facts) -> str:
        """A value used as a flag: NULL counts as false, as in SQL's CASE WHEN."""
        x = self._v(e, facts)
        return f'IF({x}="",0,{x})' if may_be_null(e, facts) else x

    def _cond(self, e: Expr, facts: Facts) -> str:
        """A condition spelled as a flag tested against 0 (what has no shorter spelling)."""
        return f"{self._flag(e, facts)}<>0"

    # ---- names and constants

    def const(self, e, facts, how):
        if self.null_safe and how is COND:
            return self._cond(e, facts)
        v = e.value
        if v is None:
            return '""'
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, (int, float)):
            return repr(v) if isinstance(v, float) else str(v)
        return '"' + str(v).replace('"', '""') + '"'

    def input(self, e, facts, how):
        return self._cond(e, facts) if self.null_safe and how is COND else self.inputs(e.name)

    def ref(self, e, facts, how):
        return self._cond(e, facts) if self.null_safe and how is COND else self.refs(e.name)

    # ---- strict runs: + - * /, INT, MOD, FIXED, &

    def _strict(self, e, facts, how, spell):
        """A construct SQL makes NULL when an operand is NULL: `spell` gets its operands' texts."""
        if not self.null_safe:
            return spell(*[self._v(x, facts) for x in e.children()])
        if how is COND:
            return self._cond(e, facts)
        if isinstance(how, _Run):  # inside a run: its first node guards it
            return spell(*[self._in_run(x, facts, how) for x in e.children()])
        run = _Run()
        body = spell(*[self._in_run(x, facts, run) for x in e.children()])
        if run.null:
            return '""'
        return f'IF({_any_blank(run.terms)},"",{body})' if run.terms else body

    def _in_run(self, x: Expr, facts: Facts, run: _Run) -> str:
        if _is_strict(x):
            return walk(x, self, facts, run)
        text = self._v(x, facts)
        if isinstance(x, Const) and x.value is None:
            run.null = True
        elif may_be_null(x, facts) and text not in run.terms:
            run.terms.append(text)
        return text

    def arith(self, e, facts, how):
        gap = "" if self.null_safe else " "
        return self._strict(e, facts, how, lambda a, b: f"({a}{gap}{e.op}{gap}{b})")

    def divide(self, e, facts, how):
        if self.null_safe and not is_positive(e.b, facts):
            return self._strict(e, facts, how, lambda a, b: f'IF({b}=0,"",{a}/{b})')
        return self._strict(e, facts, how, lambda a, b: f"({a}/{b})")

    def f_floor(self, e, facts, how):
        return self._strict(e, facts, how, lambda x: f"INT({x})")

    def f_ceil(self, e, facts, how):
        return self._strict(e, facts, how, lambda x: f"-INT(-({x}))")

    def f_mod(self, e, facts, how):
        return self._strict(e, facts, how, lambda a, b: f"MOD({a},{b})")

    def f_concat(self, e, facts, how):
        return self._strict(e, facts, how, lambda *xs: "(" + "&".join(xs) + ")")

    def f_fmt(self, e, facts, how):
        return self._strict(e, facts, how, lambda x, d: f"FIXED({x},{d},TRUE)")

    def f_grouped(self, e, facts, how):
        return self._strict(e, facts, how, lambda x: f"FIXED({x},0,FALSE)")

    # ---- comparisons and conditions

    def compare(self, e, facts, how):
        a, b = self._v(e.a, facts), self._v(e.b, facts)
        if not self.null_safe:
            return f"IF({a}{e.op}{b},1,0)"
        blank = [x for x, sub in ((a, e.a), (b, e.b)) if may_be_null(sub, facts)]
        if how is COND:
            return self._cond(e, facts) if blank else f"{a}{e.op}{b}"
        if blank:  # a comparison with a blank is 0, as SQL's CASE WHEN gives it
            return f"IF({_any_blank(blank)},0,IF({a}{e.op}{b},1,0))"
        return f"IF({a}{e.op}{b},1,0)"

    def f_if(self, e, facts, how):
        c, t, o = e.args
        if not self.null_safe:
            return f"IF({self._v(c, facts)}<>0,{self._v(t, facts)},{self._v(o, facts)})"
        if how is COND:
            return self._cond(e, facts)
        then, other = branch_facts(c)
        return f"IF({walk(c, self, facts, COND)},{self._v(t, facts | then)},{self._v(o, facts | other)})"

    def _logic(self, e, facts, how, name):
        if self.null_safe and how is COND:
            return f"{name}(" + ",".join(walk(x, self, facts, COND) for x in e.args) + ")"
        xs = [self._flag(x, facts) if self.null_safe else self._v(x, facts) for x in e.args]
        return f"IF({name}(" + ",".join(f"{x}<>0" for x in xs) + "),1,0)"

    def f_and(self, e, facts, how):
        return self._logic(e, facts, how, "AND")

    def f_or(self, e, facts, how):
        return self._logic(e, facts, how, "OR")

    def f_not(self, e, facts, how):
        x = e.args[0]
        if self.null_safe and how is COND:
            if isinstance(x, (Input, Ref)) and not may_be_null(x, facts):
                return f"{self._v(x, facts)}=0"
            return self._cond(e, facts)
        return f"IF({self._flag(x, facts) if self.null_safe else self._v(x, facts)}<>0,0,1)"

    def f_isnull(self, e, facts, how):
        x = self._v(e.args[0], facts)
        if not self.null_safe:
            return f'IF(ISBLANK({x}),1,IF({x}="",1,0))'
        return f'{x}=""' if how is COND else f'IF({x}="",1,0)'

    # ---- other functions

    def f_coalesce(self, e, facts, how):
        if self.null_safe and how is COND:
            return self._cond(e, facts)
        a, b = self._v(e.args[0], facts), self._v(e.args[1], facts)
        if self.null_safe:
            return f'IF({a}="",{self._passed(e.args[1], facts, b)},{a})'
        return f'IF(OR(ISBLANK({a}),{a}=""),{b},{a})'

    def _passed(self, e: Expr, facts: Facts, text: str) -> str:
        """An operand a formula hands on as its result: an input cell that may be empty is spelled
        IF(x="","",x), since a formula whose result is an empty cell shows 0, where SQL gives NULL."""
        if self.null_safe and isinstance(e, Input) and may_be_null(e, facts):
            return f'IF({text}="","",{text})'
        return text

    def _min_max(self, e, facts, how, name):
        if self.null_safe and how is COND:
            return self._cond(e, facts)
        a, b = self._v(e.args[0], facts), self._v(e.args[1], facts)
        out = f"{name}({a},{b})"
        if self.null_safe:  # skip a blank side (Excel's MIN would give #VALUE! on a "" result)
            if may_be_null(e.args[1], facts):
                out = f'IF({b}="",{self._passed(e.args[0], facts, a)},{out})'
            if may_be_null(e.args[0], facts):
                out = f'IF({a}="",{self._passed(e.args[1], facts, b)},{out})'
        return out

    def f_min(self, e, facts, how):
        return self._min_max(e, facts, how, "MIN")

    def f_max(self, e, facts, how):
        return self._min_max(e, facts, how, "MAX")

    def f_contains(self, e, facts, how):
        if self.null_safe and how is COND:
            return self._cond(e, facts)
        text, needle = self._v(e.args[0], facts), self._v(e.args[1], facts)
        # SEARCH ignores case; the needle has no ? or * for it to read as a wildcard
        return f"IF(ISNUMBER(SEARCH({needle},{text})),1,0)"
