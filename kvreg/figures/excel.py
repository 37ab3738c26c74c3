"""The workbook's compiler: ExcelCompiler with SQL's NULL semantics, so a cell agrees with the views.

How NULLs travel through a formula depends on which inputs may be NULL and which the schema keeps
above zero; both are declared with the inputs (`InputDecl.nullable`, `InputDecl.positive`) and
tests/test_excel_compiler.py checks them against the registry's tables. Where the formulas sit in
a sheet is kvreg.export.excel_layout's business.
"""

from __future__ import annotations

from dataclasses import dataclass

from .declarations import FIGURES, INPUTS
from .expr import Const, ExcelCompiler, Expr, Func, Input, Op, Ref

INPUT_NULLABLE = {name: decl.nullable for name, decl in INPUTS.items()}
# Read in arithmetic only when is_mla (kv_lora_rank set), and CHECK ck_model_mla makes the two NULL
# together: guarding them would add a test to nearly every KV formula for a case that cannot occur.
_GUARD_EXEMPT = {"kv_lora_rank", "qk_rope_head_dim"}
# Inputs the schema keeps above zero when set: dividing by them needs no zero test.
POSITIVE_INPUTS = {name for name, decl in INPUTS.items() if decl.positive}
# Figures the schema keeps above zero: attention_tp (ck_plan_dp_divides_tp: TP is a multiple of
# dp_attention), replicas_per_node (ck_plan_fits_node: TP x PP <= gpus_per_node), and a sequence's
# bytes (every layer holds KV or a positive state: ck_model_layer_sum, ck_model_heads, ck_model_linear_state).
POSITIVE_FIGURES = {"attention_tp", "replicas_per_node", "kv_bytes_per_sequence_per_gpu", "kv_bytes_per_request_per_gpu"}
_ARITH = {"+", "-", "*", "/"}
_COMPARE = {"<", "<=", ">", ">=", "=", "<>"}
_STRICT_FUNCS = {"floor", "ceil", "mod", "fmt", "concat"}
_FLAG_FUNCS = {"and", "or", "not"}


@dataclass(frozen=True)
class Facts:
    """What a branch of an if_ knows about names from its condition (``if_(isnull(x), a, b)``:
    in b, x is not NULL; ``if_(x > 0, a, b)``: in a, x is positive)."""

    not_null: frozenset = frozenset()
    positive: frozenset = frozenset()

    def __or__(self, other: "Facts") -> "Facts":
        return Facts(self.not_null | other.not_null, self.positive | other.positive)


NO_FACTS = Facts()


def branch_facts(cond: Expr) -> tuple[Facts, Facts]:
    """(facts in the then-branch, facts in the else-branch) of a condition."""
    if isinstance(cond, Func) and cond.name == "isnull" and isinstance(cond.args[0], (Input, Ref)):
        return NO_FACTS, Facts(not_null=frozenset({cond.args[0].name}))
    if isinstance(cond, Func) and cond.name == "not":
        then, other = branch_facts(cond.args[0])
        return other, then
    if isinstance(cond, Func) and cond.name == "and":
        out = NO_FACTS
        for c in cond.args:
            out = out | branch_facts(c)[0]
        return out, NO_FACTS
    if (isinstance(cond, Op) and cond.op == ">" and isinstance(cond.a, (Input, Ref))
            and isinstance(cond.b, Const) and cond.b.value == 0):
        name = frozenset({cond.a.name})
        return Facts(not_null=name, positive=name), NO_FACTS
    return NO_FACTS, NO_FACTS


def may_be_null(e: Expr, facts: Facts = NO_FACTS) -> bool:
    """Whether the SQL views can give NULL for this expression (its inputs as the schema allows).

    A zero divisor also gives NULL in SQL, and the workbook blanks it too, but it is not counted
    here: only final figures (headroom_fraction, cost_per_user_per_month) divide by something that
    can be zero in practice, so nothing downstream has to test for it."""
    if isinstance(e, Const):
        return e.value is None
    if isinstance(e, (Input, Ref)):
        return e.name not in facts.not_null and name_may_be_null(e.name)
    if isinstance(e, Op):
        return e.op in _ARITH and (may_be_null(e.a, facts) or may_be_null(e.b, facts))
    if isinstance(e, Func):
        if e.name == "if":
            then, other = branch_facts(e.args[0])
            return may_be_null(e.args[1], facts | then) or may_be_null(e.args[2], facts | other)
        if e.name in ("coalesce", "min", "max"):  # the SQL targets' MIN/MAX skip a NULL, like Excel's
            return may_be_null(e.args[0], facts) and may_be_null(e.args[1], facts)
        if e.name in _STRICT_FUNCS:
            return any(may_be_null(a, facts) for a in e.args)
        return False
    raise TypeError(f"not an expression: {e!r}")


_NULLABLE_MEMO: dict[str, bool] = {}


def name_may_be_null(name: str) -> bool:
    """An input or a figure that can be NULL in the views (and so blank in the workbook)."""
    if name in INPUTS:
        return INPUT_NULLABLE[name] and name not in _GUARD_EXEMPT
    if name not in _NULLABLE_MEMO:
        _NULLABLE_MEMO[name] = may_be_null(FIGURES[name].expr)
    return _NULLABLE_MEMO[name]


def is_positive(e: Expr, facts: Facts = NO_FACTS) -> bool:
    """Whether the schema keeps this expression above zero (so it can divide without a zero test)."""
    if isinstance(e, Const):
        return isinstance(e.value, (int, float)) and e.value > 0
    if isinstance(e, Input):
        return e.name in POSITIVE_INPUTS or e.name in facts.positive
    if isinstance(e, Ref):
        return e.name in facts.positive or e.name in POSITIVE_FIGURES or is_positive(FIGURES[e.name].expr)
    if isinstance(e, Op):
        return e.op in ("+", "*", "/") and is_positive(e.a, facts) and is_positive(e.b, facts)
    if isinstance(e, Func):
        args = [is_positive(a, facts) for a in e.args]
        if e.name in ("ceil", "min", "coalesce"):
            return all(args)
        if e.name == "max":
            return any(args)
        if e.name == "if":
            then, other = branch_facts(e.args[0])
            return is_positive(e.args[1], facts | then) and is_positive(e.args[2], facts | other)
    return False


def _is_strict(e: Expr) -> bool:
    return (isinstance(e, Op) and e.op in _ARITH) or (isinstance(e, Func) and e.name in _STRICT_FUNCS)


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
        if isinstance(e, Op) and e.op in _COMPARE:
            a, b = self.compile(e.a), self.compile(e.b)
            terms = [x for x, sub in ((a, e.a), (b, e.b)) if may_be_null(sub, self.facts)]
            if terms:
                return f"IF({_any_blank(terms)},0,IF({a}{e.op}{b},1,0))"
            return self.compare(e.op, a, b)
        if isinstance(e, Func) and e.name == "if":
            c, t, o = e.args
            then, other = branch_facts(c)
            return f"IF({self._cond(c)},{self._under(then, t)},{self._under(other, o)})"
        if isinstance(e, Func) and e.name in _FLAG_FUNCS:
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
        if isinstance(e, Op) and e.op in _COMPARE and not (may_be_null(e.a, self.facts)
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
