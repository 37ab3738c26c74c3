"""Alembic environment for kvreg.

Views are derived objects: they are dropped before any migration runs (SQLite's batch mode
cannot rebuild a table a view reads) and recreated from the figure declarations when the
registry ends at head. A registry left below head has no views until it is upgraded again.
"""

import os

from alembic import context
from alembic.script import ScriptDirectory

from kvreg.db.tables import SQLModel
from kvreg.figures.views import drop_views, recreate_views

config = context.config
target_metadata = SQLModel.metadata


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        drop_views(connection)
        context.run_migrations()
    heads = set(ScriptDirectory.from_config(config).get_heads())
    current = set(context.get_context().get_current_heads())
    if heads and current == heads:
        recreate_views(connection)


def run_migrations_offline() -> None:
    raise SystemExit("kvreg migrations run online only: they recreate views from the figure declarations")


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from kvreg.db.engine import make_engine, resolve_url

    url = config.get_main_option("sqlalchemy.url") or resolve_url(None)
    if url == "driver://user:pass@localhost/dbname":
        url = resolve_url(None)
    engine = make_engine(os.environ.get("KVREG_DB") or url)
    with engine.begin() as connection:
        _run(connection)
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
