"""`kvreg apply capacity.xlsx`: the inputs finance changed come back, figures never do, and a
workbook from another registry or quarter is refused with nothing written."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from conftest import Kvreg, registry_state
from conftest import report_workbook as _workbook
from sqlalchemy import text

GIB = 2**30


@pytest.fixture
def db_url(seeded_book, tmp_path):
    """This module's registry for a test (and so its `kv`, `engine` and `state`): a copy of
    seeded_book's, so seeded_book's workbook is its own (the `book` fixture)."""
    url, drop = seeded_book[0](tmp_path)
    yield url
    drop()


@pytest.fixture
def book(seeded_book, tmp_path) -> Path:
    """What _workbook(kv, tmp_path) writes from the test's registry before any change: a copy of
    seeded_book's workbook, at the path the report writes it to."""
    path = tmp_path / "reports" / "2026-Q4" / "capacity.xlsx"
    path.parent.mkdir(parents=True)
    shutil.copyfile(seeded_book[1], path)
    return path


def _col(ws, name: str) -> int:
    for c in ws[2]:  # the hidden row of names
        if c.value == name:
            return c.column
    raise KeyError(name)


def _row(ws, *key) -> int:
    for r in range(3, ws.max_row + 1):
        if tuple(ws.cell(r, i + 1).value for i in range(len(key))) == key:
            return r
    raise KeyError(key)


def _copy_row(ws, src: int, dst: int, **inputs) -> None:
    """What the workbook tells finance to do to add a row: copy the row above, formulas and all (the
    formulas' row references move with it, as Excel's fill-down moves them), then type its inputs."""
    from openpyxl.formula.translate import Translator

    for c in ws[src]:
        v = c.value
        if isinstance(v, str) and v.startswith("="):
            v = Translator(v, origin=c.coordinate).translate_formula(f"{c.column_letter}{dst}")
        ws.cell(dst, c.column).value = v
    for name, value in inputs.items():
        ws.cell(dst, _col(ws, name)).value = value


def _edit(src: Path, dst: Path, *, typed_over: bool = True, **extra) -> None:
    """What finance does: triple a plan's users, add a quarter, change a reserve, a share, a GPU's
    memory (in GiB) and price, and type a number over a figure."""
    from openpyxl import load_workbook

    wb = load_workbook(src)
    d = wb["Demand"]
    d.cell(_row(d, "chat-llama3-8b", "2026Q4"), _col(d, "users")).value = 750  # 250 x 3
    _copy_row(d, d.max_row, d.max_row + 1, plan="chat-llama3-8b", quarter="2027Q1", users=900)
    p = wb["Plan detail"]
    p.cell(_row(p, "docs-llama3-8b"), _col(p, "reserve")).value = 0.2
    if typed_over:
        p.cell(_row(p, "docs-llama3-8b"), _col(p, "max_concurrency")).value = 99  # a figure: reported only
    w = wb["Workload"]
    w.cell(_row(w, "mixed-llama3-8b", "chat"), _col(w, "share")).value = 0.5
    g = wb["GPUs"]
    g.cell(_row(g, "H100-SXM"), _col(g, "memory_gib_input")).value = 94
    g.cell(_row(g, "H200"), _col(g, "price_per_hour")).value = 4
    for (sheet, key, column), value in extra.get("cells", {}).items():
        ws = wb[sheet]
        ws.cell(_row(ws, *key), _col(ws, column)).value = value
    wb.save(dst)


EXPECTED = [
    "~ plan chat-llama3-8b 2026Q4 users: 250 -> 750",
    "+ plan chat-llama3-8b 2027Q1 users: 900",
    "~ plan docs-llama3-8b reserve: 0.12 -> 0.2",
    "~ class mixed-llama3-8b chat share: 0.8 -> 0.5",
    "~ gpu H100-SXM memory_gib: 80 -> 94",
    "~ gpu H200 price_per_hour: 3.5 -> 4",
]


def test_dry_run_lists_the_changes_and_writes_nothing(kv, state, book, tmp_path):
    assert kv("apply", book, "--quarter", "2026Q4", "--dry-run").stdout.splitlines() == [
        "nothing to apply: every input is as written or as the registry holds it"]
    _edit(book, tmp_path / "edited.xlsx")
    before = state()
    out = kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4", "--dry-run").stdout.splitlines()
    assert out[:len(EXPECTED)] == EXPECTED
    assert out[len(EXPECTED)].startswith("! Plan detail!") and "(max_concurrency = 99)" in out[len(EXPECTED)]
    assert out[-1] == "dry run: 6 change(s), nothing written"
    assert state() == before


