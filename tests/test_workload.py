"""A plan's workload as a mix of request classes with shares (issue 4).

Seed 002 serves chat (1,500 tokens) and documents (13,000 tokens) on one H100 with Llama-3-8B and a
53 GB KV pool. Paged, a request holds whole 16-token blocks of what it uses, so a mix holds the
share-weighted mean of its classes' blocks: each class rounds to its own blocks (and, on a
sliding-window model, to its own window) before the mean. Every figure here is worked by hand.
"""

from __future__ import annotations

import math

import pytest
from test_plans import BLOCK, LLAMA_8B_KV_BYTES_PER_TOKEN, SEED_002_POOL, blocks, fails_cleanly, quarter_row, sql

CHAT = blocks(1500) * LLAMA_8B_KV_BYTES_PER_TOKEN  # 94 blocks = 1,504 tokens: 197,132,288 B
DOCS = blocks(13000) * LLAMA_8B_KV_BYTES_PER_TOKEN  # 813 blocks = 13,008 tokens: 1,704,984,576 B
BASE = ["--model", "Llama-3-8B", "--gpu", "H100-SXM", "--gpus-per-node", 1, "--kv-cache-memory", f"{SEED_002_POOL}B",
        "--context", 13000]


def test_seed_002_mixed_example_plan(kv):
    assert (CHAT, DOCS) == (94 * 16 * 131072, 813 * 16 * 131072) == (197_132_288, 1_704_984_576)
    mean_bytes = 0.8 * CHAT + 0.2 * DOCS  # 237.8 blocks of 2 MiB: 498,702,745.6 B
    assert mean_bytes == pytest.approx((0.8 * 94 + 0.2 * 813) * 16 * 131072) == pytest.approx(498_702_745.6)
    per_gpu = SEED_002_POOL / mean_bytes  # 106.28 users, of whom 85 chat and 21 documents
    assert round(per_gpu, 2) == 106.28

    plan = {p["plan"]: p for p in kv.json("plan", "list")}["mixed-llama3-8b"]
    assert plan["workload"] == "chat=1500:0.8,documents=13000:0.2"
    assert plan["workload_tokens"] == pytest.approx(0.8 * 1500 + 0.2 * 13000) == 3800
    assert plan["kv_bytes_per_request_per_gpu"] == pytest.approx(mean_bytes, rel=1e-12)
    assert plan["workload_concurrency"] == pytest.approx(per_gpu, rel=1e-12)
    # Not the share-weighted mean of each class's concurrency (0.8 x 268.9 + 0.2 x 31.1 = 221.3): the
    # pool is shared, so bytes average, not users.
    assert 0.8 * SEED_002_POOL / CHAT + 0.2 * SEED_002_POOL / DOCS == pytest.approx(221.30, abs=0.01)
    # Nor one request of the mean length (3,800 tokens = 238 blocks): per-class rounding is kept.
    assert SEED_002_POOL / (blocks(3800) * LLAMA_8B_KV_BYTES_PER_TOKEN) == pytest.approx(106.19, abs=0.01)

    q3, q4 = quarter_row(kv, "mixed-llama3-8b", "2026Q3"), quarter_row(kv, "mixed-llama3-8b", "2026Q4")
    assert (q3["users"], q3["gpus_needed"]) == (100, 1)  # 100 <= 106.28
    assert (q4["users"], q4["replicas_needed"], q4["gpus_needed"]) == (200, math.ceil(200 / per_gpu), 2)
    assert q4["headroom_users"] == pytest.approx(2 * per_gpu - 200)
    assert q4["cost_per_month"] == pytest.approx(2 * 2.5 * 730)

    classes = kv.json("plan", "workload", "mixed-llama3-8b")
    assert [(c["workload_class"], c["class_tokens"], c["share"]) for c in classes] == [
        ("chat", 1500, 0.8), ("documents", 13000, 0.2)]
    chat, docs = classes
    assert (chat["class_kv_bytes_per_request_per_gpu"], docs["class_kv_bytes_per_request_per_gpu"]) == (CHAT, DOCS)
    assert chat["class_concurrency"] == pytest.approx(SEED_002_POOL / CHAT)  # 268.86: chat alone
    assert docs["class_concurrency"] == pytest.approx(SEED_002_POOL / DOCS)  # 31.09: documents alone
    assert chat["class_weighted_kv_bytes"] == pytest.approx(0.8 * CHAT)
    assert docs["class_weighted_tokens"] == pytest.approx(0.2 * 13000)


