"""Compile the figure declarations into SQL views, one per grain.

A grain is a relation the figures are computed over: a model with a KV dtype, an ad-hoc
scenario, a saved plan, a plan in a quarter. Each grain's source query names its input
columns; every figure whose inputs the grain provides becomes a column of the view.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace

from .aggregates import ROLLUP_SQL_KEY, aggregate_sql, entered_quarters_sql, one_quarter_sql
from .declarations import CLASS_MEANS, CLASS_WEIGHT, FIGURES, INPUTS, inputs_of
from .expr import Input, Ref, names
from .facts import never_null_in_sql
from .fingerprint import figures_fingerprint
from .inputs import WHATIF_COLUMNS, WHATIF_TABLES
from .quarters import quarter_index_sql, until_sql
from .sql import compiler, fence, step_as

# Each grain's source reads the inputs from the relation their declaration names (InputDecl.table),
# under these aliases; the three dtype relations are joins of the dtype table.
_ALIAS = {"model": "m", "gpu": "g", "deployment": "s", "calibration": "s", "kv_dtype": "kd", "weight_dtype": "wd",
          "state_dtype": "sd", "class": "wc", "workload": "s"}


def _select(table: str) -> list[str]:
    """`alias.column AS input` for every input read from `table`."""
    return [f"{_ALIAS[table]}.{INPUTS[n].column} AS {n}" for n in inputs_of(table)]


_MODEL_COLS = inputs_of("model")
_GPU_COLS = inputs_of("gpu")
_DEPLOY_COLS = inputs_of("deployment")
# What an engine printed for a plan (kvreg plan calibrate): plans only, never a question's scenario.
_MEASURED_COLS = inputs_of("calibration")
# The dtypes' sizes (and the KV dtype's name), as every grain joins them.
_DTYPE_TABLES = ("kv_dtype", "weight_dtype", "state_dtype")
_DTYPE_INPUTS = tuple(n for t in _DTYPE_TABLES for n in inputs_of(t))
_DTYPE_SELECT = [c for t in _DTYPE_TABLES for c in _select(t)]


# A plan's workload mix: the share-weighted means of its classes (CLASS_MEANS), one row per plan with classes.
_MIX_COLS = [m.name for m in CLASS_MEANS]


def _mix_sql() -> str:
    means = ", ".join(f"{m.sql()} AS {m.name}" for m in CLASS_MEANS)
    return f"SELECT plan_id, {means} FROM plan_class GROUP BY plan_id"


def _deployment_source(table: str, key_cols: list[str], extra_cols: list[str] = (), *, lead: list[str] = (),
                       joins: str = "", source: str = "") -> str:
    """The inputs of a deployment (a plan, or a question's scenario bound as parameters) joined with its model, GPU and dtypes.

    `lead` columns come first; `source` replaces the FROM clause's `{table} s` (it must still name
    the deployment `s`); `joins` are more joins after the dtypes."""
    cols = list(lead) + [f"s.{c} AS {c}" for c in key_cols]
    cols += ["m.name AS model", "g.name AS gpu", "s.weight_dtype AS weight_dtype"]
    cols += _select("model") + _select("gpu") + _select("deployment") + _select("workload")
    cols += [f"s.{INPUTS[c].column} AS {c}" for c in extra_cols]
    cols += _DTYPE_SELECT
    return (
        "SELECT " + ", ".join(cols) + f" FROM {source or table + ' s'}"
        " JOIN model m ON m.id = s.model_id"
        " JOIN gpu g ON g.id = s.gpu_id"
        " JOIN dtype kd ON kd.name = s.kv_dtype"
        " JOIN dtype wd ON wd.name = s.weight_dtype"
        " JOIN dtype sd ON sd.name = COALESCE(m.linear_state_dtype, m.weight_dtype)"
        + joins
    )


_DEPLOY_OUT = ["model", "gpu", "rule", "tp", "pp", "dp_attention", "gpus_per_node", "context_tokens", "avg_tokens",
               "kv_dtype", "weight_dtype", "reserve", "kv_cache_memory_bytes", "block_size", "gpu_memory_utilization",
               "max_num_batched_tokens", "max_concurrent_batches", "activation_bytes", "cuda_graph_bytes",
               "mem_fraction_static", "engine_version", "non_torch_bytes", "weights_measured_bytes", "max_num_seqs", "sampler"]
# The order above is the views' (what json and csv print); a deployment input declared since follows it, and
# engine_release (derived from engine_version, stored for the figures to compare) is never shown.
_DEPLOY_OUT += [c for c in _DEPLOY_COLS if c not in _DEPLOY_OUT and c != "engine_release"]


@dataclass(frozen=True)
class Grain:
    view: str
    meaning: str
    source: str
    columns: tuple[str, ...]  # every column the source provides
    passthrough: tuple[str, ...]  # source columns the view repeats, in order
    exclude: tuple[str, ...] = field(default=())  # figures not worth a column in this view
    wanted: tuple[str, ...] | None = None  # when set: only these figures (and what they need) are computed

    def figures(self) -> list[str]:
        """Figures computable from this grain's columns, in declaration order (with `wanted`: those
        and the figures they need)."""
        have = set(self.columns)
        keep = None
        if self.wanted is not None:
            keep = set(self.wanted)
            for name in self.wanted:
                keep |= _figure_closure(name)
        out, memo = [], {}
        for name in FIGURES:
            if name in have or name in self.exclude or (keep is not None and name not in keep):
                continue
            if _computable(name, have, memo):
                out.append(name)
        return out

    def outputs(self) -> list[str]:
        """The figures the view shows: `wanted`, else every figure computed."""
        return list(self.wanted) if self.wanted is not None else self.figures()


def _figure_closure(name: str) -> set[str]:
    """The figures a figure refers to, through other figures."""
    out: set[str] = set()
    todo = [name]
    while todo:
        for ref in names(FIGURES[todo.pop()].expr, (Ref,)):
            if ref not in out:
                out.add(ref)
                todo.append(ref)
    return out


def _computable(name: str, have: set[str], memo: dict[str, bool] | None = None) -> bool:
    """Whether a figure can be computed from the columns `have`. `memo` keeps each figure's answer
    for one `have`: figures share their inputs' figures, and walking them again for every figure
    made a report's views cost 200,000 calls."""
    if name in have:
        return True
    if name in INPUTS:
        return False
    memo = {} if memo is None else memo
    if name not in memo:
        e = FIGURES[name].expr
        memo[name] = (all(n in have for n in names(e, (Input,)))
                      and all(n in have or _computable(n, have, memo) for n in names(e, (Ref,))))
    return memo[name]


