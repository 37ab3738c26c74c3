"""The registry as TOML: what `kvreg export` writes and `kvreg apply` reads (kvreg.interchange.sync). Rendering
only: the rows come from kvreg.db.read (declared_rows, declared_entries). Stdlib only at import
time, so `kvreg export` runs without SQLAlchemy on the fast read path."""

from __future__ import annotations

import math
from typing import Any

from kvreg.core.units import format_size
from kvreg.db.read import CLASS_OPTIONAL_KEYS, COLUMNS, DECLARED_KINDS, SIZE_FIELDS, declared_entries, declared_rows

_HEADER = (
    "# kvreg registry: dtypes, GPUs, models, plans (with their workload mix), demand and fleet.\n"
    "# Written by `kvreg export`; `kvreg apply FILE` syncs a registry to it (see docs/cli.md).\n"
    "# Keys are registry column names; a key that is absent means NULL or the column default.\n"
)


def export_text(conn) -> str:
    """The registry's dtypes, GPUs, models, plans, demand and fleet as TOML in the apply format,
    ordered by name (plans), by plan and quarter (demand) and by GPU and quarter (fleet). `conn`:
    either connection the read path gives (kvreg.db.read.read)."""
    extra = [_entry_text(kind, row) for kind in ("plan", "demand", "fleet") for row in declared_entries(conn, kind)]
    return "\n".join([toml_text(declared_rows(conn)), *extra])


def _class_latency(c: dict) -> str:
    """A workload class's latency keys that are set, as more keys of its inline table."""
    return "".join(f", {k} = {toml_value(c[k])}" for k in CLASS_OPTIONAL_KEYS if c.get(k) is not None)


def _entry_text(kind: str, row: dict) -> str:
    lines = [f"[[{kind}]]"]
    for f, value in row.items():
        if value is None:
            continue
        if f == "workload":
            if value:
                items = ", ".join(f"{{ name = {toml_string(c['name'])}, avg_tokens = {c['avg_tokens']}, share = "
                                  f"{toml_value(float(c['share']))}{_class_latency(c)} }}" for c in value)
                lines.append(f"workload = [{items}]")
            continue
        lines.append(f"{f} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


def toml_text(declared: dict[str, list[dict]]) -> str:
    """{kind: rows} (kvreg.db.read.declared_rows) as TOML in the apply format, in the order given."""
    parts = [_HEADER]
    for kind in DECLARED_KINDS:
        parts += [_table_text(kind, row) for row in declared.get(kind, [])]
    return "\n".join(parts)


def _table_text(kind: str, row) -> str:
    lines = [f"[[{kind}]]"]
    for f in COLUMNS[kind]:
        if f == "id":  # ids are the registry's own; rows are matched by name
            continue
        value = row[f]
        if value is None:  # TOML has no null: an absent key means NULL
            continue
        if f in SIZE_FIELDS:
            value = format_size(int(value))  # exact, with its unit: "80GiB" reads back as 85,899,345,920
        lines.append(f"{f} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


def toml_value(value: Any) -> str:
    """A TOML literal for a str, int or float (the only types registry columns hold)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"TOML cannot hold {value!r}")
        return repr(value)  # shortest round-tripping form; always has '.', 'e' (or is inf/nan, excluded)
    if isinstance(value, str):
        return toml_string(value)
    raise TypeError(f"no TOML form for {type(value).__name__}")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and every control character escaped."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
