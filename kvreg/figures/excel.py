"""The workbook's compiler: ExcelCompiler with SQL's NULL semantics, so a cell agrees with the views.

How NULLs travel through a formula depends on which inputs may be NULL and which the schema keeps
above zero (kvreg.figures.facts, from the input declarations). Where the formulas sit in
a sheet is kvreg.export.excel_layout's business.
"""

from __future__ import annotations

from .expr import Const, ExcelCompiler, Expr, Func, Input, Op, Ref
from .facts import ARITH, COMPARE, FLAG_FUNCS, NO_FACTS, STRICT_FUNCS, Facts, branch_facts, is_positive, may_be_null


def _is_strict(e: Expr) -> bool:
    return (isinstance(e, Op) and e.op in ARITH) or (isinstance(e, Func) and e.name in STRICT_FUNCS)


def _any_blank(terms: list[str]) -> str:
    tests = [f'{t}=""' for t in terms]
    return tests[0] if len(tests) == 1 else "OR(" + ",".join(tests) + ")"


class NullSafeExcelCompiler(ExcelCompiler):
    """ExcelCompiler with SQL's NULL semantics, where NULL is an empty cell or "".

    SQL gives NULL for arithmetic on a NULL, 0 for a comparison or a condition on NULL, and
    NULL for a zero divisor; Excel would give #VALUE! (``"" * 2``), TRUE (``"" > 0``) and
    #DIV/0!. Each maximal run of strict operations (+ - * /, INT, MOD, FIXED, &) gets one
    guard listing the cells in it that may be blank, so the formula stays readable:
    ``IF(OR(B3="",C3=""),"",B3*C3*730)``; a divisor the schema does not keep positive gets a
    zero test. What cannot be NULL compiles exactly as ExcelCompiler compiles it. The branches
    of an IF know what its condition tested (`Facts`), so ``IF(ISBLANK(M3), ..., M3)`` needs no
    guard on M3.
    """

    def __init__(self, inputs, refs):
        super().__init__(inputs, refs)
        self.facts = NO_FACTS

    def compile(self, e: Expr) -> str:
        if _is_strict(e):
            terms = self._null_terms(e)
            if terms is None:
                return '""'
            body = self._raw(e)
            return f'IF({_any_blank(terms)},"",{body})' if terms else body
        if isinstance(e, Op) and e.op in COMPARE:
            a, b = self.compile(e.a), self.compile(e.b)
            terms = [x for x, sub in ((a, e.a), (b, e.b)) if may_be_null(sub, self.facts)]
            if terms:
                return f"IF({_any_blank(terms)},0,IF({a}{e.op}{b},1,0))"
            return self.compare(e.op, a, b)
        if isinstance(e, Func) and e.name == "if":
            c, t, o = e.args
            then, other = branch_facts(c)
            return f"IF({self._cond(c)},{self._under(then, t)},{self._under(other, o)})"
        if isinstance(e, Func) and e.name in FLAG_FUNCS:
            return getattr(self, "f_" + e.name)(*[self._flag(x) for x in e.args])
        if isinstance(e, Func) and e.name in ("min", "max"):
            return self._min_max(e)
        return super().compile(e)

    # Shorter than ExcelCompiler's spelling, same values: a blank cell and a formula's "" both
    # equal "" (ISBLANK adds nothing), and a condition is written as one (a>b) rather than as a
    # flag tested against 0 (IF(a>b,1,0)<>0). Formula length is most of the workbook's write time
    # (XlsxWriter runs its regular expressions over every formula).
    def f_isnull(self, x):
        return f'IF({x}="",1,0)'

    def f_coalesce(self, a, b):
        return f'IF({a}="",{b},{a})'

    def _cond(self, e: Expr) -> str:
        """A condition as an Excel boolean: NULL counts as false, as in SQL's CASE WHEN."""
        if isinstance(e, Op) and e.op in COMPARE and not (may_be_null(e.a, self.facts)
                                                           or may_be_null(e.b, self.facts)):
            return f"{self.compile(e.a)}{e.op}{self.compile(e.b)}"
        if isinstance(e, Func) and e.name == "isnull":
            return f'{self.compile(e.args[0])}=""'
        if isinstance(e, Func) and e.name in ("and", "or"):
            return f"{e.name.upper()}(" + ",".join(self._cond(x) for x in e.args) + ")"
        if (isinstance(e, Func) and e.name == "not" and isinstance(e.args[0], (Input, Ref))
                and not may_be_null(e.args[0], self.facts)):
            return f"{self.compile(e.args[0])}=0"
        return f"{self._flag(e)}<>0"

    def _min_max(self, e: Func) -> str:
        """MIN/MAX skipping a blank side (Excel's MIN would give #VALUE! on a "" result)."""
        a, b = (self.compile(x) for x in e.args)
        out = getattr(self, "f_" + e.name)(a, b)
        if may_be_null(e.args[1], self.facts):
            out = f'IF({b}="",{a},{out})'
        if may_be_null(e.args[0], self.facts):
            out = f'IF({a}="",{b},{out})'
        return out

    def _under(self, facts: Facts, e: Expr) -> str:
        saved = self.facts
        self.facts = saved | facts
        try:
            return self.compile(e)
        finally:
            self.facts = saved

    def _flag(self, e: Expr) -> str:
        """A condition: NULL counts as false, as in SQL's CASE WHEN."""
        x = self.compile(e)
        return f'IF({x}="",0,{x})' if may_be_null(e, self.facts) else x

    def _null_terms(self, e: Expr) -> list[str] | None:
        """Compiled sub-expressions of a strict run that may be blank; None when one is always NULL."""
        if _is_strict(e):
            out: list[str] = []
            for child in e.children():
                terms = self._null_terms(child)
                if terms is None:
                    return None
                out += [t for t in terms if t not in out]
            return out
        if isinstance(e, Const) and e.value is None:
            return None
        return [self.compile(e)] if may_be_null(e, self.facts) else []

    def _raw(self, e: Expr) -> str:
        """A strict run without NULL guards (its caller guards it once)."""
        if not _is_strict(e):
            return self.compile(e)
        if isinstance(e, Op):
            a, b = self._raw(e.a), self._raw(e.b)
            if e.op == "/":
                return self.divide(a, b) if is_positive(e.b, self.facts) else f'IF({b}=0,"",{a}/{b})'
            return f"({a}{e.op}{b})"
        return getattr(self, "f_" + e.name)(*[self._raw(x) for x in e.args])
