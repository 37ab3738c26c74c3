"""Opening a registry: engine setup, upgrade-on-open, the built-in catalog, the views.

Every command opens the registry through `open_registry`, so a newcomer never runs `init`:
a missing SQLite file is created, migrated to head, seeded and given its views.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

DEFAULT_URL = "sqlite:///registry.db"


class RegistryError(RuntimeError):
    """A registry that cannot be opened or used; the message says what to do."""


class UnstorableValue(RegistryError):
    """A value the database cannot hold (detail: the database's reason, one line)."""

    def __init__(self, detail: str):
        super().__init__(f"the registry cannot store a value given: {detail}; nothing was saved")
        self.detail = detail


def resolve_url(url: str | None) -> str:
    """The registry URL to use: the one given, else $KVREG_DB, else sqlite:///registry.db."""
    return url or os.environ.get("KVREG_DB") or DEFAULT_URL


# libpq reads a password from these query parameters too (postgresql://u@h/db?password=...).
_SECRET_QUERY_KEYS = ("password", "sslpassword")


def mask_url(url: str) -> str:
    """The URL with its password replaced by ***, safe to print."""
    try:
        u = make_url(url)
    except Exception:  # an unparsable URL may still hold a secret: show nothing of it
        return "<unparsable database URL>"
    hidden = {k: "HIDDEN-SECRET" for k in _SECRET_QUERY_KEYS if k in u.query}
    if hidden:
        u = u.update_query_dict(hidden)
    return u.render_as_string(hide_password=True).replace("HIDDEN-SECRET", "***")


def _secrets(url: str) -> list[str]:
    """Every spelling of the URL's password(s) that could turn up in a driver's message."""
    from urllib.parse import quote

    try:
        u = make_url(url)
    except Exception:  # an unparsable URL: nothing to look for
        return []
    found = [u.password] if u.password else []
    for k in _SECRET_QUERY_KEYS:
        v = u.query.get(k)
        found += [v] if isinstance(v, str) else list(v or ())
    out = set()
    for pw in filter(None, found):
        out |= {pw, quote(pw, safe=""), quote(pw)}
    return sorted(out, key=len, reverse=True)


def make_engine(url: str) -> Engine:
    """An engine with the pragmas and transaction handling kvreg relies on.

    Failing to reach the database raises RegistryError with the password masked, from any
    statement of any command, not only from open_registry."""
    try:
        u = make_url(url)
    except ArgumentError:
        raise RegistryError(
            f"database URL {mask_url(url)!r} is not understood: use sqlite:///path/registry.db or "
            "postgresql+psycopg://user@host/dbname"
        ) from None
    backend = u.get_backend_name()
    if backend == "sqlite":
        db = u.database
        if db and db != ":memory:":
            parent = Path(db).expanduser().resolve().parent
            if not parent.is_dir():
                raise RegistryError(f"cannot open registry {db!r}: folder {str(parent)!r} does not exist")
        engine = _create(url, u, connect_args={"timeout": 30})
        _sqlite_transactions(engine)
    elif backend == "postgresql":
        from sqlalchemy.pool import NullPool

        # NullPool: a kvreg command is short, so a pooled connection would only linger idle on a
        # shared server after the command is done with it.
        engine = _create(url, u, connect_args={"connect_timeout": 10}, poolclass=NullPool)
    else:
        raise RegistryError(
            f"database URL scheme {u.drivername!r} is not supported: use sqlite:/// or postgresql+psycopg://"
        )
    _mask_connect_errors(engine, url)
    return engine


def _create(url: str, u, **kwargs) -> Engine:
    from sqlalchemy.exc import NoSuchModuleError

    try:
        return create_engine(u, **kwargs)
    except (ArgumentError, NoSuchModuleError, ImportError, TypeError) as exc:
        raise RegistryError(
            f"cannot use database URL {mask_url(url)}: {_masked(url, _first_line(exc))}: "
            "use sqlite:///path/registry.db or postgresql+psycopg://user@host/dbname"
        ) from None


def _mask_connect_errors(engine: Engine, url: str) -> None:
    """Turn a failure to connect (or a lost connection) into one masked RegistryError line, and a
    value the database cannot hold (PostgreSQL's INTEGER stops at 2**31 - 1, text cannot hold
    NUL) into one line instead of a traceback; the caller's transaction then rolls back.

    Other statement errors (a constraint, SQLite's "database is locked") are left alone so
    callers can still catch and retry them."""
    from sqlalchemy.exc import DataError

    @event.listens_for(engine, "handle_error")
    def _handle(ctx):
        if ctx.connection is None or ctx.is_disconnect:
            raise _connect_error(url, ctx.original_exception)
        if isinstance(ctx.sqlalchemy_exception, DataError):
            raise UnstorableValue(" ".join(_masked(url, _first_line(ctx.original_exception)).split()))


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


def _first_line(exc: BaseException) -> str:
    text_ = str(getattr(exc, "orig", None) or exc).strip()
    return text_.splitlines()[0].strip() if text_ else type(exc).__name__


def _masked(url: str, detail: str) -> str:
    """detail with the URL's password (plain and percent-encoded) replaced by ***."""
    for secret in _secrets(url):
        detail = detail.replace(secret, "***")
    return detail


_HINTS = (  # (pattern in the driver's message, what to do about it)
    (r"password authentication failed", "check the password (in the URL, PGPASSWORD or ~/.pgpass)"),
    (r"no password supplied", "give the password in PGPASSWORD or ~/.pgpass (or in the URL)"),
    (r'database ".*" does not exist', "create the database first (createdb) or fix the URL"),
    (r'role ".*" does not exist', "check the user name in the URL"),
    (r"Connection refused", "is the server running, on that host and port?"),
    (r"timeout expired", "is the host reachable, and the port right?"),
    (r"could not translate host name|failed to resolve host", "check the host name in the URL"),
)


def _connect_error(url: str, exc: BaseException) -> RegistryError:
    """A one-line RegistryError for a database that cannot be reached, password masked."""
    import re

    detail = " ".join(_masked(url, _first_line(exc)).split()).removeprefix("connection failed: ")
    hint = next((h for pattern, h in _HINTS if re.search(pattern, detail)), None)
    return RegistryError(f"cannot open registry {mask_url(url)}: {detail}" + (f"; {hint}" if hint else ""))


_OPEN_LOCK = 0x6B7672  # "kvr": the advisory lock key open_registry takes on PostgreSQL


def open_registry(url: str | None = None, *, upgrade: bool = True, seed: bool = True,
                  on_seeded: Callable[[str], None] | None = None) -> Engine:
    """Open (creating, upgrading and seeding as needed) the registry at `url`. `on_seeded(url)` is
    called, once the seeding has committed, when this open loaded the built-in catalog into a new
    registry (the CLI says so on stderr)."""
    url = resolve_url(url)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            seeded = prepare_registry(conn, url, upgrade=upgrade, seed=seed)
    except RegistryError:
        engine.dispose()
        raise
    except SQLAlchemyError as exc:
        engine.dispose()
        raise _connect_error(url, exc) from None
    if seeded and on_seeded is not None:
        on_seeded(url)
    return engine


def prepare_registry(conn, url: str, *, upgrade: bool = True, seed: bool = True) -> bool:
    """Inside the caller's transaction: refuse a registry from a newer kvreg (changing nothing),
    migrate to head, seed an empty one, and bring the views in line with the declarations.
    True when this call loaded the built-in catalog (a new registry)."""
    if conn.dialect.name == "postgresql":
        # Two first opens at once would both migrate and seed: take turns (SQLite's BEGIN
        # IMMEDIATE already does this). The lock is released when the transaction ends.
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_OPEN_LOCK})")
    from kvreg import fastpath

    rev = current_revision(conn)
    # At head (read from the migration files' revision lines, as Alembic finds it), there is nothing
    # to refuse or migrate: skip Alembic's import and walk of the scripts (0.3 s on every command).
    if rev is None or rev != fastpath.head_revision():
        if rev is not None and rev not in known_revisions():
            raise RegistryError(
                f"registry {mask_url(url)} is at schema revision {rev}, newer than this kvreg knows "
                f"(head {head_revision()}): upgrade kvreg; the registry was left untouched"
            )
        if upgrade and rev != head_revision():
            _upgrade(conn, url)
    seeded = False
    if seed:
        from kvreg.catalog.load import seed_if_empty

        seeded = seed_if_empty(conn)
    from kvreg.figures.views import sync_views

    sync_views(conn)
    return seeded


def _upgrade(conn, url: str, target: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(url, conn), target)


@contextmanager
def transaction(engine: Engine):
    """One transaction: everything inside commits together or not at all."""
    with engine.begin() as conn:
        yield conn
