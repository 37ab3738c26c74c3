"""Demand and fleet as CSV: import (all rows or none, reviewed with a diff first) and export.

demand.csv: `plan,quarter,users`; fleet.csv: `gpu,quarter,gpus_owned[,gpus_reserved,reserved_price_per_hour]`.
An export writes exactly what an import reads, so a file round-trips. Every row is checked before
anything is written; the first bad row is named by its line number and nothing is written.
"""

from __future__ import annotations

import csv
import io

from sqlalchemy import bindparam, insert, select, update

from kvreg.app.fleet import validate_fleet, write_fleet
from kvreg.app.registry import check_int
from kvreg.core.errors import KvregError
from kvreg.core.units import parse_quarter
from kvreg.db.tables import Demand, Fleet, Gpu, Plan

DEMAND_HEADER = ["plan", "quarter", "users"]
FLEET_HEADER = ["gpu", "quarter", "gpus_owned", "gpus_reserved", "reserved_price_per_hour"]
_REQUIRED = {"demand": DEMAND_HEADER, "fleet": FLEET_HEADER[:3]}
MAX_ROWS = 1_000_000


def read_rows(data: str, kind: str, source: str) -> list[tuple[int, dict]]:
    """(line number, row) of a CSV text whose header names the columns (any order; extra columns refused)."""
    if data.startswith("\ufeff"):  # a byte-order mark, as spreadsheet programs write
        data = data[1:]
    reader = csv.reader(io.StringIO(data))
    try:
        header = next(reader)
    except StopIteration:
        raise KvregError(f"{source} is empty: its first line must be the header {','.join(_REQUIRED[kind])}") from None
    except csv.Error as exc:
        raise _csv_error(source, reader, exc) from None
    header = [h.strip() for h in header]
    allowed = DEMAND_HEADER if kind == "demand" else FLEET_HEADER
    missing = [c for c in _REQUIRED[kind] if c not in header]
    extra = [c for c in header if c not in allowed]
    if missing or extra:
        raise KvregError(f"{source} line 1: the header must name {','.join(_REQUIRED[kind])}"
                         + ("" if kind == "demand" else " (and optionally gpus_reserved,reserved_price_per_hour)")
                         + f"; {'missing ' + ','.join(missing) if missing else 'unknown column ' + ','.join(extra)}")
    if len(set(header)) != len(header):
        raise KvregError(f"{source} line 1: a column is named twice")
    out = []
    try:
        return _rows(reader, header, source, out)
    except csv.Error as exc:
        raise _csv_error(source, reader, exc) from None


def _csv_error(source: str, reader, exc: csv.Error) -> KvregError:
    """The csv module's own errors (a field over its 131,072-character limit, a NUL) in one line."""
    if "field larger than field limit" in str(exc):
        return KvregError(f"{source} line {reader.line_num}: a field is longer than {csv.field_size_limit():,} "
                          "characters: no plan, GPU, quarter or count is; check the quotes on that line")
    return KvregError(f"{source} line {reader.line_num}: not valid CSV ({exc})")


def _rows(reader, header: list[str], source: str, out: list) -> list[tuple[int, dict]]:
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise KvregError(f"{source} line {line}: {len(row)} fields where the header has {len(header)}")
        out.append((line, dict(zip(header, (cell.strip() for cell in row)))))
        if len(out) > MAX_ROWS:
            raise KvregError(f"{source} has more than {MAX_ROWS:,} rows: split it")
    return out


def _at(source: str, line: int, exc: Exception) -> KvregError:
    return KvregError(f"{source} line {line}: {exc}")


def import_demand(conn, data: str, source: str = "demand.csv", *, dry_run: bool = False) -> list[dict]:
    """Set every row's demand in one go; returns the diff (action added/changed/unchanged with the old
    and new users). A bad row raises naming its line, before anything is written; dry_run writes nothing."""
    rows = read_rows(data, "demand", source)
    plans = dict(conn.execute(select(Plan.name, Plan.id)).all())
    current = {(p, q): u for p, q, u in conn.execute(select(Plan.name, Demand.quarter, Demand.users)
                                                      .join(Plan, Plan.id == Demand.plan_id)).all()}
    seen: dict = {}
    diff = []
    for line, r in rows:
        try:
            if r["plan"] not in plans:
                raise KvregError(f"no plan named {r['plan']!r}: see `kvreg plan list`")
            q = parse_quarter(r["quarter"])
            users = check_int(r["users"], "users", minimum=0)
        except Exception as exc:  # noqa: BLE001 - every check's message, with the line
            raise _at(source, line, exc) from None
        key = (r["plan"], q)
        if key in seen:
            raise KvregError(f"{source} line {line}: {r['plan']} {q} is already set on line {seen[key]}")
        seen[key] = line
        old = current.get(key)
        action = "added" if old is None else "unchanged" if old == users else "changed"
        diff.append(dict(line=line, action=action, plan=r["plan"], quarter=q, old_users=old, users=users))
    if not dry_run:
        _write_demand(conn, plans, diff)
    return diff


