"""Compile the procurement aggregates (declarations.AGGREGATES) to SQL and to Excel formulas.

An aggregate is a figure per GPU type and quarter over the demand and fleet entries in force in
that quarter. "In force" is the carry-forward rule, written once per target (kvreg.figures.quarters):

- an entry holds from its quarter until the next entry of the same plan (fleet: GPU type);
- SQL: `quarter_index <= Q AND (until_index IS NULL OR until_index > Q)`, where until_index is
  the next entry's quarter (LEAD over the entries) in the plan_quarter and fleet_quarter views;
- Excel: `quarter_index <= Q` and no entry of the same key with an index in (quarter_index, Q]
  (COUNTIFS = 0), a helper column per quarter the sheet asks about.

Sums and counts become SUM(CASE ...) in one GROUP BY pass (SQL) and SUMIFS / COUNTIFS (Excel);
expressions over them compile through the same expression compilers as every other figure.
"""

from __future__ import annotations

from typing import Callable

from .declarations import AGGREGATE_AXIS_INPUTS, AGGREGATE_GPU_INPUTS, AGGREGATES, Aggregate
from .excel import ExcelCompiler
from .expr import Input, Ref, names
from .quarters import (  # noqa: F401  (the carry-forward rule's pieces, re-exported)
    in_force_excel, in_force_sql, index_of_quarter, previous_index_sql, quarter_index_excel, quarter_index_sql,
    quarter_of_index_excel, quarter_of_index_sql,
)
from .sql import compiler, integer_sum, step_as
from .sql import fence as sql_fence

# --------------------------------------------------------------------------- order


def aggregate_order() -> list[str]:
    """Every aggregate, each after the aggregates its expression refers to."""
    done: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        for ref in _refs(AGGREGATES[name]):
            visit(ref)
        done.append(name)

    for name in AGGREGATES:
        visit(name)
    return done


def _refs(a: Aggregate) -> list[str]:
    if a.running:
        return [a.of]
    if a.expr is None:
        return []
    return names(a.expr, (Ref,))


def _inputs(e) -> list[str]:
    """The GPU inputs an aggregate's expression reads, in first-seen order."""
    return names(e, (Input,))


# --------------------------------------------------------------------------- SQL


_SOURCE = {"demand": "plan_quarter", "fleet": "fleet_quarter"}


def _cond_sql(alias: str, where) -> str:
    return "".join(f" AND {alias}.{col} {op} {value!r}" for col, op, value in where)


def _sum_sql(a: Aggregate, alias: str, dialect: str) -> str:
    q = "ax.quarter_index" if a.quarter == "this" else previous_index_sql("ax.quarter_index")
    cond = in_force_sql(alias, q) + _cond_sql(alias, a.where)
    if a.of is None:
        return f"SUM(CASE WHEN {cond} THEN 1 ELSE 0 END)"
    s = f"COALESCE(SUM(CASE WHEN {cond} THEN {alias}.{a.of} END), 0)"
    return integer_sum(s, dialect) if a.kind == "int" else s


