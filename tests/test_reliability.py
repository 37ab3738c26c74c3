"""Reliability, on SQLite and PostgreSQL:

- a registry written by a newer kvreg is refused, by every command, with a clear message, and
  left exactly as it was (SQLite: the file's bytes; PostgreSQL: the revision, row counts and
  content hash);
- writers in separate processes at once lose nothing, duplicate nothing and show the user no
  "database is locked";
- `kill -9` of a running `kvreg report` leaves the previous report whole (also when the kill
  lands inside the final swap), and of a running batch import leaves all of the batch or none.

Migrations with data are in test_migration_data.py, bad input in test_battery.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import HF_CONFIGS, Kvreg, registry_state, sqlite_copy
from sqlalchemy import text

import kvreg
from kvreg.app.access import open_registry
from kvreg.db.engine import RegistryError, make_engine

FUTURE = "ffff0002future"


@pytest.fixture
def sqlite_url(sqlite_template, tmp_path) -> str:
    """A migrated, seeded SQLite registry at tmp_path/registry.db, for the tests that run on SQLite alone:
    what `kvreg init` leaves in a new file, copied from the session's template (milliseconds, where
    migrating and seeding takes ~0.5 s of CPU), with an identity of its own."""
    return sqlite_copy(sqlite_template, tmp_path)


@pytest.fixture
def booked(seeded_book, tmp_path):
    """(kv, workbook): a copy of seeded_book's registry, its identity included, at tmp_path/registry.db,
    and a copy of the workbook `kvreg report --format xlsx` wrote from it, where the report writes it
    (tmp_path/reports/2026-Q4/capacity.xlsx): as if this registry had just written it."""
    url, drop = seeded_book[0](tmp_path)
    path = tmp_path / "reports" / "2026-Q4" / "capacity.xlsx"
    path.parent.mkdir(parents=True)
    shutil.copyfile(seeded_book[1], path)
    yield Kvreg(url), path
    drop()


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
def test_every_command_refuses_a_newer_registry_and_changes_nothing(command, newer, kv, state, tmp_path,
                                                                   sqlite_template):
    sqlite_copy(sqlite_template, tmp_path, "fresh.db")  # a registry at this kvreg's head, as `kvreg init` leaves one
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


# =========================================================================== concurrent writers


def kvreg_command() -> list[str]:
    """The installed `kvreg` beside this Python (as a user runs it), else the same entry point."""
    script = Path(sys.executable).with_name("kvreg")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from kvreg.cli import main; main()"]


# 100 a process: each writer's transactions (a new connection for each model) last seconds, far longer than the
# moment the three processes start together, so they interleave throughout.
WRITES = 100
# One writer: WRITES models, then a plan on each, every one its own transaction (as WRITES
# separate `kvreg model add` and `kvreg plan add` calls would be), started on a signal so the
# writers of a test collide. Models take a new connection per transaction, as separate commands
# do; plans share one connection (new connections are what makes PostgreSQL slow here).
WRITER = """
import sys
from kvreg.app.access import open_registry
from kvreg.app.plans import add_plan
from kvreg.app.registry import add_model

url, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
engine = open_registry(url)
print("ready", flush=True)
sys.stdin.readline()
for i in range(n):
    with engine.begin() as conn:
        add_model(conn, dict(name=f"{prefix}-model-{i}", layers=32, attention_heads=32, kv_heads=8, head_dim=128,
                             params_total=8_000_000_000, max_position_embeddings=131072))
with engine.connect() as conn:
    for i in range(n):
        with conn.begin():
            add_plan(conn, dict(name=f"{prefix}-plan-{i}", model=f"{prefix}-model-{i}", gpu="H100-SXM",
                                gpus_per_node=1, context_tokens=8192))
engine.dispose()
"""


def _declare_models(path: Path, prefix: str, n: int) -> None:
    """A TOML file declaring n models, for `kvreg apply`."""
    rows = [f'[[model]]\nname = "{prefix}-model-{i}"\nlayers = 32\nattention_heads = 32\nkv_heads = 8\n'
            f'head_dim = 128\nparams_b = 8\nmax_position_embeddings = "128K"\n' for i in range(n)]
    path.write_text("\n".join(rows))


def _names(url: str, table: str) -> list[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(f"SELECT name FROM {table}")).scalars())
    finally:
        engine.dispose()


def test_two_writers_at_once_lose_and_duplicate_nothing(empty_db_url, tmp_path):
    """Two processes each add 100 models and 100 plans, one transaction each, to the same registry
    at the same moment, while `kvreg apply` adds 100 more models in one transaction. The registry
    starts empty, so the first opens also race to create, migrate and seed it. Every row arrives
    exactly once and no process prints anything on stderr but, at most once, that it is waiting:
    SQLite writers wait on the busy timeout (BEGIN IMMEDIATE), PostgreSQL's first opens take
    turns on an advisory lock."""
    from collections import Counter

    from kvreg.catalog import load_catalog

    _declare_models(tmp_path / "batch.toml", "c", WRITES)
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, empty_db_url, prefix, str(WRITES)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for prefix in ("a", "b")]
    for w in writers:
        assert w.stdout.readline() == "ready\n", w.communicate()[1]
    applier = subprocess.Popen([*kvreg_command(), "--db", empty_db_url, "apply", str(tmp_path / "batch.toml")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for w in writers:
        w.stdin.write("go\n")
        w.stdin.flush()
    procs = (*writers, applier)
    outputs = [proc.communicate(timeout=300) for proc in procs]
    notices = 0
    for proc, (_out, err) in zip(procs, outputs):
        # nothing on stderr but the one first-run notice of the process that created the registry, and
        # a writer's one line saying it waits for the lock
        waiting = f"kvreg: waiting for another command writing to registry {empty_db_url} (up to 30 s, KVREG_LOCK_TIMEOUT)"
        said = [line for line in err.splitlines() if line.startswith(("kvreg: created ", "kvreg: loaded "))]
        notices += len(said)
        allowed = said + [line for line in err.splitlines() if line == waiting]
        assert proc.returncode == 0 and sorted(err.splitlines()) == sorted(allowed), err
    assert notices <= 1
    assert outputs[-1][0].splitlines()[-1] == f"applied: {WRITES} row(s) written"

    catalog = load_catalog()
    models, plans = Counter(_names(empty_db_url, "model")), Counter(_names(empty_db_url, "plan"))
    assert {f"{p}-model-{i}" for p in "abc" for i in range(WRITES)} <= set(models)  # 0 lost
    assert {f"{p}-plan-{i}" for p in "ab" for i in range(WRITES)} <= set(plans)
    assert max(models.values()) == 1 and max(plans.values()) == 1  # 0 duplicated
    assert sum(models.values()) == len(catalog["models"]) + 3 * WRITES  # and nothing else: 24 + 3 x 100
    assert sum(plans.values()) == len(catalog["plans"]) + 2 * WRITES  # 6 + 2 x 100


# =========================================================================== kill -9: report


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under folder (relative path -> bytes); {} when the folder is missing."""
    if not folder.is_dir():
        return {}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _plant(folder: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)