def test_shares_are_relative_weights(kv):
    kv("plan", "add", "weights", *BASE, "--workload", "chat=1500:4", "--workload", "docs=13000:1")
    kv("plan", "add", "percent", *BASE, "--workload", "chat=1500:80%,docs=13k:20%")
    plans = {p["plan"]: p for p in kv.json("plan", "list")}
    want = SEED_002_POOL / (0.8 * CHAT + 0.2 * DOCS)
    assert plans["weights"]["workload_concurrency"] == pytest.approx(want, rel=1e-12)
    # 13k is 13,000 tokens (--context units: 13K would be 13 x 1,024); 80% is 0.8
    assert plans["percent"]["workload"] == "chat=1500:0.8,docs=13000:0.2"
    assert plans["percent"]["workload_concurrency"] == pytest.approx(want, rel=1e-12)


def test_each_class_rounds_to_its_own_blocks(kv):
    # 8-token and 24-token requests, half each: 1 block and 2 blocks, so 1.5 blocks (24 tokens) on
    # average; one request of the mean length (16 tokens) would hold only 1 block.
    kv("plan", "add", "tiny", *BASE, "--workload", "short=8:1,long=24:1")
    kv("plan", "add", "mean", *BASE, "--avg-tokens", 16)
    plans = {p["plan"]: p for p in kv.json("plan", "list")}
    assert plans["tiny"]["kv_bytes_per_request_per_gpu"] == (1 + 2) / 2 * BLOCK * LLAMA_8B_KV_BYTES_PER_TOKEN
    assert plans["mean"]["kv_bytes_per_request_per_gpu"] == 1 * BLOCK * LLAMA_8B_KV_BYTES_PER_TOKEN
    assert plans["tiny"]["workload_tokens"] == plans["mean"]["avg_tokens"] == 16


def test_each_class_caps_at_its_own_sliding_window(kv):
    # gemma-2-9b-it: 21 global + 21 sliding (4,096-token window) layers, 8 KV heads x (256 + 256) x 2 B
    # = 8,192 B per token per layer. Classes of 1,024 and 8,192 tokens, half each, no block rounding.
    per_layer = 8 * (256 + 256) * 2
    kv("plan", "add", "gemma", "--model", "gemma-2-9b-it", "--gpu", "H100-SXM", "--context", "8K",
       "--block-size", 0, "--workload", "short=1024:1,long=8192:1")
    plan = {p["plan"]: p for p in kv.json("plan", "list")}["gemma"]
    short = 21 * per_layer * 1024 + 21 * per_layer * 1024
    long = 21 * per_layer * 8192 + 21 * per_layer * 4096  # the window caps the sliding layers
    assert plan["kv_bytes_per_request_per_gpu"] == (short + long) / 2 == 1_233_125_376
    # One request of the mean (4,608 tokens) would hold 21 x 8,192 x (4,608 + 4,096) B = 1,497,366,528 B.
    assert 21 * per_layer * (4608 + 4096) == 1_497_366_528


def test_a_mix_replaces_an_average_and_back(kv, db_url):
    kv("plan", "add", "svc", *BASE, "--avg-tokens", 1500)
    kv("plan", "set", "svc", "--workload", "chat=1500:0.8,docs=13000:0.2")
    plan = {p["plan"]: p for p in kv.json("plan", "list")}["svc"]
    assert (plan["avg_tokens"], plan["workload"]) == (None, "chat=1500:0.8,docs=13000:0.2")
    assert plan["workload_concurrency"] == pytest.approx(SEED_002_POOL / (0.8 * CHAT + 0.2 * DOCS), rel=1e-12)
    kv("plan", "set", "svc", "--avg-tokens", 1500)  # an average replaces the mix
    plan = {p["plan"]: p for p in kv.json("plan", "list")}["svc"]
    assert (plan["avg_tokens"], plan["workload"]) == (1500, "")
    assert plan["workload_concurrency"] == pytest.approx(SEED_002_POOL / CHAT, rel=1e-12)
    kv("plan", "set", "svc", "--workload", "docs=13000:1")
    kv("plan", "set", "svc", "--workload", "none")  # no mix, no average: each user holds a whole context
    plan = {p["plan"]: p for p in kv.json("plan", "list")}["svc"]
    assert (plan["avg_tokens"], plan["workload"], plan["workload_tokens"]) == (None, "", 13000)
    kv("plan", "set", "svc", "--workload", "a=100:1,b=200:1")
    kv("plan", "set", "svc", "--rename", "svc2")  # classes follow a renamed plan
    assert [c["workload_class"] for c in kv.json("plan", "workload", "svc2")] == ["a", "b"]
    kv("plan", "remove", "svc2")
    assert sql(db_url, "SELECT COUNT(*) FROM workload_class wc LEFT JOIN plan p ON p.id = wc.plan_id"
                       " WHERE p.id IS NULL") == [(0,)]


