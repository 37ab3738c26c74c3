"""`kvreg apply capacity.xlsx`: read the inputs finance changed in a workbook back into the registry.

What is read is declared by EDITABLE below: per input sheet, the columns that name a row and the
columns that set a registry field, and the registry's own writer for the row. Columns are found by
their names in the sheet's hidden second row, so moving or hiding columns does not matter. Figures
(formulas) are never read; a cell of a formula column that holds a typed value instead is reported
and not applied.

A workbook carries the registry's id and its quarter (document properties) and the state it was
made from (the very hidden sheet kvreg.export.xlsx.STATE_SHEET: every input cell as written). Only
the cells finance changed relative to that state are applied: a value the registry changed since
stays, and a cell changed on both sides is a conflict, listed, and nothing is written until the user
takes a side (`take="workbook"` or `"registry"`).

The workbook is read whole, within kvreg.core.limits.check_workbook's limits, before the registry is
touched; every value then goes through the writer the CLI uses (kvreg.app.plans.set_demand,
set_plan, kvreg.app.registry.add_gpu, kvreg.app.fleet.set_fleet), in one short transaction; a bad cell
names itself and nothing is written. A dry run runs the same writers and rolls back.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import text

from kvreg.app.fleet import set_fleet
from kvreg.app.plans import LATENCY_FIELDS, PLAN_WORKLOAD, get_workload, set_demand, set_plan
from kvreg.app.registry import GPU_SETTABLE, add_gpu
from kvreg.catalog.load import ensure_registry_id
from kvreg.core.errors import KvregError, UserError
from kvreg.core.limits import check_workbook, show_path
from kvreg.core.units import UnitError, current_quarter, parse_quarter
from kvreg.db.read import get_gpu, get_plan
from kvreg.db.tables import SQLModel
from kvreg.export.xlsx import CONVERTED, PROP_FORMAT, PROP_QUARTER, PROP_REGISTRY, STATE_SHEET, WORKBOOK_FORMAT

NAMES_ROW = 2
FIRST_ROW = 3
TAKES = ("workbook", "registry")


@dataclass
class Change:
    sheet: str
    what: str  # plan, gpu, class, fleet
    key: tuple
    field: str  # the registry field
    column: str  # the workbook column
    old: Any  # the registry's value now (registry unit)
    new: Any  # the workbook's (registry unit)
    where: str  # Sheet!B7 (column)
    added: bool = False  # a row the registry does not have yet (a new quarter of demand)

    def _shown(self, value):
        conv = CONVERTED.get(self.field)
        if conv is not None and self.column == conv.shown and isinstance(value, (int, float)):
            return _show(conv.to_shown(value))
        return _show(value)

    @property
    def label(self) -> str:
        conv = CONVERTED.get(self.field)
        column = self.column.removesuffix("_input") if conv is not None and self.column == conv.shown else self.column
        return f"{self.what} {' '.join(str(k) for k in self.key)} {column}"

    def line(self) -> str:
        """`~ plan chat 2027Q1 users: 300 -> 900`, in the unit of the workbook's column (memory in GiB)."""
        if self.added:
            return f"+ {self.label}: {self._shown(self.new)}"
        return f"~ {self.label}: {self._shown(self.old)} -> {self._shown(self.new)}"


@dataclass
class Conflict:
    """A cell finance changed whose registry value changed too since the workbook was written."""

    change: Change
    base: Any  # the value when the workbook was written (registry unit; None: the row was not there)
    base_row: bool  # the workbook was written with this row

    def line(self) -> str:
        c = self.change
        now = "no such row" if c.added else c._shown(c.old)
        was = c._shown(self.base) if self.base_row else "no such row"
        return (f"x {c.label}: workbook {c._shown(c.new)}, registry {now}, both changed since the workbook was "
                f"written ({was}) [{c.where}]")


