"""The purchase schedule (issue 43): GPUs bought stay bought, totals, order-by quarters from a GPU
type's lead time, whole nodes, and the plans that drive each purchase.

The registry is the built-in catalog (tests/test_plans.py works its GPUs needed by hand): H100-SXM
needs 93 GPUs in 2026Q4 (chat 1 + docs 2 + mixed 2 + 70B 24 + Qwen3 64), H200 3. Two more demand
entries make the issue's horizon: chat-llama3-8b 300 users from 2027Q1 (300 / 268.85 per replica: 2
GPUs, one more) and mixed-llama3-8b 300 from 2027Q2 (300 / 106.28: 3 GPUs, one more), so H100 needs
93, 94, 95, 95 over 2026Q4-2027Q3. With 40 installed the shortfall is 53, 54, 55, 55: what
`gpus_to_buy` used to repeat every quarter (218 GPUs, about four times the 55 bought).
"""

from __future__ import annotations

import pytest

H100, H200 = "H100-SXM", "H200"
H100_PRICE, H200_PRICE = 30_000, 35_000
HORIZON = ("2026Q4", "2027Q1", "2027Q2", "2027Q3")


def _issue_horizon(kv):
    kv("fleet", "set", H100, "2026Q4", 40)
    kv("demand", "set", "chat-llama3-8b", "2027Q1", 300)
    kv("demand", "set", "mixed-llama3-8b", "2027Q2", 300)


def _schedule(kv, *extra):
    out = kv.json("plan", "rollup", "--from", "2026Q4", "--quarters", 4, *extra)
    return out, {(r["gpu"], r["quarter"]): r for r in out["schedule"]}


def test_gpus_bought_stay_bought_and_the_increments_add_up_to_the_peak_shortfall(kv):
    _issue_horizon(kv)
    out, by = _schedule(kv)
    h100 = [by[(H100, q)] for q in HORIZON]
    assert [r["gpus_needed"] for r in h100] == [93, 94, 95, 95]
    assert [r["gpus_short"] for r in h100] == [93 - 40, 94 - 40, 95 - 40, 95 - 40] == [53, 54, 55, 55]
    # Bought so far: the largest shortfall up to each quarter; to buy: its increment.
    assert [r["gpus_bought"] for r in h100] == [53, 54, 55, 55]
    assert [r["gpus_to_buy"] for r in h100] == [53, 54 - 53, 55 - 54, 0] == [53, 1, 1, 0]
    assert sum(r["gpus_to_buy"] for r in h100) == 55  # the peak shortfall, not 53 + 54 + 55 + 55 = 217
    assert [r["capex_to_buy"] for r in h100] == [53 * H100_PRICE, 1 * H100_PRICE, 1 * H100_PRICE, 0]
    # H200: 3 needed throughout, nothing installed: 3 bought in the first quarter.
    assert [by[(H200, q)]["gpus_to_buy"] for q in HORIZON] == [3, 0, 0, 0]
    # Totals per GPU type and overall.
    assert out["totals"] == [
        {"gpu": H100, "gpus_to_buy": 55, "capex_to_buy": 55 * H100_PRICE, "first_order_by": "2026Q4", "orders_late": 0},
        {"gpu": H200, "gpus_to_buy": 3, "capex_to_buy": 3 * H200_PRICE, "first_order_by": "2026Q4", "orders_late": 0}]
    assert out["total"] == {"gpus_to_buy": 55 + 3, "capex_to_buy": 55 * 30_000 + 3 * 35_000,
                            "first_order_by": "2026Q4", "orders_late": 0}


def test_a_fleet_entry_for_the_purchase_buys_nothing_twice(kv):
    _issue_horizon(kv)
    kv("fleet", "set", H100, "2027Q1", 40 + 53)  # the 53 bought for 2026Q4 entered as installed
    _out, by = _schedule(kv)
    # 2027Q1: 94 needed, 93 installed: short 1, but 53 were bought in 2026Q4 (largest shortfall so far): 0 to buy.
    assert [by[(H100, q)]["gpus_short"] for q in HORIZON] == [53, 1, 2, 2]
    assert [by[(H100, q)]["gpus_to_buy"] for q in HORIZON] == [53, 0, 0, 0]


