"""Procurement (issue 16): the installed fleet, demand and fleet carried forward, GPUs to buy
declared once, the horizon, CSV import/export, apply/export of plans, demand and fleet, and the
solvers reading a saved plan.

The registry is the built-in catalog: six example plans with demand in 2026Q3 and 2026Q4. From
tests/test_plans.py, worked by hand there: H100-SXM needs 39 GPUs in 2026Q3 and 93 in 2026Q4
(chat 1 + docs 2 + mixed 2 + 70B 24 + Qwen3 64); H200 (the 8B long-context plan) needs 2 then 3.
Unit prices: H100-SXM 30,000 USD, H200 35,000 USD.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from kvreg.app.access import open_registry

H100, H200 = "H100-SXM", "H200"
H100_PRICE, H200_PRICE = 30_000, 35_000


def _by(rows, *keys):
    return {tuple(r[k] for k in keys): r for r in rows}


# ---------------------------------------------------------------- fleet and what to buy


def test_fleet_40_need_93_buy_53_and_a_quarter_with_spare(kv):
    kv("fleet", "set", H100, "2026Q3", 40)
    kv("fleet", "set", H200, "2026Q4", 10, "--reserved", 2, "--reserved-price", "3.5")
    r = _by(kv.json("plan", "rollup", "--from", "2026Q3", "--quarters", 2)["schedule"], "gpu", "quarter")
    # 2026Q3: 39 needed, 40 owned -> nothing to buy, 1 spare.
    q3 = r[(H100, "2026Q3")]
    assert (q3["gpus_needed"], q3["gpus_installed"], q3["gpus_to_buy"], q3["gpus_spare"]) == (39, 40, 0, 40 - 39)
    assert q3["capex_to_buy"] == 0
    # 2026Q4: the 40 carry forward; 93 needed -> buy 93 - 40 = 53, capex 53 x 30,000 = 1,590,000 USD.
    q4 = r[(H100, "2026Q4")]
    assert (q4["gpus_needed"], q4["gpus_installed"], q4["gpus_to_buy"], q4["gpus_spare"]) == (93, 40, 93 - 40, 0)
    assert q4["capex_to_buy"] == pytest.approx(53 * H100_PRICE) == 1_590_000
    assert (q4["previous_quarter_gpus_needed"], q4["gpus_needed_quarter_change"]) == (39, 93 - 39)
    # H200 in 2026Q3: no fleet yet, 2 needed -> buy 2 (70,000 USD); in 2026Q4: 10 owned + 2 reserved
    # = 12 installed, 3 needed -> 9 spare, nothing more to buy (the 2 bought in 2026Q3 stay); reserved cost 2 x 3.5 x 730 = 5,110 USD a month.
    assert (r[(H200, "2026Q3")]["gpus_to_buy"], r[(H200, "2026Q3")]["capex_to_buy"]) == (2, 2 * H200_PRICE)
    h200 = r[(H200, "2026Q4")]
    assert (h200["gpus_installed"], h200["gpus_to_buy"], h200["gpus_spare"]) == (10 + 2, 0, 12 - 3)
    assert h200["reserved_cost_per_month"] == pytest.approx(2 * 3.5 * 730)
    # The table's columns lead with the purchase.
    head = kv("plan", "rollup", "--quarter", "2026Q4").stdout.splitlines()[0].split()
    assert head[:4] == ["gpu", "quarter", "gpus_to_buy", "capex_to_buy"]


def test_fleet_set_list_remove_and_carry_forward(kv):
    assert kv("fleet", "set", H100, "2026q4", 64).stdout == "added fleet of H100-SXM from 2026Q4: 64 owned\n"
    assert kv("fleet", "set", H100, "2026Q4", 72).stdout.startswith("changed fleet of H100-SXM from 2026Q4: 72")
    kv("fleet", "set", H100, "2027Q2", 100)
    rows = kv.json("fleet", "list", "--quarter", "2027Q1")
    assert [(r["gpu"], r["quarter"], r["gpus_owned"], r["carried_from"]) for r in rows] == [
        (H100, "2027Q1", 72, "2026Q4")]
    assert kv.json("fleet", "list", "--quarter", "2026Q3") == []
    assert [r["gpus_owned"] for r in kv.json("fleet", "list", "--quarter", "2027Q2")] == [100]
    kv("fleet", "remove", H100, "2027Q2")
    assert [(r["gpus_owned"], r["carried_from"]) for r in kv.json("fleet", "list", "--quarter", "2028Q1")] == [
        (72, "2026Q4")]
    bad = kv("fleet", "remove", H100, "2027Q2", ok=False)
    assert bad.exit_code == 1 and "H100-SXM has no fleet entry in 2027Q2" in bad.output
    for args, why in [((H100, "2026Q4", "-1"), "gpus_owned must be at least 0"),
                      (("NoSuchGPU", "2026Q4", "1"), "NoSuchGPU"),
                      ((H100, "2026Q5", "1"), "no quarter 5"),
                      ((H100, "2026Q4", "1", "--reserved-price", "-2"), "at least 0")]:
        r = kv("fleet", "set", *args, ok=False)
        assert r.exit_code == 1 and why in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_a_gpu_with_fleet_is_not_removed_silently(kv):
    kv("fleet", "set", "L40S", "2026Q4", 4)
    bad = kv("gpu", "remove", "L40S", ok=False)
    assert bad.exit_code == 1 and "fleet" in bad.output


# ---------------------------------------------------------------- demand carries forward


def test_demand_carries_forward_over_three_quarters_until_an_explicit_0(kv):
    # chat-llama3-8b: 250 users in 2026Q4 (catalog). No entry in 2027Q1 or 2027Q2: 250 carry.
    # 0 in 2027Q3 ends it: from then on the plan has no demand, until a new entry.
    kv("demand", "set", "chat-llama3-8b", "2027Q3", 0)
    seen = {}
    for q in ("2027Q1", "2027Q2", "2027Q3", "2027Q4"):
        rows = {r["plan"]: r for r in kv.json("demand", "list", "--quarter", q)}
        seen[q] = rows.get("chat-llama3-8b")
    assert (seen["2027Q1"]["users"], seen["2027Q1"]["carried_from"], seen["2027Q1"]["quarter"]) == (
        250, "2026Q4", "2027Q1")
    assert (seen["2027Q2"]["users"], seen["2027Q2"]["carried_from"]) == (250, "2026Q4")
    assert (seen["2027Q3"]["users"], seen["2027Q3"]["carried_from"], seen["2027Q3"]["gpus_needed"]) == (0, None, 0)
    assert seen["2027Q4"] is None  # ended: not carried as a plan with 0 users
    # The rollup over the horizon: H100 needs 93 while chat's one GPU carries, 92 once it ends
    # (250 users / 268.85 per replica = 1 replica = 1 GPU); every other plan carries its 2026Q4 demand.
    horizon = _by(kv.json("plan", "rollup", "--from", "2026Q4", "--quarters", 4)["schedule"], "gpu", "quarter")
    assert [horizon[(H100, q)]["gpus_needed"] for q in ("2026Q4", "2027Q1", "2027Q2", "2027Q3")] == [93, 93, 93, 92]
    assert [horizon[(H100, q)]["plans"] for q in ("2026Q4", "2027Q1", "2027Q2", "2027Q3")] == [5, 5, 5, 4]
    assert horizon[(H100, "2027Q3")]["gpus_needed_quarter_change"] == -1
    # The table: quarters side by side. GPUs bought stay bought: the 93 bought in 2026Q4 (no fleet) serve
    # the later quarters, so nothing more is bought and the row adds up to the 93 the horizon buys.
    out = kv("plan", "rollup", "--from", "2026Q4", "--quarters", 4).stdout.splitlines()
    assert out[0].split() == ["gpu", "figure", "2026Q4", "2027Q1", "2027Q2", "2027Q3"]
    to_buy = next(line for line in out if line.startswith(H100) and "gpus_to_buy" in line).split()
    assert to_buy == [H100, "gpus_to_buy", "93", "0", "0", "0"]


def test_a_new_quarter_no_longer_makes_demand_vanish(kv):
    """The issue's bug: one plan with a new quarter made the rollup show gpus_change -91."""
    kv("demand", "set", "chat-llama3-8b", "2027Q1", 300)
    q1 = _by(kv.json("plan", "rollup", "--from", "2026Q4")["schedule"], "gpu", "quarter")[(H100, "2027Q1")]
    # chat: 300 / 268.85 -> 2 replicas = 2 GPUs; the rest carry: 93 - 1 + 2 = 94.
    assert (q1["gpus_needed"], q1["gpus_needed_quarter_change"]) == (93 - 1 + 2, 1)