def _visible(out: Path) -> list[str]:
    """What a reader of the reports folder sees; temporary .tmp-/.old- folders are hidden."""
    return sorted(p.name for p in out.iterdir() if not p.name.startswith("."))


# Seconds after start: importing, opening the registry, reading the views, writing charts and
# the workbook into the temporary folder (a whole report takes about 3 s here).
REPORT_KILL_AFTER = (0.3, 0.7, 1.2, 1.8)


def test_kill_9_of_a_running_report_leaves_the_previous_report_whole(sqlite_url, tmp_path):
    """The registry's engine plays no part in how the report folder is written, so this runs on
    SQLite only."""
    url = sqlite_url
    out = tmp_path / "reports"
    run = [*kvreg_command(), "--db", url, "report", "--quarter", "2026Q4", "--out", str(out)]
    first = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    target = out / "2026-Q4"
    previous = _tree(target)
    assert {"capacity.md", "capacity.xlsx", "data.json"} <= set(previous)
    Kvreg(url)("gpu", "add", "Kill-9-GPU", "--memory", "96GiB")  # so a new report differs from the old

    killed = 0
    for delay in REPORT_KILL_AFTER:
        proc = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait(timeout=120)
        assert proc.returncode in (0, -signal.SIGKILL), proc.stderr.read()
        now = _tree(target)
        # Unless it got as far as the swap (then: the new report, whole), the old one byte for byte.
        if now != previous:
            assert set(now) == set(previous) and b"Kill-9-GPU" in now["data.json"]
            previous = now
        assert _visible(out) == ["2026-Q4"]
    assert killed, "every report finished before its kill: nothing was tested"
    after = subprocess.run([*run, "--format", "md"], capture_output=True, text=True, timeout=120)
    assert after.returncode == 0, after.stderr  # what the kills left behind does not stop the next run
    assert b"Kill-9-GPU" in (target / "data.json").read_bytes()


