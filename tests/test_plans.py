"""Deployment plans, demand, the procurement rollup and the reverse solvers (issue 4).

Figures are checked against arithmetic written out here (seed 002's two services, seed 000's
long-context services), rollups are summed by hand from plan_quarter rows, and every solver
answer is plugged back in as a saved plan and shown to be the boundary. A bad input must exit
non-zero with one line on stderr and leave the registry as it was (compared with a full SQL dump).
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict

import pytest

GiB = 2**30
H100_BYTES = 80 * GiB
H100_PRICE_PER_HOUR, H100_UNIT_PRICE = 2.5, 30000.0
HOURS_PER_MONTH = 730
BLOCK = 16
# Llama-3-8B and Llama-3.1-8B: 32 layers x 8 KV heads x (128 + 128) x 2 bytes (bf16)
LLAMA_8B_KV_BYTES_PER_TOKEN = 32 * 8 * (128 + 128) * 2  # 131,072 B = 128 KiB
SEED_002_POOL = 53_000_000_000  # 53 GB: vLLM's kv_cache_memory_bytes
# Llama-3.1-70B: 80 layers x 8 KV heads x 256 x 2 B; 70.6e9 params x 2 B of weights
LLAMA_70B_WEIGHTS = 70_600_000_000 * 2


def blocks(tokens: int) -> int:
    """Tokens a request holds under paged allocation: whole 16-token blocks."""
    return math.ceil(tokens / BLOCK) * BLOCK


def sql(db_url: str, query: str, **params) -> list[tuple]:
    """Rows of a query on the test's registry (SQLite or PostgreSQL)."""
    from sqlalchemy import text

    from kvreg.db.engine import make_engine

    eng = make_engine(db_url)
    try:
        with eng.connect() as conn:
            return [tuple(r) for r in conn.execute(text(query), params)]
    finally:
        eng.dispose()


def fails_cleanly(kv, state, *args) -> str:
    """A command that must fail: non-zero exit, one line on stderr, registry unchanged. Returns the line."""
    kv("plan", "list")  # the registry exists (created and seeded) before the fingerprint
    before = state()
    result = kv(*args, ok=False)
    assert result.exit_code != 0, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert state() == before
    return lines[0]


def quarter_row(kv, plan: str, quarter: str) -> dict:
    rows = kv.json("plan", "show", plan, "--quarter", quarter)
    assert len(rows) == 1
    return rows[0]


def serves(kv, name: str, users: int, *plan_args) -> dict:
    """Save a plan with one quarter of demand and return its plan_quarter row (the plug-back check)."""
    kv("plan", "add", name, *plan_args)
    kv("demand", "set", name, "2027Q1", users)
    return quarter_row(kv, name, "2027Q1")


# ---------------------------------------------------------------- seed 002 through the example plans


def test_seed_002_chat_serves_about_269_users_per_h100(kv):
    # 1,500 tokens round up to 94 blocks = 1,504 tokens: 197,132,288 B per request.
    request_bytes = blocks(1500) * LLAMA_8B_KV_BYTES_PER_TOKEN
    assert request_bytes == 1504 * 131072 == 197_132_288
    expected = SEED_002_POOL / request_bytes  # 268.855
    # The same in blocks, the way vLLM counts: 25,272 whole blocks / 94 blocks per request.
    assert SEED_002_POOL // (BLOCK * LLAMA_8B_KV_BYTES_PER_TOKEN) == 25_272
    assert 25_272 / 94 == pytest.approx(expected, abs=0.01)

    q3, q4 = quarter_row(kv, "chat-llama3-8b", "2026Q3"), quarter_row(kv, "chat-llama3-8b", "2026Q4")
    assert q4["workload_concurrency"] == pytest.approx(expected, rel=1e-12)
    assert round(q4["workload_concurrency"]) == 269
    # At the full 8,192-token context: 53e9 / (8192 x 131072) = 49.36 (seed 002: 49 at 8k).
    assert q4["max_concurrency"] == pytest.approx(SEED_002_POOL / (8192 * 131072))
    assert q4["kv_pool_tokens"] == 25_272 * BLOCK == 404_352
    # 100 then 250 users both fit one H100: ceil(250 / 268.855) = 1 replica of 1 GPU.
    assert (q3["users"], q4["users"]) == (100, 250)
    assert q3["gpus_needed"] == q4["gpus_needed"] == 1
    assert q4["headroom_users"] == pytest.approx(expected - 250)
    assert q4["cost_per_month"] == pytest.approx(1 * H100_PRICE_PER_HOUR * HOURS_PER_MONTH) == 1825
    assert q4["capex"] == pytest.approx(H100_UNIT_PRICE)
    assert q4["cost_per_user_per_month"] == pytest.approx(1825 / 250)


