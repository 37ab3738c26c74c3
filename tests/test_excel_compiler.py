"""The facts the workbook's compiler takes from the input declarations agree with the schema.

kvreg.figures sits below kvreg.db, so the compiler cannot read the tables: each InputDecl says
whether its column may be NULL and whether a CHECK keeps it above zero. These tests hold the
declarations to kvreg/db/tables.py, so a schema change that loosens a column shows up here
instead of as a formula that gives #VALUE! or #DIV/0! where the views give NULL.
"""

from __future__ import annotations

import pytest
from sqlalchemy import CheckConstraint

from kvreg.db.tables import Demand, Dtype, Gpu, Model, Plan, Scenario, WorkloadClass
from kvreg.figures.declarations import CLASS_MEANS, INPUT_TABLES, INPUTS

TABLES = {t.__tablename__: t.__table__ for t in (Dtype, Model, Gpu, Plan, Scenario, WorkloadClass, Demand)}
CLASS_MEAN_INPUTS = {m.name for m in CLASS_MEANS}  # computed per plan: no column of their own
# Declared positive although no CHECK keeps them so unconditionally; the formulas divide by them
# without a zero test. Each says which CHECK comes closest.
NOT_KEPT_POSITIVE = {
    "linear_state_heads": "ck_model_linear_heads: above zero only while linear_state_elements_per_layer is set",
}


def _column(name: str):
    """The column an input is read from, in the first registry table its relation names (a
    deployment's: plan)."""
    decl = INPUTS[name]
    table = TABLES[INPUT_TABLES[decl.table][0]]
    return table, table.c[decl.column]


def _split(text: str, word: str) -> list[str]:
    """`text` split at `word` (AND, OR) outside parentheses."""
    parts, depth, start, i = [], 0, 0, 0
    sep = f" {word} "
    while i < len(text):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    return parts + [text[start:]]


def _strip(text: str) -> str:
    """Without the parentheses around the whole of it."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1].strip()
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def keeps_positive(condition: str, column: str) -> bool:
    """Whether a CHECK condition keeps `column` above zero whenever it is not NULL: every OR branch
    has, among its ANDed terms, `column > 0` or `column IS NULL`."""
    condition = _strip(condition)
    branches = _split(condition, "OR")
    if len(branches) > 1:
        return all(keeps_positive(b, column) for b in branches)
    terms = _split(condition, "AND")
    if len(terms) > 1:
        return any(keeps_positive(t, column) for t in terms)
    return condition in (f"{column} > 0", f"{column} IS NULL")


@pytest.mark.parametrize("condition, column, kept", [
    ("x > 0", "x", True),
    ("x IS NULL OR x > 0", "x", True),
    ("a > 0 AND b > 0", "b", True),
    ("x > 0 AND x <= 8", "x", True),
    ("(a IS NULL OR a > 0) AND (b IS NULL OR b > 0)", "b", True),
    ("(x IS NULL AND y IS NULL) OR (x > 0 AND y >= 0)", "x", True),
    ("(x IS NULL AND y IS NULL) OR (x > 0 AND y >= 0)", "y", False),
    ("x IS NULL OR (x > 0 AND x <= m)", "x", True),
    ("x >= 0", "x", False),
    ("n = 0 OR x > 0", "x", False),
    ("y IS NULL OR x > 0", "x", False),
    ("length(x) > 0", "x", False),
    ("xy > 0", "x", False),
])
def test_keeps_positive_reads_check_conditions(condition, column, kept):
    assert keeps_positive(condition, column) is kept


def _kept_positive(table, column) -> list[str]:
    """The CHECK constraints of `table` that keep `column` above zero when set."""
    return [c.name for c in table.constraints
            if isinstance(c, CheckConstraint) and keeps_positive(str(c.sqltext), column.name)]


def test_every_input_has_a_column_or_is_a_class_mean():
    for name in INPUTS:
        if name not in CLASS_MEAN_INPUTS:
            _column(name)


def test_every_input_names_its_table_and_column():
    """Each input's relation is a registry table (or, for a class mean, none), and every table
    behind it has the column the input names, as nullable as declared."""
    wrong = {}
    for name, decl in INPUTS.items():
        tables = INPUT_TABLES[decl.table]
        if (name in CLASS_MEAN_INPUTS) != (not tables):
            wrong[name] = f"relation {decl.table}: tables {tables}"
        for t in tables:
            if t not in TABLES or decl.column not in TABLES[t].c:
                wrong[name] = f"no column {t}.{decl.column}"
            elif bool(TABLES[t].c[decl.column].nullable) != decl.nullable:
                wrong[name] = f"{t}.{decl.column}: nullable {TABLES[t].c[decl.column].nullable}"
    assert wrong == {}


def test_declared_nullability_is_the_columns():
    wrong = {}
    for name, decl in INPUTS.items():
        nullable = True if name in CLASS_MEAN_INPUTS else bool(_column(name)[1].nullable)  # no classes: NULL
        if decl.nullable != nullable:
            wrong[name] = f"declared nullable={decl.nullable}, the schema {nullable}"
    assert wrong == {}


def test_declared_positive_is_what_the_checks_keep_above_zero():
    wrong = {}
    for name, decl in INPUTS.items():
        if name in CLASS_MEAN_INPUTS:
            continue
        kept = bool(_kept_positive(*_column(name)))
        if name in NOT_KEPT_POSITIVE:
            assert decl.positive and not kept, f"{name}: drop it from NOT_KEPT_POSITIVE"
        elif decl.positive != kept:
            wrong[name] = f"declared positive={decl.positive}, a CHECK keeps it above zero: {kept}"
    assert wrong == {}


# ---- never_null_in_sql: where the SQLite views may use SQLite's own min()/max()
from kvreg.figures.expr import Const, Input, Ref, if_, isnull  # noqa: E402
from kvreg.figures.facts import never_null_in_sql  # noqa: E402


@pytest.mark.parametrize("expr, never_null", [
    (Input("tp"), True),                                      # NOT NULL column
    (Input("sliding_window"), False),                         # nullable column
    (Input("kv_lora_rank"), False),                           # nullable; the workbook's guards exempt it, SQL does not
    (Input("layers") * Input("tp"), True),
    (Input("layers") / Input("pp"), True),                    # pp > 0 (ck_plan_parallel)
    (Input("layers") / Input("sliding_layers"), False),       # may be 0, and x / 0 is NULL in SQL
    (Input("layers") / Input("linear_state_heads"), False),   # above zero only with linear state
    (Input("layers") / Const(16), True),
    (Input("layers") / Const(0), False),
    (if_(isnull(Input("sliding_window")), Const(0), Input("sliding_window")), True),  # the else knows it is set
    (Input("layers") > Input("sliding_window"), True),        # a comparison is 0 or 1
    (Ref("no_such_figure"), False),                           # a name no figure declares: assume NULL
])
def test_never_null_in_sql(expr, never_null):
    assert never_null_in_sql(expr) is never_null
