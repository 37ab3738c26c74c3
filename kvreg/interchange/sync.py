"""Declarative sync: a TOML file of ``[[dtype]]``, ``[[gpu]]``, ``[[model]]``, ``[[plan]]``, ``[[demand]]``
and ``[[fleet]]`` tables <-> the registry (plans, demand and fleet: kvreg.interchange.sync_plans).

``kvreg apply`` reads such a file and makes the registry match it (insert new rows, update
changed ones, matched by name; delete only with prune); ``kvreg export`` writes the registry
back out in the same format, so a team can keep its registry under review in git.

The keys are the column names of the registry tables, as in the built-in catalog
(kvreg/catalog/*.toml). Sizes are strings with a unit (``memory_bytes =
"80GiB"``, ``memory_bandwidth_bytes_per_s = "3.35TB"``; a bare number is refused). A few conveniences
are read on top: token counts as strings
(``max_position_embeddings = "128K"``) and parameters in billions (``params_b = 8.03``,
``active_params_b = 3``). A row declares the whole row: a key it leaves out means NULL or the
column's default, exactly as when the catalog is loaded.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import String, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from kvreg.app.registry import check_bytes_per_element, check_int, check_name, validate_gpu, validate_model
from kvreg.core.errors import KvregError
from kvreg.core.limits import MAX_TOML_BYTES, parse_toml, read_input, show_path
from kvreg.core.units import parse_tokens
from kvreg.db.read import SIZE_FIELDS
from kvreg.db.tables import DTYPE_FIELDS, GPU_FIELDS, MODEL_FIELDS, Dtype, Gpu, Model, Plan, server_default_value
from kvreg.interchange import sync_plans as sp
from kvreg.interchange.sync_plans import row_key, same_value, used_by

# Apply order matters: models refer to dtypes, plans to models and GPUs, demand to plans, fleet to GPUs.
BASE_KINDS = ("dtype", "gpu", "model")
KINDS = (*BASE_KINDS, "plan", "demand", "fleet")
_TABLES = {"dtype": Dtype, "gpu": Gpu, "model": Model}
_FIELDS = {"dtype": DTYPE_FIELDS, "gpu": GPU_FIELDS, "model": MODEL_FIELDS}
_ALIASES = {"model": {"params_b": "params_total", "active_params_b": "params_active"}}
_TOKEN_FIELDS = ("max_position_embeddings", "sliding_window", "attention_chunk_size")
DTYPE_KINDS = ("kv", "weight", "both")


@dataclass
class KindDiff:
    """What applying a file does to one table."""

    kind: str
    added: list[str] = field(default_factory=list)
    # name -> [(field, old, new), ...]
    changed: dict[str, list[tuple[str, Any, Any]]] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    # name -> plans that keep a row --prune would otherwise delete
    kept: dict[str, list[str]] = field(default_factory=dict)

    @property
    def writes(self) -> int:
        return len(self.added) + len(self.changed) + len(self.removed)


@dataclass
class SyncResult:
    diffs: list[KindDiff]
    dry_run: bool

    @property
    def writes(self) -> int:
        return sum(d.writes for d in self.diffs)


# --------------------------------------------------------------------------- reading a file


def read_file(path: str) -> dict[str, list[dict]]:
    """Parse a declaration file (``-`` reads stdin) into ``{"dtype": [...], "gpu": [...], "model": [...]}``.

    Only the kinds the file declares are present as keys, so --prune leaves other tables alone.
    """

    where = "stdin" if path == "-" else show_path(path)
    raw = read_input(path, MAX_TOML_BYTES, "TOML declaration")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KvregError(f"{where} is not UTF-8 text: save it as UTF-8 TOML") from None
    # A byte-order mark, as Windows editors write: TOML does not allow one, and tomllib's error
    # ("Invalid statement (at line 1, column 1)") did not say what was there. It carries no content.
    text = text.removeprefix("\ufeff")
    if not text.strip():  # a truncated file or a wrong path, not a declaration of nothing
        raise KvregError(f"{where} is empty: declare [[dtype]], [[gpu]] or [[model]] tables in it (see `kvreg export`)")
    return parse_text(text, where)


def parse_text(text: str, where: str = "<text>") -> dict[str, list[dict]]:
    """Parse TOML text into declared rows per kind; rejects unknown tables and duplicate names."""
    try:
        data = parse_toml(text, where)
    except tomllib.TOMLDecodeError as exc:
        raise KvregError(f"{where} is not valid TOML: {exc}") from None
    out: dict[str, list[dict]] = {}
    for key, rows in data.items():
        if key not in KINDS:
            hint = difflib.get_close_matches(key, KINDS, n=1)
            fix = f"did you mean [[{hint[0]}]]?" if hint else ("use [[dtype]], [[gpu]], [[model]], [[plan]], [[demand]]"
                                                                " and [[fleet]] tables")
            raise KvregError(f"{where}: unknown table {key!r}: {fix}")
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise KvregError(f"{where}: {key} must be an array of tables, written [[{key}]]")
        _check_unique(rows, key, where)
        out[key] = rows
    return out


def _check_unique(rows: list[dict], kind: str, where: str) -> None:
    seen: dict[Any, int] = {}
    for i, row in enumerate(rows, 1):
        name = row.get("name") if kind in BASE_KINDS else row_key(kind, row)
        if isinstance(name, str) and name in seen:
            raise KvregError(f"{where}: [[{kind}]] #{i} {name!r} is declared twice (also #{seen[name]}): keep one")
        seen[name] = i


# --------------------------------------------------------------------------- validating rows


def _label(kind: str, i: int, row: dict, where: str) -> str:
    name = row.get("name") if kind in BASE_KINDS else row_key(kind, row)
    return f"{where}: [[{kind}]] #{i}" + (f" {name!r}" if isinstance(name, str) else "")


def normalise_row(conn, kind: str, row: dict) -> dict:
    """A declared row -> the full registry row (every column; absent ones NULL or default), validated."""
    row = _resolve_aliases(kind, row)
    _check_keys(kind, row)
    _check_types(kind, row)
    if kind == "model":
        for f in _TOKEN_FIELDS:
            if isinstance(row.get(f), str):
                row[f] = parse_tokens(row[f])
        row = validate_model(conn, row)
    elif kind == "gpu":
        for f in SIZE_FIELDS:
            value = row.get(f)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                # A bare number is ambiguous (memory_bytes = 80 would be an 80-byte GPU): say the unit.
                raise KvregError(f"{f} = {value!r} has no unit: write {f} = "
                                 f'"{value}GiB" or "{value}GB", or "{value}B" if you mean bytes')
        row = validate_gpu(row)
    else:
        row = validate_dtype(row)
    return _full_row(kind, row)


def _resolve_aliases(kind: str, row: dict) -> dict:
    row = dict(row)
    for alias, column in _ALIASES.get(kind, {}).items():
        if alias not in row:
            continue
        if column in row:
            raise KvregError(f"give {alias} or {column}, not both")
        row[column] = _billions(row.pop(alias), alias)
    return row


def _billions(value: Any, key: str) -> int:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not 0 < value <= 1_000_000:
        raise KvregError(f"{key} must be a positive number of billions of parameters, not {value!r}")
    return round(value * 1e9)


def _check_keys(kind: str, row: dict) -> None:
    allowed = set(_FIELDS[kind])
    for key in row:
        if key not in allowed:
            extra = list(_ALIASES.get(kind, {}))
            hint = difflib.get_close_matches(key, [*allowed, *extra], n=1)
            fix = f"did you mean {hint[0]}?" if hint else f"see `kvreg export` for the {kind} keys"
            raise KvregError(f"unknown key {key!r}: {fix}")


def _check_types(kind: str, row: dict) -> None:
    """Text columns must be TOML strings (SQLite would store a number or a date as it came); no
    column is a boolean, an array or a table."""
    table = _TABLES[kind].__table__
    for key, value in row.items():
        if isinstance(value, (bool, list, dict)):
            raise KvregError(f"{key} must be a single number or string, not {_describe(value)}")
        if isinstance(table.c[key].type, String) and not isinstance(value, str):
            raise KvregError(f"{key} must be a string in quotes, not {value!r}")


def _describe(value: Any) -> str:
    """How a value looked in the file, roughly: true, [...], {...}."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "an array" if isinstance(value, list) else "a table"


