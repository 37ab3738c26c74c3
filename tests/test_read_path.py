"""Every read command answers through the one read path (kvreg.db.read): the same bytes whichever
way the registry is opened, and on an eligible SQLite registry without importing SQLAlchemy.

Each command runs twice on the same registry: first as a user runs it (on SQLite an eligible
registry takes the fast path, sqlite3 alone: the full path is made to fail so a fallback cannot
hide), then with KVREG_FULL_PATH set (SQLAlchemy, open_registry). Output and exit status must be
identical in table, json and csv. On PostgreSQL both runs take the full path; the test then checks
that the shared queries run there.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from kvreg.app import access as app_registry
from kvreg.db import fastpath
from kvreg.db import read as db_read

from conftest import Kvreg

FORMATS = ("table", "json", "csv")
# (args, formats): every read command, in the cases its output differs by; errors included.
READS = [
    (("plan", "list"), FORMATS),
    (("plan", "show", "chat-llama3-8b"), FORMATS),
    (("plan", "show", "chat-llama3-8b", "--quarter", "2026Q4"), FORMATS),
    (("plan", "show", "vllm-calibrated"), FORMATS),  # no demand: the plan's figures as one record
    (("plan", "show", "chat-llama3-8c"), ("table",)),  # unknown: did you mean
    (("plan", "show", "chat-llama3-8b", "--quarter", "2026Q5"), ("table",)),  # a bad quarter
    (("plan", "workload", "mixed-llama3-8b"), FORMATS),
    (("plan", "workload", "chat-llama3-8b"), FORMATS),  # no mix: an error as a table, [] as json
    (("plan", "rollup"), FORMATS),
    (("plan", "rollup", "--quarter", "2026Q4"), FORMATS),
    (("plan", "rollup", "--quarter", "2031Q1"), FORMATS),  # no demand then: no rows
    (("model", "list"), FORMATS),
    (("model", "show", "Llama-3.1-8B"), FORMATS),
    (("model", "show", "DeepSeek-V3", "--gpu", "B200", "--kv-dtype", "fp8"), FORMATS),
    (("model", "show", "Modèle-7B, \"test\""), FORMATS),  # text that needs quoting in csv and json
    (("model", "show", "Lama-3.1-8B"), ("table",)),
    (("gpu", "list"), FORMATS),
    (("gpu", "show", "H100-SXM"), FORMATS),
    (("gpu", "show", "Test-GPU"), FORMATS),  # no bandwidth, no prices: empty cells, nulls
    (("gpu", "show", "H1OO"), ("table",)),
    (("dtype", "list"), FORMATS),
    (("demand", "list"), FORMATS),
    (("demand", "list", "--plan", "chat-llama3-8b", "--quarter", "2026Q4"), FORMATS),
    (("demand", "list", "--plan", "nope"), ("table",)),
    (("fleet", "list"), FORMATS),
    (("fleet", "list", "--quarter", "2027Q2"), FORMATS),  # carried forward from 2026Q4
    (("db", "current"), FORMATS),
    (("export",), (None,)),
]
CASES = [(args, fmt) for args, fmts in READS for fmt in fmts]


@pytest.fixture(scope="module")
def registry(module_db_url) -> str:
    """The seeded registry plus rows the catalog lacks: a GPU without prices, a model whose name needs
    quoting, a vLLM plan with a calibration and no demand, a fleet entry."""
    kv = Kvreg(module_db_url)
    kv("gpu", "add", "Test-GPU", "--memory", "24GiB", "--notes", 'notes with "quotes", a comma\nand a newline')
    kv("model", "add", 'Modèle-7B, "test"', "--layers", "28", "--kv-heads", "4", "--attention-heads", "28",
       "--head-dim", "128", "--params-b", "7.6", "--family", "tést")
    kv("plan", "add", "vllm-calibrated", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--rule", "vllm",
       "--context", "32K", "--notes", "calibrated, with a comma")
    kv("plan", "calibrate", "vllm-calibrated", "--kv-cache-tokens", "434,176", "--max-concurrency", "3.31x",
       "--engine-version", "vllm 0.33.0")
    kv("fleet", "set", "H100-SXM", "2026Q4", "64", "--reserved", "16", "--reserved-price", "2.1")
    return module_db_url


def _run(kv: Kvreg, args: tuple, fmt: str | None):
    result = kv(*args, *(("--format", fmt) if fmt else ()), ok=False)
    return result.exit_code, result.output


@pytest.mark.parametrize("args,fmt", CASES, ids=lambda v: " ".join(v) if isinstance(v, tuple) else str(v))
def test_both_paths_print_the_same_bytes(registry, monkeypatch, args, fmt):
    kv = Kvreg(registry)
    if registry.startswith("sqlite"):
        def refuse(*_a, **_k):
            raise AssertionError("an eligible SQLite registry took the full path")

        monkeypatch.setattr(db_read, "_full_read", refuse)
    fast = _run(kv, args, fmt)
    monkeypatch.undo()  # (undoes conftest's removal of COLUMNS too: removed again)
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setenv(fastpath.FULL_PATH_ENV, "1")
    full = _run(kv, args, fmt)
    assert fast == full
    if fast[0]:  # an error: exit 1 and one line, the same either way
        assert fast[0] == 1 and fast[1].startswith("Error: ") and fast[1].count("\n") == 1, fast


def test_read_values_are_real(registry):
    """A few figures from the fast path, worked by hand (the byte comparison alone would pass if both
    paths were wrong alike)."""
    kv = Kvreg(registry)
    gpu = kv.json("gpu", "show", "Test-GPU")[0]
    assert gpu["memory_bytes"] == 24 * 2**30 == 25769803776
    assert gpu["memory_gib"] == 24.0 and gpu["price_per_hour"] is None
    model = next(m for m in kv.json("model", "list") if m["name"] == 'Modèle-7B, "test"')
    # full layers = 28 (no sliding, chunked or linear layers); 7.6 billion parameters
    assert (model["full_layers"], model["params_total"], model["v_head_dim"]) == (28, 7_600_000_000, 128)
    plan = next(p for p in kv.json("plan", "list") if p["plan"] == "vllm-calibrated")
    assert plan["measured_kv_cache_tokens"] == 434176 and plan["measured_max_concurrency"] == 3.31
    # Llama-3.1-8B: 2 (K and V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes (bf16) = 131,072 B/token
    assert plan["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2 == 131072
    csv_text = kv("gpu", "show", "Test-GPU", "--format", "csv").stdout
    assert '"notes with ""quotes"", a comma\nand a newline"' in csv_text
    exported = kv("export").stdout  # the plans, demand and fleet as `kvreg apply` reads them back
    assert ('workload = [{ name = "chat", avg_tokens = 1500, share = 0.8 }, { name = "documents", avg_tokens = 13000,'
            ' share = 0.2 }]\n') in exported
    assert '[[demand]]\nplan = "mixed-llama3-8b"\nquarter = "2026Q4"\nusers = 200\n' in exported
    assert ('[[fleet]]\ngpu = "H100-SXM"\nquarter = "2026Q4"\ngpus_owned = 64\ngpus_reserved = 16\n'
            'reserved_price_per_hour = 2.1\n') in exported
    current = kv.json("db", "current")[0]
    head = fastpath.head_revision()
    assert (current["revision"], current["head"], current["at_head"]) == (head, head, True)
    if registry.startswith("sqlite"):
        assert current["registry"] == registry


# --------------------------------------------------------------------------- no SQLAlchemy

NO_SQLALCHEMY = [
    ["plan", "list", "--format", "json"],
    ["plan", "show", "chat-llama3-8b", "--format", "json"],
    ["plan", "workload", "mixed-llama3-8b"],
    ["plan", "rollup", "--quarter", "2026Q4", "--format", "csv"],
    ["model", "list"],
    ["model", "show", "Llama-3.1-8B", "--format", "json"],
    ["gpu", "list", "--format", "csv"],
    ["gpu", "show", "H100-SXM"],
    ["dtype", "list"],
    ["demand", "list", "--format", "json"],
    ["db", "current"],
    ["fleet", "list", "--format", "json"],
    ["export"],
    ["capacity", "--model", "Llama-3.1-8B", "--format", "json"],
]

_NO_SQLA = """\
import sys
from kvreg.cli import main
db, commands = sys.argv[1], [c.split("\\x1f") for c in sys.argv[2:]]
for args in commands:
    sys.argv = ["kvreg", "--db", db, *args]
    try:
        main()
    except SystemExit as e:
        assert not e.code, (args, e.code)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "sqlmodel", "alembic"))
    assert not loaded, f"kvreg {' '.join(args)} imported {loaded[:3]}"
    print("\\x1e" + " ".join(args), file=sys.stderr)