def test_seed_002_documents_serve_about_31_users_per_h100(kv):
    # 13,000 tokens round up to 813 blocks = 13,008 tokens: 1,704,984,576 B (1.59 GiB) per request.
    request_bytes = blocks(13000) * LLAMA_8B_KV_BYTES_PER_TOKEN
    assert request_bytes == 1_704_984_576
    expected = SEED_002_POOL / request_bytes  # 31.085
    q3, q4 = quarter_row(kv, "docs-llama3-8b", "2026Q3"), quarter_row(kv, "docs-llama3-8b", "2026Q4")
    assert q3["workload_concurrency"] == pytest.approx(expected, rel=1e-12)
    assert round(expected) == 31
    # 31 users fit one H100; 60 need ceil(60 / 31.085) = 2.
    assert (q3["gpus_needed"], q4["gpus_needed"]) == (1, 2)
    assert q4["nodes_needed"] == 2  # one GPU per node in this plan
    assert q4["cost_per_month"] == pytest.approx(2 * 2.5 * 730) == 3650
    assert q4["capex"] == pytest.approx(2 * 30000)
    # 13,000 tokens exceed Llama-3-8B's 8,192 positions: the view says so; the plan is still stored.
    plans = {p["plan"]: p for p in kv.json("plan", "list")}
    assert plans["docs-llama3-8b"]["context_within_claim"] == 0
    assert plans["chat-llama3-8b"]["context_within_claim"] == 1


def test_seed_000_long_context_examples(kv):
    usable = H100_BYTES * (1 - 0.12)
    # Llama-3.1-70B TP4: weights / 4 per GPU; 2 KV heads per GPU -> 81,920 B per token per GPU.
    pool_70b = usable - LLAMA_70B_WEIGHTS / 4
    per_replica_70b = pool_70b / (131072 * 80 * 2 * 256 * 2)
    row = quarter_row(kv, "longctx-llama31-70b", "2026Q4")
    assert row["max_concurrency"] == pytest.approx(per_replica_70b)
    assert round(row["max_concurrency"], 1) == 3.8  # SPEC golden figure
    # 8 users: ceil(8 / 3.75) = 3 replicas x 4 GPUs; 20 users: 6 replicas = 24 GPUs in ceil(6 / 2) = 3 nodes.
    assert quarter_row(kv, "longctx-llama31-70b", "2026Q3")["gpus_needed"] == 12
    assert (row["replicas_needed"], row["gpus_needed"], row["nodes_needed"]) == (6, 24, 3)
    # Qwen3-235B-A22B TP8: 4 KV heads, so each GPU holds one whole head (SPEC errata): 2.7, not 5.3.
    qwen = quarter_row(kv, "longctx-qwen3-235b", "2026Q4")
    assert round(qwen["max_concurrency"], 1) == 2.7
    assert qwen["gpus_needed"] == math.ceil(20 / qwen["max_concurrency"]) * 8 == 64
    # Llama-3.1-8B on one H200: 6.8 sequences per GPU (SPEC); 20 users need ceil(20 / 6.82) = 3 GPUs.
    h200 = quarter_row(kv, "longctx-llama31-8b-h200", "2026Q4")
    assert round(h200["max_concurrency"], 1) == 6.8
    assert h200["gpus_needed"] == 3


# ---------------------------------------------------------------- the procurement rollup


