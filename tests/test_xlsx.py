"""The finance workbook: inputs as values, every figure a live formula that LibreOffice
recalculates to the views' values, before and after finance edits the inputs."""

from __future__ import annotations

import math
import os
import re
import shutil
import zipfile
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from sqlalchemy import text

import pg
from conftest import BACKENDS, sqlite_copy
from libreoffice import convert, recalculate, soffice

# One pytest-xdist worker runs the whole module, so its module-scoped registry, workbook and
# LibreOffice runs (`recalculated`, `printed`: one start each) are built once, not once a worker.
pytestmark = pytest.mark.xdist_group("test_xlsx")

GIB = 2**30
EVIL = ['=HYPERLINK("http://x","y")', "+1", "-1+2", "@SUM(A1)", "<script>|`x`\nline two"]
HELPERS = {"model_row", "gpu_row", "kv_dtype_row", "weight_dtype_row", "state_dtype_row", "plan_row"}

# name, model, gpu, tp, pp, dp_attention, kv_dtype, weight_dtype, context, avg_tokens, reserve, kv_cache_memory_bytes, block
PLANS = [
    ("llama8b-h100-128k", "Llama-3.1-8B", "H100-SXM", 1, 1, 1, "bf16", "bf16", 131072, 8192, 0.12, None, 16),
    ("qwen235-h100-tp8", "Qwen3-235B-A22B", "H100-SXM", 8, 1, 1, "bf16", "bf16", 32768, None, 0.12, None, 16),
    # '?' is a wildcard for MATCH: unescaped, this name would find the tp8 plan above.
    ("qwen235-h100-tp?", "Qwen3-235B-A22B", "H100-SXM", 8, 1, 1, "fp8", "bf16", 8192, None, 0.12, None, 16),
    ("llama70b-h100-tp1", "Llama-3.1-70B", "H100-SXM", 1, 1, 1, "bf16", "bf16", 131072, None, 0.12, None, 16),
    ("qwen-next-h200-tp4", "Qwen3-Next-80B-A3B", "H200", 4, 1, 1, "fp8", "bf16", 262144, 2048, 0.12, None, 0),
    # A chunked-attention model named "+1", on a GPU without an hourly price, with a fixed KV pool.
    (EVIL[0], "+1", "M3-Ultra", 1, 1, 1, "bf16", "bf16", 32768, None, 0.2, 40 * GIB, 16),
    (EVIL[2], "DeepSeek-V3", "H200", 8, 1, 1, "fp8_ds_mla", "fp8_e4m3", 131072, None, 0.12, None, 16),
    (EVIL[3], "gpt-oss-120b", "H100-SXM", 2, 2, 2, "bf16", "fp4", 131072, 4096, 0.12, None, 16),
    (EVIL[4], "Llama-3.1-8B", "H100-SXM", 1, 1, 1, "fp8_ds_mla", "bf16", 8192, None, 0.12, None, 16),
    ("qwen-next-vllm-tp4", "Qwen3-Next-80B-A3B", "H100-SXM", 4, 1, 1, "bf16", "bf16", 262144, None, 0.12, None, 16),
    # Sliding layers with their own kv heads and head width, and layers with no cache (Gemma 4 style).
    ("kinds-tp8", "kinds", "H100-SXM", 8, 1, 1, "bf16", "fp4", 131072, 2048, 0.12, None, 16),
    ("kinds-vllm-tp4", "kinds", "H100-SXM", 4, 1, 1, "bf16", "fp4", 131072, None, 0.12, None, 16),
    # vLLM's pipeline stages: uneven ones with experts (94 layers over 4: 23, 24, 24, 23), and even ones
    ("qwen235-vllm-pp4", "Qwen3-235B-A22B", "H200", 2, 4, 1, "bf16", "bf16", 32768, None, 0.12, None, 16),
    ("llama70b-vllm-pp2", "Llama-3.1-70B", "H100-SXM", 2, 2, 1, "bf16", "bf16", 32768, None, 0.12, None, 16),
]
# Engine rules (tests/test_engine_rules.py) on some plans, so their formulas are proven too: plan, settings.
ENGINE = [
    ("qwen235-h100-tp8", "rule = 'sglang', mem_fraction_static = 0.85, max_num_seqs = 100"),
    ("qwen235-h100-tp?", "rule = 'vllm', kv_dtype = 'fp8_per_token_head', max_num_batched_tokens = 4096"),
    ("qwen-next-h200-tp4", "rule = 'sglang'"),  # block_size 0: SGLang's page of one token
    (EVIL[2], "rule = 'vllm', gpu_memory_utilization = 0.9, activation_bytes = 6442450944,"
              " cuda_graph_bytes = 1073741824"),
    (EVIL[3], "rule = 'vllm'"),  # sliding layers, PP 2: two batches in flight
    ("qwen-next-vllm-tp4", "rule = 'vllm', measured_kv_cache_tokens = 1000000, measured_max_concurrency = 3.5,"
                           " measured_engine_version = 'vllm 0.33.0'"),
    ("llama8b-h100-128k", "measured_kv_cache_tokens = 404352, measured_max_concurrency = 3.09"),
    ("kinds-vllm-tp4", "rule = 'vllm'"),
    ("qwen235-vllm-pp4", "rule = 'vllm', engine_version = '0.10.1', engine_release = 10001"),
    ("llama70b-vllm-pp2", "rule = 'vllm'"),
]
# Workload classes: plan, class, tokens, share. "qwen235-h100-tp?" has none: its name as an unescaped
# SUMIFS criterion would match tp8's classes; EVIL[1] as a class name stays text.
CLASSES = [
    ("qwen235-h100-tp8", "chat", 1500, 0.8), ("qwen235-h100-tp8", EVIL[1], 30000, 0.2),
    (EVIL[3], "short", 100, 3.0), (EVIL[3], "long", 100000, 1.0),  # gpt-oss: beyond its 128-token window
]
# Workload classes' latency: plan, class, (input tokens, output tokens, tpot target ms or None).
CLASS_LATENCY = [("qwen235-h100-tp8", "chat", (1000, 500, 40.0)), ("qwen235-h100-tp8", EVIL[1], (20000, 2000, None))]
DEMAND = [
    ("llama8b-h100-128k", "2026Q3", 100), ("llama8b-h100-128k", "2026Q4", 250),
    ("qwen235-h100-tp8", "2026Q4", 40), ("qwen235-h100-tp?", "2026Q4", 7),
    ("llama70b-h100-tp1", "2026Q4", 10),
    ("qwen-next-h200-tp4", "2026Q3", 500), ("qwen-next-h200-tp4", "2026Q4", 0),
    (EVIL[0], "2026Q4", 12), (EVIL[2], "2026Q4", 30), (EVIL[3], "2026Q3", 64), ("llama8b-loaner", "2026Q4", 5),
]


def _insert_test_data(conn) -> None:
    llama = dict(conn.execute(text("SELECT * FROM model WHERE name = 'Llama-3.1-8B'")).mappings().one())
    llama.pop("id")
    llama.update(name="+1", full_layers=8, chunked_layers=24, attention_chunk_size=8192)
    conn.execute(text(f"INSERT INTO model ({', '.join(llama)}) VALUES ({', '.join(':' + k for k in llama)})"), llama)
    kinds = dict(conn.execute(text("SELECT * FROM model WHERE name = 'gpt-oss-120b'")).mappings().one())
    kinds.pop("id")
    kinds.update(name="kinds", sliding_kv_heads=16, sliding_head_dim=32, no_cache_layers=4, k_eq_v_layers=18)
    conn.execute(text(f"INSERT INTO model ({', '.join(kinds)}) VALUES ({', '.join(':' + k for k in kinds)})"), kinds)
    for p in PLANS:
        conn.execute(text(
            "INSERT INTO plan (name, model_id, gpu_id, tp, pp, dp_attention, kv_dtype, weight_dtype, context_tokens,"
            " avg_tokens, reserve, kv_cache_memory_bytes, block_size, gpus_per_node, notes) VALUES (:n,"
            " (SELECT id FROM model WHERE name = :m), (SELECT id FROM gpu WHERE name = :g), :tp, :pp, :dp, :kd, :wd,"
            " :ctx, :avg, :res, :kvm, :bs, 8, '')"),
            dict(zip(("n", "m", "g", "tp", "pp", "dp", "kd", "wd", "ctx", "avg", "res", "kvm", "bs"), p)))
    conn.execute(text("UPDATE model SET indexer_bytes_per_token_per_layer = 132 WHERE name = 'DeepSeek-V3'"))
    for plan, settings in ENGINE:
        conn.execute(text(f"UPDATE plan SET {settings} WHERE name = :n"), {"n": plan})
    # A GPU type with no prices at all, and a plan on it: its purchase cost is unknown (blank), not 0.
    conn.execute(text("INSERT INTO gpu (name, vendor, memory_bytes, interconnect, notes)"
                      f" VALUES ('Loaner-80G', '', {80 * GIB}, '', '')"))
    conn.execute(text(
        "INSERT INTO plan (name, model_id, gpu_id, tp, pp, dp_attention, kv_dtype, weight_dtype, context_tokens,"
        " reserve, block_size, gpus_per_node, notes) VALUES ('llama8b-loaner', (SELECT id FROM model WHERE name ="
        " 'Llama-3.1-8B'), (SELECT id FROM gpu WHERE name = 'Loaner-80G'), 1, 1, 1, 'bf16', 'bf16', 8192, 0.12, 16,"
        " 8, '')"))
    for plan, quarter, users in DEMAND:
        conn.execute(text("INSERT INTO demand (plan_id, quarter, users) VALUES"
                          " ((SELECT id FROM plan WHERE name = :p), :q, :u)"), dict(p=plan, q=quarter, u=users))
    for plan, name, tokens, share in CLASSES:
        conn.execute(text("INSERT INTO workload_class (plan_id, name, avg_tokens, share) VALUES"
                          " ((SELECT id FROM plan WHERE name = :p), :n, :t, :s)"), dict(p=plan, n=name, t=tokens, s=share))
    # Latency targets: the 8B plan's 12 ms per output token binds (12 users a replica, its pool holds 55.41);
    # the tp8 plan's classes carry lengths, chat a 40 ms target.
    conn.execute(text("UPDATE plan SET input_tokens = 4096, output_tokens = 1024, tpot_target_ms = 12,"
                      " ttft_target_ms = 3000 WHERE name = 'llama8b-h100-128k'"))
    for plan, name, lengths in CLASS_LATENCY:
        conn.execute(text("UPDATE workload_class SET input_tokens = :i, output_tokens = :o, tpot_target_ms = :t"
                          " WHERE plan_id = (SELECT id FROM plan WHERE name = :p) AND name = :n"),
                     dict(p=plan, n=name, i=lengths[0], o=lengths[1], t=lengths[2]))
    for gpu, quarter, owned, reserved, price in FLEET:
        conn.execute(text("INSERT INTO fleet (gpu_id, quarter, gpus_owned, gpus_reserved, reserved_price_per_hour)"
                          " VALUES ((SELECT id FROM gpu WHERE name = :g), :q, :o, :r, :p)"),
                     dict(g=gpu, q=quarter, o=owned, r=reserved, p=price))