def test_apply_writes_the_inputs_and_the_views_follow(kv, engine, book, tmp_path):
    _edit(book, tmp_path / "edited.xlsx")
    out = kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4").stdout.splitlines()
    assert out[-1] == "applied 6 change(s) in one transaction"
    with engine.connect() as conn:
        q = lambda sql: conn.execute(text(sql)).all()  # noqa: E731
        assert q("SELECT d.quarter, d.users FROM demand d JOIN plan p ON p.id = d.plan_id"
                 " WHERE p.name = 'chat-llama3-8b' ORDER BY d.quarter") == [("2026Q3", 100), ("2026Q4", 750),
                                                                            ("2027Q1", 900)]
        assert q("SELECT reserve FROM plan WHERE name = 'docs-llama3-8b'") == [(0.2,)]
        assert q("SELECT share FROM workload_class wc JOIN plan p ON p.id = wc.plan_id"
                 " WHERE p.name = 'mixed-llama3-8b' AND wc.name = 'chat'") == [(0.5,)]
        assert q("SELECT memory_bytes FROM gpu WHERE name = 'H100-SXM'") == [(94 * GIB,)]  # 94 GiB typed
        assert q("SELECT price_per_hour FROM gpu WHERE name = 'H200'") == [(4.0,)]
        # The typed-over figure was not applied: the view still computes it.
        mc = q("SELECT max_concurrency FROM plan_capacity WHERE plan = 'docs-llama3-8b'")[0][0]
        assert mc != 99
        # The views follow the inputs: 2027Q1 demand has its GPUs.
        assert q("SELECT users FROM plan_quarter WHERE plan = 'chat-llama3-8b' AND quarter = '2027Q1'") == [(900,)]
    # Applying the same workbook again finds nothing left to change.
    assert kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4").stdout.splitlines()[-2:] == [
        out[-2], "nothing to apply: every input is as written or as the registry holds it"]


def test_workbook_from_another_registry_or_quarter_is_refused(kv, state, book, tmp_path):
    from openpyxl import Workbook

    other = Kvreg(f"sqlite:///{tmp_path / 'other.db'}")
    other("plan", "list")  # a second registry, seeded from the same catalog: same names, another identity
    result = other("apply", book, "--quarter", "2026Q4", "--dry-run", ok=False)
    assert result.exit_code == 1 and "was written from another registry" in result.output
    before = state()
    result = kv("apply", book, "--quarter", "2027Q1", ok=False)
    assert result.exit_code == 1 and "was written for 2026Q4, not 2027Q1: pass --quarter 2026Q4" in result.output
    plain = tmp_path / "plain.xlsx"
    Workbook().save(plain)
    result = kv("apply", plain, "--quarter", "2026Q4", ok=False)
    assert result.exit_code == 1 and "was not written by kvreg report" in result.output
    (tmp_path / "junk.xlsx").write_text("not a zip")
    result = kv("apply", tmp_path / "junk.xlsx", "--quarter", "2026Q4", ok=False)
    assert result.exit_code == 1 and "is not an .xlsx workbook" in result.output
    assert state() == before


@pytest.mark.parametrize("cells, message", [
    ({("Demand", ("docs-llama3-8b", "2026Q4"), "users"): "lots"}, "Demand!C"),
    ({("Plan detail", ("docs-llama3-8b",), "reserve"): 1.5}, "reserve 1.5 must be at least 0 and below 1"),
    ({("Workload", ("mixed-llama3-8b", "chat"), "share"): 0}, "must be a number above 0"),
    ({("GPUs", ("H200",), "price_per_hour"): -1}, "must be a finite number of at least 0"),
    # blanks where the registry's column takes no NULL: the writer would keep the old value (a GPU's lead time) or
    # reset it to the default (a plan's reserve) while the diff said "-> (blank)"
    ({("GPUs", ("H200",), "lead_time_quarters"): None}, "(lead_time_quarters) is blank, and lead_time_quarters cannot"
                                                        " be: type a value"),
    ({("Plan detail", ("docs-llama3-8b",), "reserve"): None}, "(reserve) is blank, and reserve cannot be: type a value"),
])
def test_a_bad_cell_names_itself_and_nothing_is_written(unwritten_book, tmp_path, cells, message):
    kv, book = unwritten_book
    _edit(book, tmp_path / "bad.xlsx", cells=cells)
    before = registry_state(kv.url)
    result = kv("apply", tmp_path / "bad.xlsx", "--quarter", "2026Q4", ok=False)
    assert result.exit_code == 1 and message in result.output and len(result.output.strip().splitlines()) == 1
    assert registry_state(kv.url) == before