# ---------------------------------------------------------------- CSV import and export


def _demand_csv(n: int, bad_line: int | None = None) -> str:
    plans = ["chat-llama3-8b", "docs-llama3-8b", "mixed-llama3-8b", "longctx-llama31-70b"]
    lines = ["plan,quarter,users"]
    for i in range(n):
        year, q = 2027 + i // 4 // len(plans), (i // len(plans)) % 4 + 1
        users = "12x" if bad_line == i + 2 else str(10 + i % 90)
        lines.append(f"{plans[i % len(plans)]},{year}Q{q},{users}")
    return "\n".join(lines) + "\n"


def test_csv_import_of_1000_rows_with_one_bad_row_writes_nothing(kv, state, tmp_path):
    path = tmp_path / "demand.csv"
    path.write_text(_demand_csv(1000, bad_line=731))
    kv("plan", "list")  # the registry exists (and is seeded) before the fingerprint
    before = state()
    r = kv("demand", "import", path, ok=False)
    assert r.exit_code == 1
    assert r.output == "Error: demand.csv line 731: users must be a whole number, not '12x'\n"
    assert state() == before
    # The same file without the bad row: 1,000 rows in one go, then the same file changes nothing.
    path.write_text(_demand_csv(1000))
    dry = kv("demand", "import", path, "--dry-run")
    assert dry.stdout.splitlines()[-1] == ("would set 1000 rows of demand.csv: 1000 added, 0 changed, 0 unchanged "
                                           "(dry run: nothing written)")
    assert state() == before
    assert kv("demand", "import", path).stdout.splitlines()[-1] == (
        "set 1000 rows of demand.csv: 1000 added, 0 changed, 0 unchanged")
    assert len(kv.json("demand", "list")) == 12 + 1000
    assert kv("demand", "import", path).stdout.splitlines()[-1].endswith("0 added, 0 changed, 1000 unchanged")