def aggregate_sql(axis_sql: str, dialect: str = "sqlite", *, only_active: bool = False,
                  every_gpu: bool = False) -> str:
    """The aggregates per GPU type and quarter for the quarters `axis_sql` yields (columns quarter
    and quarter_index), over every GPU type with demand or fleet (`every_gpu`: over every GPU type,
    as the workbook's Summary lists them). One pass over each source; the previous quarter is the
    same sum with the rule at quarter_index - 1. `only_active`: leave out GPU types and quarters
    with no plan and no GPU installed (the procurement view)."""
    fence = sql_fence(dialect)
    as_ = step_as(dialect)
    order = aggregate_order()
    # Each source is read once, into a CTE the joins below scan (fenced: not re-evaluated per quarter).
    # The horizon starts at the axis's first quarter (order_late: an order due before it is late).
    ctes = [f"ax {as_} (SELECT quarter, quarter_index, MIN(quarter_index) OVER () AS horizon_start_index"
            f" FROM ({axis_sql}) a{fence})"]
    for over in ("demand", "fleet"):
        cols = sorted({"gpu", "quarter_index", "until_index"}
                      | {a.of for a in AGGREGATES.values() if a.over == over and a.of}
                      | {c for a in AGGREGATES.values() if a.over == over for c, _op, _v in a.where})
        ctes.append(f"src_{over} {as_} (SELECT {', '.join(cols)} FROM {_SOURCE[over]}{fence})")
    ctes.append("gq AS (SELECT name AS gpu FROM gpu)" if every_gpu
                else "gq AS (SELECT gpu FROM src_demand UNION SELECT gpu FROM src_fleet)")
    parts = []
    for over, alias in (("demand", "d"), ("fleet", "f")):
        sums = [a for a in (AGGREGATES[n] for n in order) if a.over == over]
        cols = ", ".join(f"{_sum_sql(a, alias, dialect)} AS {a.name}" for a in sums)
        ctes.append(
            f"s_{over} AS (SELECT {alias}.gpu AS gpu, ax.quarter_index AS quarter_index, {cols}"
            f" FROM src_{over} {alias} JOIN ax ON {alias}.quarter_index <= ax.quarter_index"
            f" AND ({alias}.until_index IS NULL OR {alias}.until_index > {previous_index_sql('ax.quarter_index')})"
            f" GROUP BY {alias}.gpu, ax.quarter_index)"
        )
        parts += [(f"CASE WHEN g.{a.unknown_without} IS NULL THEN NULL ELSE COALESCE(s_{over}.{a.name}, 0) END"
                   if a.unknown_without else f"COALESCE(s_{over}.{a.name}, 0)") + f" AS {a.name}" for a in sums]
    gpu_cols = ", ".join(f"g.{c} AS {c}" for c in AGGREGATE_GPU_INPUTS)
    ctes.append(
        f"layer0 {as_} (SELECT gq.gpu AS gpu, ax.quarter AS quarter, ax.quarter_index AS quarter_index,"
        f" ax.horizon_start_index AS horizon_start_index, {gpu_cols}, "
        + ", ".join(parts)
        + " FROM gq CROSS JOIN ax JOIN gpu g ON g.name = gq.gpu"
        " LEFT JOIN s_demand ON s_demand.gpu = gq.gpu AND s_demand.quarter_index = ax.quarter_index"
        " LEFT JOIN s_fleet ON s_fleet.gpu = gq.gpu AND s_fleet.quarter_index = ax.quarter_index"
        f"{fence})"
    )
    comp = compiler(dialect)  # every name is a column src.NAME of the layer below
    below = "layer0"
    for i, name in enumerate((n for n in order if AGGREGATES[n].expr is not None or AGGREGATES[n].running),
                             start=1):
        a = AGGREGATES[name]
        value = running_sql(a) if a.running else comp.compile(a.expr)
        ctes.append(f"layer{i} {as_} (SELECT src.*, {value} AS {name} FROM {below} src{fence})")
        below = f"layer{i}"
    out = ", ".join(f"{quarter_of_index_sql('src.' + QUARTER_TEXTS[c])} AS {c}" if c in QUARTER_TEXTS
                    else f"src.{c}" for c in ["gpu", "quarter", *AGGREGATE_COLUMNS])
    where = " WHERE src.plans > 0 OR src.gpus_installed > 0" if only_active else ""
    return "WITH " + ",\n".join(ctes) + f"\nSELECT {out}\nFROM {below} src{where}"


def running_sql(a: Aggregate) -> str:
    """A running aggregate over the horizon's rows of one GPU type: the largest `of` up to this quarter
    (previous: before it, 0 in the horizon's first quarter)."""
    assert a.running == "max", a.name
    frame = "CURRENT ROW" if a.quarter == "this" else "1 PRECEDING"
    window = (f"MAX(src.{a.of}) OVER (PARTITION BY src.gpu ORDER BY src.quarter_index"
              f" ROWS BETWEEN UNBOUNDED PRECEDING AND {frame})")
    return window if a.quarter == "this" else f"COALESCE({window}, 0)"