@pytest.fixture(scope="module")
def unwritten_book(seeded_book, tmp_path_factory):
    """One copy of seeded_book's registry and its workbook per engine, shared by the cases that must
    write nothing (each checks that it wrote nothing)."""
    url, drop = seeded_book[0](tmp_path_factory.mktemp("unwritten"))
    yield Kvreg(url), seeded_book[1]
    drop()


def test_fleet_counts_come_back_through_set_fleet(kv, engine, state, tmp_path):
    """Finance lowers a fleet count (40 -> 7), sets a reserved price and adds a GPU type's entry for a
    later quarter on the Fleet sheet (its reserved count blank: 0): apply lists them, writes them through kvreg.app.fleet.set_fleet,
    and the rollup follows. A count that is not a whole number is refused, naming its cell."""
    from openpyxl import load_workbook

    kv("fleet", "set", "H100-SXM", "2026Q3", "40")
    kv("fleet", "set", "H200", "2026Q4", "10", "--reserved", "2")
    book = _workbook(kv, tmp_path)
    wb = load_workbook(book)
    f = wb["Fleet"]
    f.cell(_row(f, "H100-SXM", "2026Q3"), _col(f, "gpus_owned")).value = 7
    f.cell(_row(f, "H200", "2026Q4"), _col(f, "reserved_price_per_hour")).value = 2.5
    # gpus_reserved left blank: none reserved, 0 (the registry's default), not an error.
    _copy_row(f, f.max_row, f.max_row + 1, gpu="H200", quarter="2027Q1", gpus_owned=30, gpus_reserved=None,
              reserved_price_per_hour=None)
    wb.save(tmp_path / "fleet.xlsx")
    out = kv("apply", tmp_path / "fleet.xlsx", "--quarter", "2026Q4", "--dry-run").stdout.splitlines()
    assert out == ["~ fleet H100-SXM 2026Q3 gpus_owned: 40 -> 7",
                   "~ fleet H200 2026Q4 reserved_price_per_hour: (blank) -> 2.5",
                   "+ fleet H200 2027Q1 gpus_owned: 30", "+ fleet H200 2027Q1 gpus_reserved: 0",
                   "+ fleet H200 2027Q1 reserved_price_per_hour: (blank)", "dry run: 5 change(s), nothing written"]
    kv("apply", tmp_path / "fleet.xlsx", "--quarter", "2026Q4")
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT g.name, f.quarter, f.gpus_owned, f.gpus_reserved, f.reserved_price_per_hour"
                                 " FROM fleet f JOIN gpu g ON g.id = f.gpu_id ORDER BY g.name, f.quarter")).all()
        assert [tuple(r) for r in rows] == [("H100-SXM", "2026Q3", 7, 0, None), ("H200", "2026Q4", 10, 2, 2.5),
                                            ("H200", "2027Q1", 30, 0, None)]
        installed = conn.execute(text("SELECT gpus_installed FROM procurement"
                                      " WHERE gpu = 'H100-SXM' AND quarter = '2026Q4'")).scalar_one()
        assert installed == 7  # the 2026Q3 entry carries forward
    assert kv("apply", tmp_path / "fleet.xlsx", "--quarter", "2026Q4").stdout.splitlines()[-1] == (
        "nothing to apply: every input is as written or as the registry holds it")
    # (The H100-SXM count typed before is applied; a workbook still holding the 40 it was written with
    # would now be a conflict there, so the bad count goes where neither side changed: H200 reserved.)
    f.cell(_row(f, "H200", "2026Q4"), _col(f, "gpus_reserved")).value = 2.5
    wb.save(tmp_path / "bad.xlsx")
    before = state()
    result = kv("apply", tmp_path / "bad.xlsx", "--quarter", "2026Q4", ok=False)
    assert result.exit_code == 1 and "Fleet!D" in result.output and "whole number" in result.output
    assert state() == before


