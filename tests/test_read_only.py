"""A what-if only reads (issue 39 item 2): `kvreg capacity`, `model show`, the plan solvers, `plan optimize`'s
dry run, `calibrate`, the web page's what-if and `kvreg report` answer from a registry kvreg may not write to, byte for byte
as from one it may.

Two such registries: a SQLite file made read-only (the file 0444, its folder 0555), and a PostgreSQL
role that may only SELECT (no INSERT, no CREATE, no TEMPORARY). Each what-if is the views' own SQL
over the question's rows bound as parameters (kvreg.db.read.whatif): no scratch row, TEMP table or
savepoint is ever asked for, so neither registry refuses anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sqlite3
from pathlib import Path

import pytest

from conftest import Kvreg

LOGS = Path(__file__).parent / "data" / "logs"
# A vLLM startup log of Llama-3-8B at TP1 on an H100 (source in tests/data/logs/MANIFEST.toml).
TP1_LOG = str(LOGS / "vllm-pr10511-llama3-8b-tp1.log")

WHAT_IFS = [
    ["capacity", "--model", "Llama-3-8B,Llama-3.1-70B", "--gpu", "H100-SXM", "--context", "8K,128K", "--tp", "auto"],
    ["capacity", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--rule", "vllm", "--tp", "2"],
    ["model", "show", "Llama-3-8B"],
    ["plan", "solve", "context", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--users", "40", "--gpus", "2"],
    ["plan", "solve", "gpus", "--plan", "mixed-llama3-8b", "--quarter", "2026Q4"],
    ["plan", "solve", "reserve", "longctx-llama31-70b"],
    ["calibrate", "--log", TP1_LOG, "--gpu", "H100-SXM"],
    ["plan", "show", "docs-llama3-8b"],
    ["plan", "optimize"],  # a dry run: the cheapest fleet, nothing written without --apply
]
IDS = ["capacity-auto", "capacity-vllm", "model-show", "solve-context", "solve-gpus", "solve-reserve", "calibrate",
       "plan-show", "optimize"]


def _answers(url: str) -> dict[str, str]:
    kv = Kvreg(url)
    return {name: kv(*args, "--format", "json").stdout for name, args in zip(IDS, WHAT_IFS)}


def _web_answer(url: str) -> dict:
    """The web page's what-if (/api/capacity), called in this process."""
    import anyio
    import httpx

    from kvreg.web.app import create_app

    async def go():
        transport = httpx.ASGITransport(app=create_app(url))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.get("/api/capacity?model=Llama-3-8B&gpu=H100-SXM&context=8K,32K&tp=auto")

    answer = anyio.run(go)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _report_data(url: str, out: Path, formats: str) -> dict:
    """`kvreg report --quarter 2026Q4` from `url` into `out`: its data.json, less when and from where."""
    Kvreg(url)("report", "--quarter", "2026Q4", "--format", formats, "--out", out)
    data = json.loads((out / "2026-Q4" / "data.json").read_text())
    data["provenance"].pop("generated_at")
    data["provenance"].pop("registry_url")
    return data


def _folder_state(folder: Path) -> dict[str, str]:
    """sha256 of each file in the registry's folder. Under root, whom no mode bit stops, SQLite may make the
    -wal and -shm beside a read-only database that it reads in WAL mode (empty of pages); the registry
    file itself stays as it was."""
    files = sorted(folder.iterdir())
    if os.geteuid() == 0:
        files = [p for p in files if not p.name.endswith(("-wal", "-shm"))]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.fixture
