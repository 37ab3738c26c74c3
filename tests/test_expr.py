"""The expression compilers, table-driven: one expression -> the SQLite, PostgreSQL and Excel text,
and the value it must have, checked in sqlite3 and with the PythonEvaluator (and on PostgreSQL
when KVREG_TEST_PG_URL points at a server).

The quirks each target needs (DESIGN.md, STYLE.md) are rows of the table:
- 7 / 2 is 3.5 everywhere (SQLite alone would say 3);
- a zero divisor gives NULL (PostgreSQL alone would raise);
- floor/ceil of negatives step away from zero's truncation, and never lean on CAST, which
  truncates in SQLite but rounds in PostgreSQL (CAST(2.5 AS BIGINT) = 3 there);
- a NULL operand makes a comparison 0, and min/max skip a NULL, as PostgreSQL's LEAST and
  Excel's MIN do (SQLite's scalar min() would give NULL);
- mod keeps the dividend's sign, as SQLite's % and PostgreSQL's MOD do (Python's % does not;
  neither does Excel's MOD, a difference no declaration meets: mod only tests head counts);
- fixed-decimal text rounds halves away from zero on the shortest decimal form (2.675 -> 2.68),
  as SQLite's printf, PostgreSQL's TO_CHAR and Excel's FIXED print it.

SQLite's floor/ceil go through CAST, which saturates at 2^63: exact for every figure (bytes stay
far below 9.2e18), not for arbitrary reals.

The last tests run every real figure declaration both ways, the views in a SQLite registry
against the PythonEvaluator, over a grid of catalog models and deployments.
"""

from __future__ import annotations

import itertools
import math
import os
import sqlite3
from dataclasses import dataclass

import pytest

from kvreg.figures.expr import (
    Const,
    Expr,
    Input,
    and_,
    ceil,
    coalesce,
    concat,
    floor,
    fmt,
    greatest,
    if_,
    isnull,
    least,
    mod,
    not_,
    or_,
)
from kvreg.figures.excel import ExcelCompiler
from kvreg.figures.python import PythonEvaluator
from kvreg.figures.sql import SqlCompiler


a, b = Input("a"), Input("b")


@dataclass(frozen=True)
class Case:
    id: str
    expr: Expr
    inputs: dict
    sqlite: str
    postgresql: str
    excel: str
    value: object


DIV_SQLITE = "((a) * 1.0 / b)"
DIV_PG = "(CAST(a AS DOUBLE PRECISION) / NULLIF(b, 0))"
FLOOR_SQLITE = "(CAST(a AS INTEGER) - (a < CAST(a AS INTEGER)))"
CEIL_SQLITE = "(CAST(a AS INTEGER) + (a > CAST(a AS INTEGER)))"
LEAST_SQL = "(CASE WHEN b IS NULL OR a <= b THEN a ELSE b END)"
GREATEST_SQL = "(CASE WHEN b IS NULL OR a >= b THEN a ELSE b END)"
# PostgreSQL's LEAST/GREATEST skip NULLs and keep the first of equal values, as the CASE does, naming each
# operand once (the CASE names `a` twice and `b` twice: nested, the SQL grows threefold a level).
LEAST_PG = "LEAST(a, b)"
GREATEST_PG = "GREATEST(a, b)"
LT_SQL = "(CASE WHEN a < b THEN 1 ELSE 0 END)"
FMT2_SQLITE = "(CASE WHEN a IS NULL THEN NULL ELSE printf('%.2f', a) END)"
FMT2_PG = "TRIM(TO_CHAR(CAST(a AS NUMERIC), 'FM999999999999990.00'))"
FLOORDIV_SQLITE = (
    f"(CAST({DIV_SQLITE} AS INTEGER) - ({DIV_SQLITE} < CAST({DIV_SQLITE} AS INTEGER)))"
)
BLOCK_DIV_SQLITE = "((a) * 1.0 / 16)"