def _kill_after_calls(n: int, *targets: tuple[object, str]) -> None:
    """Make the process SIGKILL itself right after the n-th call to any of the targets (module, name)."""
    calls = [0]

    def wrap(fn):
        def counted(*args, **kwargs):
            result = fn(*args, **kwargs)
            calls[0] += 1
            if calls[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        return counted

    for module, name in targets:
        if hasattr(module, name):
            setattr(module, name, wrap(getattr(module, name)))


def _in_child(fn) -> int:
    """Run fn in a forked child (which may kill itself); returns the child's wait status."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            fn()
            code = 0
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


OLD_REPORT = {"capacity.md": b"# old\n", "charts/concurrency.png": b"old png", "data.json": b'{"old": 1}\n'}
NEW_REPORT = {"capacity.md": b"# new\n", "charts/concurrency.png": b"new png", "data.json": b'{"new": 1}\n',
              "capacity.xlsx": b"new xlsx"}


def test_kill_9_at_every_step_of_the_swap_leaves_one_whole_report(tmp_path):
    """The last step of `kvreg report` puts the new folder where the old one was. Killed after
    each file-system call of that step in turn, the report folder is always there and always
    one whole report, old or new; the temporary folders left behind are hidden (dot) folders."""
    import kvreg.report.publish

    for step in range(1, 100):
        base = tmp_path / f"step-{step}"
        target, tmp = base / "2026-Q4", base / ".2026-Q4.tmp-test"
        _plant(target, OLD_REPORT)
        _plant(tmp, NEW_REPORT)

        def swap():
            _kill_after_calls(step, (os, "rename"), (os, "replace"), (os, "unlink"), (os, "rmdir"),
                              (shutil, "rmtree"), (kvreg.report.publish, "_exchange"))
            kvreg.report.publish._swap_into_place(tmp, target)

        status = _in_child(swap)
        assert _tree(target) in (OLD_REPORT, NEW_REPORT), f"killed after call {step}: {_tree(target)}"
        assert _visible(base) == ["2026-Q4"]
        if os.WIFEXITED(status):  # fewer calls than step: the swap ran to the end
            assert os.WEXITSTATUS(status) == 0
            assert _tree(target) == NEW_REPORT and sorted(os.listdir(base)) == ["2026-Q4"]
            break
        assert os.WTERMSIG(status) == signal.SIGKILL
    assert step > 2, "the swap made fewer file-system calls than expected: is the test still hooking them?"


# =========================================================================== kill -9: batch import

BATCH = 300  # config.json files in one `kvreg model import` (about 1 s on SQLite, 1.5 s on PostgreSQL)
IMPORT_KILL_AFTER = (0.4, 0.7, 1.0, 1.3)


def _batch(folder: Path, tag: str, n: int = BATCH) -> list[str]:
    """n model folders named tag-000 ... each holding one of the shared config.json files."""
    configs = sorted(HF_CONFIGS.glob("*.json"))
    paths = []
    for i in range(n):
        model = folder / tag / f"{tag}-{i:03d}"
        model.mkdir(parents=True)
        shutil.copyfile(configs[i % len(configs)], model / "config.json")
        paths.append(str(model))
    return paths


def _imported(url: str, tag: str) -> int:
    return sum(name.startswith(f"{tag}-") for name in _names(url, "model"))


def _sqlite_intact(url: str) -> None:
    if url.startswith("sqlite"):
        import sqlite3

        con = sqlite3.connect(url.removeprefix("sqlite:///"))
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        con.close()


def test_kill_9_of_a_running_batch_import_keeps_all_or_none(db_url, kv, tmp_path):
    kv("init")
    killed = 0
    for k, delay in enumerate(IMPORT_KILL_AFTER):
        tag = f"batch{k}"
        paths = _batch(tmp_path, tag)
        proc = subprocess.Popen([*kvreg_command(), "--db", db_url, "model", "import", *paths, "--format", "csv"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait(timeout=120)
        assert proc.returncode in (0, -signal.SIGKILL)
        # Killed: all (the commit came first) or none. Finished: all.
        assert _imported(db_url, tag) in ((BATCH,) if proc.returncode == 0 else (0, BATCH))
        _sqlite_intact(db_url)
    assert killed, "every import finished before its kill: nothing was tested"
    assert len(kv.json("model", "list")) >= 24  # the registry still opens and reads


def test_kill_9_inside_the_import_transaction_writes_nothing(db_url, kv, tmp_path):
    """Killed for certain mid-transaction: after half the batch's rows are written, uncommitted."""
    import kvreg.app.registry

    kv("init")
    before = registry_state(db_url)
    paths = _batch(tmp_path, "mid", 40)

    def import_and_die():
        from kvreg.cli import main

        _kill_after_calls(len(paths) // 2, (kvreg.app.registry, "add_model"))
        main(["--db", db_url, "model", "import", *paths, "--format", "csv"])

    status = _in_child(import_and_die)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert registry_state(db_url) == before
    assert _imported(db_url, "mid") == 0
    _sqlite_intact(db_url)
    kv("model", "import", *paths[:2], "--format", "csv")  # and the next writer is not blocked
    assert _imported(db_url, "mid") == 2


# =========================================================================== issue 21: nothing lost
#
# Each test below failed on the main branch before issue 21: the registry or the files around
# it were lost, damaged, adopted or held, or the user got a traceback instead of one line.


def _one_line_error(result, match: str) -> str:
    """The run failed with exactly one stderr line matching `match`; returns it."""
    import re

    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code != 0, result.output
    assert len(lines) == 1, result.stderr
    assert re.search(match, lines[0]), lines[0]
    return lines[0]


@pytest.mark.parametrize("url", ["sqlite:///", "sqlite://", "sqlite:///:memory:"])
def test_kvreg_db_naming_no_file_is_refused_not_written_and_lost(url, monkeypatch, tmp_path):
    """Through KVREG_DB as through --db: a registry that cannot persist would print "added gpu"
    and lose it at exit."""
    from click.testing import CliRunner

    from kvreg.cli import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KVREG_DB", url)
    result = CliRunner().invoke(cli, ["gpu", "add", "g", "--memory", "80GiB"])
    _one_line_error(result, r"names no file \(an in-memory database\): everything written would be lost")
    assert result.stdout == "" and os.listdir(tmp_path) == []


def test_a_downgrade_that_drops_rows_needs_yes_and_is_not_undone_behind_the_users_back(kv, db_url, state):
    """The seeded plan chat-and-docs-llama3-8b has a workload mix of 2 classes: 0002 has no table for them."""
    kv("init")
    before = state()
    refused = kv("db", "downgrade", "0002", ok=False)
    _one_line_error(refused, r"to 0002 would drop .*2 workload_class rows: nothing was changed; pass --yes")
    assert state() == before
    done = kv("db", "downgrade", "0002", "--yes")
    assert done.stdout.startswith("downgraded to 0002; dropped ") and done.stdout.endswith(", 2 workload_class rows\n")
    assert kv.json("db", "current")[0]["revision"] == "0002"
    for args in (["model", "list"], ["gpu", "add", "g", "--memory", "80GiB"], ["report", "--out", "reports"]):
        later = kv(*args, ok=False)  # no command upgrades it quietly: the user asked for 0002
        _one_line_error(later, r"was downgraded to schema revision 0002 with `kvreg db downgrade`; .*"
                               r"run `kvreg db upgrade`")
    assert kv.json("db", "current")[0]["revision"] == "0002"
    assert kv("db", "upgrade").stdout == "upgraded to head\n"
    assert len(kv.json("model", "list")) == 24  # the catalog's 24 models, back at head


@pytest.fixture
def foreign(empty_db_url):
    """Someone else's database: one table, customers, with one row."""
    engine = make_engine(empty_db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(40))"))
        conn.execute(text("INSERT INTO customers (id, name) VALUES (1, 'Ada')"))
    engine.dispose()
    return empty_db_url


def _foreign_state(url: str):
    """Exactly what the foreign database holds: SQLite the file's bytes, PostgreSQL its table names
    and the customers rows."""
    from sqlalchemy import inspect

    if url.startswith("sqlite"):
        import hashlib

        return hashlib.sha256(Path(url.removeprefix("sqlite:///")).read_bytes()).hexdigest()
    engine = make_engine(url)
    with engine.connect() as conn:
        found = sorted(inspect(conn).get_table_names()), conn.execute(text("SELECT * FROM customers")).all()
    engine.dispose()
    return found


@pytest.mark.parametrize("args", [["gpu", "add", "g", "--memory", "80GiB"], ["init"], ["model", "list"],
                                  ["db", "upgrade"], ["capacity", "--model", "Llama-3.1-8B"]])
def test_a_database_that_is_not_a_registry_is_refused_untouched(args, foreign, tmp_path):
    before = _foreign_state(foreign)
    result = Kvreg(foreign)(*args, ok=False)
    _one_line_error(result, r"is not a kvreg registry: it holds other tables \(customers\) .*left untouched")
    assert _foreign_state(foreign) == before


def test_db_copy_into_a_database_that_is_not_a_registry_is_refused_untouched(foreign, tmp_path, sqlite_template):
    source = sqlite_copy(sqlite_template, tmp_path, "source.db")
    before = _foreign_state(foreign)
    result = Kvreg(source)("db", "copy", "--to", foreign, ok=False)
    _one_line_error(result, r"is not a kvreg registry")
    assert _foreign_state(foreign) == before


def test_a_report_cleans_what_killed_runs_left_and_replaces_a_symlink_without_following_it(kv, tmp_path):
    kv("init")
    out = tmp_path / "reports"
    elsewhere = tmp_path / "elsewhere"
    _plant(elsewhere, {"keep.txt": b"not kvreg's\n"})
    out.mkdir()
    (out / "2026-Q4").symlink_to(elsewhere, target_is_directory=True)
    stale = [".2027-Q1.tmp-k2j4h1x_", ".2026-Q4.tmp-999999999-ab12cd34", ".2026-Q3.old-0a1b2c3d"]
    for name in stale:  # as killed runs leave them: older kvreg's name, a dead process's, an old report
        _plant(out / name, {"capacity.md": b"# half\n", "charts/a.png": b"x" * 1000})
    live = out / f".2026-Q2.tmp-{os.getpid()}-live0001"  # a run still going: left alone
    _plant(live, {"capacity.md": b"# being written\n"})
    not_ours = out / ".2026-Q4.tmp-notes"  # looks close, is not kvreg's naming: left alone
    not_ours.write_text("mine\n")
    (out / "notes.txt").write_text("mine\n")

    kv("report", "--quarter", "2026Q4", "--out", str(out), "--format", "md")
    assert sorted(os.listdir(out)) == sorted([".2026-Q4.tmp-notes", live.name, "2026-Q4", "notes.txt"])
    assert not (out / "2026-Q4").is_symlink() and (out / "2026-Q4" / "data.json").is_file()
    assert _tree(elsewhere) == {"keep.txt": b"not kvreg's\n"}  # the link's target was not written or deleted


def test_db_copy_cleans_what_a_killed_copy_left_and_leaves_no_temporaries(kv, db_url, tmp_path):
    kv("init")
    target = tmp_path / "copy.db"
    dead = tmp_path / ".copy.db.kvreg-copy-999999999-0a1b2c3d"  # a killed copy's file, and its WAL
    for suffix in ("", "-wal", "-shm"):
        Path(f"{dead}{suffix}").write_bytes(b"")
    kv("db", "copy", "--from", db_url, "--to", f"sqlite:///{target}")
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".copy.db"))
    assert leftovers == []
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("copy.db")) == ["copy.db"]
    assert len(Kvreg(f"sqlite:///{target}").json("model", "list")) == 24


