"""`kvreg apply capacity.xlsx`: read the inputs finance changed in a workbook back into the registry.

What is read is declared by EDITABLE below: per input sheet, the columns that name
a row and the columns that set a registry field. Columns are found by their names in the
sheet's hidden second row, so moving or hiding columns does not matter. Figures (formulas) are
never read; a cell of a formula column that holds a typed value instead is reported and not
applied. A workbook carries the registry's id and its quarter (document properties): one from
another registry, or written for another quarter than the one asked, is refused. Every change
is written in one transaction; a bad cell names itself and nothing is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import text

from kvreg.catalog.load import ensure_registry_id
from kvreg.db.read import runner
from kvreg.errors import KvregError
from kvreg.export.xlsx import CONVERTED, PROP_QUARTER, PROP_REGISTRY
from kvreg.fleet import set_fleet
from kvreg.units import current_quarter, parse_quarter

NAMES_ROW = 2
FIRST_ROW = 3
_MAX_SHARE = 1e6


@dataclass
class Change:
    sheet: str
    what: str  # plan, gpu, class
    key: tuple
    field: str  # the registry field
    column: str  # the workbook column
    old: Any
    new: Any
    where: str  # Sheet!B7
    added: bool = False  # a row the registry does not have yet (a new quarter of demand)

    def line(self) -> str:
        """`~ plan chat 2027Q1 users: 300 -> 900`, in the unit of the workbook's column (memory in GiB)."""
        name = " ".join(str(k) for k in self.key)
        old, new, column = self.old, self.new, self.column
        conv = CONVERTED.get(self.field)
        if conv is not None and column == conv.shown:
            old, new = conv.to_shown(old), conv.to_shown(new)
            column = column.removesuffix("_input")
        if self.added:
            return f"+ {self.what} {name} {column}: {_show(new)}"
        return f"~ {self.what} {name} {column}: {_show(old)} -> {_show(new)}"


@dataclass
class Result:
    quarter: str
    changes: list[Change] = field(default_factory=list)
    overwritten: list[str] = field(default_factory=list)  # formula cells holding typed values
    applied: bool = False

    def lines(self) -> list[str]:
        out = [c.line() for c in self.changes]
        out += [f"! {w}: a formula was replaced by a typed value; not applied (figures are computed)"
                for w in self.overwritten]
        if not self.changes:
            out.append("no input differs from the registry")
        elif self.applied:
            out.append(f"applied {len(self.changes)} change(s) in one transaction")
        else:
            out.append(f"dry run: {len(self.changes)} change(s), nothing written")
        return out


def _show(v: Any) -> str:
    if v is None:
        return "(blank)"
    if isinstance(v, float):
        return f"{v:g}" if abs(v) < 1e15 else f"{v:.6g}"
    return str(v)


# --------------------------------------------------------------------------- checks


def _number(value: Any, where: str, *, whole: bool, minimum: float, maximum: float | None = None,
            above: bool = False, blank: bool = False):
    if value is None or (isinstance(value, str) and not value.strip()):
        if blank:
            return None
        raise KvregError(f"{where} is blank: type a number")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise KvregError(f"{where} must be a number, not {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise KvregError(f"{where} must be a number, not {value!r}")
    if whole:
        if float(value) != int(value):
            raise KvregError(f"{where} must be a whole number, not {value!r}")
        value = int(value)
    if value < minimum or (above and value == minimum):
        raise KvregError(f"{where} must be {'above' if above else 'at least'} {minimum:g}, not {value!r}")
    if maximum is not None and value > maximum:
        raise KvregError(f"{where} must be at most {maximum:g}, not {value!r}")
    return value


CHECKS = {
    "users": lambda v, w: _number(v, w, whole=True, minimum=0, maximum=2**62),
    "count": lambda v, w: _number(v, w, whole=True, minimum=0, maximum=2**31 - 1),
    # A fleet count left blank is none of them: 0 (the registry's default).
    "count_or_zero": lambda v, w: _number(v, w, whole=True, minimum=0, maximum=2**31 - 1, blank=True) or 0,
    "reserve": lambda v, w: _number(v, w, whole=False, minimum=0, maximum=0.99),
    "share": lambda v, w: _number(v, w, whole=False, minimum=0, maximum=_MAX_SHARE, above=True),
    "tokens": lambda v, w: _number(v, w, whole=True, minimum=1, maximum=2**31 - 1),
    "price": lambda v, w: _number(v, w, whole=False, minimum=0, maximum=1e12, blank=True),
    "bytes": lambda v, w: _number(v, w, whole=True, minimum=1, maximum=2**62, above=False),
    "bytes_or_none": lambda v, w: _number(v, w, whole=True, minimum=1, maximum=2**62, blank=True),
}


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0)
    return a == b


