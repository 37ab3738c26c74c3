"""Load the built-in catalog (TOML files beside this module) into a new registry."""

from __future__ import annotations

import uuid

from sqlalchemy import func, insert, select

from kvreg.catalog import load_catalog
from kvreg.db.tables import Demand, Dtype, Gpu, Meta, Model, Plan, WorkloadClass, server_default_value

from .defaults import model_defaults


def seed_if_empty(conn) -> bool:
    """Seed a registry once, the first time it is opened. A registry whose user later removed
    every row stays empty: the seeding is recorded in kvreg_meta. Every registry also gets its
    identity (kvreg_meta.registry_id), which a workbook carries so `kvreg apply` can tell whose it is."""
    ensure_registry_id(conn)
    if conn.execute(select(Meta.value).where(Meta.key == "seeded")).first() is not None:
        return False
    if conn.execute(select(func.count()).select_from(Dtype)).scalar_one():
        conn.execute(insert(Meta).values(key="seeded", value="existing"))
        return False

    cat = load_catalog()
    conn.execute(insert(Dtype), _fill(Dtype, cat["dtypes"]))
    conn.execute(insert(Gpu), _fill(Gpu, cat["gpus"]))
    conn.execute(insert(Model), _fill(Model, [model_defaults(m) for m in cat["models"]]))
    _seed_plans(conn, cat.get("plans", []), cat.get("demand", []))
    conn.execute(insert(Meta).values(key="seeded", value="catalog"))
    return True


def ensure_registry_id(conn) -> str:
    """The registry's identity: a random id made the first time it is opened."""
    row = conn.execute(select(Meta.value).where(Meta.key == "registry_id")).first()
    if row is not None:
        return row[0]
    value = uuid.uuid4().hex
    conn.execute(insert(Meta).values(key="registry_id", value=value))
    return value


def _fill(table, rows: list[dict]) -> list[dict]:
    """Give every row every optional column, so one executemany can insert them all."""
    optional = {c.name: (server_default_value(c) if c.server_default is not None else None)
                for c in table.__table__.columns if c.nullable or c.server_default is not None}
    return [{**optional, **r} for r in rows]


def _seed_plans(conn, plans: list[dict], demand: list[dict]) -> None:
    ids = {}
    for p in plans:
        row = dict(p)
        row["model_id"] = conn.execute(select(Model.id).where(Model.name == row.pop("model"))).scalar_one()
        row["gpu_id"] = conn.execute(select(Gpu.id).where(Gpu.name == row.pop("gpu"))).scalar_one()
        classes = row.pop("workload", [])
        ids[row["name"]] = conn.execute(insert(Plan).values(**row).returning(Plan.id)).scalar_one()
        for c in classes:
            conn.execute(insert(WorkloadClass).values(plan_id=ids[row["name"]], **c))
    for d in demand:
        conn.execute(insert(Demand).values(plan_id=ids[d["plan"]], quarter=d["quarter"], users=d["users"]))