# The installed fleet: H100-SXM's 2026Q3 entry carries into 2026Q4 (the workbook's quarter).
FLEET = [("H100-SXM", "2026Q3", 40, 0, None), ("H200", "2026Q4", 10, 2, 3.5), ("H200", "2027Q1", 30, 0, None)]


# The same edits, made by finance in the workbook and by us in the registry.
def _edit_registry(conn) -> None:
    conn.execute(text("UPDATE plan SET reserve = 0.20 WHERE name = 'llama8b-h100-128k'"))
    # finance loosens the 8B plan's target: memory binds again
    conn.execute(text("UPDATE plan SET tpot_target_ms = 30 WHERE name = 'llama8b-h100-128k'"))
    conn.execute(text("UPDATE demand SET users = users * 2 WHERE quarter = '2026Q4'"))
    conn.execute(text(f"UPDATE gpu SET memory_bytes = {94 * GIB} WHERE name = 'H100-SXM'"))
    conn.execute(text("UPDATE gpu SET price_per_hour = 4.0 WHERE name = 'H200'"))
    conn.execute(text("UPDATE gpu SET unit_price = 32000 WHERE name = 'H100-SXM'"))  # finance edits a card's price
    conn.execute(text("UPDATE model SET layers = 96, full_layers = 96 WHERE name = 'Qwen3-235B-A22B'"))
    conn.execute(text("UPDATE workload_class SET share = 0.5 WHERE name = 'chat'"))
    conn.execute(text("UPDATE fleet SET gpus_owned = 7 WHERE quarter = '2026Q3'"))  # finance edits a fleet count


def _edit_workbook(wb, dst: Path) -> None:
    """Finance's edits, typed into `wb` (the written workbook, loaded) and saved as `dst`."""
    _cell(wb["Plan detail"], "llama8b-h100-128k", "reserve").value = 0.20
    _cell(wb["Plan detail"], "llama8b-h100-128k", "tpot_target_ms").value = 30
    demand = wb["Demand"]
    users = _col(demand, "users")
    for r in _data_rows(demand):
        if demand.cell(r, _col(demand, "quarter")).value == "2026Q4":
            demand.cell(r, users).value *= 2
    _cell(wb["GPUs"], "H100-SXM", "memory_gib_input").value = 94  # typed in GiB, converted by formula
    _cell(wb["GPUs"], "H200", "price_per_hour").value = 4.0
    _cell(wb["GPUs"], "H100-SXM", "unit_price").value = 32000
    _cell(wb["Models"], "Qwen3-235B-A22B", "layers").value = 96
    _cell(wb["Models"], "Qwen3-235B-A22B", "full_layers").value = 96
    work = wb["Workload"]
    chat = [r for r in _data_rows(work) if work.cell(r, _col(work, "workload_class")).value == "chat"]
    for r in chat:
        work.cell(r, _col(work, "share")).value = 0.5
    # A row typed in without the formulas copied down: left out of its plan's mix (the registry has no such class).
    extra = max(_data_rows(work)) + 1
    for name, value in (("plan", "qwen235-h100-tp8"), ("workload_class", "typed"), ("class_tokens", 500),
                        ("share", 5.0)):
        work.cell(extra, _col(work, name)).value = value
    fleet = wb["Fleet"]
    for r in _data_rows(fleet):
        if fleet.cell(r, _col(fleet, "quarter")).value == "2026Q3":
            fleet.cell(r, _col(fleet, "gpus_owned")).value = 7
    assert wb["Assumptions"]["A3"].value == "default_reserve"
    wb["Assumptions"]["B3"].value = 0.10
    wb.save(dst)


# --------------------------------------------------------------------------- sheet access

# Workbooks loaded once for the module (a load of the written workbook costs ~1 s of CPU) and read by
# every test that only reads them: (path, data_only) -> [workbook, cells per sheet, each sheet's extent].
_BOOKS: dict = {}


def _book(path: Path, data_only: bool = False):
    """The workbook at `path`, loaded once and shared: read it, never write to it (a test that edits a
    workbook loads its own). Reading a cell through ws.cell(), ws["A1"] or iter_rows() creates it when it
    is absent: inside a sheet's extent that changes nothing another reader sees (it would create the same
    empty cell), outside it moves max_row/max_column for the next test, so `_shared_books_stay_as_loaded`
    fails a test that did; `_peek` reads without creating."""
    from openpyxl import load_workbook

    key = (Path(path), data_only)
    if key not in _BOOKS:
        wb = load_workbook(path, data_only=data_only)
        _BOOKS[key] = [wb, _cell_counts(wb), _extents(wb)]
    return _BOOKS[key][0]


def _cell_counts(wb) -> list[int]:
    return [len(ws._cells) for ws in wb.worksheets]


def _extents(wb) -> list[tuple[int, int, int, int]]:
    return [(ws.min_row, ws.min_column, ws.max_row, ws.max_column) for ws in wb.worksheets]


def _peek(ws, coordinate: str):
    """ws[coordinate].value without creating the cell when it is absent (absent reads as None, as there)."""
    from openpyxl.utils.cell import coordinate_to_tuple

    cell = ws._cells.get(coordinate_to_tuple(coordinate))
    return None if cell is None else cell.value


@pytest.fixture(autouse=True)
def _shared_books_stay_as_loaded():
    """After each test: no shared workbook's sheet reaches further than when it was loaded (counting the
    cells first: the extents take ~20 ms a workbook). One that does is dropped, so later tests load it again."""
    yield
    changed = []
    for key, entry in list(_BOOKS.items()):
        wb, counts, extents = entry
        if _cell_counts(wb) == counts:
            continue
        if _extents(wb) != extents:
            moved = [(ws.title, a, b) for ws, a, b in zip(wb.worksheets, extents, _extents(wb)) if a != b]
            changed.append(f"{key[0].name} (data_only={key[1]}): {moved}")
            del _BOOKS[key]
        else:
            entry[1] = _cell_counts(wb)  # empty cells created inside the sheets' extents
    assert not changed, f"the test created cells outside shared workbooks' sheets, which later tests read: {changed}"


@pytest.fixture(scope="module", autouse=True)
def _forget_books():
    yield
    _BOOKS.clear()


def _col(ws, name: str) -> int:
    for c in ws[2]:
        if c.value == name:
            return c.column
    raise KeyError(name)


def _data_rows(ws):
    return [r for r in range(3, ws.max_row + 1) if ws.cell(r, 1).value is not None]


def _cell(ws, key: str, name: str):
    for r in _data_rows(ws):
        if ws.cell(r, 1).value == key:
            return ws.cell(r, _col(ws, name))
    raise KeyError(key)


_FILLS = {"FFFFF2CC": "input", "FFDDEBF7": "lookup"}


def _role(cell) -> str:
    """input (light yellow), lookup (light blue) or figure (no fill), from the cell's fill."""
    fill = cell.fill
    return _FILLS.get(fill.fgColor.rgb, "figure") if fill is not None and fill.fill_type == "solid" else "figure"


def _same(got, want) -> bool:
    if want is None or want == "":  # an empty text result reads back as an empty cell
        return got in (None, "")
    if isinstance(want, str):
        return got == want
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)


# --------------------------------------------------------------------------- expected values


def _grain_rows(conn, grain: str, key) -> dict:
    """Each row of a grain: its source columns (the inputs) and its view columns (the figures)."""
    from kvreg.figures.views import GRAIN

    view = {key(r): dict(r) for r in conn.execute(text(f"SELECT * FROM {grain}")).mappings()}
    source = {key(r): dict(r) for r in conn.execute(text(GRAIN[grain].source)).mappings()}
    return {k: {**source[k], **v} for k, v in view.items()}


