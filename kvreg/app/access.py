"""Opening the registry as every command does: the database opened, upgraded and given its views
(kvreg.db.engine), and a new one seeded with the built-in catalog (kvreg.catalog.load).

The catalog writes the tables the db layer defines, so the db layer does not import it: this
module, above both, hands the catalog's seeding to the db layer's open.

Standard library only at import time (kvreg.db.read is): every read command imports it.
"""

from __future__ import annotations

from collections.abc import Callable

from kvreg.db import read as read_path


def open_registry(url: str | None = None, *, on_seeded: Callable[[str], None] | None = None):
    """The registry at `url` (None: $KVREG_DB, else sqlite:///registry.db), opened the full way
    (SQLAlchemy): created, upgraded, seeded with the built-in catalog when new, its views current.
    `on_seeded(url)` is called when this open seeded a new registry."""
    # lazy: SQLAlchemy and the catalog's loader, only for a command that opens the registry the full way
    from kvreg.catalog.load import seed_if_empty
    from kvreg.db.engine import open_database

    return open_database(url, seed=seed_if_empty, on_seeded=on_seeded)


def read(url: str | None, fn, *, prepare: bool = True, on_seeded: Callable[[str], None] | None = None):
    """fn(conn) on the registry by the one read path (kvreg.db.read.read): sqlite3 alone for a current
    SQLite registry, else opened with open_registry, or with prepare=False connected to as it is
    (`kvreg db current` must not upgrade what it reports on)."""

    def open_full(resolved: str):
        if prepare:
            return open_registry(resolved, on_seeded=on_seeded)
        # lazy: SQLAlchemy, only on the full path
        from kvreg.db.engine import make_engine

        return make_engine(resolved)

    return read_path.read(url, fn, open_full)
