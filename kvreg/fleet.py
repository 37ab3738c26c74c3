"""The installed fleet, carry-forward listings, the procurement rollup and its horizon.

A fleet entry says how many GPUs of one type are installed from a quarter on: owned, and
committed (reserved) cloud capacity with its own price per GPU-hour. Like demand, an entry holds
until the next entry of the same GPU type. What to buy is declared once
(kvreg.figures.declarations.AGGREGATES) and read here from the `procurement` view, or, for a
horizon of given quarters, from the same compiled query over those quarters.
"""

from __future__ import annotations

import math

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from kvreg.db.tables import Fleet
from kvreg.errors import KvregError
from kvreg.figures.aggregates import (
    AGGREGATE_COLUMNS, aggregate_sql, in_force_sql, index_of_quarter, quarter_of_index, quarters_sql,
)
from kvreg.registry import check_int, get_gpu
from kvreg.units import parse_quarter

# Horizons longer than this are refused: 10 years of quarters is far past any purchase plan.
MAX_HORIZON_QUARTERS = 40
FLEET_COLUMNS = ["gpu", "quarter", "gpus_owned", "gpus_reserved", "reserved_price_per_hour", "carried_from",
                 "until_quarter"]


def check_price(value, field: str):
    """A non-negative finite price, or None."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise KvregError(f"{field} must be a number of USD, not {value!r}") from None
    if not math.isfinite(v) or v < 0:
        raise KvregError(f"{field} must be a finite number of USD, at least 0, not {value!r}")
    return v


def validate_fleet(conn, gpu: str, quarter: str, owned, reserved=None, reserved_price=None) -> dict:
    """A fleet row ready to write: the GPU's id, the quarter normalised, counts checked."""
    g = get_gpu(conn, gpu)
    return dict(gpu_id=g["id"], gpu=g["name"], quarter=parse_quarter(quarter),
                gpus_owned=check_int(owned, "gpus_owned", minimum=0),
                gpus_reserved=check_int(0 if reserved in (None, "") else reserved, "gpus_reserved", minimum=0),
                reserved_price_per_hour=check_price(reserved_price, "reserved_price_per_hour"))


def _existing(conn, gpu_id: int, quarter: str):
    return conn.execute(select(Fleet.id, Fleet.gpus_owned, Fleet.gpus_reserved, Fleet.reserved_price_per_hour)
                        .where(Fleet.gpu_id == gpu_id, Fleet.quarter == quarter)).first()


def write_fleet(conn, row: dict) -> str:
    """Add or change one validated fleet entry: 'added', 'changed' or 'unchanged'."""
    values = {k: row[k] for k in ("gpus_owned", "gpus_reserved", "reserved_price_per_hour")}
    old = _existing(conn, row["gpu_id"], row["quarter"])
    try:
        if old is None:
            conn.execute(insert(Fleet).values(gpu_id=row["gpu_id"], quarter=row["quarter"], **values))
            return "added"
        if tuple(old[1:]) == tuple(values.values()):
            return "unchanged"
        conn.execute(update(Fleet).where(Fleet.id == old[0]).values(**values))
        return "changed"
    except IntegrityError:  # another writer set the same quarter between our read and write
        raise KvregError(f"the fleet of {row['gpu']} in {row['quarter']} was changed by someone else meanwhile: "
                         "run it again") from None


def set_fleet(conn, gpu: str, quarter: str, owned, reserved=None, reserved_price=None) -> dict:
    """Set the GPUs installed of one type from a quarter on; returns the row as stored and what happened."""
    row = validate_fleet(conn, gpu, quarter, owned, reserved, reserved_price)
    return {**row, "action": write_fleet(conn, row)}


def remove_fleet(conn, gpu: str, quarter: str) -> None:
    """Remove one fleet entry (the previous entry then holds on); a quarter without one is an error."""
    g = get_gpu(conn, gpu)
    quarter = parse_quarter(quarter)
    gone = conn.execute(delete(Fleet).where(Fleet.gpu_id == g["id"], Fleet.quarter == quarter)).rowcount
    if not gone:
        raise KvregError(f"{g['name']} has no fleet entry in {quarter}: see `kvreg fleet list --gpu {g['name']}`")