CASES = [
    # ---- division: real, and NULL (never an error) on a zero divisor
    Case("divide 7/2", a / b, {"a": 7, "b": 2}, DIV_SQLITE, DIV_PG, "(a/b)", 3.5),
    Case("divide by zero", a / b, {"a": 7, "b": 0}, DIV_SQLITE, DIV_PG, "(a/b)", None),
    Case("divide NULL", a / b, {"a": None, "b": 2}, DIV_SQLITE, DIV_PG, "(a/b)", None),
    Case("bytes to GiB", a / 2**30, {"a": 17179869184, "b": 0},
         "((a) * 1.0 / 1073741824)", "(CAST(a AS DOUBLE PRECISION) / NULLIF(CAST(1073741824 AS BIGINT), 0))",
         "(a/1073741824)", 16.0),
    # ---- floor and ceil: toward minus / plus infinity, on both signs
    Case("floor 2.7", floor(a), {"a": 2.7, "b": 0}, FLOOR_SQLITE, "CAST(FLOOR(a) AS BIGINT)", "INT(a)", 2),
    Case("floor 2.5 (PostgreSQL CAST would round to 3)", floor(a), {"a": 2.5, "b": 0},
         FLOOR_SQLITE, "CAST(FLOOR(a) AS BIGINT)", "INT(a)", 2),
    Case("floor -2.5", floor(a), {"a": -2.5, "b": 0}, FLOOR_SQLITE, "CAST(FLOOR(a) AS BIGINT)", "INT(a)", -3),
    Case("floor -3 (whole)", floor(a), {"a": -3, "b": 0}, FLOOR_SQLITE, "CAST(FLOOR(a) AS BIGINT)", "INT(a)", -3),
    Case("ceil 2.2", ceil(a), {"a": 2.2, "b": 0}, CEIL_SQLITE, "CAST(CEIL(a) AS BIGINT)", "-INT(-(a))", 3),
    Case("ceil -2.7", ceil(a), {"a": -2.7, "b": 0}, CEIL_SQLITE, "CAST(CEIL(a) AS BIGINT)", "-INT(-(a))", -2),
    Case("ceil 4.0 (whole)", ceil(a), {"a": 4.0, "b": 0}, CEIL_SQLITE, "CAST(CEIL(a) AS BIGINT)", "-INT(-(a))", 4),
    Case("floor NULL", floor(a), {"a": None, "b": 0}, FLOOR_SQLITE, "CAST(FLOOR(a) AS BIGINT)", "INT(a)", None),
    # -7 / 2 = -3.5: SQLite's integer division would truncate to -3; floor is -4.
    Case("floor(-7/2)", floor(a / b), {"a": -7, "b": 2}, FLOORDIV_SQLITE,
         f"CAST(FLOOR({DIV_PG}) AS BIGINT)", "INT((a/b))", -4),
    # Paged KV: 1,500 tokens take ceil(1500 / 16) = 94 blocks = 1,504 tokens.
    Case("round up to blocks", ceil(a / 16) * 16, {"a": 1500, "b": 0},
         f"((CAST({BLOCK_DIV_SQLITE} AS INTEGER) + ({BLOCK_DIV_SQLITE} > CAST({BLOCK_DIV_SQLITE} AS INTEGER))) * 16)",
         "(CAST(CEIL((CAST(a AS DOUBLE PRECISION) / NULLIF(CAST(16 AS BIGINT), 0))) AS BIGINT) * CAST(16 AS BIGINT))",
         "(-INT(-((a/16))) * 16)", 1504),
    # ---- arithmetic and typed literals (PostgreSQL: BIGINT and DOUBLE PRECISION, never REAL)
    Case("usable share", 1 - a * 0.12, {"a": 1, "b": 0}, "(1 - (a * 0.12))",
         "(CAST(1 AS BIGINT) - (a * CAST(0.12 AS DOUBLE PRECISION)))", "(1 - (a * 0.12))", 1 - 0.12),
    Case("integers stay exact", a * b + 1, {"a": 2**40, "b": 8}, "((a * b) + 1)", "((a * b) + CAST(1 AS BIGINT))",
         "((a * b) + 1)", 2**43 + 1),
    # ---- min / max: NULL is skipped on every target
    Case("least", least(a, b), {"a": 3, "b": 5}, LEAST_SQL, LEAST_PG, "MIN(a,b)", 3),
    Case("least, NULL first", least(a, b), {"a": None, "b": 5}, LEAST_SQL, LEAST_PG, "MIN(a,b)", 5),
    Case("least, NULL second", least(a, b), {"a": 3, "b": None}, LEAST_SQL, LEAST_PG, "MIN(a,b)", 3),
    Case("least, both NULL", least(a, b), {"a": None, "b": None}, LEAST_SQL, LEAST_PG, "MIN(a,b)", None),
    Case("least, a tie", least(a, b), {"a": 2, "b": 2.0}, LEAST_SQL, LEAST_PG, "MIN(a,b)", 2),
    Case("greatest", greatest(a, b), {"a": 1, "b": 0.5}, GREATEST_SQL, GREATEST_PG, "MAX(a,b)", 1),
    Case("greatest, NULL second", greatest(a, b), {"a": 1, "b": None}, GREATEST_SQL, GREATEST_PG, "MAX(a,b)", 1),
    Case("greatest, NULL first", greatest(a, b), {"a": None, "b": 0.5}, GREATEST_SQL, GREATEST_PG, "MAX(a,b)", 0.5),
    Case("greatest, a tie", greatest(a, b), {"a": 2.0, "b": 2}, GREATEST_SQL, GREATEST_PG, "MAX(a,b)", 2.0),
    # ---- comparisons and logic give 0/1 integers; NULL compares as 0
    Case("less than", a < b, {"a": 1, "b": 2}, LT_SQL, LT_SQL, "IF(a<b,1,0)", 1),
    Case("less than, NULL", a < b, {"a": None, "b": 2}, LT_SQL, LT_SQL, "IF(a<b,1,0)", 0),
    Case("equal", a.eq(b), {"a": 4, "b": 4.0}, "(CASE WHEN a = b THEN 1 ELSE 0 END)",
         "(CASE WHEN a = b THEN 1 ELSE 0 END)", "IF(a=b,1,0)", 1),
    Case("not equal", a.ne(b), {"a": 4, "b": 4}, "(CASE WHEN a <> b THEN 1 ELSE 0 END)",
         "(CASE WHEN a <> b THEN 1 ELSE 0 END)", "IF(a<>b,1,0)", 0),
    Case("if", if_(a > b, a, b), {"a": 2, "b": 9},
         "(CASE WHEN (a > b) THEN a ELSE b END)",
         "(CASE WHEN (a > b) THEN a ELSE b END)", "IF(IF(a>b,1,0)<>0,a,b)", 9),
    Case("if, NULL condition takes else", if_(a, 1, 2), {"a": None, "b": 0},
         "(CASE WHEN (a) <> 0 THEN 1 ELSE 2 END)",
         "(CASE WHEN (a) <> 0 THEN CAST(1 AS BIGINT) ELSE CAST(2 AS BIGINT) END)",
         "IF(a<>0,1,2)", 2),
    Case("and", and_(a, b), {"a": 1, "b": 0}, "(CASE WHEN ((a) <> 0 AND (b) <> 0) THEN 1 ELSE 0 END)",
         "(CASE WHEN ((a) <> 0 AND (b) <> 0) THEN 1 ELSE 0 END)", "IF(AND(a<>0,b<>0),1,0)", 0),
    Case("and, NULL", and_(a, b), {"a": 1, "b": None}, "(CASE WHEN ((a) <> 0 AND (b) <> 0) THEN 1 ELSE 0 END)",
         "(CASE WHEN ((a) <> 0 AND (b) <> 0) THEN 1 ELSE 0 END)", "IF(AND(a<>0,b<>0),1,0)", 0),
    Case("or", or_(a, b), {"a": 0, "b": 2}, "(CASE WHEN ((a) <> 0 OR (b) <> 0) THEN 1 ELSE 0 END)",
         "(CASE WHEN ((a) <> 0 OR (b) <> 0) THEN 1 ELSE 0 END)", "IF(OR(a<>0,b<>0),1,0)", 1),
    Case("not", not_(a), {"a": 0, "b": 0}, "(CASE WHEN (NOT (a) <> 0) THEN 1 ELSE 0 END)",
         "(CASE WHEN (NOT (a) <> 0) THEN 1 ELSE 0 END)", "IF(a<>0,0,1)", 1),
    # ---- NULL handling
    Case("isnull", isnull(a), {"a": None, "b": 0}, "(CASE WHEN a IS NULL THEN 1 ELSE 0 END)",
         "(CASE WHEN a IS NULL THEN 1 ELSE 0 END)", 'IF(ISBLANK(a),1,IF(a="",1,0))', 1),
    Case("coalesce", coalesce(a, b), {"a": None, "b": 7}, "COALESCE(a, b)", "COALESCE(a, b)",
         'IF(OR(ISBLANK(a),a=""),b,a)', 7),
    # ---- mod (integers): the dividend's sign, NULL on zero
    Case("mod", mod(a, b), {"a": 64, "b": 6}, "(a % b)", "MOD(a, NULLIF(b, 0))", "MOD(a,b)", 4),
    Case("mod of a negative", mod(a, b), {"a": -7, "b": 3}, "(a % b)", "MOD(a, NULLIF(b, 0))",
         "MOD(a,b)", -1),
    Case("mod by zero", mod(a, b), {"a": 7, "b": 0}, "(a % b)", "MOD(a, NULLIF(b, 0))", "MOD(a,b)", None),
    # ---- text
    Case("concat", concat("TP ", a, " x PP ", b), {"a": 3, "b": 1}, "('TP ' || a || ' x PP ' || b)",
         "('TP ' || a || ' x PP ' || b)", '("TP "&a&" x PP "&b)', "TP 3 x PP 1"),
    Case("concat quotes", concat("it's ", a), {"a": 1, "b": 0}, "('it''s ' || a)", "('it''s ' || a)",
         "(\"it's \"&a)", "it's 1"),
    Case("concat NULL", concat("x", a), {"a": None, "b": 0}, "('x' || a)", "('x' || a)", '("x"&a)', None),
    Case("fmt", fmt(a, 2), {"a": 55.4057065486908, "b": 0}, FMT2_SQLITE, FMT2_PG, "FIXED(a,2,TRUE)", "55.41"),
    Case("fmt half away from zero", fmt(a, 2), {"a": 2.675, "b": 0}, FMT2_SQLITE, FMT2_PG, "FIXED(a,2,TRUE)", "2.68"),
    Case("fmt negative", fmt(a, 2), {"a": -7.714680945873255, "b": 0}, FMT2_SQLITE, FMT2_PG, "FIXED(a,2,TRUE)",
         "-7.71"),
    Case("fmt NULL", fmt(a, 2), {"a": None, "b": 0}, FMT2_SQLITE, FMT2_PG, "FIXED(a,2,TRUE)", None),
    Case("fmt 0 decimals", fmt(a, 0), {"a": 2.5, "b": 0},
         "(CASE WHEN a IS NULL THEN NULL ELSE printf('%.0f', a) END)",
         "TRIM(TO_CHAR(CAST(a AS NUMERIC), 'FM999999999999990.'))", "FIXED(a,0,TRUE)", "3"),
    Case("text literal", Const("fits") , {"a": 0, "b": 0}, "'fits'", "'fits'", '"fits"', "fits"),
]


