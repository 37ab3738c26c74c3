"""`kvreg plan optimize` (issue 43, part 2): the cheapest fleet as a mixed-integer program.

The optimizer equals brute force (every assignment of settings to plans enumerated, each with the
purchases it needs) on small instances; budgets and lead times bind in cases checked by hand; bad
input and infeasible demand get one line. Registry: the built-in catalog (tests/test_plans.py works
its plans by hand). Capacities are the views'; the hand checks below quote them.
"""

from __future__ import annotations

import itertools

import pytest

from kvreg.app.access import open_registry
from kvreg.app.optimize import MONTHS_PER_QUARTER, build_program, optimize
from kvreg.figures.declarations import HOURS_PER_MONTH

H100, H200 = "H100-SXM", "H200"
H200_PRICE, H200_HOUR = 35_000, 3.5
QUARTER_HOURS = HOURS_PER_MONTH * MONTHS_PER_QUARTER  # 730 h x 3


def _only(kv, *plans):
    """Keep the demand of these plans only (every other plan's entries removed)."""
    for d in kv.json("demand", "list"):
        if d["plan"] not in plans:
            kv("demand", "remove", d["plan"], d["quarter"])


def _brute_force(program) -> float:
    """The cheapest cost over every assignment of one candidate per plan: each GPU type buys the
    largest shortfall so far in each quarter (no budget, no lead time), in whole units."""
    plans = sorted(program.cands)
    columns = {p: [ci for (q, ci) in program.x if q == p] for p in plans}
    best = None
    for choice in itertools.product(*(columns[p] for p in plans)):
        cost = sum(program.run_cost(p, ci) for p, ci in zip(plans, choice))
        for g in program.gpus:
            bought = 0
            for qi, q in enumerate(program.axis):
                used = sum(program.need[(p, ci)][qi] for p, ci in zip(plans, choice)
                           if program.cands[p][ci]["gpu"] == g)
                short = max(0, used - program.installed.get((g, q), 0))
                unit = program.unit(g)
                bought = max(bought, -(-short // unit) * unit)
            cost += bought // program.unit(g) * program.buy_cost(g)
        best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("whole_nodes", [False, True])
def test_the_optimum_equals_brute_force(kv, db_url, whole_nodes):
    _only(kv, "longctx-llama31-8b-h200", "docs-llama3-8b", "longctx-llama31-70b")
    kv("fleet", "set", H100, "2026Q3", 10)
    eng = open_registry(db_url)
    try:
        with eng.connect() as conn:
            program = build_program(conn, "2026Q3", 3, allow_gpus=f"{H100},{H200}", allow_kv_dtypes="bf16,fp8",
                                    whole_nodes=whole_nodes)
            n = 1
            for p in program.cands:
                n *= len([1 for (q, _ci) in program.x if q == p])
            assert n >= 100  # a real search: every plan has several settings
            result = optimize(conn, "2026Q3", 3, allow_gpus=f"{H100},{H200}", allow_kv_dtypes="bf16,fp8",
                              whole_nodes=whole_nodes)
            assert result["status"] == "optimal" and result["gap"] == 0
            assert result["optimal_cost"] == pytest.approx(_brute_force(program))
            assert result["current_cost"] >= result["optimal_cost"]
            assert result["saving"] == pytest.approx(result["current_cost"] - result["optimal_cost"])
    finally:
        eng.dispose()


def test_today_plans_cost_is_the_schedule_worked_by_hand(kv):
    """One plan, its own setting only (it is already the cheapest): the 8B long-context plan on H200
    at TP 1 serves 6.82 users a GPU (the views), so 8 users need 2 GPUs in 2026Q3 and 20 need 3 in
    2026Q4. Bought: 2, then 1 more. Cost: 3 x 35,000 capex + (2 + 3) GPUs x 3.5 USD x 2,190 h."""
    _only(kv, "longctx-llama31-8b-h200")
    out = kv.json("plan", "optimize", "--from", "2026Q3", "--quarters", 2)
    assert out["purchases"] == [
        {"gpu": H200, "quarter": "2026Q3", "gpus_to_buy": 2, "capex_to_buy": 2 * H200_PRICE, "order_by": "2026Q3"},
        {"gpu": H200, "quarter": "2026Q4", "gpus_to_buy": 1, "capex_to_buy": 1 * H200_PRICE, "order_by": "2026Q4"}]
    cost = 3 * H200_PRICE + (2 + 3) * H200_HOUR * QUARTER_HOURS
    assert out["optimal_cost"] == pytest.approx(cost) == 143_325
    assert out["current_cost"] == pytest.approx(cost) and out["saving"] == pytest.approx(0)
    assert [(p["plan"], p["gpu"], p["tp"], p["kv_dtype"]) for p in out["plans"]] == [
        ("longctx-llama31-8b-h200", H200, 1, "bf16")]
    # A residual value of 40%: the capex counts 60%.
    low = kv.json("plan", "optimize", "--from", "2026Q3", "--quarters", 2, "--residual", "0.4")
    assert low["optimal_cost"] == pytest.approx(3 * H200_PRICE * 0.6 + (2 + 3) * H200_HOUR * QUARTER_HOURS)


def test_a_budget_buys_ahead_and_then_cannot_serve(kv):
    """40 users in 2026Q4 need 6 GPUs (ceil(40 / 6.82) = 6 replicas of 1). With 105,000 USD a quarter
    (3 H200s) the 2 of 2026Q3 and 4 more of 2026Q4 do not fit in 2026Q4's budget: the optimum buys 3
    in 2026Q3 (one ahead of need) and 3 in 2026Q4. With 70,000 (2 a quarter) 4 is the most: infeasible."""
    _only(kv, "longctx-llama31-8b-h200")
    kv("demand", "set", "longctx-llama31-8b-h200", "2026Q4", 40)
    free = kv.json("plan", "optimize", "--from", "2026Q3", "--quarters", 2)
    assert [(r["quarter"], r["gpus_to_buy"]) for r in free["purchases"]] == [("2026Q3", 2), ("2026Q4", 4)]
    tight = kv.json("plan", "optimize", "--from", "2026Q3", "--quarters", 2, "--budget", 3 * H200_PRICE)
    assert [(r["quarter"], r["gpus_to_buy"]) for r in tight["purchases"]] == [("2026Q3", 3), ("2026Q4", 3)]
    assert tight["optimal_cost"] == pytest.approx(6 * H200_PRICE + (2 + 6) * H200_HOUR * QUARTER_HOURS)
    kv("gpu", "show", H200)
    bad = kv("plan", "optimize", "--from", "2026Q3", "--quarters", 2, "--budget", 2 * H200_PRICE, ok=False)
    assert bad.exit_code == 1 and len(bad.output.strip().splitlines()) == 1
    assert bad.output.strip() == (
        "Error: plan longctx-llama31-8b-h200 cannot be served in 2026Q4: no purchase lands by then within the lead "
        "times and the budget (raise --budget, allow other GPUs, or start the horizon later)")


def test_the_plan_that_cannot_be_served_is_the_one_named(kv):
    """Two plans on L4s (lead time 0) and one on H200s, whose purchases take 2 quarters, all with demand in the
    horizon's first quarter: only the H200 plan cannot be served, so only it is named (the message used to name the
    first plans whose demand grew, here the L4 ones). Removing its demand makes the program feasible."""
    _only(kv)
    for name, gpu in (("l4-a", "L4"), ("l4-b", "L4"), ("h2", H200)):
        kv("plan", "add", name, "--model", "Llama-3.1-8B", "--gpu", gpu, "--gpus-per-node", "1", "--context", "8K")
        kv("demand", "set", name, "2026Q4", 20)
    kv("gpu", "set", H200, "--lead-time", 2)
    bad = kv("plan", "optimize", "--from", "2026Q4", "--quarters", 1, ok=False)
    assert bad.output.strip() == (
        "Error: plan h2 cannot be served in 2026Q4: no purchase lands by then within the lead times (raise --budget,"
        " allow other GPUs, or start the horizon later)")
    kv("demand", "remove", "h2", "2026Q4")
    assert kv.json("plan", "optimize", "--from", "2026Q4", "--quarters", 1)["status"] == "optimal"


def test_a_lead_time_moves_the_purchase_to_another_gpu(kv):
    """H200 with a lead time of 1 quarter cannot land GPUs in the horizon's first quarter (2026Q3).
    Allowed H100s (lead time 0) serve 2026Q3; from 2026Q4 the cheaper setting may use H200 again,
    ordered in 2026Q3. Without any allowed GPU that lands in time the demand cannot be served."""
    _only(kv, "longctx-llama31-8b-h200")
    kv("gpu", "set", H200, "--lead-time", 1)
    bad = kv("plan", "optimize", "--from", "2026Q3", "--quarters", 2, ok=False)
    assert bad.exit_code == 1 and "cannot be served in 2026Q3" in bad.output
    out = kv.json("plan", "optimize", "--from", "2026Q3", "--quarters", 2, "--allow-gpus", f"{H100},{H200}")
    assert out["status"] == "optimal"
    assert all(not (r["gpu"] == H200 and r["quarter"] == "2026Q3") for r in out["purchases"])
    assert out["plans"][0]["gpu"] == H100 and out["current_cost"] is None  # today's setting cannot land in time


def test_apply_writes_the_chosen_settings_and_dry_run_writes_nothing(kv):
    _only(kv, "docs-llama3-8b")
    before = kv.json("plan", "show", "docs-llama3-8b")[0]
    dry = kv.json("plan", "optimize", "--from", "2026Q4", "--quarters", 1, "--allow-kv-dtypes", "bf16,fp8")
    assert dry["applied"] is None and kv.json("plan", "show", "docs-llama3-8b")[0] == before
    chosen = dry["plans"][0]
    assert chosen["changed"] and chosen["kv_dtype"] == "fp8"  # fp8 halves the KV: 60 users on 1 GPU, not 2
    out = kv.json("plan", "optimize", "--from", "2026Q4", "--quarters", 1, "--allow-kv-dtypes", "bf16,fp8", "--apply")
    assert out["applied"] == ["docs-llama3-8b"]
    after = kv.json("plan", "show", "docs-llama3-8b")[0]
    assert (after["gpu"], after["tp"], after["kv_dtype"]) == (chosen["gpu"], chosen["tp"], "fp8")


@pytest.mark.parametrize("args, why", [
    (("--allow-gpus", "NoSuchGPU"), "unknown gpu 'NoSuchGPU'"),
    (("--allow-kv-dtypes", "fp9"), "unknown KV dtype 'fp9'"),
    (("--residual", "1.5"), "--residual is the share"),
    (("--budget", "-1"), "--budget must be"),
    (("--quarters", "0"), "--quarters must be a whole number"),
])
def test_bad_input_is_one_line(kv, args, why):
    kv("gpu", "show", H100)
    r = kv("plan", "optimize", "--from", "2026Q4", *args, ok=False)
    assert r.exit_code == 1 and why in r.output and len(r.output.strip().splitlines()) == 1, r.output


# --------------------------------------------------------------------------- what a plan allows


def test_a_plan_stores_what_the_optimizer_may_change(kv):
    """docs-llama3-8b (H100-SXM, bf16, 60 users in 2026Q4) needs 2 GPUs in bf16 and 1 in fp8, which halves
    its KV (test_apply_writes_the_chosen_settings_and_dry_run_writes_nothing). By default the optimizer
    keeps its GPU type and KV dtype (TP free): 2 GPUs. Allowed fp8 on the plan itself, with no option
    on the run, it picks fp8, as a run with --allow-kv-dtypes bf16,fp8 does."""
    _only(kv, "docs-llama3-8b")
    own = kv.json("plan", "optimize", "--from", "2026Q4", "--quarters", 1)["plans"][0]
    assert (own["gpu"], own["kv_dtype"], own["changed"], own["gpus_in_last_quarter"]) == (H100, "bf16", False, 2)
    kv("plan", "set", "docs-llama3-8b", "--allow-gpus", f"{H200}, {H100},{H200}", "--allow-kv-dtypes", "fp8")
    shown = kv.json("plan", "show", "docs-llama3-8b")[0]
    # each name once, in the order given, as the registry spells it; the plan's own settings untouched
    assert (shown["allow_gpus"], shown["allow_kv_dtypes"]) == (f"{H200},{H100}", "fp8")
    assert (shown["gpu"], shown["kv_dtype"]) == (H100, "bf16")
    stored = kv.json("plan", "optimize", "--from", "2026Q4", "--quarters", 1)
    given = kv.json("plan", "optimize", "--from", "2026Q4", "--quarters", 1, "--allow-kv-dtypes", "bf16,fp8",
                    "--allow-gpus", f"{H100},{H200}")
    assert stored["plans"][0]["kv_dtype"] == "fp8" and stored["plans"][0]["gpus_in_last_quarter"] == 1
    assert stored["plans"] == given["plans"] and stored["optimal_cost"] == pytest.approx(given["optimal_cost"])
    # none clears an allowance: back to the plan's own KV dtype
    kv("plan", "set", "docs-llama3-8b", "--allow-kv-dtypes", "none")
    assert kv.json("plan", "show", "docs-llama3-8b")[0]["allow_kv_dtypes"] is None
    assert kv.json("plan", "optimize", "--from", "2026Q4", "--quarters", 1)["plans"][0]["kv_dtype"] == "bf16"


@pytest.mark.parametrize("args, why", [
    (("--allow-gpus", "NoSuchGPU"), "unknown gpu 'NoSuchGPU'"),
    (("--allow-gpus", "H200,NoSuchGPU"), "unknown gpu 'NoSuchGPU'"),
    (("--allow-kv-dtypes", "fp9"), "unknown KV dtype 'fp9'"),
    (("--allow-kv-dtypes", "bf16,none"), "none clears the allowance on its own"),
    (("--allow-gpus", "H200", "--allow-kv-dtypes", "fp9"), "unknown KV dtype 'fp9'"),
])
def test_a_bad_allowance_is_one_line_and_writes_nothing(kv, args, why):
    kv("plan", "set", "docs-llama3-8b", "--allow-gpus", H100)
    before = kv.json("plan", "show", "docs-llama3-8b")
    r = kv("plan", "set", "docs-llama3-8b", *args, ok=False)
    assert r.exit_code == 1 and why in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert kv.json("plan", "show", "docs-llama3-8b") == before  # nothing written, the GPU allowance kept


def test_allowances_travel_with_the_plans_file(kv, tmp_path):
    from conftest import Kvreg

    kv("plan", "set", "docs-llama3-8b", "--allow-gpus", f"{H100},{H200}", "--allow-kv-dtypes", "bf16,fp8")
    exported = kv("export").stdout
    assert f'allow_gpus = "{H100},{H200}"\nallow_kv_dtypes = "bf16,fp8"\n' in exported
    other = Kvreg(f"sqlite:///{tmp_path / 'other.db'}")
    path = tmp_path / "registry.toml"
    path.write_text(exported)
    out = other("apply", path).stdout.splitlines()
    assert "~ plan docs-llama3-8b" in out and "plan: 0 added, 1 changed, 5 unchanged" in out
    assert other.json("plan", "show", "docs-llama3-8b")[0]["allow_kv_dtypes"] == "bf16,fp8"
    assert other("export").stdout == exported
    # `db copy` carries them too (every column of every table)
    copy = tmp_path / "copy.db"
    kv("db", "copy", "--from", kv.url, "--to", f"sqlite:///{copy}")
    shown = Kvreg(f"sqlite:///{copy}").json("plan", "show", "docs-llama3-8b")[0]
    assert (shown["allow_gpus"], shown["allow_kv_dtypes"]) == (f"{H100},{H200}", "bf16,fp8")
    # a file naming a GPU type the registry lacks is refused, nothing written
    path.write_text(exported.replace(f'allow_gpus = "{H100},{H200}"', 'allow_gpus = "H100-SXM,B999"'))
    bad = other("apply", path, ok=False)
    assert bad.exit_code == 1 and "unknown gpu 'B999'" in bad.output
    assert other("export").stdout == exported
