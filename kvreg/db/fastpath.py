"""The fast read path: answer from a SQLite registry with the stdlib alone.

Importing SQLAlchemy, SQLModel and Alembic costs about 0.3 s, more than a planner should wait
for one listing or what-if (DESIGN.md: start-up cost). A registry that is already at the schema
head, seeded, and whose views were compiled from the current figure declarations needs none of
them: the views hold every figure, and reading them is plain SQL. Such a registry is opened
with sqlite3 and the question is answered by the same functions that run on a SQLAlchemy
connection (kvreg.db.read, the one read path every read command takes). Anything else (a
missing file, an older schema, stale views, a URL with options, PostgreSQL) is left to the full
path, open_registry, which creates, upgrades, seeds or re-syncs as needed.

Which registries are read this way is decided by `eligibility` alone.

Stdlib only at import time: this module is loaded by every read command.
"""

from __future__ import annotations

import os
import re
import sqlite3

from kvreg.db.revision import head_revision
from kvreg.figures.fingerprint import figures_fingerprint

# kvreg.figures.views.VIEW_NAMES, kept equal by a test (importing views compiles nothing but
# still costs 30 ms).
VIEW_NAMES = ("model_kv", "capacity", "plan_class", "plan_capacity", "plan_quarter", "fleet_quarter",
              "procurement")
DEFAULT_URL = "sqlite:///registry.db"  # kvreg.db.engine.DEFAULT_URL


def sqlite_file(url: str | None) -> str | None:
    """The absolute path of a plain `sqlite:///path` registry URL; None for anything else.

    URLs with options, escapes, `~` or an in-memory database are left to SQLAlchemy's parser.
    """
    url = url or os.environ.get("KVREG_DB") or DEFAULT_URL
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return None
    path = url[len(prefix):]
    if not path or path == ":memory:" or any(c in path for c in "?#%~"):
        return None
    return os.path.abspath(path)


# Set to anything but "" or 0 to send every read down the full (SQLAlchemy) path: tests compare the
# two paths' output byte for byte, and a suspected fast-path difference is checked the same way.
FULL_PATH_ENV = "KVREG_FULL_PATH"


def eligibility(path: str, conn: sqlite3.Connection) -> str | None:
    """Why the SQLite registry at `path`, open on `conn` inside the read's transaction, must take the
    full path; None when the fast path may answer: at HEAD_REVISION, seeded, views present and
    compiled from the current declarations (the state in which open_registry would change nothing).

    The one place that decides; extend it (and only it) when opening a registry learns a new check.
    """
    if os.environ.get(FULL_PATH_ENV, "") not in ("", "0"):
        return f"{FULL_PATH_ENV} is set"
    try:
        revs = [r[0] for r in conn.execute("SELECT version_num FROM alembic_version")]
        meta = dict(conn.execute("SELECT key, value FROM kvreg_meta WHERE key IN ('seeded', 'views_hash', 'views_source')"))
        views = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
    except sqlite3.Error:  # no such table: a new or foreign file
        return "not a kvreg registry (no alembic_version or kvreg_meta table)"
    if len(revs) != 1 or revs[0] != head_revision():
        return f"schema revision {revs} is not the head {head_revision()!r}"
    if "seeded" not in meta:
        return "not seeded"
    # kvreg.figures.views.source_key: the figure sources the views' SQL was last compiled from.
    if meta.get("views_source") != f"{figures_fingerprint('sqlite')} {meta.get('views_hash')}":
        return "views compiled from other declarations"
    if not set(VIEW_NAMES) <= views:
        return f"views missing: {', '.join(sorted(set(VIEW_NAMES) - views))}"
    return None


def _connect(path: str) -> sqlite3.Connection | None:
    """sqlite3 with the settings kvreg.db.engine gives every connection; None if it cannot open."""
    if not os.path.isfile(path):  # sqlite3.connect would create it; open_registry must, and seed it
        return None
    try:
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 30000")
    except sqlite3.Error:
        return None
    return conn


def read(url: str | None, fn) -> tuple[bool, object]:
    """(True, fn(conn)) on a stdlib sqlite3 connection to an eligible registry, inside one transaction
    that is rolled back; (False, None), fn not called, when the registry needs the full path.

    Callers use kvreg.db.read.read, which takes the full path itself when this declines. fn runs
    the same SQL on this connection as on a SQLAlchemy one (kvreg.db.read.runner). Errors fn
    raises propagate unchanged.
    """
    path = sqlite_file(url)
    conn = _connect(path) if path else None
    if conn is None:
        return False, None
    try:
        # One read transaction around the check and the answer: both see the same snapshot (an
        # upgrade committed meanwhile is not seen half). Deferred, not IMMEDIATE: in WAL mode a read
        # neither waits for a writer nor blocks one; what-ifs only read (kvreg.db.read.whatif).
        conn.execute("BEGIN")
        try:
            if eligibility(path, conn) is not None:
                return False, None
            return True, fn(conn)
        finally:
            conn.execute("ROLLBACK")
    except sqlite3.Error:  # locked, read-only, damaged: the full path reports it properly
        return False, None
    finally:
        conn.close()


_PLAIN_PATH = re.compile(r"[A-Za-z0-9 ./_+-]*")


def display_url(url: str | None) -> str:
    """The registry URL as `kvreg db current` prints it (kvreg.db.engine.mask_url's text). A sqlite:///
    URL of plain characters holds no password and mask_url prints it as given; any other is
    masked (and percent-escaped) by mask_url itself, which loads SQLAlchemy."""
    url = url or os.environ.get("KVREG_DB") or DEFAULT_URL
    if sqlite_file(url) is not None and _PLAIN_PATH.fullmatch(url[len("sqlite:///"):]):
        return url
    # lazy: SQLAlchemy (kvreg.db.engine) loads only for a URL that needs masking
    from kvreg.db.engine import mask_url

    return mask_url(url)