_DEPLOY_SOURCE_COLS = ("model", "gpu", "weight_dtype", *_MODEL_COLS, *_GPU_COLS, *_DEPLOY_COLS,
                       *inputs_of("workload"), *_DTYPE_INPUTS)
# The calibration columns in the order plan_capacity shows them (not their declarations').
_MEASURED_OUT = ("measured_kv_cache_tokens", "measured_max_concurrency", "measured_engine_version",
                 "measured_kv_cache_bytes", "calibration_source")
assert sorted(_MEASURED_OUT) == sorted(_MEASURED_COLS), "plan_capacity shows every calibration input"

_DEMAND_FIGURES = ("replicas_needed", "gpus_needed", "nodes_needed", "capacity_users", "headroom_users",
                   "headroom_fraction", "cost_per_month", "capex", "cost_per_user_per_month")

# A plan's users served (the memory or the latency limit): figures of a plan, not of a `kvreg capacity` question,
# whose own answer is max_concurrency_within_slo and binding_constraint.
_PLAN_USERS_FIGURES = ("users_per_replica", "users_binding_constraint")

GRAINS: list[Grain] = [
    Grain(
        "model_kv",
        "per model and KV dtype: bytes per token and per 128K sequence",
        "SELECT m.id AS model_id, m.name AS model, m.weight_dtype AS weight_dtype, "
        + ", ".join(_select("model") + _DTYPE_SELECT)
        + " FROM model m JOIN dtype kd ON kd.kind IN ('kv', 'both')"
        " JOIN dtype wd ON wd.name = m.weight_dtype"
        " JOIN dtype sd ON sd.name = COALESCE(m.linear_state_dtype, m.weight_dtype)",
        ("model_id", "model", "weight_dtype", *_MODEL_COLS, *_DTYPE_INPUTS),
        ("model_id", "model", "kv_dtype", "weight_dtype"),
        ("attention_flops_per_context_token",),  # a latency term, not a per-model catalog figure
    ),
    Grain(
        "capacity",
        "per ad-hoc scenario (kvreg capacity): the deployment figures",
        # A scenario has no workload classes: its mix inputs are NULL.
        _deployment_source("scenario", ["id"], lead=[f"CAST(NULL AS DOUBLE PRECISION) AS {c}" for c in _MIX_COLS]),
        ("id",) + _DEPLOY_SOURCE_COLS + tuple(_MIX_COLS),
        ("id",) + tuple(_DEPLOY_OUT) + tuple(inputs_of("workload")),
        _DEMAND_FIGURES + _PLAN_USERS_FIGURES,
    ),
    Grain(
        "plan_class",
        "per plan and workload class: the class's KV per request and its share-weighted terms",
        _deployment_source(
            "plan", ["name"],
            lead=["wc.plan_id AS plan_id", "wc.name AS workload_class", *_select("class")],
            source="workload_class wc JOIN plan s ON s.id = wc.plan_id",
        ).replace("s.name AS name", "s.name AS plan"),
        ("plan_id", "workload_class", *inputs_of("class"), "plan") + _DEPLOY_SOURCE_COLS,
        ("plan_id", "plan", "workload_class", *inputs_of("class")),
        wanted=("class_kv_bytes_per_request_per_gpu", "class_concurrency", "class_weighted_tokens",
                "class_weighted_kv_bytes", "class_weighted_input_tokens", "class_weighted_output_tokens"),
    ),
    Grain(
        "plan_capacity",
        "per saved plan: the deployment figures (the workload mix from plan_class)",
        _deployment_source(
            "plan", ["id", "name"], _MEASURED_COLS, lead=[f"mix.{c} AS {c}" for c in _MIX_COLS],
            joins=f" LEFT JOIN ({_mix_sql()}) mix ON mix.plan_id = s.id",
        ).replace("s.id AS id", "s.id AS plan_id").replace("s.name AS name", "s.name AS plan"),
        ("plan_id", "plan") + _DEPLOY_SOURCE_COLS + tuple(_MEASURED_COLS) + tuple(_MIX_COLS),
        ("plan_id", "plan") + tuple(_DEPLOY_OUT) + _MEASURED_OUT + tuple(inputs_of("workload")),
        _DEMAND_FIGURES,
    ),
]