def test_rollup_is_the_sum_of_plan_quarter_rows(kv):
    kv("plan", "add", "too-big", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "1")
    kv("demand", "set", "too-big", "2026Q4", 5)
    rows = kv.json("demand", "list")
    sums: dict = defaultdict(lambda: defaultdict(float))
    for r in rows:
        s = sums[(r["gpu"], r["quarter"])]
        s["plans"] += 1
        s["plans_not_fitting"] += 0 if r["fits"] else 1
        for k in ("users", "gpus_needed", "nodes_needed", "cost_per_month"):
            s[k] += r[k] or 0  # a plan that does not fit needs no GPUs: its figures are empty
    # The horizon from the first entry's quarter (by default it starts at the current quarter).
    rollup = kv.json("plan", "rollup", "--from", "2026Q3", "--quarters", 2)["schedule"]
    assert {(r["gpu"], r["quarter"]) for r in rollup} == set(sums)
    for r in rollup:
        s = sums[(r["gpu"], r["quarter"])]
        for k, v in s.items():
            assert r[k] == pytest.approx(v), (r["gpu"], r["quarter"], k)
        prev = sums.get((r["gpu"], "2026Q3" if r["quarter"] == "2026Q4" else None), {}).get("gpus_needed", 0)
        assert r["previous_quarter_gpus_needed"] == prev
        assert r["gpus_needed_quarter_change"] == r["gpus_needed"] - prev
    by_key = {(r["gpu"], r["quarter"]): r for r in rollup}
    # By hand from the example plans: H100 2026Q3 = chat 1 + docs 1 + mixed 1 + 70B 12 + Qwen3 24 = 39;
    # 2026Q4 = 1 + 2 + 2 (200 mixed users / 106.3) + 24 + 64 = 93, up 54. H200 (the 8B): 2 then 3.
    assert by_key[("H100-SXM", "2026Q3")]["gpus_needed"] == 1 + 1 + 1 + 12 + 24 == 39
    h100_q4 = by_key[("H100-SXM", "2026Q4")]
    assert (h100_q4["gpus_needed"], h100_q4["gpus_needed_quarter_change"]) == (1 + 2 + 2 + 24 + 64, 93 - 39) == (93, 54)
    assert (h100_q4["plans"], h100_q4["plans_not_fitting"]) == (6, 1)
    assert h100_q4["cost_per_month"] == pytest.approx(93 * 2.5 * 730)
    assert by_key[("H200", "2026Q4")]["gpus_needed_quarter_change"] == 3 - 2
    # No fleet entered: every GPU needed is bought, at unit_price (H100-SXM 30,000 USD): 39 in 2026Q3, and
    # in 2026Q4 the increment beyond them, 93 - 39 = 54 (GPUs bought stay bought).
    assert (h100_q4["gpus_installed"], h100_q4["gpus_bought"], h100_q4["gpus_to_buy"]) == (0, 93, 93 - 39)
    assert h100_q4["capex_to_buy"] == pytest.approx(54 * 30_000)
    only_q4 = kv.json("plan", "rollup", "--quarter", "2026q4")["schedule"]
    assert {r["quarter"] for r in only_q4} == {"2026Q4"}


# ---------------------------------------------------------------- plans: add, set, list, show, remove


def test_a_plan_that_does_not_fit_is_stored_with_its_reason(kv, db_url):
    result = kv("plan", "add", "big", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "1")
    assert "does not fit" in result.stdout
    plan = {p["plan"]: p for p in kv.json("plan", "list")}["big"]
    # 141.2 GB of weights on one GPU: 131.50 GiB against 70.40 GiB usable.
    assert plan["fits"] == 0
    assert plan["reason"] == "weights need 131.50 GiB per GPU but only 70.40 GiB is usable"
    kv("demand", "set", "big", "2026Q4", 10)
    row = quarter_row(kv, "big", "2026Q4")
    assert (row["fits"], row["gpus_needed"], row["cost_per_month"]) == (0, None, None)
    assert row["reason"].startswith("weights need")
    kv("plan", "set", "big", "--tp", "4")
    row = quarter_row(kv, "big", "2026Q4")
    assert (row["fits"], row["reason"], row["gpus_needed"]) == (1, "", 12)  # ceil(10 / 3.75) = 3 replicas x 4


