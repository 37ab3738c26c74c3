"""The views in a registry are exactly what the figure declarations compile to.

- A migrated registry's views, as SQLite stored them, equal "CREATE VIEW name AS " + the
  compiled SQL, view by view, and the registry records which declarations they came from.
- Views compiled from other declarations (a changed hash) are recreated on open; views that
  match are left alone.
- Downgrading to base and upgrading again, twice, leaves the same views.
- docs/methodology.md carries the figure table generated from the declarations.
- The compiled SQL of every view is kept in tests/snapshots/ so that a change to a declaration
  or a compiler shows up as a reviewable diff. Regenerate after an intended change with
  KVREG_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_views_sync.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import text

from kvreg.figures import views

SNAPSHOTS = Path(__file__).parent / "snapshots"
REGENERATE = "KVREG_UPDATE_SNAPSHOTS=1 pytest tests/test_views_sync.py"


def stored_views(conn) -> dict[str, str]:
    """name -> the SQL SQLite stored for each view."""
    rows = conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'view'")).all()
    return {name: sql for name, sql in rows}


def compiled_views() -> dict[str, str]:
    """name -> the statement the declarations compile to (SQLite)."""
    return {name: f"CREATE VIEW {name} AS {sql}" for name, sql in views.view_definitions("sqlite")}


def view_names(conn) -> set[str]:
    from sqlalchemy import inspect

    return set(inspect(conn).get_view_names())


def differing_views(conn) -> list[str]:
    """Views whose definition in the registry is not what the declarations compile to.

    SQLite keeps a view's text as written: compare it with "CREATE VIEW name AS " + the compiled
    SQL. PostgreSQL keeps a parsed form: create each compiled view again as a temporary view
    and compare the two as PostgreSQL prints them back (pg_get_viewdef)."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        stored, compiled = stored_views(conn), compiled_views()
        return [n for n in views.VIEW_NAMES if stored.get(n) != compiled[n]]
    differ = []
    with conn.begin_nested() as trans:
        for name, sql in views.view_definitions(dialect):
            conn.exec_driver_sql(f"CREATE TEMP VIEW check_{name} AS {sql}".replace("%", "%%"))
            ours, theirs = conn.execute(
                text("SELECT pg_get_viewdef(to_regclass(:a)), pg_get_viewdef(to_regclass(:b))"),
                {"a": name, "b": f"pg_temp.check_{name}"},
            ).one()
            if ours is None or ours != theirs:
                differ.append(name)
        trans.rollback()
    return differ


def stored_hash(conn) -> str | None:
    return conn.execute(text("SELECT value FROM kvreg_meta WHERE key = 'views_hash'")).scalar()


def test_migrated_registry_views_equal_the_declarations(engine):
    with engine.connect() as conn:
        assert view_names(conn) == set(views.VIEW_NAMES)
        assert differing_views(conn) == []
        assert stored_hash(conn) == views.views_hash(conn.dialect.name)


def test_sqlite_stores_exactly_the_compiled_statement(tmp_path):
    """On SQLite the comparison is plain text: sqlite_master.sql is the statement kvreg ran."""
    from kvreg.app.access import open_registry

    engine = open_registry(f"sqlite:///{tmp_path / 'registry.db'}")
    with engine.connect() as conn:
        stored = stored_views(conn)
    engine.dispose()
    for name, sql in views.view_definitions("sqlite"):
        assert stored[name] == "CREATE VIEW " + name + " AS " + sql


def test_every_figure_is_a_column_of_some_view(engine):
    """A declared figure no view carries would be dead code (or a grain that lacks an input)."""
    from kvreg.figures.declarations import FIGURES

    with engine.connect() as conn:
        columns = set()
        for name in views.VIEW_NAMES:
            columns |= set(conn.execute(text(f"SELECT * FROM {name} LIMIT 0")).keys())
    assert set(FIGURES) - columns == set()


def test_unchanged_declarations_leave_the_views_alone(engine):
    with engine.begin() as conn:
        assert views.sync_views(conn) is False


def test_a_changed_hash_recreates_the_views(db_url):
    """Views compiled from other declarations are replaced on open: here the stored hash is
    stale and the capacity view is an old definition; opening the registry restores both."""
    from kvreg.app.access import open_registry

    engine = open_registry(db_url)
    with engine.begin() as conn:
        conn.execute(text("DROP VIEW capacity"))
        conn.execute(text("CREATE VIEW capacity AS SELECT 1 AS max_concurrency"))
        conn.execute(text("UPDATE kvreg_meta SET value = 'compiled-from-older-declarations' WHERE key = 'views_hash'"))
        assert differing_views(conn) == ["capacity"]
    engine.dispose()

    engine = open_registry(db_url)
    with engine.connect() as conn:
        assert differing_views(conn) == []
        assert stored_hash(conn) == views.views_hash(conn.dialect.name)
    engine.dispose()