# --------------------------------------------------------------------------- what is read back


@dataclass(frozen=True)
class Editable:
    """A sheet whose input columns `kvreg apply` reads back. `keys` are the columns naming a row
    and, for each, (SQL naming it in `table`'s rows, SQL matching it in a WHERE clause with the
    parameter of the same name); `columns` maps a workbook column to the registry field it sets,
    `convert` turns a cell into the registry's unit, `checks` a field's value into a valid one
    (CHECKS names). `insert`: SQL adding a row the registry lacks
    (parameters: the keys and the field), or None when such a row is refused.

    `write`: the registry's own writer for a field (the Fleet sheet's, kvreg.fleet.set_fleet)."""

    sheet: str
    what: str  # how a diff line names the row: "plan", "gpu", "class"
    table: str
    keys: dict[str, tuple[str, str]]
    columns: dict[str, str]  # workbook column -> registry field
    checks: dict[str, str]  # registry field -> check name
    convert: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    insert: str | None = None
    # write(conn, keys, field, value): set one field through the registry's own API (validation
    # included) instead of the plain UPDATE / insert; adds the row when it is missing.
    write: Callable[[Any, dict, str, Any], None] | None = None


def _write_fleet(conn, keys: dict, fld: str, value) -> None:
    """One fleet count or price from the workbook, through kvreg.fleet.set_fleet (its checks and
    its insert-or-update), keeping the entry's other fields."""
    rows = runner(conn).rows(
        "SELECT f.gpus_owned, f.gpus_reserved, f.reserved_price_per_hour FROM fleet f JOIN gpu g ON g.id = f.gpu_id"
        " WHERE g.name = :gpu AND f.quarter = :quarter", keys)
    current = rows[0] if rows else {"gpus_owned": 0, "gpus_reserved": 0, "reserved_price_per_hour": None}
    current[fld] = value
    set_fleet(conn, keys["gpu"], keys["quarter"], current["gpus_owned"], current["gpus_reserved"],
              current["reserved_price_per_hour"])


_PLAN_ID = "(SELECT id FROM plan WHERE name = :plan)"
EDITABLE = [
    Editable("Demand", "plan", "demand",
             {"plan": ("(SELECT name FROM plan WHERE plan.id = demand.plan_id)", f"plan_id = {_PLAN_ID}"),
              "quarter": ("quarter", "quarter = :quarter")},
             {"users": "users"}, {"users": "users"},
             insert=f"INSERT INTO demand (plan_id, quarter, users) VALUES ({_PLAN_ID}, :quarter, :users)"),
    Editable("Plan detail", "plan", "plan", {"plan": ("name", "name = :plan")},
             {"reserve": "reserve"}, {"reserve": "reserve"}),
    Editable("Workload", "class", "workload_class",
             {"plan": ("(SELECT name FROM plan WHERE plan.id = workload_class.plan_id)", f"plan_id = {_PLAN_ID}"),
              "workload_class": ("name", "name = :workload_class")},
             {"share": "share", "class_tokens": "avg_tokens"}, {"share": "share", "avg_tokens": "tokens"}),
    Editable("GPUs", "gpu", "gpu", {"gpu": ("name", "name = :gpu")},
             {"price_per_hour": "price_per_hour", "unit_price": "unit_price",
              "memory_gib_input": "memory_bytes", "memory_bandwidth_gb_per_s_input": "memory_bandwidth_bytes_per_s"},
             {"price_per_hour": "price", "unit_price": "price", "memory_bytes": "bytes",
              "memory_bandwidth_bytes_per_s": "bytes_or_none"},
             {"memory_gib_input": CONVERTED["memory_bytes"].to_registry,
              "memory_bandwidth_gb_per_s_input": CONVERTED["memory_bandwidth_bytes_per_s"].to_registry}),
    Editable("Fleet", "fleet", "fleet",
             {"gpu": ("(SELECT name FROM gpu WHERE gpu.id = fleet.gpu_id)", "gpu_id = (SELECT id FROM gpu WHERE name = :gpu)"),
              "quarter": ("quarter", "quarter = :quarter")},
             {"gpus_owned": "gpus_owned", "gpus_reserved": "gpus_reserved",
              "reserved_price_per_hour": "reserved_price_per_hour"},
             {"gpus_owned": "count_or_zero", "gpus_reserved": "count_or_zero", "reserved_price_per_hour": "price"},
             write=_write_fleet),
]



