"""The quarterly capacity report (`kvreg report`): read the views, write one folder per quarter.

    reports/2026-Q4/
      capacity.md      the report (templates/capacity.md.j2)
      charts/*.png     the charts capacity.md embeds
      capacity.xlsx    the live workbook (kvreg.export.xlsx)
      data.json        every figure the report printed, plus the registry inputs the next
                       quarter's report compares against

Every figure comes from a view: procurement, plan_capacity, plan_quarter, model_kv, and the
context sweep from the capacity view through `kvreg.capacity.ask`. The folder is written into
a temporary folder beside the target and swapped into place, so a failed or interrupted run
leaves the previous report as it was.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import gc
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import sys
import tempfile
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from sqlalchemy import text

from kvreg import __version__, limits
from kvreg.capacity import SWEEP_MAX_PAIRS, Question, sweep
from kvreg.db.engine import mask_url
from kvreg.db.read import (
    MAX_HORIZON_QUARTERS,
    current_revision,
    dialect,
    horizon_quarters,
    list_dtypes,
    list_gpus,
    list_models,
    purchase_schedule,
    rollup,
    runner,
    schedule_horizon,
    scratch_in_temp,
    snapshot,
)
from kvreg.dbcopy import process_alive
from kvreg.errors import KvregError
from kvreg.figures.aggregates import aggregate_sql, index_of_quarter, quarters_sql
from kvreg.figures.declarations import FIGURES, HOURS_PER_MONTH
from kvreg.figures.inputs import INPUTS
from kvreg.figures.quarters import previous_index, previous_quarter, quarter_of_index
from kvreg.figures.views import GRAIN, views_hash
from kvreg.plans import list_demand
from kvreg.units import current_quarter, parse_quarter, quarter_folder

FORMATS = ("md", "xlsx")
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
CLASS_COLUMNS = ["workload_class", "class_tokens", "share", "class_kv_bytes_per_request_per_gpu", "class_concurrency"]
PLAN_COLUMNS = ["model", "gpu", "rule", "tp", "pp", "dp_attention", "gpus_per_node", "context_tokens", "avg_tokens",
                "workload_tokens", "kv_bytes_per_request_per_gpu",
                "kv_dtype", "weight_dtype", "reserve", "kv_cache_memory_bytes", "block_size",
                "kv_bytes_per_token_per_gpu", "kv_bytes_per_token_full_per_gpu", "kv_gib_per_sequence_per_gpu",
                "weights_gib_per_gpu",
                "usable_gib_per_gpu", "kv_pool_gib_per_gpu", "kv_pool_tokens", "max_concurrency", "whole_sequences",
                "workload_concurrency", "replicas_per_node", "node_concurrency", "decode_tokens_per_s_per_sequence",
                "context_within_claim", "fits", "reason",
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


@dataclass
class Report:
    """A written report: its folder and the files in it (relative paths, sorted)."""
    folder: Path
    files: list[str]


# --------------------------------------------------------------------------- inputs


def parse_formats(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`md,xlsx` -> ("md", "xlsx"); anything else is a one-line error."""
    items = value.split(",") if isinstance(value, str) else list(value)
    chosen = []
    for item in items:
        name = item.strip().lower()
        if not name:
            continue
        if name not in FORMATS:
            raise KvregError(f"report format {item.strip()!r} is not supported: choose md, xlsx or md,xlsx")
        if name not in chosen:
            chosen.append(name)
    if not chosen:
        raise KvregError("no report format given: choose md, xlsx or md,xlsx")
    return tuple(f for f in FORMATS if f in chosen)


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
    """Max concurrency per model, GPU and context, one TP per model and GPU (kvreg.capacity.sweep: the
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
# Markdown report's sweep covers more (kvreg.capacity.SWEEP_MAX_PAIRS); the workbook keeps the pairs a
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
    return {"dtypes": dtypes, "gpus": list_gpus(conn), "models": list_models(conn),
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
    (kvreg.capacity.sweep: the smallest that holds the weights and a sequence at the shortest
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


# --------------------------------------------------------------------------- quarter over quarter


def load_previous(out: Path, quarter: str, compare: str | None) -> tuple[dict | None, dict]:
    """The earlier report's data.json to compare against, and a note saying which (or why none).

    `compare` names a quarter explicitly (its report must exist); otherwise the previous
    quarter's report is used when it is there.
    """
    q = compare or previous_quarter(quarter)
    against = f"{quarter_folder(q)}/data.json"
    path = out / against
    note = {"found": False, "against": against, "previous_quarter": q}
    if not path.is_file():
        if compare:
            raise KvregError(f"--compare {q}: there is no report at {path}: write it first with "
                             f"`kvreg report --quarter {q}`, or leave out --compare")
        return None, {**note, "note": f"No earlier report to compare with: {against} is not in the output folder"}
    try:
        prev = limits.parse_json(limits.read_input(str(path), limits.MAX_DATA_JSON_BYTES, "report data file"), against,
                                 "report data file")
        _check_previous(prev)
    except (OSError, ValueError) as exc:
        reason = " ".join(str(exc).split())
        if compare:
            raise KvregError(f"--compare {q}: {path} cannot be read ({reason}): write that quarter's report again")
        return None, {**note, "note": f"Nothing is compared: {against} cannot be read ({reason})"}
    return prev, note


# What compare_reports reads of an earlier data.json: list -> (key every item must have as text,
# keys whose values must be numbers or null).
_PREVIOUS_SHAPE = {"models": ("model", ()), "gpus": ("gpu", ()), "plans": ("plan", ("max_concurrency",)),
                   "procurement": ("gpu", ("gpus_needed", "cost_per_month"))}


def _check_previous(prev) -> None:
    """ValueError (its text says what is wrong) unless `prev` has the shape compare_reports reads."""
    if not isinstance(prev, dict) or prev.get("format") != DATA_FORMAT:
        raise ValueError(f"it is not a {DATA_FORMAT} file")
    for name, (key, numbers) in _PREVIOUS_SHAPE.items():
        items = prev.get(name, [])
        if not isinstance(items, list) or not all(isinstance(r, dict) and isinstance(r.get(key), str) for r in items):
            raise ValueError(f"its {name} is not a list of records with a {key} name")
        for r in items:
            demand = r.get("demand") if isinstance(r.get("demand"), dict) else {}
            bad = [k for k in numbers if r.get(k) is not None and type(r.get(k)) not in (int, float)]
            bad += [f"demand.{k}" for k in ("capacity_users", "gpus_needed")
                    if demand.get(k) is not None and type(demand.get(k)) not in (int, float)]
            if bad:
                raise ValueError(f"{name} {r[key]!r}: {bad[0]} is not a number")
            for k in ("inputs", "kv", "demand"):
                if r.get(k) is not None and not isinstance(r[k], dict):
                    raise ValueError(f"{name} {r[key]!r}: {k} is not an object")
            kv = r.get("kv") or {}
            if any(v is not None and not isinstance(v, dict) for v in kv.values()):
                raise ValueError(f"{name} {r[key]!r}: kv holds a value that is not an object")


def _flat(record: dict, skip: tuple[str, ...] = ()) -> dict:
    """A record's fields as one level: inputs under their own names, KV figures as `name (dtype)`."""
    out = {}
    for k, v in record.items():
        if k in skip:
            continue
        if k == "inputs":
            out.update({ik: iv for ik, iv in v.items() if ik not in out})
        elif k == "kv":
            for dtype, figs in v.items():
                for fk, fv in (figs or {}).items():
                    out[f"{fk} ({dtype})"] = fv
        else:
            out[k] = v
    return out