def _names(name: str) -> str:
    return name


def _same(got, want) -> bool:
    if want is None or got is None:
        return got is want
    if isinstance(want, float) or isinstance(got, float):
        return isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=1e-12)
    return got == want and type(got) is type(want)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_compiles_to(case):
    assert SqlCompiler(_names, _names).compile(case.expr) == case.sqlite
    assert SqlCompiler(_names, _names, dialect="postgresql").compile(case.expr) == case.postgresql
    assert ExcelCompiler(_names, _names).compile(case.expr) == case.excel


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_sqlite_value(case):
    sql = SqlCompiler(_names, _names).compile(case.expr)
    with sqlite3.connect(":memory:") as conn:
        (got,) = conn.execute(f"SELECT {sql} FROM (SELECT :a AS a, :b AS b)", case.inputs).fetchone()
    assert _same(got, case.value), (sql, got)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_python_value(case):
    got = PythonEvaluator(case.inputs.__getitem__, case.inputs.__getitem__).eval(case.expr)
    assert _same(got, case.value), got


# When neither side can be NULL (kvreg.figures.facts.never_null_in_sql says so of a figure's
# operands), SQLite's own min()/max() stand for the CASE: the same value, and of two equal values
# the same one (`a`): 2 and 2.0 are equal, but a JSON reader sees 2 or 2.0.
MINMAX_CASES = [
    (least(a, b), {"a": 3, "b": 5}, "min(b, a)", 3),
    (least(a, b), {"a": 7.5, "b": 5}, "min(b, a)", 5),
    (least(a, b), {"a": 2, "b": 2.0}, "min(b, a)", 2),
    (least(a, b), {"a": 2.0, "b": 2}, "min(b, a)", 2.0),
    (greatest(a, b), {"a": 1, "b": 0.5}, "max(a, b)", 1),
    (greatest(a, b), {"a": 2, "b": 2.0}, "max(a, b)", 2),
    (greatest(a, b), {"a": 2.0, "b": 2}, "max(a, b)", 2.0),
]


