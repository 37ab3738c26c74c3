"""Opening a registry: engine setup, upgrade-on-open, the built-in catalog, the views.

Every command opens the registry through `open_registry`, so a newcomer never runs `init`:
a missing SQLite file is created, migrated to head, seeded and given its views.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError

DEFAULT_URL = "sqlite:///registry.db"


class RegistryError(RuntimeError):
    """A registry that cannot be opened or used; the message says what to do."""


def resolve_url(url: str | None) -> str:
    return url or os.environ.get("KVREG_DB") or DEFAULT_URL


def mask_url(url: str) -> str:
    """The URL with its password replaced by ***, safe to print."""
    try:
        u = make_url(url)
    except Exception:  # an unparsable URL may still hold a secret: show nothing of it
        return "<unparsable database URL>"
    if u.password is not None:
        return u.render_as_string(hide_password=True)
    return str(u)


def make_engine(url: str) -> Engine:
    """An engine with the pragmas and transaction handling kvreg relies on."""
    try:
        u = make_url(url)
    except ArgumentError:
        raise RegistryError(
            f"database URL {mask_url(url)!r} is not understood: use sqlite:///path/registry.db or "
            "postgresql+psycopg://user@host/dbname"
        ) from None
    if u.get_backend_name() == "sqlite":
        db = u.database
        if db and db != ":memory:":
            parent = Path(db).expanduser().resolve().parent
            if not parent.is_dir():
                raise RegistryError(f"cannot open registry {db!r}: folder {str(parent)!r} does not exist")
        engine = create_engine(u, connect_args={"timeout": 30})
        _sqlite_transactions(engine)
        return engine
    if u.get_backend_name() == "postgresql":
        args = {"connect_timeout": 10}
        return create_engine(u, connect_args=args, pool_pre_ping=False)
    raise RegistryError(f"database URL scheme {u.drivername!r} is not supported: use sqlite:/// or postgresql+psycopg://")


def _sqlite_transactions(engine: Engine) -> None:
    """Make SQLite transactions real, DDL included (SQLAlchemy's documented pysqlite recipe),
    and set the pragmas: foreign keys, WAL, a busy timeout so writers wait instead of failing."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute("PRAGMA busy_timeout = 30000")
        try:
            cur.execute("PRAGMA journal_mode = WAL")
        except Exception:  # read-only media: keep the default journal
            pass
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def migrations_dir() -> Path:
    import kvreg.migrations

    return Path(kvreg.migrations.__file__).resolve().parent


def alembic_config(url: str, connection=None):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(migrations_dir())).get_current_head()


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory(str(migrations_dir())).walk_revisions()}


def current_revision(conn) -> str | None:
    from sqlalchemy import inspect

    if not inspect(conn).has_table("alembic_version"):
        return None
    row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    return row[0] if row else None


def _connect_error(url: str, exc: Exception) -> RegistryError:
    detail = str(getattr(exc, "orig", exc)).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    pw = None
    try:
        pw = make_url(url).password
    except Exception:
        pass
    if pw:
        detail = detail.replace(pw, "***")
    return RegistryError(f"cannot open registry {mask_url(url)}: {detail}")


def open_registry(url: str | None = None, *, upgrade: bool = True, seed: bool = True) -> Engine:
    """Open (creating, upgrading and seeding as needed) the registry at `url`."""
    url = resolve_url(url)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            rev = current_revision(conn)
            if rev is not None and rev not in known_revisions():
                raise RegistryError(
                    f"registry {mask_url(url)} is at schema revision {rev}, newer than this kvreg knows "
                    f"(head {head_revision()}): upgrade kvreg; the registry was left untouched"
                )
            if upgrade and rev != head_revision():
                _upgrade(conn, url)
            if seed:
                from kvreg.catalog.load import seed_if_empty

                seed_if_empty(conn)
            from kvreg.figures.views import sync_views

            sync_views(conn)
    except RegistryError:
        engine.dispose()
        raise
    except OperationalError as exc:
        engine.dispose()
        raise _connect_error(url, exc) from None
    except SQLAlchemyError as exc:
        engine.dispose()
        raise _connect_error(url, exc) from None
    return engine


def _upgrade(conn, url: str, target: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(url, conn), target)


@contextmanager
def transaction(engine: Engine):
    """One transaction: everything inside commits together or not at all."""
    with engine.begin() as conn:
        yield conn