def test_plan_show_carries_the_promised_keys_and_works_without_demand(kv):
    keys = {"plan", "quarter", "users", "max_concurrency", "workload_concurrency", "replicas_needed", "gpus_needed",
            "fits", "reason", "cost_per_month"}
    rows = kv.json("plan", "show", "chat-llama3-8b")
    assert [r["quarter"] for r in rows] == ["2026Q3", "2026Q4"]
    assert keys <= set(rows[0])
    kv("plan", "add", "quiet", "--model", "Llama-3.1-8B", "--gpu", "H200", "--context", "32K")
    (row,) = kv.json("plan", "show", "quiet")
    assert keys <= set(row)
    assert (row["quarter"], row["users"], row["gpus_needed"]) == (None, None, None)
    assert row["fits"] == 1 and row["context_tokens"] == 32768
    assert row["weight_dtype"] == "bf16"  # native


def test_plan_set_changes_fields_and_validates_the_result(kv, db_url):
    kv("plan", "add", "p", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--kv-cache-memory", "53GB",
       "--context", "8K", "--avg-tokens", "1500", "--gpus-per-node", "1")
    assert sql(db_url, "SELECT kv_cache_memory_bytes, avg_tokens FROM plan WHERE name = 'p'") == [(53e9, 1500)]
    kv("plan", "set", "p", "--reserve", "0.2", "--avg-tokens", "none", "--kv-dtype", "fp8")
    assert sql(db_url, "SELECT reserve, kv_cache_memory_bytes, avg_tokens, kv_dtype FROM plan WHERE name = 'p'") == [
        (0.2, None, None, "fp8")]
    kv("plan", "set", "p", "--rename", "q", "--notes", "renamed")
    assert sql(db_url, "SELECT name, notes FROM plan WHERE name IN ('p', 'q')") == [("q", "renamed")]
    # A model with a native fp8 checkpoint? None in the catalog; switching models keeps bf16 native.
    kv("plan", "set", "q", "--model", "Qwen2.5-7B")
    assert sql(db_url, "SELECT m.name, p.weight_dtype FROM plan p JOIN model m ON m.id = p.model_id "
                       "WHERE p.name = 'q'") == [("Qwen2.5-7B", "bf16")]


def test_tp_auto_picks_the_minimum_tp(kv, db_url):
    kv("plan", "add", "auto70", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "auto")
    assert sql(db_url, "SELECT tp FROM plan WHERE name = 'auto70'") == [(4,)]  # SPEC: minimum TP 4 on 8xH100


def test_plan_remove_removes_its_demand(kv, db_url):
    kv("plan", "list")
    plan_id = sql(db_url, "SELECT id FROM plan WHERE name = 'chat-llama3-8b'")[0][0]
    assert sql(db_url, "SELECT count(*) FROM demand WHERE plan_id = :p", p=plan_id) == [(2,)]
    kv("plan", "remove", "chat-llama3-8b")
    assert sql(db_url, "SELECT count(*) FROM demand WHERE plan_id = :p", p=plan_id) == [(0,)]
    assert "chat-llama3-8b" not in {p["plan"] for p in kv.json("plan", "list")}


def test_demand_set_upserts_and_list_filters(kv, db_url):
    kv("demand", "set", "chat-llama3-8b", "2027-q1", 400)
    kv("demand", "set", "chat-llama3-8b", "2027Q1", 600)
    assert sql(db_url, "SELECT users FROM demand WHERE quarter = '2027Q1'") == [(600,)]
    rows = kv.json("demand", "list", "--plan", "chat-llama3-8b", "--quarter", "2027Q1")
    # 600 users / 268.855 per GPU: ceil(2.23) = 3 GPUs.
    assert [(r["users"], r["gpus_needed"]) for r in rows] == [(600, 3)]
    assert {r["quarter"] for r in kv.json("demand", "list", "--quarter", "2026Q3")} == {"2026Q3"}
    kv("demand", "remove", "chat-llama3-8b", "2027Q1")
    # Without an entry in 2027Q1 every plan's 2026Q4 demand carries into it (chat: 250 users).
    carried = kv.json("demand", "list", "--quarter", "2027Q1")
    assert {(r["quarter"], r["carried_from"]) for r in carried} == {("2027Q1", "2026Q4")}
    assert [r["users"] for r in carried if r["plan"] == "chat-llama3-8b"] == [250]
    assert kv.json("demand", "list", "--quarter", "2026Q2") == []


# ---------------------------------------------------------------- json and csv


