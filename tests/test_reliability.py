"""A registry written by a newer kvreg is refused, by every command, on both engines, with a
clear message, and left exactly as it was (SQLite: the file's bytes; PostgreSQL: the revision,
row counts and content hash)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from kvreg.db.engine import RegistryError, make_engine, open_registry

FUTURE = "ffff0002future"


@pytest.fixture
def newer(db_url, kv):
    """The test's registry, as a newer kvreg would leave it: an unknown revision and a table
    this kvreg has never heard of."""
    kv("init")
    engine = make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": FUTURE})
        conn.execute(text("CREATE TABLE future_feature (id INTEGER PRIMARY KEY, note VARCHAR(20))"))
        conn.execute(text("INSERT INTO future_feature (id, note) VALUES (1, 'kept')"))
    engine.dispose()
    return db_url


COMMANDS = {
    "init": ["init"],
    "model list": ["model", "list"],
    "capacity": ["capacity", "--model", "Llama-3.1-8B"],
    "db upgrade": ["db", "upgrade"],
    "db downgrade": ["db", "downgrade", "base"],
    "db copy from it": ["db", "copy", "--from", "{newer}", "--to", "sqlite:///{tmp}/copy.db"],
    "db copy into it": ["db", "copy", "--from", "sqlite:///{tmp}/fresh.db", "--to", "{newer}", "--force"],
    "report": ["report", "--out", "{tmp}/reports"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_a_newer_registry_and_changes_nothing(command, newer, kv, state, tmp_path):
    from conftest import Kvreg

    Kvreg(f"sqlite:///{tmp_path}/fresh.db")("init")
    before = state()
    args = [a.format(newer=newer, tmp=tmp_path) for a in COMMANDS[command]]
    result = kv(*args, ok=False)
    assert result.exit_code == 1, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert FUTURE in message and "newer than this kvreg" in message and "upgrade kvreg" in message, message
    assert state() == before
    assert not (tmp_path / "copy.db").exists() and not (tmp_path / "reports").exists()
    engine = make_engine(newer)
    with engine.connect() as conn:  # the newer kvreg's own table and row are still there
        assert conn.execute(text("SELECT note FROM future_feature")).scalar() == "kept"
    engine.dispose()


def test_open_registry_refuses_a_newer_registry(newer, state):
    before = state()
    with pytest.raises(RegistryError, match=f"schema revision {FUTURE}, newer than this kvreg knows"):
        open_registry(newer)
    assert state() == before


def test_db_current_shows_a_newer_revision_without_changing_it(newer, kv, state):
    before = state()
    row = kv.json("db", "current")[0]
    assert row["revision"] == FUTURE and row["at_head"] is False
    assert state() == before
