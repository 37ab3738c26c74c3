"""Rows as text: the JSON, CSV and aligned table that every command prints.

`kvreg capacity --format json` and the web page's `/api/capacity` return the bytes `render` makes,
so the two cannot drift. Stdlib only: this is loaded on every command.
"""

from __future__ import annotations

import io
import json
import math

from kvreg.core.units import fixed

FORMATS = ("table", "json", "csv")


def _counts_whole_units(key: str) -> bool:
    """Byte and token counts are integers (SPEC "Units"): an integral float prints as one."""
    return key.endswith("_bytes") or "_bytes_" in key or key.endswith("_tokens")


def normalise(rows: list[dict]) -> list[dict]:
    """Rows ready for JSON/CSV: NaN and infinity become null, integral byte/token counts become ints.
    Only floats are looked at, and each key is classified once (10,000-row lists stay fast)."""
    whole: dict[str, bool] = {}
    out = []
    for r in rows:
        d = dict(r)
        for k, v in r.items():
            if type(v) is float:
                if not math.isfinite(v):
                    d[k] = None
                elif v.is_integer():
                    w = whole.get(k)
                    if w is None:
                        w = whole[k] = _counts_whole_units(k)
                    if w:
                        d[k] = int(v)
        out.append(d)
    return out


def _is_money(key: str) -> bool:
    return "price" in key or "cost" in key or key.startswith("capex") or key.endswith("_usd")


# What an empty latency cell means, in words, wherever people read a table (the CLI's tables, the web pages): a
# plan without a latency target, or with one every concurrency meets, has no latency limit, and memory alone
# limits its users. JSON and CSV keep the empty value.
NO_LATENCY_LIMIT = "none"  # latency_concurrency_limit NULL: no target, or every concurrency meets it
NO_TARGET = "no target"  # users_binding_constraint NULL: memory alone limits the users
BLANK_TEXT = {"latency_concurrency_limit": NO_LATENCY_LIMIT, "users_binding_constraint": NO_TARGET}


def cell(v, key: str = "") -> str:
    if v is None:
        return BLANK_TEXT.get(key, "")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and _is_money(key):
        return _two(v)  # USD: always cents
    if isinstance(v, float):
        if key.endswith("_gib") or "_gib_" in key or key.endswith("_gb"):
            return _two(v)
        if v.is_integer() and abs(v) >= 1000:
            return f"{int(v):,}"
        return _two(v) if abs(v) >= 1 else f"{v:.3g}"
    if isinstance(v, int) and not isinstance(v, bool):
        # grouped (8,192 beside 32,768), except identifiers
        return str(v) if key == "id" or key.endswith("_id") else f"{v:,}"
    return " ".join(str(v).split())


def _two(v) -> str:
    """Two decimals, grouped, halves away from zero as the figures' own sentences round them (fixed)."""
    return fixed(v, 2, grouped=True)


# Columns that say which row a line is: a table too wide for the terminal shows these first.
KEY_COLUMNS = ("plan", "name", "model", "gpu", "quarter", "workload_class", "term")
_GAP = 2  # spaces between table columns


def render(rows: list[dict], fmt: str, columns: list[str] | None = None, width: int | None = None,
           keys: tuple[str, ...] = KEY_COLUMNS) -> str:
    """Rows as json, csv or table text, ending in a newline; columns picks and orders keys (all keys
    by default). `width` (table only): fit the table to that many characters, the `keys` columns
    first, then the others in order while they fit, and say how many were left out."""
    if columns is None:
        columns = list(rows[0].keys()) if rows else []
    if fmt == "json":
        # One object per line: indent= would fall back to json's pure-Python encoder (2x slower on
        # 10,000 plans); this layout is still one JSON array and still diffs line by line.
        objects = _json_objects(rows, columns)
        return ("[\n" + ",\n".join("  " + o for o in objects) + "\n]" if objects else "[]") + "\n"
    rows = normalise(rows)
    if fmt == "csv":
        import csv  # here, not at the top: only csv output needs it (start-up time)

        from kvreg.core.text import spreadsheet_safe  # text a spreadsheet would run as a formula: 'quoted

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r.get(c) is None else spreadsheet_safe(r.get(c)) for c in columns])
        return buf.getvalue()
    if not rows:
        return "(no rows)\n"
    cells = [[cell(r.get(c), c) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    numeric = [all(_is_num(r.get(c)) for r in rows) for c in columns]
    shown = list(range(len(columns)))
    if width is not None and sum(widths) + _GAP * (len(widths) - 1) > width:
        shown = fit(columns, widths, width, keys)
    line = lambda vals: "  ".join(  # noqa: E731
        vals[i].rjust(widths[i]) if numeric[i] else vals[i].ljust(widths[i]) for i in shown
    ).rstrip()
    out = [line(columns), "  ".join("-" * widths[i] for i in shown), *(line(row) for row in cells)]
    left = len(columns) - len(shown)
    if left:
        out.append(f"({left} more column{'s' if left > 1 else ''}: --wide shows all, --columns a,b picks)")
    return "\n".join(out) + "\n"


def fit(columns: list[str], widths: list[int], width: int, keys: tuple[str, ...] = KEY_COLUMNS) -> list[int]:
    """Which columns (indexes, in the order shown) fit in `width` characters: the key columns first
    (in the order of `keys`), then every other column, in order, that still fits; the first column
    always."""
    order = [columns.index(k) for k in keys if k in columns]
    order += [i for i in range(len(columns)) if i not in order]
    shown, used = [], 0
    for i in order:
        need = widths[i] + (_GAP if shown else 0)
        if not shown or used + need <= width:
            shown.append(i)
            used += need
    return shown



def _json_objects(rows: list[dict], columns: list[str]) -> list[str]:
    """Each row as one JSON object of `columns`, normalised exactly as `normalise` does, but looking
    only at the values normalising can change: the byte and token counts, and (through the
    encoder's own check) non-finite floats, which are rare. A 10,000-plan list has 1.5 million
    values; a loop over all of them in Python cost more than the query."""
    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False).encode
    whole = [c for c in columns if _counts_whole_units(c)]
    out = []
    for r in rows:
        d = dict(r) if list(r) == columns else {c: r.get(c) for c in columns}
        for k in whole:
            v = d[k]
            if type(v) is float and v.is_integer():
                d[k] = int(v)
        try:
            out.append(encode(d))
        except ValueError:  # NaN or infinity: null, as normalise makes it
            out.append(encode({k: None if type(v) is float and not math.isfinite(v) else v for k, v in d.items()}))
    return out


def _is_num(v) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