def validate_dtype(row: dict) -> dict:
    """Check a dtype row: bytes per element in [0.125, 8], kind kv|weight|both."""
    row = dict(row)
    check_name(row.get("name"), "dtype")
    row["bytes_per_element"] = check_bytes_per_element(row.get("bytes_per_element"))
    row.setdefault("kind", "both")
    if row["kind"] not in DTYPE_KINDS:
        raise KvregError(f"kind must be one of {', '.join(DTYPE_KINDS)}, not {row['kind']!r}")
    row["mla_bytes_per_token_per_layer"] = check_int(
        row.get("mla_bytes_per_token_per_layer"), "mla_bytes_per_token_per_layer", allow_none=True
    )
    row["scale_bytes_per_token_per_head"] = check_int(
        row.get("scale_bytes_per_token_per_head"), "scale_bytes_per_token_per_head", minimum=0, allow_none=True
    )
    row.setdefault("notes", "")
    return row


def _full_row(kind: str, row: dict) -> dict:
    defaults = {c.name: (server_default_value(c) if c.server_default is not None else None)
                for c in _TABLES[kind].__table__.columns}
    return {f: row.get(f, defaults[f]) for f in _FIELDS[kind]}


# --------------------------------------------------------------------------- syncing


def apply_rows(conn, declared: dict[str, list[dict]], *, prune: bool = False, where: str = "<file>") -> list[KindDiff]:
    """Make the registry match ``declared`` inside the caller's transaction; returns the diff.

    Kinds are applied in order (dtypes, GPUs, models) so a model may use a dtype declared in the
    same file. Any bad row raises KvregError naming the row; the caller's transaction then rolls
    everything back.
    """
    return [_apply_kind(conn, kind, declared[kind], prune, where) for kind in KINDS if kind in declared]


