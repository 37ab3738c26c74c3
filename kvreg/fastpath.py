"""A fast read path: answer from a SQLite registry with the stdlib alone.

Importing SQLAlchemy, SQLModel and Alembic costs about 0.3 s, more than a planner should wait
for one what-if (DESIGN.md: start-up cost). A registry that is already at the schema head,
seeded, and whose views were compiled from the current figure declarations needs none of
them: the views hold every figure, and reading them is plain SQL. Such a registry is opened
with sqlite3 and the question is answered by the same statements kvreg.capacity runs on a
SQLAlchemy connection. Anything else (a missing file, an older schema, stale views, a URL with
options, PostgreSQL) returns None and the caller takes the normal path, open_registry, which
creates, upgrades, seeds or re-syncs as needed.

Stdlib only at import time: this module is loaded on every `kvreg capacity`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sqlite3

# kvreg.figures.views.VIEW_NAMES, kept equal by a test (importing views compiles nothing but
# still costs 30 ms).
VIEW_NAMES = ("model_kv", "capacity", "plan_class", "plan_capacity", "plan_quarter", "fleet_quarter",
              "procurement")
DEFAULT_URL = "sqlite:///registry.db"  # kvreg.db.engine.DEFAULT_URL
_FIGURES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures")


def figures_fingerprint(dialect: str = "sqlite") -> str:
    """sha256 of the dialect and the source of every module in kvreg/figures.

    The views are compiled from those modules alone, so equal sources give equal views; this
    costs a few file reads where compiling the views to compare them costs 40 ms.
    """
    h = hashlib.sha256(dialect.encode() + b"\0")
    for name in sorted(os.listdir(_FIGURES_DIR)):
        if name.endswith(".py"):
            with open(os.path.join(_FIGURES_DIR, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


_ASSIGNMENT = re.compile(r"^(revision|down_revision)\b[^=\n]*=(.*)$", re.M)
_QUOTED = re.compile(r"""['"]([^'"]+)['"]""")


def head_revision() -> str | None:
    """The schema revision this kvreg migrates to, read from the migration files' `revision` and
    `down_revision` lines (Alembic finds the same head by importing them: 0.1 s); None when
    there is not exactly one head, which keeps every registry on the normal path."""
    spec = importlib.util.find_spec("kvreg.migrations")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(list(spec.submodule_search_locations)[0], "versions")
    revisions, parents = set(), set()
    for name in os.listdir(folder):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            found = {k: _QUOTED.findall(v) for k, v in _ASSIGNMENT.findall(f.read())}
        if len(found.get("revision", [])) == 1:
            revisions.update(found["revision"])
            parents.update(found.get("down_revision", []))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


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


def is_current(conn: sqlite3.Connection) -> bool:
    """At HEAD_REVISION, seeded, views present and compiled from the current declarations:
    the state in which open_registry would change nothing."""
    try:
        revs = [r[0] for r in conn.execute("SELECT version_num FROM alembic_version")]
        meta = dict(conn.execute("SELECT key, value FROM kvreg_meta WHERE key IN ('seeded', 'views_hash')"))
        views = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
    except sqlite3.Error:  # no such table: a new or foreign file
        return False
    return (
        len(revs) == 1 and revs[0] == head_revision()
        and "seeded" in meta
        and meta.get("views_hash") == figures_fingerprint("sqlite")
        and set(VIEW_NAMES) <= views
    )


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


def read(url: str | None, fn):
    """fn(conn) on a stdlib sqlite3 connection to a current registry, inside one transaction that is
    rolled back; None (fn not called) when the registry needs the normal path.

    Any read-only command can answer this way; kvreg.capacity.runner(conn) runs the same SQL
    strings on this connection and on a SQLAlchemy one. Errors fn raises propagate unchanged.
    """
    path = sqlite_file(url)
    conn = _connect(path) if path else None
    if conn is None:
        return None
    try:
        # One IMMEDIATE transaction around the check and the answer, as open_registry takes:
        # the registry cannot be upgraded between them, and scratch writes never wait on a
        # stale snapshot.
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not is_current(conn):
                return None
            return fn(conn)
        finally:
            conn.execute("ROLLBACK")
    except sqlite3.Error:  # locked, read-only, damaged: the normal path reports it properly
        return None
    finally:
        conn.close()


def capacity_rows(url: str | None, question) -> list[dict] | None:
    """kvreg.capacity.ask on the fast path, or None when the registry needs the normal path.

    Errors a user can fix (unknown model, invalid TP, ...) are raised exactly as ask raises them.
    """
    from kvreg.capacity import ask

    return read(url, lambda conn: ask(conn, question))