@dataclass
class Result:
    quarter: str
    changes: list[Change] = field(default_factory=list)  # what is (or would be) written
    conflicts: list[Conflict] = field(default_factory=list)
    kept: list[Change] = field(default_factory=list)  # conflicts settled for the registry (take="registry")
    overwritten: list[str] = field(default_factory=list)  # formula cells holding typed values
    unread: list[str] = field(default_factory=list)  # changed input cells apply does not read back
    take: str | None = None
    applied: bool = False

    @property
    def unresolved(self) -> bool:
        return bool(self.conflicts) and self.take is None

    def lines(self) -> list[str]:
        out = [c.line() for c in self.changes]
        if self.take == "registry":
            out += [f"= {c.label}: kept the registry's {c._shown(c.old)} (--take registry)" for c in self.kept]
        out += [c.line() for c in self.conflicts if self.unresolved]
        out += [f"! {w}: a formula was replaced by a typed value; not applied (figures are computed)"
                for w in self.overwritten]
        out += [f"! {w}: not applied (`kvreg apply` does not read this input back; change it with kvreg itself)"
                for w in self.unread]
        if self.unresolved:
            out.append(f"{len(self.conflicts)} conflict(s): changed in the workbook and in the registry since it was "
                       "written; nothing written: pick a side with --take workbook or --take registry")
        elif not self.changes:
            out.append("nothing to apply: every input is as written or as the registry holds it")
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


def _brief(v: Any) -> str:
    """A cell as a line shows it: text over 40 characters cut to its first 37 and '...'."""
    shown = _show(v)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0)
    return a == b


# --------------------------------------------------------------------------- what is read back


def _write_demand(conn, key: dict, values: dict) -> None:
    set_demand(conn, key["plan"], key["quarter"], values["users"])


def _write_plan(conn, key: dict, values: dict) -> None:
    """A plan's reserve and workload inputs (request lengths, targets, any workload input declared since) as Plan
    detail gives them."""
    set_plan(conn, key["plan"], values)


def _write_classes(conn, plan: str, rows: dict[str, dict]) -> None:
    """A plan's workload mix with the changed classes' tokens and shares, through set_plan."""
    classes = get_workload(conn, get_plan(conn, plan)["id"])
    for c in classes:
        c.update(rows.get(c["class"], {}))
    set_plan(conn, plan, {"workload": classes})


def _write_gpu(conn, key: dict, values: dict) -> None:
    add_gpu(conn, {**get_gpu(conn, key["gpu"]), **values}, replace=True)


def _write_fleet(conn, key: dict, values: dict) -> None:
    set_fleet(conn, key["gpu"], key["quarter"], values["gpus_owned"], values["gpus_reserved"],
              values["reserved_price_per_hour"])


@dataclass(frozen=True)
class Editable:
    """A sheet whose input columns `kvreg apply` reads back. `keys` are the columns naming a row and,
    for each, the SQL naming it in `table`'s rows; `columns` maps a workbook column to the registry
    field it sets, `convert` turns a cell into the registry's unit. `write(conn, keys, values)` is the
    registry's own writer for one row (its validation included), given every field of `columns`
    (the changed ones from the workbook, the others as the registry has them); it adds the row when
    `adds` and the registry lacks it. Workload's writer takes a plan's changed classes at once."""

    sheet: str
    what: str  # how a diff line names the row: "plan", "gpu", "class", "fleet"
    table: str
    keys: dict[str, str]
    columns: dict[str, str]  # workbook column -> registry field
    write: Callable
    convert: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    adds: bool = False
    blank_is_zero: tuple[str, ...] = ()  # columns whose blank cell means 0
    quarter_keys: tuple[str, ...] = ()  # key columns holding a quarter