# The quarters of the Summary's per-quarter block: the purchase schedule's horizon (kvreg.db.read.schedule_horizon)
# from the workbook's quarter, 4 quarters (the last entry, H200's fleet of 2027Q1, is before its end).
BLOCK_QUARTERS = ("2026Q4", "2027Q1", "2027Q2", "2027Q3")


def _with_in_force(conn, view: str, key: str, rows: dict) -> dict:
    """Each entry with its quarter index and whether it holds in 2026Q4, 2026Q3 and each block
    quarter, by the SQL rule the views use."""
    from kvreg.figures.aggregates import in_force_sql, index_of_quarter

    asked = {"in_force": 2026 * 4 + 3, "previous_quarter_in_force": 2026 * 4 + 2}
    asked.update({f"in_force_{q}": index_of_quarter(q) for q in BLOCK_QUARTERS})
    flags = ", ".join(f"CASE WHEN {in_force_sql('e', str(q))} THEN 1 ELSE 0 END AS {n}" for n, q in asked.items())
    for r in conn.execute(text(f"SELECT {key}, quarter, quarter_index, {flags} FROM {view} e")).mappings():
        rows[(r[key], r["quarter"])].update({k: r[k] for k in ("quarter_index", *asked)})
    return rows


def _expected(conn) -> dict:
    from kvreg.db.read import rollup

    models = {r["name"]: dict(r) for r in conn.execute(text("SELECT * FROM model")).mappings()}
    return {
        "plans": _grain_rows(conn, "plan_capacity", lambda r: r["plan"]),
        "classes": _grain_rows(conn, "plan_class", lambda r: (r["plan"], r["workload_class"])),
        "demand": _with_in_force(conn, "plan_quarter", "plan", _grain_rows(conn, "plan_quarter",
                                                                             lambda r: (r["plan"], r["quarter"]))),
        "fleet": _with_in_force(conn, "fleet_quarter", "gpu", {
            (r["gpu"], r["quarter"]): dict(r) for r in conn.execute(text("SELECT * FROM fleet_quarter")).mappings()}),
        "model_kv": _grain_rows(conn, "model_kv", lambda r: (r["model"], r["kv_dtype"])),
        # The declared aggregates through SQL (carry-forward included), per GPU type and quarter.
        # Over the block's quarters as a horizon (the purchase schedule's, from the workbook's 2026Q4).
        "procurement": {(r["gpu"], r["quarter"]): r
                        for r in rollup(conn, start=BLOCK_QUARTERS[0], quarters=len(BLOCK_QUARTERS))},
        "gpus": {r["name"]: dict(r) for r in conn.execute(text("SELECT * FROM gpu")).mappings()},
        "state_dtype": {n: m["linear_state_dtype"] or m["weight_dtype"] for n, m in models.items()},
        "weight_dtype": {n: m["weight_dtype"] for n, m in models.items()},
    }


def _sweep_expected(conn, vals, default_reserve: float, weight_dtype: dict) -> dict:
    """The capacity view for each sweep row's settings, asked through scratch scenario rows."""
    from kvreg.figures.views import GRAIN

    ids = {}
    trans = conn.begin_nested() if conn.in_transaction() else conn.begin()
    try:
        conn.execute(text("DELETE FROM scenario"))
        # Columns found once: each _col reads row 2, whose length openpyxl finds over every cell of the sheet.
        col = {n: _col(vals, n) for n in ("model", "gpu", "context_tokens", "tp", "pp", "dp_attention",
                                          "gpus_per_node", "kv_dtype", "block_size")}
        for r in _data_rows(vals):
            row = {n: vals.cell(r, c).value for n, c in col.items()}
            row.update(weight_dtype=weight_dtype[row["model"]], reserve=default_reserve)
            ids[r] = conn.execute(text(
                "INSERT INTO scenario (model_id, gpu_id, gpus_per_node, tp, pp, dp_attention, kv_dtype, weight_dtype,"
                " context_tokens, avg_tokens, reserve, kv_cache_memory_bytes, block_size) VALUES ("
                " (SELECT id FROM model WHERE name = :model), (SELECT id FROM gpu WHERE name = :gpu), :gpus_per_node,"
                " :tp, :pp, :dp_attention, :kv_dtype, :weight_dtype, :context_tokens, NULL, :reserve, NULL,"
                " :block_size) RETURNING id"), row).scalar_one()
        rows = _grain_rows(conn, "capacity", lambda r: r["id"])
        assert GRAIN["capacity"].source  # the source reads the same scratch rows
    finally:
        trans.rollback()
    return {r: rows[i] for r, i in ids.items()}


# --------------------------------------------------------------------------- comparison


def _compare(vals, forms, expected_at, problems: list, covered: set) -> int:
    """Compare every formula cell of a table sheet with `expected_at(row, column)` (a dict of
    input and figure values); returns how many cells matched a view or source value."""
    names = [c.value for c in forms[2]]
    checked = 0
    for r in _data_rows(forms):
        for i, name in enumerate(names, start=1):
            if forms.cell(r, i).data_type != "f":
                continue
            covered.add((forms.title, forms.cell(r, i).coordinate))
            got = vals.cell(r, i).value
            if name in HELPERS:
                if not (isinstance(got, (int, float)) and got >= 1):
                    problems.append(f"{forms.title}!{forms.cell(r, i).coordinate} {name}: {got!r} is not a row")
                continue
            want = expected_at(r, i)[name]
            if not _same(got, want):
                problems.append(f"{forms.title}!{forms.cell(r, i).coordinate} {name}: workbook {got!r}, view {want!r}")
            checked += 1
    return checked


def _check_workbook(recalculated: Path, written: Path, conn, default_reserve: float) -> int:
    """Every formula cell of the workbook against the views; returns the number of cells checked."""
    vals = _book(recalculated, data_only=True)
    forms = _book(written)
    exp = _expected(conn)
    problems: list[str] = []
    covered: set = set()
    n = 0

    plans, demand = vals["Plan detail"], vals["Demand"]
    n += _compare(plans, forms["Plan detail"], lambda r, i: exp["plans"][plans.cell(r, 1).value], problems, covered)
    overview, quarter = vals["Plans"], vals["Summary"]["B1"].value

    from kvreg.export.text import BLANK_TEXT

    def plan_at(r, i):  # the plan's demand entry in force in the Summary's quarter (carried forward)
        plan = overview.cell(r, 1).value
        by_quarter = next((d for (p, _q), d in exp["demand"].items() if p == plan and d["in_force"]), {})
        view = exp["plans"][plan]
        words = {k: w for k, w in BLANK_TEXT.items() if view.get(k) is None}  # an empty limit read in words
        return {**view, **words, "users": by_quarter.get("users") or 0,
                "gpus_needed": by_quarter.get("gpus_needed") or 0}

    n += _compare(overview, forms["Plans"], plan_at, problems, covered)
    work = vals["Workload"]

    def class_at(r, i):
        plan, name = work.cell(r, 1).value, work.cell(r, 2).value
        return {**exp["plans"][plan], **exp["classes"][(plan, name)]}

    n += _compare(work, forms["Workload"], class_at, problems, covered)
    n += _compare(demand, forms["Demand"],
                  lambda r, i: exp["demand"][(demand.cell(r, 1).value, demand.cell(r, 2).value)], problems, covered)
    fleet = vals["Fleet"]
    n += _compare(fleet, forms["Fleet"],
                  lambda r, i: exp["fleet"][(fleet.cell(r, 1).value, fleet.cell(r, 2).value)], problems, covered)
    n += _compare(vals["GPUs"], forms["GPUs"], lambda r, i: exp["gpus"][vals["GPUs"].cell(r, 1).value],
                  problems, covered)

    models = vals["Models"]
    block_starts = [c.column for c in forms["Models"][2] if c.value == "kv_dtype"]

    def model_at(r, i):
        start = max([b for b in block_starts if b <= i], default=block_starts[0])
        name = models.cell(r, 1).value
        row = dict(exp["model_kv"][(name, models.cell(r, start).value)])
        row["state_dtype"] = exp["state_dtype"][name]
        return row

    n += _compare(models, forms["Models"], model_at, problems, covered)

    sweep = _sweep_expected(conn, vals["Context sweep"], default_reserve, exp["weight_dtype"])
    n += _compare(vals["Context sweep"], forms["Context sweep"], lambda r, i: sweep[r], problems, covered)
    n += _check_summary(vals["Summary"], forms["Summary"], exp["procurement"], exp["gpus"], problems, covered)
    n += _check_cards(vals, forms, problems, covered)

    every = {(ws.title, c.coordinate) for ws in forms for row in ws.iter_rows() for c in row if c.data_type == "f"}
    assert every - covered == set(), f"formula cells nobody checked: {sorted(every - covered)[:10]}"
    assert not problems, f"{len(problems)} cells differ, first ones:\n" + "\n".join(problems[:25])
    return n


def _check_cards(vals, forms, problems: list, covered: set) -> int:
    """Each Plan cards value is a reference to one cell of Plan detail or Plans (checked above):
    it holds that cell's value, and blank stays blank."""
    checked = 0
    for row in forms["Plan cards"].iter_rows():
        for c in row:
            if c.data_type != "f":
                continue
            m = re.fullmatch(r"=(?:IF\((.+?)=\"\",\"\",\1\)|(.+))", c.value)
            sheet, cell = (m.group(1) or m.group(2)).split("!")
            source = vals[sheet.strip("'")][cell]
            got, want = vals["Plan cards"][c.coordinate].value, source.value
            if not _same(got, want) and not (got in (None, "") and want in (None, "")):
                problems.append(f"Plan cards!{c.coordinate} ({c.value}): {got!r}, source {want!r}")
            covered.add(("Plan cards", c.coordinate))
            checked += 1
    # A card per plan: the plan's name heads it, read from Plan detail.
    names = [c.value for row in vals["Plan cards"].iter_rows() for c in row
             if c.font.b and c.font.sz == 12 and c.value]
    assert names == [vals["Plan detail"].cell(r, 1).value for r in _data_rows(forms["Plan detail"])]
    return checked


