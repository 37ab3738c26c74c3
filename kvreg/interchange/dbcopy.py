"""Move a registry between databases (SQLite and PostgreSQL, either way), and prove the copy.

The proof is a row count per table and a content hash: sha256 over canonical JSON of every row
of every registry table, parents first, rows in primary-key order, values normalised by column
type. The same contents give the same hash on any engine, so equal hashes on both sides mean
the target holds exactly what the source holds.

The source is only read. The target is migrated, filled and verified in one transaction: a
copy that fails or does not verify leaves the target as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Float, Integer, String, delete, func, insert, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from kvreg.app.registry import check_input
from kvreg.core.errors import KvregError
from kvreg.db.engine import (
    UnstorableValue,
    current_revision,
    head_revision,
    known_revisions,
    make_engine,
    mask_url,
    masked_detail,
    prepare_registry,
)
from kvreg.db.tables import Meta, SQLModel
from kvreg.figures.inputs import MAXIMUMS

# scenario is always empty (the capacity view's source; a question binds its rows as parameters, nothing writes
# them); kvreg_meta is bookkeeping (copied, but its views_hash and views_source are per engine, so they are not
# part of the contents).
_NOT_CONTENT = ("scenario", "kvreg_meta")
_DERIVED_META = ("views_hash", "views_source")


def content_tables():
    """The tables holding what users entered, parents before children."""
    return [t for t in SQLModel.metadata.sorted_tables if t.name not in _NOT_CONTENT]


def _value(column, v):
    """A value as the column's type says, whatever the engine returned (SQLite may hand back
    an int from a REAL column, PostgreSQL a Decimal from an aggregate)."""
    if v is None:
        return None
    if isinstance(column.type, Float):
        return float(v)
    if isinstance(column.type, Integer):
        return int(v)
    if isinstance(column.type, String):
        return str(v)
    return v


def read_table(conn, table) -> list[list]:
    """Every row as a list in column order, sorted by primary key in Python: PostgreSQL's text
    collation need not sort names the way SQLite does."""
    cols = list(table.columns)
    pk = [cols.index(c) for c in table.primary_key.columns]
    rows = [[_value(c, v) for c, v in zip(cols, r)] for r in conn.execute(select(*cols))]
    rows.sort(key=lambda r: [r[i] for i in pk])
    return rows


def snapshot(conn) -> dict[str, list[list]]:
    """table name -> rows, for every content table."""
    return {t.name: read_table(conn, t) for t in content_tables()}


def hash_snapshot(snap: dict[str, list[list]]) -> str:
    h = hashlib.sha256()
    for t in content_tables():
        doc = {"table": t.name, "columns": [c.name for c in t.columns], "rows": snap[t.name]}
        h.update(json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=True).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def content_hash(conn) -> str:
    """sha256 of the registry's contents; equal on SQLite and PostgreSQL for equal contents."""
    return hash_snapshot(snapshot(conn))


def row_counts(conn) -> dict[str, int]:
    """Rows per content table."""
    return {t.name: conn.execute(select(func.count()).select_from(t)).scalar_one() for t in content_tables()}


@dataclass
class CopyResult:
    source: str  # masked URL
    target: str  # masked URL
    revision: str
    source_rows: dict[str, int]
    target_rows: dict[str, int]
    source_sha256: str
    target_sha256: str
    replaced_rows: int  # rows the target held before (only with force)