BAD = {
    "class beyond the context": (("--context", "8K", "--workload", "chat=1500:0.8,docs=13000:0.2"),
                                 "workload class 'docs' holds 13,000 tokens, longer than the context (8,192 tokens"),
    "no share": (("--workload", "chat=1500"), "write CLASS=TOKENS:SHARE"),
    "zero share": (("--workload", "chat=1500:0"), "must be a number above 0"),
    "negative share": (("--workload", "chat=1500:-0.2,docs=100:1.2"), "must be a number above 0"),
    "share not a number": (("--workload", "chat=1500:most"), "share 'most' is not a number"),
    "nan share": (("--workload", "chat=1500:nan"), "must be a number above 0"),
    "class twice": (("--workload", "chat=1500:0.5", "--workload", "chat=100:0.5"), "'chat' is given twice"),
    "both average and mix": (("--avg-tokens", 1500, "--workload", "chat=1500:1"), "not both"),
    "no tokens": (("--workload", "chat=:1"), "token count '' is not understood"),
    "empty class name": (("--workload", "=1500:1"), "write CLASS=TOKENS:SHARE"),
    "average beyond the context": (("--context", "8K", "--avg-tokens", 13000), "longer than the context"),
    # Two shares of 1e308 would sum to infinity and the mean to NaN (NULL): the plan would fall back to its context.
    "huge share": (("--workload", "a=1000:1e308,b=2000:1e308"), "at most 1,000,000"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_workload_is_refused_and_nothing_is_written(kv, state, case):
    args, message = BAD[case]
    line = fails_cleanly(kv, state, "plan", "add", "bad", "--model", "Llama-3-8B", "--gpu", "H100-SXM", *args)
    assert message in line, line


def test_set_keeps_the_mix_valid(kv, state):
    # Shortening the context below a class's tokens would leave a class no request can be: refused.
    line = fails_cleanly(kv, state, "plan", "set", "mixed-llama3-8b", "--context", "8K")
    assert "workload class 'documents' holds 13,000 tokens" in line
    line = fails_cleanly(kv, state, "plan", "workload", "chat-llama3-8b")
    assert "has no workload mix" in line


def test_solvers_take_a_mix(kv):
    # Fewest GPUs for 213 mixed users: 213 / 106.28 = 2.004 -> 3 GPUs; 212 users fit on 2.
    mix = ["--workload", "chat=1500:0.8,documents=13000:0.2"]
    base = ["--model", "Llama-3-8B", "--gpu", "H100-SXM", "--gpus-per-node", 1, "--kv-cache-memory", "53GB"]
    (ans,) = kv.json("plan", "solve", "gpus", *base, "--context", 13000, *mix, "--users", 213)
    per_gpu = SEED_002_POOL / (0.8 * CHAT + 0.2 * DOCS)
    assert (ans["gpus_needed"], math.ceil(213 / per_gpu)) == (3, 3)
    (fewer,) = kv.json("plan", "solve", "gpus", *base, "--context", 13000, *mix, "--users", 212)
    assert fewer["gpus_needed"] == math.ceil(212 / per_gpu) == 2
    # The longest context for 200 mixed users on 2 GPUs: the mix fixes the users per GPU, so the
    # context grows until one context-length sequence no longer fits the 404,352-token pool.
    (ctx,) = kv.json("plan", "solve", "context", *base, *mix, "--users", 200, "--gpus", 2, "--beyond-claim")
    assert ctx["context_tokens"] == 25_272 * BLOCK == 404_352
    kv("plan", "add", "at", *base, "--context", 404_352, *mix)
    kv("plan", "add", "beyond", *base, "--context", 404_353, *mix)
    for name in ("at", "beyond"):
        kv("demand", "set", name, "2027Q1", 200)
    assert quarter_row(kv, "at", "2027Q1")["gpus_needed"] == 2
    assert quarter_row(kv, "beyond", "2027Q1")["fits"] == 0


def test_solve_reserve_keeps_the_mix(kv):
    # 110 mixed users with a reserve instead of a fixed pool: the solver must read the plan's classes.
    # Usable 80 GiB x (1 - r) minus 16.06e9 B of weights must hold 110 mean requests on one GPU.
    kv("plan", "add", "mixr", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--gpus-per-node", 1, "--context", 13000,
       "--workload", "chat=1500:0.8,documents=13000:0.2")
    kv("demand", "set", "mixr", "2027Q1", 110)
    (row,) = kv.json("plan", "solve", "reserve", "mixr")
    mean = 0.8 * CHAT + 0.2 * DOCS
    assert row["gpus_needed"] == 1  # the 12% reserve leaves 59.5e9 B of pool: 119.4 mean requests per GPU
    limit = 1 - (110 * mean + 16.06e9) / (80 * 2**30)  # 0.1744
    assert row["max_reserve"] == math.floor(limit * 10_000) / 10_000
    kv("plan", "set", "mixr", "--reserve", row["max_reserve"])
    assert quarter_row(kv, "mixr", "2027Q1")["gpus_needed"] == 1
    kv("plan", "set", "mixr", "--reserve", round(row["max_reserve"] + 0.0001, 4))
    assert quarter_row(kv, "mixr", "2027Q1")["gpus_needed"] == 2


def test_migration_0003_keeps_every_plan_and_back(empty_db_url):
    from sqlalchemy import text

    from kvreg.db.engine import make_engine
    from test_engine_rules import _rows, registry_with_v1_rows
    from test_migrations import alembic, revision

    from kvreg.db.engine import head_revision

    columns, before = registry_with_v1_rows(empty_db_url, "0002")
    alembic(empty_db_url, "upgrade", "head")  # through 0003; the views are recreated at head only
    assert revision(empty_db_url) == head_revision()
    assert _rows(empty_db_url, columns) == before
    alembic(empty_db_url, "upgrade", "head")  # the views exist only at head (later revisions add columns)
    [pc] = _rows(empty_db_url, {"plan_capacity": ["plan", "workload_tokens"]})["plan_capacity"]
    assert pc == ("chat", 1500)  # no classes: the plan's own avg_tokens
    engine = make_engine(empty_db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO workload_class (plan_id, name, avg_tokens, share)"
                              " VALUES (1, 'chat', 1500, 0.8), (1, 'docs', 13000, 0.2)"))
        with pytest.raises(Exception, match="ck_workload_class_share"):
            with engine.begin() as conn:
                conn.execute(text("UPDATE workload_class SET share = 0"))
    finally:
        engine.dispose()
    [pc] = _rows(empty_db_url, {"plan_capacity": ["plan", "workload_tokens"]})["plan_capacity"]
    assert pc == ("chat", pytest.approx(3800))
    alembic(empty_db_url, "downgrade", "0002")
    assert revision(empty_db_url) == "0002"
    assert _rows(empty_db_url, columns) == before
    alembic(empty_db_url, "upgrade", "head")


@pytest.mark.parametrize("values, classes", [
    (["chat=1500:0.8", "docs=13000:0.2"], [("chat", 1500, 0.8), ("docs", 13000, 0.2)]),
    (["chat=1500:80%,docs=13k:20%"], [("chat", 1500, 0.8), ("docs", 13000, 0.2)]),  # 13k = 13,000
    (["long=128K:1"], [("long", 131072, 1.0)]),  # 128K = 128 x 1,024
    (["a=b=100:4"], [("a=b", 100, 4.0)]),  # the last = splits name from tokens
    (["none"], []),
])
def test_parse_workload(values, classes):
    from kvreg.app.plans import parse_workload

    assert [(c["class"], c["avg_tokens"], c["share"]) for c in parse_workload(values)] == classes


def test_a_workload_change_keeps_the_calibration(kv):
    # What the engine printed at startup (its KV cache tokens) does not depend on the workload.
    kv("plan", "calibrate", "chat-llama3-8b", "--kv-cache-tokens", "404,352")
    kv("plan", "set", "chat-llama3-8b", "--workload", "chat=1500:4,docs=8000:1")
    kv("plan", "set", "chat-llama3-8b", "--avg-tokens", 2000)
    plan = {p["plan"]: p for p in kv.json("plan", "list")}["chat-llama3-8b"]
    assert (plan["measured_kv_cache_tokens"], plan["avg_tokens"]) == (404_352, 2000)
    kv("plan", "set", "chat-llama3-8b", "--block-size", 32)  # a deployment setting: cleared
    plan = {p["plan"]: p for p in kv.json("plan", "list")}["chat-llama3-8b"]
    assert plan["measured_kv_cache_tokens"] is None


def test_shares_show_as_weights_not_percentages(kv, db_url, tmp_path):
    # 4 and 1 are weights (80% and 20% of requests): the report prints them as given, not as 400% and 100%.
    kv("plan", "add", "w41", *BASE, "--workload", "chat=1500:4,docs=13000:0.3333333333333333")
    assert {p["plan"]: p for p in kv.json("plan", "list")}["w41"]["workload"] == (
        "chat=1500:4,docs=13000:0.3333333333333333")  # reads back as the same share
    kv("report", "--out", tmp_path / "reports", "--format", "md")
    [md] = list((tmp_path / "reports").glob("*/capacity.md"))
    text = md.read_text()
    assert "| chat | 1,500 | 4.00 |" in text and "400.0%" not in text