# Quarter indexes the rollup also gives as quarters (2027Q1): the only columns that are not an aggregate
# or a GPU input.
QUARTER_TEXTS = {"order_by": "order_by_index", "order_by_whole_nodes": "order_by_index_whole_nodes"}

# The columns a rollup shows, in the order a reader wants them: the purchase first.
AGGREGATE_COLUMNS = [
    "gpus_to_buy", "capex_to_buy", "order_by", "order_late", "gpus_needed", "gpus_installed", "gpus_short",
    "gpus_bought", "gpus_spare", "gpus_owned", "gpus_reserved", "plans", "plans_not_fitting", "users", "nodes_needed",
    "cost_per_month", "reserved_price_per_hour", "reserved_cost_per_month", "previous_quarter_gpus_needed",
    "gpus_needed_quarter_change", "gpus_to_buy_whole_nodes", "capex_to_buy_whole_nodes", "order_by_whole_nodes",
    "order_late_whole_nodes", "gpus_bought_whole_nodes", "previous_gpus_bought", "order_by_index",
    "order_by_index_whole_nodes", "unit_price", "price_per_hour", "lead_time_quarters", "node_gpus",
]
assert set(AGGREGATE_COLUMNS) - set(AGGREGATE_GPU_INPUTS) - set(QUARTER_TEXTS) == set(AGGREGATES), \
    "every aggregate has a column"


def entered_quarters_sql() -> str:
    """The axis of the procurement view: every quarter some demand or fleet entry names."""
    return (f"SELECT quarter, {quarter_index_sql('quarter')} AS quarter_index"
            " FROM (SELECT quarter FROM demand UNION SELECT quarter FROM fleet) q")


# `kvreg plan rollup --quarter Q`: the axis is the one quarter, given as parameters, so the query's text
# does not depend on it. It is compiled with the views and kept beside them (kvreg_meta, ROLLUP_SQL_KEY):
# an eligible registry answers it without importing the declarations (kvreg.db.read.rollup).
ROLLUP_SQL_KEY = "rollup_quarter_sql"
ONE_QUARTER_AXIS = "SELECT CAST(:quarter AS VARCHAR(6)) AS quarter, CAST(:quarter_index AS INTEGER) AS quarter_index"


def one_quarter_sql(dialect: str = "sqlite") -> str:
    """The aggregates in the quarter :quarter (index :quarter_index), GPU types with plans or GPUs only."""
    return aggregate_sql(ONE_QUARTER_AXIS, dialect, only_active=True)


def quarters_sql(quarters: list[str]) -> str:
    """An axis of given quarters (already validated YEARQn texts) for a horizon: one VALUES list, not
    a UNION ALL per quarter (SQLite refuses a compound SELECT of more than 500 terms, and a report
    over 600 demand quarters failed with "too many terms in compound SELECT")."""
    rows = ", ".join(f"('{q}', {index_of_quarter(q)})" for q in quarters)
    return f"WITH axis (quarter, quarter_index) AS (VALUES {rows}) SELECT quarter, quarter_index FROM axis"


# --------------------------------------------------------------------------- Excel


