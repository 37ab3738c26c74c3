"""The one read path: every read-only command asks its question here, by the same code on either
connection.

`read(url, fn, open_full)` runs `fn(conn)` on the registry at `url`. A SQLite registry that is at the schema
head with current views (kvreg.db.fastpath.eligibility decides, and nothing else does) is opened
with the standard library's sqlite3; anything else (PostgreSQL, an older schema, stale views, a
new file) is opened the full way, kvreg.app.access.open_registry, which imports SQLAlchemy. `fn`
is the same function either way: the queries below are plain SQL strings with named parameters,
run through `runner(conn)`, which speaks to a sqlite3 connection and a SQLAlchemy one alike. So
a command's output cannot depend on the path it took; the CLI formats the rows it gets back
with one formatter (kvreg.cli.common.emit).

A new read command is a query function here (or anywhere that reads through `runner`) and one
call: `rows = read(url, lambda conn: my_query(conn, arg))`.

Stdlib only at import time: this module is loaded by every read command (start-up time).
SQLAlchemy is imported inside functions, on the full path only.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from contextlib import contextmanager

from kvreg.core import units
from kvreg.core.errors import KvregError, suggest
from kvreg.core.units import parse_quarter
from kvreg.db import fastpath
from kvreg.db.columns import columns_of
from kvreg.figures.inputs import KV_GROUPS, WHATIF_COLUMNS, WHATIF_TABLES, inputs_of
from kvreg.figures.quarters import in_force_sql, index_of_quarter, quarter_of_index

# Registry columns in the order the table definitions give them (kvreg.db.columns, which kvreg.db.tables
# follows). Rows are read with these lists, never `SELECT *`: a column added by a migration sits last
# in SQLite's table, wherever the table definition puts it, and json/csv output follows this order.
DTYPE_COLUMNS = ("name", "bytes_per_element", "kind", "mla_bytes_per_token_per_layer",
                 "scale_bytes_per_token_per_head", "notes")
GPU_COLUMNS = columns_of("gpu")
MODEL_COLUMNS = columns_of("model")
COLUMNS = {"dtype": DTYPE_COLUMNS, "gpu": GPU_COLUMNS, "model": MODEL_COLUMNS}
# Columns a declaration file holds as text with a unit ("80GiB", "3350GB"): `kvreg export` writes
# them so, `kvreg apply` refuses a bare number there.
SIZE_FIELDS = ("memory_bytes", "memory_bandwidth_bytes_per_s")


# --------------------------------------------------------------------------- the read path


def read(url: str | None, fn, open_full):
    """fn(conn) on the registry at `url` (None: $KVREG_DB, else sqlite:///registry.db), read-only.

    An eligible SQLite registry is read with sqlite3 inside one transaction that is rolled back;
    any other is opened with `open_full(url)` (the URL resolved): kvreg.app.access.read passes
    open_registry (created, upgraded, seeded and its views synced as every command does), or
    kvreg.db.engine.make_engine to connect to it as it is (`kvreg db current` must not upgrade
    what it reports on). Errors fn raises (an unknown name, ...) propagate unchanged.
    """
    answered, result = fastpath.read(url, fn)
    if answered:
        return result
    return _full_read(url, fn, open_full)


def _full_read(url: str | None, fn, open_full):
    # Imported here, not at the top: SQLAlchemy and Alembic take about 0.3 s to import, which an
    # eligible registry never pays (start-up time).
    from sqlalchemy.exc import SQLAlchemyError

    from kvreg.db.engine import connect_error, resolve_url

    url = resolve_url(url)
    engine = open_full(url)
    try:
        with snapshot(engine) as conn:
            return fn(conn)
    except SQLAlchemyError as exc:  # reported as one line, password masked
        raise connect_error(url, exc) from None
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- runners


class _SqlaRunner:
    """Runs the statements on a SQLAlchemy connection (SQLite or PostgreSQL). SQLAlchemy's text() is
    imported in each method, not at the top: this module is on every read's start-up path, and a
    SQLAlchemy connection means SQLAlchemy is loaded already."""

    def __init__(self, conn):
        self.conn = conn

    def rows(self, sql: str, params: dict | None = None) -> list[dict]:
        return [dict(r) for r in self.conn.execute(_text(sql), params or {}).mappings()]

    def columns(self, sql: str, params: dict | None = None) -> list[str]:
        # lazy: SQLAlchemy loads only on the full path; this runner also serves stdlib sqlite3
        from sqlalchemy import text

        return list(self.conn.execute(text(sql), params or {}).keys())


@functools.lru_cache(maxsize=32)
def _text(sql: str):
    """text(sql), made once per statement text: text() scans the text for its parameters (about 2 ms for
    a what-if's 200 KB), and a search runs the same what-if hundreds of times."""
    from sqlalchemy import text  # lazy, as above

    return text(sql)


class _SqliteRunner:
    """Runs the statements on a stdlib sqlite3 connection opened with isolation_level=None."""

    def __init__(self, conn):
        self.conn = conn

    def rows(self, sql: str, params: dict | None = None) -> list[dict]:
        cur = self.conn.execute(sql, params or {})
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def columns(self, sql: str, params: dict | None = None) -> list[str]:
        return [d[0] for d in self.conn.execute(sql, params or {}).description]


# kvreg.db.engine.READ_SNAPSHOT, the Connection.info key of a connection that only reads (engine
# imports SQLAlchemy; this module must not at import time).
_READ_SNAPSHOT = "kvreg_read_snapshot"


@contextmanager
def snapshot(engine):
    """A SQLAlchemy connection that reads one consistent snapshot of the registry and blocks no
    writer, nor waits for one: on SQLite a plain (deferred) read transaction in WAL mode, on
    PostgreSQL REPEATABLE READ (readers never block writers). What-ifs only read (whatif)."""
    with engine.connect() as conn:
        if conn.dialect.name != "sqlite":
            yield conn.execution_options(isolation_level="REPEATABLE READ")
            return
        conn.info[_READ_SNAPSHOT] = True
        try:
            yield conn
        finally:
            # An interrupted statement (Ctrl-C) leaves the connection invalidated: touching its info
            # then raised PendingRollbackError over the user's Ctrl-C. It is discarded anyway.
            if not conn.invalidated:
                conn.info.pop(_READ_SNAPSHOT, None)


def runner(conn):
    """The runner for a SQLAlchemy connection or a stdlib sqlite3 connection: .rows(sql, params)
    returns dicts, .columns(sql, params) the result's column names. It only reads."""
    if isinstance(conn, (_SqlaRunner, _SqliteRunner)):
        return conn
    if isinstance(conn, sqlite3.Connection):
        return _SqliteRunner(conn)
    return _SqlaRunner(conn)


# --------------------------------------------------------------------------- what-ifs

# kvreg_meta's key for the what-ifs' compiled SQL (kvreg.figures.views.WHATIF_SQL_KEY, kept equal by a test).
WHATIF_SQL_KEY = "whatif_sql"


def whatif(conn, view: str, tables: dict[str, list[dict]], sql: str, params: dict | None = None,
           columns: tuple[str, ...] | None = None) -> list[dict]:
    """`sql`, a statement written against the registry's `view`, answered for deployments that are not
    saved: `tables` holds the rows of each table the view reads them from (WHATIF_TABLES[view]; a column
    a row leaves out is NULL, a table left out is empty). The view's own SQL computes every figure over
    the rows bound as parameters (kvreg.figures.views.whatif_with): nothing is written, so a read-only
    registry file, or a role that may only SELECT, answers like any other. `columns` (plan_quarter
    only): the view shows only plan_id and these, computing only the figures they need (_slim_with)."""
    bound = {t: bound_rows(t, tables.get(t, ())) for t in WHATIF_TABLES[view]}
    with_sql = _whatif_with(conn, view) if columns is None else _slim_with(conn, view, tuple(columns))
    return runner(conn).rows(with_sql + sql, {**(params or {}), **bound})


def _slim_with(conn, view: str, columns: tuple[str, ...]) -> str:
    """The slim what-if's WITH clause (kvreg.figures.views.whatif_with with `columns`), compiled from the
    declarations once per process for the views the registry holds (their views_hash): a search asks
    for the same few columns in every batch, and compiling costs about 0.2 s."""
    stored = runner(conn).rows("SELECT value FROM kvreg_meta WHERE key = 'views_hash'")
    key = (view, columns, dialect(conn), stored[0]["value"] if stored else None)
    if key not in _SLIM_COMPILED:
        from kvreg.figures.views import whatif_with  # lazy, as in _whatif_with

        _SLIM_COMPILED[key] = whatif_with(view, key[2], columns)
    return _SLIM_COMPILED[key]


_SLIM_COMPILED: dict[tuple, str] = {}


def bound_rows(table: str, rows) -> str:
    """A stood-in table's rows as the JSON array its what-if parameter takes: its columns
    (WHATIF_COLUMNS), each value as the column stores it (SQLite's affinity: a whole number in a
    real column is a float, a whole float in an integer column an integer; a flag is 0 or 1)."""
    columns = WHATIF_COLUMNS[table]
    return json.dumps([{c: _stored(r.get(c), kind) for c, kind in columns} for r in rows], allow_nan=False,
                      separators=(",", ":"))


def _stored(value, kind: str):
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        value = int(value)
    if kind == "real":
        return float(value)
    if kind == "int" and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "text":
        return str(value)
    return value


def _whatif_with(conn, view: str) -> str:
    """The what-if's WITH clause (kvreg.figures.views.whatif_with), as stored in kvreg_meta with the views
    it was compiled with: current exactly when they are, and read without importing the figure
    declarations (about 50 ms). Compiled here only for a registry whose views were stored without it."""
    found = runner(conn).rows("SELECT value FROM kvreg_meta WHERE key = :k", {"k": WHATIF_SQL_KEY})
    if found:
        text = found[0]["value"]
        if text not in _WHATIF_PARSED:  # a solver asks dozens of times: parse the stored text once
            _WHATIF_PARSED.clear()
            _WHATIF_PARSED[text] = json.loads(text)
        stored = _WHATIF_PARSED[text]
        # A registry copied from another engine (kvreg db copy) may hold the other dialect's until resynced.
        if stored.get("dialect") == dialect(conn) and stored.get("with", {}).get(view):
            return stored["with"][view]
    # lazy: the figure declarations (about 50 ms) load only for a registry stored without its what-ifs
    from kvreg.figures.views import whatif_with

    return whatif_with(view, dialect(conn))


_WHATIF_PARSED: dict[str, dict] = {}


# --------------------------------------------------------------------------- registry rows


def _select(table: str, where: str = "", order: str = "name") -> str:
    return f"SELECT {', '.join(COLUMNS[table])} FROM {table}{where}" + (f" ORDER BY {order}" if order else "")


def _names(conn, table: str) -> list[str]:
    return [r["name"] for r in runner(conn).rows(f"SELECT name FROM {table} ORDER BY name")]


def _one(conn, table: str, name: str, what: str) -> dict:
    rows = runner(conn).rows(_select(table, " WHERE name = :name", order=""), {"name": name})
    if not rows:
        raise suggest(name, _names(conn, table), what)
    return rows[0]


# What a declaration file (`kvreg export`, `kvreg apply`) holds, in apply order: models refer to dtypes.
DECLARED_KINDS = ("dtype", "gpu", "model")


def declared_rows(conn) -> dict[str, list[dict]]:
    """Every dtype, GPU and model row (columns as COLUMNS), each kind sorted by name."""
    # Sorted here, not in SQL: PostgreSQL's collation would order names differently from SQLite's.
    return {kind: sorted(runner(conn).rows(_select(kind, order="")), key=lambda r: r["name"])
            for kind in DECLARED_KINDS}


# The plans, demand and fleet of a declaration file: each kind's keys in the order the file writes them.
# A [[plan]] row of a declaration file (`kvreg export`, `kvreg apply`): the plan's name, its model and GPU by
# name, and every deployment and latency-workload input a plan stores, in the order export writes them (the
# order the file format has had; an input declared since comes after these, so it reaches the file with no
# edit here), then its notes, allowances and workload mix. engine_release is not a key: it is derived from
# engine_version (kvreg.app.engine), as `plan add` derives it; a plan takes no concurrency.
_PLAN_FILE_ORDER = ["gpus_per_node", "tp", "pp", "dp_attention", "kv_dtype", "weight_dtype", "context_tokens",
                    "avg_tokens", "reserve", "kv_cache_memory_bytes", "block_size", "rule", "gpu_memory_utilization",
                    "max_num_batched_tokens", "max_concurrent_batches", "activation_bytes", "cuda_graph_bytes",
                    "mem_fraction_static", "max_num_seqs", "sampler", "input_tokens", "output_tokens",
                    "tpot_target_ms", "ttft_target_ms"]
_NOT_PLAN_KEYS = ("engine_release", "concurrency")
PLAN_KEYS = ["name", "model", "gpu", *_PLAN_FILE_ORDER,
             *[n for n in (*inputs_of("deployment"), *inputs_of("workload"))
               if n not in _PLAN_FILE_ORDER and n not in _NOT_PLAN_KEYS],
             "notes", "allow_gpus", "allow_kv_dtypes", "workload"]
# A workload class in a declaration file: its name, then its columns (kvreg.db.columns: its tokens and share, then
# its latency workload, absent meaning NULL, and any class input declared since).
CLASS_KEYS = ["name", *(c for c in columns_of("workload_class") if c not in ("id", "plan_id", "name"))]
# A class's keys that may be left out, written only where set: all but its name, tokens and share.
CLASS_OPTIONAL_KEYS = CLASS_KEYS[3:]
DEMAND_KEYS = ["plan", "quarter", "users"]
FLEET_KEYS = ["gpu", "quarter", "gpus_owned", "gpus_reserved", "reserved_price_per_hour"]


def declared_plans(conn) -> dict[str, dict]:
    """plan name -> the plan as a declaration file holds it (PLAN_KEYS: model and GPU by name, the
    workload mix as [{name, avg_tokens, share}] in the order it was given)."""
    cols = [k for k in PLAN_KEYS if k not in ("model", "gpu", "workload")]
    sql = ("SELECT p.id AS plan_id, m.name AS model, g.name AS gpu, " + ", ".join(f"p.{c} AS {c}" for c in cols)
           + " FROM plan p JOIN model m ON m.id = p.model_id JOIN gpu g ON g.id = p.gpu_id")
    classes: dict[int, list[dict]] = {}
    for c in runner(conn).rows(f"SELECT plan_id, {', '.join(CLASS_KEYS)} FROM workload_class ORDER BY id"):
        classes.setdefault(c["plan_id"], []).append({k: c[k] for k in CLASS_KEYS})
    out = {}
    for r in runner(conn).rows(sql):
        out[r["name"]] = {**{k: r[k] for k in PLAN_KEYS if k != "workload"}, "workload": classes.get(r["plan_id"], [])}
    return out


def declared_demand(conn) -> dict[str, dict]:
    """'plan quarter' -> {plan, quarter, users}: every demand entry."""
    sql = "SELECT p.name AS plan, d.quarter AS quarter, d.users AS users FROM demand d JOIN plan p ON p.id = d.plan_id"
    return {f"{r['plan']} {r['quarter']}": r for r in runner(conn).rows(sql)}


def declared_fleet(conn) -> dict[str, dict]:
    """'gpu quarter' -> {gpu, quarter, gpus_owned, gpus_reserved, reserved_price_per_hour}: every fleet entry."""
    sql = ("SELECT g.name AS gpu, f.quarter AS quarter, f.gpus_owned AS gpus_owned, f.gpus_reserved AS gpus_reserved,"
           " f.reserved_price_per_hour AS reserved_price_per_hour FROM fleet f JOIN gpu g ON g.id = f.gpu_id")
    return {f"{r['gpu']} {r['quarter']}": r for r in runner(conn).rows(sql)}


# kind -> its entries by key (plans by name, demand by plan and quarter, fleet by GPU and quarter).
DECLARED_ENTRIES = {"plan": declared_plans, "demand": declared_demand, "fleet": declared_fleet}


def declared_entries(conn, kind: str) -> list[dict]:
    """A kind's entries (DECLARED_ENTRIES) in the file's order: sorted by their key."""
    rows = DECLARED_ENTRIES[kind](conn)
    return [rows[k] for k in sorted(rows)]


def list_dtypes(conn) -> list[dict]:
    """Dtypes, widest first (then by name)."""
    return runner(conn).rows(_select("dtype", order="bytes_per_element DESC, name"))


def model_names(conn) -> list[str]:
    return _names(conn, "model")


def get_model(conn, name: str) -> dict:
    """One model's row; an unknown name suggests close ones."""
    return _one(conn, "model", name, "model")


def list_models(conn) -> list[dict]:
    return runner(conn).rows(_select("model"))


def gpu_names(conn) -> list[str]:
    return _names(conn, "gpu")


def get_gpu(conn, name: str) -> dict:
    """One GPU's row; an unknown name suggests close ones."""
    return _one(conn, "gpu", name, "gpu")


def list_gpus(conn) -> list[dict]:
    return runner(conn).rows(_select("gpu"))


def current_revision(conn) -> str | None:
    """The registry's schema revision (None: no alembic_version table, a new or foreign database)."""
    if isinstance(conn, sqlite3.Connection):  # only an eligible registry gets here: the table exists
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        return rows[0][0] if rows else None
    from kvreg.db.engine import current_revision as full  # a SQLAlchemy connection: SQLAlchemy is loaded

    return full(conn)


# --------------------------------------------------------------------------- plans and demand


def plan_names(conn) -> list[str]:
    """Every plan's name, sorted."""
    return _names(conn, "plan")


def get_plan(conn, name: str) -> dict:
    """The stored plan row; an unknown name suggests close ones."""
    rows = runner(conn).rows("SELECT * FROM plan WHERE name = :name", {"name": name})
    if not rows:
        raise suggest(name, plan_names(conn), "plan")
    return rows[0]


def format_workload(classes: list[dict]) -> str:
    """A mix as the --workload options write it: chat=1500:0.8,docs=13000:0.2 ('' without classes)."""
    return ",".join(f"{c['class']}={c['avg_tokens']}:{_share_text(c['share'])}{_class_latency_text(c)}"
                    for c in classes)


def _class_latency_text(c: dict) -> str:
    """A class's latency parts as --workload writes them: :IN/OUT[:TPOT/TTFT] ('' without them; - for none)."""
    def pair(a, b):
        return "/".join("-" if v is None else _share_text(v) for v in (c.get(a), c.get(b)))

    targets = c.get("tpot_target_ms") is not None or c.get("ttft_target_ms") is not None
    if c.get("input_tokens") is None and not targets:
        return ""
    lengths = "-" if c.get("input_tokens") is None else pair("input_tokens", "output_tokens")
    return f":{lengths}" + (f":{pair('tpot_target_ms', 'ttft_target_ms')}" if targets else "")


def _share_text(share: float) -> str:
    """The shortest text that reads back as the same share (0.8, 4, 0.3333333333333333)."""
    text_ = repr(float(share))
    return text_[:-2] if text_.endswith(".0") else text_


def workload_texts(conn) -> dict[int, str]:
    """plan id -> its mix in --workload form, for every plan with classes (one query)."""
    rows = runner(conn).rows("SELECT plan_id, name, avg_tokens, share, input_tokens, output_tokens, tpot_target_ms,"
                             " ttft_target_ms FROM workload_class ORDER BY plan_id, id")
    by_plan: dict[int, list[dict]] = {}
    for r in rows:
        by_plan.setdefault(r["plan_id"], []).append({"class": r["name"], **{k: v for k, v in r.items()
                                                                          if k not in ("plan_id", "name")}})
    return {pid: format_workload(cs) for pid, cs in by_plan.items()}


def plan_classes(conn, name: str) -> list[dict]:
    """A plan's plan_class rows: each class's KV per request, concurrency alone and weighted terms."""
    get_plan(conn, name)
    sql = ("SELECT pc.* FROM plan_class pc JOIN workload_class wc ON wc.plan_id = pc.plan_id"
           " AND wc.name = pc.workload_class WHERE pc.plan = :name ORDER BY wc.id")
    return runner(conn).rows(sql, {"name": name})


def plan_capacity(conn, name: str) -> dict:
    """One plan's plan_capacity row, with its notes."""
    get_plan(conn, name)
    return _capacity_rows(conn, "WHERE pc.plan = :name", {"name": name})[0]


def list_plans(conn) -> list[dict]:
    """Every plan's plan_capacity row (with notes and its workload mix), by name."""
    return _capacity_rows(conn, "", {})


def _capacity_rows(conn, where: str, params: dict) -> list[dict]:
    sql = (f"SELECT pc.*, p.notes AS notes FROM plan_capacity pc JOIN plan p ON p.id = pc.plan_id {where}"
           " ORDER BY pc.plan")
    mixes = workload_texts(conn)
    rows = runner(conn).rows(sql, params)
    for row in rows:
        row["workload"] = mixes.get(row["plan_id"], "")
    return rows


def show_plan(conn, name: str, quarter: str | None = None) -> list[dict]:
    """A plan per quarter: each plan_quarter row followed by the plan's other plan_capacity figures.

    With no demand (for that quarter), one row: the plan_capacity figures, with the demand
    columns empty.
    """
    cap = plan_capacity(conn, name)
    cap.update(runner(conn).rows("SELECT allow_gpus, allow_kv_dtypes FROM plan WHERE name = :name",
                                 {"name": name})[0])
    quarter = parse_quarter(quarter) if quarter else None
    rows = list_demand(conn, plan=name, quarter=quarter)
    if not rows:
        rows = [{**{k: cap.get(k) for k in view_columns(conn, "plan_quarter")}, "quarter": quarter}]
    return [{**r, **{k: v for k, v in cap.items() if k not in r}} for r in rows]


def view_columns(conn, view: str) -> list[str]:
    return runner(conn).columns(f"SELECT * FROM {view} WHERE 1 = 0")


# --------------------------------------------------------------------------- demand, fleet, rollup
# Entries carry forward: a plan's users (a GPU type's fleet) in a quarter are its latest entry at or
# before it. The rule and the rollup's aggregates are declared in kvreg.figures.aggregates.

# Horizons longer than this are refused: 10 years of quarters is far past any purchase plan.
MAX_HORIZON_QUARTERS = 40
FLEET_COLUMNS = ["gpu", "quarter", "gpus_owned", "gpus_reserved", "reserved_price_per_hour", "carried_from",
                 "until_quarter"]


def dialect(conn) -> str:
    """'sqlite' or 'postgresql': the SQL flavour a connection (stdlib or SQLAlchemy) speaks."""
    if isinstance(conn, (_SqliteRunner, sqlite3.Connection)):
        return "sqlite"
    conn = conn.conn if isinstance(conn, _SqlaRunner) else conn
    return conn.dialect.name


def in_force(conn, view: str, quarter: str | None, where: list[str], params: dict, order: str,
             live: str = "") -> list[dict]:
    """Rows of a view of entries (plan_quarter, fleet_quarter). Without a quarter: every entry. With
    one: the entries in force in it (carry-forward), each shown in that quarter with `carried_from`
    naming the quarter it was set in when that is an earlier one. `live`: a condition a carried
    entry must meet (demand: users > 0, since 0 ends a plan's demand)."""
    where = list(where)
    q = None
    if quarter is not None:
        q = parse_quarter(quarter)
        where.append(in_force_sql("e", str(index_of_quarter(q))))
        if live:
            where.append(f"({live} OR e.quarter = :q_asked)")
        params = {**params, "q_asked": q}
    sql = f"SELECT e.* FROM {view} e" + (" WHERE " + " AND ".join(where) if where else "") + f" ORDER BY {order}"
    rows = []
    for row in runner(conn).rows(sql, params):
        row["carried_from"] = None
        if q is not None and row["quarter"] != q:
            row["carried_from"] = row["quarter"]
            row["quarter"] = q
        rows.append(row)
    return rows


def list_demand(conn, plan: str | None = None, quarter: str | None = None) -> list[dict]:
    """plan_quarter rows, by plan then quarter, optionally for one plan. Without a quarter: every
    `demand set` entry. With one: each plan's demand in force in it (the latest entry at or before
    it; 0 ends it), `carried_from` naming the quarter a carried value was set in."""
    where, params = [], {}
    if plan is not None:
        get_plan(conn, plan)
        where.append("e.plan = :plan")
        params["plan"] = plan
    return in_force(conn, "plan_quarter", quarter, where, params, "e.plan, e.quarter", live="e.users > 0")


def list_fleet(conn, gpu: str | None = None, quarter: str | None = None) -> list[dict]:
    """fleet_quarter rows by GPU type and quarter: every entry, or those in force in `quarter`."""
    where, params = [], {}
    if gpu is not None:
        params["gpu"] = get_gpu(conn, gpu)["name"]
        where.append("e.gpu = :gpu")
    rows = in_force(conn, "fleet_quarter", quarter, where, params, "e.gpu, e.quarter")
    return [{k: r.get(k) for k in FLEET_COLUMNS} for r in rows]


def horizon_quarters(start: str, count) -> list[str]:
    first = index_of_quarter(parse_quarter(start))
    if isinstance(count, str) and count.strip().isdigit():  # the CLI passes --quarters as typed
        count = int(count.strip())
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise KvregError(f"--quarters must be a whole number of quarters, at least 1, not {count!r}")
    if count > MAX_HORIZON_QUARTERS:
        raise KvregError(f"--quarters {count} is too long a horizon: at most {MAX_HORIZON_QUARTERS}")
    return [quarter_of_index(first + i) for i in range(count)]


def rollup(conn, quarter: str | None = None, start: str | None = None, quarters=None) -> list[dict]:
    """What to buy per GPU type and quarter (the declared aggregates).

    No arguments: the `procurement` view, every quarter with an entry. `quarter`: that one quarter
    (entries carried forward into it). `start` and `quarters`: a horizon of consecutive quarters,
    every GPU type with demand or fleet in each, zeros included."""
    if start is not None or quarters is not None:
        # lazy: the figure declarations (about 30 ms) load only when the stdlib path cannot answer
        from kvreg.figures.aggregates import aggregate_sql, quarters_sql

        if quarter is not None:
            raise KvregError("give --quarter or --from/--quarters, not both")
        if start is None:
            raise KvregError("--quarters needs --from: the first quarter of the horizon (2026Q4)")
        axis = horizon_quarters(start, quarters or 4)
        rows = runner(conn).rows(aggregate_sql(quarters_sql(axis), dialect(conn)))
    elif quarter is not None:
        q = parse_quarter(quarter)
        rows = runner(conn).rows(_one_quarter_sql(conn), {"quarter": q, "quarter_index": index_of_quarter(q)})
    else:
        rows = runner(conn).rows("SELECT * FROM procurement")
    rows.sort(key=lambda r: (r["quarter"], r["gpu"]))
    return rows  # columns as every rollup query selects them: gpu, quarter, AGGREGATE_COLUMNS


# kvreg_meta's key for the rollup's one-quarter query (kvreg.figures.aggregates.ROLLUP_SQL_KEY, kept equal by a test).
ROLLUP_SQL_KEY = "rollup_quarter_sql"


def _one_quarter_sql(conn) -> str:
    """`plan rollup --quarter`'s query (kvreg.figures.aggregates.one_quarter_sql). On the fast path it is read
    from kvreg_meta, where it was stored with the views (eligibility has checked they are current): the
    figure declarations take about 30 ms to import. Compiled here on any other connection."""
    if isinstance(conn, (sqlite3.Connection, _SqliteRunner)):
        found = runner(conn).rows("SELECT value FROM kvreg_meta WHERE key = :k", {"k": ROLLUP_SQL_KEY})
        if found:
            return found[0]["value"]
    # lazy: the figure declarations (about 30 ms) load only when the stdlib path cannot answer
    from kvreg.figures.aggregates import one_quarter_sql

    return one_quarter_sql(dialect(conn))


# --------------------------------------------------------------------------- the purchase schedule
# One horizon rule for every output (plan rollup, the report, the workbook's Summary, the web page):
# the schedule starts at the quarter asked about, by default the current one. Purchases made before it
# are not bought again: they are in the installed fleet (`kvreg fleet set`). It runs HORIZON_QUARTERS
# quarters, or on to the last quarter a demand or fleet entry names when that is later (at most
# MAX_HORIZON_QUARTERS), so no entered demand falls outside it.

HORIZON_QUARTERS = 4


def schedule_horizon(conn, start: str | None = None, quarters=None) -> list[str]:
    """The purchase schedule's quarters: from `start` (default: the current quarter), `quarters` long
    (default: HORIZON_QUARTERS, or through the last demand or fleet entry's quarter when later)."""
    first = parse_quarter(start) if start else units.current_quarter()
    if quarters is not None:
        return horizon_quarters(first, quarters)
    last = runner(conn).rows("SELECT MAX(q) AS q FROM (SELECT quarter AS q FROM demand UNION ALL"
                             " SELECT quarter AS q FROM fleet) entries")[0]["q"]
    span = index_of_quarter(last) - index_of_quarter(first) + 1 if last else 0
    return horizon_quarters(first, min(max(HORIZON_QUARTERS, span), MAX_HORIZON_QUARTERS))


# What `--whole-nodes` reads in place of each schedule column (the declared whole-node aggregates).
WHOLE_NODE_COLUMNS = {"gpus_to_buy": "gpus_to_buy_whole_nodes", "capex_to_buy": "capex_to_buy_whole_nodes",
                      "order_by": "order_by_whole_nodes", "order_late": "order_late_whole_nodes",
                      "gpus_bought": "gpus_bought_whole_nodes"}


def _driving_plans(conn, rows: list[dict]) -> None:
    """Each row with a purchase gets `driving_plans`: the plans on its GPU type whose GPUs needed grew
    since the axis's quarter before (in the first quarter: every plan needing GPUs), largest growth
    first, as 'plan +N'. Read from plan_quarter's gpus_needed with the carry-forward rule."""
    axis = sorted({index_of_quarter(r["quarter"]) for r in rows})
    entries = runner(conn).rows("SELECT plan, gpu, quarter_index, until_index, users, gpus_needed FROM plan_quarter")

    def needed(plan_rows, at):
        for e in plan_rows:
            if e["quarter_index"] <= at and (e["until_index"] is None or e["until_index"] > at):
                return (e["gpus_needed"] or 0) if (e["users"] or 0) > 0 else 0
        return 0

    by_plan: dict = {}
    for e in entries:
        by_plan.setdefault((e["gpu"], e["plan"]), []).append(e)
    for r in rows:
        r["driving_plans"] = ""
        if not r.get("gpus_to_buy"):
            continue
        at = index_of_quarter(r["quarter"])
        before = [q for q in axis if q < at]
        grew = []
        for (gpu, plan), plan_rows in sorted(by_plan.items()):
            if gpu != r["gpu"]:
                continue
            change = needed(plan_rows, at) - (needed(plan_rows, before[-1]) if before else 0)
            if change > 0:
                grew.append((-change, plan))
        r["driving_plans"] = ", ".join(f"{plan} +{-c}" for c, plan in sorted(grew))


def purchase_schedule(conn, quarter: str | None = None, start: str | None = None, quarters=None, *,
                      whole_nodes: bool = False) -> dict:
    """The purchase schedule: the declared aggregates per GPU type and quarter of the horizon (one
    `quarter`, or schedule_horizon(start, quarters): from the current quarter by default), each row
    with the plans that drive its purchase, and the totals of GPUs to buy and their capex per GPU type
    and overall. GPUs bought stay bought: gpus_to_buy is the increment beyond the fleet and the
    horizon's earlier purchases, so the totals are what the horizon buys. `whole_nodes`: the purchases
    rounded up to whole nodes (the GPU type's node_gpus), read from the declared *_whole_nodes
    aggregates."""
    if quarter is not None:
        if start is not None or quarters is not None:
            raise KvregError("give --quarter or --from/--quarters, not both")
        axis = [parse_quarter(quarter)]
        rows = rollup(conn, quarter)
    else:
        axis = schedule_horizon(conn, start, quarters)
        rows = rollup(conn, start=axis[0], quarters=len(axis))
    if whole_nodes:
        for r in rows:
            for col, whole in WHOLE_NODE_COLUMNS.items():
                r[col] = r[whole]
    _driving_plans(conn, rows)
    totals: dict = {}
    for r in rows:
        t = totals.setdefault(r["gpu"], {"gpu": r["gpu"], "gpus_to_buy": 0, "capex_to_buy": 0.0, "first_order_by": None,
                                         "orders_late": 0})
        t["gpus_to_buy"] += r["gpus_to_buy"] or 0
        if r["capex_to_buy"] is None and r["gpus_to_buy"]:
            t["capex_to_buy"] = None  # no unit price: the capex is not known
        elif t["capex_to_buy"] is not None:
            t["capex_to_buy"] += r["capex_to_buy"] or 0
        if r["order_by"] is not None and (t["first_order_by"] is None or r["order_by"] < t["first_order_by"]):
            t["first_order_by"] = r["order_by"]
        t["orders_late"] += r["order_late"] or 0
    by_gpu = [totals[g] for g in sorted(totals)]
    costs = [t["capex_to_buy"] for t in by_gpu]
    total = {"gpus_to_buy": sum(t["gpus_to_buy"] for t in by_gpu),
             "capex_to_buy": None if None in costs else sum(costs),
             "first_order_by": min((t["first_order_by"] for t in by_gpu if t["first_order_by"]), default=None),
             "orders_late": sum(t["orders_late"] for t in by_gpu)}
    return {"whole_nodes": whole_nodes, "quarters": axis, "schedule": rows, "totals": by_gpu, "total": total}
