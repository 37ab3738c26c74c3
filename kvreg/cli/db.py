"""`kvreg init` and `kvreg db ...`: schema migrations, wrapping Alembic."""

from __future__ import annotations

import click

from kvreg.cli.common import emit, format_option, open_db, user_errors


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
    """Schema migrations (Alembic): upgrade, downgrade, current, history."""


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
    from kvreg.db.engine import current_revision, head_revision, make_engine, mask_url

    url = _url(ctx)
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rev = current_revision(conn)
    except Exception as exc:  # noqa: BLE001 - reported as one line, password masked
        from kvreg.db.engine import _connect_error

        raise _connect_error(url, exc) from None
    emit([{"registry": mask_url(url), "revision": rev, "head": head_revision(), "at_head": rev == head_revision()}], fmt)


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


def _alembic(ctx, action: str, revision: str) -> None:
    from alembic import command
    from alembic.util import CommandError

    from kvreg.db.engine import alembic_config, current_revision, known_revisions, make_engine, mask_url
    from kvreg.errors import KvregError

    url = _url(ctx)
    engine = make_engine(url)
    with engine.begin() as conn:
        rev = current_revision(conn)
        if rev is not None and rev not in known_revisions():
            raise KvregError(f"registry {mask_url(url)} is at revision {rev}, newer than this kvreg knows: upgrade kvreg")
        try:
            getattr(command, action)(alembic_config(url, conn), revision)
        except CommandError as exc:
            raise KvregError(f"cannot {action} to {revision!r}: {exc}") from None