def _users(engine, plan: str, quarter: str):
    with engine.connect() as conn:
        return conn.execute(text("SELECT d.users FROM demand d JOIN plan p ON p.id = d.plan_id"
                                 " WHERE p.name = :p AND d.quarter = :q"), {"p": plan, "q": quarter}).scalar()


def test_a_workbook_handed_back_late_keeps_the_registrys_later_values(kv, engine, state, book, tmp_path):
    """#42: export, change a demand row with the CLI (250 -> 300), apply the unchanged workbook: the
    registry keeps 300. A cell finance changed where the registry did not is applied beside it."""
    kv("demand", "set", "chat-llama3-8b", "2026Q4", "300")
    before = state()
    assert kv("apply", book, "--quarter", "2026Q4").stdout.splitlines() == [
        "nothing to apply: every input is as written or as the registry holds it"]
    assert state() == before and _users(engine, "chat-llama3-8b", "2026Q4") == 300
    from openpyxl import load_workbook

    wb = load_workbook(book)
    d = wb["Demand"]
    d.cell(_row(d, "docs-llama3-8b", "2026Q4"), _col(d, "users")).value = 80
    wb.save(tmp_path / "late.xlsx")
    old = _users(engine, "docs-llama3-8b", "2026Q4")
    assert kv("apply", tmp_path / "late.xlsx", "--quarter", "2026Q4").stdout.splitlines() == [
        f"~ plan docs-llama3-8b 2026Q4 users: {old} -> 80", "applied 1 change(s) in one transaction"]
    assert _users(engine, "chat-llama3-8b", "2026Q4") == 300 and _users(engine, "docs-llama3-8b", "2026Q4") == 80


def test_a_cell_changed_in_both_is_a_conflict_until_a_side_is_taken(kv, engine, state, book, tmp_path):
    """Finance triples chat's users (250 -> 750) while someone sets 300 with the CLI: apply lists the
    conflict and writes nothing, not even the edits without a conflict; --take picks a side."""
    _edit(book, tmp_path / "edited.xlsx", typed_over=False)
    kv("demand", "set", "chat-llama3-8b", "2026Q4", "300")
    before = state()
    conflict = ("x plan chat-llama3-8b 2026Q4 users: workbook 750, registry 300, both changed since the workbook "
                "was written (250) [Demand!C")
    for args in ((), ("--dry-run",)):
        result = kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4", *args, ok=False)
        lines = result.stdout.splitlines()
        assert EXPECTED[1:] == lines[:5] and lines[5].startswith(conflict)
        assert state() == before
    assert result.exit_code == 0  # a dry run shows the conflict ...
    assert lines[-1] == ("1 conflict(s): changed in the workbook and in the registry since it was written; nothing "
                         "written: pick a side with --take workbook or --take registry")
    result = kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4", ok=False)
    assert result.exit_code == 1 and result.stderr.strip() == "Error: " + lines[-1]  # ... apply refuses
    out = kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4", "--take", "registry").stdout.splitlines()
    assert out == [*EXPECTED[1:], "= plan chat-llama3-8b 2026Q4 users: kept the registry's 300 (--take registry)",
                   "applied 5 change(s) in one transaction"]
    assert _users(engine, "chat-llama3-8b", "2026Q4") == 300 and _users(engine, "chat-llama3-8b", "2027Q1") == 900
    out = kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4", "--take", "workbook").stdout.splitlines()
    assert out == ["~ plan chat-llama3-8b 2026Q4 users: 300 -> 750", "applied 1 change(s) in one transaction"]
    assert _users(engine, "chat-llama3-8b", "2026Q4") == 750


def test_a_row_typed_in_without_its_formulas_is_refused_naming_it(kv, state, tmp_path):
    """#42: a Fleet row typed in has none of the hidden helper formulas (quarter_index, in_force), so
    the workbook's Summary leaves it out while the registry would count it: refused, the row named."""
    from openpyxl import load_workbook

    kv("fleet", "set", "H100-SXM", "2026Q3", "40")
    book = _workbook(kv, tmp_path)
    wb = load_workbook(book)
    f = wb["Fleet"]
    new = f.max_row + 1
    for name, value in (("gpu", "H200"), ("quarter", "2026Q4"), ("gpus_owned", 32)):
        f.cell(new, _col(f, name)).value = value
    wb.save(tmp_path / "typed.xlsx")
    before = state()
    result = kv("apply", tmp_path / "typed.xlsx", "--quarter", "2026Q4", ok=False)
    assert result.exit_code == 1 and result.stderr.strip() == (
        f"Error: Fleet row {new} (H200 2026Q4) was typed in without the formulas of its columns quarter_index, "
        "in_force, previous_quarter_in_force, ... (hidden ones included), so the workbook's figures leave it out: copy "
        "the row above (formulas and all), change its inputs, then apply")
    assert state() == before