def _check_summary(vals, forms, procurement: dict, gpus: dict, problems: list, covered: set) -> int:
    from kvreg.figures.quarters import index_of_quarter

    quarter, previous = vals["B1"].value, vals["B2"].value
    assert (quarter, previous) == ("2026Q4", "2026Q3")
    from kvreg.export.xlsx import SUMMARY_HORIZON_START, SUMMARY_QUARTER_INDEX

    index_cell = SUMMARY_QUARTER_INDEX.split("!")[1].replace("$", "")
    assert vals[index_cell].value == 2026 * 4 + 3 and forms.cell(1, vals[index_cell].column - 1).value.startswith(
        "Quarter index")
    start_cell = SUMMARY_HORIZON_START.split("!")[1].replace("$", "")
    assert vals[start_cell].value == index_of_quarter(BLOCK_QUARTERS[0])  # the horizon's first quarter
    covered.update({("Summary", "B2"), ("Summary", index_cell), ("Summary", start_cell)})
    names = [c.value for c in forms[5]]
    totals: dict[str, float] = {}
    checked = 0
    total_row = next(r for r in range(6, forms.max_row + 1) if vals.cell(r, 1).value == "Total")
    # Under Total: whether every plan and fleet row is on a GPU type the table lists (it lists those
    # named when the workbook was written).
    covered.add(("Summary", forms.cell(total_row + 1, 1).coordinate))
    if vals.cell(total_row + 1, 1).value != "Every plan and fleet row is on a GPU type listed above":
        problems.append(f"Summary!A{total_row + 1}: {vals.cell(total_row + 1, 1).value!r}")
    # GPUs needed, then GPUs short, per quarter (rows) and GPU type (columns), below the totals.
    blocks = [r for r in range(total_row + 1, forms.max_row + 1) if vals.cell(r, 1).value == "Quarter"]
    assert len(blocks) == 2
    for block, figure in zip(blocks, ("gpus_needed", "gpus_short")):
        gpu_cols = {c: vals.cell(block, c).value for c in range(2, forms.max_column + 1) if vals.cell(block, c).value}
        rows = range(block + 1, block + 1 + len(BLOCK_QUARTERS))
        assert tuple(vals.cell(r, 1).value for r in rows) == BLOCK_QUARTERS
        assert _peek(vals, f"A{rows[-1] + 1}") in (None, "")  # may be past the sheet: read without creating
        for r in rows:
            q = vals.cell(r, 1).value
            for c, gpu in gpu_cols.items():
                covered.add(("Summary", forms.cell(r, c).coordinate))
                want = (procurement.get((gpu, q)) or {}).get(figure) or 0
                if not _same(vals.cell(r, c).value, want):
                    problems.append(f"Summary!{forms.cell(r, c).coordinate} {gpu} {q} {figure}: "
                                    f"{vals.cell(r, c).value!r}, view {want}")
                checked += 1
    for r in range(6, total_row + 1):
        gpu = vals.cell(r, 1).value
        for i, name in enumerate(names, start=1):
            if forms.cell(r, i).data_type != "f":
                continue
            covered.add(("Summary", forms.cell(r, i).coordinate))
            got = vals.cell(r, i).value
            if gpu == "Total":
                want = totals.get(name, 0)
            elif name in ("unit_price", "price_per_hour", "lead_time_quarters", "node_gpus"):
                want = gpus[gpu][name]
            else:  # a GPU type with no demand and no fleet: every aggregate is 0, no order-by quarter
                row = procurement.get((gpu, quarter))
                want = row.get(name) if row else (None if name.startswith("order_by") else 0)  # capex_to_buy without a unit_price: None (blank)
                totals[name] = totals.get(name, 0) + (want if isinstance(want, (int, float)) else 0)
            if not _same(got, want):
                problems.append(f"Summary!{forms.cell(r, i).coordinate} {gpu} {name}: workbook {got!r}, view {want!r}")
            checked += 1
    return checked


# --------------------------------------------------------------------------- fixtures


def _need_libreoffice():
    if soffice() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("LibreOffice is required in CI (apt-get install libreoffice-calc-nogui)")
        pytest.skip("LibreOffice (soffice) is not installed")


@pytest.fixture(scope="module")
def registry(sqlite_template, tmp_path_factory):
    from kvreg.app.access import open_registry

    eng = open_registry(sqlite_copy(sqlite_template, tmp_path_factory.mktemp("xlsx")))
    with eng.begin() as conn:
        _insert_test_data(conn)
    yield eng
    eng.dispose()


@pytest.fixture(scope="module")
def written(registry, tmp_path_factory) -> Path:
    from kvreg.report.gather import write_workbook

    path = tmp_path_factory.mktemp("book") / "capacity.xlsx"
    with registry.connect() as conn:
        write_workbook(conn, path, "2026q4", generated_at="2026-10-01T00:00:00+00:00")
    return path


@pytest.fixture(scope="module")
def recalculated(registry, written, tmp_path_factory):
    """Every workbook the tests recalculate, by LibreOffice in one start (a start costs ~1.6 s of CPU, a
    written workbook ~5 s): before and after finance's edits (each test compares them with the views
    before the edits and after the same edits made in the registry, the forms with the workbook given
    beside it), the stale one, and the written workbook with two cells typed that do not meet
    (`_typed_cells`). The edited copies are saved from one load of the written workbook."""
    from openpyxl import load_workbook

    _need_libreoffice()
    work = tmp_path_factory.mktemp("recalc")
    before, after, stale, typed = (work / f"{n}.xlsx" for n in ("before", "after", "stale", "typed"))
    shutil.copy(written, before)  # its own name: LibreOffice's copies keep the inputs' names
    wb = load_workbook(written)
    undo = _typed_cells(wb)
    wb.save(typed)
    for cell, value in undo:
        cell.value = value
    _edit_workbook(wb, after)
    _stale_workbook(stale)
    out_before, out_after, out_stale, out_typed = recalculate([before, after, stale, typed], work / "out")
    return {"before": (out_before, written), "after": (out_after, after), "stale": out_stale,
            "moved": out_typed, "ttft": out_typed}


def _typed_cells(wb) -> list:
    """Two edits that touch different plans, checked by two tests on one recalculated copy: finance moves
    llama8b-loaner to an A10, a GPU type no plan or fleet row names when written
    (test_summary_lists_the_gpu_types_in_use_and_flags_a_plan_moved_off_them), and types a 50 ms TTFT
    target for llama8b-h100-128k (test_editing_a_ttft_target_recomputes_users_and_gpus). Returns each
    cell with its value before, to put back."""
    plans = wb["Plan detail"]
    cells = [(_cell(plans, "llama8b-loaner", "gpu"), "A10"), (_cell(plans, "llama8b-h100-128k", "ttft_target_ms"), 50)]
    undo = [(cell, cell.value) for cell, _ in cells]
    assert undo[0][1] == "Loaner-80G"
    for cell, value in cells:
        cell.value = value
    return undo


def _stale_workbook(path: Path) -> None:
    """B1 = A1 * 3 with a stored result of 999, as a workbook saved after an edit would carry."""
    from openpyxl import Workbook

    wb = Workbook()
    wb.active["A1"], wb.active["B1"] = 2, "=A1*3"
    wb.save(path.with_suffix(".tmp"))
    with zipfile.ZipFile(path.with_suffix(".tmp")) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "xl/worksheets/sheet1.xml":
                assert b"<f>A1*3</f><v />" in data
                data = data.replace(b"<f>A1*3</f><v />", b"<f>A1*3</f><v>999</v>")
            dst.writestr(info, data)


# --------------------------------------------------------------------------- tests without LibreOffice


def _sheet_xml(path: Path) -> dict[str, ET.Element]:
    """Each sheet's XML by sheet name, read from the zip as Excel would."""
    ns = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
          "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships"}
    with zipfile.ZipFile(path) as z:
        book = ET.fromstring(z.read("xl/workbook.xml"))
        rels = ET.fromstring(z.read("xl/_rels/workbook.xml.rels"))
        target = {r.get("Id"): r.get("Target") for r in rels}
        out = {}
        for s in book.find("m:sheets", ns):
            t = target[s.get(f"{{{ns['r']}}}id")].lstrip("/")
            out[s.get("name")] = ET.fromstring(z.read(t if t.startswith("xl/") else "xl/" + t))
    return out


def test_user_text_is_stored_as_text_never_as_a_formula(written):
    m = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
    found = {name: 0 for name in EVIL}
    for sheet, root in _sheet_xml(written).items():
        for c in root.iter(f"{m}c"):
            text_ = "".join(t.text or "" for t in c.iter(f"{m}t"))
            if text_ in found:
                found[text_] += 1
                assert c.get("t") in ("inlineStr", "s"), f"{sheet}!{c.get('r')} is stored as {c.get('t')}"
                assert c.find(f"{m}f") is None, f"{sheet}!{c.get('r')} has a formula"
        for f in root.iter(f"{m}f"):
            assert "HYPERLINK" not in (f.text or "") and "SUM(A1)" not in (f.text or "")
    # Each name is in its own table and in every row that refers to it (plans in Demand and Workload,
    # "+1" in Plans, the sweep and as a workload class).
    assert all(found.values()), found
    assert found['=HYPERLINK("http://x","y")'] == 2 and found["@SUM(A1)"] == 2 + 2 and found["+1"] >= 4


