"""The docs are tested: every command has help and is in docs/cli.md, docs/cli.md is exactly what
`python -m kvreg.cli.docgen` prints, and the README's Quickstart is the two commands CI runs.

After changing any command's help, regenerate the reference:

    python -m kvreg.cli.docgen > docs/cli.md
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvreg.cli.docgen import render, walk

REPO = Path(__file__).resolve().parents[1]
CLI_MD = REPO / "docs" / "cli.md"
README = REPO / "README.md"
REGENERATE = "regenerate it: python -m kvreg.cli.docgen > docs/cli.md"


@pytest.fixture(scope="module")
def entries():
    problems: list[str] = []
    found = walk(warn=problems.append)
    assert problems == [], "every command module must import"
    return found


def test_every_top_level_command_is_walked(entries):
    from kvreg.cli import _COMMANDS

    walked = {e.path for e in entries}
    assert {f"kvreg {name}" for name in _COMMANDS} <= walked


def test_every_command_has_help(entries):
    missing = [e.path for e in entries if not e.summary.strip()]
    assert missing == [], f"commands without help text: {missing}"


def test_every_command_is_in_the_reference(entries):
    text = CLI_MD.read_text(encoding="utf-8")
    missing = [e.path for e in entries if f"\n## {e.path}\n" not in text]
    assert missing == [], f"docs/cli.md lacks {missing}: {REGENERATE}"


def test_reference_is_the_generated_text(entries):
    assert CLI_MD.read_text(encoding="utf-8") == render(entries), f"docs/cli.md is stale: {REGENERATE}"


def test_reference_is_what_help_prints(entries):
    """Each section is exactly `kvreg ... --help` in a 100-column terminal."""
    from click.testing import CliRunner

    from kvreg.cli import cli

    runner = CliRunner()
    for e in entries:
        args = e.path.split()[1:]
        result = runner.invoke(cli, [*args, "--help"], prog_name="kvreg", terminal_width=100, max_content_width=100)
        assert result.exit_code == 0, e.path
        assert result.stdout.rstrip() == e.help, e.path


def test_help_is_rendered_at_a_fixed_width(entries):
    """The reference must not depend on the terminal it was generated in."""
    wide = max(len(line) for e in entries for line in e.help.splitlines())
    assert wide <= 100


# ---------------------------------------------------------------- README


def quickstart_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:sh|bash|shell)?\n(.*?)```", section, flags=re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_quickstart_is_exactly_two_commands():
    assert quickstart_commands() == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/kvreg report",
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest",
    ]


def test_ci_runs_the_readme_test_command():
    ci = REPO / ".ci" / "run"
    if not ci.exists():
        pytest.skip(".ci/run is not written yet")
    assert quickstart_commands()[1] in ci.read_text(encoding="utf-8")


def test_a_section_named_in_help_reports_or_docs_is_in_that_document():
    """Text that sends the reader to a part of a document (docs/methodology.md, "Users served within a latency
    target") names a heading of it, or a paragraph it opens in bold: the report and `kvreg capacity --help` once
    named a section "Latency" that methodology.md does not have."""
    sources = [*(REPO / "kvreg").rglob("*.py"), *(REPO / "templates").rglob("*.j2"), README,
               *(REPO / "docs").glob("*.md")]
    found, missing = 0, []
    for path in sources:
        for doc, title in re.findall(r'docs/([a-z_-]+\.md), "([^"]+)"', path.read_text(encoding="utf-8")):
            found, title = found + 1, " ".join(title.split())  # docs/cli.md wraps a long title
            text = (REPO / "docs" / doc).read_text(encoding="utf-8")
            if not re.search(rf"^#+ {re.escape(title)}(:|$)|\*\*{re.escape(title)}", text, re.M):
                missing.append(f"{path.relative_to(REPO)}: {doc}, {title!r}")
    assert found >= 7
    assert missing == []


def test_readme_links_to_files_that_exist():
    links = re.findall(r"\]\(((?!https?://|#)[^)#]+)", README.read_text(encoding="utf-8"))
    assert links, "the README links the docs"
    missing = sorted({link for link in links if not (REPO / link).exists()})
    assert missing == [], f"README links to missing files: {missing}"


def test_no_help_report_or_workbook_text_sends_the_reader_to_files_they_do_not_have(entries):
    """Users have neither the capacity spec nor the seed documents kvreg was built from: help, the
    report and the workbook name the method for what it is and point to docs/methodology.md."""
    banned = re.compile(r"\bSPEC\b|SPEC\.md|SPEC's|\bseed \d{3}|\bseeds?'s?\b(?! on first use)|the seeds", re.I)
    for e in entries:
        assert not banned.search(e.help), (e.path, banned.search(e.help).group(0))
    report = (REPO / "tests" / "snapshots" / "capacity.md").read_text(encoding="utf-8")  # the seeded report
    assert not banned.search(report), banned.search(report).group(0)
    for source in ("kvreg/export/xlsx.py", "kvreg/export/excel_layout.py", "kvreg/figures/excel.py", "kvreg/figures/facts.py",
                   "templates/capacity.md.j2"):
        text = (REPO / source).read_text(encoding="utf-8")
        strings = re.findall(r'"([^"\n]*)"', text)  # what reaches a cell or the page, not the comments
        assert not [s for s in strings if banned.search(s)], source


# The user documentation names a claim by what it says (a published figure, vLLM's code, a model's config),
# never by the internal documents kvreg was built from: the specification or "the seeds". docs/performance.md
# is a developer's measurement log and is not checked. A seed in the catalog's sense ("seeded with the built-in
# catalog", "seeds the registry", "seeding") is fine.
# The one exception, (?<!--): `--seed 40`, a benchmark's flag quoted in docs/latency-accuracy.md's table.
DOC_REFERENCE = re.compile(r"\bSPEC\b|(?i:SPEC\.md)|(?i:(?<!--)\bseeds?\b(?! the registry))")
USER_DOCS = [README, *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "performance.md")]


def doc_references(text: str) -> list[str]:
    return [f"{text.count(chr(10), 0, m.start()) + 1}: {text[max(0, m.start() - 30):m.end() + 30]!r}"
            for m in DOC_REFERENCE.finditer(text)]


def test_the_pattern_catches_a_document_reference_and_passes_the_catalog_sense():
    for bad in ("Where kvreg departs from the seeds", "seed 000's method", "the seed documents' figures",
                "Seed 001's 70B cache", "the seed's round 80e9", "(SPEC errata)", 'SPEC "The vLLM rule"',
                "the project specification (SPEC.md)", "seed-000 70B service"):
        assert doc_references(bad), bad
    for good in ("seeded with the built-in catalog", "the seeded registry's workbook", "seeding a new registry",
                 "an empty registry at head and seeds the registry", "random 1024/128 --seed 40",
                 "speculative decoding", "an `MLAAttentionSpec` of one entry", "every spec being full attention"):
        assert not doc_references(good), good


@pytest.mark.parametrize("path", USER_DOCS, ids=lambda p: p.name)
def test_no_user_doc_sends_the_reader_to_the_spec_or_the_seeds(path):
    """README.md and docs/*.md stand on their own: a rule names its public source or kvreg's own docs."""
    assert len(USER_DOCS) >= 12  # the README and every page but the performance log
    assert doc_references(path.read_text(encoding="utf-8")) == []


def catalog_notes() -> list[tuple[str, str]]:
    """Every `notes` value of every row of every kvreg/catalog/*.toml, with where it is."""
    import tomllib

    found = []
    for path in sorted((REPO / "kvreg" / "catalog").glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for table, rows in data.items():
            for i, row in enumerate(rows if isinstance(rows, list) else []):
                if isinstance(row, dict) and "notes" in row:
                    found.append((f"{path.name} [[{table}]] {row.get('name', row.get('plan', i))}", row["notes"]))
    return found


def test_no_catalog_note_sends_the_reader_to_the_spec_or_the_seeds():
    """The catalog's notes reach users (`kvreg model show`, `kvreg plan list`, the workbook, the web page): each
    names its claim or its public source, never the internal documents kvreg was built from."""
    notes = catalog_notes()
    assert len(notes) >= 60  # the models', GPUs', dtypes' and example plans' notes
    assert {where.split()[0] for where, _ in notes} >= {"models.toml", "gpus.toml", "dtypes.toml", "plans.toml"}
    assert [(where, doc_references(text)) for where, text in notes if doc_references(text)] == []