def copy_registry(source_url: str, target_url: str, *, force: bool = False) -> CopyResult:
    """Copy every row of the registry at source_url into target_url, keeping ids.

    The target is migrated to head first (in the same transaction). A target that already holds
    rows is refused unless force, which replaces them. Raises KvregError if the copy does not
    verify (row counts and content hash equal on both sides); nothing is written then."""
    _check_distinct(source_url, target_url)
    revision, snap, meta = _read_source(source_url)
    source_rows = {name: len(rows) for name, rows in snap.items()}
    source_sha = hash_snapshot(snap)

    new_file = _sqlite_path(target_url)
    new_file = new_file if new_file and not new_file.exists() else None
    tmp_file = None
    if new_file:  # a new SQLite file is filled under a temporary name and renamed into place when done
        _clean_stale_copies(new_file)
        tmp_file = new_file.with_name(f".{new_file.name}.kvreg-copy-{os.getpid()}-{secrets.token_hex(4)}")
    engine = make_engine(f"sqlite:///{tmp_file}" if tmp_file else target_url)
    try:
        with engine.begin() as conn:
            replaced = _fill_target(conn, target_url, snap, meta, force)
            target_rows = row_counts(conn)
            target_sha = content_hash(conn)
            if target_rows != source_rows or target_sha != source_sha:
                raise KvregError(
                    f"copy to {mask_url(target_url)} did not verify (rows {target_rows} vs {source_rows}, "
                    f"sha256 {target_sha[:12]} vs {source_sha[:12]}): nothing was written"
                )
        if tmp_file:
            _move_into_place(engine, tmp_file, new_file, target_url)
    except BaseException as exc:
        engine.dispose()
        if tmp_file:  # the failed copy created it: leave no empty registry behind
            _unlink_sqlite(tmp_file)
        if isinstance(exc, SQLAlchemyError):
            raise KvregError(f"cannot copy into {mask_url(target_url)}: {masked_detail(target_url, _one_line(exc))}; "
                             "nothing was written") from None
        raise
    engine.dispose()
    return CopyResult(mask_url(source_url), mask_url(target_url), revision, source_rows, target_rows,
                      source_sha, target_sha, replaced)


_COPY_SUFFIX = ".kvreg-copy-"


def _unlink_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def process_alive(pid: int) -> bool:
    """Whether process `pid` still runs (a temporary it left is not stale yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process: alive
        return True
    return True


def _clean_stale_copies(target: Path) -> None:
    """Delete what killed copies into `target` left: .NAME.kvreg-copy-<pid>-<hex> files (and their
    -wal, -shm) whose process is gone."""
    prefix = f".{target.name}{_COPY_SUFFIX}"
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for name in names:
        if not name.startswith(prefix) or name.endswith(("-wal", "-shm", "-journal")):
            continue
        pid = name[len(prefix):].split("-")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            _unlink_sqlite(target.parent / name)


def _move_into_place(engine, tmp: Path, target: Path, url: str) -> None:
    """Give the finished copy its name: back to a single file first (journal_mode DELETE folds the
    write-ahead log in and removes it; kvreg turns WAL on again at the next open), then a link
    under the target's name, which fails rather than replace a file that appeared meanwhile."""
    raw = engine.raw_connection()  # outside any transaction, where the journal mode can change
    try:
        raw.driver_connection.execute("PRAGMA journal_mode = DELETE")
    finally:
        raw.close()
    engine.dispose()
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise KvregError(f"{mask_url(url)} was created by someone else during the copy: nothing was written "
                         "to it; copy again") from None
    tmp.unlink()


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return " ".join(text.splitlines()[0].split()) if text else type(exc).__name__


def _sqlite_path(url: str) -> Path | None:
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database).expanduser().resolve()


