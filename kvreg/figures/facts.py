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
from .expr import Const, Expr, Func, Input, Op, Ref

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
ARITH = {"+", "-", "*", "/"}
COMPARE = {"<", "<=", ">", ">=", "=", "<>"}
STRICT_FUNCS = {"floor", "ceil", "mod", "fmt", "grouped", "concat"}
FLAG_FUNCS = {"and", "or", "not"}


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


def may_be_null(e: Expr, facts: Facts = NO_FACTS, *, strict: bool = False) -> bool:
    """Whether the SQL views can give NULL for this expression (its inputs as the schema allows).

    The workbook's guards ask without `strict`: a zero divisor also gives NULL in SQL, and the
    workbook blanks it too, but it is not counted: only final figures (headroom_fraction,
    cost_per_user_per_month) divide by something that can be zero in practice, so nothing
    downstream has to test for it; kv_lora_rank and qk_rope_head_dim are not counted either
    (_GUARD_EXEMPT). `strict` counts both, and a name no declaration knows: what the SQLite views
    need before they may use SQLite's own min()/max() (never_null_in_sql)."""
    if isinstance(e, Const):
        return e.value is None
    if isinstance(e, (Input, Ref)):
        return e.name not in facts.not_null and name_may_be_null(e.name, strict=strict)
    if isinstance(e, Op):
        if e.op not in ARITH:
            return False  # a comparison is 0 or 1
        return (may_be_null(e.a, facts, strict=strict) or may_be_null(e.b, facts, strict=strict)
                or (strict and e.op == "/" and not _surely_positive(e.b, facts)))
    if isinstance(e, Func):
        if e.name == "if":
            then, other = branch_facts(e.args[0])
            return (may_be_null(e.args[1], facts | then, strict=strict)
                    or may_be_null(e.args[2], facts | other, strict=strict))
        if e.name in ("coalesce", "min", "max"):  # the SQL targets' MIN/MAX skip a NULL, like Excel's
            return may_be_null(e.args[0], facts, strict=strict) and may_be_null(e.args[1], facts, strict=strict)
        if strict and e.name == "mod" and not _surely_positive(e.args[1], facts):
            return True
        if e.name in STRICT_FUNCS:
            return any(may_be_null(a, facts, strict=strict) for a in e.args)
        return False  # and, or, not, isnull: 0 or 1
    raise TypeError(f"not an expression: {e!r}")


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
    out, stack = set(), [e]
    while stack:
        x = stack.pop()
        if isinstance(x, (Input, Ref)) and x.name not in out:
            out.add(x.name)
            if isinstance(x, Ref) and x.name in FIGURES:
                stack.append(FIGURES[x.name].expr)
        stack.extend(x.children())
    return out
