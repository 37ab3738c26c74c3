"""The README's examples run verbatim, from a folder laid out like a clone of the repository.

Every ```sh block after the Quickstart is run line by line by `sh` (a line ending in a backslash
continues), in order, against one registry: the `registry.db` the commands create in that folder,
exactly as a reader who activated the venv would get. A ```text block right after a ```sh block
holding one command is that command's output, byte for byte. The counts the README gives for the
built-in catalog are the catalog's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from kvreg.catalog import load_catalog

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def examples() -> list[tuple[list[str], str | None]]:
    """(commands, expected output or None) for each ```sh block after the Quickstart section."""
    text = README.read_text(encoding="utf-8")
    after = text.split("## Quickstart", 1)[1].split("\n## ", 1)[1]
    found = []
    for m in re.finditer(r"```sh\n(.*?)```\n(?:\n```text\n(.*?)```\n)?", after, flags=re.S):
        commands = [c.strip() for c in m.group(1).replace("\\\n", " ").splitlines() if c.strip()]
        found.append((commands, m.group(2)))
    return found


def test_the_readme_has_examples_to_run():
    commands = [c for block, _ in examples() for c in block]
    assert "kvreg model import tests/data/hf-configs/*.json --replace" in commands
    assert sum(c.startswith("kvreg ") for c in commands) >= 12
    assert [out is not None for _, out in examples()].count(True) >= 1


def test_readme_examples_run_verbatim(tmp_path):
    clone = tmp_path / "kvreg"
    shutil.copytree(REPO / "tests" / "data", clone / "tests" / "data")  # what the examples read
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if k != "KVREG_DB"}
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "200"
    ran = 0
    for commands, expected in examples():
        for command in commands:
            if command == "source .venv/bin/activate":  # the PATH above is what activating does
                continue
            proc = subprocess.run(["sh", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                                  timeout=300)
            assert proc.returncode == 0, f"README example failed: {command}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
            ran += 1
            if expected is not None:
                assert len(commands) == 1
                assert proc.stdout == expected, f"README shows other output for: {command}"
    assert (clone / "registry.db").is_file() and ran >= 12


def test_readme_counts_are_the_catalogs():
    cat = load_catalog()
    text = README.read_text(encoding="utf-8")
    said = re.findall(r"(\d+) models, (\d+) GPUs, (\d+) dtypes and (\d+) example plans", text)
    assert said == [(str(len(cat["models"])), str(len(cat["gpus"])), str(len(cat["dtypes"])), str(len(cat["plans"])))]
    report_doc = (REPO / "docs" / "report.md").read_text(encoding="utf-8")
    assert f"seeded registry ({len(cat['models'])} models, {len(cat['gpus'])} GPUs, {len(cat['plans'])} plans)" in report_doc


def test_the_first_command_says_it_created_the_registry(tmp_path):
    """A user who changed folder gets a new registry.db: the command that made it says so, once."""
    from conftest import Kvreg

    path = tmp_path / "registry.db"
    kv = Kvreg(f"sqlite:///{path}")
    first = kv("model", "list", "--format", "csv")
    assert first.stderr == (
        f"kvreg: created {path} with the built-in catalog (24 models, 37 GPUs, 14 dtypes, 6 example plans); "
        f"from another folder, use it with --db sqlite:///{path} or KVREG_DB\n"
    )
    assert first.stdout.count("\n") == 1 + 24  # the header and the 24 catalog models
    assert kv("model", "list", "--format", "csv").stderr == ""
    assert kv("init").stderr == ""


def test_python_dash_m_kvreg_is_the_kvreg_command(tmp_path):
    """`python -m kvreg` works where the `kvreg` script is not on PATH, with the same output."""
    env = {**os.environ, "KVREG_DB": f"sqlite:///{tmp_path / 'registry.db'}"}
    version = subprocess.run([sys.executable, "-m", "kvreg", "--version"], capture_output=True, text=True,
                             env=env, cwd=tmp_path, check=True)
    assert version.stdout == "kvreg, version 0.1.0\n"
    dtypes = subprocess.run([sys.executable, "-m", "kvreg", "dtype", "list", "--format", "csv"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert dtypes.stdout.splitlines()[0] == (
        "name,bytes_per_element,kind,mla_bytes_per_token_per_layer,scale_bytes_per_token_per_head,notes")
    assert len(dtypes.stdout.splitlines()) == 1 + 14  # the header and the 14 catalog dtypes
