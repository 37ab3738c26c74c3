"""`kvreg init` and `kvreg db ...`: schema migrations, wrapping Alembic."""

from __future__ import annotations

import click

from kvreg.cli.common import emit, format_option, open_db, read, user_errors


def _url(ctx) -> str:
    from kvreg.db.engine import resolve_url

    return resolve_url(ctx.find_root().obj.get("db_url"))


@click.command("init")
@click.pass_context
@user_errors
def init_cmd(ctx):
    """Create or upgrade the registry to the newest schema and load the built-in catalog into an
    empty one. Every other command does this by itself; init just says what it found."""
    from kvreg.app.registry import counts
    from kvreg.db.engine import mask_url

    engine = open_db(ctx)
    with engine.connect() as conn:
        c = counts(conn)
    click.echo(f"registry {mask_url(_url(ctx))}: {c['models']} models, {c['gpus']} GPUs, {c['dtypes']} dtypes, "
               f"{c['plans']} plans")


@click.group("db")
def db_group():
    """Schema migrations (Alembic): upgrade, downgrade, current, history; copy a registry elsewhere."""


@db_group.command("upgrade")
@click.argument("revision", default="head")
@click.pass_context
@user_errors
def db_upgrade(ctx, revision):
    """Upgrade the registry schema to REVISION (default: head)."""
    _alembic(ctx, "upgrade", revision)
    click.echo(f"upgraded to {revision}")


@db_group.command("downgrade")
@click.argument("revision")
@click.option("--yes", is_flag=True, help="Drop the rows and values the older schema has no place for "
              "(refused without it, and the list of what would go is printed).")
@click.pass_context
@user_errors
def db_downgrade(ctx, revision, yes):
    """Downgrade the registry schema to REVISION (`base` removes every table).

    A downgrade that would drop rows or values (say workload mixes, which the older schema cannot
    hold) is refused, changing nothing, with a list of what would be lost, unless --yes. A
    downgraded registry stays at REVISION: other commands refuse it rather than upgrade it behind
    your back, until `kvreg db upgrade`.

    \b
    Example:
      kvreg export --out registry.toml && kvreg db downgrade 0002 --yes
    """
    lost = _alembic(ctx, "downgrade", revision, yes=yes)
    click.echo(f"downgraded to {revision}" + (f"; dropped {', '.join(lost)}" if lost else ""))


@db_group.command("current")
@format_option()
@click.pass_context
@user_errors
def db_current(ctx, fmt):
    """Show the registry's schema revision and the newest this kvreg knows."""
    from kvreg.db.read import current_revision
    from kvreg.db.fastpath import display_url, head_revision

    # prepare=False: the full path connects without upgrading the registry it reports on.
    rev = read(ctx, current_revision, prepare=False)
    head = head_revision()
    if head is None:  # the migration files do not name one head: ask Alembic (it loads SQLAlchemy)
        from kvreg.db.engine import head_revision as alembic_head

        head = alembic_head()
    url = ctx.find_root().obj.get("db_url")
    emit([{"registry": display_url(url), "revision": rev, "head": head, "at_head": rev == head}], fmt)


@db_group.command("history")
@format_option()
@user_errors
def db_history(fmt):
    """List the schema revisions, newest first."""
    from alembic.script import ScriptDirectory

    from kvreg.db.engine import migrations_dir

    script = ScriptDirectory(str(migrations_dir()))
    emit([{"revision": s.revision, "down_revision": s.down_revision, "message": s.doc}
          for s in script.walk_revisions()], fmt)


@db_group.command("copy")
@click.option("--from", "source", metavar="URL", help="Registry to copy (default: the --db registry).")
@click.option("--to", "target", metavar="URL", required=True,
              help="Database to copy into: migrated to the newest schema, then filled, in one transaction.")
@click.option("--force", is_flag=True, help="Replace the rows the target already holds (refused without it).")
@format_option()
@click.pass_context
@user_errors
def db_copy(ctx, source, target, force, fmt):
    """Copy a whole registry to another database, keeping ids, and verify the copy.

    Every row of every table is copied into the target, migrated to the newest schema first, in
    one transaction; the row counts and a content hash (sha256 of every row, in primary-key
    order) must then be equal on both sides, or nothing is written. A target that already holds
    rows is refused unless --force. Passwords: use PGPASSWORD or ~/.pgpass (docs/postgresql.md).

    \b
    Example:
      kvreg db copy --from sqlite:///registry.db --to postgresql+psycopg://planner@db/kvreg
    """
    from kvreg.db.engine import resolve_url
    from kvreg.interchange.dbcopy import copy_registry

    result = copy_registry(resolve_url(source or ctx.find_root().obj.get("db_url")), target, force=force)
    tables = [{"table": t, "source_rows": n, "target_rows": result.target_rows[t]}
              for t, n in result.source_rows.items()]
    if fmt == "table":
        click.echo(f"copied {result.source} -> {result.target} (schema revision {result.revision})")
        if result.replaced_rows:
            click.echo(f"replaced the {result.replaced_rows} rows the target held (--force)")
        emit(tables, fmt)
        click.echo(f"content sha256 source {result.source_sha256}")
        click.echo(f"content sha256 target {result.target_sha256}  (equal: verified)")
        return
    emit([{"source": result.source, "target": result.target, "revision": result.revision, **{
        f"{t['table']}_rows": t["target_rows"] for t in tables}, "replaced_rows": result.replaced_rows,
        "source_sha256": result.source_sha256, "target_sha256": result.target_sha256,
        "verified": result.source_sha256 == result.target_sha256}], fmt)