def _plan_quarter_grain(cap: Grain) -> Grain:
    """plan_quarter over the plan_capacity grain `cap` (the view's, or a slim what-if's)."""
    cap_cols = list(cap.passthrough) + cap.outputs()
    cols = ", ".join(f"pc.{c} AS {c}" for c in cap_cols)
    # One row per demand entry; until_quarter is the plan's next entry, where this one stops holding
    # (kvreg.figures.aggregates: the carry-forward rule).
    until = until_sql("demand", "d", "plan_id")
    source = (
        f"SELECT d.quarter AS quarter, {quarter_index_sql('d.quarter')} AS quarter_index, {until} AS"
        f" until_quarter, {quarter_index_sql(until)} AS until_index, d.users AS users, {cols},"
        " g.price_per_hour AS price_per_hour, g.unit_price AS unit_price"
        " FROM demand d JOIN plan_capacity pc ON pc.plan_id = d.plan_id"
        " JOIN gpu g ON g.name = pc.gpu"
    )
    columns = ("quarter", "quarter_index", "until_quarter", "until_index", "users", *cap_cols, "price_per_hour",
               "unit_price")
    passthrough = ("plan_id", "plan", "quarter", "quarter_index", "until_quarter", "until_index", "users", "model", "gpu", "rule", "tp", "pp", "dp_attention",
                   "gpus_per_node", "context_tokens", "avg_tokens", "kv_dtype", "weight_dtype", "fits", "reason",
                   "max_concurrency", "workload_concurrency", "users_per_replica", "users_binding_constraint",
                   "replicas_per_node", "gpus_per_replica",
                   "price_per_hour", "unit_price")
    return Grain("plan_quarter", "per plan and quarter: demand, replicas, GPUs and cost", source, columns,
                 tuple(c for c in passthrough if c in columns))


