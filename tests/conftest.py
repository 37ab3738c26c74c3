"""Shared fixtures: a fresh registry per test on each engine, and a CLI runner bound to it.

`db_url` is parametrized over SQLite and PostgreSQL, so every test that uses it (directly or
through `engine` and `kv`) runs on both: `test_x[sqlite]` and `test_x[postgresql]`. The
PostgreSQL server comes from KVREG_TEST_PG_URL (see tests/pg.py). Without one the PostgreSQL
cases skip, except under CI=true, where they fail: CI must test both engines.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
# Public Hugging Face config.json files vendored with their sources (tests/data/hf-configs/MANIFEST.md):
# tests and benchmarks read nothing outside the repository.
HF_CONFIGS = REPO / "tests" / "data" / "hf-configs"
# The configs the built-in catalog was read from (its rows' `source`): the 17 the catalog tests import.
CATALOG_CONFIGS = sorted(p for p in HF_CONFIGS.glob("*.json")
                         if f'source = "{p.name}"' in (REPO / "kvreg" / "catalog" / "models.toml").read_text())
BACKENDS = ["sqlite", "postgresql"]

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pg  # noqa: E402 - tests/pg.py, beside this file


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Parallel by default: `pytest` runs on one worker per core (pytest-xdist's -n auto), tests
    marked xdist_group together on one worker. An explicit -n (-n 0: serial in this process),
    --pdb, or -p no:xdist wins. Not addopts: -p no:xdist would then reject -n."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    if config.option.numprocesses is None and not config.getoption("usepdb"):
        config.option.numprocesses = "auto"
        if config.option.dist == "no":
            config.option.dist = "loadgroup"


def pytest_report_header(config):
    url = os.environ.get(pg.ENV)
    if not url:
        return f"kvreg: PostgreSQL cases {'FAIL' if _in_ci() else 'skip'}: {pg.ENV} is not set"
    from kvreg.db.engine import mask_url

    return f"kvreg: PostgreSQL server {mask_url(url)}"


def _in_ci() -> bool:
    return os.environ.get("CI") == "true"


@pytest.fixture(scope="session")
def pg_server():
    """The PostgreSQL server to test against; skips without one, fails without one under CI=true."""
    server, why = pg.find_server()
    if server is None:
        if _in_ci():
            pytest.fail(f"CI=true but the PostgreSQL tests cannot run: {why}", pytrace=False)
        pytest.skip(f"no PostgreSQL server: {why}")
    yield server
    server.close()


@pytest.fixture(scope="session")
def pg_template(pg_server):
    """A database kvreg has migrated, seeded and given views, that each test's database copies."""
    name = pg_server.seeded_template()
    yield name
    pg_server.drop_database(name)


def _sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'registry.db'}"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    """A SQLite registry kvreg has created, migrated, seeded and given views, once per session (per
    xdist worker), that each test's SQLite registry copies: copying the file takes milliseconds where
    migrating and seeding a new one takes ~0.5 s of CPU. The SQLite twin of pg_template."""
    from kvreg.app.access import open_registry

    path = tmp_path_factory.mktemp("sqlite-template") / "registry.db"
    open_registry(f"sqlite:///{path}").dispose()
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the one file that is copied
    con.close()
    return path


def sqlite_copy(template: Path, tmp_path: Path, name: str = "registry.db") -> str:
    """A copy of the template registry at tmp_path/name, with an identity of its own (a new
    registry makes a random kvreg_meta.registry_id on its first open; a workbook carries it)."""
    path = tmp_path / name
    shutil.copyfile(template, path)
    con = sqlite3.connect(path)
    with con:
        con.execute("UPDATE kvreg_meta SET value = ? WHERE key = 'registry_id'", (uuid.uuid4().hex,))
    con.close()
    return f"sqlite:///{path}"


@pytest.fixture(scope="module", params=BACKENDS)
def module_db_url(request, tmp_path_factory) -> str:
    """Like db_url, but one registry per test module and engine: for modules whose tests only read."""
    if request.param == "sqlite":
        return sqlite_copy(request.getfixturevalue("sqlite_template"), tmp_path_factory.mktemp("registry"))
    return _pg_database(request, template=True)


def report_workbook(kv, tmp_path: Path) -> Path:
    """The workbook `kvreg report --format xlsx` writes from kv's registry into tmp_path/reports."""
    kv("report", "--quarter", "2026Q4", "--format", "xlsx", "--out", tmp_path / "reports")
    return tmp_path / "reports" / "2026-Q4" / "capacity.xlsx"