def _diff(before: list[dict], after: list[dict], key: str, skip: tuple[str, ...] = ()) -> dict:
    old = {r[key]: _flat(r, skip) for r in before}
    new = {r[key]: _flat(r, skip) for r in after}
    changed = []
    for name in sorted(old.keys() & new.keys()):
        fields = sorted(f for f in old[name].keys() | new[name].keys() if old[name].get(f) != new[name].get(f))
        if fields:
            changed.append({"name": name, "fields": fields})
    return {"added": sorted(new.keys() - old.keys()), "removed": sorted(old.keys() - new.keys()), "changed": changed}


def _change(before, after):
    return None if before is None or after is None else after - before


def _procurement_change(before: list[dict], after: list[dict]) -> list[dict]:
    """GPU types in the last report against this one. These are `since_last_report` figures: the
    quarter-over-quarter change within one registry is gpus_needed_quarter_change, a declared figure."""
    # A GPU type missing from a report had no demand that quarter: nothing to buy.
    old, new = {r["gpu"]: r for r in before}, {r["gpu"]: r for r in after}
    zero = {"gpus_needed": 0, "cost_per_month": 0, "gpus_to_buy": 0}
    out = []
    for gpu in sorted(old.keys() | new.keys()):
        o, n = old.get(gpu, zero), new.get(gpu, zero)
        row = {"gpu": gpu}
        for name in ("gpus_to_buy", "gpus_needed", "cost_per_month"):
            a, b = o.get(name), n.get(name)  # a report written before the fleet existed has no gpus_to_buy
            row.update({f"last_report_{name}": a, name: b, f"{name}_since_last_report": _change(a, b)})
        out.append(row)
    return out


