"""`kvreg apply` / `kvreg export` for plans (with their workload classes), demand and fleet.

[[plan]] rows use the plan columns with the model and GPU by name and the workload mix inline,
as the built-in catalog writes them (`workload = [{ name = "chat", avg_tokens = 1500, share = 0.8 }]`);
[[demand]] rows are `plan, quarter, users`; [[fleet]] rows `gpu, quarter, gpus_owned, gpus_reserved,
reserved_price_per_hour`. Plans match by name, demand by (plan, quarter), fleet by (GPU, quarter).
A plan's keys are every setting it stores (kvreg.db.read.PLAN_KEYS), the release and measured memory terms
`kvreg plan calibrate --log` sets among them; what the engine printed (its measured KV cache and concurrency)
is not part of the file: it stays with the registry.
"""

from __future__ import annotations

import difflib
from typing import Any

from sqlalchemy import select, update

from kvreg.app.fleet import remove_fleet, set_fleet, validate_fleet
from kvreg.app.plans import (
    add_plan,
    remove_demand,
    remove_plan,
    set_demand,
    validate_allowances,
    validate_latency,
    validate_plan,
    validate_workload,
    write_workload,
)
from kvreg.app.registry import check_int
from kvreg.core.errors import KvregError
from kvreg.core.units import parse_quarter
from kvreg.db.read import CLASS_KEYS, DECLARED_ENTRIES, DEMAND_KEYS, FLEET_KEYS, PLAN_KEYS, get_plan
from kvreg.db.tables import Fleet, Gpu, Plan

KINDS = ("plan", "demand", "fleet")
_KEYS = {"plan": PLAN_KEYS, "demand": DEMAND_KEYS, "fleet": FLEET_KEYS}


def check_keys(kind: str, row: dict) -> None:
    for key in row:
        if key not in _KEYS[kind]:
            hint = difflib.get_close_matches(key, _KEYS[kind], n=1)
            raise KvregError(f"unknown key {key!r}: " + (f"did you mean {hint[0]}?" if hint else
                                                         f"{kind} keys are {', '.join(_KEYS[kind])}"))


def row_key(kind: str, row: dict) -> str:
    if kind == "plan":
        return str(row.get("name"))
    # The quarter as stored: 2027Q2 and 2027-Q2 are one entry (declared twice, not "2 added" and one row).
    quarter = row.get("quarter")
    try:
        quarter = parse_quarter(quarter) if isinstance(quarter, str) else quarter
    except ValueError:  # left as written; normalise() names the bad quarter
        pass
    return f"{row.get('plan' if kind == 'demand' else 'gpu')} {quarter}"


# --------------------------------------------------------------------------- current state

# What the registry holds, read by the same queries `kvreg export` runs (kvreg.db.read).
CURRENT = DECLARED_ENTRIES


# --------------------------------------------------------------------------- validating and writing


def normalise(conn, kind: str, row: dict) -> dict:
    """A declared row -> the row as the registry would hold it (validated; absent keys: defaults)."""
    check_keys(kind, row)
    if kind == "plan":
        spec = {k: v for k, v in row.items() if k != "workload"}
        classes = row.get("workload") or []
        if not isinstance(classes, list) or not all(isinstance(c, dict) for c in classes):
            raise KvregError("workload must be a list of { name, avg_tokens, share } tables")
        stored = {**validate_plan(conn, spec), **validate_allowances(conn, spec)}
        for c in classes:
            for key in c:
                if key not in CLASS_KEYS:
                    raise KvregError(f"unknown workload class key {key!r}: a class's keys are {', '.join(CLASS_KEYS)}")
        wl = validate_workload([{**c, "class": c.get("name")} for c in classes], stored["context_tokens"],
                               stored["avg_tokens"])
        validate_latency(stored, wl)
        out = {k: stored.get(k) for k in PLAN_KEYS if k not in ("model", "gpu", "workload")}
        out.update(model=row["model"], gpu=row["gpu"], workload=wl)
        return out
    if kind == "demand":
        get_plan(conn, row.get("plan"))
        return {"plan": row["plan"], "quarter": parse_quarter(row.get("quarter")),
                "users": check_int(row.get("users"), "users", minimum=0)}

    v = validate_fleet(conn, row.get("gpu"), row.get("quarter"), row.get("gpus_owned"), row.get("gpus_reserved"),
                       row.get("reserved_price_per_hour"))
    return {k: v[k] for k in FLEET_KEYS}


def same_value(old: Any, new: Any) -> bool:
    if isinstance(old, (int, float)) and isinstance(new, (int, float)):
        return float(old) == float(new)
    return old == new


def changes(old: dict, new: dict) -> list[tuple[str, Any, Any]]:
    out = []
    for k, v in new.items():
        o = old.get(k)
        if k == "workload":
            if [[c.get(k) for k in CLASS_KEYS] for c in o or []] != [[c.get(k) for k in CLASS_KEYS] for c in v]:
                out.append((k, o, v))
        elif not same_value(o, v):
            out.append((k, o, v))
    return out


def write(conn, kind: str, row: dict, exists: bool) -> None:
    if kind == "plan":
        spec = {k: v for k, v in row.items() if k != "workload"}
        if not exists:
            add_plan(conn, {**spec, "workload": [{**c, "class": c["name"]} for c in row["workload"]]})
            return
        plan_id = get_plan(conn, row["name"])["id"]
        stored = {**validate_plan(conn, spec), **validate_allowances(conn, spec)}
        conn.execute(update(Plan).where(Plan.id == plan_id).values(**stored))
        write_workload(conn, plan_id, row["workload"])
    elif kind == "demand":
        set_demand(conn, row["plan"], row["quarter"], row["users"])
    else:
        set_fleet(conn, row["gpu"], row["quarter"], row["gpus_owned"], row["gpus_reserved"],
                  row["reserved_price_per_hour"])


def remove(conn, kind: str, old: dict) -> None:
    if kind == "plan":
        remove_plan(conn, old["name"])
    elif kind == "demand":
        remove_demand(conn, old["plan"], old["quarter"])
    else:
        remove_fleet(conn, old["gpu"], old["quarter"])


def used_by(conn, kind: str, name: str) -> list[str]:
    """What keeps a GPU (fleet entries) from being pruned, besides plans."""
    if kind != "gpu":
        return []
    rows = conn.execute(select(Fleet.quarter).join(Gpu, Gpu.id == Fleet.gpu_id).where(Gpu.name == name)
                        .order_by(Fleet.quarter)).scalars()
    return list(rows)