def _apply_kind(conn, kind: str, rows: list[dict], prune: bool, where: str) -> KindDiff:
    if kind not in BASE_KINDS:
        return _apply_other(conn, kind, rows, prune, where)
    table = _TABLES[kind]
    current = {r["name"]: dict(r) for r in conn.execute(select(table)).mappings()}
    diff = KindDiff(kind)
    for i, declared in enumerate(rows, 1):
        label = _label(kind, i, declared, where)
        try:
            row = normalise_row(conn, kind, declared)
        except ValueError as exc:  # KvregError, UnitError: messages already say what to fix
            raise KvregError(f"{label}: {_without_name(str(exc), kind, declared)}") from None
        old = current.get(row["name"])
        if old is None:
            _write(conn, insert(table).values(**row), label)
            diff.added.append(row["name"])
            continue
        changes = [(f, old[f], row[f]) for f in _FIELDS[kind] if not same_value(old[f], row[f])]
        if changes:
            _write(conn, update(table).where(table.name == row["name"]).values(**row), label)
            diff.changed[row["name"]] = changes
        else:
            diff.unchanged.append(row["name"])
    if prune and kind != "dtype":
        _prune(conn, kind, set(current) - {r.get("name") for r in rows}, diff)
    return diff


def _apply_other(conn, kind: str, rows: list[dict], prune: bool, where: str) -> KindDiff:
    """Plans, demand and fleet: matched by their key, written through the same functions as the CLI."""
    current = sp.CURRENT[kind](conn)
    diff = KindDiff(kind)
    declared = set()
    for i, row in enumerate(rows, 1):
        label = _label(kind, i, row, where)
        key = sp.row_key(kind, row)
        try:
            new = sp.normalise(conn, kind, row)
            key = sp.row_key(kind, new)
            declared.add(key)
            old = current.get(key)
            if old is None:
                sp.write(conn, kind, new, exists=False)
                diff.added.append(key)
                continue
            change = sp.changes(old, new)
            if change:
                sp.write(conn, kind, new, exists=True)
                diff.changed[key] = change
            else:
                diff.unchanged.append(key)
        except ValueError as exc:  # KvregError, UnitError: messages already say what to fix
            raise KvregError(f"{label}: {_without_name(str(exc), kind, row)}") from None
        except IntegrityError as exc:
            raise KvregError(f"{label}: breaks a registry rule ({str(exc.orig).splitlines()[0]})") from None
    if prune:
        for key in sorted(set(current) - declared):
            if kind == "demand" and current[key]["plan"] not in sp.CURRENT["plan"](conn):
                continue  # gone with its plan
            sp.remove(conn, kind, current[key])
            diff.removed.append(key)
    return diff


