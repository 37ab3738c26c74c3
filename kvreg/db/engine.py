"""Opening a registry's database: engine setup, upgrade-on-open, seeding a new one, the views.

Every command opens the registry through kvreg.app.access.open_registry (this module's
`open_database` with the built-in catalog as its seed), so a newcomer never runs `init`: a missing
SQLite file is created, migrated to head, seeded and given its views. What seeds a new registry is
handed in (`seed`): the catalog writes the tables this layer defines, so this layer does not
import it.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DataError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.pool import NullPool

import kvreg
from kvreg.core.errors import UserError
from kvreg.db.revision import head_revision as scanned_head
from kvreg.figures.views import sync_views

DEFAULT_URL = "sqlite:///registry.db"


class RegistryError(UserError, RuntimeError):
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


def check_url(url: str):
    """The parsed URL of a registry kvreg can keep, or a one-line RegistryError: the checks every
    way of opening a registry shares (open_registry, `db` commands, the fast path).

    Refused: an unparsable URL or port, a SQLite database that cannot persist (no path,
    :memory:, mode=memory: whatever is written is lost at exit), a path that is not UTF-8.
    `~` in a SQLite path is expanded (SQLite itself would not)."""
    try:
        u = make_url(url)
        u.port  # noqa: B018 - a non-numeric port fails here, not deep in the driver
    except (ArgumentError, ValueError):
        raise RegistryError(
            f"database URL {mask_url(url)!r} is not understood: use sqlite:///path/registry.db or "
            "postgresql+psycopg://user@host/dbname"
        ) from None
    if u.get_backend_name() != "sqlite":
        return u
    db = u.database or ""
    memory = "memory" in (u.query.get("mode") or "")
    if not db or db == ":memory:" or db.startswith("file::memory:") or memory:
        raise RegistryError(
            f"database URL {mask_url(url)!r} names no file (an in-memory database): everything written "
            "would be lost when kvreg exits; give a file, such as sqlite:///registry.db"
        )
    if not _is_utf8(db):
        raise RegistryError(f"registry path {_printable(db)} is not valid UTF-8: rename the file or folder")
    if db.startswith("~"):
        u = u.set(database=os.path.expanduser(db))
    return u


def _is_utf8(text_: str) -> bool:
    try:
        text_.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes of a file name arrive as lone surrogates
        return False
    return True


def _printable(text_: str) -> str:
    """A path that may hold undecodable bytes, printable: those bytes as hex escapes."""
    return repr(os.fsencode(text_))[1:] if not _is_utf8(text_) else repr(text_)


def make_engine(url: str) -> Engine:
    """An engine with the pragmas and transaction handling kvreg relies on.

    Failing to reach the database raises RegistryError with the password masked, from any
    statement of any command, not only from open_registry."""
    u = check_url(url)
    backend = u.get_backend_name()
    if backend == "sqlite":
        parent = Path(u.database).resolve().parent
        if not parent.is_dir():
            raise RegistryError(f"cannot open registry {u.database!r}: folder {str(parent)!r} does not exist")
        timeout = u.query.get("timeout")
        if timeout is not None:
            try:
                float(timeout)
            except ValueError:
                raise RegistryError(f"database URL option timeout={timeout!r} is not a number of seconds") from None
        read_only, immutable = _read_only_file(u.database)
        if read_only:  # reads must still work: open it read-only (writes then fail in one line)

            query = {"mode": "ro", "uri": "true", **({"immutable": "1"} if immutable else {})}
            u = u.set(database=f"file:{quote(str(Path(u.database).resolve()))}").update_query_dict(query)
        engine = _create(url, u, connect_args={"timeout": 30})
        _sqlite_transactions(engine, url)
    elif backend == "postgresql":
        # NullPool: a kvreg command is short, so a pooled connection would only linger idle on a
        # shared server after the command is done with it.
        # JIT off unless the URL sets options of its own: compiling one procurement query took
        # PostgreSQL 15 s, for queries that run in milliseconds without it.
        connect_args = {"connect_timeout": 10}
        if "options" not in u.query:
            connect_args["options"] = "-c jit=off"
        engine = _create(url, u, connect_args=connect_args, poolclass=NullPool)
    else:
        raise RegistryError(
            f"database URL scheme {u.drivername!r} is not supported: use sqlite:/// or postgresql+psycopg://"
        )
    _mask_connect_errors(engine, url)
    return engine


def _create(url: str, u, **kwargs) -> Engine:
    try:
        return create_engine(u, **kwargs)
    except (ArgumentError, NoSuchModuleError, ImportError, TypeError) as exc:
        raise RegistryError(
            f"cannot use database URL {mask_url(url)}: {masked_detail(url, _first_line(exc))}: "
            "use sqlite:///path/registry.db or postgresql+psycopg://user@host/dbname"
        ) from None


def _mask_connect_errors(engine: Engine, url: str) -> None:
    """Turn a failure to connect (or a lost connection) into one masked RegistryError line, and a
    value the database cannot hold (PostgreSQL's INTEGER stops at 2**31 - 1, text cannot hold
    NUL) into one line instead of a traceback; the caller's transaction then rolls back.

    Other statement errors (a constraint, SQLite's "database is locked") are left alone so
    callers can still catch and retry them."""
    @event.listens_for(engine, "handle_error")
    def _handle(ctx):
        if not isinstance(ctx.original_exception, Exception):
            # Ctrl-C (KeyboardInterrupt) or SystemExit inside a statement: SQLAlchemy counts it as a
            # disconnect, but it is the user's, answered by the CLI ("interrupted", exit 130).
            return
        if ctx.connection is None:
            raise connect_error(url, ctx.original_exception)
        if ctx.is_disconnect:  # it was open: the server went away partway through the command
            detail = " ".join(masked_detail(url, _first_line(ctx.original_exception)).split())
            raise RegistryError(f"lost the connection to registry {mask_url(url)} partway: {detail}; "
                                "nothing was written: run the command again when the server is back")
        if isinstance(ctx.sqlalchemy_exception, DataError):
            raise UnstorableValue(" ".join(masked_detail(url, _first_line(ctx.original_exception)).split()))
        detail = str(ctx.original_exception)
        if "readonly database" in detail or "read-only transaction" in detail:
            raise RegistryError(f"registry {mask_url(url)} is read-only: nothing was written; make the file and "
                                "its folder writable, or copy it elsewhere (kvreg db copy)")
        if "database or disk is full" in detail or "No space left on device" in detail or "DiskFull" in detail:
            raise RegistryError(f"the disk holding registry {mask_url(url)} is full: nothing was written; "
                                "free some space and run the command again")
        if "disk I/O error" in detail:
            raise RegistryError(f"registry {mask_url(url)}: disk I/O error: nothing was written; check the disk")


LOCK_TIMEOUT_ENV = "KVREG_LOCK_TIMEOUT"


def lock_timeout() -> float:
    """Seconds a writer waits for another writer's lock on a SQLite registry (KVREG_LOCK_TIMEOUT,
    default 30)."""
    try:
        value = float(os.environ.get(LOCK_TIMEOUT_ENV) or 30)
    except ValueError:
        raise RegistryError(f"{LOCK_TIMEOUT_ENV}={os.environ[LOCK_TIMEOUT_ENV]!r} is not a number of seconds") from None
    if not 0 <= value <= 86400:
        raise RegistryError(f"{LOCK_TIMEOUT_ENV}={value:g} must be between 0 and 86400 seconds")
    return value


QUIET_WAIT_MS = 1000
_SAID_WAITING: set[str] = set()


# SQLAlchemy Connection.info key: this connection reads one snapshot and never writes (on SQLite a
# plain BEGIN, which in WAL mode neither waits for writers nor blocks them).
READ_SNAPSHOT = "kvreg_read_snapshot"


def _read_only_file(path: str) -> tuple[bool, bool]:
    """(read-only, immutable) for an existing SQLite file: read-only when kvreg cannot write the
    file or its folder (WAL needs to create -wal and -shm beside it); immutable when nobody else
    can be writing either (the folder is read-only and no -wal is there), so SQLite may skip locks."""
    if not os.path.isfile(path):
        return False, False
    folder_writable = os.access(os.path.dirname(path) or ".", os.W_OK)
    read_only = not os.access(path, os.W_OK) or not folder_writable
    immutable = read_only and not folder_writable and not os.path.exists(path + "-wal")
    return read_only, immutable


def _sqlite_transactions(engine: Engine, url: str) -> None:
    """Make SQLite transactions real, DDL included (SQLAlchemy's documented pysqlite recipe),
    and set the pragmas: foreign keys, WAL, a busy timeout so writers wait instead of failing.

    A writer takes the write lock at BEGIN (IMMEDIATE); one that has to wait says so on stderr,
    and one that waited KVREG_LOCK_TIMEOUT seconds in vain stops with one line. A connection
    marked READ_SNAPSHOT begins a plain read transaction instead."""
    timeout_ms = int(lock_timeout() * 1000)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute(f"PRAGMA busy_timeout = {timeout_ms}")
        try:
            # Only a new file or a kvreg registry: switching journal mode rewrites the file's header,
            # and a database that is not a registry is to be refused untouched (check_openable).
            tables = {r[0] for r in cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables or "alembic_version" in tables:
                cur.execute("PRAGMA journal_mode = WAL")
        except Exception:  # read-only media: keep the default journal
            pass
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        if conn.info.get(READ_SNAPSHOT) or engine.url.query.get("mode") == "ro":
            conn.exec_driver_sql("BEGIN")
            return
        cur = conn.connection.driver_connection.cursor()
        try:
            # Waits of under a second (another command's short transaction) go unmentioned.
            cur.execute(f"PRAGMA busy_timeout = {min(timeout_ms, QUIET_WAIT_MS)}")
            try:
                cur.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
            except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
                raise RegistryError(f"registry {mask_url(url)} cannot be opened: {exc} (not an SQLite database, or a"
                                    " damaged one): give a kvreg registry, or a new file name for one") from None
            if url not in _SAID_WAITING:  # once per registry and process, not per transaction

                _SAID_WAITING.add(url)
                sys.stderr.write(f"kvreg: waiting for another command writing to registry {mask_url(url)} "
                                 f"(up to {timeout_ms / 1000:g} s, {LOCK_TIMEOUT_ENV})\n")
                sys.stderr.flush()
            cur.execute(f"PRAGMA busy_timeout = {max(timeout_ms - QUIET_WAIT_MS, 0)}")
            try:
                cur.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                raise RegistryError(
                    f"registry {mask_url(url)} is still locked by another writer after {timeout_ms / 1000:g} s: "
                    f"nothing was written; try again when it has finished (or raise {LOCK_TIMEOUT_ENV})"
                ) from None
        finally:
            cur.execute(f"PRAGMA busy_timeout = {timeout_ms}")
            cur.close()


def migrations_dir() -> Path:
    return Path(kvreg.resource_dir("migrations")).resolve()


def alembic_config(url: str, connection=None):
    # lazy: Alembic (about 0.3 s to import) loads only to migrate a registry or read its history
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    # lazy: Alembic (about 0.3 s to import) loads only to migrate a registry or read its history
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(migrations_dir())).get_current_head()


def known_revisions() -> set[str]:
    # lazy: Alembic (about 0.3 s to import) loads only to migrate a registry or read its history
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory(str(migrations_dir())).walk_revisions()}


def current_revision(conn) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    return row[0] if row else None


def _first_line(exc: BaseException) -> str:
    text_ = str(getattr(exc, "orig", None) or exc).strip()
    return text_.splitlines()[0].strip() if text_ else type(exc).__name__


def masked_detail(url: str, detail: str) -> str:
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


def connect_error(url: str, exc: BaseException) -> RegistryError:
    """A one-line RegistryError for a database that cannot be reached, password masked."""
    detail = " ".join(masked_detail(url, _first_line(exc)).split()).removeprefix("connection failed: ")
    hint = next((h for pattern, h in _HINTS if re.search(pattern, detail)), None)
    return RegistryError(f"cannot open registry {mask_url(url)}: {detail}" + (f"; {hint}" if hint else ""))


# What seeds a new registry: kvreg.catalog.load.seed_if_empty(conn) -> whether it loaded the catalog.
Seed = Callable[[Connection], bool]

_OPEN_LOCK = 0x6B7672  # "kvr": the advisory lock key open_registry takes on PostgreSQL


def open_database(url: str | None, *, seed: Seed | None, upgrade: bool = True,
                  on_seeded: Callable[[str], None] | None = None) -> Engine:
    """Open (creating, upgrading and, with `seed`, seeding as needed) the registry at `url`.
    `seed(conn)` loads a new registry's first rows and says whether it did (kvreg.catalog.load's
    seed_if_empty: kvreg.app.access.open_registry passes it). `on_seeded(url)` is called, once
    the seeding has committed, when it did (the CLI says so on stderr)."""
    url = resolve_url(url)
    engine = make_engine(url)
    # Imported before the transaction, not inside it: on SQLite it holds the write lock, and on
    # a busy machine these imports take seconds that every other writer would wait (the seed's
    # module is imported by whoever hands it in).
    import kvreg.figures.views  # noqa: F401

    try:
        with engine.begin() as conn:
            seeded = prepare_registry(conn, url, upgrade=upgrade, seed=seed)
    except RegistryError:
        engine.dispose()
        raise
    except SQLAlchemyError as exc:
        engine.dispose()
        raise connect_error(url, exc) from None
    if seeded and on_seeded is not None:
        on_seeded(url)
    return engine


def prepare_registry(conn, url: str, *, upgrade: bool = True, seed: Seed | None = None) -> bool:
    """Inside the caller's transaction: refuse a registry from a newer kvreg (changing nothing),
    migrate to head, seed an empty one (with `seed`, see open_database), and bring the views in line
    with the declarations. True when this call seeded it (a new registry)."""
    if conn.dialect.name == "postgresql":
        # Two first opens at once would both migrate and seed: take turns (SQLite's BEGIN
        # IMMEDIATE already does this). The lock is released when the transaction ends.
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_OPEN_LOCK})")
    rev = current_revision(conn)
    # At head (read from the migration files' revision lines, as Alembic finds it), there is nothing
    # to refuse or migrate: skip Alembic's import and walk of the scripts (0.3 s on every command).
    if rev is None or rev != scanned_head():
        check_openable(conn, url, rev)
        if upgrade and rev != head_revision():
            if rev is not None:
                sys.stderr.write(f"kvreg: upgrading registry {mask_url(url)} from schema revision {rev} "
                                 f"to {head_revision()}\n")
            _upgrade(conn, url)
    seeded = seed(conn) if seed is not None else False

    sync_views(conn)
    return seeded


DOWNGRADED_KEY = "downgraded_by_user"  # kvreg_meta: `kvreg db downgrade` left the registry at this revision


def check_openable(conn, url: str, rev: str | None) -> None:
    """Refuse, changing nothing, what kvreg must not adopt or upgrade by itself: a registry from a
    newer kvreg, a non-empty database that is not a kvreg registry (someone else's tables), and a
    registry deliberately downgraded with `kvreg db downgrade` (upgrade it with `kvreg db upgrade`)."""
    if rev is None:
        insp = inspect(conn)
        tables = set(insp.get_table_names())
        # An empty alembic_version is what `kvreg db downgrade base` leaves: a registry emptied on purpose.
        foreign = sorted((tables | set(insp.get_view_names())) - {"alembic_version"})
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise RegistryError(
                f"{mask_url(url)} is not a kvreg registry: it holds other tables ({shown}) and no kvreg schema "
                "revision; it was left untouched: give an empty database or a new file"
            )
        if "alembic_version" in tables:
            sys.stderr.write(f"kvreg: registry {mask_url(url)} was emptied (db downgrade base): creating it afresh\n")
        return
    if rev not in known_revisions():
        raise RegistryError(
            f"registry {mask_url(url)} is at schema revision {rev}, newer than this kvreg knows "
            f"(head {head_revision()}): upgrade kvreg; the registry was left untouched"
        )
    if rev != head_revision() and inspect(conn).has_table("kvreg_meta"):
        mark = conn.execute(text("SELECT value FROM kvreg_meta WHERE key = :k"), {"k": DOWNGRADED_KEY}).first()
        if mark is not None:
            raise RegistryError(
                f"registry {mask_url(url)} was downgraded to schema revision {rev} with `kvreg db downgrade`; "
                f"it is not upgraded without being asked: run `kvreg db upgrade` to use it with this kvreg "
                f"(head {head_revision()})"
            )


def _upgrade(conn, url: str, target: str = "head") -> None:
    # lazy: Alembic (about 0.3 s to import) loads only to migrate a registry or read its history
    from alembic import command

    command.upgrade(alembic_config(url, conn), target)