GRAINS.append(_plan_quarter_grain(GRAINS[-1]))
GRAIN = {g.view: g for g in GRAINS}


# The fleet entries, as the plan_quarter view gives the demand entries: one row per `fleet set`.
FLEET_QUARTER_SQL = (
    "SELECT f.id AS fleet_id, g.name AS gpu, f.quarter AS quarter, "
    + quarter_index_sql("f.quarter") + " AS quarter_index, " + until_sql("fleet", "f", "gpu_id") + " AS until_quarter, "
    + quarter_index_sql(until_sql("fleet", "f", "gpu_id")) + " AS until_index, f.gpus_owned AS gpus_owned,"
    " f.gpus_reserved AS gpus_reserved, f.reserved_price_per_hour AS reserved_price_per_hour"
    " FROM fleet f JOIN gpu g ON g.id = f.gpu_id"
)


def _layers(grain: Grain) -> list[list[str]]:
    """The grain's figures grouped so each group refers only to columns and earlier groups."""
    have = set(grain.columns)
    todo = grain.figures()
    layers: list[list[str]] = []
    while todo:
        layer = []
        for name in todo:
            if all(n in have for n in names(FIGURES[name].expr)):
                layer.append(name)
        if not layer:
            raise ValueError(f"figures {todo} cannot be computed in grain {grain.view}")
        layers.append(layer)
        have |= set(layer)
        todo = [n for n in todo if n not in layer]
    return layers


def figure_order(grain: Grain) -> list[str]:
    """The grain's figures in an order where each refers only to columns and figures before it
    (the view's nested SELECTs, and the workbook's columns left to right)."""
    return [name for layer in _layers(grain) for name in layer]


def _compiler(dialect: str, prefix: str = "src."):
    return compiler(dialect, prefix, never_null_in_sql)


def figure_sql(name: str, dialect: str = "sqlite") -> str:
    """A figure's own expression, its references left as columns of the relation below it."""
    return _compiler(dialect).compile(FIGURES[name].expr)


def _names_read(name: str) -> set[str]:
    """The columns a figure's own expression reads from the layer below (inputs and other figures)."""
    return set(names(FIGURES[name].expr))


def _layer_columns(grain: Grain, layers: list[list[str]]) -> list[list[str]]:
    """For layer0 (the source) and each layer: the columns it passes up from below, in a fixed order.

    A layer carries only what some layer above it reads or the view shows, not every column below
    (`src.*`): the plan views' source has about 80 columns and 15 layers, and copying every column
    through every layer made preparing a query over them several times slower."""
    order = list(grain.columns) + [n for layer in layers for n in layer]
    need = set(grain.passthrough) | set(grain.outputs())
    carried = []
    for layer in reversed(layers):
        made = set(layer)
        carried.append([c for c in order if c in need and c not in made])
        need = (need - made) | set().union(*(_names_read(n) for n in layer))
    missing = need - set(grain.columns)
    if missing:
        raise ValueError(f"grain {grain.view}: figures read {sorted(missing)}, which its source does not provide")
    carried.append([c for c in grain.columns if c in need])
    return carried[::-1]