@pytest.mark.parametrize("expr, inputs, sql, value", MINMAX_CASES)
def test_sqlite_min_max_of_operands_never_null(expr, inputs, sql, value):
    never_null = lambda e: True  # noqa: E731
    got_sql = SqlCompiler(_names, _names, never_null).compile(expr)
    assert got_sql == sql
    with sqlite3.connect(":memory:") as conn:
        (got,) = conn.execute(f"SELECT {got_sql} FROM (SELECT :a AS a, :b AS b)", inputs).fetchone()
    (case_value,) = sqlite3.connect(":memory:").execute(
        f"SELECT {SqlCompiler(_names, _names).compile(expr)} FROM (SELECT :a AS a, :b AS b)", inputs).fetchone()
    assert got == value and type(got) is type(value)
    assert got == case_value and type(got) is type(case_value)


def test_sqlite_min_max_keep_the_case_when_an_operand_may_be_null():
    only_a = lambda e: e is a  # noqa: E731  (b may be NULL)
    assert SqlCompiler(_names, _names, only_a).compile(least(a, b)) == LEAST_SQL
    assert SqlCompiler(_names, _names, only_a).compile(greatest(b, a)) == (
        "(CASE WHEN a IS NULL OR b >= a THEN b ELSE a END)")


PG_URL = os.environ.get("KVREG_TEST_PG_URL")