def test_a_changed_declaration_reaches_the_views(db_url, monkeypatch):
    """Change one declaration (usable memory without the reserve) and its hash: the next open
    compiles and installs the new SQL, and the capacity view answers with it."""
    from kvreg.app.access import open_registry
    from kvreg.app.capacity import Question, ask
    from kvreg.figures.declarations import FIGURES, Figure, I

    question = Question(models=["Llama-3.1-8B"], gpus=["H100-SXM"], contexts=[131072], reserve=0.12)
    engine = open_registry(db_url)
    with engine.connect() as conn:
        (before,) = ask(conn, question)
    engine.dispose()
    assert before["usable_gib_per_gpu"] == pytest.approx(80 * 0.88)

    old = FIGURES["usable_bytes_per_gpu"]
    monkeypatch.setitem(FIGURES, old.name, Figure(old.name, old.unit, old.meaning, I("memory_bytes") * 1))
    monkeypatch.setattr(views, "views_hash", lambda dialect="sqlite": "changed-declarations")
    monkeypatch.setattr(views, "figures_fingerprint", lambda dialect="sqlite": "changed-source")
    engine = open_registry(db_url)
    with engine.connect() as conn:
        assert differing_views(conn) == []
        assert stored_hash(conn) == "changed-declarations"
        (after,) = ask(conn, question)
    engine.dispose()
    assert after["usable_gib_per_gpu"] == 80.0
    # (80 GiB - 16.1 GB) / 16 GiB per sequence
    assert after["max_concurrency"] == pytest.approx((80 * 2**30 - 16.1e9) / (131072 * 131072), rel=1e-12)


def test_a_comment_edit_keeps_the_views(tmp_path, monkeypatch):
    """A comment added to declarations.py changes the source fingerprint but not one byte of the
    compiled SQL: the next open keeps the views (no DROP, no CREATE) and records the new source, so
    the fast path takes the registry again at once."""
    import shutil
    import sqlite3

    from kvreg.app.access import open_registry
    from kvreg.db import fastpath
    from kvreg.figures import fingerprint

    url = f"sqlite:///{tmp_path / 'registry.db'}"
    open_registry(url).dispose()
    db = sqlite3.connect(tmp_path / "registry.db")
    before_views = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view' ORDER BY name").fetchall()
    before = dict(db.execute("SELECT key, value FROM kvreg_meta WHERE key LIKE 'views_%'").fetchall())
    db.close()
    assert len(before_views) == 7

    edited = tmp_path / "figures"
    shutil.copytree(Path(fingerprint.__file__).parent, edited, ignore=shutil.ignore_patterns("__pycache__"))
    with open(edited / "declarations.py", "a", encoding="utf-8") as f:
        f.write("# a comment: no figure changes\n")
    old_source = fingerprint.figures_fingerprint("sqlite")
    monkeypatch.setattr(fingerprint, "_FIGURES_DIR", str(edited))
    new_source = fingerprint.figures_fingerprint("sqlite")
    assert new_source != old_source
    assert before == {"views_hash": views.views_hash("sqlite"),
                      "views_source": f"{old_source} {views.views_hash('sqlite')}"}
    with sqlite3.connect(tmp_path / "registry.db") as c:  # the edited sources: the fast path declines
        assert fastpath.eligibility(str(tmp_path / "registry.db"), c) == "views compiled from other declarations"

    monkeypatch.setattr(views, "recreate_views", lambda conn, want=None: pytest.fail("views rebuilt"))
    open_registry(url).dispose()
    db = sqlite3.connect(tmp_path / "registry.db")
    assert db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view' ORDER BY name").fetchall() == before_views
    after = dict(db.execute("SELECT key, value FROM kvreg_meta WHERE key LIKE 'views_%'").fetchall())
    assert after == {"views_hash": before["views_hash"], "views_source": f"{new_source} {before['views_hash']}"}
    assert fastpath.eligibility(str(tmp_path / "registry.db"), db) is None
    db.close()


def test_views_hash_is_the_compiled_sql():
    """sha256 over the dialect, then each view's name and SQL (NUL-separated), in dependency order."""
    import hashlib

    h = hashlib.sha256(b"sqlite\0")
    for name, sql in views.view_definitions("sqlite"):
        h.update(f"{name}\0{sql}\0".encode())
    assert views.views_hash("sqlite") == h.hexdigest()
    assert [name for name, _ in views.view_definitions("sqlite")] == list(views.VIEW_NAMES)


