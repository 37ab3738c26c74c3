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
    from kvreg.db.engine import mask_url
    from kvreg.registry import counts

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
@click.pass_context
@user_errors
def db_downgrade(ctx, revision):
    """Downgrade the registry schema to REVISION (`base` removes every table)."""
    _alembic(ctx, "downgrade", revision)
    click.echo(f"downgraded to {revision}")


@db_group.command("current")
@format_option()
@click.pass_context
@user_errors
def db_current(ctx, fmt):
    """Show the registry's schema revision and the newest this kvreg knows."""
    from kvreg.db.read import current_revision
    from kvreg.fastpath import display_url, head_revision

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
    from kvreg.dbcopy import copy_registry

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


def _alembic(ctx, action: str, revision: str) -> None:
    from alembic import command
    from alembic.util import CommandError
    from sqlalchemy.exc import SQLAlchemyError

    from kvreg.db.engine import _connect_error, alembic_config, current_revision, known_revisions, make_engine, mask_url
    from kvreg.errors import KvregError

    url = _url(ctx)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            rev = current_revision(conn)
            if rev is not None and rev not in known_revisions():
                raise KvregError(f"registry {mask_url(url)} is at revision {rev}, newer than this kvreg knows: "
                                 "upgrade kvreg; the registry was left untouched")
            try:
                getattr(command, action)(alembic_config(url, conn), revision)
            except CommandError as exc:
                raise KvregError(f"cannot {action} to {revision!r}: {exc}") from None
    except SQLAlchemyError as exc:
        raise _connect_error(url, exc) from None
    finally:
        engine.dispose()