def test_the_workbook_records_its_inputs_as_written(kv, book, tmp_path):
    """The very hidden sheet holds, per sheet apply reads, its input columns and each row's inputs
    as JSON: chat-llama3-8b's 2026Q4 demand as seeded (250 users), H100-SXM's memory in GiB (80)."""
    import json

    from openpyxl import load_workbook

    from kvreg.export.xlsx import STATE_SHEET

    wb = load_workbook(book)
    rows = [tuple(r) for r in wb[STATE_SHEET].iter_rows(values_only=True)]
    assert rows[0] == ("sheet", "kind", "value (JSON)")
    assert ("Demand", "inputs", '["plan", "quarter", "users"]') in rows
    assert ("Demand", "row", '{"plan": "chat-llama3-8b", "quarter": "2026Q4", "users": 250}') in rows
    gpu = next(json.loads(v) for s, k, v in rows if s == "GPUs" and k == "row" and '"H100-SXM"' in v)
    assert gpu["memory_gib_input"] == 80 and gpu["gpu"] == "H100-SXM"
    assert [s for s, k, _v in rows[1:] if k == "inputs"] == ["Plan detail", "Workload", "Demand", "Fleet", "GPUs"]


def test_a_workbook_from_an_older_kvreg_is_refused(kv, state, book, tmp_path):
    """Format 2 recorded no state: apply could not tell finance's edits from stale values."""
    import zipfile

    old = tmp_path / "old.xlsx"
    with zipfile.ZipFile(book) as zin, zipfile.ZipFile(old, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "docProps/custom.xml":
                data = data.replace(b'name="kvreg_workbook"><vt:lpwstr>3<', b'name="kvreg_workbook"><vt:lpwstr>2<')
            zout.writestr(info.filename, data)
    before = state()
    result = kv("apply", old, "--quarter", "2026Q4", ok=False)
    assert result.exit_code == 1 and result.stderr.strip() == (
        f"Error: {old} was written by an older kvreg (workbook format 2, this kvreg reads 3) that did not record the "
        "registry state it was made from: write a new workbook with `kvreg report --format xlsx`, make the edits "
        "there and apply that")
    assert state() == before
    result = kv("apply", "-", "--take", "workbook", input="", ok=False)
    assert result.exit_code == 1 and "--take is for workbooks (.xlsx)" in result.stderr


def test_every_sheet_apply_reads_has_its_inputs_recorded():
    """A sheet added to EDITABLE without its name in STATE_SHEETS would have no record to compare
    finance's edits with: every row of it would look new."""
    from kvreg.export.xlsx import STATE_SHEETS
    from kvreg.interchange.workbook import EDITABLE

    assert sorted(ed.sheet for ed in EDITABLE) == sorted(STATE_SHEETS) == [
        "Demand", "Fleet", "GPUs", "Plan detail", "Workload"]


def test_targets_finance_types_come_back_and_bind(kv, engine, book, tmp_path):
    """Finance gives the chat plan 1,000/500-token requests and a 15 ms TPOT target on Plan detail, and the
    mixed plan's classes their lengths and chat a target on Workload: apply writes them through `plan set`, and
    the chat plan's replica serves 35 users, not the 268.85 its pool holds (tests/test_plan_latency.py works it)."""
    cells = {("Plan detail", ("chat-llama3-8b",), "input_tokens"): 1000,
             ("Plan detail", ("chat-llama3-8b",), "output_tokens"): 500,
             ("Plan detail", ("chat-llama3-8b",), "tpot_target_ms"): 15,
             ("Workload", ("mixed-llama3-8b", "chat"), "class_input_tokens"): 1000,
             ("Workload", ("mixed-llama3-8b", "chat"), "class_output_tokens"): 500,
             ("Workload", ("mixed-llama3-8b", "chat"), "class_tpot_target_ms"): 15,
             ("Workload", ("mixed-llama3-8b", "documents"), "class_input_tokens"): 12000,
             ("Workload", ("mixed-llama3-8b", "documents"), "class_output_tokens"): 1000}
    _edit(book, tmp_path / "edited.xlsx", typed_over=False, cells=cells)
    out = kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4").stdout.splitlines()
    assert "~ plan chat-llama3-8b tpot_target_ms: (blank) -> 15" in out, out
    assert out[-1] == "applied 14 change(s) in one transaction"
    with engine.connect() as conn:
        q = lambda sql: conn.execute(text(sql)).all()  # noqa: E731
        assert q("SELECT input_tokens, output_tokens, tpot_target_ms, ttft_target_ms FROM plan"
                 " WHERE name = 'chat-llama3-8b'") == [(1000, 500, 15.0, None)]
        assert q("SELECT users_per_replica, users_binding_constraint FROM plan_capacity"
                 " WHERE plan = 'chat-llama3-8b'") == [(35, "latency")]
        assert q("SELECT wc.name, wc.input_tokens, wc.output_tokens, wc.tpot_target_ms FROM workload_class wc"
                 " JOIN plan p ON p.id = wc.plan_id WHERE p.name = 'mixed-llama3-8b' ORDER BY wc.id") == [
            ("chat", 1000, 500, 15.0), ("documents", 12000, 1000, None)]


def test_a_ttft_target_finance_types_comes_back_and_binds(kv, engine, book, tmp_path):
    """Finance gives the chat plan 1,000/500-token requests and a 95 ms TTFT target on Plan detail: apply writes
    them, and a replica serves 29 users (tests/test_plan_latency.py works the 29.91 by hand), so its 100 users in
    2026Q3 need ceil(100 / 29) = 4 GPUs, and every quarter's users ceil(users / 29)."""
    cells = {("Plan detail", ("chat-llama3-8b",), "input_tokens"): 1000,
             ("Plan detail", ("chat-llama3-8b",), "output_tokens"): 500,
             ("Plan detail", ("chat-llama3-8b",), "ttft_target_ms"): 95}
    _edit(book, tmp_path / "edited.xlsx", typed_over=False, cells=cells)
    out = kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4").stdout.splitlines()
    assert "~ plan chat-llama3-8b ttft_target_ms: (blank) -> 95" in out, out
    with engine.connect() as conn:
        q = lambda sql: conn.execute(text(sql)).all()  # noqa: E731
        assert q("SELECT users_per_replica, users_binding_constraint FROM plan_capacity"
                 " WHERE plan = 'chat-llama3-8b'") == [(29, "latency")]
        rows = q("SELECT quarter, users, gpus_needed FROM plan_quarter WHERE plan = 'chat-llama3-8b' ORDER BY quarter")
        assert rows[0] == ("2026Q3", 100, 4)  # ceil(100 / 29): one replica of one GPU holds 29
        assert all(gpus == math.ceil(users / 29) for _, users, gpus in rows)


def test_a_negative_target_in_the_workbook_is_refused_naming_its_cell(kv, state, book, tmp_path):
    cells = {("Plan detail", ("chat-llama3-8b",), "input_tokens"): 1000,
             ("Plan detail", ("chat-llama3-8b",), "output_tokens"): 500,
             ("Plan detail", ("chat-llama3-8b",), "tpot_target_ms"): -1}
    _edit(book, tmp_path / "edited.xlsx", typed_over=False, cells=cells)
    before = state()
    result = kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4", ok=False)
    assert result.exit_code != 0
    assert "Plan detail!" in result.output and "--tpot-ms must be a finite number of more than 0 and at most 1,000,000,000, not -1" in result.output
    assert state() == before


def test_what_gpu_set_may_change_comes_back_from_the_gpus_sheet(kv, engine, book, tmp_path):
    """The GPUs sheet's inputs that `kvreg gpu set` may change (GPU_SETTABLE) are read back too: finance's lead time (0
    quarters by default) and a derated dense BF16 FLOP/s for the H100 (989.4 TFLOPS in the catalog, NVIDIA's
    whitepaper) reach its row, beside the memory _edit types (94 GiB)."""
    cells = {("GPUs", ("H100-SXM",), "lead_time_quarters"): 3,
             ("GPUs", ("H100-SXM",), "flops_bf16_per_s"): 800e12}
    _edit(book, tmp_path / "edited.xlsx", typed_over=False, cells=cells)
    out = kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4").stdout.splitlines()
    assert [line for line in out if "gpu H100-SXM" in line] == [
        "~ gpu H100-SXM memory_gib: 80 -> 94", "~ gpu H100-SXM lead_time_quarters: 0 -> 3",
        "~ gpu H100-SXM flops_bf16_per_s: 989400000000000 -> 800000000000000"], out
    with engine.connect() as conn:
        assert conn.execute(text("SELECT lead_time_quarters, flops_bf16_per_s, memory_bytes FROM gpu"
                                 " WHERE name = 'H100-SXM'")).one() == (3, 800e12, 94 * GIB)


def test_an_input_apply_does_not_read_back_is_named_not_applied(kv, engine, book, tmp_path):
    """Finance tries TP 2 for the chat plan and retypes the H200's notes: Plan detail and GPUs show those inputs, and
    the workbook recomputes with them, but `kvreg apply` reads neither back (a layout is kvreg plan set's, a note kvreg
    gpu add's). Each is named with its cell, as written and as typed (long text cut to 40 characters), and not
    applied; the other edits are."""
    from openpyxl import load_workbook
    from openpyxl.utils import get_column_letter

    wb = load_workbook(book)
    p, g = wb["Plan detail"], wb["GPUs"]
    tp = f"{get_column_letter(_col(p, 'tp'))}{_row(p, 'chat-llama3-8b')}"
    notes = f"{get_column_letter(_col(g, 'notes'))}{_row(g, 'H200')}"
    written = g[notes].value
    assert written.startswith("H200 SXM 141GB HBM3e.") and len(written) > 40  # the catalog's note
    # and retypes the docs plan's TP as the text '1 ' and the H100's vendor with a trailing space: the same values, no
    # notice
    cells = {("Plan detail", ("chat-llama3-8b",), "tp"): 2, ("GPUs", ("H200",), "notes"): "ask the vendor",
             ("Plan detail", ("docs-llama3-8b",), "tp"): "1 ", ("GPUs", ("H100-SXM",), "vendor"): "NVIDIA "}
    _edit(book, tmp_path / "edited.xlsx", typed_over=False, cells=cells)
    out = kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4").stdout.splitlines()
    assert [line for line in out if line.startswith("! ")] == [
        f"! Plan detail!{tp} (tp: 1 -> 2): not applied (`kvreg apply` does not read this input back; change it with"
        " kvreg itself)",
        f"! GPUs!{notes} (notes: {written[:37]}... -> ask the vendor): not applied (`kvreg apply` does not read this"
        " input back; change it with kvreg itself)"], out
    assert out[-1] == "applied 6 change(s) in one transaction"  # _edit's six, as without them
    with engine.connect() as conn:
        assert conn.execute(text("SELECT tp FROM plan WHERE name = 'chat-llama3-8b'")).scalar() == 1
        assert conn.execute(text("SELECT notes FROM gpu WHERE name = 'H200'")).scalar() == written


def test_a_name_beginning_with_an_equals_sign_is_text_not_a_typed_over_formula(kv, tmp_path):
    """kvreg stores a plan named =SUM(1,2) as text in the workbook (never a formula): apply tells a formula by the
    cell's type, not by a leading '=', so the unedited workbook has nothing to apply and names no cell, and an edit
    of that plan's users comes back."""
    from openpyxl import load_workbook

    kv("plan", "add", "=SUM(1,2)", "--model", "Llama-3-8B", "--gpu", "L40S", "--context", "8K", "--avg-tokens", "2000")
    kv("demand", "set", "=SUM(1,2)", "2026Q4", 10)
    book = _workbook(kv, tmp_path)
    assert kv("apply", book, "--quarter", "2026Q4", "--dry-run").stdout.splitlines() == [
        "nothing to apply: every input is as written or as the registry holds it"]
    wb = load_workbook(book)
    d = wb["Demand"]
    d.cell(_row(d, "=SUM(1,2)", "2026Q4"), _col(d, "users")).value = 12
    wb.save(tmp_path / "edited.xlsx")
    assert kv("apply", tmp_path / "edited.xlsx", "--quarter", "2026Q4").stdout.splitlines() == [
        "~ plan =SUM(1,2) 2026Q4 users: 10 -> 12", "applied 1 change(s) in one transaction"]