def _pg_literal(v) -> str:
    """An input as a typed PostgreSQL literal: the views' columns are BIGINT or DOUBLE PRECISION."""
    if v is None:
        return "CAST(NULL AS BIGINT)"
    if isinstance(v, float):
        return f"CAST({v!r} AS DOUBLE PRECISION)"
    return f"CAST({v} AS BIGINT)"


@pytest.mark.skipif(not PG_URL, reason="set KVREG_TEST_PG_URL=postgresql+psycopg://... to run on PostgreSQL")
def test_postgresql_values():
    import psycopg

    url = PG_URL.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as conn:
        for case in CASES:
            inline = lambda name, c=case: _pg_literal(c.inputs[name])  # noqa: E731
            sql = SqlCompiler(inline, inline, dialect="postgresql").compile(case.expr)
            got = conn.execute(f"SELECT {sql}".replace("%", "%%")).fetchone()[0]
            assert _same(float(got) if type(got).__name__ == "Decimal" else got, case.value), (case.id, sql, got)


def _pg_text_literal(v) -> str:
    """_pg_literal, a float read from its text: -0.0 stays negative (a numeric -0.0 is 0), and NaN and the
    infinities have no numeric literal."""
    return f"CAST('{v!r}' AS DOUBLE PRECISION)" if isinstance(v, float) else _pg_literal(v)


@pytest.mark.skipif(not PG_URL, reason="set KVREG_TEST_PG_URL=postgresql+psycopg://... to run on PostgreSQL")
def test_least_and_greatest_give_what_the_case_gave_on_postgresql():
    """The views' min/max on PostgreSQL were the CASE that skips a NULL and keeps `a` on a tie; LEAST and
    GREATEST replaced it. Both print the same text for every pair: NULLs, ties of integer and double, signed
    zeros (equal, but printed -0 and 0: the first is kept), NaN (PostgreSQL orders it above every number),
    infinities and BIGINT's ends."""
    import psycopg

    values = [None, 0, 2, -3, 2**62, -(2**63), 2.0, 0.0, -0.0, 0.5, float("nan"), float("inf"), float("-inf")]
    pairs = [(x, y) for x in values for y in values]
    url = PG_URL.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as conn:
        for x, y in pairs:
            lit = {"a": _pg_text_literal(x), "b": _pg_text_literal(y)}
            names = lit.__getitem__
            for fn, op in ((least, "<="), (greatest, ">=")):
                new = SqlCompiler(names, names, dialect="postgresql").compile(fn(a, b))
                old = f"(CASE WHEN {lit['b']} IS NULL OR {lit['a']} {op} {lit['b']} THEN {lit['a']} ELSE {lit['b']} END)"
                got, want = conn.execute(f"SELECT CAST({new} AS TEXT), CAST({old} AS TEXT)").fetchone()
                assert got == want, (x, y, new, got, want)
    assert len(pairs) == 169


# --------------------------------------------------------------------------- the real declarations


def evaluate(inputs: dict, names) -> dict:
    """Every named figure of one row, computed by the PythonEvaluator from the row's inputs."""
    from kvreg.figures.declarations import FIGURES

    memo: dict = {}

    def ref(name):
        if name not in memo:
            memo[name] = PythonEvaluator(inputs.__getitem__, ref).eval(FIGURES[name].expr)
        return memo[name]

    return {n: ref(n) for n in names}