def view_select(grain: Grain, dialect: str = "sqlite") -> str:
    """One SELECT per layer of figures, each reading the layer below, so no expression is ever
    written out twice; each layer passes up only the columns read above it (_layer_columns).

    The layers are a chain of common table expressions rather than nested subqueries: SQLite's
    parser has a fixed stack (100 entries), and a dozen nested subqueries around a deep CASE
    overflow it ("parser stack overflow"); a WITH chain keeps the nesting one level deep.
    """
    # Columns are named bare, without `src.`: each layer reads one relation, and the views' text is parsed
    # by every connection that opens the registry, so shorter is faster (SQLite resolves bare names
    # faster too). A figure named like an SQL keyword would fail to compile here, on both targets.
    comp = _compiler(dialect, prefix="")
    # Each layer its own step (kvreg.figures.sql.Dialect.fence).
    step = fence(dialect)
    as_ = step_as(dialect)
    layers = _layers(grain)
    carried = _layer_columns(grain, layers)
    ctes = [f"layer0 {as_} (SELECT {', '.join(carried[0])} FROM ({grain.source}) src{step})"]
    below = "layer0"
    for i, layer in enumerate(layers, start=1):
        cols = ([", ".join(carried[i])] if carried[i] else []) + [f"{comp.compile(FIGURES[n].expr)} AS {n}" for n in layer]
        ctes.append(f"layer{i} {as_} (SELECT " + ",\n  ".join(cols) + f"\nFROM {below} src{step})")
        below = f"layer{i}"
    out = ", ".join(list(grain.passthrough) + grain.outputs())
    return "WITH " + ",\n".join(ctes) + f"\nSELECT {out}\nFROM {below} src"


# The views' SQL by dialect, compiled once per process for the declarations it was compiled from: a
# registry's first open, `kvreg db upgrade` and every report ask for it (views_hash, create_views, the
# what-ifs), and each compile costs about a quarter of a second. The key holds the figures themselves,
# so a figure replaced in FIGURES (a test does) compiles again.
_COMPILED: dict[str, tuple[tuple, dict[str, str]]] = {}


def _view_selects(dialect: str) -> dict[str, str]:
    """Each grain's view SELECT (view_select), by view name, for the declarations as they are now."""
    key = tuple(FIGURES.values())
    hit = _COMPILED.get(dialect)
    if hit is None or hit[0] != key:
        hit = _COMPILED[dialect] = (key, {g.view: view_select(g, dialect) for g in GRAINS})
    return hit[1]


def view_definitions(dialect: str = "sqlite") -> list[tuple[str, str]]:
    """(view name, SELECT) in dependency order."""
    out = list(_view_selects(dialect).items())
    out.append(("fleet_quarter", FLEET_QUARTER_SQL))
    out.append(("procurement", aggregate_sql(entered_quarters_sql(), dialect, only_active=True)))
    return out


VIEW_NAMES = [g.view for g in GRAINS] + ["fleet_quarter", "procurement"]
# kvreg_meta's key for whatif_definitions, as JSON (kvreg.db.read.WHATIF_SQL_KEY, kept equal by a test).
WHATIF_SQL_KEY = "whatif_sql"


# --------------------------------------------------------------------------- what-ifs

# A what-if (`kvreg capacity`, the plan solvers, calibrate, the web page, a report's sweep) asks a view
# about deployments that are not saved: the view's own compiled SELECT, with the registry tables it
# would read them from (kvreg.figures.inputs.WHATIF_TABLES) replaced by common table expressions over
# one bound parameter per table (a JSON array of rows). Nothing is written: no scratch rows, no TEMP
# objects, no savepoint, so a read-only file and a role that may only SELECT answer as the owner does.