EDITABLE = [
    Editable("Demand", "plan", "demand",
             {"plan": "(SELECT name FROM plan WHERE plan.id = demand.plan_id)", "quarter": "quarter"},
             {"users": "users"}, _write_demand, adds=True, quarter_keys=("quarter",)),
    # A plan's reserve and its workload inputs (PLAN_WORKLOAD: request lengths, targets, any declared since).
    Editable("Plan detail", "plan", "plan", {"plan": "name"},
             {"reserve": "reserve", **{f: f for f in PLAN_WORKLOAD}}, _write_plan),
    Editable("Workload", "class", "workload_class",
             {"plan": "(SELECT name FROM plan WHERE plan.id = workload_class.plan_id)", "workload_class": "name"},
             {"share": "share", "class_tokens": "avg_tokens", **{f"class_{f}": f for f in LATENCY_FIELDS}},
             _write_classes),
    # A GPU's prices and its memory and bandwidth (typed in GiB and GB/s), then whatever else `kvreg gpu set` may
    # change (GPU_SETTABLE: lead time, GPUs per node, dense FLOP/s, any GPU input declared since).
    Editable("GPUs", "gpu", "gpu", {"gpu": "name"},
             {"price_per_hour": "price_per_hour", "unit_price": "unit_price",
              "memory_gib_input": "memory_bytes", "memory_bandwidth_gb_per_s_input": "memory_bandwidth_bytes_per_s",
              **{n: n for n in GPU_SETTABLE if n not in ("price_per_hour", "unit_price")}},
             _write_gpu,
             convert={"memory_gib_input": CONVERTED["memory_bytes"].to_registry,
                      "memory_bandwidth_gb_per_s_input": CONVERTED["memory_bandwidth_bytes_per_s"].to_registry}),
    Editable("Fleet", "fleet", "fleet",
             {"gpu": "(SELECT name FROM gpu WHERE gpu.id = fleet.gpu_id)", "quarter": "quarter"},
             {"gpus_owned": "gpus_owned", "gpus_reserved": "gpus_reserved",
              "reserved_price_per_hour": "reserved_price_per_hour"},
             _write_fleet, adds=True, blank_is_zero=("gpus_owned", "gpus_reserved"), quarter_keys=("quarter",)),
]
# Free-form sheets (no table of named columns); Plan cards only shows Plan detail's and Plans' cells.
_SKIPPED = ("Read me", "Summary", "Plan cards", "Assumptions", STATE_SHEET)


# --------------------------------------------------------------------------- reading the workbook


@dataclass
class Row:
    number: int
    key: tuple
    values: dict[str, Any]  # workbook column -> value in the registry's unit
    cells: dict[str, str]  # workbook column -> "Sheet!C7 (users)"


@dataclass
class Book:
    """What a workbook says, read whole before the registry is opened."""

    path: str
    registry: str
    quarter: str
    rows: dict[str, list[Row]]  # sheet -> rows with a full key
    state: dict[str, dict[tuple, dict]]  # sheet -> key -> {workbook column: value (registry unit)}
    overwritten: list[str]
    unread: list[str] = field(default_factory=list)  # "Plan detail!F5 (tp: 1 -> 2)": changed, not read back


def _letter(i: int) -> str:
    # lazy: openpyxl loads only to read a workbook back (kvreg apply)
    from openpyxl.utils import get_column_letter

    return get_column_letter(i + 1)


def _load(path: Path):
    # lazy: openpyxl loads only to read a workbook back (kvreg apply)
    from openpyxl import load_workbook

    where = show_path(path)
    if not path.exists():
        raise KvregError(f"{where}: no such file")
    check_workbook(path)
    try:
        return load_workbook(path, read_only=True, data_only=False)
    except Exception as exc:  # a zip or XML error: not a workbook
        raise KvregError(f"{where} is not an .xlsx workbook ({type(exc).__name__}): "
                         "give the capacity.xlsx kvreg report wrote") from None


