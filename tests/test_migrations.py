"""Schema migrations: empty -> head -> base -> head, `alembic upgrade head` from the repository,
and the `kvreg db` commands that wrap Alembic. On SQLite and PostgreSQL (conftest's fixtures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kvreg.db.engine import alembic_config, head_revision, known_revisions, make_engine

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLES = {"alembic_version", "demand", "dtype", "gpu", "kvreg_meta", "model", "plan", "scenario"}
VIEWS = {"model_kv", "capacity", "plan_capacity", "plan_quarter", "procurement"}


def _inspect(db_url: str, read):
    from sqlalchemy import inspect

    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            return read(inspect(conn), conn)
    finally:
        engine.dispose()


def tables(db_url: str) -> set[str]:
    return _inspect(db_url, lambda insp, _: set(insp.get_table_names()))


def views(db_url: str) -> set[str]:
    return _inspect(db_url, lambda insp, _: set(insp.get_view_names()))


def revision(db_url: str) -> str | None:
    from kvreg.db.engine import current_revision

    return _inspect(db_url, lambda _, conn: current_revision(conn))


def schema(db_url: str) -> dict:
    """Every table's columns, keys and constraints, and every view's SQL: what a migration must rebuild."""
    def read(insp, _):
        out = {}
        for t in sorted(insp.get_table_names()):
            out[t] = (
                [(c["name"], str(c["type"]), c["nullable"], str(c.get("default"))) for c in insp.get_columns(t)],
                insp.get_pk_constraint(t)["constrained_columns"],
                sorted((fk["constrained_columns"], fk["referred_table"]) for fk in insp.get_foreign_keys(t)),
                sorted(str(u["column_names"]) for u in insp.get_unique_constraints(t)),
                sorted(c["name"] or c["sqltext"] for c in insp.get_check_constraints(t)),
            )
        for v in sorted(insp.get_view_names()):
            out[f"view {v}"] = insp.get_view_definition(v)
        return out

    return _inspect(db_url, read)


def alembic(db_url: str, action: str, revision: str) -> None:
    """Run an Alembic command in one transaction, as `kvreg db` does."""
    from alembic import command

    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            getattr(command, action)(alembic_config(db_url, conn), revision)
    finally:
        engine.dispose()


def test_empty_to_head_to_base_to_head(empty_db_url):
    alembic(empty_db_url, "upgrade", "head")
    assert TABLES <= tables(empty_db_url)
    assert VIEWS <= views(empty_db_url)  # views are recreated from the declarations at head
    assert revision(empty_db_url) == head_revision()
    first = schema(empty_db_url)

    alembic(empty_db_url, "downgrade", "base")
    assert tables(empty_db_url) <= {"alembic_version"}  # every registry table is gone ...
    assert views(empty_db_url) == set()  # ... and every view
    assert revision(empty_db_url) is None

    alembic(empty_db_url, "upgrade", "head")
    assert schema(empty_db_url) == first  # the same schema, object for object


def test_every_revision_is_reachable_from_head():
    """One linear history: walking down from head visits every revision file."""
    from alembic.script import ScriptDirectory

    from kvreg.db.engine import migrations_dir

    script = ScriptDirectory(str(migrations_dir()))
    assert script.get_heads() == [head_revision()]
    walked = {s.revision for s in script.iterate_revisions(head_revision(), "base")}
    assert walked == known_revisions()


def test_alembic_upgrade_head_from_the_repository(empty_db_url):
    """`alembic upgrade head` in the repository works, with the registry taken from KVREG_DB."""
    env = {**os.environ, "KVREG_DB": empty_db_url}
    done = subprocess.run([sys.executable, "-m", "alembic", "upgrade", "head"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert TABLES <= tables(empty_db_url)
    assert VIEWS <= views(empty_db_url)
    assert revision(empty_db_url) == head_revision()


# ---------------------------------------------------------------- kvreg db ...


def test_db_current_on_a_new_registry(kv):
    kv("init")
    [row] = kv.json("db", "current")
    assert row["revision"] == row["head"] == head_revision()
    assert row["at_head"] is True


def test_db_history_lists_every_revision(kv):
    rows = kv.json("db", "history")
    assert {r["revision"] for r in rows} == known_revisions()
    assert rows[0]["revision"] == head_revision()  # newest first
    assert rows[-1]["down_revision"] is None


def test_db_downgrade_base_then_upgrade(kv, db_url):
    kv("init")
    refused = kv("db", "downgrade", "base", ok=False)  # it would drop the catalog: not without --yes
    assert refused.exit_code == 1 and "would drop" in refused.stderr and "pass --yes" in refused.stderr
    said = kv("db", "downgrade", "base", "--yes").stdout.strip()
    assert said.startswith("downgraded to base; dropped ") and "24 model rows" in said and "37 gpu rows" in said
    assert tables(db_url) <= {"alembic_version"}
    [row] = kv.json("db", "current")
    assert row["revision"] is None and row["at_head"] is False

    assert kv("db", "upgrade").stdout.strip() == "upgraded to head"
    assert TABLES <= tables(db_url) and VIEWS <= views(db_url)
    assert kv.json("db", "current")[0]["at_head"] is True
    # the next ordinary command finds an empty registry at head and seeds it
    assert len(kv.json("model", "list")) == 24


def test_db_init_reports_counts(kv):
    line = kv("init").stdout.strip()
    assert "24 models, 37 GPUs, 14 dtypes" in line


def set_revision(db_url: str, rev: str) -> None:
    from sqlalchemy import text

    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :rev"), {"rev": rev})
    finally:
        engine.dispose()


def test_db_downgrade_to_unknown_revision_is_one_line(kv, state):
    kv("init")
    before = state()
    result = kv("db", "downgrade", "nope", ok=False)
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot downgrade to 'nope'" in lines[0]
    assert state() == before


@pytest.mark.parametrize("args", [["db", "upgrade"], ["db", "downgrade", "base"]], ids=["upgrade", "downgrade"])
def test_db_refuses_a_registry_newer_than_kvreg(kv, db_url, state, args):
    kv("init")
    set_revision(db_url, "ffff")  # as a newer kvreg would leave it
    before = state()
    result = kv(*args, ok=False)
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "revision ffff, newer than this kvreg knows" in lines[0]
    assert state() == before


def test_db_current_json_is_a_list_of_objects(kv):
    kv("init")
    data = json.loads(kv("db", "current", "--format", "json").stdout)
    assert isinstance(data, list) and sorted(data[0]) == ["at_head", "head", "registry", "revision"]