def test_export_keeps_the_files_mode_follows_the_umask_and_writes_through_a_symlink(kv, tmp_path):
    kv("init")
    old = os.umask(0o022)
    try:
        kv("export", "--out", str(tmp_path / "new.toml"))
        assert (tmp_path / "new.toml").stat().st_mode & 0o777 == 0o644  # 0666 less the umask 022
        kept = tmp_path / "kept.toml"
        kept.write_text("old\n")
        kept.chmod(0o640)
        kv("export", "--out", str(kept))
        assert kept.stat().st_mode & 0o777 == 0o640 and kept.read_text().startswith("# kvreg registry: dtypes, GPUs, models, plans (with their workload mix), demand and fleet.\n")
        real = tmp_path / "real.toml"
        real.write_text("old\n")
        (tmp_path / "link.toml").symlink_to(real)
        kv("export", "--out", str(tmp_path / "link.toml"))
        assert (tmp_path / "link.toml").is_symlink() and real.read_text() == kept.read_text()
    finally:
        os.umask(old)


# =========================================================================== issue 21: locks


def test_a_report_reads_one_snapshot_and_holds_no_write_lock(sqlite_url, tmp_path, monkeypatch):
    """While the report is reading, another process adds a GPU without waiting (busy timeout 0:
    on main, BEGIN IMMEDIATE held for the whole report made it fail "database is locked"), and
    the report shows the registry as it was when it started: without that GPU."""
    import sqlite3

    import kvreg.report.gather

    url = sqlite_url
    kv = Kvreg(url)
    gpus_before = len(kv.json("gpu", "list"))
    original, added = kvreg.report.gather._gpus, []

    def gpus_with_a_writer_in_between(conn):
        con = sqlite3.connect(tmp_path / "registry.db", timeout=0, isolation_level=None)
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO gpu (name, memory_bytes, vendor, interconnect, notes) "
                    "VALUES ('B300-new', 288000000000, '', '', '')")
        con.execute("COMMIT")
        con.close()
        added.append(True)
        return original(conn)

    monkeypatch.setattr(kvreg.report.gather, "_gpus", gpus_with_a_writer_in_between)
    kv("report", "--quarter", "2026Q4", "--out", str(tmp_path / "reports"), "--format", "md")
    assert added == [True]
    data = json.loads((tmp_path / "reports" / "2026-Q4" / "data.json").read_text())
    assert len(data["gpus"]) == gpus_before and "B300-new" not in {g["gpu"] for g in data["gpus"]}
    assert len(kv.json("gpu", "list")) == gpus_before + 1


def _hold_write_lock(path: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the SQLite write lock until a line arrives on its stdin, or
    `seconds` pass; returns once it holds it."""
    code = ("import select, sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE')\nprint('held', flush=True)\n"
            "select.select([sys.stdin], [], [], float(sys.argv[2]))\nc.execute('ROLLBACK')\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), str(seconds)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "held\n"
    return proc


def test_a_writer_waiting_for_the_lock_says_so_and_then_writes(sqlite_url, tmp_path):
    url = sqlite_url
    holder = _hold_write_lock(tmp_path / "registry.db", 120)
    writer = subprocess.Popen([*kvreg_command(), "--db", url, "gpu", "add", "g", "--memory", "80GiB"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waiting = writer.stderr.readline()  # said while the lock is still held
    holder.communicate("release\n", timeout=60)
    out, err = writer.communicate(timeout=120)
    assert waiting == f"kvreg: waiting for another command writing to registry {url} (up to 30 s, KVREG_LOCK_TIMEOUT)\n"
    assert writer.returncode == 0 and out.startswith("added gpu g\nnote: estimated the memory g reports as 79.21 GiB") and err == ""


def test_a_writer_that_waited_in_vain_stops_in_one_line_and_writes_nothing(sqlite_url, tmp_path):
    url = sqlite_url
    before = registry_state(url)
    holder = _hold_write_lock(tmp_path / "registry.db", 120)  # held until the writer has given up
    run = subprocess.run([*kvreg_command(), "--db", url, "gpu", "add", "g", "--memory", "80GiB"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "KVREG_LOCK_TIMEOUT": "2"})
    holder.communicate("release\n", timeout=60)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.splitlines() == [
        f"kvreg: waiting for another command writing to registry {url} (up to 2 s, KVREG_LOCK_TIMEOUT)",
        f"Error: registry {url} is still locked by another writer after 2 s: nothing was written; "
        "try again when it has finished (or raise KVREG_LOCK_TIMEOUT)"]
    assert registry_state(url) == before


# =========================================================================== issue 21: one line, not a traceback


@contextlib.contextmanager
def _reachable_by_others(paths: list[Path]):
    """Let another user reach `paths` (search permission on each folder above them that lacks it),
    restored afterwards: a checkout under a private folder (mktemp -d makes one 0700) cannot be run
    by the unprivileged user otherwise."""
    changed = {}
    for path in paths:
        for folder in path.resolve().parents:
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH and folder not in changed:
                changed[folder] = mode
                folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
    try:
        yield
    finally:
        for folder, mode in changed.items():
            folder.chmod(stat.S_IMODE(mode))


def test_a_read_only_registry_can_be_read_and_refuses_writes_in_one_line(sqlite_template):
    """A registry in a folder the user cannot write (run as an unprivileged user: root writes anyway)."""
    import shutil as sh
    import tempfile

    if os.geteuid() == 0 and not sh.which("setpriv"):
        pytest.skip("running as root without setpriv: cannot make a registry read-only")
    folder = Path(tempfile.mkdtemp(prefix="kvreg-ro-"))
    try:
        url = sqlite_copy(sqlite_template, folder)
        Kvreg(url)("gpu", "add", "mine", "--memory", "80GiB")
        before = registry_state(url)
        for p in folder.iterdir():
            p.chmod(0o444)
        folder.chmod(0o555)
        as_user = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"] if os.geteuid() == 0 else []

        def run(*args):
            with _reachable_by_others([Path(kvreg_command()[0]), Path(kvreg.__file__)] if as_user else []):
                return subprocess.run([*as_user, *kvreg_command(), "--db", url, *args], capture_output=True,
                                      text=True, timeout=120)

        listed = run("gpu", "list", "--format", "json")
        assert listed.returncode == 0, listed.stderr
        assert "mine" in {g["name"] for g in json.loads(listed.stdout)}
        refused = run("gpu", "add", "g", "--memory", "80GiB")
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr == (f"Error: registry {url} is read-only: nothing was written; make the file and its "
                                  "folder writable, or copy it elsewhere (kvreg db copy)\n")
        folder.chmod(0o755)
        assert registry_state(url) == before
    finally:
        folder.chmod(0o755)
        sh.rmtree(folder)


NOTES = "x" * 50_000  # more than the free space of any page: the write needs new pages


@pytest.mark.parametrize("args", [
    ["gpu", "add", "g", "--memory", "80GiB", "--notes", NOTES],
    ["plan", "add", "p", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--notes", NOTES],
    ["model", "add", "m", "--layers", "32", "--kv-heads", "8", "--attention-heads", "32", "--head-dim", "128",
     "--params-b", "8", "--notes", NOTES],
    ["apply", "{tmp}/one.toml"],
])
def test_a_full_disk_is_one_line_and_writes_nothing(args, sqlite_url, tmp_path):
    """SQLite's max_page_count set to the file's size: the next page written fails "database or
    disk is full", as a full disk does. (demand set writes a row too small to need a new page
    here; it goes through the same error handler.)"""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    url = sqlite_url
    (tmp_path / "one.toml").write_text(f"[[gpu]]\nname = 'g'\nmemory_bytes = '80GiB'\nnotes = '{NOTES}'\n")
    before = registry_state(url)

    def full(dbapi_conn, _record):
        pages = dbapi_conn.execute("PRAGMA page_count").fetchone()[0]
        dbapi_conn.execute(f"PRAGMA max_page_count = {pages}")

    event.listen(Engine, "connect", full)
    try:
        result = Kvreg(url)(*[a.replace("{tmp}", str(tmp_path)) for a in args], ok=False)
    finally:
        event.remove(Engine, "connect", full)
    _one_line_error(result, rf"^Error: the disk holding registry {url} is full: nothing was written; free some space")
    assert registry_state(url) == before


def test_ctrl_c_reaches_kvregs_handler(monkeypatch, capsys, tmp_path):
    """Click's standalone mode printed "Aborted!" and exited 1."""
    import kvreg.cli.common
    from kvreg.cli import main

    def interrupted(_ctx):
        raise KeyboardInterrupt

    monkeypatch.setattr(kvreg.cli.common, "open_db", interrupted)
    monkeypatch.setattr("kvreg.cli.gpus.open_db", interrupted, raising=False)
    with pytest.raises(SystemExit) as exit_:
        main(["--db", f"sqlite:///{tmp_path}/r.db", "gpu", "add", "g", "--memory", "80GiB"])
    assert exit_.value.code == 130
    err = capsys.readouterr().err
    assert err.strip() == "kvreg: interrupted; nothing was written" and "Aborted" not in err