def _identity(wb, where: str) -> dict:
    props = {p.name: p.value for p in wb.custom_doc_props.props}
    if PROP_REGISTRY not in props or PROP_QUARTER not in props:
        raise KvregError(f"{where} was not written by kvreg report (it has no {PROP_REGISTRY} property): "
                         "apply the capacity.xlsx that `kvreg report --format xlsx` wrote")
    fmt = str(props.get(PROP_FORMAT, ""))
    if fmt != WORKBOOK_FORMAT or STATE_SHEET not in wb.sheetnames:
        older = fmt.isdigit() and int(fmt) < int(WORKBOOK_FORMAT)
        raise KvregError(
            f"{where} was written by {'an older' if older else 'another'} kvreg (workbook format {fmt or '?'}, this "
            f"kvreg reads {WORKBOOK_FORMAT}){' that did not record the registry state it was made from' if older else ''}"
            ": write a new workbook with `kvreg report --format xlsx`, make the edits there and apply that")
    return {"registry": str(props[PROP_REGISTRY]), "quarter": str(props[PROP_QUARTER])}


def _rows(ws):
    """(names by column index, [(row number, values)]) of a table sheet."""
    ws.reset_dimensions()  # the declared dimension is not trusted (A1:XFD1048576): read the cells there are
    names: dict[int, str] = {}
    data = []
    for r, cells in enumerate(ws.iter_rows(), start=1):
        # a formula by the cell's type, not its text: a name kvreg stored as text may begin with "=" (=SUM(1,2))
        row = tuple(Formula(c.value) if c.data_type == "f" else c.value for c in cells)
        if r == NAMES_ROW:
            names = {i: v for i, v in enumerate(row) if isinstance(v, str) and not isinstance(v, Formula)}
        elif r >= FIRST_ROW and any(v is not None for v in row):
            data.append((r, row))
    return names, data


class Formula(str):
    """A cell's formula text (=SUMIFS(...)), apart from text that merely begins with '='."""


def _is_formula(v: Any) -> bool:
    return isinstance(v, Formula)


def _overwritten(sheet: str, names: dict[int, str], data: list) -> list[str]:
    """Cells of formula columns (a column whose other cells hold formulas) that hold a typed value."""
    formula_cols = {i for _r, row in data for i, v in enumerate(row) if _is_formula(v)}
    out = []
    for r, row in data:
        for i in sorted(formula_cols):
            v = row[i] if i < len(row) else None
            if v is not None and not _is_formula(v):
                out.append(f"{sheet}!{_letter(i)}{r} ({names.get(i, '?')} = {_show(v)})")
    return out


def _unread(ed: Editable, names: dict[int, str], data: list, inputs: list[str], recorded: list[dict],
            rows: list[Row]) -> list[str]:
    """The input cells of a row the workbook recorded that finance changed but `ed` does not read back (a plan's
    TP, a GPU's notes): named, so that a change made for a what-if in the workbook is not taken for applied."""
    index = {n: i for i, n in reversed(list(names.items()))}
    unread = [n for n in inputs if n in index and n not in ed.keys and n not in ed.columns]
    was = {tuple(str(r.get(k)) for k in ed.keys): r for r in recorded}
    cells = dict(data)
    out = []
    for row in rows:
        base, cell = was.get(row.key), cells.get(row.number, ())
        if base is None:
            continue
        for name in unread:
            i = index[name]
            now = cell[i] if i < len(cell) else None
            if not _same(_comparable(now), _comparable(base.get(name))):
                out.append(f"{ed.sheet}!{_letter(i)}{row.number} ({name}: {_brief(base.get(name))} -> {_brief(now)})")
    return out


def _comparable(v: Any) -> Any:
    """A cell as _unread compares it: blank as None, text stripped, a number typed as text ('1', '8.6') as the
    number, so retyping a value the same way is no change."""
    if isinstance(v, str):
        v = v.strip()
        if not v:
            return None
        try:
            return float(v)
        except ValueError:
            return v
    return v