def aggregate_excel(name: str, *, demand: Callable[[str], str], fleet: Callable[[str], str],
                    gpu_criterion: Callable[[str], str], cell_of: Callable[[str], str],
                    in_force: str | None = None) -> str:
    """One aggregate's cell formula (with '=') in a row of one GPU type and quarter.

    `demand(col)` / `fleet(col)`: the column's range in the Demand / Fleet sheet; the sheets carry
    helper columns in_force and previous_quarter_in_force (in_force_excel at the quarter asked and
    the one before). `gpu_criterion(range)`: the SUMIFS criterion pair matching this row's GPU type.
    `cell_of(name)`: this row's cell of another aggregate or GPU input. `in_force`: the helper
    column that says which entries hold, for a sum or count over this quarter's entries in another
    quarter than the one asked (the Summary's per-quarter block: in_force_2027Q1)."""
    a = AGGREGATES[name]
    if a.running:
        raise ValueError(f"aggregate {name} runs over the horizon: write it with running_excel")
    if a.expr is not None:
        formula = ExcelCompiler(cell_of, cell_of).compile(a.expr)
        # A GPU input may be blank (no unit_price): the figure is blank, as NULL is in SQL.
        blank = [f'{cell_of(n)}=""' for n in _inputs(a.expr) if n not in AGGREGATE_AXIS_INPUTS]
        if blank:
            test = blank[0] if len(blank) == 1 else f"OR({','.join(blank)})"
            formula = f'IF({test},"",{formula})'
        return "=" + formula
    rng = demand if a.over == "demand" else fleet
    flag = "in_force" if a.quarter == "this" else "previous_quarter_in_force"
    if in_force is not None:
        if a.quarter != "this":
            raise ValueError(f"aggregate {name} is over the previous quarter: give no in_force column")
        flag = in_force
    crit = [gpu_criterion(rng("gpu")), f"{rng(flag)},1"]
    for col, op, value in a.where:
        crit.append(f"{rng(col)},{value}" if op == "=" else f'{rng(col)},"{op}{value}"')
    if a.of is None:
        return f"=COUNTIFS({','.join(crit)})"
    if a.unknown_without:  # blank as the SQL's NULL when the GPU type leaves the input blank
        return f'=IF({cell_of(a.unknown_without)}="","",SUMIFS({rng(a.of)},{",".join(crit)}))'
    return f"=SUMIFS({rng(a.of)},{','.join(crit)})"


def aggregate_excel_at(name: str, *, demand: Callable[[str], str], fleet: Callable[[str], str],
                       gpu_criterion: Callable[[str], str], in_force: str) -> str:
    """One aggregate of this quarter's entries (no '='), with every aggregate it refers to written
    out in place, over the entries the helper column `in_force` says hold: the cells of a
    per-quarter block, where no row of the aggregate's own exists (gpus_short per quarter)."""
    a = AGGREGATES[name]
    if a.running or a.quarter != "this" or (a.expr is not None and _inputs(a.expr)):
        raise ValueError(f"aggregate {name} cannot be written out per quarter")
    if a.expr is None:
        return aggregate_excel(name, demand=demand, fleet=fleet, gpu_criterion=gpu_criterion, cell_of=None,
                               in_force=in_force)[1:]

    def inline(n: str) -> str:
        return "(" + aggregate_excel_at(n, demand=demand, fleet=fleet, gpu_criterion=gpu_criterion,
                                        in_force=in_force) + ")"

    return ExcelCompiler(inline, inline).compile(a.expr)


def running_excel(name: str, values: str, quarters: str, quarter_index_ref: str) -> str:
    """A running aggregate's cell formula (with '='): the largest of `values` (the per-quarter block's
    cells of the aggregate it runs over, one per quarter of the horizon, written YEARQn in the range
    `quarters`) over the quarters up to the quarter of index `quarter_index_ref` (previous: before
    it); 0 when none. SUMPRODUCT makes both Excel and LibreOffice take the comparison cell by cell."""
    a = AGGREGATES[name]
    assert a.running == "max", name
    op = "<=" if a.quarter == "this" else "<"
    index = f"(LEFT({quarters},4)*4+RIGHT({quarters},1)-1)"
    return f"=SUMPRODUCT(MAX(({index}{op}{quarter_index_ref})*{values}))"


def horizon_start_excel(quarters: str) -> str:
    """horizon_start_index's cell formula: the first quarter's index among `quarters` (written YEARQn)."""
    return f"=SUMPRODUCT(MIN(LEFT({quarters},4)*4+RIGHT({quarters},1)-1))"