def test_a_connection_lost_partway_through_a_report_is_one_line_that_says_so(pg_url, tmp_path, monkeypatch):
    """The server ends the report's session after it has started reading (as a server stopped
    mid-report does): one line saying the connection was lost, not "cannot open", and no
    "Exception ignored" tracebacks from the half-written workbook."""
    import kvreg.report.gather

    original = kvreg.report.gather._gpus

    def server_goes_away(conn):
        conn.exec_driver_sql("SELECT pg_terminate_backend(pg_backend_pid())")
        return original(conn)

    monkeypatch.setattr(kvreg.report.gather, "_gpus", server_goes_away)
    result = Kvreg(pg_url)("report", "--quarter", "2026Q4", "--out", str(tmp_path / "reports"), ok=False)
    _one_line_error(result, r"^Error: lost the connection to registry .* partway: .*terminating connection.*"
                            r"nothing was written: run the command again when the server is back$")
    assert not (tmp_path / "reports" / "2026-Q4").exists()


FAILING_WORKBOOK = """
import sys
import kvreg.export.xlsx
from kvreg.db.engine import RegistryError

def lost(*args, **kwargs):
    raise RegistryError("lost the connection to registry X partway: server closed the connection")

kvreg.export.xlsx._sweep_sheet = lost
from kvreg.cli import main
main(sys.argv[1:])
"""