def in_force(conn, view: str, quarter: str | None, where: list[str], params: dict, order: str,
             live: str = "") -> list[dict]:
    """Rows of a view of entries (plan_quarter, fleet_quarter). Without a quarter: every entry. With
    one: the entries in force in it (carry-forward), each shown in that quarter with `carried_from`
    naming the quarter it was set in when that is an earlier one. `live`: a condition a carried
    entry must meet (demand: users > 0, since 0 ends a plan's demand)."""
    where = list(where)
    if quarter is not None:
        q = parse_quarter(quarter)
        where.append(in_force_sql("e", str(index_of_quarter(q))))
        if live:
            where.append(f"({live} OR e.quarter = :q_asked)")
        params = {**params, "q_asked": q}
    sql = f"SELECT e.* FROM {view} e" + (" WHERE " + " AND ".join(where) if where else "") + f" ORDER BY {order}"
    rows = []
    for r in conn.execute(text(sql), params).mappings():
        row = dict(r)
        row["carried_from"] = None
        if quarter is not None and row["quarter"] != q:
            row["carried_from"] = row["quarter"]
            row["quarter"] = q
        rows.append(row)
    return rows


def list_fleet(conn, gpu: str | None = None, quarter: str | None = None) -> list[dict]:
    """fleet_quarter rows by GPU type and quarter: every entry, or those in force in `quarter`."""
    where, params = [], {}
    if gpu is not None:
        params["gpu"] = get_gpu(conn, gpu)["name"]
        where.append("e.gpu = :gpu")
    rows = in_force(conn, "fleet_quarter", quarter, where, params, "e.gpu, e.quarter")
    return [{k: r.get(k) for k in FLEET_COLUMNS} for r in rows]


# --------------------------------------------------------------------------- rollup


def horizon_quarters(start: str, count) -> list[str]:
    first = index_of_quarter(parse_quarter(start))
    n = check_int(count, "quarters", minimum=1)
    if n > MAX_HORIZON_QUARTERS:
        raise KvregError(f"--quarters {n} is too long a horizon: at most {MAX_HORIZON_QUARTERS}")
    return [quarter_of_index(first + i) for i in range(n)]


def rollup(conn, quarter: str | None = None, start: str | None = None, quarters=None) -> list[dict]:
    """What to buy per GPU type and quarter (the declared aggregates).

    No arguments: the `procurement` view, every quarter with an entry. `quarter`: that one quarter
    (entries carried forward into it). `start` and `quarters`: a horizon of consecutive quarters,
    every GPU type with demand or fleet in each, zeros included."""
    if start is not None or quarters is not None:
        if quarter is not None:
            raise KvregError("give --quarter or --from/--quarters, not both")
        if start is None:
            raise KvregError("--quarters needs --from: the first quarter of the horizon (2026Q4)")
        axis = horizon_quarters(start, quarters or 4)
        sql = aggregate_sql(quarters_sql(axis), conn.dialect.name)
        rows = [dict(r) for r in conn.execute(text(sql)).mappings()]
    elif quarter is not None:
        sql = aggregate_sql(quarters_sql([parse_quarter(quarter)]), conn.dialect.name, only_active=True)
        rows = [dict(r) for r in conn.execute(text(sql)).mappings()]
    else:
        rows = [dict(r) for r in conn.execute(text("SELECT * FROM procurement")).mappings()]
    rows.sort(key=lambda r: (r["quarter"], r["gpu"]))
    return [{k: r[k] for k in ["gpu", "quarter", *AGGREGATE_COLUMNS]} for r in rows]


HORIZON_FIGURES = ["gpus_needed", "gpus_installed", "gpus_to_buy", "capex_to_buy", "gpus_spare"]


def horizon_table(rows: list[dict]) -> tuple[list[str], list[dict]]:
    """The horizon side by side: one row per GPU type and figure, one column per quarter, and the
    quarter the first purchase must land in (the first quarter with GPUs to buy)."""
    quarters = sorted({r["quarter"] for r in rows})
    by = {(r["gpu"], r["quarter"]): r for r in rows}
    out = []
    for gpu in sorted({r["gpu"] for r in rows}):
        first_buy = next((q for q in quarters if by.get((gpu, q), {}).get("gpus_to_buy")), None)
        for name in HORIZON_FIGURES:
            row = {"gpu": gpu, "figure": name}
            row.update({q: (by.get((gpu, q)) or {}).get(name) for q in quarters})
            row["first_purchase_lands_by"] = (first_buy or "none") if name == "gpus_to_buy" else ""
            out.append(row)
    return ["gpu", "figure", *quarters, "first_purchase_lands_by"], out