def _write_demand(conn, plans: dict, diff: list[dict]) -> None:
    adds = [dict(plan_id=plans[d["plan"]], quarter=d["quarter"], users=d["users"]) for d in diff
            if d["action"] == "added"]
    changes = [dict(p=plans[d["plan"]], q=d["quarter"], u=d["users"]) for d in diff if d["action"] == "changed"]
    if adds:
        conn.execute(insert(Demand), adds)
    if changes:
        conn.execute(update(Demand).where(Demand.plan_id == bindparam("p"), Demand.quarter == bindparam("q"))
                     .values(users=bindparam("u")), changes)


def import_fleet(conn, data: str, source: str = "fleet.csv", *, dry_run: bool = False) -> list[dict]:
    """Set every row's fleet entry in one go; returns the diff. All rows or none, as import_demand."""
    rows = read_rows(data, "fleet", source)
    current = {(g, q): (o, r, p) for g, q, o, r, p in conn.execute(
        select(Gpu.name, Fleet.quarter, Fleet.gpus_owned, Fleet.gpus_reserved, Fleet.reserved_price_per_hour)
        .join(Gpu, Gpu.id == Fleet.gpu_id)).all()}
    seen: dict = {}
    diff, valid = [], []
    for line, r in rows:
        try:
            v = validate_fleet(conn, r["gpu"], r["quarter"], r["gpus_owned"], r.get("gpus_reserved"),
                               r.get("reserved_price_per_hour"))
        except Exception as exc:  # noqa: BLE001
            raise _at(source, line, exc) from None
        key = (v["gpu"], v["quarter"])
        if key in seen:
            raise KvregError(f"{source} line {line}: {v['gpu']} {v['quarter']} is already set on line {seen[key]}")
        seen[key] = line
        new = (v["gpus_owned"], v["gpus_reserved"], v["reserved_price_per_hour"])
        old = current.get(key)
        action = "added" if old is None else "unchanged" if old == new else "changed"
        diff.append(dict(line=line, action=action, gpu=v["gpu"], quarter=v["quarter"],
                         old_gpus_owned=old[0] if old else None, gpus_owned=new[0],
                         old_gpus_reserved=old[1] if old else None, gpus_reserved=new[1],
                         old_reserved_price_per_hour=old[2] if old else None, reserved_price_per_hour=new[2]))
        valid.append(v)
    if not dry_run:
        for v, d in zip(valid, diff):
            if d["action"] != "unchanged":
                write_fleet(conn, v)
    return diff


def _csv(header: list[str], rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow(["" if v is None else v for v in r])
    return buf.getvalue()


def export_demand(conn) -> str:
    """Every demand entry as demand.csv, by plan then quarter."""
    rows = conn.execute(select(Plan.name, Demand.quarter, Demand.users).join(Plan, Plan.id == Demand.plan_id)
                        .order_by(Plan.name, Demand.quarter)).all()
    return _csv(DEMAND_HEADER, rows)


def export_fleet(conn) -> str:
    """Every fleet entry as fleet.csv, by GPU type then quarter."""
    rows = conn.execute(select(Gpu.name, Fleet.quarter, Fleet.gpus_owned, Fleet.gpus_reserved,
                               Fleet.reserved_price_per_hour).join(Gpu, Gpu.id == Fleet.gpu_id)
                        .order_by(Gpu.name, Fleet.quarter)).all()
    return _csv(FLEET_HEADER, [(g, q, o, r, _price(p)) for g, q, o, r, p in rows])


def _price(p):
    return None if p is None else (int(p) if float(p).is_integer() else p)