def _bound_table(table: str, dialect: str) -> str:
    """The rows of `table` from the JSON array bound to :table, as the table would hold them. PostgreSQL
    types each column by the table's own row type; SQLite takes each JSON value's type (the caller gives
    every value as its column's affinity stores it: kvreg.db.read.bound_rows)."""
    if dialect == "postgresql":
        return f"SELECT * FROM json_populate_recordset(NULL::{table}, CAST(:{table} AS json))"
    cols = ", ".join(f"json_extract(j.value, '$.{c}') AS {c}" for c, _kind in WHATIF_COLUMNS[table])
    return f"SELECT {cols} FROM json_each(:{table}) j"


def _views_read(view: str) -> list[str]:
    """The kvreg views a grain's source reads, directly or through each other, in dependency order."""
    names = set(re.findall(r"\b(?:FROM|JOIN)\s+(\w+)", GRAIN[view].source)) & set(GRAIN)
    below = {v for n in names for v in [*_views_read(n), n]}
    return [g.view for g in GRAINS if g.view in below]


def whatif_with(view: str, dialect: str = "sqlite", columns: tuple[str, ...] | None = None) -> str:
    """The WITH clause that puts the rows bound to `view`'s WHATIF_TABLES (one JSON parameter per table,
    named like it) in place of the registry's: the stood-in tables, each view it reads, and the view
    itself, as common table expressions under their own names. A statement written against the
    registry (`SELECT * FROM capacity ORDER BY id`) placed after it reads the bound rows instead; every
    figure is the view's own SQL, unchanged.

    With `columns` (plan_quarter only) the view shows plan_id and those columns, and it and
    plan_capacity compute only the figures they need (slim_grains): the same declarations compiled
    the same way, for a search that reads a few figures of thousands of candidates."""
    if columns is None:
        selects = _view_selects(dialect)
    else:
        slim = {**GRAIN, **slim_grains(view, columns)}
        selects = {v: view_select(slim[v], dialect) for v in [*_views_read(view), view]}
    ctes = [f"{t} AS ({_bound_table(t, dialect)})" for t in WHATIF_TABLES[view]]
    ctes += [f"{v} AS ({selects[v]})" for v in [*_views_read(view), view]]
    return "WITH " + ",\n".join(ctes) + "\n"


def _restricted(grain: Grain, keep: set[str]) -> Grain:
    """`grain` showing only the columns in `keep` (and computing only the figures they need)."""
    shown = set(grain.passthrough) | set(grain.figures())
    unknown = sorted(set(keep) - shown)
    if unknown:
        raise ValueError(f"{grain.view} has no column {', '.join(unknown)}")
    return replace(grain, passthrough=tuple(c for c in grain.passthrough if c in keep),
                   wanted=tuple(f for f in grain.figures() if f in keep))


def slim_grains(view: str, columns: tuple[str, ...]) -> dict[str, Grain]:
    """plan_capacity and plan_quarter restricted to what plan_quarter's `columns` (and plan_id) need:
    plan_quarter computes the requested figures from the plan_capacity columns they read, and
    plan_capacity computes only those (and what they need, through other figures), never the rest
    (the latency model, the costs) a candidate's few figures do not read."""
    if view != "plan_quarter":
        raise ValueError(f"a slim what-if is compiled for plan_quarter only, not {view}")
    full = _restricted(GRAIN["plan_quarter"], {"plan_id", *columns})
    read = set(_layer_columns(full, _layers(full))[0])  # the plan_quarter source columns it reads
    cap = GRAIN["plan_capacity"]
    # plan_id and gpu: plan_quarter's source joins demand and gpu on them.
    cap = _restricted(cap, (read | {"plan_id", "gpu"}) & (set(cap.passthrough) | set(cap.figures())))
    return {"plan_capacity": cap, "plan_quarter": _restricted(_plan_quarter_grain(cap), {"plan_id", *columns})}


