"""What the schema lets an expression be: NULL or not, above zero or not.

Both compilers that must agree with SQL's NULL semantics read it: the workbook's
(kvreg.figures.excel: which cells to guard) and the SQLite views' (kvreg.figures.views: where
SQLite's own min()/max() may replace a NULL-skipping CASE). The facts about inputs are declared
with them (`InputDecl.nullable`, `InputDecl.positive`); tests/test_excel_compiler.py checks them
against the registry's tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from .declarations import FIGURES, INPUTS
from .expr import Const, Expr, Input, Ref, names, walk

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
    return walk(cond, _BRANCH_FACTS)


class _BranchFacts:
    """branch_facts, construct by construct: what a condition tells each branch of an if_."""

    def _nothing(self, e):
        return NO_FACTS, NO_FACTS

    const = input = ref = arith = divide = _nothing
    f_if = f_or = f_min = f_max = f_coalesce = f_floor = f_ceil = f_mod = f_fmt = f_grouped = _nothing
    f_concat = f_contains = _nothing

    def f_isnull(self, e):
        x = e.args[0]
        return (NO_FACTS, Facts(not_null=frozenset({x.name}))) if isinstance(x, (Input, Ref)) else self._nothing(e)

    def f_not(self, e):
        then, other = walk(e.args[0], self)
        return other, then

    def f_and(self, e):
        out = NO_FACTS
        for c in e.args:
            out = out | walk(c, self)[0]
        return out, NO_FACTS

    def compare(self, e):
        if e.op == ">" and isinstance(e.a, (Input, Ref)) and isinstance(e.b, Const) and e.b.value == 0:
            name = frozenset({e.a.name})
            return Facts(not_null=name, positive=name), NO_FACTS
        return self._nothing(e)


_BRANCH_FACTS = _BranchFacts()


def may_be_null(e: Expr, facts: Facts = NO_FACTS, *, strict: bool = False) -> bool:
    """Whether the SQL views can give NULL for this expression (its inputs as the schema allows).

    The workbook's guards ask without `strict`: a zero divisor also gives NULL in SQL, and the
    workbook blanks it too, but it is not counted: only final figures (headroom_fraction,
    cost_per_user_per_month) divide by something that can be zero in practice, so nothing
    downstream has to test for it; kv_lora_rank and qk_rope_head_dim are not counted either
    (_GUARD_EXEMPT). `strict` counts both, and a name no declaration knows: what the SQLite views
    need before they may use SQLite's own min()/max() (never_null_in_sql)."""
    return walk(e, _MAY_BE_NULL, facts, strict)


class _MayBeNull:
    """may_be_null, construct by construct; the walk's context is (facts, strict)."""

    def const(self, e, facts, strict):
        return e.value is None

    def input(self, e, facts, strict):
        return e.name not in facts.not_null and name_may_be_null(e.name, strict=strict)

    ref = input

    def arith(self, e, facts, strict):
        return walk(e.a, self, facts, strict) or walk(e.b, self, facts, strict)

    def divide(self, e, facts, strict):
        return self.arith(e, facts, strict) or (strict and not _surely_positive(e.b, facts))

    def compare(self, e, facts, strict):
        return False  # 0 or 1

    def f_if(self, e, facts, strict):
        then, other = branch_facts(e.args[0])
        return walk(e.args[1], self, facts | then, strict) or walk(e.args[2], self, facts | other, strict)

    def _both(self, e, facts, strict):  # the SQL targets' MIN/MAX skip a NULL, like Excel's
        return walk(e.args[0], self, facts, strict) and walk(e.args[1], self, facts, strict)

    f_coalesce = f_min = f_max = _both

    def _any(self, e, facts, strict):
        return any(walk(a, self, facts, strict) for a in e.args)

    f_floor = f_ceil = f_fmt = f_grouped = f_concat = _any

    def f_mod(self, e, facts, strict):
        return (strict and not _surely_positive(e.args[1], facts)) or self._any(e, facts, strict)

    def _flag(self, e, facts, strict):
        return False  # 0 or 1

    f_and = f_or = f_not = f_isnull = f_contains = _flag