def test_plan_list_json_and_csv_agree(kv):
    rows = kv.json("plan", "list")
    assert [r["plan"] for r in rows] == sorted(r["plan"] for r in rows)
    assert len(rows) == 6
    text = kv("plan", "list", "--format", "csv").stdout
    table = list(csv.DictReader(io.StringIO(text)))
    assert [r["plan"] for r in table] == [r["plan"] for r in rows]
    assert {"plan", "model", "gpu", "fits", "reason", "max_concurrency", "workload_concurrency", "notes"} <= set(
        table[0])
    for j, c in zip(rows, table):
        assert float(c["max_concurrency"]) == pytest.approx(j["max_concurrency"])
        assert int(c["kv_pool_tokens"]) == j["kv_pool_tokens"]


def test_demand_and_rollup_csv(kv):
    table = list(csv.DictReader(io.StringIO(kv("demand", "list", "--format", "csv").stdout)))
    assert len(table) == 12  # six plans x two quarters
    assert {"plan", "quarter", "users", "replicas_needed", "gpus_needed", "cost_per_month"} <= set(table[0])
    rollup = list(csv.DictReader(io.StringIO(kv("plan", "rollup", "--from", "2026Q3", "--quarters", 2, "--format",
                                                "csv").stdout)))
    assert [(r["gpu"], r["quarter"], r["gpus_needed"]) for r in rollup] == [
        ("H100-SXM", "2026Q3", "39"), ("H200", "2026Q3", "2"), ("H100-SXM", "2026Q4", "93"), ("H200", "2026Q4", "3")]


def test_tables_print(kv):
    for args in (("plan", "list"), ("plan", "show", "docs-llama3-8b"), ("demand", "list"), ("plan", "rollup"),
                 ("plan", "solve", "reserve", "longctx-llama31-8b-h200", "--quarter", "2026Q4")):
        out = kv(*args).stdout
        assert out.strip() and "Traceback" not in out


# ---------------------------------------------------------------- solvers, each answer plugged back in


def test_search_largest_finds_each_lanes_boundary():
    from kvreg.app.solve import search_largest

    limits = {"a": 1, "b": 1000, "c": 2**40, "d": 0}
    calls = []

    def probe(points):
        calls.append(len(points))
        return [x <= limits[lane] for lane, x in points]

    assert search_largest(list(limits), 1, 2**40, probe) == {"a": 1, "b": 1000, "c": 2**40, "d": None}
    assert len(calls) <= 12  # a ladder, then a few 16-fold narrowing rounds


