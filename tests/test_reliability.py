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

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import HF_CONFIGS, Kvreg, registry_state
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


# =========================================================================== concurrent writers


def kvreg_command() -> list[str]:
    """The installed `kvreg` beside this Python (as a user runs it), else the same entry point."""
    script = Path(sys.executable).with_name("kvreg")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from kvreg.cli import main; main()"]


WRITES = 200
# One writer: WRITES models, then a plan on each, every one its own transaction (as WRITES
# separate `kvreg model add` and `kvreg plan add` calls would be), started on a signal so the
# writers of a test collide. Models take a new connection per transaction, as separate commands
# do; plans share one connection (new connections are what makes PostgreSQL slow here).
WRITER = """
import sys
from kvreg.db.engine import open_registry
from kvreg.plans import add_plan
from kvreg.registry import add_model

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
    """Two processes each add 200 models and 200 plans, one transaction each, to the same registry
    at the same moment, while `kvreg apply` adds 200 more models in one transaction. The registry
    starts empty, so the first opens also race to create, migrate and seed it. Every row arrives
    exactly once and no process prints anything on stderr: SQLite writers wait on the busy
    timeout (BEGIN IMMEDIATE), PostgreSQL's first opens take turns on an advisory lock."""
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
        # nothing on stderr but the one first-run notice of the process that created the registry
        said = [line for line in err.splitlines() if line.startswith(("kvreg: created ", "kvreg: loaded "))]
        notices += len(said)
        assert proc.returncode == 0 and err == "".join(line + "\n" for line in said), err
    assert notices <= 1
    assert outputs[-1][0].splitlines()[-1] == f"applied: {WRITES} row(s) written"

    catalog = load_catalog()
    models, plans = Counter(_names(empty_db_url, "model")), Counter(_names(empty_db_url, "plan"))
    assert {f"{p}-model-{i}" for p in "abc" for i in range(WRITES)} <= set(models)  # 0 lost
    assert {f"{p}-plan-{i}" for p in "ab" for i in range(WRITES)} <= set(plans)
    assert max(models.values()) == 1 and max(plans.values()) == 1  # 0 duplicated
    assert sum(models.values()) == len(catalog["models"]) + 3 * WRITES  # and nothing else: 24 + 600
    assert sum(plans.values()) == len(catalog["plans"]) + 2 * WRITES  # 5 + 400


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


def test_kill_9_of_a_running_report_leaves_the_previous_report_whole(tmp_path):
    """The registry's engine plays no part in how the report folder is written, so this runs on
    SQLite only."""
    url = f"sqlite:///{tmp_path / 'registry.db'}"
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
    import kvreg.report

    for step in range(1, 100):
        base = tmp_path / f"step-{step}"
        target, tmp = base / "2026-Q4", base / ".2026-Q4.tmp-test"
        _plant(target, OLD_REPORT)
        _plant(tmp, NEW_REPORT)

        def swap():
            _kill_after_calls(step, (os, "rename"), (os, "replace"), (os, "unlink"), (os, "rmdir"),
                              (shutil, "rmtree"), (kvreg.report, "_exchange"))
            kvreg.report._swap_into_place(tmp, target)

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
    import kvreg.registry

    kv("init")
    before = registry_state(db_url)
    paths = _batch(tmp_path, "mid", 40)

    def import_and_die():
        from kvreg.cli import main

        _kill_after_calls(len(paths) // 2, (kvreg.registry, "add_model"))
        main(["--db", db_url, "model", "import", *paths, "--format", "csv"])

    status = _in_child(import_and_die)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert registry_state(db_url) == before
    assert _imported(db_url, "mid") == 0
    _sqlite_intact(db_url)
    kv("model", "import", *paths[:2], "--format", "csv")  # and the next writer is not blocked
    assert _imported(db_url, "mid") == 2