def test_a_report_failing_inside_the_workbook_prints_one_line_and_no_exception_ignored(sqlite_url, tmp_path):
    url = sqlite_url
    run = subprocess.run([sys.executable, "-c", FAILING_WORKBOOK, "--db", url, "report", "--quarter", "2026Q4",
                          "--out", str(tmp_path / "reports"), "--format", "xlsx"], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 1
    assert run.stderr == "Error: lost the connection to registry X partway: server closed the connection\n"
    assert os.listdir(tmp_path / "reports") == []


def test_a_tilde_in_a_sqlite_url_is_the_home_folder(monkeypatch, tmp_path):
    """The folder check expanded ~ but SQLite did not (it looked for a folder named ~)."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    Kvreg("sqlite:///~/registry.db")("gpu", "add", "g", "--memory", "80GiB")
    assert (home / "registry.db").is_file() and os.listdir(cwd) == []
    assert "g" in {g["name"] for g in Kvreg(f"sqlite:///{home}/registry.db").json("gpu", "list")}


# =========================================================================== issue 21: injection


def test_csv_output_quotes_text_a_spreadsheet_would_run_as_a_formula(kv):
    kv("init")
    kv("gpu", "add", "=cmd|' /C calc'!A0", "--memory", "80GiB", "--vendor", "@SUM(1+1)",
       "--notes", '=HYPERLINK("http://example.com","x")')
    kv("gpu", "add", "+plus", "--memory", "80GiB", "--vendor", "-minus")
    rows = {r["name"]: r for r in __import__("csv").DictReader(kv("gpu", "list", "--format", "csv").stdout.splitlines())}
    assert rows["'=cmd|' /C calc'!A0"]["vendor"] == "'@SUM(1+1)"
    assert rows["'+plus"]["vendor"] == "'-minus"
    full = kv("gpu", "show", "=cmd|' /C calc'!A0", "--format", "csv").stdout
    assert "\"'=HYPERLINK(\"\"http://example.com\"\",\"\"x\"\")\"" in full
    assert kv.json("gpu", "show", "=cmd|' /C calc'!A0")[0]["name"] == "=cmd|' /C calc'!A0"  # JSON: as stored
    # numbers stay numbers: a negative figure is not text
    from kvreg.core.text import spreadsheet_safe

    assert spreadsheet_safe(-5) == -5 and spreadsheet_safe("-5") == "'-5" and spreadsheet_safe("H100") == "H100"


# =========================================================================== issue 21: limits


def test_a_previous_data_json_too_big_deep_or_malformed_is_not_compared(kv, tmp_path, monkeypatch):
    """Without --compare the report is written, and says why nothing was compared; data.json is
    read at most MAX_DATA_JSON_BYTES (here lowered to 1,000 to test it with a small file)."""
    import kvreg.core.limits

    kv("init")
    out = tmp_path / "reports"
    cases = {
        "big": ('{"format": "kvreg-report/1", "pad": "' + "x" * 2000 + '"}', r"larger than 0 MB|is 0\.0 MB"),
        "deep": ('{"format": "kvreg-report/1", "models": ' + "[" * 100 + "]" * 100 + "}",
                 r"nested more than 32 levels deep"),
        "malformed": ('{"format": "kvreg-report/1", "procurement": [{"gpu": "H100-SXM", "gpus_needed": "many"}]}',
                      r"procurement 'H100-SXM': gpus_needed is not a number"),
    }
    monkeypatch.setattr(kvreg.core.limits, "MAX_DATA_JSON_BYTES", 1000)
    import re

    for name, (content, reason) in cases.items():
        _plant(out / "2026-Q3", {"data.json": content.encode()})
        kv("report", "--quarter", "2026Q4", "--out", str(out), "--format", "md")
        note = json.loads((out / "2026-Q4" / "data.json").read_text())["comparison"]["note"]
        assert note.startswith("Nothing is compared: 2026-Q3/data.json cannot be read (") and re.search(reason, note), \
            (name, note)


# --------------------------------------------------------------------------- round 3 (issue 45)


def _hold_uncommitted_gpu(path: Path, seconds: float) -> subprocess.Popen:
    """Another process in the middle of a write: it holds the SQLite write lock with a GPU added
    and not committed, until a line arrives on its stdin or `seconds` pass (then it rolls back)."""
    code = ("import select, sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE')\n"
            "c.execute(\"INSERT INTO gpu (name, memory_bytes, vendor, interconnect, notes) "
            "VALUES ('uncommitted', 85899345920, '', '', '')\")\n"
            "print('held', flush=True)\n"
            "select.select([sys.stdin], [], [], float(sys.argv[2]))\nc.execute('ROLLBACK')\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), str(seconds)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "held\n"
    return proc


READS = [
    ["plan", "list", "--format", "json"],
    ["gpu", "list", "--format", "json"],
    # A what-if writes nothing: its scenarios are bound as parameters (kvreg.db.read.whatif).
    ["capacity", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--context", "8K", "--format", "json"],
]


@pytest.mark.parametrize("args", READS, ids=lambda a: a[0] if a[0] != "plan" else "plan-list")
def test_reads_never_wait_for_a_writer(args, sqlite_url, tmp_path):
    """Issue 45 item 3: the fast read path began BEGIN IMMEDIATE, so while another process was
    writing, `plan list` and the web what-if waited 37-40 s and failed. A read is a deferred
    transaction in WAL mode: it answers at once, from the registry as last committed (the other
    process's uncommitted GPU is not there). The wait is bounded: a read that blocks fails by timeout."""
    path = tmp_path / "registry.db"
    url = sqlite_url
    env = {**os.environ, "KVREG_DB": url}
    before = subprocess.run([*kvreg_command(), *args], env=env, capture_output=True, text=True, timeout=60)
    assert before.returncode == 0, before.stderr
    holder = _hold_uncommitted_gpu(path, 60)
    try:
        during = subprocess.run([*kvreg_command(), *args], env=env, capture_output=True, text=True, timeout=20)
    finally:
        holder.communicate("done\n", timeout=30)
    assert (during.returncode, during.stderr) == (0, "")
    assert during.stdout == before.stdout
    assert "uncommitted" not in during.stdout


def test_a_what_if_on_an_open_engine_waits_for_no_writer(sqlite_url, tmp_path):
    """The web server's what-if, once its engine is open, reads through kvreg.db.read.snapshot: a
    plain read transaction that writes nothing (kvreg.db.read.whatif). A busy timeout of 0 makes any wait for the
    write lock an immediate "database is locked" instead of a hang."""
    from kvreg.app.capacity import ask, question_from_options
    from kvreg.db.read import snapshot

    path = tmp_path / "registry.db"
    url = sqlite_url
    engine = open_registry(url)
    q = question_from_options(models=("Llama-3-8B",), gpus=("H100-SXM",), context="8K")
    with snapshot(engine) as conn:
        expected = ask(conn, q)
    holder = _hold_uncommitted_gpu(path, 60)
    try:
        with snapshot(engine) as conn:
            conn.exec_driver_sql("PRAGMA busy_timeout = 0")
            assert ask(conn, q) == expected
            assert "uncommitted" not in {r[0] for r in conn.exec_driver_sql("SELECT name FROM gpu")}
    finally:
        holder.communicate("done\n", timeout=30)
        engine.dispose()
    # Llama-3-8B: 2 (K and V) x 32 layers x 8 KV heads x 128 x 2 B (bf16) = 131,072 B per token.
    assert expected[0]["kv_bytes_per_token"] == 131_072


# =========================================================================== issue 45: hostile workbooks


def _sheet_part(name: str) -> str:
    from kvreg.export.xlsx import SHEETS

    return f"xl/worksheets/sheet{SHEETS.index(name) + 1}.xml"


def _state_part() -> str:
    from kvreg.export.xlsx import SHEETS

    return f"xl/worksheets/sheet{len(SHEETS) + 1}.xml"  # the very hidden state sheet, written last


def _rezip(src: Path, dst: Path, edits: dict, pad: tuple[str, int] | None = None) -> Path:
    """A copy of the workbook with some parts' bytes edited (part -> function of the bytes); `pad`:
    (part, MB of spaces) after that part's XML, which stays well-formed."""
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            data = edits.get(info.filename, lambda b: b)(data)
            if pad and pad[0] == info.filename:
                with zout.open(info.filename, "w", force_zip64=True) as fh:
                    fh.write(data)
                    block = b" " * (1 << 20)
                    for _ in range(pad[1]):
                        fh.write(block)
            else:
                zout.writestr(info.filename, data)
        if pad and pad[0] not in zin.namelist():  # a part of its own (kvreg writes no shared strings)
            with zout.open(pad[0], "w", force_zip64=True) as fh:
                fh.write(b'<?xml version="1.0"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/'
                         b'main"/>')
                for _ in range(pad[1]):
                    fh.write(b" " * (1 << 20))
    return dst


class _Written:
    """The workbook kvreg wrote: its path (for zipfile), and one openpyxl load of it that the cases
    typing into it share (a load costs ~0.4 s of CPU); each case puts back what it typed once saved."""

    def __init__(self, path: Path):
        self.path = path
        self._wb = None

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def wb(self):
        if self._wb is None:
            from openpyxl import load_workbook

            self._wb = load_workbook(self.path)
        return self._wb


def _typed_row(src: _Written, dst: Path, sheet: str, **values) -> Path:
    """The workbook with one row typed under the last (what finance does in Excel)."""
    ws = src.wb[sheet]
    names = {c.value: c.column for c in ws[2]}
    new = ws.max_row + 1
    for name, value in values.items():
        ws.cell(new, names[name]).value = value
    try:
        src.wb.save(dst)
    finally:
        ws.delete_rows(new)
    return dst


def _set_cell(src: _Written, dst: Path, sheet: str, key: str, column: str, value) -> Path:
    ws = src.wb[sheet]
    names = {c.value: c.column for c in ws[2]}
    row = next(r for r in range(3, ws.max_row + 1) if ws.cell(r, 1).value == key)
    cell = ws.cell(row, names[column])
    was, cell.value = cell.value, value
    try:
        src.wb.save(dst)
    finally:
        cell.value = was
    return dst


_LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
           + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
                      for i in range(1, 10))
           + b"]>")