_MAY_BE_NULL = _MayBeNull()


_NULLABLE_MEMO: dict[tuple[str, bool], bool] = {}


def name_may_be_null(name: str, *, strict: bool = False) -> bool:
    """An input or a figure that can be NULL in the views (and so blank in the workbook)."""
    if name in INPUTS:
        return INPUT_NULLABLE[name] and (strict or name not in _GUARD_EXEMPT)
    if name not in FIGURES:
        return strict  # a grain's own column (users, quarter) or an aggregate: not declared here
    if (name, strict) not in _NULLABLE_MEMO:
        _NULLABLE_MEMO[(name, strict)] = may_be_null(FIGURES[name].expr, strict=strict)
    return _NULLABLE_MEMO[(name, strict)]


def is_positive(e: Expr, facts: Facts = NO_FACTS) -> bool:
    """Whether the schema keeps this expression above zero (so it can divide without a zero test)."""
    return walk(e, _IS_POSITIVE, facts)


class _IsPositive:
    """is_positive, construct by construct; the walk's context is the facts."""

    def const(self, e, facts):
        return isinstance(e.value, (int, float)) and e.value > 0

    def input(self, e, facts):
        return e.name in POSITIVE_INPUTS or e.name in facts.positive

    def ref(self, e, facts):
        return e.name in facts.positive or e.name in POSITIVE_FIGURES or walk(FIGURES[e.name].expr, self, NO_FACTS)

    def arith(self, e, facts):
        return e.op in ("+", "*") and walk(e.a, self, facts) and walk(e.b, self, facts)

    def divide(self, e, facts):
        return walk(e.a, self, facts) and walk(e.b, self, facts)

    def _no(self, e, facts):
        return False

    compare = f_floor = f_mod = f_fmt = f_grouped = f_concat = f_and = f_or = f_not = f_isnull = f_contains = _no

    def _all(self, e, facts):
        return all([walk(a, self, facts) for a in e.args])

    f_ceil = f_min = f_coalesce = _all

    def f_max(self, e, facts):
        return any([walk(a, self, facts) for a in e.args])

    def f_if(self, e, facts):
        then, other = branch_facts(e.args[0])
        return walk(e.args[1], self, facts | then) and walk(e.args[2], self, facts | other)


_IS_POSITIVE = _IsPositive()


# Above zero only while another input is set (ck_model_linear_heads: while linear_state_elements_per_layer
# is): is_positive counts it, as the workbook's formulas need, but a division by it can give NULL.
_POSITIVE_WHEN_SET_WITH_OTHERS = {"linear_state_heads"}


def never_null_in_sql(e: Expr) -> bool:
    """Whether SQL can never give NULL for this expression, whatever the registry holds.

    Stricter than may_be_null, which the workbook's guards use: every nullable input counts
    (kv_lora_rank too), and so does a divisor the schema does not keep above zero, since SQL's
    x / 0 is NULL. The SQLite views compile min/max of two such expressions to SQLite's own
    min()/max(), which give NULL when an argument is NULL, in place of the CASE that skips one."""
    return not may_be_null(e, strict=True)


def _surely_positive(e: Expr, facts: Facts) -> bool:
    """is_positive, leaving out the inputs that are above zero only while another input is set."""
    return is_positive(e, facts) and not (_names_in(e) & _POSITIVE_WHEN_SET_WITH_OTHERS)


def _names_in(e: Expr) -> set[str]:
    """Every input and figure name the expression reads, through the figures it refers to."""
    out, todo = set(), [e]
    while todo:
        for name in names(todo.pop()):
            if name not in out:
                out.add(name)
                if name in FIGURES:
                    todo.append(FIGURES[name].expr)
    return out