def _number(raw: Any, where: str, *, blank_is_zero: bool = False):
    """A cell's number (None when blank); the registry's validators judge its range."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return 0 if blank_is_zero else None
    value = raw
    if isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            raise KvregError(f"{where} must be a number, not {raw!r}: type a number") from None
        if value.is_integer() and abs(value) < 2**53:
            value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KvregError(f"{where} must be a number, not {raw!r}: type a number")
    if not math.isfinite(value):
        raise KvregError(f"{where} must be a finite number, not {raw!r}: type a number")
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)  # 750.0 from a cell is 750 users
    return value


def _key_value(raw: Any, where: str, quarter: bool) -> str:
    if quarter:
        try:
            q = parse_quarter(str(raw))
        except UnitError as exc:
            fix = "" if "YEARQn" in str(exc) else ": type it as YEARQn, for example 2027Q1"
            raise KvregError(f"{where}: {exc}{fix}") from None
        if str(raw) != q:
            raise KvregError(f"{where}: quarter {raw!r} is not written YEARQn, the way the workbook's formulas read "
                             f"a quarter: type {q}")
        return q
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    return str(raw)


def _value(ed: Editable, column: str, raw: Any, where: str):
    if _is_formula(raw):
        raise KvregError(f"{where} holds a formula ({raw[:40]}): type a value in an input cell")
    value = _number(raw, where, blank_is_zero=column in ed.blank_is_zero)
    if value is None and not SQLModel.metadata.tables[ed.table].c[ed.columns[column]].nullable:
        # the registry's column takes no NULL: a blank would be dropped by its writer, or reset to a default
        raise KvregError(f"{where} is blank, and {ed.columns[column]} cannot be: type a value")
    if column in ed.convert and value is not None:
        converted = ed.convert[column](value)
        if not math.isfinite(converted):
            raise KvregError(f"{where}: {value:g} is too large a number: type the value in the column's unit")
        value = converted
    return value


def _state(wb, where: str) -> tuple[dict, dict]:
    """STATE_SHEET: (sheet -> input columns, sheet -> [row values as written])."""
    inputs, rows = {}, {}
    ws = wb[STATE_SHEET]
    ws.reset_dimensions()  # as in _rows: the cells there are, not a declared dimension
    try:
        for r in ws.iter_rows(min_row=2, values_only=True):
            sheet, kind, value = (tuple(r) + (None, None, None))[:3]
            if sheet is None:
                continue
            data = json.loads(value)
            if kind == "inputs" and isinstance(data, list):
                inputs[sheet] = data
            elif kind == "row" and isinstance(data, dict):
                rows.setdefault(sheet, []).append(data)
            else:
                raise ValueError(kind)
    except (ValueError, TypeError):
        raise KvregError(f"{where}: its hidden sheet {STATE_SHEET!r} was changed (kvreg keeps there the registry "
                         "state the workbook was made from): write a new workbook with `kvreg report --format "
                         "xlsx` and apply that") from None
    return inputs, rows


def read_workbook(path: str | Path) -> Book:
    """Read a workbook's inputs, identity and recorded state, within the limits; nothing else is opened."""
    path = Path(path)
    where = show_path(path)
    wb = _load(path)
    try:
        ident = _identity(wb, where)
        inputs, state_rows = _state(wb, where)
        book = Book(str(path), ident["registry"], ident["quarter"], {}, {}, [])
        for ed in EDITABLE:
            if ed.sheet not in wb.sheetnames:
                raise KvregError(f"{where} has no sheet {ed.sheet!r}: apply the workbook as kvreg wrote it")
            names, data = _rows(wb[ed.sheet])
            book.overwritten += _overwritten(ed.sheet, names, data)
            book.state[ed.sheet] = _sheet_state(ed, state_rows.get(ed.sheet, []))
            book.rows[ed.sheet] = _sheet_rows(ed, names, data, inputs.get(ed.sheet, []), book.state[ed.sheet])
            book.unread += _unread(ed, names, data, inputs.get(ed.sheet, []), state_rows.get(ed.sheet, []),
                                   book.rows[ed.sheet])
        for sheet in wb.sheetnames:
            if sheet not in {ed.sheet for ed in EDITABLE} and sheet not in _SKIPPED:
                names, data = _rows(wb[sheet])
                book.overwritten += _overwritten(sheet, names, data)
        return book
    finally:
        wb.close()