def test_every_figure_is_a_formula_and_every_input_a_value(written):
    from kvreg.export.xlsx import CONVERTED
    from kvreg.figures.declarations import CLASS_MEANS, FIGURES, dependencies, inputs_of
    from kvreg.figures.views import GRAIN

    wb = _book(written)
    plans = wb["Plan detail"]
    names = [c.value for c in plans[2]]
    # every figure but those at a concurrency (a plan's requests in flight are what its figures solve for, so the
    # sheet has no concurrency column); the limits a target sets and the users served within it are there
    at_concurrency = {n for n in GRAIN["plan_capacity"].figures() if "concurrency" in dependencies(n)}
    assert at_concurrency == {"latency_batch_sequences", "decode_step_s", "tpot_s", "ttft_queue_fraction",
                              "ttft_running_s", "request_running_s", "slot_wait_s", "ttft_ms", "tpot_ms",
                              "request_latency_s", "output_tokens_per_s_per_gpu", "total_tokens_per_s_per_gpu"}
    assert set(GRAIN["plan_capacity"].figures()) - at_concurrency <= set(names)
    assert not at_concurrency & set(names)
    assert {"tpot_concurrency_limit", "latency_concurrency_limit", "users_per_replica", "users_binding_constraint",
            "input_tokens", "tpot_target_ms"} <= set(names) and "concurrency" not in names
    assert names[:15] == ["plan", "model", "gpu", "tp", "pp", "dp_attention", "gpus_per_node", "kv_dtype",
                          "weight_dtype", "context_tokens", "avg_tokens", "reserve", "kv_cache_memory_gib_input",
                          "kv_cache_memory_bytes", "block_size"]
    # Headers in words with units in row 1; the names in row 2, hidden.
    assert plans.cell(1, _col(plans, "kv_bytes_per_token_per_gpu")).value == "KV per token per GPU (bytes)"
    assert plans.cell(1, _col(plans, "kv_cache_memory_gib_input")).value == "Fixed KV pool (GiB)"
    assert plans.row_dimensions[2].hidden
    sheets = {"Plan detail": "plan_capacity", "Workload": "plan_class", "Demand": "plan_quarter", "Models": "model_kv",
              "Context sweep": "capacity"}
    no_mix = {("Context sweep", m.name) for m in CLASS_MEANS}  # a sweep point has no workload classes: =""
    for sheet, grain in sheets.items():
        ws, figures = wb[sheet], set(GRAIN[grain].outputs())
        assert _data_rows(ws), sheet
        header = [c.value for c in ws[2]]
        for r in _data_rows(ws):
            for i, name in enumerate(header, start=1):
                c = ws.cell(r, i)
                where = f"{sheet}!{c.coordinate} {name}"
                if name in figures:
                    assert c.data_type == "f" and _role(c) == "figure", where
                elif _role(c) == "input":
                    assert c.data_type != "f", f"{where} is an input holding a formula"
                else:  # a lookup of an input, or of a plan's figure in Demand
                    assert _role(c) == "lookup" and c.data_type == "f", where
                    if (sheet, name) in no_mix:
                        assert c.value == '=""', where
                    else:
                        # quarter_index and the in-force flags of the carry-forward rule: same-sheet helpers
                        assert (name in FIGURES or "!" in c.value or name in ("state_dtype", *CONVERTED)
                                or name in ("quarter_index", "previous_quarter_in_force")
                                or name.startswith("in_force")), where
    # Units: in the header and in the number format.
    col = _col(plans, "kv_gib_per_sequence_per_gpu")
    assert plans.cell(1, col).value == "KV per sequence per GPU (GiB)" and plans.cell(3, col).number_format == '0.00 "GiB"'
    assert plans.cell(3, _col(plans, "kv_bytes_per_token_per_gpu")).number_format == '#,##0 "B"'
    demand = wb["Demand"]
    assert demand.cell(3, _col(demand, "capex")).number_format == "$#,##0"


def test_formulas_use_only_functions_libreoffice_74_knows(written):
    from kvreg.export.xlsx import FUNCTIONS_USED

    used = set()
    for ws in _book(written):
        for row in ws.iter_rows():
            for c in row:
                if c.data_type == "f":
                    used |= set(re.findall(r"([A-Z][A-Z0-9.]*)\(", re.sub(r'"[^"]*"', '""', c.value)))
    assert used <= set(FUNCTIONS_USED), used - set(FUNCTIONS_USED)
    assert {"INDEX", "MATCH", "SUMIFS", "IF", "INT", "FIXED"} <= used


def test_a_formula_reads_like_its_declaration(written):
    """cost_per_month = gpus_needed x price_per_hour x 730; blank (no hourly price) stays blank."""
    demand = _book(written)["Demand"]
    L = {n: demand.cell(2, _col(demand, n)).column_letter for n in ("gpus_needed", "price_per_hour")}
    cell = _cell(demand, "llama8b-h100-128k", "cost_per_month")
    r = cell.row
    g, p = f"{L['gpus_needed']}{r}", f"{L['price_per_hour']}{r}"
    assert cell.value == f'=IF(OR({g}="",{p}=""),"",(({g}*{p})*730))'


def test_layout_for_finance(written):
    from kvreg.export.xlsx import SHEETS, STATE_SHEET

    wb = _book(written)
    # Last, very hidden (no menu unhides it): the inputs as written, for `kvreg apply`.
    assert wb.sheetnames == [*SHEETS, STATE_SHEET] and SHEETS[0] == "Read me"
    assert wb[STATE_SHEET].sheet_state == "veryHidden"
    plans = wb["Plan detail"]
    assert plans.freeze_panes == "B3" and plans.auto_filter.ref.startswith("A1:")
    # Printing: Plan detail prints nothing (its print area is one empty cell below and right of its
    # table, no titles, no header); Demand prints landscape, one page wide, its inputs and figures
    # (not the helpers right of them), the header row and the plan column on every page.
    assert plans.print_title_rows is None and plans.print_title_cols is None and not plans.oddHeader.right.text
    area = plans.print_area
    assert re.fullmatch(r"'Plan detail'!\$[A-Z]+\$1002", area)
    assert _peek(plans, area.split("!")[1].replace("$", "")) is None  # past the table: read without creating
    demand = wb["Demand"]
    assert demand.page_setup.orientation == "landscape" and demand.page_setup.fitToWidth in (None, 1)  # 1 is the default
    assert demand.page_setup.fitToHeight == 0 and demand.sheet_properties.pageSetUpPr.fitToPage
    assert demand.print_title_rows == "$1:$1" and demand.print_title_cols == "$A:$B"
    last_printed = demand.cell(2, _col(demand, "quarter_index") - 1).column_letter
    assert demand.print_area == f"'Demand'!$A$1:${last_printed}${demand.max_row}"
    assert "&P of &N" in demand.oddFooter.right.text and "2026Q4" in demand.oddHeader.right.text
    validated = {}
    for dv in plans.data_validations.dataValidation:
        assert dv.type == "list" and dv.showErrorMessage and dv.errorStyle in (None, "stop")  # stop is the default
        for rng in str(dv.sqref).split():
            validated[plans[rng.split(":")[0]].column] = dv.formula1
    for name, sheet in (("gpu", "GPUs"), ("model", "Models"), ("kv_dtype", "Dtypes"), ("weight_dtype", "Dtypes")):
        assert validated[_col(plans, name)].startswith(f"{sheet}!$A$3:$A$")
    assert validated[_col(plans, "rule")] == '"theoretical,vllm,sglang"'
    # A quarter is picked from a list (those with demand or fleet and four more); a new one is asked
    # about, then kept. The same list on Demand and on Fleet.
    for sheet in ("Demand", "Fleet"):
        quarter_dv = [dv for dv in wb[sheet].data_validations.dataValidation if "B3" in str(dv.sqref)]
        assert quarter_dv[0].formula1 == '"2026Q3,2026Q4,2027Q1,2027Q2,2027Q3,2027Q4,2028Q1"', sheet
        assert quarter_dv[0].errorStyle == "warning"
    rules = [r for cf in plans.conditional_formatting for r in cf.rules]
    fits = plans.cell(2, _col(plans, "fits")).column_letter
    assert any(f"${fits}3=0" in r.formula[0] for r in rules)
    assert wb["Assumptions"]["B3"].value == 0.12 and _role(wb["Assumptions"]["B3"]) == "input"
    with zipfile.ZipFile(written) as z:
        names = [n for n in z.namelist() if n.startswith("xl/charts/chart")]
        charts = [z.read(n).decode() for n in sorted(names, key=lambda n: int(re.sub(r"\D", "", n)))]
    # GPUs needed per quarter per GPU type, over the Summary sheet's own cells; then max concurrency
    # against context over the Context sweep's cells, a named line per model (at its TP).
    assert "<c:barChart>" in charts[0] and "<c:f>Summary!$B$" in charts[0]
    # Beside it: GPUs needed, installed and to buy per GPU type this quarter (the Summary's own columns).
    from kvreg.export.excel_layout import get_column_letter
    from kvreg.figures.aggregates import AGGREGATE_COLUMNS

    summary_letters = {n: get_column_letter(i + 2) for i, n in enumerate(AGGREGATE_COLUMNS)}
    assert "<c:barChart>" in charts[1]
    for name in ("gpus_needed", "gpus_installed", "gpus_to_buy"):
        assert f"<c:f>Summary!${summary_letters[name]}$6:" in charts[1], name
    assert all("<c:scatterChart>" in c and "'Context sweep'!$" in c for c in charts[2:]) and len(charts) >= 4
    lines = [re.findall(r"<c:tx><c:v>([^<]*)</c:v>", c) for c in charts[2:]]
    assert all(0 < len(x) <= 8 for x in lines) and "Llama-3.1-70B (TP 2)" in lines[0]


