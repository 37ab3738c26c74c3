"""The docs' examples run as written: every `kvreg ...` command in the README's and docs/*.md's
shell code blocks (```sh, ```console, and any line written `$ kvreg ...`) runs, in order, against
a fresh seeded registry per document, and must exit 0. A doc example that fails fails here.

Commands run through click's CliRunner in a scratch folder that holds `tests/` (the vendored files
the examples name); `> file` redirects the output to a file and `*` globs expand, as a shell would.
The few that cannot run here are listed in NOT_RUN with the reason; a document can name commands
to run first (SETUP), for an example that reads a file another page tells you how to write.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
GENERATED = {"cli.md", "methodology.md"}  # generated from --help and the declarations: tested elsewhere
SHELL_FENCES = {"sh", "console", "bash", "shell"}
# A command is not run when one of these patterns matches whole words of it.
NOT_RUN = {
    r"serve": "runs until stopped (tests/test_serve.py starts it)",
    r"\S*postgresql\S*": "needs a PostgreSQL server (tests/test_postgres.py)",
    r"--out /srv/capacity": "writes outside the scratch folder, and compares with a 2026Q3 report it has not got",
}
SETUP = {"workbook.md": ["kvreg report --quarter 2026Q4 --format xlsx"]}


def commands(doc: Path) -> list[tuple[int, str]]:
    """(line number, command) of each kvreg command in the document's shell code blocks, with
    backslash continuations joined and trailing `# comments` removed."""
    text = doc.read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r"^```([^\n]*)\n(.*?)^```", text, re.S | re.M):
        lang = m.group(1).strip()
        first = text[:m.start()].count("\n") + 2
        lines = m.group(2).splitlines()
        i = 0
        while i < len(lines):
            start, line = first + i, lines[i].strip()
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1].rstrip() + " " + lines[i].strip()
            i += 1
            prompt = line.startswith("$ kvreg ")
            if not (prompt or (lang in SHELL_FENCES and line.startswith("kvreg "))):
                continue
            line = line.removeprefix("$ ")
            out.append((start, _strip_comment(line)))
    return out


def _strip_comment(line: str) -> str:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=False)
    lexer.whitespace_split, lexer.commenters = True, "#"
    words = list(lexer)
    return shlex.join(words)


def _run(command: str, env: dict) -> tuple[int, str]:
    from kvreg.cli import cli

    words = shlex.split(command)
    target = None
    if ">" in words:
        at = words.index(">")
        words, target = words[:at], words[at + 1]
    args = []
    for w in words[1:]:
        args += sorted(glob.glob(w)) if any(c in w for c in "*?[") else [w]
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=True)
    if target:
        Path(target).write_text(result.stdout)
    return result.exit_code, result.output + (f"\n{result.exception!r}" if result.exception and
                                              not isinstance(result.exception, SystemExit) else "")


def not_run(command: str) -> bool:
    return any(re.search(rf"(^| ){pattern}( |$)", command) for pattern in NOT_RUN)


def _documents():
    return [d for d in DOCS if d.name not in GENERATED and any(not not_run(c) for _, c in commands(d))]


def test_the_docs_have_examples_to_run():
    """The extraction finds the examples (a regex that silently matched nothing would pass every doc)."""
    found = {d.name: len(commands(d)) for d in _documents()}
    assert {"README.md", "plans.md", "report.md", "engine-rules.md", "workbook.md"} <= set(found)
    assert found["README.md"] >= 15 and sum(found.values()) >= 45


@pytest.mark.parametrize("doc", _documents(), ids=lambda d: d.name)
def test_doc_examples_run_as_written(doc, tmp_path, monkeypatch):
    (tmp_path / "tests").symlink_to(REPO / "tests")
    monkeypatch.chdir(tmp_path)
    env = {"KVREG_DB": f"sqlite:///{tmp_path / 'registry.db'}", "COLUMNS": "100"}
    failed = []
    ran = 0
    for line, command in [(0, c) for c in SETUP.get(doc.name, [])] + commands(doc):
        if not_run(command):
            continue
        code, output = _run(command, env)
        ran += 1
        if code != 0:
            failed.append(f"{doc.name}:{line}: {command}\n  exit {code}: {output.strip()[-600:]}")
    assert failed == [], "\n".join(failed)
    assert ran > 0