def test_lead_time_gives_order_by_and_flags_a_late_order(kv):
    _issue_horizon(kv)
    kv("gpu", "set", H100, "--lead-time", 2)
    out, by = _schedule(kv)
    # Lands 2026Q4 -> ordered 2026Q2; 2027Q1 -> 2026Q3: both before the horizon's first quarter (late);
    # 2027Q2 -> 2026Q4, in time; nothing to buy in 2027Q3, no order.
    assert [by[(H100, q)]["order_by"] for q in HORIZON] == ["2026Q2", "2026Q3", "2026Q4", None]
    assert [by[(H100, q)]["order_late"] for q in HORIZON] == [1, 1, 0, 0]
    assert [by[(H200, q)]["order_by"] for q in HORIZON] == ["2026Q4", None, None, None]  # lead time 0
    assert out["totals"][0]["first_order_by"] == "2026Q2" and out["total"]["orders_late"] == 2
    table = kv("plan", "rollup", "--from", "2026Q4", "--quarters", 4).stdout.splitlines()
    order = next(line for line in table if line.startswith(H100) and " order_by " in line)
    assert order.split() == [H100, "order_by", "2026Q2", "LATE", "2026Q3", "LATE", "2026Q4"]


def test_whole_nodes_round_what_is_bought_up_to_nodes(kv):
    _issue_horizon(kv)
    kv("gpu", "set", H200, "--node-gpus", 4)
    out, by = _schedule(kv, "--whole-nodes")
    # H100 (8 a node): bought 53, 54, 55, 55 -> 7 nodes = 56 each quarter: 56 in 2026Q4, then nothing.
    assert [by[(H100, q)]["gpus_to_buy"] for q in HORIZON] == [56, 0, 0, 0]
    assert [by[(H100, q)]["order_by"] for q in HORIZON] == ["2026Q4", None, None, None]
    # H200 (4 a node): 3 -> one node of 4.
    assert [by[(H200, q)]["gpus_to_buy"] for q in HORIZON] == [4, 0, 0, 0]
    assert out["whole_nodes"] is True
    assert out["total"]["gpus_to_buy"] == 56 + 4 and out["total"]["capex_to_buy"] == 56 * 30_000 + 4 * 35_000


def test_the_plans_that_drive_each_purchase(kv):
    _issue_horizon(kv)
    _out, by = _schedule(kv)
    # The first quarter: every plan on the GPU type needing GPUs, largest first; later: the plans that grew.
    assert by[(H100, "2026Q4")]["driving_plans"] == (
        "longctx-qwen3-235b +64, longctx-llama31-70b +24, docs-llama3-8b +2, mixed-llama3-8b +2, chat-llama3-8b +1")
    assert by[(H100, "2027Q1")]["driving_plans"] == "chat-llama3-8b +1"
    assert by[(H100, "2027Q2")]["driving_plans"] == "mixed-llama3-8b +1"
    assert by[(H100, "2027Q3")]["driving_plans"] == ""  # nothing bought


def test_csv_is_the_schedule_rows(kv):
    _issue_horizon(kv)
    lines = kv("plan", "rollup", "--from", "2026Q4", "--quarters", 4, "--format", "csv").stdout.splitlines()
    head = lines[0].split(",")
    assert head[:6] == ["gpu", "quarter", "gpus_to_buy", "capex_to_buy", "order_by", "order_late"]
    assert len(lines) == 1 + 2 * 4


@pytest.mark.parametrize("args, why", [
    (("gpu", "set", H100, "--lead-time", -1), "lead_time_quarters must be at least 0"),
    (("gpu", "set", H100, "--node-gpus", 0), "node_gpus must be at least 1"),
    (("gpu", "set", "NoSuchGPU", "--lead-time", 1), "NoSuchGPU"),
    (("gpu", "set", H100), "gpu set needs something to change"),
])
def test_gpu_set_refuses_bad_input_in_one_line(kv, args, why):
    kv("gpu", "show", H100)  # the registry exists: its creation notice is not part of the error
    r = kv(*args, ok=False)
    assert r.exit_code == 1 and why in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert kv.json("gpu", "show", H100)[0]["lead_time_quarters"] == 0  # nothing written


def test_gpu_add_takes_lead_time_and_node_size(kv):
    kv("gpu", "add", "Test-GPU-1", "--memory", "192GiB", "--unit-price", "20000", "--lead-time", 3, "--node-gpus", 8)
    g = kv.json("gpu", "show", "Test-GPU-1")[0]
    assert (g["lead_time_quarters"], g["node_gpus"]) == (3, 8)


# --------------------------------------------------------------------------- one horizon rule everywhere

SCHEDULE_KEYS = ("gpus_to_buy", "capex_to_buy", "order_by", "order_late")


def _summary_rows(path) -> tuple[str, dict]:
    """The workbook Summary's quarter (B1) and its rows by GPU type, {column name: stored value}."""
    from openpyxl import load_workbook

    ws = load_workbook(path, data_only=True)["Summary"]
    names = [c.value for c in ws[5]]
    rows = {}
    for r in range(6, ws.max_row + 1):
        if ws.cell(r, 1).value in (H100, H200):
            rows[ws.cell(r, 1).value] = {n: ws.cell(r, i).value for i, n in enumerate(names, start=1) if n}
    return ws["B1"].value, rows