def test_every_formula_stores_the_views_value(registry, written):
    """A reader that does not recalculate (a previewer, a phone, openpyxl data_only) sees every
    figure: each formula cell carries the value the views computed, and none is empty that the
    views fill."""
    with registry.connect() as conn:
        checked = _check_workbook(written, written, conn, default_reserve=0.12)
    assert checked > 3000


def test_sweep_keeps_one_tp_along_a_model_and_gpu(written):
    """Llama-3.1-70B on H100-SXM: TP 2 at every context (TP auto at 1m alone would pick 8), so its
    max concurrency only falls as the context grows."""
    sweep = _book(written, data_only=True)["Context sweep"]
    col = {n: _col(sweep, n) for n in ("model", "gpu", "tp", "context_tokens", "max_concurrency")}
    rows = [{n: sweep.cell(r, c).value for n, c in col.items()} for r in _data_rows(sweep)]
    pairs: dict = {}
    for row in rows:
        pairs.setdefault((row["model"], row["gpu"]), []).append(row)
    assert all(len({r["tp"] for r in v}) == 1 for v in pairs.values())
    for v in pairs.values():
        conc = [r["max_concurrency"] for r in sorted(v, key=lambda r: r["context_tokens"])]
        assert conc == sorted(conc, reverse=True), v
    llama = pairs[("Llama-3.1-70B", "H100-SXM")]
    assert [r["tp"] for r in llama] == [2, 2, 2, 2] and [r["context_tokens"] for r in llama] == list(
        (8192, 32768, 131072, 1000000))


def test_same_registry_same_bytes(registry, written, tmp_path):
    from kvreg.report.gather import write_workbook

    again = tmp_path / "capacity.xlsx"
    with registry.connect() as conn:
        write_workbook(conn, again, "2026Q4", generated_at="2026-10-01T00:00:00+00:00")
    assert again.read_bytes() == written.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["capacity.xlsx"]  # no temporary file left behind


def test_bad_quarter_writes_nothing(registry, tmp_path):
    from kvreg.core.errors import user_error_types
    from kvreg.report.gather import write_workbook

    with registry.connect() as conn, pytest.raises(user_error_types(), match="2026-13"):
        write_workbook(conn, tmp_path / "x.xlsx", "2026-13")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- recalculated by LibreOffice


def test_libreoffice_recalculates_stored_results(recalculated):
    """LibreOffice's default keeps stored results of .xlsx files; the helper's profile does not."""
    from openpyxl import load_workbook

    assert load_workbook(recalculated["stale"], data_only=True).active["B1"].value == 6  # 2 x 3, not 999


def test_recalculated_workbook_equals_the_views(registry, recalculated):
    out, written = recalculated["before"]
    with registry.connect() as conn:
        checked = _check_workbook(out, written, conn, default_reserve=0.12)
    assert checked > 3000