def read_only_registry(tmp_path, monkeypatch):
    """(writable URL, read-only URL): the same seeded registry twice, the second made read-only."""
    writable = tmp_path / "rw" / "registry.db"
    writable.parent.mkdir()
    Kvreg(f"sqlite:///{writable}")("init")
    folder = tmp_path / "ro"
    folder.mkdir()
    with sqlite3.connect(writable) as src, sqlite3.connect(folder / "registry.db") as dst:
        src.backup(dst)  # the whole registry, the part still in its write-ahead log too
    src.close()
    dst.close()
    (folder / "registry.db").chmod(0o444)
    folder.chmod(0o555)
    if os.geteuid() == 0:
        # root may write any file: make kvreg see the file as a non-root user does. The full path opens it
        # as kvreg.db.engine does an unwritable file in an unwritable folder (mode=ro, immutable); the fast
        # path's sqlite3.connect would get a read-only handle, as here.
        import kvreg.db.engine as engine
        import kvreg.db.fastpath as fastpath

        real = engine._read_only_file
        monkeypatch.setattr(engine, "_read_only_file",
                            lambda path: (True, True) if Path(path).parent == folder else real(path))
        connect = sqlite3.connect

        def read_only_connect(path, *args, **kwargs):
            if Path(path).parent == folder:
                return connect(f"file:{path}?mode=ro", *args, uri=True, **kwargs)
            return connect(path, *args, **kwargs)

        monkeypatch.setattr(fastpath.sqlite3, "connect", read_only_connect)
    try:
        yield f"sqlite:///{writable}", f"sqlite:///{folder / 'registry.db'}", folder
    finally:
        folder.chmod(0o755)