# --------------------------------------------------------------------------- reading


def _load(path: Path):
    # lazy: openpyxl loads only to read a workbook back (kvreg apply)
    from openpyxl import load_workbook

    if not path.exists():
        raise KvregError(f"{path}: no such file")
    try:
        return load_workbook(path, read_only=True, data_only=False)
    except Exception as exc:  # a zip or XML error: not a workbook
        raise KvregError(f"{path} is not an .xlsx workbook ({type(exc).__name__}): "
                         "give the capacity.xlsx kvreg report wrote") from None


def _identity(wb, path: Path) -> dict:
    props = {p.name: p.value for p in wb.custom_doc_props.props}
    if PROP_REGISTRY not in props or PROP_QUARTER not in props:
        raise KvregError(f"{path} was not written by kvreg report (it has no {PROP_REGISTRY} property): "
                         "apply the capacity.xlsx that `kvreg report --format xlsx` wrote")
    return {"registry": str(props[PROP_REGISTRY]), "quarter": str(props[PROP_QUARTER])}


def _rows(ws):
    """(names by column index, [(row number, values)]) of a table sheet."""
    names: dict[int, str] = {}
    data = []
    for r, row in enumerate(ws.iter_rows(values_only=True), start=1):
        if r == NAMES_ROW:
            names = {i: v for i, v in enumerate(row) if isinstance(v, str)}
        elif r >= FIRST_ROW and any(v is not None for v in row):
            data.append((r, row))
    return names, data


def _letter(i: int) -> str:
    # lazy: openpyxl loads only to read a workbook back (kvreg apply)
    from openpyxl.utils import get_column_letter

    return get_column_letter(i + 1)


def _overwritten(sheet: str, names: dict[int, str], data: list) -> list[str]:
    """Cells of formula columns (a column whose other cells hold formulas) that hold a typed value."""
    formula_cols = set()
    for _r, row in data:
        for i, v in enumerate(row):
            if isinstance(v, str) and v.startswith("="):
                formula_cols.add(i)
    out = []
    for r, row in data:
        for i in sorted(formula_cols):
            v = row[i] if i < len(row) else None
            if v is not None and not (isinstance(v, str) and v.startswith("=")):
                out.append(f"{sheet}!{_letter(i)}{r} ({names.get(i, '?')} = {_show(v)})")
    return out


def read_changes(conn, path: str | Path, quarter: str | None = None) -> Result:
    """Compare a workbook's inputs with the registry; nothing is written."""
    path = Path(path)
    wb = _load(path)
    try:
        ident = _identity(wb, path)
        ours = ensure_registry_id(conn)
        if ident["registry"] != ours:
            raise KvregError(f"{path} was written from another registry (id {ident['registry'][:12]}, this one is "
                             f"{ours[:12]}): apply it to the registry it came from")
        want = parse_quarter(quarter) if quarter else current_quarter()
        if ident["quarter"] != want:
            raise KvregError(f"{path} was written for {ident['quarter']}, not {want}: pass --quarter "
                             f"{ident['quarter']} to apply it, or write a new workbook for {want}")
        result = Result(ident["quarter"])
        for ed in EDITABLE:
            if ed.sheet not in wb.sheetnames:
                raise KvregError(f"{path} has no sheet {ed.sheet!r}: apply the workbook as kvreg wrote it")
            names, data = _rows(wb[ed.sheet])
            result.overwritten += _overwritten(ed.sheet, names, data)
            result.changes += _sheet_changes(conn, ed, names, data)
        for sheet in wb.sheetnames:
            # free-form sheets (no table of named columns); Plan cards only shows Plan detail's cells
            if sheet not in {ed.sheet for ed in EDITABLE} and sheet not in ("Read me", "Summary", "Plan cards",
                                                                              "Assumptions"):
                names, data = _rows(wb[sheet])
                result.overwritten += _overwritten(sheet, names, data)
        return result
    finally:
        wb.close()