@pytest.fixture(scope="module")
def printed(sqlite_template, tmp_path_factory, request):
    """The seeded registry's workbook on each engine that is here, printed to PDF by one LibreOffice
    start (a start costs seconds): {"sqlite": (xlsx, pdf, plans, gpus), "postgresql": ...}. A seeded registry is
    the same on both engines: each is a copy of the session's seeded template (sqlite_template, pg_template)."""
    from kvreg.app.access import open_registry
    from kvreg.report.gather import write_workbook

    _need_libreoffice()
    work = tmp_path_factory.mktemp("print")
    urls = {"sqlite": sqlite_copy(sqlite_template, work)}
    server, _ = pg.find_server()
    if server is not None:
        database = server.create_database(template=request.getfixturevalue("pg_template"))
        urls["postgresql"] = server.url(database)
    try:
        books, names = {}, {}
        for backend, url in urls.items():
            eng = open_registry(url)
            try:
                with eng.connect() as conn:
                    books[backend] = work / f"{backend}.xlsx"
                    write_workbook(conn, books[backend], "2026Q4", generated_at="2026-10-01T00:00:00+00:00")
                    names[backend] = ([r[0] for r in conn.execute(text("SELECT name FROM plan ORDER BY name"))],
                                      [r[0] for r in conn.execute(text(  # the GPU types the Summary lists
                                          "SELECT name FROM gpu WHERE id IN (SELECT gpu_id FROM plan UNION "
                                          "SELECT gpu_id FROM fleet) ORDER BY name"))])
            finally:
                eng.dispose()
        pdfs = convert(list(books.values()), work / "pdf", "pdf", ".pdf")
        yield {backend: (book, pdf, *names[backend]) for (backend, book), pdf in zip(books.items(), pdfs)}
    finally:
        if server is not None:
            server.drop_database(database)
            server.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_seeded_workbook_prints_on_12_pages_at_8_pt_or_more(backend, printed, request):
    """The seeded registry's workbook through LibreOffice to PDF: at most 12 pages (23 before the
    print areas and cards, 201 before any page setup), no printed character under 8 pt (text size
    read from the PDF's text operators: font size x text matrix x transformation), the Summary's
    tables on one landscape page without the quarter-index helper, a card per plan, and nothing of
    the sheets left out of print (Read me names them)."""
    from pdftext import read_pages

    from kvreg.export.xlsx import NOT_PRINTED, SHEETS

    if backend == "postgresql":
        request.getfixturevalue("pg_server")  # skips without a server, fails without one under CI=true
    path, pdf_path, plans, gpus = printed[backend]
    pages = read_pages(pdf_path)
    assert len(pages) <= 12, len(pages)
    small = [(i, p.smallest) for i, p in enumerate(pages, start=1) if p.smallest < 8 - 0.005]
    assert small == [], small  # (page, smallest size in pt)
    # Every page's header names its sheet: "kvreg capacity workbook, quarter 2026Q4 <sheet> Quarter 2026Q4".
    sheet_of = [re.match(r"kvreg capacity workbook, quarter 2026Q4 (.+?) Quarter 2026Q4", p.text).group(1)
                for p in pages]
    assert sorted(set(sheet_of), key=SHEETS.index) == [s for s in SHEETS if s not in NOT_PRINTED]
    assert NOT_PRINTED == ("Plan detail", "Models", "GPUs", "Dtypes", "Context sweep")
    assert sheet_of.count("Read me") == 1 and pages[0].width < pages[0].height  # one portrait page
    summary = [p for p, s in zip(pages, sheet_of) if s == "Summary"]
    # Page 1: the rollup (every GPU type in use, the Total) and the GPUs-needed-per-quarter block; page 2 the charts.
    assert len(summary) == 2 and summary[0].width > summary[0].height
    assert all(g in summary[0].text for g in gpus) and " Total " in summary[0].text
    assert "Quarter index" not in " ".join(p.text for p in pages)
    cards = " ".join(p.text for p, s in zip(pages, sheet_of) if s == "Plan cards")
    assert [cards.count(f" {plan} ") for plan in plans] == [1] * len(plans)
    assert sheet_of.count("Plan cards") == -(-len(plans) // 3)  # three cards a page
    readme = pages[0].text
    assert "Printing" in readme and "Models, GPUs, Dtypes, Context sweep are reference tables" in readme

    # What a reader sees first holds a number or words in every figure cell (only a fitting plan's reason is
    # empty): a plan without a latency target reads "no target" where the binding limit goes, as in the CLI's
    # tables and on the web pages, on the Plans sheet and on its card.
    from openpyxl import load_workbook

    forms, vals = load_workbook(path), load_workbook(path, data_only=True)
    for sheet in ("Summary", "Plans"):
        reason = _col(forms["Plans"], "reason") if sheet == "Plans" else None
        # A GPU type's own prices on Summary stay blank when unknown (no hourly price for a Mac).
        # So do the order-by quarters of a GPU type with nothing to buy.
        prices = {c.column for c in forms["Summary"][5] if c.value in (
            "unit_price", "price_per_hour", "order_by", "order_by_whole_nodes", "order_by_index",
            "order_by_index_whole_nodes")}
        blank_ok = {reason} if sheet == "Plans" else prices
        cells = [(c.row, c.column) for row in forms[sheet].iter_rows() for c in row if c.data_type == "f"]
        assert len(cells) > 50
        empty = [(r, c) for r, c in cells if c not in blank_ok and vals[sheet].cell(r, c).value in (None, "")]
        assert empty == [], (sheet, empty[:5])
    from kvreg.export.excel_layout import get_column_letter

    binding = _cell(vals["Plans"], "chat-llama3-8b", "users_binding_constraint")  # the seeded plans have no target
    assert binding.value == "no target"
    detail = f"'Plan detail'!{get_column_letter(_col(forms['Plan detail'], 'users_binding_constraint'))}{binding.row}"
    assert forms["Plans"].cell(binding.row, binding.column).value == f'=IF({detail}="","no target",{detail})'
    card = " ".join(str(c.value) for row in vals["Plan cards"].iter_rows() for c in row if c.value is not None)
    assert card.count("no target") == len(plans)


def test_hand_worked_cells(recalculated):
    """Llama-3.1-8B on one H100 at 131,072 tokens (SPEC: about 3.5 sequences)."""
    wb = _book(recalculated["before"][0], data_only=True)
    plans, demand = wb["Plan detail"], wb["Demand"]
    per_token = 32 * 8 * (128 + 128) * 2  # layers x KV heads x (K + V dims) x 2 bytes = 131,072 B
    sequence = per_token * 131072  # 16 GiB
    pool = 80 * GIB * (1 - 0.12) - 8_050_000_000 * 2  # usable - bf16 weights = 59,491,424,409.6 B
    assert _cell(plans, "llama8b-h100-128k", "kv_bytes_per_sequence_per_gpu").value == sequence == 16 * GIB
    assert _cell(plans, "llama8b-h100-128k", "max_concurrency").value == pytest.approx(pool / sequence)  # 3.46
    # 250 users of 8,192 tokens: the pool holds 55.4 per replica, ceil(250 / 55.4) = 5 GPUs; but its 12 ms TPOT
    # target (4,096/1,024-token requests) lets a replica run 12 (tests/test_plan_latency.py works the like by
    # hand): latency binds, ceil(250 / 12) = 21 GPUs at 2.5 USD/h x 730 h.
    assert pool / (per_token * 8192) == pytest.approx(55.4057, rel=1e-5)
    assert _cell(plans, "llama8b-h100-128k", "workload_concurrency").value == pytest.approx(55.4057, rel=1e-5)
    assert _cell(plans, "llama8b-h100-128k", "latency_concurrency_limit").value == 12
    assert _cell(plans, "llama8b-h100-128k", "users_per_replica").value == 12
    assert _cell(plans, "llama8b-h100-128k", "users_binding_constraint").value == "latency"
    rows = [r for r in _data_rows(demand) if demand.cell(r, 1).value == "llama8b-h100-128k"]
    q4 = [r for r in rows if demand.cell(r, 2).value == "2026Q4"][0]
    assert demand.cell(q4, _col(demand, "gpus_needed")).value == 21 == math.ceil(250 / 12)
    assert demand.cell(q4, _col(demand, "cost_per_month")).value == 21 * 2.5 * 730 == 38325
    # Qwen3-Next's 36 DeltaNet layers x 548,864 state elements x 2 bytes (SPEC errata).
    assert _cell(plans, "qwen-next-h200-tp4", "state_bytes_per_sequence").value == 36 * 548864 * 2 == 39518208
    assert _cell(plans, "llama70b-h100-tp1", "fits").value == 0
    assert _cell(plans, "llama70b-h100-tp1", "reason").value == (
        "weights need 131.50 GiB per GPU but only 70.40 GiB is usable")  # 141.2e9 B / 2^30; 80 x 0.88
    # M3-Ultra has no hourly price: the cost stays blank, the capex is there.
    assert _cell(demand, EVIL[0], "cost_per_month").value in (None, "")
    assert _cell(demand, EVIL[0], "capex").value == 5500
    assert _cell(plans, EVIL[0], "plan").value == EVIL[0]
    # Seed 002's mix (catalog plan): 0.8 x 94 + 0.2 x 813 blocks of 2 MiB per mean request, 53e9 B of pool.
    mean = (0.8 * 94 + 0.2 * 813) * 16 * per_token  # 498,702,745.6 B
    assert _cell(plans, "mixed-llama3-8b", "mix_kv_bytes_per_request_per_gpu").value == pytest.approx(mean)
    assert _cell(plans, "mixed-llama3-8b", "workload_concurrency").value == pytest.approx(53e9 / mean)  # 106.28
    assert _cell(plans, "mixed-llama3-8b", "workload_tokens").value == pytest.approx(3800)
    # The wildcard name has no classes of its own: its mix stays blank (tp8's classes are not matched).
    assert _cell(plans, "qwen235-h100-tp?", "mix_avg_tokens").value in (None, "")
    assert _cell(plans, "qwen235-h100-tp8", "mix_avg_tokens").value == pytest.approx(0.8 * 1500 + 0.2 * 30000)


def test_edits_recompute_like_the_registry(registry, recalculated):
    out, written = recalculated["after"]
    with registry.connect() as conn:
        trans = conn.begin()
        try:
            _edit_registry(conn)
            _check_workbook(out, written, conn, default_reserve=0.10)
        finally:
            trans.rollback()
    plans = _book(out, data_only=True)["Plan detail"]
    pool = 94 * GIB * (1 - 0.20) - 8_050_000_000 * 2  # the new memory and reserve
    assert _cell(plans, "llama8b-h100-128k", "max_concurrency").value == pytest.approx(pool / (16 * GIB))  # 3.76


def _exprs():
    from kvreg.figures.declarations import I
    from kvreg.figures.expr import and_, coalesce, if_, isnull, least, not_

    return [
        # A blank input blanks the arithmetic (SQL: NULL), with one test per run of operations.
        (I("price_per_hour") * I("unit_price") * 730,
         'IF(OR(PRICE_PER_HOUR="",UNIT_PRICE=""),"",((PRICE_PER_HOUR*UNIT_PRICE)*730))'),
        (I("price_per_hour") * I("users"), 'IF(PRICE_PER_HOUR="","",(PRICE_PER_HOUR*USERS))'),
        # A divisor that can be zero (users >= 0) blanks the result; tp and pp are positive by schema.
        (I("tp") / I("users"), 'IF(USERS=0,"",TP/USERS)'),
        (I("tp") / I("pp"), "(TP/PP)"),
        # MIN skips a blank side, as the SQL targets do.
        (least(I("sliding_window"), 5), 'IF(SLIDING_WINDOW="",5,MIN(SLIDING_WINDOW,5))'),
        # The else branch of "is it blank?" knows it is not.
        (if_(isnull(I("avg_tokens")), 0, I("avg_tokens") * 2),
         'IF(AVG_TOKENS="",0,(AVG_TOKENS*2))'),
        # A condition reads as one; a blank side of a comparison makes it false, as in SQL.
        (if_(I("tp") > I("pp"), 1, 2), "IF(TP>PP,1,2)"),
        (if_(I("unit_price") > 0, 1, 2), 'IF(IF(UNIT_PRICE="",0,IF(UNIT_PRICE>0,1,0))<>0,1,2)'),
        (if_(not_(I("tp")), 1, 2), "IF(TP=0,1,2)"),
        (if_(and_(I("tp") > 1, isnull(I("unit_price"))), 1, 2), 'IF(AND(TP>1,UNIT_PRICE=""),1,2)'),
        (coalesce(I("unit_price"), 0) * 2, '(IF(UNIT_PRICE="",0,UNIT_PRICE)*2)'),
        # A comparison with a blank is 0, as SQL's CASE WHEN gives it.
        (I("unit_price") > 0, 'IF(UNIT_PRICE="",0,IF(UNIT_PRICE>0,1,0))'),
    ]


def test_null_safe_formulas():
    """Excel would give #VALUE! for "" * 2 and TRUE for "" > 0; the workbook follows SQL's NULLs."""
    from kvreg.figures.excel import ExcelCompiler

    for expr, formula in _exprs():
        assert ExcelCompiler(str.upper, str.upper, null_safe=True).compile(expr) == formula


def test_sweep_sheet_asks_about_at_most_sweep_pairs_model_gpu_pairs(engine, monkeypatch):
    """With the cap lowered to 2 pairs, the seeded plans' 2 GPUs leave room for 2 // 2 = 1 model:
    the one most plans use (Llama-3-8B: chat, docs and mixed) -> 1 model x 2 GPUs x 4 contexts = 8
    sweep rows. At the default cap (48 pairs) the seeded plans' 4 models x 2 GPUs all fit: 32 rows."""
    import kvreg.report.gather as report

    with engine.connect() as conn:
        data = report._workbook_registry(conn)
        full = report._workbook_sweep(conn, data)
        monkeypatch.setattr(report, "WORKBOOK_SWEEP_PAIRS", 2)
        rows = report._workbook_sweep(conn, data)
    plan_gpus = sorted({p["gpu"] for p in data["plans"]})
    assert plan_gpus == ["H100-SXM", "H200"]
    assert [p["model"] for p in data["plans"]].count("Llama-3-8B") == 3
    assert {r["model"] for r in rows} == {"Llama-3-8B"}
    assert {r["gpu"] for r in rows} == set(plan_gpus)
    assert len(rows) == 1 * 2 * 4
    assert len(full) == 4 * 2 * 4


def test_summary_lists_the_gpu_types_in_use_and_flags_a_plan_moved_off_them(registry, written, recalculated):
    """The Summary lists the GPU types a plan or fleet row names (a catalog of 37 types would not
    print on one page), not the others; a plan moved to an unlisted type in the workbook is flagged
    under Total after recalculation."""
    with registry.connect() as conn:
        named = {r[0] for r in conn.execute(text(
            "SELECT g.name FROM gpu g WHERE g.id IN (SELECT gpu_id FROM plan UNION SELECT gpu_id FROM fleet)"))}
        catalog = conn.execute(text("SELECT COUNT(*) FROM gpu")).scalar()
    assert "A10" not in named and len(named) < catalog
    ws = _book(written, data_only=True)["Summary"]
    total = next(r for r in range(6, ws.max_row + 1) if ws.cell(r, 1).value == "Total")
    assert {ws.cell(r, 1).value for r in range(6, total)} == named
    moved = _book(recalculated["moved"], data_only=True)["Summary"]
    assert moved.cell(total + 1, 1).value == ("1 plan or fleet row(s) name a GPU type not listed above, so the table "
                                              "leaves them out: apply the workbook with kvreg and write it again")


def test_to_buy_cells_follow_a_fleet_edit(registry, recalculated):
    """Finance lowers H100-SXM's 2026Q3 fleet entry from 40 to 7 (it carries into 2026Q4, the Summary's
    quarter and the horizon's first), doubles 2026Q4's demand and raises H100-SXM's unit price from
    30,000 to 32,000 USD: the recalculated to-buy cells equal the views before and after."""
    from kvreg.db.read import rollup

    def summary(path):
        ws = _book(path, data_only=True)["Summary"]
        names = [c.value for c in ws[5]]
        row = next(r for r in range(6, ws.max_row + 1) if ws.cell(r, 1).value == "H100-SXM")
        return {n: ws.cell(row, i).value for i, n in enumerate(names, start=1) if n}

    keys = ("gpus_needed", "gpus_installed", "gpus_to_buy", "gpus_spare", "capex_to_buy")
    before, after = summary(recalculated["before"][0]), summary(recalculated["after"][0])
    with registry.connect() as conn:
        trans = conn.begin()
        try:
            def view():  # the Summary's horizon: the block's quarters, 2026Q4 first
                rows = rollup(conn, start=BLOCK_QUARTERS[0], quarters=len(BLOCK_QUARTERS))
                return next(r for r in rows if (r["gpu"], r["quarter"]) == ("H100-SXM", "2026Q4"))

            view_before = view()
            _edit_registry(conn)
            view_after = view()
        finally:
            trans.rollback()
    assert (before["gpus_installed"], after["gpus_installed"]) == (40, 7)
    for got, view, price in ((before, view_before, 30_000), (after, view_after, 32_000)):
        assert {k: got[k] for k in keys} == pytest.approx({k: view[k] for k in keys})
        # GPUs bought stay bought: the largest shortfall so far less what the horizon bought before
        # (nothing: 2026Q4 is its first quarter, so the purchase is the shortfall).
        assert got["gpus_short"] == max(0, got["gpus_needed"] - got["gpus_installed"])
        assert got["previous_gpus_bought"] == 0 and got["gpus_bought"] == got["gpus_short"]
        assert got["gpus_to_buy"] == got["gpus_bought"] - got["previous_gpus_bought"]
        assert got["capex_to_buy"] == pytest.approx(got["gpus_to_buy"] * price)
    # The Summary leads with the purchase.
    ws = _book(recalculated["before"][0])["Summary"]
    assert [c.value for c in ws[5]][1:3] == ["gpus_to_buy", "capex_to_buy"]


def test_capex_to_buy_is_blank_without_a_unit_price(registry, written):
    """Loaner-80G has no unit_price: 1 plan on it needs GPUs, so GPUs to buy > 0, and the purchase
    cost is unknown: NULL in the procurement view, a blank (stored "") formula cell on the Summary
    that says so (IF(price="","",...)), left out of the Total -- never 0."""
    from kvreg.db.read import rollup

    with registry.connect() as conn:
        view = next(r for r in rollup(conn, "2026Q4") if r["gpu"] == "Loaner-80G")
    assert view["gpus_to_buy"] > 0 and view["capex_to_buy"] is None
    forms = _book(written)["Summary"]
    vals = _book(written, data_only=True)["Summary"]
    names = [c.value for c in forms[5]]
    row = next(r for r in range(6, forms.max_row + 1) if forms.cell(r, 1).value == "Loaner-80G")
    capex, price = names.index("capex_to_buy") + 1, names.index("unit_price") + 1
    assert vals.cell(row, names.index("gpus_to_buy") + 1).value == view["gpus_to_buy"]
    assert vals.cell(row, capex).value in (None, "")
    assert forms.cell(row, capex).value.startswith(f'=IF({forms.cell(row, price).column_letter}{row}="","",')


def test_a_workbook_saved_by_libreoffice_reads_back(registry, recalculated):
    """LibreOffice keeps the very hidden state sheet and the document properties: its copy of the
    unedited workbook has nothing to apply, and its copy of the edited one is refused for the
    Workload row typed in without formulas (the workbook's figures leave that row out)."""
    from kvreg.core.errors import KvregError
    from kvreg.interchange.workbook import apply_workbook

    result = apply_workbook(registry, recalculated["before"][0], quarter="2026Q4", dry_run=True)
    assert result.changes == [] and result.conflicts == [] and not result.applied
    with pytest.raises(KvregError, match=r"^Workload row \d+ \(qwen235-h100-tp8 typed\) was typed in without the "
                                         r"formulas of its columns"):
        apply_workbook(registry, recalculated["after"][0], quarter="2026Q4", dry_run=True)


def test_editing_a_ttft_target_recomputes_users_and_gpus(registry, recalculated):
    """Finance types a 50 ms TTFT target for llama8b-h100-128k on Plan detail. A request waits vLLM's
    request_overhead_s on an H100 (56 ms) before its prefill even starts, so no replica meets 50 ms with one
    request: once LibreOffice recalculates, users_per_replica is 0, the binding limit latency, the plan's
    2026Q4 demand (250 users, 18 GPUs at its 12 ms TPOT target before) gets no GPUs, and its Plan card shows
    users per replica 0 under a rule that paints it red. The same edit made in the registry gives the same.
    (Its recalculated copy also has llama8b-loaner moved to an A10: `_typed_cells`.)"""
    from kvreg.figures.performance import EFFICIENCIES

    overhead = next(e for e in EFFICIENCIES if e.needle == "h100" and e.engine == "vllm").request_overhead_s
    assert overhead * 1000 > 50  # the target is missed before the prompt's prefill
    out = recalculated["ttft"]
    vals = _book(out, data_only=True)
    plans = vals["Plan detail"]
    assert _cell(plans, "llama8b-h100-128k", "ttft_concurrency_limit").value == 0
    assert _cell(plans, "llama8b-h100-128k", "users_per_replica").value == 0
    assert _cell(plans, "llama8b-h100-128k", "users_binding_constraint").value == "latency"
    assert _cell(plans, "llama8b-h100-128k", "reason").value == (
        "fits in memory, but no replica meets the ttft target even with one request")
    demand = vals["Demand"]
    q4 = [r for r in _data_rows(demand) if demand.cell(r, 1).value == "llama8b-h100-128k"
          and demand.cell(r, 2).value == "2026Q4"][0]
    assert demand.cell(q4, _col(demand, "gpus_needed")).value in (None, "")
    # the Plan card: its users per replica and binding limit read the recalculated cells of Plan detail and Plans
    cards = vals["Plan cards"]
    (top, col), = [(c.row, c.column) for row in cards.iter_rows() for c in row if c.value == "llama8b-h100-128k"]
    below = {cards.cell(r, col).value: cards.cell(r, col + 1) for r in range(top + 1, top + 40)}
    users, binds = below["Users per replica (users)"], below["Binding limit (memory or latency)"]
    assert (users.value, binds.value) == (0, "latency")
    rules = {str(cf.sqref): [r.formula for r in cf.rules] for cf in _book(out)["Plan cards"].conditional_formatting}
    assert rules[f"{users.coordinate}:{binds.coordinate}"] == [[f"AND(ISNUMBER(${users.column_letter}${users.row}),"
                                                              f"${users.column_letter}${users.row}=0)"]]
    # the same edit in the registry: the views agree
    with registry.connect() as conn:
        conn.execute(text("UPDATE plan SET ttft_target_ms = 50 WHERE name = 'llama8b-h100-128k'"))
        row = conn.execute(text("SELECT users_per_replica, users_binding_constraint FROM plan_capacity"
                                " WHERE plan = 'llama8b-h100-128k'")).one()
        conn.rollback()
    assert (row[0], row[1]) == (0, "latency")


def test_a_plan_card_under_an_engine_rule_shows_what_the_engine_allocates(kv, tmp_path):
    """Under vLLM's rule the reserve is not used: the plan's card shows the GPU memory utilization vLLM takes (0.92,
    v0.20's default) and the memory it allocates (Allocatable per GPU, Plan detail's allocatable_gib_per_gpu) in the
    rows where a theoretical plan's card shows its reserve and usable memory, as the report's plan section does."""
    from conftest import report_workbook
    from openpyxl import load_workbook

    kv("plan", "add", "v", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--rule", "vllm", "--gpus-per-node", "1")
    wb = load_workbook(report_workbook(kv, tmp_path), data_only=True)
    cards = wb["Plan cards"]
    rows = [[c.value for c in r] for r in cards.iter_rows()]
    top = next(i for i, r in enumerate(rows) if "v" in r)
    col = rows[top].index("v")
    card = {r[col]: r[col + 1] for r in rows[top + 1:top + 20] if r[col]}
    [plan] = [p for p in kv.json("plan", "list") if p["plan"] == "v"]
    assert card["GPU memory utilization used (share)"] == 0.92 and "Reserve (share of GPU memory)" not in card
    assert card["Allocatable per GPU (GiB)"] == pytest.approx(plan["allocatable_gib_per_gpu"], rel=1e-12)
    assert "Usable per GPU (GiB)" not in card
    top = next(i for i, r in enumerate(rows) if "chat-llama3-8b" in r)  # a theoretical plan keeps them
    chat = rows[top].index("chat-llama3-8b")
    assert {r[chat] for r in rows[top + 1:top + 20]} >= {"Reserve (share of GPU memory)", "Usable per GPU (GiB)"}
