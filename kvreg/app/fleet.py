"""The installed fleet, carry-forward listings, the procurement rollup and its horizon.

A fleet entry says how many GPUs of one type are installed from a quarter on: owned, and
committed (reserved) cloud capacity with its own price per GPU-hour. Like demand, an entry holds
until the next entry of the same GPU type. What to buy is declared once
(kvreg.figures.declarations.AGGREGATES) and read by kvreg.db.read from the `procurement` view, or,
for a horizon of given quarters, from the same compiled query over those quarters.
"""

from __future__ import annotations

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from kvreg.app.registry import check_input, check_int, get_gpu
from kvreg.core.errors import KvregError
from kvreg.core.units import parse_quarter
from kvreg.db.tables import Fleet


def check_price(value, field: str):
    """A non-negative finite price up to its declared maximum, or None (kvreg.app.registry.check_input)."""
    return check_input(field, value)


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


# --------------------------------------------------------------------------- rollup


HORIZON_FIGURES = ["gpus_needed", "gpus_installed", "gpus_bought", "gpus_to_buy", "capex_to_buy", "order_by",
                   "driving_plans"]


def horizon_table(rows: list[dict]) -> tuple[list[str], list[dict]]:
    """The horizon side by side: one row per GPU type and figure, one column per quarter, the
    figures of kvreg.db.read.purchase_schedule's rows (order_by flagged LATE when it is before the
    horizon's first quarter)."""
    quarters = sorted({r["quarter"] for r in rows})
    by = {(r["gpu"], r["quarter"]): r for r in rows}
    out = []
    for gpu in sorted({r["gpu"] for r in rows}):
        for name in HORIZON_FIGURES:
            row = {"gpu": gpu, "figure": name}
            for q in quarters:
                r = by.get((gpu, q)) or {}
                v = r.get(name)
                if name == "order_by" and v and r.get("order_late"):
                    v = f"{v} LATE"
                row[q] = v
            out.append(row)
    return ["gpu", "figure", *quarters], out
