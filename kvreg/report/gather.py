"""What a report prints, read from the views: `gather` (capacity.md and data.json) and `workbook_data`
(capacity.xlsx).

Every figure comes from a view: procurement, plan_capacity, plan_quarter, model_kv, and the context
sweep from the capacity view through `kvreg.app.capacity.sweep` (a what-if: nothing is written). The
registry's own rows are read too, for the provenance hash and the next quarter's comparison.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from decimal import Decimal

from sqlalchemy import text

from kvreg import __version__
from kvreg.app.capacity import SWEEP_MAX_PAIRS, Question, sweep
from kvreg.core.units import parse_quarter
from kvreg.db.engine import mask_url
from kvreg.db.read import (
    MAX_HORIZON_QUARTERS,
    current_revision,
    dialect,
    horizon_quarters,
    list_demand,
    list_dtypes,
    list_gpus,
    list_models,
    purchase_schedule,
    rollup,
    runner,
    schedule_horizon,
)
from kvreg.figures.aggregates import aggregate_sql, index_of_quarter, quarters_sql
from kvreg.figures.declarations import FIGURES, HOURS_PER_MONTH
from kvreg.figures.inputs import INPUTS
from kvreg.figures.quarters import previous_index, previous_quarter, quarter_of_index
from kvreg.figures.views import GRAIN, views_hash


DATA_FORMAT = "kvreg-report/1"
SWEEP_CONTEXTS = (8192, 32768, 131072, 1_000_000)  # 8K, 32K, 128K (binary) and 1m (decimal)
SWEEP_KV_DTYPE = INPUTS["kv_dtype"].default  # the sweep's rows take a new deployment's KV dtype
CATALOG_KV_DTYPES = ("bf16", "fp8")
REGISTRY_TABLES = ("dtype", "model", "gpu", "plan", "workload_class", "demand", "fleet")

# The purchase first: what to buy and its capex, then the fleet and the plans behind it.
PROCUREMENT_COLUMNS = ["gpu", "gpus_to_buy", "capex_to_buy", "gpus_needed", "gpus_installed", "gpus_spare",
                       "plans", "plans_not_fitting", "users", "nodes_needed", "cost_per_month",
                       "previous_quarter_gpus_needed", "gpus_needed_quarter_change", "unit_price"]
HORIZON_COLUMNS = ["gpu", "quarter", "gpus_needed", "gpus_installed", "gpus_bought", "gpus_to_buy", "capex_to_buy",
                   "order_by", "order_late", "gpus_spare", "driving_plans"]
CLASS_COLUMNS = ["workload_class", "class_tokens", "share", "class_kv_bytes_per_request_per_gpu", "class_concurrency",
                 "class_input_tokens", "class_output_tokens", "class_tpot_target_ms", "class_ttft_target_ms"]
PLAN_COLUMNS = ["model", "gpu", "rule", "tp", "pp", "dp_attention", "gpus_per_node", "context_tokens", "avg_tokens",
                "workload_tokens", "kv_bytes_per_request_per_gpu",
                "kv_dtype", "weight_dtype", "reserve", "kv_cache_memory_bytes", "block_size",
                "kv_bytes_per_token_per_gpu", "kv_bytes_per_token_full_per_gpu", "kv_gib_per_sequence_per_gpu",
                "weights_gib_per_gpu",
                "usable_gib_per_gpu", "kv_pool_gib_per_gpu", "kv_pool_tokens", "max_concurrency", "whole_sequences",
                "workload_concurrency", "replicas_per_node", "node_concurrency", "decode_tokens_per_s_per_sequence",
                "context_within_claim", "fits", "reason",
                # users served within a latency target (a plan with --tpot-ms or --ttft-ms, or classes with targets)
                "workload_input_tokens", "workload_output_tokens", "workload_tpot_target_ms", "workload_ttft_target_ms",
                "tpot_concurrency_limit", "ttft_concurrency_limit", "latency_concurrency_limit", "users_per_replica",
                "users_binding_constraint",
                # engine rules (docs/engine-rules.md): the knobs as resolved, the allocation and the log lines
                "gpu_memory_utilization_used", "max_num_batched_tokens_used", "in_flight_tokens",
                "activation_peak_bytes_per_gpu", "cuda_graph_bytes_per_gpu", "mem_fraction_static_used",
                "allocatable_gib_per_gpu", "kv_block_tokens", "page_bytes_per_gpu", "num_blocks", "blocks_per_request",
                "cell_bytes_per_token_per_gpu", "sglang_state_slots", "kv_cache_tokens", "sequences_per_rank",
                "max_num_seqs", "max_running_requests",
                # calibration: what the engine printed, and kvreg's error against it
                "measured_engine_version", "measured_kv_cache_tokens", "kv_cache_tokens_error_fraction",
                "measured_max_concurrency", "max_concurrency_error_fraction",
                # calibrated from a startup log (kvreg plan calibrate --log): the log and its measured terms
                "calibration_source", "engine_version", "engine_memory_gib", "non_torch_bytes_per_gpu",
                "weights_measured_bytes", "measured_kv_cache_bytes", "kv_cache_memory_error_fraction"]
DEMAND_COLUMNS = ["quarter", "carried_from", "users", "replicas_needed", "gpus_needed", "nodes_needed", "capacity_users",
                  "headroom_users", "headroom_fraction", "cost_per_month", "capex", "cost_per_user_per_month"]
# kv_bytes_per_token counts every attention layer; kv_bytes_per_token_full the full layers alone (what a
# token past the sliding windows costs): equal unless the model has sliding or chunked layers.
MODEL_KV_COLUMNS = ["kv_bytes_per_token", "kv_bytes_per_token_full", "kv_gib_per_128k_sequence"]
SWEEP_COLUMNS = ["gpu", "model", "context_tokens", "kv_dtype", "tp", "max_concurrency", "whole_sequences", "fits",
                 "reason", "kv_gib_per_sequence_per_gpu", "weights_gib_per_gpu", "kv_pool_gib_per_gpu"]
# Registry columns that record when, not what: left out of change detection.
_NOT_CONTENT = ("id", "imported_at")


# --------------------------------------------------------------------------- reading the registry


_AS_IS = frozenset({int, str, bool, type(None)})  # the common types: nothing to convert


def _plain(value):
    """A JSON-ready value: Decimal (PostgreSQL sums) to int/float, NaN and infinity to None."""
    if type(value) in _AS_IS:
        return value
    if isinstance(value, Decimal):
        value = int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _rows(conn, sql: str, **params) -> list[dict]:
    result = conn.execute(text(sql), params)
    keys = list(result.keys())
    return [dict(zip(keys, map(_plain, r))) for r in result]


def _view_columns(conn, view: str, wanted: list[str]) -> list[str]:
    """Those of `wanted` the view has, in order (reading only the columns a report prints keeps
    a 10,000-plan registry's rows small)."""
    have = set(conn.execute(text(f"SELECT * FROM {view} WHERE 1 = 0")).keys())
    return [c for c in wanted if c in have]


def _pick(row: dict, columns: list[str]) -> dict:
    return {c: row.get(c) for c in columns}


_REGISTRY_SQL = {
    "dtype": "SELECT * FROM dtype",
    "model": "SELECT * FROM model",
    "gpu": "SELECT * FROM gpu",
    "plan": "SELECT p.*, m.name AS model, g.name AS gpu FROM plan p"
            " JOIN model m ON m.id = p.model_id JOIN gpu g ON g.id = p.gpu_id",
    "workload_class": "SELECT wc.*, p.name AS plan FROM workload_class wc JOIN plan p ON p.id = wc.plan_id",
    "demand": "SELECT d.*, p.name AS plan FROM demand d JOIN plan p ON p.id = d.plan_id",
    "fleet": "SELECT f.*, g.name AS gpu FROM fleet f JOIN gpu g ON g.id = f.gpu_id",
}


def _registry_table(conn, table: str) -> list[dict]:
    """A table's rows, foreign keys as names, ids dropped."""
    return [{k: v for k, v in r.items() if k != "id" and not k.endswith("_id")}
            for r in _rows(conn, _REGISTRY_SQL[table])]


def registry_rows(conn) -> dict[str, list[dict]]:
    """Every user-entered row of the registry, foreign keys as names, ids dropped, in a canonical order."""
    return {table: sorted(_registry_table(conn, table), key=_canonical) for table in REGISTRY_TABLES}


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def registry_sha256(conn) -> str:
    """sha256 of the registry's content: the rows of REGISTRY_TABLES as canonical JSON.

    The same bytes as `_canonical(registry_rows(conn))`, each row encoded once: the canonical
    JSON of a list is its items' canonical JSON joined by commas, in their sorted order."""
    h = hashlib.sha256()
    for i, table in enumerate(sorted(REGISTRY_TABLES)):
        rows = sorted(_canonical(r) for r in _registry_table(conn, table))
        h.update(f'{"{" if i == 0 else ","}{_canonical(table)}:[{",".join(rows)}]'.encode("utf-8"))
    h.update(b"}")
    return h.hexdigest()


def provenance(conn, *, generated_at: str, registry_url: str) -> dict:
    """Where the figures came from: kvreg version, schema revision, time, registry hash and (masked) URL."""
    return {
        "kvreg_version": __version__,
        "schema_revision": current_revision(conn),
        "generated_at": generated_at,
        "registry_sha256": registry_sha256(conn),
        "registry_url": mask_url(registry_url),
    }


def _plans(conn, quarter: str) -> list[dict]:
    demand: dict[int, list[dict]] = {}

    columns = ", ".join(["plan_id"] + _view_columns(conn, "plan_quarter", DEMAND_COLUMNS))
    for r in _rows(conn, f"SELECT {columns} FROM plan_quarter"):
        demand.setdefault(r["plan_id"], []).append({**_pick(r, DEMAND_COLUMNS), "carried_from": None})
    # Each plan's demand in the report's quarter: the latest entry at or before it (carry-forward).
    in_force = {r["plan_id"]: _pick(r, DEMAND_COLUMNS) for r in list_demand(conn, quarter=quarter)}
    classes: dict[int, list[dict]] = {}
    for r in _rows(conn, "SELECT pc.* FROM plan_class pc JOIN workload_class wc ON wc.plan_id = pc.plan_id"
                         " AND wc.name = pc.workload_class ORDER BY wc.id"):
        classes.setdefault(r["plan_id"], []).append(_pick(r, CLASS_COLUMNS))
    plans = []
    columns = ", ".join(["plan_id", "plan"] + _view_columns(conn, "plan_capacity", PLAN_COLUMNS))
    for p in sorted(_rows(conn, f"SELECT {columns} FROM plan_capacity"), key=lambda r: r["plan"]):
        quarters = sorted(demand.get(p["plan_id"], []), key=lambda d: d["quarter"])
        this = in_force.get(p["plan_id"])
        plans.append({"plan": p["plan"], **_pick(p, PLAN_COLUMNS), "classes": classes.get(p["plan_id"], []),
                      "demand": this, "quarters": quarters})
    return plans


def _models(conn) -> list[dict]:
    kv: dict[str, dict] = {}
    weights_gb: dict[str, float] = {}
    # The catalog's KV dtypes, and one more KV dtype for the weights of a model without them (weights_gb
    # is the model's own, the same in every row): not the model_kv rows of every dtype.
    dtypes = {f"d{i}": d for i, d in enumerate(CATALOG_KV_DTYPES)}
    sql = (f"SELECT model, kv_dtype, weights_gb, {', '.join(MODEL_KV_COLUMNS)} FROM model_kv"
           f" WHERE kv_dtype IN ({', '.join(':' + k for k in dtypes)})"
           " OR kv_dtype = (SELECT MIN(name) FROM dtype WHERE kind IN ('kv', 'both'))")
    for r in _rows(conn, sql, **dtypes):
        weights_gb[r["model"]] = r["weights_gb"]
        if r["kv_dtype"] in CATALOG_KV_DTYPES:
            kv.setdefault(r["model"], {})[r["kv_dtype"]] = _pick(r, MODEL_KV_COLUMNS)
    out = []
    for m in sorted(_rows(conn, "SELECT * FROM model"), key=lambda r: r["name"]):
        name = m["name"]
        out.append({
            "model": name,
            "weight_dtype": m["weight_dtype"],
            "weights_gb": weights_gb.get(name),
            "max_position_embeddings": m["max_position_embeddings"],
            "kv": {d: kv.get(name, {}).get(d) for d in CATALOG_KV_DTYPES},
            "inputs": {k: v for k, v in m.items() if k not in _NOT_CONTENT and k != "name"},
        })
    return out


def _gpus(conn) -> list[dict]:
    out = []
    for g in sorted(_rows(conn, "SELECT * FROM gpu"), key=lambda r: r["name"]):
        rest = {k: v for k, v in g.items() if k not in _NOT_CONTENT and k != "name"}
        out.append({"gpu": g["name"], **rest})
    return out


def _sweep_scope(conn, models: list[dict], gpus: list[dict]) -> tuple[list[str], list[str], str]:
    """Which models and GPUs the sweep covers: all of them in a registry of catalog size, else the
    ones plans use (at most SWEEP_MAX_PAIRS pairs, first by name), and a sentence that says so."""
    all_m, all_g = [m["model"] for m in models], [g["gpu"] for g in gpus]
    if len(all_m) * len(all_g) <= SWEEP_MAX_PAIRS:
        return all_m, all_g, "every model on every GPU"
    used = _rows(conn, "SELECT DISTINCT m.name AS model, g.name AS gpu FROM plan p "
                       "JOIN model m ON m.id = p.model_id JOIN gpu g ON g.id = p.gpu_id")
    gpu_names = sorted({r["gpu"] for r in used})[:SWEEP_MAX_PAIRS]
    model_names = sorted({r["model"] for r in used})[:max(1, SWEEP_MAX_PAIRS // max(1, len(gpu_names)))]
    return model_names, gpu_names, (
        f"the {len(model_names)} models and {len(gpu_names)} GPUs that plans use, first by name "
        f"(the registry holds {len(all_m):,} models and {len(all_g):,} GPUs)")


def _sweep(conn, models: list[dict], gpus: list[dict], asked: dict | None = None) -> tuple[list[dict], dict]:
    """Max concurrency per model, GPU and context, one TP per model and GPU (kvreg.app.capacity.sweep: the
    minimum TP at the shortest context, kept along the row): questions to the capacity view (the
    answer kept in `asked`, for the workbook's sweep)."""
    model_names, gpu_names, scope = _sweep_scope(conn, models, gpus)
    q = Question(models=model_names, gpus=gpu_names, contexts=list(SWEEP_CONTEXTS),
                 kv_dtypes=[SWEEP_KV_DTYPE], tp="auto")
    settings = {"contexts": list(q.contexts), "kv_dtype": SWEEP_KV_DTYPE, "weight_dtype": "native", "tp": q.tp,
                "pp": q.pp, "gpus_per_node": q.gpus_per_node, "reserve": q.reserve, "block_size": q.block_size,
                "scope": scope}
    if not model_names or not gpu_names:
        return [], settings
    asked = {} if asked is None else asked
    key = "sweep:" + repr(q)
    if key not in asked:
        asked[key] = sweep(conn, q)
    rows = [_pick({k: _plain(v) for k, v in r.items()}, SWEEP_COLUMNS) for r in asked[key]]
    rows.sort(key=lambda r: (r["gpu"], r["model"], r["context_tokens"]))
    return rows, settings


# Columns of the procurement table the grand total adds up (prices per GPU are not summed).
TOTAL_COLUMNS = [c for c in PROCUREMENT_COLUMNS if c not in ("gpu", "unit_price")]


def procurement_total(rows: list[dict]) -> dict:
    """The procurement table's grand total across GPU types: each column's sum over the rows as the
    views gave them. A blank (a purchase cost without a unit price) is left out of its sum, as the
    workbook's Total does; `unknown` names the GPU types whose blanks were left out, per column."""
    total: dict = {"gpu": "Total", "unknown": {}}
    for c in TOTAL_COLUMNS:
        values = [r.get(c) for r in rows]
        total[c] = sum(v for v in values if v is not None)
        missing = [r["gpu"] for r in rows if r.get(c) is None]
        if missing:
            total["unknown"][c] = missing
    return total


def _span_quarters(conn, quarter: str, horizon: list[str]) -> list[str]:
    """Every quarter from the first demand or fleet entry (or `quarter`, when earlier) to the last of
    the purchase schedule's `horizon`, at most MAX_HORIZON_QUARTERS: the latest ones."""
    first = conn.execute(text("SELECT MIN(q) FROM (SELECT quarter AS q FROM demand UNION ALL "
                              "SELECT quarter AS q FROM fleet) entries")).scalar()
    start = index_of_quarter(min(first, quarter) if first else quarter)
    end = index_of_quarter(horizon[-1])
    start = max(start, end - MAX_HORIZON_QUARTERS + 1)
    return horizon_quarters(quarter_of_index(start), end - start + 1)


def gather(conn, quarter: str, *, generated_at: str, registry_url: str, asked: dict | None = None) -> dict:
    """Everything the report prints, read from the views (the content of data.json). `asked` keeps
    the capacity questions' answers by repr(question), to be reused on the same connection."""
    # The GPUs-needed chart and table show every quarter from the first demand or fleet entry to the end
    # of the horizon, entries carried forward, one without entries too. The purchase schedule is the
    # horizon's (kvreg.db.read.schedule_horizon, the rule every output follows): its first quarter is
    # the report's (GPUs bought stay bought from there on). Computing plan_quarter is the costly part: a
    # span that starts at the report's quarter is the horizon itself and is read once.
    schedule = purchase_schedule(conn, start=quarter)
    horizon = schedule["schedule"]
    span = _span_quarters(conn, quarter, schedule["quarters"])
    rows = horizon if span == schedule["quarters"] else rollup(conn, start=span[0], quarters=len(span))
    procurement = [r for r in horizon if r["quarter"] == quarter and (r["plans"] or r["gpus_installed"])]
    by_quarter = [_pick(r, ["gpu", "quarter", "gpus_needed"]) for r in rows]
    models = _models(conn)
    gpus = _gpus(conn)
    sweep, sweep_settings = _sweep(conn, models, gpus, asked)
    return {
        "format": DATA_FORMAT,
        "quarter": quarter,
        "previous_quarter": previous_quarter(quarter),
        "provenance": provenance(conn, generated_at=generated_at, registry_url=registry_url),
        "settings": {"rule": "theoretical", "catalog_kv_dtypes": list(CATALOG_KV_DTYPES),
                     "hours_per_month": HOURS_PER_MONTH, "sweep": sweep_settings},
        "procurement": [_pick(r, PROCUREMENT_COLUMNS) for r in procurement],
        "horizon": [_pick(r, HORIZON_COLUMNS) for r in horizon],
        "procurement_total": procurement_total(procurement),
        "schedule_totals": schedule["totals"],
        "schedule_total": schedule["total"],
        "procurement_by_quarter": by_quarter,
        "procurement_quarters": span,
        "plans": _plans(conn, quarter),
        "models": models,
        "gpus": gpus,
        "sweep": sweep,
    }


# --------------------------------------------------------------------------- the workbook's data


# (model, GPU) pairs of the workbook's Context sweep: four rows each, about 130 formulas a row. The
# Markdown report's sweep covers more (kvreg.app.capacity.SWEEP_MAX_PAIRS); the workbook keeps the pairs a
# chart can show and a person can page through, so a large registry's workbook is not mostly sweep.
WORKBOOK_SWEEP_PAIRS = 48
# The workbook's Models sheet shows the KV figures in these dtypes (each editable per row).
WORKBOOK_KV_DTYPES = ("bf16", "fp8")


def registry_id(conn) -> str:
    """The registry's identity (kvreg_meta.registry_id, made when it was first opened)."""
    rows = runner(conn).rows("SELECT value FROM kvreg_meta WHERE key = 'registry_id'")
    return rows[0]["value"] if rows else ""


def _view_with_inputs(conn, grain: str, key, where: str = "", params: dict | None = None) -> dict:
    """Each row of a grain's view with its source's columns (the inputs it was computed from);
    `where`: only the rows this condition on the view's (and its source's) columns keeps."""
    run = runner(conn)
    cond = f" WHERE {where}" if where else ""
    source = {key(r): r for r in run.rows(f"SELECT * FROM ({GRAIN[grain].source}) s{cond}", params)}
    return {key(r): {**source.pop(key(r), {}), **r} for r in run.rows(f"SELECT * FROM {grain}{cond}", params)}


def _workbook_kv_dtypes(dtypes: list[dict]) -> list[str]:
    kv = [d["name"] for d in dtypes if d["kind"] in ("kv", "both")]
    return [d for d in WORKBOOK_KV_DTYPES if d in kv] or kv[:1]


def _workbook_registry(conn) -> dict:
    """The registry's inputs (tables) and, for the values the workbook's formulas store, its views."""
    run = runner(conn)
    plans = run.rows("SELECT p.name AS plan, m.name AS model, g.name AS gpu, p.* FROM plan p"
                     " JOIN model m ON m.id = p.model_id JOIN gpu g ON g.id = p.gpu_id ORDER BY p.name")
    demand = run.rows("SELECT p.name AS plan, d.quarter AS quarter, d.users AS users FROM demand d"
                      " JOIN plan p ON p.id = d.plan_id ORDER BY d.quarter, p.name")
    classes = run.rows("SELECT p.name AS plan, wc.name AS workload_class, wc.avg_tokens AS class_tokens,"
                       " wc.share AS share FROM workload_class wc JOIN plan p ON p.id = wc.plan_id ORDER BY p.name, wc.id")
    fleet = run.rows("SELECT g.name AS gpu, f.quarter AS quarter, f.gpus_owned AS gpus_owned,"
                     " f.gpus_reserved AS gpus_reserved, f.reserved_price_per_hour AS reserved_price_per_hour"
                     " FROM fleet f JOIN gpu g ON g.id = f.gpu_id ORDER BY f.quarter, g.name")
    capacity = _view_with_inputs(conn, "plan_capacity", lambda r: r["plan"])
    for p in plans:
        p.pop("name", None)
        p.update({k: v for k, v in capacity.get(p["plan"], {}).items() if k not in p or k in FIGURES})
    by_class = _view_with_inputs(conn, "plan_class", lambda r: (r["plan"], r["workload_class"]))
    for c in classes:
        c.update({**capacity.get(c["plan"], {}), **by_class.get((c["plan"], c["workload_class"]), {}), **c})
    by_quarter = _view_with_inputs(conn, "plan_quarter", lambda r: (r["plan"], r["quarter"]))
    for d in demand:
        d.update({**by_quarter.get((d["plan"], d["quarter"]), {}), **d})
    procurement = {(r["gpu"], r["quarter"]): r for r in run.rows("SELECT * FROM procurement")}
    dtypes = list_dtypes(conn)
    blocks = _workbook_kv_dtypes(dtypes)
    gpus = list_gpus(conn)
    # The Summary's GPU types: those a plan or a fleet entry names (every other type's figures are 0
    # in every quarter), so 37 catalog types do not shrink its print; every type when none is named.
    named = {p["gpu"] for p in plans} | {f["gpu"] for f in fleet}
    return {"dtypes": dtypes, "gpus": gpus, "models": list_models(conn),
            "summary_gpus": [g for g in gpus if g["name"] in named] or gpus,
            "plans": plans, "classes": classes, "demand": demand, "fleet": fleet, "procurement": procurement,
            "kv_blocks": blocks,
            # Only the KV dtypes the Models sheet shows (a registry of 10,000 models has 14 rows each).
            "model_kv": _view_with_inputs(conn, "model_kv", lambda r: (r["model"], r["kv_dtype"]),
                                          "kv_dtype IN (" + ", ".join(f":d{i}" for i in range(len(blocks))) + ")",
                                          {f"d{i}": d for i, d in enumerate(blocks)}) if blocks else {},
            "registry_id": registry_id(conn)}


def _workbook_quarters(entries: list[dict], quarter: str, ahead: int = 4) -> list[str]:
    """The quarters the workbook's drop-downs offer: those with demand or fleet entries, the
    workbook's, and `ahead` more."""
    have = sorted({d["quarter"] for d in entries} | {quarter})
    year, q = int(have[-1][:4]), int(have[-1][5])
    for _ in range(ahead):
        year, q = (year + 1, 1) if q == 4 else (year, q + 1)
        have.append(f"{year}Q{q}")
    return have[-20:]  # a list's text is limited to 255 characters


def _workbook_aggregates(conn, data: dict, quarter: str) -> None:
    """The declared aggregates (the procurement rollup, carry-forward included) for the Summary's
    quarter and for each quarter of its per-quarter block, read through the same compiled SQL as
    the `procurement` view: the values the Summary's formulas store. Also each Demand and Fleet
    entry's in-force flags (the values of their helper columns)."""
    # The per-quarter block is the purchase schedule's horizon (kvreg.db.read.schedule_horizon): it
    # starts at the workbook's quarter, as the report's and `plan rollup --from` do.
    block = schedule_horizon(conn, quarter)
    data["block_quarters"] = block
    rows = runner(conn).rows(aggregate_sql(quarters_sql(block), dialect(conn), every_gpu=True))
    data["aggregates"] = {(r["gpu"], r["quarter"]): r for r in rows}
    q = index_of_quarter(quarter)
    for entries, key in ((data["demand"], "plan"), (data["fleet"], "gpu")):
        starts: dict = {}
        for e in entries:
            e["quarter_index"] = index_of_quarter(e["quarter"])
            starts.setdefault(e[key], []).append(e["quarter_index"])
        for e in entries:
            def held(at: int, e=e) -> int:
                qi = e["quarter_index"]
                return int(qi <= at and not any(qi < s <= at for s in starts[e[key]]))
            # The quarter before as kvreg.figures.quarters declares it, as the previous_quarter_in_force
            # formula (previous_index_excel) takes it.
            e["in_force"], e["previous_quarter_in_force"] = held(q), held(previous_index(q))
            for bq in block:
                e[f"in_force_{bq}"] = held(index_of_quarter(bq))


def _workbook_sweep(conn, data: dict, asked: dict | None = None) -> list[dict]:
    """Model x GPU x context for the models and GPUs the plans use, one TP per model and GPU
    (kvreg.app.capacity.sweep: the smallest that holds the weights and a sequence at the shortest
    context), at most WORKBOOK_SWEEP_PAIRS (model, GPU) pairs: every GPU the plans use (first by
    name) and as many models as leaves room for, the ones most plans use first (then by name).
    Without plans: the registry's models on the capacity question's default GPU (the first GPU if
    that one is gone)."""
    q = Question(contexts=list(SWEEP_CONTEXTS), kv_dtypes=[SWEEP_KV_DTYPE], tp="auto")
    if data["plans"]:
        uses: dict[str, int] = {}
        for p in data["plans"]:
            uses[p["model"]] = uses.get(p["model"], 0) + 1
        q.models = sorted(uses, key=lambda m: (-uses[m], m))
        q.gpus = sorted({p["gpu"] for p in data["plans"]})
    else:
        names = [g["name"] for g in data["gpus"]]
        q.models = [m["name"] for m in data["models"]]
        q.gpus = [g for g in q.gpus if g in names] or names[:1]
    q.gpus = q.gpus[:WORKBOOK_SWEEP_PAIRS]
    q.models = q.models[:max(1, WORKBOOK_SWEEP_PAIRS // max(1, len(q.gpus)))]
    if not q.models or not q.gpus:
        return []
    asked = {} if asked is None else asked
    key = "sweep:" + repr(q)
    if key not in asked:
        asked[key] = sweep(conn, q)
    return [dict(r) for r in asked[key]]


def workbook_data(conn, quarter: str, *, generated_at: str | None = None, asked: dict | None = None) -> dict:
    """Everything the workbook for `quarter` (``2026Q4``) shows, read from the registry: its
    inputs, the views' values its formulas store, the Context sweep's answers and the provenance;
    kvreg.export.xlsx.write_workbook renders it. `asked`: answers to capacity questions already
    asked on this connection, by repr(question) (the report passes its context sweep's, often the
    same question as the workbook's); the workbook adds its own."""
    quarter = parse_quarter(quarter)
    data = _workbook_registry(conn)
    data["quarter"] = quarter
    data["generated_at"] = generated_at or dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    data["quarters"] = _workbook_quarters(data["demand"] + data["fleet"], quarter)
    _workbook_aggregates(conn, data, quarter)
    data["sweep"] = _workbook_sweep(conn, data, asked)
    data["schema_revision"] = current_revision(conn)
    data["declarations_hash"] = views_hash(dialect(conn))
    return data


def write_workbook(conn, path, quarter: str, *, generated_at: str | None = None, asked: dict | None = None) -> None:
    """Write the finance workbook for `quarter` (``2026Q4``) to `path`: workbook_data, rendered by
    kvreg.export.xlsx.write_workbook. `conn` is a connection to an opened registry; the same
    registry, quarter and `generated_at` give the same bytes."""
    from kvreg.export.xlsx import write_workbook as render  # lazy: XlsxWriter loads only for an xlsx

    render(workbook_data(conn, quarter, generated_at=generated_at, asked=asked), path)