_EXTERNAL = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'


def _after_declaration(prefix: bytes):
    """Edit: the part's own XML declaration replaced by `prefix` (a declaration and a DOCTYPE), and an
    entity reference put in its first text, as an attacker would."""
    import re

    def edit(data: bytes) -> bytes:
        data = re.sub(rb"^<\?xml[^>]*\?>", b"", data.lstrip())
        return prefix + re.sub(rb"<v>[^<]*</v>", b"<v>&lol9;</v>" if b"lol" in prefix else b"<v>&e;</v>", data, 1)
    return edit


def _cell_value(ref: str, value: bytes):
    import re

    return lambda data: re.sub(rb'(<c r="%s"[^>]*>(?:<f>[^<]*</f>)?<v>)[^<]*(</v>)' % ref.encode(),
                               rb"\g<1>" + value + rb"\g<2>", data, count=1)


def _add_cell(row: int, ref: str):
    import re

    def edit(data: bytes) -> bytes:
        return re.sub(rb"</sheetData>", b'<row r="%d"><c r="%s"><v>1</v></c></row></sheetData>'
                      % (row, ref.encode()), data, count=1)
    return edit


# name -> (how to make it from the workbook kvreg wrote, the one line expected). Each: exit 1, that
# line alone on stderr, nothing on stdout, the registry unchanged. docs/reliability.md lists them.
HOSTILE_WORKBOOKS = {
    "demand-quarter-abcdQ1": (lambda b, d: _typed_row(b, d, "Demand", plan="chat-llama3-8b", quarter="abcdQ1",
                                                      users=5),
                              r"^Error: Demand!B\d+ \(quarter\): quarter 'abcdQ1' is not understood: write it as "
                              r"YEARQn, for example 2026Q4$"),
    "demand-quarter-0000Q1": (lambda b, d: _typed_row(b, d, "Demand", plan="chat-llama3-8b", quarter="0000Q1",
                                                      users=5),
                              r"^Error: Demand!B\d+ \(quarter\): quarter '0000Q1' has an implausible year 0: type it "
                              r"as YEARQn, for example 2027Q1$"),
    "demand-quarter-2026Q5": (lambda b, d: _typed_row(b, d, "Demand", plan="chat-llama3-8b", quarter="2026Q5",
                                                      users=5),
                              r"quarter '2026Q5' has no quarter 5: quarters run Q1 to Q4: type it as YEARQn"),
    "demand-quarter-2027-Q1": (lambda b, d: _typed_row(b, d, "Demand", plan="chat-llama3-8b", quarter="2027-Q1",
                                                       users=5),
                               r"^Error: Demand!B\d+ \(quarter\): quarter '2027-Q1' is not written YEARQn, the way the "
                               r"workbook's formulas read a quarter: type 2027Q1$"),
    "cell-at-XFD1048576": (lambda b, d: _rezip(b, d, {_sheet_part("Demand"): _add_cell(1048576, "XFD1048576")}),
                           r"^Error: .*capacity-cell-at-XFD1048576\.xlsx: sheet Demand reaches row 1,048,576 \(cell "
                           r"XFD1048576\): more than 200,000; delete the rows below the data"),
    "cell-in-column-XFD": (lambda b, d: _rezip(b, d, {_sheet_part("Demand"): _add_cell(40, "XFD40")}),
                           r"sheet Demand reaches column 16,384 \(cell XFD40\): more than 1,024; delete the columns"),
    "sheet-inflating-to-1.1GB": (lambda b, d: _rezip(b, d, {}, pad=(_sheet_part("Demand"), 1100)),
                                 r"inflates to 1,\d{3} MB: more than 1024 MB, too big for a capacity workbook"),
    "shared-strings-inflating-to-65MB": (lambda b, d: _rezip(b, d, {}, pad=("xl/sharedStrings.xml", 65)),
                                         r"its shared strings inflate to 6\d MB: more than 64 MB"),
    "nan-in-a-cell": (lambda b, d: _rezip(b, d, {_sheet_part("Demand"): _cell_value("C3", b"NaN")}),
                      r"sheet Demand cell C3 holds 'NaN', not a finite number; type a number in Demand!C3 \(or "
                      r"clear it\) and save again$"),
    "users-1e300": (lambda b, d: _set_cell(b, d, "Demand", "chat-llama3-8b", "users", 1e300),
                    r"^Error: Demand!C\d+ \(users\): users 1e\+300 is too large"),
    "memory-1e300-GiB": (lambda b, d: _set_cell(b, d, "GPUs", "H100-SXM", "memory_gib_input", 1e300),
                         r"^Error: GPUs!\w+\d+ \(memory_gib_input\): 1e\+300 is too large a number: type the value in "
                         r"the column's unit$"),
    "billion-laughs": (lambda b, d: _rezip(b, d, {_sheet_part("Demand"): _after_declaration(_LAUGHS)}),
                       rf"part {re.escape(_sheet_part('Demand'))} declares a DOCTYPE or ENTITY, which no spreadsheet writes"),
    "external-entity": (lambda b, d: _rezip(b, d, {"docProps/custom.xml": _after_declaration(_EXTERNAL)}),
                        r"part docProps/custom\.xml declares a DOCTYPE or ENTITY"),
}


def test_hostile_workbooks_are_one_line_and_write_nothing(booked, tmp_path):
    """#45: every case of HOSTILE_WORKBOOKS, made from a real workbook, against one registry."""
    kv, written = booked
    book = _Written(written)
    state = lambda: registry_state(kv.url)  # noqa: E731
    before = state()
    for name, (make, expected) in HOSTILE_WORKBOOKS.items():
        path = make(book, tmp_path / f"capacity-{name}.xlsx")
        result = kv("apply", path, "--quarter", "2026Q4", ok=False)
        assert result.stdout == "", name
        _one_line_error(result, expected)
        assert state() == before, name
        path.unlink()


def test_a_fifo_named_xlsx_is_refused_without_opening_it(kv, state, tmp_path):
    before = state()
    os.mkfifo(tmp_path / "capacity.xlsx")  # no writer: opening it would block for ever
    result = kv("apply", tmp_path / "capacity.xlsx", "--quarter", "2026Q4", ok=False)
    _one_line_error(result, r"capacity\.xlsx: it is not a regular file \(a pipe, device or socket\); give the "
                            r"capacity\.xlsx kvreg report wrote$")
    assert state() == before


