"""A database password is never shown: not in output, errors, tracebacks, logs, --help or any
file written (report provenance included), whether the URL comes from --db, KVREG_DB, or
`db copy --from/--to`; and a password can come from PGPASSWORD or ~/.pgpass instead of the URL.

Each failing case runs against a port nothing listens on, and against the real test server
with a wrong password, and with the right password but a missing database.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
import sys
import traceback
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner

WRONG = "Wr0ng-s3cret-" + secrets.token_hex(3)  # never the role's password
ODD = "p@ss:w/rd%" + secrets.token_hex(3)  # needs percent-encoding in a URL
KVREG = str(Path(sys.executable).with_name("kvreg"))


def forms(password: str) -> list[str]:
    """The password as written in a URL and as decoded, each of which must stay hidden."""
    return sorted({password, quote(password, safe=""), quote(password)})


def leaks(password: str, *texts: str) -> list[str]:
    return [f for f in forms(password) for t in texts if f in t]


def file_leaks(password: str, folder: Path) -> list[str]:
    """Files under folder (and members of zip files such as .xlsx) that hold the password."""
    needles = [f.encode() for f in forms(password)]
    found = []
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        blobs = [(str(path), path.read_bytes())]
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                blobs += [(f"{path}!{n}", z.read(n)) for n in z.namelist()]
        found += [name for name, blob in blobs if any(n in blob for n in needles)]
    return found


@pytest.fixture(scope="module")
def planner(pg_server):
    """A role with a password, owning a database kvreg has set up, on a server that checks passwords."""
    from kvreg.app.access import open_registry

    role = "kvreg_planner_" + secrets.token_hex(3)
    password = "Kv-r1ght-s3cret-" + secrets.token_hex(4)
    pg_server.create_role(role, password)
    db = pg_server.create_database(owner=role)
    server = {"role": role, "password": password, "db": db, "host": pg_server.admin_url.host,
              "port": pg_server.admin_url.port or 5432}
    try:
        open_registry(pg_server.url(db, role, password)).dispose()
        _require_password_checks(pg_server.url(db, role, WRONG))
        yield server
    finally:
        pg_server.drop_database(db)
        pg_server.drop_role(role)


def _require_password_checks(wrong_url: str) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(wrong_url)
    try:
        engine.connect().close()
    except Exception:  # noqa: BLE001 - refused, as it must be
        return
    finally:
        engine.dispose()
    msg = "the test server let a wrong password in: it trusts every login (start it as tests/pg.py does)"
    if os.environ.get("CI") == "true":
        pytest.fail(msg)
    pytest.skip(msg)


def url(planner, password: str, *, port=None, db=None, host=None) -> str:
    return (f"postgresql+psycopg://{planner['role']}:{quote(password, safe='')}@{host or planner['host']}:"
            f"{port or planner['port']}/{db or planner['db']}")


# (name, password in the URL, URL) for the three ways to fail.
def failures(planner) -> dict[str, tuple[str, str]]:
    return {
        "unreachable port": (WRONG, url(planner, WRONG, port=1)),
        "wrong password": (WRONG, url(planner, WRONG)),
        "odd wrong password": (ODD, url(planner, ODD)),
        "missing database": (planner["password"], url(planner, planner["password"], db="no_such_kvreg_db")),
    }


COMMANDS = {
    "init": ["init"],
    "model list": ["model", "list"],
    "model show": ["model", "show", "Llama-3.1-8B"],
    "model add": ["model", "add", "Secret-1B", "--layers", "4", "--kv-heads", "2", "--head-dim", "64",
                  "--params-b", "1"],
    "model import": ["model", "import", "{tmp}/config.json"],
    "gpu list": ["gpu", "list"],
    "dtype list": ["dtype", "list"],
    "capacity": ["capacity", "--model", "Llama-3.1-8B"],
    "plan list": ["plan", "list"],
    "plan rollup": ["plan", "rollup"],
    "demand list": ["demand", "list"],
    "demand set": ["demand", "set", "chat-llama3-8b", "2027Q1", "400"],
    "apply": ["apply", "{tmp}/registry.toml"],
    "export": ["export", "--out", "{tmp}/out.toml"],
    "report": ["report", "--out", "{tmp}/reports"],
    "db current": ["db", "current"],
    "db upgrade": ["db", "upgrade"],
    "db downgrade": ["db", "downgrade", "base"],
}


# A config.json for `model import` (Llama-3.1-8B's shape), valid so the command gets as far as the registry.
LLAMA_LIKE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "head_dim": 128,
              "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
              "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def run(args, *, env=None, tmp: Path):
    """The CLI in-process, every log record captured at DEBUG; (result, everything it showed)."""
    from kvreg.cli import cli

    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(self.format(record))

    root = logging.getLogger()
    handler, level = Keep(logging.DEBUG), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        result = CliRunner(env=env).invoke(cli, [a.format(tmp=tmp) for a in args])
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    shown = [result.stdout, result.stderr, *records]
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        shown.append("".join(traceback.format_exception(*result.exc_info)))
    return result, "\n".join(shown)


@pytest.mark.parametrize("failure", ["unreachable port", "wrong password", "odd wrong password", "missing database"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_failing_connection_never_shows_the_password(planner, failure, command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "registry.toml").write_text('[[gpu]]\nname = "Secret-GPU"\nmemory_bytes = "80GiB"\n')
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_LIKE))
    password, db = failures(planner)[failure]
    for how, args, env in (("--db", ["--db", db, *COMMANDS[command]], {"KVREG_DB": None}),
                           ("KVREG_DB", COMMANDS[command], {"KVREG_DB": db})):
        result, shown = run(args, env=env, tmp=tmp_path)
        assert result.exit_code == 1, (how, shown)
        assert isinstance(result.exception, SystemExit), (how, shown)  # a message, not a traceback
        assert result.stderr.count("cannot open registry") == 1, (how, shown)
        assert f"{planner['role']}:***@" in result.stderr, (how, shown)
        assert len(result.stderr.strip().splitlines()) == 1, (how, shown)
        assert not leaks(password, shown), (how, shown)
    assert not file_leaks(password, tmp_path)


@pytest.mark.parametrize("failure", ["unreachable port", "wrong password", "odd wrong password", "missing database"])
@pytest.mark.parametrize("side", ["--from", "--to"])
def test_db_copy_never_shows_the_password(planner, failure, side, tmp_path):
    from conftest import Kvreg

    good = f"sqlite:///{tmp_path / 'good.db'}"
    Kvreg(good)("init")
    password, db = failures(planner)[failure]
    source, target = (db, f"sqlite:///{tmp_path / 'copy.db'}") if side == "--from" else (good, db)
    result, shown = run(["db", "copy", "--from", source, "--to", target], tmp=tmp_path)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), shown
    assert f"{planner['role']}:***@" in result.stderr, shown
    assert not leaks(password, shown), shown
    assert not file_leaks(password, tmp_path)


def test_success_output_and_report_provenance_are_masked(planner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    password = planner["password"]
    db = url(planner, password)
    shown = []
    for args in (["db", "current", "--format", "json"], ["init"], ["capacity", "--model", "Llama-3.1-8B"],
                 ["db", "copy", "--from", db, "--to", f"sqlite:///{tmp_path / 'copy.db'}"],
                 ["report", "--quarter", "2026Q4", "--out", "reports"]):
        result, out = run(["--db", db, *args], tmp=tmp_path)
        assert result.exit_code == 0, out
        shown.append(out)
    assert f"{planner['role']}:***@" in shown[0]
    assert not leaks(password, *shown), shown
    data = json.loads((tmp_path / "reports" / "2026-Q4" / "data.json").read_text())
    assert data["provenance"]["registry_url"] == db.replace(quote(password, safe=""), "***")
    assert not file_leaks(password, tmp_path)


def _cli(args, env, cwd):
    """The installed `kvreg` in a child process: what a user sees, stderr and any traceback included."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "KVREG_"))}
    return subprocess.run([KVREG, *args], env={**base, **env}, cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("failure", ["unreachable port", "wrong password"])
def test_the_installed_command_never_shows_the_password(planner, failure, tmp_path):
    password, db = failures(planner)[failure]
    for args, env in ((["--db", db, "model", "list"], {}), (["capacity"], {"KVREG_DB": db}),
                      (["db", "copy", "--from", db, "--to", "sqlite:///copy.db"], {})):
        p = _cli(args, {"HOME": str(tmp_path), **env}, tmp_path)
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        assert f"{planner['role']}:***@" in p.stderr
        assert not leaks(password, p.stdout, p.stderr)
    assert not file_leaks(password, tmp_path)


def test_help_never_shows_the_url_from_the_environment(tmp_path):
    db = f"postgresql+psycopg://planner:{WRONG}@db.internal/kvreg"
    for args in (["--help"], ["db", "--help"], ["db", "copy", "--help"], ["model", "list", "--help"],
                 ["report", "--help"]):
        p = _cli(args, {"KVREG_DB": db, "HOME": str(tmp_path)}, tmp_path)
        assert p.returncode == 0, p.stderr
        assert not leaks(WRONG, p.stdout, p.stderr) and "db.internal" not in p.stdout, args


def test_password_from_pgpassword(planner, tmp_path):
    bare = f"postgresql+psycopg://{planner['role']}@{planner['host']}:{planner['port']}/{planner['db']}"
    p = _cli(["--db", bare, "db", "current"], {"PGPASSWORD": planner["password"], "HOME": str(tmp_path)}, tmp_path)
    assert p.returncode == 0, p.stderr
    assert bare in p.stdout and planner["password"] not in p.stdout + p.stderr
    wrong = _cli(["--db", bare, "db", "current"], {"PGPASSWORD": WRONG, "HOME": str(tmp_path)}, tmp_path)
    assert wrong.returncode == 1 and "password authentication failed" in wrong.stderr
    assert not leaks(WRONG, wrong.stdout, wrong.stderr)
    nothing = _cli(["--db", bare, "db", "current"], {"HOME": str(tmp_path)}, tmp_path)
    assert nothing.returncode == 1 and "PGPASSWORD or ~/.pgpass" in nothing.stderr, nothing.stderr


def test_password_from_pgpass(planner, tmp_path):
    pgpass = tmp_path / ".pgpass"
    pgpass.write_text(f"{planner['host']}:{planner['port']}:{planner['db']}:{planner['role']}:{planner['password']}\n")
    pgpass.chmod(0o600)  # libpq ignores a password file others can read
    bare = f"postgresql+psycopg://{planner['role']}@{planner['host']}:{planner['port']}/{planner['db']}"
    p = _cli(["--db", bare, "model", "list", "--format", "csv"], {"HOME": str(tmp_path)}, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Llama-3.1-8B" in p.stdout
    assert planner["password"] not in p.stdout + p.stderr