def _sheet_state(ed: Editable, rows: list[dict]) -> dict[tuple, dict]:
    out = {}
    for row in rows:
        key = tuple(str(row.get(k)) for k in ed.keys)
        values = {}
        for column in ed.columns:
            v = row.get(column)
            if column in ed.blank_is_zero and v is None:
                v = 0
            values[column] = ed.convert[column](v) if column in ed.convert and v is not None else v
        out[key] = values
    return out


def _sheet_rows(ed: Editable, names: dict[int, str], data: list, inputs: list[str], state: dict) -> list[Row]:
    index = {n: i for i, n in reversed(list(names.items()))}  # the first column of a name
    missing = [n for n in (*ed.keys, *ed.columns) if n not in index]
    if missing:
        raise KvregError(f"sheet {ed.sheet} has no column {', '.join(missing)} (row {NAMES_ROW} names the columns): "
                         "apply the workbook as kvreg wrote it")
    # The columns kvreg filled with formulas (lookups, figures and the hidden helpers): a row typed in
    # without them is left out of the workbook's own figures.
    formula_columns = [(i, n) for i, n in sorted(names.items()) if n not in inputs] if inputs else []
    out, seen = [], set()
    for r, row in data:
        cell = lambda name: row[index[name]] if index[name] < len(row) else None  # noqa: E731
        raw_key = tuple(cell(k) for k in ed.keys)
        if any(k is None for k in raw_key):
            continue
        key = tuple(_key_value(v, f"{ed.sheet}!{_letter(index[k])}{r} ({k})", k in ed.quarter_keys)
                    for k, v in zip(ed.keys, raw_key))
        where_row = f"{ed.sheet} row {r} ({' '.join(key)})"
        if key in seen:
            raise KvregError(f"{where_row} repeats a row above: keep one row per {', '.join(ed.keys)}")
        seen.add(key)
        if key not in state:
            blank = [n for i, n in formula_columns if (row[i] if i < len(row) else None) is None]
            if blank:
                raise KvregError(f"{where_row} was typed in without the formulas of its columns {', '.join(blank[:3])}"
                                 f"{', ...' if len(blank) > 3 else ''} (hidden ones included), so the workbook's "
                                 "figures leave it out: copy the row above (formulas and all), change its inputs, "
                                 "then apply")
        values, cells = {}, {}
        for column in ed.columns:
            where = f"{ed.sheet}!{_letter(index[column])}{r} ({column})"
            cells[column] = where
            values[column] = _value(ed, column, cell(column), where)
        out.append(Row(r, key, values, cells))
    return out


# --------------------------------------------------------------------------- comparing and writing


def _registry_rows(conn, ed: Editable) -> dict[tuple, dict]:
    fields = ", ".join(sorted(set(ed.columns.values())))
    keys_sql = ", ".join(f"{sel} AS k_{k}" for k, sel in ed.keys.items())
    return {tuple(str(r[f"k_{k}"]) for k in ed.keys): dict(r)
            for r in conn.execute(text(f"SELECT {keys_sql}, {fields} FROM {ed.table}")).mappings()}