def test_what_ifs_answer_from_a_read_only_registry_file(read_only_registry, tmp_path, monkeypatch):
    writable, read_only, folder = read_only_registry
    before = _folder_state(folder)
    expected = _answers(writable)
    assert _answers(read_only) == expected
    # The full path (SQLAlchemy, mode=ro) answers the same as the fast path (stdlib sqlite3).
    monkeypatch.setenv("KVREG_FULL_PATH", "1")
    assert _answers(read_only) == expected
    assert _web_answer(read_only) == _web_answer(writable)
    assert _folder_state(folder) == before  # nothing written
    # Llama-3-8B (32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B) = 131,072 B of KV per token: the what-if
    # computed the figures, it did not merely fail the same way twice.
    rows = json.loads(expected["capacity-auto"])
    assert rows[0]["model"] == "Llama-3-8B" and rows[0]["kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2


def test_the_report_reads_a_read_only_registry_file(read_only_registry, tmp_path):
    writable, read_only, folder = read_only_registry
    before = _folder_state(folder)
    ro = _report_data(read_only, tmp_path / "reports-ro", "xlsx")
    assert ro == _report_data(writable, tmp_path / "reports-rw", "xlsx")
    assert ro["sweep"]  # the context sweep (capacity what-ifs) answered
    assert _folder_state(folder) == before


@pytest.fixture
def select_only(pg_server, pg_template):
    """(owner's URL, URL of a role that may only SELECT) on one seeded PostgreSQL registry. The role may not
    create tables or temporary tables, nor write a row."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    name = pg_server.create_database(template=pg_template)
    role = "kvreg_reader_" + secrets.token_hex(3)
    password = "Rd-" + secrets.token_hex(6)
    pg_server.create_role(role, password)
    owner_url = pg_server.url(name)
    admin = create_engine(owner_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with admin.connect() as conn:
            for statement in (f"REVOKE ALL ON DATABASE {name} FROM PUBLIC",
                              f"GRANT CONNECT ON DATABASE {name} TO {role}",
                              "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
                              f"GRANT USAGE ON SCHEMA public TO {role}",
                              f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"):
                conn.exec_driver_sql(statement)
        yield owner_url, pg_server.url(name, role, password)
    finally:
        admin.dispose()
        pg_server.drop_database(name)
        pg_server.drop_role(role)


def test_what_ifs_answer_for_a_role_that_may_only_select(select_only):
    from sqlalchemy import create_engine
    from sqlalchemy.exc import ProgrammingError

    owner, reader = select_only
    engine = create_engine(reader)
    try:
        with engine.connect() as conn:  # the role is as narrow as it claims
            for refused in ("CREATE TEMP TABLE t (x integer)", "DELETE FROM scenario", "CREATE TABLE t (x integer)"):
                with pytest.raises(ProgrammingError, match="permission denied"):
                    with conn.begin_nested() if conn.in_transaction() else conn.begin():
                        conn.exec_driver_sql(refused)
    finally:
        engine.dispose()
    answers = _answers(reader)
    assert answers == _answers(owner)
    assert _web_answer(reader) == _web_answer(owner)
    # The seeded registry's optimal fleet costs 4,608,480 USD where its plans as they stand cost 5,023,680: the
    # dry run solved the integer program (scipy's HiGHS) over what it read, and wrote nothing.
    optimum = json.loads(answers["optimize"])
    assert (optimum["status"], optimum["optimal_cost"]) == ("optimal", 4_608_480)


def test_the_report_reads_for_a_role_that_may_only_select(select_only, tmp_path):
    """`kvreg report` (the context sweep's what-ifs, the quarter's diff, the workbook) from a role that may
    only SELECT: the same data as the owner's."""
    owner, reader = select_only
    read = _report_data(reader, tmp_path / "reports-reader", "md,xlsx")
    assert read == _report_data(owner, tmp_path / "reports-owner", "md,xlsx")
    assert read["sweep"]  # the context sweep (capacity what-ifs) answered


# --------------------------------------------------------------------------- the stored what-ifs

_NO_DECLARATIONS = """\
import sys
from kvreg.cli import main
sys.argv = ["kvreg", "--db", sys.argv[1], "capacity", "--model", "Llama-3-8B", "--tp", "auto", "--format", "json"]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
loaded = sorted(m for m in sys.modules if m == "kvreg.figures.declarations" or m.startswith("sqlalchemy"))
assert not loaded, f"kvreg capacity imported {loaded[:3]}"
"""


def test_the_stored_what_ifs_are_the_compiled_ones(tmp_path):
    """The what-ifs' SQL is kept in kvreg_meta beside the views it was compiled with, and `kvreg capacity`
    reads it there on the fast path: it imports neither SQLAlchemy nor the figure declarations."""
    import subprocess
    import sys

    from kvreg.app.access import open_registry
    from kvreg.db import read as db_read
    from kvreg.figures.views import WHATIF_SQL_KEY, whatif_definitions

    assert db_read.WHATIF_SQL_KEY == WHATIF_SQL_KEY
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    open_registry(url).dispose()
    with sqlite3.connect(tmp_path / "registry.db") as c:
        (stored,) = c.execute("SELECT value FROM kvreg_meta WHERE key = ?", (WHATIF_SQL_KEY,)).fetchone()
    c.close()
    assert json.loads(stored) == {"dialect": "sqlite", "with": whatif_definitions("sqlite")}
    out = subprocess.run([sys.executable, "-c", _NO_DECLARATIONS, url], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)[0]["kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2


def test_what_ifs_in_batches_answer_as_one_statement(tmp_path, monkeypatch):
    """kvreg.app.whatif.evaluate sends many unsaved plans in batches of WHATIF_BATCH (one statement's
    joins over bound rows cost the square of its rows): five plans in batches of two give the rows,
    in order, that one statement gives."""
    from kvreg.app import plans, whatif
    from kvreg.app.access import open_registry

    eng = open_registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        with eng.connect() as conn:
            base = plans.validate_plan(conn, plans.spec_from_options(
                {"model": "Llama-3-8B", "gpu": "H100-SXM", "context": "8k"}, partial=False), named=False)
            rows = [{**base, "users": users} for users in (1, 10, 100, 1000, 10000)]
            one = whatif.evaluate(conn, rows)
            monkeypatch.setattr(whatif, "WHATIF_BATCH", 2)
            batched = whatif.evaluate(conn, rows)
    finally:
        eng.dispose()
    assert batched == one
    # 8,192 tokens x 131,072 B of KV a token (Llama-3-8B) = 1 GiB a sequence: more users, more GPUs.
    assert [r["users"] for r in batched] == [1, 10, 100, 1000, 10000]
    assert [r["gpus_needed"] for r in batched] == sorted(r["gpus_needed"] for r in batched)
    assert batched[0]["gpus_needed"] == 1 and batched[-1]["gpus_needed"] > batched[2]["gpus_needed"]