def test_migrations_base_head_base_head(empty_db_url):
    """Through the CLI: upgrade creates tables and views, downgrade to base removes both, twice over."""
    from sqlalchemy import inspect

    from conftest import Kvreg
    from kvreg.db.engine import make_engine

    kv = Kvreg(empty_db_url)

    def state():
        engine = make_engine(empty_db_url)
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names()) - {"alembic_version"}
            found = view_names(conn)
            differ = differing_views(conn) if found else None
        engine.dispose()
        return tables, found, differ

    for _ in range(2):
        kv("db", "upgrade", "head")
        tables, found, differ = state()
        assert {"model", "gpu", "dtype", "plan", "demand", "scenario", "kvreg_meta"} <= tables
        assert found == set(views.VIEW_NAMES) and differ == []
        kv("db", "downgrade", "base")
        tables, found, differ = state()
        assert tables == set() and found == set()
    kv("db", "upgrade", "head")
    (row,) = kv.json("capacity", "--model", "Llama-3.1-8B")
    assert row["max_concurrency"] == pytest.approx((80 * 2**30 * 0.88 - 16.1e9) / (131072 * 131072), rel=1e-12)


# --------------------------------------------------------------------------- snapshots


def snapshot_text(dialect: str) -> str:
    """Every view, as the registry creates it on this dialect, one statement per view."""
    parts = [f"-- kvreg views compiled for {dialect}; regenerate: {REGENERATE}"]
    for name, sql in views.view_definitions(dialect):
        parts.append(f"-- view: {name}\nCREATE VIEW {name} AS {sql};")
    return "\n\n".join(parts) + "\n"


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_compiled_sql_matches_snapshot(dialect):
    path = SNAPSHOTS / f"views_{dialect}.sql"
    want = snapshot_text(dialect)
    if os.environ.get("KVREG_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(want)
    assert path.exists(), f"{path} is missing: run {REGENERATE}"
    assert path.read_text() == want, (
        f"the compiled {dialect} view SQL changed: review the diff, then regenerate {path.name} with {REGENERATE}"
    )


# --------------------------------------------------------------------------- the methodology page


def test_methodology_page_carries_the_generated_figure_table():
    """docs/methodology.md must hold exactly what `python -m kvreg.figures.doc` prints, so the
    documented formulas are the declared ones. After changing a declaration, run
    python -m kvreg.figures.doc --write docs/methodology.md"""
    from kvreg.figures import doc

    page = (Path(__file__).resolve().parents[1] / "docs" / "methodology.md").read_text()
    assert doc.markdown() in page, (
        "docs/methodology.md is stale: run python -m kvreg.figures.doc --write docs/methodology.md"
    )
    for name in doc.FIGURES:
        assert f"| `{name}` |" in page


def test_doc_formulas_read_as_written():
    from kvreg.figures.declarations import FIGURES
    from kvreg.figures.doc import formula

    assert formula(FIGURES["weights_estimated_bytes_per_gpu"].expr) == (
        "if(mxfp4_layout, (params_total - expert_params) * 2 / (tp * pp)"
        " + moe_layers * experts / pp * mxfp4_bytes_per_expert_per_gpu,"
        " (weights_bytes + engine_embedding_extra_bytes + marlin_fp8_scale_bytes) / (tp * pp))"
        " + engine_replicated_bytes_per_gpu")
    assert formula(FIGURES["weights_split_bytes_per_gpu"].expr) == (
        "coalesce(weights_measured_bytes, weights_estimated_bytes_per_gpu)")
    assert formula(FIGURES["usable_bytes_per_gpu"].expr) == "memory_bytes * (1 - reserve)"
    assert formula(FIGURES["kv_heads_per_gpu"].expr) == "max(1, floor(kv_heads / attention_tp))"
    assert formula(FIGURES["kv_gib_per_128k_sequence"].expr) == "kv_bytes_per_128k_sequence / 2^30"
    assert formula(FIGURES["tp_valid"].expr) == (
        "attention_heads mod tp = 0 and (kv_heads mod tp = 0 or tp mod kv_heads = 0)"
        " and (coalesce(sliding_kv_heads, kv_heads) mod tp = 0 or tp mod coalesce(sliding_kv_heads, kv_heads) = 0)"
        " and (coalesce(chunked_kv_heads, kv_heads) mod tp = 0 or tp mod coalesce(chunked_kv_heads, kv_heads) = 0)"
        + "".join(f" and (coalesce(kv_heads_{n}, kv_heads) mod tp = 0 or tp mod coalesce(kv_heads_{n}, kv_heads) = 0)"
                  for n in (2, 3, 4))  # the groups of per-layer kv heads
        + " and tp * pp <= gpus_per_node"
    )