def _without_name(message: str, kind: str, row: dict) -> str:
    """Registry messages start `model 'X': ...`; the label already names the row."""
    prefix = f"{kind} {row.get('name')!r}: "
    return message.removeprefix(prefix)


def _write(conn, stmt, label: str) -> None:
    try:
        conn.execute(stmt)
    except IntegrityError as exc:
        detail = str(exc.orig).splitlines()[0]
        raise KvregError(f"{label}: breaks a registry rule ({detail})") from None


def _prune(conn, kind: str, names: set[str], diff: KindDiff) -> None:
    """Delete rows the file does not declare, except those a plan still uses."""
    table = _TABLES[kind]
    column = Plan.model_id if kind == "model" else Plan.gpu_id
    for name in sorted(names):
        row_id = conn.execute(select(table.id).where(table.name == name)).scalar_one()
        plans = list(conn.execute(select(Plan.name).where(column == row_id).order_by(Plan.name)).scalars())
        users = [f"plan(s) {', '.join(plans)}"] if plans else []
        if kind == "gpu":
            fleet = used_by(conn, kind, name)
            users += [f"fleet entries {', '.join(fleet)}"] if fleet else []
        if users:
            diff.kept[name] = users
            continue
        conn.execute(delete(table).where(table.id == row_id))
        diff.removed.append(name)


def sync(engine, declared: dict[str, list[dict]], *, where: str = "<file>", dry_run: bool = False,
         prune: bool = False) -> SyncResult:
    """Apply declared rows (from `read_file`) in one transaction; a dry run computes the same diff,
    then rolls back. `where` names the file in error messages."""
    with engine.connect() as conn:
        tx = conn.begin()
        try:
            diffs = apply_rows(conn, declared, prune=prune, where=where)
        except BaseException:
            tx.rollback()
            raise
        if dry_run:
            tx.rollback()
        else:
            tx.commit()
    return SyncResult(diffs, dry_run)


# --------------------------------------------------------------------------- describing a diff


def describe(result: SyncResult) -> list[str]:
    """The diff as lines: one per added/removed row, one per changed field, then the counts."""
    lines: list[str] = []
    for d in result.diffs:
        lines += [f"+ {d.kind} {n}" for n in d.added]
        for name, changes in d.changed.items():
            lines.append(f"~ {d.kind} {name}")
            lines += [f"    {f}: {_show(old)} -> {_show(new)}" for f, old, new in changes]
        lines += [f"- {d.kind} {n}" for n in d.removed]
        lines += [f"  {d.kind} {n} kept: used by {'; '.join(p)}" for n, p in d.kept.items()]
    for d in result.diffs:
        removed = f", {len(d.removed)} removed" if d.removed or d.kept else ""
        lines.append(f"{d.kind}: {len(d.added)} added, {len(d.changed)} changed, {len(d.unchanged)} unchanged{removed}")
    if not result.diffs:
        lines.append("the file has no [[dtype]], [[gpu]], [[model]], [[plan]], [[demand]] or [[fleet]] tables")
    if result.dry_run:
        lines.append("dry run: nothing written")
    elif result.writes:
        lines.append(f"applied: {result.writes} row(s) written")
    else:
        lines.append("nothing to do: the registry matches")
    return lines


def _show(value: Any, limit: int = 60) -> str:
    if value is None:
        return "(none)"
    text = repr(value)
    if len(text) <= limit:
        return text
    return text[: limit - 4] + "..." + (text[0] if isinstance(value, str) else "")