"""


@pytest.fixture
def current(tmp_path):
    """A SQLite registry already created, migrated, seeded and synced: the fast path's case."""
    from kvreg.app.access import open_registry

    url = f"sqlite:///{tmp_path / 'registry.db'}"
    open_registry(url).dispose()
    return url


def test_read_commands_do_not_import_sqlalchemy(current):
    """Each read command, run in one fresh interpreter one after the other, loads no SQLAlchemy,
    SQLModel or Alembic module (checked after each command)."""
    out = subprocess.run([sys.executable, "-c", _NO_SQLA, current, *("\x1f".join(c) for c in NO_SQLALCHEMY)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr.count("\x1e") == len(NO_SQLALCHEMY)
    assert '"kv_bytes_per_token": 131072' in out.stdout  # the capacity answer, as a sign the output is there


def test_quarter_reads_do_not_import_the_declarations(current):
    """`plan rollup --quarter` takes its query from kvreg_meta (stored with the views), and the reads that
    filter by quarter use kvreg.figures.quarters: none of them imports the figure declarations."""
    script = _NO_SQLA.replace('m.split(".")[0] in ("sqlalchemy", "sqlmodel", "alembic")',
                              'm == "kvreg.figures.declarations"')
    commands = [["plan", "rollup", "--quarter", "2026Q4", "--format", "json"], ["demand", "list", "--quarter", "2026Q4"],
                ["plan", "show", "chat-llama3-8b", "--quarter", "2026Q4"], ["fleet", "list", "--quarter", "2026Q4"]]
    out = subprocess.run([sys.executable, "-c", script, current, *("\x1f".join(c) for c in commands)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr.count("\x1e") == len(commands)
    assert '"gpu": "H100-SXM"' in out.stdout  # the rollup answered


def test_the_stored_rollup_query_is_the_compiled_one(current):
    from kvreg.figures.aggregates import ROLLUP_SQL_KEY, one_quarter_sql

    assert db_read.ROLLUP_SQL_KEY == ROLLUP_SQL_KEY
    c = _conn(current)
    try:
        stored = c.execute("SELECT value FROM kvreg_meta WHERE key = ?", (ROLLUP_SQL_KEY,)).fetchall()
    finally:
        c.close()
    assert stored == [(one_quarter_sql("sqlite"),)]


def test_full_path_loads_sqlalchemy(current):
    """The check above can fail: with KVREG_FULL_PATH set, the same reads load SQLAlchemy."""
    import os

    out = subprocess.run([sys.executable, "-c", _NO_SQLA, current, "model\x1flist"], capture_output=True, text=True,
                         env={**os.environ, fastpath.FULL_PATH_ENV: "1"})
    assert out.returncode == 1 and "kvreg model list imported ['sqlalchemy" in out.stderr


# --------------------------------------------------------------------------- eligibility


def _conn(url: str) -> sqlite3.Connection:
    return sqlite3.connect(fastpath.sqlite_file(url), isolation_level=None)


def test_eligibility_says_why(current, monkeypatch):
    path = fastpath.sqlite_file(current)
    c = _conn(current)
    try:
        assert fastpath.eligibility(path, c) is None
        monkeypatch.setenv(fastpath.FULL_PATH_ENV, "1")
        assert fastpath.eligibility(path, c) == "KVREG_FULL_PATH is set"
        monkeypatch.setenv(fastpath.FULL_PATH_ENV, "0")
        assert fastpath.eligibility(path, c) is None
        c.execute("UPDATE kvreg_meta SET value = 'stale' WHERE key = 'views_hash'")
        assert fastpath.eligibility(path, c) == "views compiled from other declarations"
        c.execute("DELETE FROM kvreg_meta WHERE key = 'seeded'")
        assert fastpath.eligibility(path, c) == "not seeded"
        c.execute("UPDATE alembic_version SET version_num = '0002'")
        assert fastpath.eligibility(path, c) == f"schema revision ['0002'] is not the head {fastpath.head_revision()!r}"
        c.execute("DROP TABLE kvreg_meta")
        assert fastpath.eligibility(path, c).startswith("not a kvreg registry")
    finally:
        c.close()


def test_a_stale_registry_is_read_the_full_way_and_left_current(current):
    """Views compiled from other declarations: read() takes the full path, whose open_registry
    re-syncs the views, so the next read is eligible again."""
    c = _conn(current)
    c.execute("UPDATE kvreg_meta SET value = 'stale' WHERE key = 'views_hash'")
    c.close()
    assert fastpath.read(current, db_read.list_gpus) == (False, None)
    names = [g["name"] for g in app_registry.read(current, db_read.list_gpus)]
    assert names[:3] == ["A10", "A100-40GB", "A100-40GB-PCIe"]  # sorted by name
    answered, rows = fastpath.read(current, db_read.list_gpus)
    assert answered and [g["name"] for g in rows] == names


def test_db_current_does_not_upgrade(current):
    """`kvreg db current` on a registry behind the head reports it, from the full path, unchanged."""
    c = _conn(current)
    c.execute("UPDATE alembic_version SET version_num = '0002'")
    c.close()
    kv = Kvreg(current)
    assert kv.json("db", "current")[0] | {"registry": None} == {
        "registry": None, "revision": "0002", "head": fastpath.head_revision(), "at_head": False}
    c = _conn(current)
    assert c.execute("SELECT version_num FROM alembic_version").fetchall() == [("0002",)]
    c.close()


def test_a_new_read_query_is_one_function(current):
    """The mechanism a new read command (fleet list, ...) uses: a function of a connection, run by read()."""
    def biggest_gpu(conn):
        return db_read.runner(conn).rows("SELECT name FROM gpu ORDER BY memory_bytes DESC, name LIMIT 1")

    assert app_registry.read(current, biggest_gpu) == [{"name": "B300"}]  # 288 GB, the largest catalog GPU


@pytest.mark.parametrize("url", [
    "sqlite:///registry.db", "sqlite:////tmp/a b/c.db", "sqlite:///./x_y-z+1.db",  # printed as given
    "sqlite:///we@ird:name.db", "sqlite:///ünï/x.db", "sqlite:////tmp/p=q;r.db",  # escaped by SQLAlchemy
    "sqlite:///reg.db?mode=ro", "postgresql+psycopg://planner:s3cret@db/kvreg",  # masked by SQLAlchemy
])
def test_db_current_prints_the_url_as_mask_url_does(url):
    from kvreg.db.engine import mask_url

    assert fastpath.display_url(url) == mask_url(url)
    assert "s3cret" not in fastpath.display_url(url)