def _sheet_changes(conn, ed, names: dict[int, str], data: list) -> list[Change]:
    index = {n: i for i, n in reversed(list(names.items()))}  # the first column of a name
    missing = [n for n in (*ed.keys, *ed.columns) if n not in index]
    if missing:
        raise KvregError(f"sheet {ed.sheet} has no column {', '.join(missing)} (row {NAMES_ROW} names the columns): "
                         "apply the workbook as kvreg wrote it")
    fields = ", ".join(sorted(set(ed.columns.values())))
    keys_sql = ", ".join(f"{sel} AS k_{k}" for k, (sel, _w) in ed.keys.items())
    current = {tuple(r[f"k_{k}"] for k in ed.keys): dict(r)
               for r in conn.execute(text(f"SELECT {keys_sql}, {fields} FROM {ed.table}")).mappings()}
    out, seen = [], set()
    for r, row in data:
        key = tuple(row[index[k]] if index[k] < len(row) else None for k in ed.keys)
        if any(k is None for k in key):
            continue
        key = tuple(str(k) for k in key)
        where_row = f"{ed.sheet} row {r} ({' '.join(key)})"
        if key in seen:
            raise KvregError(f"{where_row} repeats a row above: keep one row per {', '.join(ed.keys)}")
        seen.add(key)
        have = current.get(key)
        if have is None and ed.insert is None and ed.write is None:
            raise KvregError(f"{where_row}: no {ed.what} {' '.join(key)} in the registry (add it with kvreg first; "
                             "apply changes values, it does not add rows here)")
        if have is None and ed.keys.get("plan"):
            if not conn.execute(text("SELECT 1 FROM plan WHERE name = :p"), {"p": key[0]}).first():
                raise KvregError(f"{where_row}: no plan {key[0]} in the registry (add it with kvreg plan add first)")
        for column, fld in ed.columns.items():
            i = index[column]
            raw = row[i] if i < len(row) else None
            where = f"{ed.sheet}!{_letter(i)}{r} ({column})"
            if isinstance(raw, str) and raw.startswith("="):
                raise KvregError(f"{where} holds a formula ({raw[:40]}): type a value in an input cell")
            value = ed.convert[column](raw) if column in ed.convert and isinstance(raw, (int, float)) else raw
            value = CHECKS[ed.checks[fld]](value, where)
            old = have.get(fld) if have else None
            if have is not None and _same(old, value):
                continue
            out.append(Change(ed.sheet, ed.what, key, fld, column, old, value, where, added=have is None))
    return out


# --------------------------------------------------------------------------- writing


def apply_workbook(engine, path: str | Path, *, quarter: str | None = None, dry_run: bool = False) -> Result:
    """Read the changes and, unless `dry_run`, write them in one transaction."""
    by_sheet = {ed.sheet: ed for ed in EDITABLE}
    with engine.begin() as conn:
        result = read_changes(conn, path, quarter)
        if dry_run or not result.changes:
            return result
        for c in result.changes:
            ed = by_sheet[c.sheet]
            params = dict(zip(ed.keys, c.key))
            params[c.field] = c.new
            if ed.write is not None:
                ed.write(conn, dict(zip(ed.keys, c.key)), c.field, c.new)
            elif c.added:
                conn.execute(text(ed.insert), params)
            else:
                where = " AND ".join(w for _sel, w in ed.keys.values())
                conn.execute(text(f"UPDATE {ed.table} SET {c.field} = :{c.field} WHERE {where}"), params)
        result.applied = True
    return result