def compare(conn, book: Book, take: str | None = None) -> Result:
    """The cells finance changed since the workbook was written, against the registry now: changes
    to write, and conflicts (changed on both sides); `take` settles the conflicts."""
    if take is not None and take not in TAKES:
        raise KvregError(f"--take {take!r}: take workbook or registry")
    result = Result(book.quarter, overwritten=list(book.overwritten), unread=list(book.unread), take=take)
    for ed in EDITABLE:
        current = _registry_rows(conn, ed)
        state = book.state[ed.sheet]
        for row in book.rows[ed.sheet]:
            have, base = current.get(row.key), state.get(row.key)
            for column, fld in ed.columns.items():
                new = row.values[column]
                if base is not None and _same(new, base[column]):
                    continue  # finance left it: whatever the registry holds now stays
                old = have.get(fld) if have else None
                if have is not None and _same(old, new):
                    continue  # the registry already holds it
                change = Change(ed.sheet, ed.what, row.key, fld, column, old, new, row.cells[column],
                                added=have is None)
                registry_moved = (have is not None) if base is None else (have is None or not _same(old, base[column]))
                if not registry_moved:
                    result.changes.append(change)
                elif take == "workbook":
                    result.changes.append(change)
                else:
                    conflict = Conflict(change, base[column] if base else None, base is not None)
                    result.conflicts.append(conflict)
                    if take == "registry":
                        result.kept.append(change)
    return result


def _missing(ed: Editable, change: Change) -> KvregError:
    name = " ".join(change.key)
    return KvregError(f"{change.where}: no {ed.what} {name} in the registry (add it with kvreg first; apply changes "
                      "values here, it does not add rows)")


def write_changes(conn, changes: list[Change]) -> None:
    """Write the changes through the registry's writers, a row at a time; a refusal names its cells."""
    by_sheet = {ed.sheet: ed for ed in EDITABLE}
    rows: dict[tuple, list[Change]] = {}
    for c in changes:
        rows.setdefault((c.sheet, c.key), []).append(c)
    current = {ed.sheet: _registry_rows(conn, ed) for ed in EDITABLE if any(c.sheet == ed.sheet for c in changes)}
    classes: dict[str, dict] = {}
    for (sheet, key), cs in rows.items():
        ed = by_sheet[sheet]
        have = current[sheet].get(key)
        if have is None and not ed.adds:
            raise _missing(ed, cs[0])
        values = {fld: (have or {}).get(fld) for fld in ed.columns.values()}
        values.update({c.field: c.new for c in cs})
        where = ", ".join(c.where for c in cs)
        if sheet == "Workload":  # a plan's mix is written whole: its changed classes together
            classes.setdefault(key[0], {})[key[1]] = {**values, "_where": where}
            continue
        try:
            ed.write(conn, dict(zip(ed.keys, key)), values)
        except UserError as exc:
            raise KvregError(f"{where}: {exc}") from None
    for plan, changed in classes.items():
        where = ", ".join(v.pop("_where") for v in changed.values())
        try:
            _write_classes(conn, plan, changed)
        except UserError as exc:
            raise KvregError(f"{where}: {exc}") from None


def _check_identity(conn, book: Book, quarter: str | None) -> None:
    where = show_path(book.path)
    ours = ensure_registry_id(conn)
    if book.registry != ours:
        raise KvregError(f"{where} was written from another registry (id {book.registry[:12]}, this one is "
                         f"{ours[:12]}): apply it to the registry it came from")
    want = parse_quarter(quarter) if quarter else current_quarter()
    if book.quarter != want:
        raise KvregError(f"{where} was written for {book.quarter}, not {want}: pass --quarter "
                         f"{book.quarter} to apply it, or write a new workbook for {want}")


def apply_workbook(engine, source: str | Path | Book, *, quarter: str | None = None, dry_run: bool = False,
                   take: str | None = None) -> Result:
    """Read the workbook whole (no lock held; `source` may be what read_workbook returned), then in one
    short transaction compare it with the registry and write the changes; a dry run, or unresolved
    conflicts, roll the transaction back."""
    if quarter:
        parse_quarter(quarter)
    book = source if isinstance(source, Book) else read_workbook(source)
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            _check_identity(conn, book, quarter)
            result = compare(conn, book, take)
            if not result.unresolved and result.changes:
                write_changes(conn, result.changes)  # a dry run writes too, so it refuses what apply would
            if dry_run or result.unresolved or not result.changes:
                trans.rollback()
            else:
                trans.commit()
                result.applied = True
        except BaseException:
            if trans.is_active:
                trans.rollback()
            raise
    return result
