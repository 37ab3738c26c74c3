"""CLI tables fit the terminal: by default a table is cut to COLUMNS (else the terminal's width;
every column when piped), the columns naming each row first; --columns picks columns in any format,
--wide shows every one; json and csv are unchanged."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kvreg.export.text import fit, render


@pytest.fixture
def run(tmp_path):
    from kvreg.cli import cli

    url = f"sqlite:///{tmp_path / 'registry.db'}"

    def invoke(*args, columns=None, ok=True):
        env = {"COLUMNS": str(columns)} if columns else {"COLUMNS": ""}
        result = CliRunner().invoke(cli, ["--db", url, *args], env=env, catch_exceptions=False)
        assert (result.exit_code == 0) == ok, result.output
        return result

    return invoke


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_fit_keeps_the_keys_first_then_what_fits():
    """Columns a (10 wide), b (30), c (5), key k (8), in a width of 30: k first (8), then a (2 + 10
    = 20), b does not fit (2 + 30), c does (2 + 5 = 27)."""
    assert fit(["a", "b", "c", "k"], [10, 30, 5, 8], 30, keys=("k",)) == [3, 0, 2]
    rows = [{"k": "x" * 8, "a": "y" * 10, "b": "z" * 30, "c": 12345}]
    text = render(rows, "table", ["a", "b", "c", "k"], width=30, keys=("k",))
    assert text.splitlines() == ["k         a                c", "--------  ----------  ------", "xxxxxxxx  yyyyyyyyyy  12,345",
                                 "(1 more column: --wide shows all, --columns a,b picks)"]


@pytest.mark.parametrize("command", [("plan", "list"), ("demand", "list"), ("plan", "rollup"), ("model", "list"),
                                     ("dtype", "list"), ("capacity",)])
def test_tables_fit_an_80_column_terminal(run, command):
    full = run(*command).stdout  # COLUMNS unset and not a terminal: every column
    assert _widest(full) > 80
    fitted = run(*command, columns=80).stdout
    assert _widest(fitted) <= 80 and "more column" in fitted  # plan rollup: below its first table
    assert run(*command, "--wide", columns=80).stdout == full


def test_plan_list_keeps_what_a_planner_reads_first(run):
    lines = run("plan", "list", columns=80).stdout.splitlines()
    assert lines[0].split() == ["plan", "model", "gpu", "max_concurrency", "fits", "tp"]
    assert lines[2].split()[:5] == ["chat-llama3-8b", "Llama-3-8B", "H100-SXM", "49.36", "1"]
    assert lines[-1] == "(9 more columns: --wide shows all, --columns a,b picks)"


def test_columns_picks_in_every_format_and_json_csv_are_unchanged_without_it(run):
    table = run("plan", "list", "--columns", "plan,kv_bytes_per_token,max_concurrency").stdout.splitlines()
    assert table[0].split() == ["plan", "kv_bytes_per_token", "max_concurrency"]  # not a default table column
    assert table[2].split() == ["chat-llama3-8b", "131,072", "49.36"]
    csv = run("plan", "list", "--format", "csv", "--columns", "max_concurrency,plan").stdout.splitlines()
    assert csv[:2] == ["max_concurrency,plan", f"{json.loads(run('plan', 'list', '--format', 'json').stdout)[0]['max_concurrency']},chat-llama3-8b"]
    plain = run("plan", "list", "--format", "json", columns=80).stdout
    assert plain == run("plan", "list", "--format", "json").stdout and len(json.loads(plain)[0]) > 15
    assert run("plan", "list", "--format", "csv", columns=40).stdout == run("plan", "list", "--format", "csv").stdout


def test_unknown_column_is_one_line(run):
    run("plan", "list")  # creates the registry (which says so on stderr)
    result = run("plan", "list", "--columns", "plan,nope", ok=False)
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert result.output.startswith("Error: --columns: no column 'nope'; the columns are plan, rule, model")


def test_columns_picks_the_lines_of_a_record(run):
    lines = run("gpu", "show", "H100-SXM", "--columns", "unit_price,name").stdout.splitlines()
    assert lines == ["unit_price  30,000.00", "name        H100-SXM"]