def whatif_definitions(dialect: str = "sqlite") -> dict[str, str]:
    """Every what-if's WITH clause by view name (kept beside the views in kvreg_meta, WHATIF_SQL_KEY)."""
    return {view: whatif_with(view, dialect) for view in WHATIF_TABLES}


def views_hash(dialect: str = "sqlite") -> str:
    """Which views the declarations compile to: sha256 of the dialect and every view's name and SQL.
    A change that leaves the SQL as it was (a comment, a docstring, a renamed helper) keeps it."""
    h = hashlib.sha256(dialect.encode() + b"\0")
    for name, sql in view_definitions(dialect):
        h.update(name.encode() + b"\0" + sql.encode() + b"\0")
    return h.hexdigest()


def source_key(dialect: str, compiled: str) -> str:
    """kvreg_meta.views_source: the figure modules' source fingerprint next to the views_hash it was
    compiled to. While both still match, the views are current without compiling them again (the
    fast path's check, and open_registry's first one): compiling costs a few hundred ms."""
    return f"{figures_fingerprint(dialect)} {compiled}"


def drop_views(conn) -> None:
    """Drop every kvreg view (before schema changes: SQLite batch mode cannot alter a table a view reads)."""
    for name in reversed(VIEW_NAMES):
        conn.exec_driver_sql(f"DROP VIEW IF EXISTS {name}")


def create_views(conn) -> None:
    dialect = conn.dialect.name
    for name, sql in view_definitions(dialect):
        if conn.dialect.paramstyle in ("format", "pyformat"):
            # psycopg reads % as a placeholder even without parameters; a literal % is doubled.
            sql = sql.replace("%", "%%")
        conn.exec_driver_sql(f"CREATE VIEW {name} AS {sql}")


def recreate_views(conn, want: str | None = None) -> None:
    """Drop and create every view and record which declarations they were compiled from."""
    drop_views(conn)
    create_views(conn)
    _record(conn, want or views_hash(conn.dialect.name))


def sync_views(conn) -> bool:
    """Recreate the views when the SQL the declarations compile to changed since they were made.
    Returns True if it did. An edit that leaves the SQL alone only updates views_source."""
    dialect = conn.dialect.name
    meta = dict(conn.exec_driver_sql(
        "SELECT key, value FROM kvreg_meta WHERE key IN ('views_hash', 'views_source')").fetchall())
    present = _views_present(conn)
    stored = meta.get("views_hash")
    if present and stored is not None and meta.get("views_source") == source_key(dialect, stored):
        return False
    want = views_hash(dialect)
    if present and stored == want:
        _record(conn, want)
        return False
    recreate_views(conn, want)
    return True


def _record(conn, compiled: str) -> None:
    # The rollup's one-quarter query and the what-ifs are compiled with the views and kept beside them, so
    # they are current exactly when the views are (the read path runs them without importing the declarations).
    keys = ("views_hash", "views_source", ROLLUP_SQL_KEY, WHATIF_SQL_KEY)
    conn.exec_driver_sql(f"DELETE FROM kvreg_meta WHERE key IN ({', '.join(_q(k) for k in keys)})")
    for key, value in (("views_hash", compiled), ("views_source", source_key(conn.dialect.name, compiled)),
                       (ROLLUP_SQL_KEY, one_quarter_sql(conn.dialect.name)),
                       (WHATIF_SQL_KEY, json.dumps({"dialect": conn.dialect.name,
                                                    "with": whatif_definitions(conn.dialect.name)}, sort_keys=True))):
        conn.exec_driver_sql(f"INSERT INTO kvreg_meta (key, value) VALUES ({_q(key)}, {_q(value)})")


def _q(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _views_present(conn) -> bool:
    if conn.dialect.name == "sqlite":
        rows = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall()
    else:
        rows = conn.exec_driver_sql(
            "SELECT table_name FROM information_schema.views WHERE table_schema = current_schema()"
        ).fetchall()
    return set(VIEW_NAMES) <= {r[0] for r in rows}