def test_a_workbook_declaring_a_huge_dimension_is_read_by_its_cells(booked, tmp_path):
    """A sheet declaring A1:XFD1048576 (openpyxl would pad every row to 16,384 cells and read for
    minutes) is read by the cells it holds: nothing to apply."""
    import re

    kv, book = booked
    declared = _rezip(book, tmp_path / "declared.xlsx", {
        _sheet_part(s): (lambda data: re.sub(rb'<dimension ref="[^"]*"/>', b'<dimension ref="A1:XFD1048576"/>', data))
        for s in ("Demand", "Fleet", "Plan detail", "GPUs", "Workload", "Summary", "Models")}
        | {_state_part(): lambda data: re.sub(rb'<dimension ref="[^"]*"/>',
                                                             b'<dimension ref="A1:XFD1048576"/>', data)})
    assert kv("apply", declared, "--quarter", "2026Q4").stdout.splitlines() == [
        "nothing to apply: every input is as written or as the registry holds it"]


@pytest.mark.parametrize("seeded_book", ["sqlite"], indirect=True)  # SQLite's write lock
def test_a_workbook_is_read_before_the_write_lock_is_taken(booked, tmp_path):
    """#45: a bad workbook is refused while another writer holds the lock, without waiting for it: the
    workbook is read and checked before `apply` begins its transaction."""
    url, book = booked[0].url, booked[1]
    bad = _rezip(book, tmp_path / "nan.xlsx", {_sheet_part("Demand"): _cell_value("C3", b"NaN")})
    holder = _hold_write_lock(tmp_path / "registry.db", 120)
    try:
        run = subprocess.run([*kvreg_command(), "--db", url, "apply", str(bad), "--quarter", "2026Q4"],
                             capture_output=True, text=True, timeout=120, env={**os.environ, "KVREG_LOCK_TIMEOUT": "2"})
    finally:
        holder.communicate("release\n", timeout=60)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.splitlines() == [
        f"Error: {bad}: sheet Demand cell C3 holds 'NaN', not a finite number; type a number in Demand!C3 (or clear "
        "it) and save again"]


def test_the_rollup_over_501_quarters_runs_on_sqlite(sqlite_url, tmp_path):
    """Issue 45 item 6: the workbook's rollup axis was one UNION ALL term per quarter, and SQLite
    refuses a compound SELECT of more than 500 ("too many terms in compound SELECT"): `report` failed
    on a registry with more than 500 demand quarters. The axis is one VALUES list now. The compiled
    query the report runs (aggregate_sql over quarters_sql) is run here on 501 quarters, 2000Q1 to
    2125Q1, with chat-llama3-8b's demand set in each (users 10 + i in the i-th quarter).
    (PostgreSQL has no such limit; a 600-quarter report was run there by hand.)"""
    from kvreg.db.read import runner
    from kvreg.figures.aggregates import aggregate_sql, quarters_sql

    url = sqlite_url
    quarters = [f"{2000 + i // 4}Q{i % 4 + 1}" for i in range(501)]
    (tmp_path / "many.csv").write_text("plan,quarter,users\n" + "".join(
        f"chat-llama3-8b,{q},{10 + i}\n" for i, q in enumerate(quarters)))
    Kvreg(url)("demand", "import", tmp_path / "many.csv")
    engine = open_registry(url)
    try:
        with engine.connect() as conn:
            rows = runner(conn).rows(aggregate_sql(quarters_sql(quarters), "sqlite", every_gpu=True))
    finally:
        engine.dispose()
    h100 = {r["quarter"]: r for r in rows if r["gpu"] == "H100-SXM"}
    assert len(h100) == 501
    # The last quarter, 2125Q1 (i = 500): chat-llama3-8b's 510 users plus the other example plans' demand,
    # which carries forward from their last entries; the first quarter has chat-llama3-8b's 10 alone.
    assert h100["2000Q1"]["users"] == 10
    assert h100["2125Q1"]["users"] - h100["2124Q4"]["users"] == 1


def test_ctrl_c_during_a_report_is_one_line_exit_130_and_leaves_nothing(sqlite_url, tmp_path):
    """Issue 45 item 6 (a regression): Ctrl-C while the report's sweep ran a statement ended with exit
    1 and a PendingRollbackError traceback (SQLAlchemy invalidates the connection on a
    KeyboardInterrupt, the error handler called it a lost connection, and the read snapshot's cleanup
    touched the invalidated connection). A real SIGINT at three moments of a real report: each is
    "interrupted; nothing was written", exit 130, no temporary folder left, the registry unchanged."""
    url = sqlite_url
    before = registry_state(url)
    out = tmp_path / "reports"
    env = {**os.environ, "KVREG_DB": url}
    interrupted = 0
    for delay in (1.0, 2.0, 3.0, 4.0):
        proc = subprocess.Popen([*kvreg_command(), "report", "--quarter", "2026Q4", "--out", str(out)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        if proc.returncode == 0:  # it finished first: a whole report, nothing to check here
            continue
        if proc.returncode == -signal.SIGINT and not err.strip():
            # On a loaded machine the signal can land while the interpreter is still starting, before
            # Python installs its SIGINT handler: the process dies of it and nothing ran. Not the case
            # under test; the later moments are.
            assert registry_state(url) == before
            continue
        interrupted += 1
        assert (proc.returncode, [ln for ln in err.splitlines() if ln.strip()]) == \
            (130, ["kvreg: interrupted; nothing was written"])
        assert not [p.name for p in out.glob(".*")] if out.exists() else True
        assert registry_state(url) == before
    assert interrupted >= 1


def test_db_copy_refuses_a_value_past_its_declared_bound(tmp_path, empty_db_url, sqlite_template):
    """Issue 45 item 1: a price of 1e308, stored by an older kvreg, broke `report` (inf in JSON) on
    SQLite and `plan rollup`, `report` and the procurement page on PostgreSQL. `kvreg db copy` runs
    the same validator as every entry path: it names the row and copies nothing."""
    import sqlite3

    src = tmp_path / "old.db"
    sqlite_copy(sqlite_template, tmp_path, "old.db")
    con = sqlite3.connect(src)
    con.execute("UPDATE gpu SET price_per_hour = 1e308 WHERE name = 'H100-SXM'")
    con.commit()
    con.close()
    result = Kvreg(f"sqlite:///{src}")("db", "copy", "--to", empty_db_url, ok=False)
    line = _one_line_error(result, r"cannot copy gpu 'H100-SXM' into .*: price_per_hour must be a finite "
                                   r"number of at least 0 and at most 1,000,000, not 1e\+308")
    assert "nothing was written" in line