def _capacity_change(before: list[dict], after: list[dict]) -> list[dict]:
    old = {p["plan"]: p for p in before}
    out = []
    for p in after:
        o = old.get(p["plan"])
        if o is None:
            continue
        od, nd = o.get("demand") or {}, p.get("demand") or {}
        row = {"plan": p["plan"]}
        for name, a, b in (("max_concurrency", o.get("max_concurrency"), p.get("max_concurrency")),
                           ("capacity_users", od.get("capacity_users"), nd.get("capacity_users")),
                           ("gpus_needed", od.get("gpus_needed"), nd.get("gpus_needed"))):
            row.update({f"last_report_{name}": a, name: b, f"{name}_since_last_report": _change(a, b)})
        out.append(row)
    return out


def compare_reports(previous: dict, current: dict, note: dict) -> dict:
    """What changed since the earlier report: models, GPUs and plans added, removed or changed,
    and the change in plan capacity and in GPUs to buy."""
    return {
        **note,
        "found": True,
        "note": None,
        "previous_quarter": previous.get("quarter"),
        "previous_registry_sha256": (previous.get("provenance") or {}).get("registry_sha256"),
        "models": _diff(previous.get("models", []), current["models"], "model"),
        "gpus": _diff(previous.get("gpus", []), current["gpus"], "gpu"),
        "plans": _diff(previous.get("plans", []), current["plans"], "plan", skip=("demand", "quarters")),
        "procurement": _procurement_change(previous.get("procurement", []), current["procurement"]),
        "capacity": _capacity_change(previous.get("plans", []), current["plans"]),
    }


# --------------------------------------------------------------------------- writing


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Folders a report run makes beside its target: .2026-Q4.tmp-<pid>-<random> (being written) and
# .2026-Q4.old-<random> (the previous report, about to be deleted). Older kvreg wrote no <pid>.
# (mkdtemp and secrets.token_hex(4) both end the name in 8 characters.)
_TEMP_NAME = re.compile(r"^\.\d{4}-Q[1-4]\.(tmp|old)-(?:(\d+)-)?[a-z0-9_]{8}$")


def clean_stale_temporaries(out: Path) -> list[Path]:
    """Delete what killed report runs left under `out`: temporary folders of kvreg's own naming
    whose process is gone (a .old- folder is always leftover: a live run deletes its own at once,
    and the report it held is already replaced). Symlinks are removed, never followed. Returns
    what was deleted."""
    removed = []
    try:
        entries = list(os.scandir(out))
    except OSError:
        return removed
    for entry in entries:
        m = _TEMP_NAME.match(entry.name)
        if not m or (m.group(1) == "tmp" and m.group(2) and process_alive(int(m.group(2)))):
            continue
        path = Path(entry.path)
        try:
            if entry.is_symlink():  # an old report folder that was a link: the link goes, not its target
                path.unlink()
            elif entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:  # kvreg makes folders here, never files: not ours
                continue
            removed.append(path)
        except OSError:  # another run removed it first, or it is not ours to delete: leave it
            pass
    return removed