def test_csv_diff_names_old_and_new_values_and_export_round_trips(kv, tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("quarter,plan,users\n2026Q4,chat-llama3-8b,275\n2027Q1,docs-llama3-8b,70\n2026Q3,docs-llama3-8b,31\n")
    diff = kv.json("demand", "import", path, "--dry-run")
    assert [(d["line"], d["action"], d["old_users"], d["users"]) for d in diff] == [
        (2, "changed", 250, 275), (3, "added", None, 70), (4, "unchanged", 31, 31)]
    kv("demand", "import", path)
    exported = kv("demand", "export").stdout
    assert exported.splitlines()[0] == "plan,quarter,users"
    assert "chat-llama3-8b,2026Q4,275" in exported and "docs-llama3-8b,2027Q1,70" in exported
    assert len(exported.splitlines()) == 1 + 13
    (tmp_path / "again.csv").write_text(exported)
    assert kv("demand", "import", tmp_path / "again.csv").stdout.splitlines()[-1].endswith(
        "0 added, 0 changed, 13 unchanged")


@pytest.mark.parametrize("body, message", [
    ("plan,users\nchat-llama3-8b,3\n", "line 1: the header must name plan,quarter,users; missing quarter"),
    ("plan,quarter,users,extra\n", "line 1: the header must name plan,quarter,users; unknown column extra"),
    ("plan,quarter,users\nnope,2026Q4,3\n", "line 2: no plan named 'nope'"),
    ("plan,quarter,users\nchat-llama3-8b,2026Q9,3\n", "line 2: quarter '2026Q9' has no quarter 9"),
    ("plan,quarter,users\nchat-llama3-8b,2026Q4,3\nchat-llama3-8b,2026q4,4\n",
     "line 3: chat-llama3-8b 2026Q4 is already set on line 2"),
    ("plan,quarter,users\nchat-llama3-8b,2026Q4\n", "line 2: 2 fields where the header has 3"),
])
def test_csv_errors_name_the_line(kv, state, tmp_path, body, message):
    path = tmp_path / "demand.csv"
    path.write_text(body)
    kv("plan", "list")
    before = state()
    r = kv("demand", "import", path, ok=False)
    assert r.exit_code == 1 and r.output.startswith(f"Error: demand.csv {message}") and r.output.count("\n") == 1
    assert state() == before


def test_fleet_csv_import_and_export(kv, tmp_path):
    path = tmp_path / "fleet.csv"
    path.write_text("gpu,quarter,gpus_owned,gpus_reserved,reserved_price_per_hour\nH100-SXM,2026Q3,40,,\n"
                    "H200,2026Q4,10,2,3.5\n")
    kv("fleet", "import", path)
    assert kv("fleet", "export").stdout == (
        "gpu,quarter,gpus_owned,gpus_reserved,reserved_price_per_hour\nH100-SXM,2026Q3,40,0,\nH200,2026Q4,10,2,3.5\n")
    path.write_text("gpu,quarter,gpus_owned\nH100-SXM,2026Q4,64\nB999,2026Q4,1\n")
    r = kv("fleet", "import", path, ok=False)
    assert r.exit_code == 1 and r.output.startswith("Error: fleet.csv line 3: ")
    assert len(kv.json("fleet", "list")) == 2


# ---------------------------------------------------------------- apply / export


def test_export_apply_cover_plans_demand_and_fleet(kv, tmp_path):
    from conftest import Kvreg

    kv("fleet", "set", H100, "2026Q4", 64, "--reserved", 8, "--reserved-price", 2)
    exported = kv("export").stdout
    assert "[[plan]]\nname = \"mixed-llama3-8b\"" in exported
    assert 'workload = [{ name = "chat", avg_tokens = 1500, share = 0.8 }' in exported
    assert "[[demand]]\nplan = \"chat-llama3-8b\"\nquarter = \"2026Q3\"\nusers = 100\n" in exported
    assert ("[[fleet]]\ngpu = \"H100-SXM\"\nquarter = \"2026Q4\"\ngpus_owned = 64\ngpus_reserved = 8\n"
            "reserved_price_per_hour = 2.0\n") in exported
    # Into another registry: the fleet is new there, everything else came with the catalog.
    other = Kvreg(f"sqlite:///{tmp_path / 'other.db'}")
    path = tmp_path / "registry.toml"
    path.write_text(exported)
    out = other("apply", path).stdout.splitlines()
    assert "+ fleet H100-SXM 2026Q4" in out and "plan: 0 added, 0 changed, 6 unchanged" in out
    assert other("export").stdout == exported
    # A changed demand and workload share, a plan left out and --prune.
    changed = (exported.replace("users = 250", "users = 260").replace("share = 0.8", "share = 0.75")
               .replace('"longctx-qwen3-235b"', '"longctx-qwen3-235b-renamed"'))
    path.write_text(changed)
    dry = other("apply", path, "--dry-run", "--prune").stdout.splitlines()
    assert "~ demand chat-llama3-8b 2026Q4" in dry and "    users: 250 -> 260" in dry
    assert "~ plan mixed-llama3-8b" in dry
    assert "+ plan longctx-qwen3-235b-renamed" in dry and "- plan longctx-qwen3-235b" in dry
    assert dry[-1] == "dry run: nothing written"
    assert other("export").stdout == exported
    other("apply", path, "--prune")
    assert other("apply", path, "--prune").stdout.splitlines()[-1] == "nothing to do: the registry matches"
    assert "longctx-qwen3-235b\"" not in other("export").stdout
    bad = changed.replace("users = 260", "users = -1")
    path.write_text(bad)
    r = other("apply", path, ok=False)
    assert r.exit_code == 1 and "[[demand]] #" in r.output and "users must be at least 0" in r.output


def test_a_plans_engine_release_and_measured_memory_go_through_export_and_apply(kv, tmp_path):
    """A plan's --engine-version, --non-torch-memory and --weights-memory are its own settings (`plan calibrate --log`
    sets them too): `kvreg export` writes them, and `kvreg apply` of that file, with another field edited, keeps
    them. Before, export left them out and apply of the edited file set all three back to NULL, and SGLang's
    memory share with them (it follows the release)."""
    from conftest import Kvreg

    kv("plan", "add", "sg", "--model", "Llama-3.1-8B", "--gpu", H100, "--rule", "sglang", "--engine-version", "0.5.2",
       "--gpus-per-node", 8, "--non-torch-memory", "0.5GiB", "--weights-memory", "15GiB")
    exported = kv("export").stdout
    block = exported.split('name = "sg"\n')[1].split("\n\n")[0]
    # 0.5 GiB = 536,870,912 B; 15 GiB = 16,106,127,360 B
    assert ('rule = "sglang"\nengine_version = "0.5.2"\nnon_torch_bytes = 536870912\n'
            'weights_measured_bytes = 16106127360\nnotes = ""') in block
    path = tmp_path / "registry.toml"
    path.write_text(exported.replace('name = "sg"\n' + block, 'name = "sg"\n' + block.replace("reserve = 0.12", "reserve = 0.15")))
    assert "    reserve: 0.12 -> 0.15" in kv("apply", path).stdout.splitlines()
    kept = kv.json("plan", "show", "sg")[0]
    assert (kept["engine_version"], kept["non_torch_bytes"], kept["weights_measured_bytes"], kept["reserve"]) == \
        ("0.5.2", 536870912, 16106127360, 0.15)
    # SGLang v0.4.9-v0.5.2 on an H100 at TP 1 (test_engine_rules): (80 GiB - (9.5 + 1 / 2) GiB) / 80 GiB = 0.875,
    # as SGLang rounds it: 0.874 (81,559 MiB reported)
    assert kept["mem_fraction_static_used"] == 0.874
    other = Kvreg(f"sqlite:///{tmp_path / 'other.db'}")
    other("apply", path)
    assert other("export").stdout == kv("export").stdout


def test_a_plan_file_has_a_key_for_every_setting_a_plan_stores():
    """Every deployment and latency-workload input a plan stores is a [[plan]] key (an input declared later
    becomes one with no edit), but engine_release, derived from engine_version, and concurrency, which a plan
    does not take."""
    from kvreg.db.columns import columns_of
    from kvreg.db.read import PLAN_KEYS
    from kvreg.figures.inputs import inputs_of

    stored = set(columns_of("plan")) & {*inputs_of("deployment"), *inputs_of("workload")}
    assert stored - set(PLAN_KEYS) == {"engine_release", "concurrency"}
    assert len(PLAN_KEYS) == len(set(PLAN_KEYS)) == 34


# ---------------------------------------------------------------- solvers take a plan


def test_solvers_take_a_plan_and_its_demand(kv):
    by_options = kv.json("plan", "solve", "gpus", "--model", "Llama-3.1-70B", "--gpu", H100, "--tp", "4",
                         "--users", 20, "--context", "128K")[0]
    by_plan = kv.json("plan", "solve", "gpus", "--plan", "longctx-llama31-70b", "--quarter", "2026Q4")[0]
    # The plan is Llama-3.1-70B on H100 at TP4 with 20 users in 2026Q4: the same answer, 24 GPUs.
    assert by_plan["gpus_needed"] == by_options["gpus_needed"] == 24
    assert (by_plan["tp"], by_plan["users"]) == (4, 20)
    carried = kv.json("plan", "solve", "gpus", "--plan", "longctx-llama31-70b", "--quarter", "2027Q2")[0]
    assert carried["users"] == 20  # carried from 2026Q4
    override = kv.json("plan", "solve", "gpus", "--plan", "longctx-llama31-70b", "--users", 8)[0]
    assert (override["users"], override["gpus_needed"]) == (8, 12)  # 2026Q3's 8 users need 12 GPUs (test_plans)
    ctx = kv.json("plan", "solve", "context", "--plan", "longctx-llama31-70b", "--quarter", "2026Q4",
                  "--gpus", 24)[0]
    assert ctx["users"] == 20 and ctx["context_tokens"] >= 131072
    r = kv("plan", "solve", "gpus", "--plan", "longctx-llama31-70b", ok=False)
    assert r.exit_code == 1 and "give --users N or --quarter Q" in r.output
    r = kv("plan", "solve", "gpus", "--plan", "longctx-llama31-70b", "--quarter", "2020Q1", ok=False)
    assert r.exit_code == 1 and "has no demand in 2020Q1" in r.output
    r = kv("plan", "solve", "reserve", "--plan", "longctx-llama31-70b", "--quarter", "2026Q4", "--format", "json")
    assert '"quarter": "2026Q4"' in r.stdout


# ---------------------------------------------------------------- migration with data


def test_fleet_migration_with_data_up_and_down(empty_db_url):
    """0004 adds the fleet table to a registry with plans and demand, which come through; the views
    then count every GPU needed as to buy. Down to 0003 drops the fleet and keeps every other row."""
    import test_migration_data as md

    url = empty_db_url
    md.alembic(url, "upgrade", "0003")
    md.alembic(url, "upgrade", "head")
    eng = open_registry(url)  # seeds the catalog: plans and demand
    try:
        with eng.begin() as conn:
            from kvreg.app.fleet import set_fleet

            set_fleet(conn, H100, "2026Q3", 40)
            open_rows = {t: conn.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar_one()
                         for t in ("plan", "demand", "workload_class", "fleet")}
    finally:
        eng.dispose()
    assert open_rows["fleet"] == 1
    before = md.dump(url)
    md.alembic(url, "downgrade", "0003")
    assert md.revision_of(url) == "0003"
    at_0003 = md.dump(url)

    def as_0003(dump):  # the columns 0003 has (later revisions add model and GPU columns, dropped on the way down)
        return {t: [{k: r[k] for k in (at_0003[t][0] if at_0003[t] else r)} for r in rows]
                for t, rows in dump.items() if t in at_0003}

    # every row of the tables 0003 has, the catalog's notes as they were before 0022 rewrote them
    assert at_0003 == as_0003(md.held_at("0003", before))
    md.alembic(url, "upgrade", "head")
    assert as_0003(md.dump(url)) == as_0003(before)
    eng = open_registry(url)
    try:
        with eng.connect() as conn:
            rows = {(r["gpu"], r["quarter"]): dict(r) for r in conn.execute(text("SELECT * FROM procurement")).mappings()}
            assert conn.execute(text("SELECT COUNT(*) FROM fleet")).scalar_one() == 0
            assert conn.execute(text("SELECT COUNT(*) FROM demand")).scalar_one() == open_rows["demand"]
    finally:
        eng.dispose()
    # No fleet: 39 bought in 2026Q3 stay bought, 93 - 39 = 54 more in 2026Q4 (the purchase schedule).
    assert (rows[(H100, "2026Q4")]["gpus_installed"], rows[(H100, "2026Q4")]["gpus_to_buy"]) == (0, 93 - 39)


# ---------------------------------------------------------------- one declaration, two targets


def test_a_gpu_type_without_an_hourly_price_costs_an_unknown_amount_not_0(kv):
    """The M3 Ultra has a unit price in the catalog but no price per hour: a plan on it costs a blank per month
    (plan show), and so does its GPU type in the procurement rollup, which the report's Total then names as left
    out, where the rollup used to add up blanks to 0.00."""
    from kvreg.report.gather import procurement_total

    kv("plan", "add", "mac", "--model", "Qwen2.5-7B", "--gpu", "M3-Ultra", "--gpus-per-node", "1", "--context", "32K",
       "--avg-tokens", "4000")
    kv("demand", "set", "mac", "2026Q4", 300)
    assert kv.json("plan", "show", "mac")[0]["cost_per_month"] is None
    rows = {r["gpu"]: r for r in kv.json("plan", "rollup", "--quarter", "2026Q4")["schedule"]}
    assert rows["M3-Ultra"]["gpus_needed"] > 0 and rows["M3-Ultra"]["cost_per_month"] is None
    assert rows["H100-SXM"]["cost_per_month"] == pytest.approx(rows["H100-SXM"]["gpus_needed"] * 2.5 * 730)
    total = procurement_total(list(rows.values()))
    assert total["unknown"]["cost_per_month"] == ["M3-Ultra"]


def test_an_aggregate_compiles_to_sql_and_to_excel_from_one_declaration():
    """Table-driven: each aggregate's SQL (in the procurement view) and its Excel formula (the
    workbook's Summary) come from the same declaration; the LibreOffice test in test_xlsx.py checks
    that they give equal numbers."""
    from kvreg.figures.aggregates import aggregate_excel, aggregate_sql, in_force_sql, quarters_sql, running_excel

    def excel(name):
        return aggregate_excel(name, demand=lambda c: f"D!{c}", fleet=lambda c: f"F!{c}",
                               gpu_criterion=lambda rng: f'{rng},"="&A6', cell_of=lambda n: f"{n.upper()}6")

    assert excel("gpus_short") == "=MAX(0,(GPUS_NEEDED6 - GPUS_INSTALLED6))"
    assert excel("gpus_to_buy") == "=(GPUS_BOUGHT6 - PREVIOUS_GPUS_BOUGHT6)"
    # The running largest shortfall: over a per-quarter block of gpus_short, up to the quarter (before it).
    assert running_excel("gpus_bought", "B20:B23", "A20:A23", "$B$3") == (
        "=SUMPRODUCT(MAX(((LEFT(A20:A23,4)*4+RIGHT(A20:A23,1)-1)<=$B$3)*B20:B23))")
    assert running_excel("previous_gpus_bought", "B20:B23", "A20:A23", "$B$3") == (
        "=SUMPRODUCT(MAX(((LEFT(A20:A23,4)*4+RIGHT(A20:A23,1)-1)<$B$3)*B20:B23))")
    # A GPU without a unit_price: blank, as NULL in SQL (never 0).
    assert excel("capex_to_buy") == '=IF(UNIT_PRICE6="","",(GPUS_TO_BUY6 * UNIT_PRICE6))'
    # A GPU without a price_per_hour: its rental cost is blank too, not a SUMIFS of blank cells (0).
    assert excel("cost_per_month") == ('=IF(PRICE_PER_HOUR6="","",SUMIFS(D!cost_per_month,D!gpu,"="&A6,'
                                       'D!in_force,1))')
    # A plan serves no user when it does not fit, or when no replica meets its latency target with one request.
    assert excel("plans_not_fitting") == '=COUNTIFS(D!gpu,"="&A6,D!in_force,1,D!users,">0",D!users_per_replica,0)'
    assert excel("previous_quarter_gpus_needed") == (
        '=SUMIFS(D!gpus_needed,D!gpu,"="&A6,D!previous_quarter_in_force,1)')
    assert excel("gpus_owned") == '=SUMIFS(F!gpus_owned,F!gpu,"="&A6,F!in_force,1)'
    sql = aggregate_sql(quarters_sql(["2026Q4"]))
    this, before = in_force_sql("d", "ax.quarter_index"), in_force_sql("d", "ax.quarter_index - 1")
    assert f"SUM(CASE WHEN {this} AND d.users > 0 AND d.users_per_replica = 0 THEN 1 ELSE 0 END) AS plans_not_fitting" in sql
    assert f"COALESCE(SUM(CASE WHEN {before} THEN d.gpus_needed END), 0) AS previous_quarter_gpus_needed" in sql
    assert ("(CASE WHEN (src.gpus_needed - src.gpus_installed) IS NULL OR 0 >= (src.gpus_needed - src.gpus_installed)"
            " THEN 0 ELSE (src.gpus_needed - src.gpus_installed) END) AS gpus_short") in sql
    assert ("MAX(src.gpus_short) OVER (PARTITION BY src.gpu ORDER BY src.quarter_index ROWS BETWEEN UNBOUNDED"
            " PRECEDING AND CURRENT ROW) AS gpus_bought") in sql