@pytest.fixture(scope="module", params=BACKENDS)
def seeded_book(request, tmp_path_factory):
    """One seeded registry per engine and the workbook `kvreg report` wrote from it, once per module:
    (a function that copies the registry, its identity included, to a folder and returns the copy's
    URL and a function that drops it; the workbook). Writing the workbook is most of a case's time;
    copying a registry takes milliseconds, and the workbook is the copy's own, as if it had written it."""
    work = tmp_path_factory.mktemp("seeded-book")
    if request.param == "sqlite":
        url = sqlite_copy(request.getfixturevalue("sqlite_template"), work)
    else:
        server = request.getfixturevalue("pg_server")
        name = server.create_database(template=request.getfixturevalue("pg_template"))
        request.addfinalizer(lambda: server.drop_database(name))
        url = server.url(name)
    book = report_workbook(Kvreg(url), work)  # `kvreg report` closes its connections: the copies below may begin
    if request.param == "sqlite":
        con = sqlite3.connect(work / "registry.db")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the one file that is copied
        con.close()

        def copy(folder: Path):
            shutil.copyfile(work / "registry.db", folder / "registry.db")
            return f"sqlite:///{folder / 'registry.db'}", lambda: None
    else:
        def copy(folder: Path):
            database = server.create_database(template=name)
            return server.url(database), lambda: server.drop_database(database)
    return copy, book


def _pg_database(request, template: bool):
    server = request.getfixturevalue("pg_server")
    name = server.create_database(template=request.getfixturevalue("pg_template") if template else None)
    request.addfinalizer(lambda: server.drop_database(name))
    return server.url(name)


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path) -> str:
    """URL of a fresh registry, already migrated and seeded, which opening leaves as it is: on SQLite
    a copy of sqlite_template in tmp_path, on PostgreSQL a new database copied from pg_template
    (dropped after the test). A test of a registry's first open uses empty_db_url."""
    if request.param == "sqlite":
        return sqlite_copy(request.getfixturevalue("sqlite_template"), tmp_path)
    return _pg_database(request, template=True)


@pytest.fixture(params=BACKENDS)
def empty_db_url(request, tmp_path) -> str:
    """URL of an empty database: no tables, no revision (for tests of first open and of migrations)."""
    if request.param == "sqlite":
        return _sqlite_url(tmp_path)
    return _pg_database(request, template=False)


@pytest.fixture
def pg_url(request) -> str:
    """A fresh migrated and seeded PostgreSQL registry, for tests about PostgreSQL alone."""
    return _pg_database(request, template=True)


@pytest.fixture
def db_backend(db_url) -> str:
    """"sqlite" or "postgresql": which engine this case of the test runs on."""
    return "sqlite" if db_url.startswith("sqlite") else "postgresql"


@pytest.fixture
def engine(db_url):
    from kvreg.app.access import open_registry

    eng = open_registry(db_url)
    yield eng
    eng.dispose()


def registry_state(url: str):
    """What must not change when a command writes nothing. SQLite: the file's bytes (after
    folding the write-ahead log in, so a commit waiting in the WAL counts). PostgreSQL: the
    schema revision, the row counts and the content hash."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        import sqlite3

        path = Path(u.database)
        if not path.exists():
            return None
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size:  # an empty or absent log has nothing to fold in (and the
            con = sqlite3.connect(path)          # checkpoint's connection would parse the schema: ~13 ms)
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            con.close()
        return hashlib.sha256(path.read_bytes()).hexdigest()
    from kvreg.db.engine import current_revision, make_engine
    from kvreg.interchange.dbcopy import content_hash, row_counts

    eng = make_engine(url)
    try:
        with eng.connect() as conn:
            return current_revision(conn), row_counts(conn), content_hash(conn)
    finally:
        eng.dispose()


@pytest.fixture
def state(db_url):
    """state() fingerprints the test's registry: compare before and after a command that must
    write nothing (see registry_state)."""
    return lambda: registry_state(db_url)


class Kvreg:
    """Runs the CLI against one registry: kv("capacity", "--format", "json")."""

    def __init__(self, url: str):
        self.url = url
        self.runner = CliRunner()

    def __call__(self, *args, input=None, ok=True):
        from kvreg.cli import cli

        result = self.runner.invoke(cli, ["--db", self.url, *map(str, args)], input=input, catch_exceptions=False)
        if ok and result.exit_code != 0:
            raise AssertionError(f"kvreg {' '.join(map(str, args))} exited {result.exit_code}:\n{result.output}")
        return result

    def json(self, *args):
        return json.loads(self(*args, "--format", "json").stdout)


@pytest.fixture
def kv(db_url) -> Kvreg:
    return Kvreg(db_url)


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch):
    """CLI tables fit COLUMNS when it is set: no test inherits a width from the shell or another test
    (tests/test_cli_tables.py sets it where it is the point)."""
    monkeypatch.delenv("COLUMNS", raising=False)
