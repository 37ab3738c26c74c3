"""What every command shares: opening the registry, turning errors into one line, printing rows."""

from __future__ import annotations

import functools

import click

from kvreg.export.text import FORMATS, KEY_COLUMNS, cell as _cell, normalise, render  # noqa: F401  (re-exported)


def _remember(ctx, param, value):
    """--columns and --wide reach `emit` through the context, not through every command's arguments."""
    ctx.meta[f"kvreg.{param.name}"] = value
    return value


def format_option(default: str = "table"):
    """--format, and the table's --columns and --wide."""
    fmt = click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default=default,
        show_default=True,
        help="Output: an aligned table for people, json (a list of objects) or csv for programs.",
    )
    columns = click.option(
        "--columns", metavar="A,B,...", expose_value=False, callback=_remember,
        help="Only these columns, in this order (names as in the csv header), in every format.")
    wide = click.option(
        "--wide", is_flag=True, expose_value=False, callback=_remember,
        help="Table: every column. By default a table fits the terminal (COLUMNS, else its width), the "
        "columns naming each row first; piped, it keeps every column.")

    def decorate(f):
        return fmt(columns(wide(f)))

    return decorate


def table_width() -> int | None:
    """How wide a table may be: COLUMNS when set, else the terminal's width; None (every column)
    when the output is not a terminal, so a pipe or a file gets the whole table."""
    import os
    import shutil
    import sys

    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def _chosen_columns(rows: list[dict], columns: list[str] | None) -> list[str] | None:
    """The columns --columns names (checked against the rows'), or `columns` as given."""
    ctx = click.get_current_context(silent=True)
    asked = ctx.meta.get("kvreg.columns") if ctx else None
    if not asked:
        return columns
    have = list(columns or [])
    have += [k for k in (rows[0] if rows else {}) if k not in have]  # any column of the rows
    picked = [c.strip() for c in asked.split(",") if c.strip()]
    unknown = [c for c in picked if c not in have]
    if unknown or not picked:
        raise click.ClickException(
            f"--columns: no column {', '.join(repr(c) for c in unknown) or 'given'}; the columns are "
            f"{', '.join(have)}")
    return picked


def user_errors(fn):
    """Run a command; any error a user can fix becomes one line on stderr and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from kvreg.core.errors import user_error_types

        try:
            return fn(*args, **kwargs)
        except user_error_types() as exc:
            raise click.ClickException(one_line(str(exc))) from None

    return wrapper


def one_line(text: str) -> str:
    return " ".join(text.split())


def open_db(ctx: click.Context):
    """The registry, opened the full way (SQLAlchemy): for commands that write."""
    from kvreg.app.access import open_registry

    return open_registry(ctx.find_root().obj.get("db_url"), on_seeded=say_created)


def say_created(url: str) -> None:
    """One notice on stderr when a command made a new registry: a user who runs kvreg from another
    folder gets another registry.db, and should not be surprised to find it holds only the catalog."""
    from kvreg.catalog import load_catalog
    from kvreg.db.engine import mask_url
    from kvreg.db.fastpath import sqlite_file

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
    """fn(conn) on the --db registry by the one read path (kvreg.app.access.read): sqlite3 alone for
    a current SQLite registry, SQLAlchemy otherwise; the same rows either way. Every read-only
    command reads this way, and prints what it gets with emit / emit_record below."""
    from kvreg.app.access import read as read_registry

    return read_registry(ctx.find_root().obj.get("db_url"), fn, prepare=prepare, on_seeded=say_created)


def emit(rows: list[dict], fmt: str, columns: list[str] | None = None, keys: tuple[str, ...] = KEY_COLUMNS) -> None:
    """Print rows as a table, json or csv; columns picks and orders keys (all keys by default), and
    --columns picks among all the rows' columns. A table fits the terminal (table_width), the `keys`
    columns first, unless --wide or --columns."""
    picked = _chosen_columns(rows, columns)
    ctx = click.get_current_context(silent=True)
    everything = picked is not columns or (ctx is not None and ctx.meta.get("kvreg.wide"))
    width = None if fmt != "table" or everything else table_width()
    click.echo(render(rows, fmt, picked, width, keys), nl=False)


def emit_record(record: dict, fmt: str) -> None:
    """One object: json as an object in a one-element list, table as key/value lines."""
    if fmt in ("json", "csv"):
        emit([record], fmt)
        return
    rec = normalise([record])[0]
    keys = _chosen_columns([rec], list(rec))  # --columns picks the lines
    width = max(len(k) for k in keys)
    for k in keys:
        click.echo(f"{k.ljust(width)}  {_cell(rec[k], k)}")