# Bookkeeping tables: what they lose in a downgrade is not the user's data.
_NOT_DATA = ("alembic_version", "kvreg_meta", "scenario")


def _inventory(conn) -> dict[str, tuple[int, dict[str, int]]]:
    """table -> (rows, column -> non-null values), for every data table."""
    from sqlalchemy import inspect, text

    out = {}
    for table in inspect(conn).get_table_names():
        if table in _NOT_DATA:
            continue
        cols = [c["name"] for c in inspect(conn).get_columns(table)]
        q = conn.dialect.identifier_preparer.quote
        sql = f"SELECT COUNT(*){''.join(f', COUNT({q(c)})' for c in cols)} FROM {q(table)}"
        counts = conn.execute(text(sql)).one()
        out[table] = (counts[0], dict(zip(cols, counts[1:])))
    return out


def _losses(before: dict, after: dict) -> list[str]:
    """What a schema change dropped: whole tables' rows, rows, and values of dropped columns."""
    lost = []
    for table, (rows, cols) in sorted(before.items()):
        if table not in after:
            if rows:
                lost.append(f"{rows:,} {table} row{'s' if rows != 1 else ''}")
            continue
        rows_after, cols_after = after[table]
        if rows_after < rows:
            lost.append(f"{rows - rows_after:,} {table} row{'s' if rows - rows_after != 1 else ''}")
        lost += [f"{n:,} value{'s' if n != 1 else ''} of {table}.{c}" for c, n in cols.items()
                 if n and c not in cols_after]
    return lost


def _mark_downgraded(conn, downgraded: bool) -> None:
    """Record (or clear) that the user downgraded the registry, so no command upgrades it unasked."""
    from sqlalchemy import inspect, text

    from kvreg.db.engine import DOWNGRADED_KEY

    if not inspect(conn).has_table("kvreg_meta"):
        return
    conn.execute(text("DELETE FROM kvreg_meta WHERE key = :k"), {"k": DOWNGRADED_KEY})
    if downgraded:
        conn.execute(text("INSERT INTO kvreg_meta (key, value) VALUES (:k, :v)"),
                     {"k": DOWNGRADED_KEY, "v": current_revision_of(conn) or "base"})


def current_revision_of(conn):
    from kvreg.db.engine import current_revision

    return current_revision(conn)


def _alembic(ctx, action: str, revision: str, yes: bool = False) -> list[str]:
    from alembic import command
    from alembic.util import CommandError
    from sqlalchemy.exc import SQLAlchemyError

    from kvreg.core.errors import KvregError
    from kvreg.db.engine import (
        alembic_config,
        check_openable,
        connect_error,
        current_revision,
        known_revisions,
        make_engine,
        mask_url,
    )

    url = _url(ctx)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            rev = current_revision(conn)
            if rev is None:
                check_openable(conn, url, None)  # someone else's tables: never add kvreg's to them
            if rev is not None and rev not in known_revisions():
                raise KvregError(f"registry {mask_url(url)} is at revision {rev}, newer than this kvreg knows: "
                                 "upgrade kvreg; the registry was left untouched")
            before = _inventory(conn) if action == "downgrade" else {}
            try:
                getattr(command, action)(alembic_config(url, conn), revision)
            except CommandError as exc:
                raise KvregError(f"cannot {action} to {revision!r}: {exc}") from None
            lost = _losses(before, _inventory(conn)) if action == "downgrade" else []
            if lost and not yes:
                raise KvregError(f"downgrading registry {mask_url(url)} to {revision} would drop {', '.join(lost)}: "
                                 "nothing was changed; pass --yes to drop them (keep a copy first: kvreg db copy)")
            _mark_downgraded(conn, action == "downgrade")
            return lost
    except SQLAlchemyError as exc:
        raise connect_error(url, exc) from None
    finally:
        engine.dispose()
