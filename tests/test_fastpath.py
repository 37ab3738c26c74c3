"""The fast read path (kvreg.db.fastpath, through kvreg.db.read) answers every read command exactly
as the full path does, byte for byte, and only for a SQLite registry that open_registry would
leave unchanged."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from kvreg.app.capacity import Question, ask
from kvreg.db import fastpath
from kvreg.db import read as db_read

QUESTIONS = [
    ["--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--format", "json"],
    ["--model", "Llama-3.1-8B,Qwen3-8B,DeepSeek-V3", "--gpu", "H100-SXM,B200", "--context", "8K,128K,1m",
     "--kv-dtype", "bf16,fp8", "--tp", "auto", "--format", "json"],
    ["--model", "Qwen3-Next-80B-A3B", "--tp", "4", "--kv-cache-memory", "40GiB", "--block-size", "0",
     "--format", "csv"],
    ["--gpu", "A100-80GB", "--context", "32K"],  # every model, as a table
    ["--model", "gemma-2-9b-it", "--weight-dtype", "fp8", "--reserve", "0.2", "--gpus-per-node", "4", "--tp", "2"],
    # errors: the same one line either way
    ["--model", "Lama-3.1-8B"],
    ["--model", "Llama-3.1-8B", "--tp", "3"],
    ["--model", "Llama-3.1-8B", "--gpu", "H1OO"],
    ["--model", "Llama-3.1-8B", "--kv-dtype", "fp9"],
    ["--model", "Llama-3.1-8B", "--weight-dtype", "fp8_ds_mla"],
    ["--model", "Llama-3.1-8B", "--tp", "8", "--pp", "2"],
]


@pytest.fixture
def current(tmp_path):
    """A SQLite registry already created, migrated, seeded and synced: the fast path's case."""
    from kvreg.app.access import open_registry

    url = f"sqlite:///{tmp_path / 'registry.db'}"
    open_registry(url).dispose()
    return url


def _path(url: str) -> str:
    return fastpath.sqlite_file(url)


def capacity_rows(url: str, q: Question):
    """ask(conn, q) on the fast path, or None when the registry is not eligible."""
    answered, rows = fastpath.read(url, lambda conn: ask(conn, q))
    return rows if answered else None


def test_constants_match_the_slow_sources():
    from kvreg.db.engine import DEFAULT_URL, head_revision
    from kvreg.figures.views import VIEW_NAMES, views_hash
    from kvreg.figures.views import figures_fingerprint as views_source_fingerprint

    assert fastpath.head_revision() == head_revision()
    assert list(fastpath.VIEW_NAMES) == VIEW_NAMES
    assert fastpath.DEFAULT_URL == DEFAULT_URL
    assert fastpath.figures_fingerprint is views_source_fingerprint  # the one views.source_key pairs
    assert views_hash("postgresql") != views_hash("sqlite")


def test_column_lists_match_the_tables():
    """kvreg.db.read lists each table's columns (stdlib only); they must be the table definitions'."""
    from kvreg.db.tables import Dtype, Gpu, Model

    for table, cls in (("dtype", Dtype), ("gpu", Gpu), ("model", Model)):
        assert list(db_read.COLUMNS[table]) == [c.name for c in cls.__table__.columns], table


@pytest.mark.parametrize("args", QUESTIONS, ids=lambda a: " ".join(a))
def test_same_output_from_both_paths(engine, kv, monkeypatch, args):
    """On SQLite the first run takes the fast path; on PostgreSQL both take the normal path, which
    checks that the shared statements run there too."""
    fast = kv("capacity", *args, ok=False)
    monkeypatch.setenv(fastpath.FULL_PATH_ENV, "1")
    slow = kv("capacity", *args, ok=False)
    assert (fast.exit_code, fast.output) == (slow.exit_code, slow.output)


def test_fast_path_is_taken_and_values_are_real(current):
    rows = capacity_rows(current, Question(models=["Llama-3.1-8B"]))
    assert rows is not None
    # Llama-3.1-8B: 2 (K and V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes (bf16) = 131,072 B/token.
    assert rows[0]["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2 == 131072


def test_errors_are_raised_on_the_fast_path(current):
    from kvreg.core.errors import KvregError

    with pytest.raises(KvregError, match="did you mean Llama-3.1-8B"):
        capacity_rows(current, Question(models=["Lama-3.1-8B"]))
    with pytest.raises(KvregError, match="valid TPs in a 8-GPU node are 1, 2, 4, 8"):
        capacity_rows(current, Question(models=["Llama-3.1-8B"], tp=3))


def test_fast_path_writes_nothing(current):
    capacity_rows(current, Question(models=["Llama-3.1-8B"], tp="auto"))
    with sqlite3.connect(_path(current)) as c:
        assert c.execute("SELECT COUNT(*) FROM scenario").fetchone() == (0,)


def test_ask_accepts_a_stdlib_connection(current):
    from kvreg.app.access import open_registry

    q = Question(models=["Qwen3-8B"], contexts=[8192, 131072], tp="auto")
    engine = open_registry(current)
    with engine.connect() as conn:
        slow = ask(conn, q)
    engine.dispose()
    c = sqlite3.connect(_path(current), isolation_level=None)
    try:
        assert ask(c, q) == slow
    finally:
        c.close()


def _edit(url: str, sql: str) -> None:
    c = sqlite3.connect(_path(url), isolation_level=None)
    c.execute(sql)
    c.close()


@pytest.mark.parametrize("sql", [
    "UPDATE alembic_version SET version_num = 'ffff'",  # another schema revision
    "UPDATE kvreg_meta SET value = 'stale' WHERE key = 'views_hash'",  # views from other declarations
    "DELETE FROM kvreg_meta WHERE key = 'seeded'",  # open_registry would still seed it
    "DROP VIEW procurement",
])
def test_anything_not_current_takes_the_normal_path(current, sql):
    _edit(current, sql)
    assert capacity_rows(current, Question(models=["Llama-3.1-8B"])) is None


def test_postgresql_takes_the_normal_path(pg_url):
    assert capacity_rows(pg_url, Question(models=["Llama-3.1-8B"])) is None


def test_other_urls_take_the_normal_path(tmp_path):
    q = Question(models=["Llama-3.1-8B"])
    assert capacity_rows(f"sqlite:///{tmp_path / 'missing.db'}", q) is None
    assert not (tmp_path / "missing.db").exists()
    assert capacity_rows("postgresql+psycopg://u@localhost/kvreg", q) is None
    assert capacity_rows("sqlite://", q) is None
    assert fastpath.sqlite_file("sqlite:///reg.db?mode=ro") is None
    assert fastpath.sqlite_file("sqlite:////tmp/x.db") == "/tmp/x.db"


def test_capacity_does_not_load_sqlalchemy(current):
    code = (
        "import sys\n"
        "from kvreg.cli import main\n"
        f"sys.argv = ['kvreg', '--db', {current!r}, 'capacity', '--model', 'Llama-3.1-8B', '--format', 'json']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "assert 'sqlalchemy' not in sys.modules, 'sqlalchemy was imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert '"kv_bytes_per_token": 131072' in out.stdout