def _remove(path: Path) -> None:
    """Delete a folder, or only the link if it is a symlink (never what it points to)."""
    if path.is_symlink():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _temp_folder(out: Path, target: Path) -> Path:
    """A fresh folder beside the target (same filesystem, so the final rename is atomic)."""
    if out.exists() and not out.is_dir():
        raise KvregError(f"cannot write reports under {out}: it is a file, not a folder; choose a folder with --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        if target.exists() and not target.is_dir():
            raise KvregError(f"cannot write the report: {target} exists and is not a folder; move it away")
        clean_stale_temporaries(out)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{os.getpid()}-", dir=out))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; a report folder is not
    except OSError as exc:
        raise KvregError(f"cannot write reports under {out}: {exc.strerror or exc}; "
                         "choose a writable folder with --out") from None
    return tmp


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step (Linux renameat2 RENAME_EXCHANGE); False where the system or
    the filesystem cannot, and nothing was changed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a C library without renameat2 (glibc before 2.28)
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _swap_into_place(tmp: Path, target: Path) -> None:
    """Put the new report where the old one is, then delete the old.

    Exchanging the two folders is one step, so a process killed at any moment leaves a whole
    report at the target, old or new. Where the system cannot exchange: rename the old report
    away and the new one in (undone on failure), which leaves no report for an instant."""
    # A symlink at the target is replaced by the new folder, and only the link is deleted.
    present = target.exists() or target.is_symlink()
    if present and _exchange(tmp, target):
        _remove(tmp)  # tmp now holds the old report (or the old link)
        return
    old = None
    if present:
        old = target.with_name(f".{target.name}.old-{secrets.token_hex(4)}")
        os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        raise
    if old is not None:
        _remove(old)


def _utc(now: dt.datetime | None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.timezone.utc)
    return now.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_files(conn, folder: Path, data: dict, formats: tuple[str, ...], asked: dict | None = None) -> None:
    if "md" in formats:
        # Lazy: matplotlib and Jinja load only when the Markdown report is asked for.
        from kvreg.export.charts import write_charts
        from kvreg.export.markdown import render

        charts = write_charts(data, folder)
        md = render({"data": data, "charts": charts})
        (folder / "capacity.md").write_text(md, encoding="utf-8", newline="\n")
    if "xlsx" in formats:
        # The report's own time, so the workbook is as repeatable as the other files.
        write_workbook(conn, folder / "capacity.xlsx", data["quarter"], generated_at=data["provenance"]["generated_at"],
                       asked=asked)
    body = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
    (folder / "data.json").write_text(body + "\n", encoding="utf-8", newline="\n")


@contextmanager
def _snapshot(engine):
    """A connection that reads one consistent snapshot and blocks no writer (kvreg.db.read.snapshot),
    its scratch table and views made in TEMP before the first question."""
    with snapshot(engine) as conn:
        scratch_in_temp(conn)
        yield conn


def _collect_quietly(exc: BaseException) -> None:
    """Collect what a failed run left half-written. openpyxl's streaming sheets are generators
    whose file is already closed; collected later (the error's traceback keeps them alive), each
    would print an "Exception ignored" traceback under the one-line error."""
    traceback.clear_frames(exc.__traceback__)  # the frames that hold the workbook, not this one

    hook = sys.unraisablehook
    sys.unraisablehook = lambda _unraisable: None
    try:
        gc.collect()
    finally:
        sys.unraisablehook = hook


def write_report(engine, quarter: str | None = None, out: str | Path = "reports",
                 formats: str | tuple[str, ...] = FORMATS, compare: str | None = None, *,
                 registry_url: str | None = None, now: dt.datetime | None = None) -> Report:
    """Write the report for `quarter` (default: the current one) to `out`/YYYY-Qn/ and return it.

    `formats`: md (Markdown and charts) and/or xlsx (the workbook); data.json is always written.
    `compare`: the quarter whose report to compare against (default: the previous quarter's, if any).
    `registry_url` is shown masked in the provenance (default: the engine's URL).
    """
    quarter = parse_quarter(quarter) if quarter else current_quarter()
    formats = parse_formats(formats)
    compare = parse_quarter(compare) if compare else None
    out = Path(out)
    target = out / quarter_folder(quarter)
    previous, note = load_previous(out, quarter, compare)
    url = registry_url or engine.url.render_as_string(hide_password=False)
    tmp = _temp_folder(out, target)
    try:
        with _snapshot(engine) as conn:
            asked: dict = {}  # the sweep's capacity question, asked once for the report and the workbook
            data = gather(conn, quarter, generated_at=_utc(now), registry_url=url, asked=asked)
            data["comparison"] = compare_reports(previous, data, note) if previous else note
            _write_files(conn, tmp, data, formats, asked)
            conn.rollback()  # nothing is written to the registry (the sweep's scratch rows included)
        _swap_into_place(tmp, target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise KvregError(f"cannot write the report to {target}: {exc.strerror or exc}; "
                         "the previous report was left as it was") from None
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        _collect_quietly(exc)
        raise
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    return Report(target, files)