def _where(url: str):
    """What identifies a database: the resolved file for SQLite, host/port/name for a server."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        return ("sqlite", str(_sqlite_path(url) or ":memory:"))
    return (u.get_backend_name(), u.host or "", u.port or 5432, u.database or "")


def _check_distinct(source_url: str, target_url: str) -> None:
    make_engine(source_url).dispose()  # a bad URL is reported as such, masked
    make_engine(target_url).dispose()
    if _where(source_url) == _where(target_url):
        raise KvregError(f"--from and --to are the same database ({mask_url(target_url)}): nothing to copy")


def _read_source(url: str) -> tuple[str, dict, list[dict]]:
    """(revision, snapshot, kvreg_meta rows) of the source, read in one transaction, never written."""
    path = _sqlite_path(url)
    if make_url(url).get_backend_name() == "sqlite" and not (path and path.is_file()):
        raise KvregError(f"no registry at {mask_url(url)}: --from must name an existing registry")
    engine = make_engine(url)
    try:
        conn = engine.connect()
        if conn.dialect.name == "postgresql":
            # One snapshot for every table, even while others write.
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn, conn.begin():
            rev = current_revision(conn)
            if rev is None:
                raise KvregError(f"{mask_url(url)} is not a kvreg registry (it has no schema revision)")
            if rev not in known_revisions():
                raise KvregError(f"source {mask_url(url)} is at schema revision {rev}, newer than this kvreg knows: "
                                 "upgrade kvreg")
            if rev != head_revision():
                raise KvregError(f"source {mask_url(url)} is at schema revision {rev}, not {head_revision()}: "
                                 f"upgrade it first (kvreg --db URL db upgrade)")
            snap = snapshot(conn)
            meta = [dict(r._mapping) for r in conn.execute(select(Meta.key, Meta.value))
                    if r.key not in _DERIVED_META]
    except SQLAlchemyError as exc:
        raise KvregError(f"cannot read {mask_url(url)}: {_one_line(exc)}") from None
    finally:
        engine.dispose()
    return rev, snap, meta


def _fill_target(conn, url: str, snap: dict, meta: list[dict], force: bool) -> int:
    """Migrate the target, empty it if allowed, insert the rows, reset id sequences.
    Returns the number of rows replaced."""
    prepare_registry(conn, url)
    held = row_counts(conn)
    total = sum(held.values())
    if total and not force:
        listing = ", ".join(f"{n} {t}" for t, n in held.items() if n)
        raise KvregError(f"target {mask_url(url)} already holds rows ({listing}): copy into an empty database, "
                         "or pass --force to replace them")
    for t in reversed(content_tables()):
        conn.execute(delete(t))
    conn.execute(delete(Meta).where(Meta.key.not_in(_DERIVED_META)))
    for t in content_tables():
        names = [c.name for c in t.columns]
        rows = [dict(zip(names, r)) for r in snap[t.name]]
        _check_bounded(t.name, names, rows, url)
        if rows:
            try:
                conn.execute(insert(t), rows)
            except UnstorableValue as exc:  # SQLite holds integers PostgreSQL's INTEGER cannot
                raise KvregError(f"cannot copy table {t.name} into {mask_url(url)}: {exc.detail}; "
                                 "nothing was written") from None
            except SQLAlchemyError as exc:
                raise KvregError(f"cannot copy table {t.name} into {mask_url(url)}: {_one_line(exc)}; "
                                 "nothing was written") from None
    if meta:
        conn.execute(insert(Meta), meta)
    if conn.dialect.name == "postgresql":
        _reset_sequences(conn)
    return total


def _check_bounded(table: str, names: list[str], rows: list[dict], url: str) -> None:
    """Values an older kvreg let in past a declared bound (a price of 1e308) are not carried into
    the target, where they would break its report: the same validator as every other entry path."""
    for column in [n for n in names if n in MAXIMUMS]:
        for r in rows:
            if r[column] is None:
                continue
            try:
                check_input(column, r[column])
            except KvregError as exc:
                who = r.get("name") or f"id {r.get('id')}"
                raise KvregError(f"cannot copy {table} {who!r} into {mask_url(url)}: {exc}; fix it in the source "
                                 "registry first (`kvreg apply` or the matching set command); nothing was written") from None


def _reset_sequences(conn) -> None:
    """Rows inserted with explicit ids leave PostgreSQL's sequences behind: move each past the
    largest id so the next row added gets a fresh one."""
    for t in content_tables():
        pk = list(t.primary_key.columns)
        if len(pk) != 1 or not isinstance(pk[0].type, Integer):
            continue
        col = pk[0].name
        conn.exec_driver_sql(
            f"SELECT setval(pg_get_serial_sequence('{t.name}', '{col}'), "
            f"COALESCE((SELECT MAX({col}) FROM {t.name}), 0) + 1, false)"
        )