def _agree(got, want) -> bool:
    if want is None or got is None:
        return got is None and want is None
    if isinstance(want, str) or isinstance(got, str):
        return got == want
    return math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-9)


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    from kvreg.app.access import open_registry

    eng = open_registry(f"sqlite:///{tmp_path_factory.mktemp('expr') / 'registry.db'}")
    yield eng
    eng.dispose()


def _compare_grain(conn, view: str, key: tuple[str, ...]) -> int:
    """Compare every figure column of `view` with the PythonEvaluator on the grain's own inputs."""
    from sqlalchemy import text

    from kvreg.figures.views import GRAIN

    grain = GRAIN[view]
    names = grain.figures()
    inputs = {tuple(r[k] for k in key): dict(r) for r in conn.execute(text(grain.source)).mappings()}
    rows = list(conn.execute(text(f"SELECT * FROM {view}")).mappings())
    assert rows and len(rows) == len(inputs)
    for row in rows:
        want = evaluate(inputs[tuple(row[k] for k in key)], names)
        bad = {n: (row[n], want[n]) for n in names if not _agree(row[n], want[n])}
        assert not bad, f"{view} {row['model']} {dict(row)}: view vs PythonEvaluator differ: {bad}"
    return len(rows)


def test_model_kv_view_matches_python_evaluator(registry):
    # Every catalog model x every KV dtype: the view's SQL and the evaluator agree on each figure.
    with registry.connect() as conn:
        assert _compare_grain(conn, "model_kv", ("model_id", "kv_dtype")) > 0


def _scenarios(conn) -> list[dict]:
    """A deterministic grid over every catalog model: TPs valid and invalid, PP, contexts below and
    above sliding windows, KV dtypes (MLA-only too), block rounding, a given pool, DP-attention."""
    from sqlalchemy import text

    models = list(conn.execute(text("SELECT id, weight_dtype FROM model ORDER BY name")))
    gpus = [conn.execute(text("SELECT id FROM gpu WHERE name = :n"), {"n": n}).scalar()
            for n in ("H100-SXM", "H200", "RTX-4090")]
    rows = []
    grid = itertools.product(models, (1, 3, 8), ("bf16", "fp8", "fp8_ds_mla", "int2"), (1000, 131072, 1000000))
    for i, ((model_id, native), tp, kv_dtype, context) in enumerate(grid):
        rows.append(dict(
            model_id=model_id, gpu_id=gpus[i % 3], gpus_per_node=8, tp=tp, pp=(1, 2)[i // 3 % 2],
            dp_attention=(1, tp)[i // 5 % 2], kv_dtype=kv_dtype, weight_dtype=(native, "fp8", "bf16")[i // 7 % 3],
            context_tokens=context, avg_tokens=None, reserve=(0.12, 0.0, 0.5)[i // 11 % 3],
            kv_cache_memory_bytes=(None, 53 * 10**9)[i // 13 % 2], block_size=(16, 0)[i // 2 % 2],
        ))
    return rows


def test_capacity_view_matches_python_evaluator(registry):
    from sqlalchemy import insert

    from kvreg.db.tables import Scenario

    with registry.connect() as conn, conn.begin() as trans:
        scenarios = _scenarios(conn)
        conn.execute(insert(Scenario), scenarios)
        assert _compare_grain(conn, "capacity", ("id",)) == len(scenarios)
        trans.rollback()


def test_postgresql_views_match_python_evaluator():
    """The same grid on PostgreSQL: its view SQL (BIGINT, DOUBLE PRECISION, FLOOR, MOD, TO_CHAR)
    gives what the evaluator gives, in a throwaway database."""
    pg = pytest.importorskip("pg", reason="tests/pg.py is not present")
    server, why = pg.find_server()
    if server is None:
        pytest.skip(why)
    from sqlalchemy import insert

    from kvreg.app.access import open_registry
    from kvreg.db.tables import Scenario

    name = server.create_database()
    engine = open_registry(server.url(name))
    try:
        with engine.connect() as conn, conn.begin() as trans:
            assert _compare_grain(conn, "model_kv", ("model_id", "kv_dtype")) > 0
            scenarios = _scenarios(conn)
            conn.execute(insert(Scenario), scenarios)
            assert _compare_grain(conn, "capacity", ("id",)) == len(scenarios)
            trans.rollback()
    finally:
        engine.dispose()
        server.drop_database(name)
        server.close()