def test_solve_context_is_the_boundary(kv):
    (ans,) = kv.json("plan", "solve", "context", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "4",
                     "--users", 8, "--gpus", 8)
    # 8 GPUs = 2 TP4 replicas, so each holds 4 sequences: 4 x blocks(C) x 81,920 B <= the pool per GPU.
    pool = H100_BYTES * 0.88 - LLAMA_70B_WEIGHTS / 4
    longest = math.floor(pool / (4 * 81920) / BLOCK) * BLOCK
    assert ans["context_tokens"] == longest == 122_944
    assert (ans["tp"], ans["gpus_needed"], ans["replicas_needed"]) == (4, 8, 2)
    base = ["--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "4"]
    at = serves(kv, "at", 8, *base, "--context", longest)
    beyond = serves(kv, "beyond", 8, *base, "--context", longest + 1)
    assert at["gpus_needed"] <= 8
    assert beyond["gpus_needed"] > 8  # one more token: another replica


def test_solve_context_tp_auto_takes_the_longest_over_tps(kv):
    (ans,) = kv.json("plan", "solve", "context", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "auto",
                     "--users", 8, "--gpus", 8, "--beyond-claim")  # memory's limit, past the 131,072-token claim
    # One TP8 replica holds all 8 users: 1 KV head per GPU = 40,960 B per token per GPU, and
    # 8 x blocks(C) x 40,960 B <= 0.88 x 80 GiB - 141.2e9 / 8 B.
    pool = H100_BYTES * 0.88 - LLAMA_70B_WEIGHTS / 8
    longest = math.floor(pool / (8 * 40960) / BLOCK) * BLOCK
    assert (ans["tp"], ans["context_tokens"]) == (8, longest) == (8, 176_816)
    # Plugged back in: it serves at TP8, and one more token serves at no TP.
    base = ["--model", "Llama-3.1-70B", "--gpu", "H100-SXM"]
    for tp in (1, 2, 4, 8):
        kv("plan", "add", f"beyond-tp{tp}", *base, "--tp", tp, "--context", longest + 1)
        kv("demand", "set", f"beyond-tp{tp}", "2027Q1", 8)
    kv("plan", "add", "at-tp8", *base, "--tp", 8, "--context", longest)
    kv("demand", "set", "at-tp8", "2027Q1", 8)
    rows = {r["plan"]: r for r in kv.json("demand", "list", "--quarter", "2027Q1")}
    assert rows["at-tp8"]["gpus_needed"] <= 8
    for tp in (1, 2, 4, 8):
        beyond = rows[f"beyond-tp{tp}"]
        assert not beyond["fits"] or beyond["gpus_needed"] > 8, tp


def test_solve_context_with_a_workload_and_a_kv_pool(kv):
    # Seed 002's chat on one H100: 250 users of 1,500 tokens fit, whatever the context, until one
    # context-length sequence no longer fits the 404,352-token pool.
    (ans,) = kv.json("plan", "solve", "context", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--gpus-per-node", 1,
                     "--kv-cache-memory", "53GB", "--avg-tokens", 1500, "--users", 250, "--gpus", 1, "--beyond-claim")
    assert ans["context_tokens"] == 25_272 * BLOCK == 404_352
    assert ans["context_within_claim"] == 0
    base = ["--model", "Llama-3-8B", "--gpu", "H100-SXM", "--gpus-per-node", 1, "--kv-cache-memory", "53GB",
            "--avg-tokens", 1500]
    assert serves(kv, "at", 250, *base, "--context", 404_352)["gpus_needed"] == 1
    beyond = serves(kv, "beyond", 250, *base, "--context", 404_353)
    assert beyond["fits"] == 0 and beyond["gpus_needed"] is None


def test_solve_gpus_is_the_boundary(kv):
    (ans,) = kv.json("plan", "solve", "gpus", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--users", 20,
                     "--context", "128K")
    # TP8: pool 75.59e9 - 17.65e9 B, 131,072 x 40,960 B per sequence -> 10.79 per replica: 2 replicas, 16 GPUs.
    # TP4 needs ceil(20 / 3.75) x 4 = 24; TP2 and TP1 do not fit.
    per_replica = (H100_BYTES * 0.88 - LLAMA_70B_WEIGHTS / 8) / (131072 * 40960)
    assert ans["workload_concurrency"] == pytest.approx(per_replica)
    assert (ans["tp"], ans["gpus_needed"]) == (8, math.ceil(20 / per_replica) * 8) == (8, 16)
    plan = serves(kv, "at", 20, "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", 8)
    assert plan["gpus_needed"] == 16
    # One less GPU fails at every TP: the longest context 20 users get on 15 GPUs is below 128K.
    (fewer,) = kv.json("plan", "solve", "context", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "auto",
                       "--users", 20, "--gpus", 15)
    assert fewer["context_tokens"] < 131072


def test_solve_gpus_seed_002_chat(kv):
    (ans,) = kv.json("plan", "solve", "gpus", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--gpus-per-node", 1,
                     "--kv-cache-memory", "53GB", "--context", "8K", "--avg-tokens", 1500, "--users", 538)
    # 538 users / 268.855 per GPU: ceil(2.001) = 3 GPUs; 537 would need 2.
    assert ans["gpus_needed"] == 3
    (fewer,) = kv.json("plan", "solve", "gpus", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--gpus-per-node", 1,
                       "--kv-cache-memory", "53GB", "--context", "8K", "--avg-tokens", 1500, "--users", 537)
    assert fewer["gpus_needed"] == 2


def test_solve_reserve_is_the_boundary(kv):
    rows = kv.json("plan", "solve", "reserve", "longctx-llama31-70b")
    by_q = {r["quarter"]: r for r in rows}
    q3 = by_q["2026Q3"]
    # 8 users on 3 TP4 replicas (12 GPUs): each replica must hold 8/3 sequences of 131,072 x 81,920 B,
    # so usable >= 8/3 x 10,737,418,240 + 35.3e9 B, i.e. reserve <= 1 - that / 80 GiB = 0.25572...
    limit = 1 - (8 / 3 * 131072 * 81920 + LLAMA_70B_WEIGHTS / 4) / H100_BYTES
    assert (q3["reserve"], q3["gpus_needed"]) == (0.12, 12)
    assert q3["max_reserve"] == math.floor(limit * 10_000) / 10_000 == 0.2557
    for r in rows:
        kv("plan", "set", "longctx-llama31-70b", "--reserve", r["max_reserve"])
        assert quarter_row(kv, "longctx-llama31-70b", r["quarter"])["gpus_needed"] == r["gpus_needed"]
        kv("plan", "set", "longctx-llama31-70b", "--reserve", round(r["max_reserve"] + 0.0001, 4))
        assert quarter_row(kv, "longctx-llama31-70b", r["quarter"])["gpus_needed"] > r["gpus_needed"]


def test_solver_errors(kv, state):
    line = fails_cleanly(kv, state, "plan", "solve", "reserve", "chat-llama3-8b")
    assert "kv_cache_memory_bytes" in line
    line = fails_cleanly(kv, state, "plan", "solve", "context", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM",
                         "--tp", "4", "--users", 8, "--gpus", 3)
    assert "cannot hold one replica" in line
    line = fails_cleanly(kv, state, "plan", "solve", "context", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM",
                         "--tp", "1", "--users", 8, "--gpus", 8)
    assert "at any context" in line and "weights need" in line
    line = fails_cleanly(kv, state, "plan", "solve", "gpus", "--model", "Llama-3.1-405B", "--gpu", "H100-SXM",
                         "--users", 1, "--context", "128K")
    assert "does not fit" in line


# ---------------------------------------------------------------- bad input: clear error, nothing written

BAD = {
    "quarter 5": (("demand", "set", "chat-llama3-8b", "2026Q5", "10"), "no quarter 5"),
    "negative users": (("demand", "set", "chat-llama3-8b", "2026Q4", "-5"), "at least 0"),
    "fractional users": (("demand", "set", "chat-llama3-8b", "2026Q4", "2.5"), "whole number"),
    "demand for a missing plan": (("demand", "set", "chat-llama-3-8b", "2026Q4", "3"), "did you mean chat-llama3-8b"),
    "missing model": (("plan", "add", "x", "--model", "Llama-3.1-8", "--gpu", "H100-SXM"), "did you mean Llama-3.1-8B"),
    "missing gpu": (("plan", "add", "x", "--model", "Llama-3.1-8B", "--gpu", "H100"), "unknown gpu 'H100'"),
    "TP x PP beyond the node": (("plan", "add", "x", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "8",
                                 "--pp", "2"), "TP 8 x PP 2 needs 16 GPUs but a node has 8"),
    "TP beyond a small node": (("plan", "add", "x", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "4",
                                "--gpus-per-node", "2"), "a node has 2"),
    "duplicate plan": (("plan", "add", "chat-llama3-8b", "--model", "Llama-3-8B", "--gpu", "H100-SXM"),
                       "already exists"),
    "TP invalid for the heads": (("plan", "add", "x", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "3"),
                                 "valid TPs in a 8-GPU node with PP 1 are 1, 2, 4, 8"),
    "reserve and kv pool": (("plan", "add", "x", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--reserve", "0.1",
                             "--kv-cache-memory", "40GB"), "not both"),
    "reserve of 1": (("plan", "add", "x", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--reserve", "1"), "below 1"),
    "unknown kv dtype": (("plan", "add", "x", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--kv-dtype", "fp9"),
                         "unknown KV dtype"),
    "bad context": (("plan", "add", "x", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--context", "lots"),
                    "not understood"),
    "set to an invalid TP": (("plan", "set", "longctx-llama31-70b", "--tp", "3"), "valid TPs"),
    "rename onto another plan": (("plan", "set", "chat-llama3-8b", "--rename", "docs-llama3-8b"), "already exists"),
    "set nothing": (("plan", "set", "chat-llama3-8b"), "nothing to change"),
    "remove a missing plan": (("plan", "remove", "nope"), "unknown plan"),
    "show a bad quarter": (("plan", "show", "chat-llama3-8b", "--quarter", "2026Q0"), "no quarter 0"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_and_writes_nothing(kv, state, case):
    args, needle = BAD[case]
    line = fails_cleanly(kv, state, *args)
    assert needle in line, line
