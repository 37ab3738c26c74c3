"""What every command shares: opening the registry, turning errors into one line, printing rows."""

from __future__ import annotations

import functools
import json
import math

import click

FORMATS = ("table", "json", "csv")


def format_option(default: str = "table"):
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default=default,
        show_default=True,
        help="Output: an aligned table for people, json (a list of objects) or csv for programs.",
    )


def engine_options(defaults: bool) -> list:
    """--rule and the engine's own settings (docs/engine-rules.md), for `kvreg capacity` and the plan
    commands; parse them with kvreg.rules.parse_engine_options. Without defaults (plan set) an option
    left out keeps the stored value."""
    clears = "" if defaults else "; none clears it"
    return [
        click.option("--rule", default="theoretical" if defaults else None, show_default=defaults,
                     help="Allocation rule: theoretical (a share of memory held back, --reserve, 12% by default; see docs/methodology.md), vllm or sglang (what the engine allocates)."),
        click.option("--engine-version", help="vLLM/SGLang: the release to follow (0.10.1); its defaults and memory "
                     f"accounting differ by release (default: the latest kvreg knows){clears}."),
        click.option("--gpu-memory-utilization", help="vLLM: share of GPU memory it may use, in (0, 1] (default "
                     f"0.92 from v0.20, 0.9 before){clears}."),
        click.option("--max-num-batched-tokens", help=f"vLLM: tokens per scheduler step (default 8192){clears}."),
        click.option("--max-concurrent-batches", help="vLLM: batches in flight (default 2 at PP 1, else PP)"
                     f"{clears}."),
        click.option("--activation-memory", help="vLLM: measured peak activation memory per GPU (1.2GiB), instead "
                     f"of kvreg's estimate{clears}."),
        click.option("--cuda-graph-memory", help="vLLM: CUDA graph memory per GPU to take from the KV pool (0.5GiB); "
                     f"vLLM itself takes none (default 0){clears}."),
        click.option("--non-torch-memory", help="vLLM: measured non-torch memory per GPU (0.2GiB), instead of kvreg's "
                     "estimate; SGLang: memory in use before the weights load (default 0)" f"{clears}."),
        click.option("--weights-memory", help="vLLM/SGLang: measured weight memory per GPU (14.99GiB), instead of "
                     f"params x bytes / (TP x PP){clears}."),
        click.option("--mem-fraction-static", help=f"SGLang: --mem-fraction-static, in (0, 1] (default 0.88){clears}."),
    ]


def user_errors(fn):
    """Run a command; any error a user can fix becomes one line on stderr and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from kvreg.errors import user_error_types

        try:
            return fn(*args, **kwargs)
        except user_error_types() as exc:
            raise click.ClickException(one_line(str(exc))) from None

    return wrapper


def one_line(text: str) -> str:
    return " ".join(text.split())


def open_db(ctx: click.Context):
    """The registry, opened the full way (SQLAlchemy): for commands that write."""
    from kvreg.db.engine import open_registry

    return open_registry(ctx.find_root().obj.get("db_url"), on_seeded=say_created)


def say_created(url: str) -> None:
    """One notice on stderr when a command made a new registry: a user who runs kvreg from another
    folder gets another registry.db, and should not be surprised to find it holds only the catalog."""
    from kvreg.catalog import load_catalog
    from kvreg.db.engine import mask_url
    from kvreg.fastpath import sqlite_file

    cat = load_catalog()
    loaded = (f"the built-in catalog ({len(cat['models'])} models, {len(cat['gpus'])} GPUs, "
              f"{len(cat['dtypes'])} dtypes, {len(cat.get('plans', []))} example plans)")
    path = sqlite_file(url)
    if path:
        message = (f"kvreg: created {path} with {loaded}; from another folder, use it with "
                   f"--db sqlite:///{path} or KVREG_DB")
    else:
        message = f"kvreg: loaded {loaded} into the new registry {mask_url(url)}"
    click.echo(message, err=True)


def read(ctx: click.Context, fn, *, prepare: bool = True):
    """fn(conn) on the --db registry by the one read path (kvreg.db.read.read): sqlite3 alone for a
    current SQLite registry, SQLAlchemy otherwise; the same rows either way. Every read-only
    command reads this way, and prints what it gets with emit / emit_record below."""
    from kvreg.db.read import read as read_registry

    return read_registry(ctx.find_root().obj.get("db_url"), fn, prepare=prepare)


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


def _cell(v, key: str = "") -> str:
    if v is None:
        return ""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and _is_money(key):
        return f"{v:,.2f}"  # USD: always cents
    if isinstance(v, float):
        if key.endswith("_gib") or "_gib_" in key or key.endswith("_gb"):
            return f"{v:,.2f}"
        if v.is_integer() and abs(v) >= 1000:
            return f"{int(v):,}"
        return f"{v:,.2f}" if abs(v) >= 1 else f"{v:.3g}"
    if isinstance(v, int) and not isinstance(v, bool):
        # grouped (8,192 beside 32,768), except identifiers
        return str(v) if key == "id" or key.endswith("_id") else f"{v:,}"
    return " ".join(str(v).split())


def emit(rows: list[dict], fmt: str, columns: list[str] | None = None) -> None:
    """Print rows as a table, json or csv; columns picks and orders keys (all keys by default)."""
    if columns is None:
        columns = list(rows[0].keys()) if rows else []
    if fmt == "json":
        # One object per line: indent= would fall back to json's pure-Python encoder (2x slower on
        # 10,000 plans); this layout is still one JSON array and still diffs line by line.
        objects = _json_objects(rows, columns)
        click.echo("[\n" + ",\n".join("  " + o for o in objects) + "\n]" if objects else "[]")
        return
    rows = normalise(rows)
    if fmt == "csv":
        import csv  # here, not at the top: only csv output needs it (start-up time)
        import io

        from kvreg.text import spreadsheet_safe  # text a spreadsheet would run as a formula: 'quoted

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r.get(c) is None else spreadsheet_safe(r.get(c)) for c in columns])
        click.echo(buf.getvalue(), nl=False)
        return
    if not rows:
        click.echo("(no rows)")
        return
    cells = [[_cell(r.get(c), c) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    numeric = [all(_is_num(r.get(c)) for r in rows) for c in columns]
    line = lambda vals: "  ".join(  # noqa: E731
        v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)
    ).rstrip()
    click.echo(line(columns))
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo(line(row))


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


def emit_record(record: dict, fmt: str) -> None:
    """One object: json as an object in a one-element list, table as key/value lines."""
    if fmt in ("json", "csv"):
        emit([record], fmt)
        return
    rec = normalise([record])[0]
    width = max(len(k) for k in rec)
    for k, v in rec.items():
        click.echo(f"{k.ljust(width)}  {_cell(v, k)}")