def test_report_rollup_workbook_and_web_share_one_horizon(kv, db_url, tmp_path, monkeypatch):
    """The schedule starts at the current (or report) quarter, 2026Q4 here, whatever quarter the first
    entry names: the demand's 2026Q3 entries carry into it and the H100 purchases are those of the
    first test, 53, 1, 1, 0 (93, 94, 95, 95 needed less the 40 installed). With a lead time of 1 the
    2026Q4 order was due in 2026Q3, before the horizon: late. `plan rollup` (no arguments and --from),
    the report's data, the web page and the workbook's Summary (its stored values, and, when
    LibreOffice is installed, each horizon quarter picked in B1 and recalculated) give the same numbers."""
    import json

    import kvreg.core.units
    from test_serve import _grid, _InProcess

    from kvreg.web.app import create_app

    _issue_horizon(kv)
    kv("gpu", "set", H100, "--lead-time", 1)
    monkeypatch.setattr(kvreg.core.units, "current_quarter", lambda today=None: "2026Q4")
    default = kv.json("plan", "rollup")
    assert default == kv.json("plan", "rollup", "--from", "2026Q4")
    assert default["quarters"] == list(HORIZON)
    want = {(r["gpu"], r["quarter"]): {k: r[k] for k in SCHEDULE_KEYS} for r in default["schedule"]}
    assert [want[(H100, q)]["gpus_to_buy"] for q in HORIZON] == [53, 1, 1, 0]
    assert [want[(H100, q)]["order_by"] for q in HORIZON] == ["2026Q3", "2026Q4", "2027Q1", None]
    assert [want[(H100, q)]["order_late"] for q in HORIZON] == [1, 0, 0, 0]
    assert [want[(H200, q)]["gpus_to_buy"] for q in HORIZON] == [3, 0, 0, 0]
    assert default["total"]["gpus_to_buy"] == 55 + 3 and default["total"]["orders_late"] == 1

    # The report (2026Q4, the default quarter): its horizon rows and totals.
    out = tmp_path / "reports"
    kv("report", "--out", out, "--format", "md,xlsx")
    data = json.loads((out / "2026-Q4" / "data.json").read_text())
    assert {(r["gpu"], r["quarter"]): {k: r[k] for k in SCHEDULE_KEYS} for r in data["horizon"]} == want
    assert data["schedule_totals"] == default["totals"] and data["schedule_total"] == default["total"]
    assert "| H100-SXM | 55 | 1,650,000.00 | 2026Q3 | 1 |" in (out / "2026-Q4" / "capacity.md").read_text()

    # The web page's schedule and totals.
    html = _InProcess(create_app(db_url)).get("/procurement").text
    shown = {(r["gpu"], r["quarter"]): r for r in _grid(html)}
    assert set(shown) == set(want)
    for key, row in want.items():
        assert shown[key]["gpus_to_buy"] == f"{row['gpus_to_buy']:,}"
        assert shown[key]["capex_to_buy"] == f"{row['capex_to_buy']:,.2f}"
        assert shown[key]["order_by"] == (row["order_by"] or "")
        assert shown[key]["order_late"] == ("yes" if row["order_late"] else "no")
    assert {r["gpu"]: r["gpus_to_buy"] for r in _grid(html, 1)} == {H100: "55", H200: "3", "total": "58"}

    # The workbook's Summary: the horizon's quarters in its per-quarter block, its 2026Q4 row as stored.
    book = out / "2026-Q4" / "capacity.xlsx"
    quarter, rows = _summary_rows(book)
    assert quarter == "2026Q4"
    for gpu in (H100, H200):
        assert {k: rows[gpu][k] or None for k in SCHEDULE_KEYS} == {k: v or None for k, v in want[(gpu, quarter)].items()}
    from libreoffice import recalculate, soffice

    if soffice() is None:
        pytest.skip("LibreOffice is not installed: the Summary's other quarters are not recalculated")
    from openpyxl import load_workbook

    picked = []
    wb = load_workbook(book)  # once: saving again only adds openpyxl's default outlineLevelCol="0"
    for q in HORIZON:
        wb["Summary"]["B1"].value = q
        picked.append(tmp_path / f"pick-{q}.xlsx")
        wb.save(picked[-1])
    for q, path in zip(HORIZON, recalculate(picked, tmp_path / "recalculated")):
        quarter, rows = _summary_rows(path)
        assert quarter == q
        for gpu in (H100, H200):
            got = {k: rows[gpu][k] if rows[gpu][k] not in ("", 0) else None for k in SCHEDULE_KEYS}
            assert got == {k: v or None for k, v in want[(gpu, q)].items()}, (gpu, q)
