"""A plan's users served within its latency targets: the smaller of what its KV pool holds and what a replica
runs within the targets (users_per_replica, users_binding_constraint), worked by hand on the seeded chat plan;
replicas, GPUs and the procurement rollup read the bound figure; a plan without targets is unchanged; the
latency options of `plan add/set` and the classes' lengths and targets are validated (nothing written on error)."""

from __future__ import annotations

import csv
import io
import math

import pytest

from kvreg.app.registry import get_model
from kvreg.figures.performance import EFFICIENCIES

# Seeded: chat-llama3-8b serves Llama-3-8B on one H100 SXM (theoretical rule, KV pool 53 GB, 1,500-token
# requests); its demand is 100 users in 2026Q3 and 250 in 2026Q4.
PLAN = "chat-llama3-8b"
H100_BANDWIDTH = 3.35e12  # bytes/s (the catalog's H100 SXM)
H100_BF16_FLOPS = 989.4e12  # dense BF16 FLOP/s


def _quarters(kv, plan: str = PLAN) -> dict[str, dict]:
    return {r["quarter"]: r for r in kv.json("plan", "show", plan)}


def _plan(kv, plan: str = PLAN) -> dict:
    return next(r for r in kv.json("plan", "list") if r["plan"] == plan)


def test_a_tpot_target_binds_the_chat_plan_worked_by_hand(kv, engine):
    """1,000-token prompts, 500 generated tokens, 15 ms per output token. At C requests a step reads the weights
    once and C sequences' KV at the mean decode context (1,000 + 500 / 2 = 1,250 tokens, 79 blocks of 16 =
    1,264) and pays each running request's overhead, and each request's tokens are stretched by the C - 1 other
    prompts chunked in between:
    tpot(C) = weights_s + step_overhead + C x (kv_s + sequence_overhead) + (C - 1) x prefill_s / 500 <= 15 ms."""
    before = _quarters(kv)
    kv("plan", "set", PLAN, "--input-tokens", "1000", "--output-tokens", "500", "--tpot-ms", "15")
    f = next(e for e in EFFICIENCIES if e.needle == "h100" and e.engine == "vllm")
    with engine.connect() as conn:
        params = get_model(conn, "Llama-3-8B")["params_active"]
    bandwidth = H100_BANDWIDTH * f.bandwidth
    weights_s = params * 2 / bandwidth  # bf16 weights, TP 1
    kv_s = 1264 * 32 * 8 * (128 + 128) * 2 / bandwidth  # 32 layers x 8 KV heads x (K + V) x 128 x 2 B
    prefill_flops = 2 * params * 1000 + 4 * 32 * 128 * 1000 * 32 * 1000 / 2  # weights, then attention
    prefill_s = max(prefill_flops / (H100_BF16_FLOPS * f.compute), weights_s) + f.step_overhead_s  # one chunk
    # A sequence's decode FLOPs (2 x params + attention over 1,250 tokens) cost less than its KV read, so the
    # bandwidth line is the step's: solve weights_s + overhead + C (kv_s + sequence overhead) + (C - 1) prefill_s /
    # 500 = 0.015.
    assert (2 * params + 4 * 32 * 128 * 32 * 1250) / (H100_BF16_FLOPS * f.compute) < kv_s
    limit = (0.015 - weights_s - f.step_overhead_s + prefill_s / 500) / (kv_s + f.sequence_overhead_s + prefill_s / 500)
    row = _plan(kv)
    assert row["tpot_concurrency_limit"] == pytest.approx(limit, rel=1e-9)
    assert row["tpot_concurrency_reach"] == row["tpot_concurrency_limit"]
    assert row["latency_concurrency_limit"] == math.floor(limit) == 35  # 35.02 with the factors fitted today
    # The KV pool holds 53e9 B / 197,132,288 B per 1,500-token request (94 blocks x 16 x 131,072 B) = 268.85.
    assert row["workload_concurrency"] == pytest.approx(53e9 / (94 * 16 * 131072), rel=1e-12)
    assert row["users_per_replica"] == 35 and row["users_binding_constraint"] == "latency"
    after = _quarters(kv)
    # Memory alone: ceil(100 / 268.85) = 1 and ceil(250 / 268.85) = 1 replica; within 15 ms: ceil(100 / 35) = 3
    # and ceil(250 / 35) = 8 replicas of one GPU.
    assert [before[q]["gpus_needed"] for q in ("2026Q3", "2026Q4")] == [1, 1]
    assert [after[q]["gpus_needed"] for q in ("2026Q3", "2026Q4")] == [3, 8]
    assert after["2026Q4"]["capacity_users"] == 8 * 35
    assert after["2026Q4"]["users_binding_constraint"] == "latency"


def test_the_rollup_buys_the_gpus_a_latency_bound_plan_needs(kv):
    """The procurement rollup sums the plans' gpus_needed: the chat plan's 1 GPU in 2026Q4 becomes 8."""
    def h100():
        return next(r for r in kv.json("plan", "rollup", "--quarter", "2026Q4")["schedule"] if r["gpu"] == "H100-SXM")

    before = h100()
    kv("plan", "set", PLAN, "--input-tokens", "1000", "--output-tokens", "500", "--tpot-ms", "15")
    assert h100()["gpus_needed"] == before["gpus_needed"] + 8 - 1


def test_a_loose_target_leaves_memory_binding(kv):
    """A 1-second ttft target: the 1,000-token prefill (about 35 ms) leaves room for far more queued prompts than
    the pool's 268 requests (once requests spread out, fewer prompts queue at any concurrency), so every
    concurrency meets it: no latency limit (NULL, printed blank, never a made-up 1,000,000,000), memory binds and
    the plan needs what it needed."""
    before = _quarters(kv)
    kv("plan", "set", PLAN, "--input-tokens", "1000", "--output-tokens", "500", "--ttft-ms", "1000")
    row = _plan(kv)
    assert row["ttft_concurrency_limit"] is None and row["latency_concurrency_limit"] is None
    assert row["tpot_concurrency_limit"] is None  # no tpot target
    table = kv("plan", "list", "--wide").output
    assert "1,000,000,000" not in table
    # Only the reach the limit is read from (its own figure, so the workbook's formula stays within Excel's
    # 8,192 characters) says "every concurrency" as 1,000,000,000; every limit column is blank.
    record = next(r for r in csv.DictReader(io.StringIO(kv("plan", "list", "--format", "csv").output))
                  if r["plan"] == PLAN)
    assert [k for k, v in record.items() if v.startswith("1000000000")] == ["ttft_concurrency_reach"]
    assert record["ttft_concurrency_limit"] == record["latency_concurrency_limit"] == ""
    assert row["users_per_replica"] == row["workload_concurrency"] and row["users_binding_constraint"] == "memory"
    assert {q: r["gpus_needed"] for q, r in _quarters(kv).items()} == {q: r["gpus_needed"] for q, r in before.items()}


def test_a_plan_without_targets_is_unchanged(kv):
    """No target (or lengths alone): users_per_replica is workload_concurrency itself and no constraint is named;
    every figure of the plan's quarters is what it was."""
    before = _quarters(kv)
    for r in before.values():
        assert r["users_per_replica"] == r["workload_concurrency"] and r["users_binding_constraint"] is None
        assert r["replicas_needed"] == math.ceil(r["users"] / r["workload_concurrency"])
    kv("plan", "set", PLAN, "--input-tokens", "1000", "--output-tokens", "500")
    # The latency figures (tpot_ms, ...) now have a workload to answer for; what the plan serves and buys does not.
    served = ("max_concurrency", "workload_concurrency", "users_per_replica", "users_binding_constraint",
              "replicas_needed", "gpus_needed", "nodes_needed", "capacity_users", "headroom_users",
              "headroom_fraction", "cost_per_month", "capex", "cost_per_user_per_month")
    after = _quarters(kv)
    assert {q: [r[k] for k in served] for q, r in after.items()} == {q: [r[k] for k in served]
                                                                    for q, r in before.items()}


@pytest.mark.parametrize("args, message", [
    (("--tpot-ms", "-1"), "--tpot-ms must be a finite number of more than 0 and at most 1,000,000,000, not '-1'"),
    (("--ttft-ms", "soon"), "--ttft-ms must be a number, not 'soon'"),
    (("--tpot-ms", "50"), "needs the requests' lengths"),
    (("--input-tokens", "1000"), "--input-tokens and --output-tokens go together"),
    (("--input-tokens", "8000", "--output-tokens", "1000"), "longer than the context (8,192 tokens"),
    (("--input-tokens", "0", "--output-tokens", "10"), "--input-tokens: token count '0' must be at least 1"),
])
def test_bad_latency_options_are_refused_and_nothing_is_written(kv, state, args, message):
    kv("plan", "list")  # the registry exists before the command that must not write
    was = state()
    result = kv("plan", "set", PLAN, *args, ok=False)
    assert result.exit_code != 0
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert state() == was


def test_plan_add_takes_the_latency_workload(kv):
    kv("plan", "add", "chat-slo", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1", "--context",
       "8K", "--avg-tokens", "1500", "--kv-cache-memory", "53GB", "--input-tokens", "1000", "--output-tokens", "500",
       "--tpot-ms", "15")
    row = _plan(kv, "chat-slo")
    assert (row["input_tokens"], row["output_tokens"], row["tpot_target_ms"], row["ttft_target_ms"]) == (1000, 500,
                                                                                                         15.0, None)
    assert row["users_per_replica"] == 35  # the chat plan's deployment and workload: worked by hand above
    from kvreg.cli.plans import plan_add, plan_set

    for command in (plan_add, plan_set):  # a plan's concurrency is what its figures solve for
        assert "--concurrency" not in {o for p in command.params for o in p.opts}


def test_classes_carry_lengths_and_targets(kv):
    """The mix's request is the share-weighted mean of its classes' lengths, and every request on a replica
    meets the strictest target: chat 1,000/500 at 0.8 with 15 ms, documents 12,000/1,000 at 0.2 with none ->
    0.8 x 1,000 + 0.2 x 12,000 = 3,200 prompt tokens, 0.8 x 500 + 0.2 x 1,000 = 600 generated, 15 ms."""
    kv("plan", "set", "mixed-llama3-8b", "--workload", "chat=1500:0.8:1000/500:15/-,documents=13000:0.2:12000/1000")
    row = _plan(kv, "mixed-llama3-8b")
    assert row["workload_input_tokens"] == pytest.approx(3200)
    assert row["workload_output_tokens"] == pytest.approx(600)
    assert row["workload_tpot_target_ms"] == 15.0 and row["workload_ttft_target_ms"] is None
    assert row["users_per_replica"] == min(row["workload_concurrency"], row["latency_concurrency_limit"])
    assert row["workload"] == "chat=1500:0.8:1000/500:15/-,documents=13000:0.2:12000/1000"
    classes = kv.json("plan", "workload", "mixed-llama3-8b")
    assert [(c["class_input_tokens"], c["class_tpot_target_ms"]) for c in classes] == [(1000, 15.0), (12000, None)]
    # A plan-wide target applies to every class too: the stricter of the two binds.
    kv("plan", "set", "mixed-llama3-8b", "--tpot-ms", "12")
    assert _plan(kv, "mixed-llama3-8b")["workload_tpot_target_ms"] == 12.0


@pytest.mark.parametrize("workload, message", [
    ("chat=1500:0.8:1000/500,documents=13000:0.2", "gives request lengths and 'documents' does not"),
    ("chat=1500:0.8:1000/500:-5/-,documents=13000:0.2:12000/1000", "workload class 'chat': --tpot-ms must be a finite number of more than 0 and at most 1,000,000,000, not '-5'"),
    ("chat=1500:0.8:1000", "write two values with a slash"),
    ("chat=1500:0.8:-:50/-,documents=13000:0.2", "needs the requests' lengths"),
])
def test_bad_class_latency_is_refused_and_nothing_is_written(kv, state, workload, message):
    kv("plan", "list")
    was = state()
    result = kv("plan", "set", "mixed-llama3-8b", "--workload", workload, ok=False)
    assert result.exit_code != 0
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert state() == was


def test_class_lengths_and_plan_lengths_are_not_both_given(kv, state):
    kv("plan", "list")
    was = state()
    result = kv("plan", "set", "mixed-llama3-8b", "--input-tokens", "1000", "--output-tokens", "500", "--workload",
                "chat=1500:0.8:1000/500,documents=13000:0.2:12000/1000", ok=False)
    assert result.exit_code != 0 and "not both" in result.output
    assert state() == was


def test_a_target_no_replica_meets_gets_no_gpus_and_says_so(kv):
    """1 ms per output token: one decode step alone reads 16 GB of weights at 3.25 TB/s (4.9 ms), so no
    concurrency meets it: users_per_replica 0, no replicas (as for a plan that does not fit), and the command
    says why."""
    out = kv("plan", "set", PLAN, "--input-tokens", "1000", "--output-tokens", "500", "--tpot-ms", "1").output
    assert "serves no user: fits in memory, but no replica meets the tpot target even with one request" in out
    row = _plan(kv)
    assert row["tpot_concurrency_limit"] == 0 and row["users_per_replica"] == 0
    assert row["users_binding_constraint"] == "latency"
    assert [(r["replicas_needed"], r["gpus_needed"]) for r in _quarters(kv).values()] == [(None, None)] * 2


def test_a_target_one_request_cannot_meet_is_counted_as_not_fitting(kv, engine, tmp_path):
    """A 5 ms tpot target on the chat plan (1,000-token prompts, 500 generated). With one request a decode step
    reads the weights once and one sequence's KV at the mean decode context (1,250 tokens, 79 blocks of 16 =
    1,264) and pays its one request's overhead, and no other prompt is chunked in: tpot(1) = weights_s +
    step_overhead + kv_s + sequence_overhead = 4.84 + 2.0 + 0.050 + 0.115 = 7.01 ms with the factors fitted today,
    over the 5 ms target at every concurrency. The plan serves no user, so the rollup counts it in plans_not_fitting,
    its reason says why, and the report lists it under "Not counted" rather than dropping its demand."""
    def h100(quarter="2026Q4"):
        return next(r for r in kv.json("plan", "rollup", "--quarter", quarter)["schedule"] if r["gpu"] == "H100-SXM")

    before = h100()
    kv("plan", "set", PLAN, "--input-tokens", "1000", "--output-tokens", "500", "--tpot-ms", "5")
    f = next(e for e in EFFICIENCIES if e.needle == "h100" and e.engine == "vllm")
    with engine.connect() as conn:
        params = get_model(conn, "Llama-3-8B")["params_active"]
    bandwidth = H100_BANDWIDTH * f.bandwidth
    weights_s = params * 2 / bandwidth  # bf16 weights, TP 1
    kv_s = 1264 * 32 * 8 * (128 + 128) * 2 / bandwidth  # 32 layers x 8 KV heads x (K + V) x 128 x 2 B
    one_request_tpot_ms = 1000 * (weights_s + f.step_overhead_s + kv_s + f.sequence_overhead_s)
    row = _plan(kv)
    assert row["tpot_ms"] == pytest.approx(one_request_tpot_ms, rel=1e-9)  # the plan's figures at one request
    assert one_request_tpot_ms > 5
    assert row["tpot_concurrency_limit"] == 0 and row["latency_concurrency_limit"] == 0
    assert row["fits"] == 1 and row["users_per_replica"] == 0
    assert row["reason"] == "fits in memory, but no replica meets the tpot target even with one request"
    after = h100()
    # The chat plan has demand in 2026Q4: it moves from the counted plans (1 GPU) to plans_not_fitting.
    assert after["plans"] == before["plans"]
    assert after["plans_not_fitting"] == before["plans_not_fitting"] + 1
    assert after["gpus_needed"] == before["gpus_needed"] - 1
    folder = tmp_path / "r"
    kv("report", "--quarter", "2026Q4", "--out", str(folder), "--format", "md")
    md = next(folder.rglob("*.md")).read_text()
    assert f"- {PLAN}: fits in memory, but no replica meets the tpot target even with one request\n" in md
    # and its own section says so, not that it fits
    assert "**Serves no user:** fits in memory, but no replica meets the tpot target even with one request." in md


def _chat_terms(engine) -> dict:
    """The chat plan's latency terms worked by hand (Llama-3-8B, bf16, TP 1 on one H100 SXM, vLLM's factors):
    seconds of one decode step's weight read and of one sequence's KV read at the mean decode context (1,000 +
    500 / 2 = 1,250 tokens, 79 blocks of 16 = 1,264), one sequence's decode FLOPs, and the 1,000-token prefill
    (one chunk of at most 8,192 tokens: the slower of its FLOPs and a weight read, plus the step's overhead)."""
    f = next(e for e in EFFICIENCIES if e.needle == "h100" and e.engine == "vllm")
    with engine.connect() as conn:
        params = get_model(conn, "Llama-3-8B")["params_active"]
    bandwidth, flops = H100_BANDWIDTH * f.bandwidth, H100_BF16_FLOPS * f.compute
    weights_s = params * 2 / bandwidth
    kv_s = 1264 * 32 * 8 * (128 + 128) * 2 / bandwidth  # 32 layers x 8 KV heads x (K + V) x 128 x 2 B
    compute_s = (2 * params + 4 * 32 * 128 * 32 * 1250) / flops  # 2 x params + attention over 1,250 tokens
    prefill_s = max((2 * params * 1000 + 4 * 32 * 128 * 1000 * 32 * 1000 / 2) / flops, weights_s) + f.step_overhead_s
    return dict(f=f, weights_s=weights_s, kv_s=kv_s, compute_s=compute_s, prefill_s=prefill_s)


def test_a_ttft_target_binds_the_chat_plan_worked_by_hand(kv, engine):
    """95 ms to the first token, 1,000-token prompts and 500 generated. One request waits request_overhead_s
    and its own prefill (57 ms + 35.0 ms = 92.0 ms), so q = (0.095 - overhead) / prefill_s - 1 = 0.086 prompts may
    queue ahead of it. With C requests running, (C - 1) x prefill_s / 2 x min(1, prefill_s / (500 x step)) of
    queued prefill must stay within q x prefill_s: (C - 1) x prefill_s <= k x step(C), k = 2 x q x 500 (the
    queue fraction is below 1 here). A step is a + b x C on its bandwidth line (a = weights + step overhead,
    b = one sequence's KV and its overhead) and on its FLOP line (a = step overhead, b = one sequence's FLOPs and
    its overhead); the larger C within either is the limit: C <= (k a + p) / (p - k b), p = prefill_s. The
    bandwidth line gives 29.91: 29 users a replica against the 268.85 its KV pool holds, so latency binds; 100
    and 250 users need ceil(100 / 29) = 4 and ceil(250 / 29) = 9 replicas of one GPU."""
    kv("plan", "set", PLAN, "--input-tokens", "1000", "--output-tokens", "500", "--ttft-ms", "95")
    t = _chat_terms(engine)
    f, p = t["f"], t["prefill_s"]
    q = (0.095 - f.request_overhead_s) / p - 1
    k = 2 * q * 500
    kv_b, flops_b = t["kv_s"] + f.sequence_overhead_s, t["compute_s"] + f.sequence_overhead_s
    on_bandwidth = (k * (t["weights_s"] + f.step_overhead_s) + p) / (p - k * kv_b)
    on_flops = (k * f.step_overhead_s + p) / (p - k * flops_b)
    assert 0 < q < 1 and p - k * kv_b > 0 and p - k * flops_b > 0
    limit = max(1 + 2 * q, on_bandwidth, on_flops)
    row = _plan(kv)
    assert row["ttft_queue_allowance"] == pytest.approx(q, rel=1e-9)
    assert row["ttft_concurrency_limit"] == pytest.approx(limit, rel=1e-9) == pytest.approx(29.91, abs=0.01)
    assert row["ttft_concurrency_reach"] == row["ttft_concurrency_limit"]  # a limit below 1,000,000,000 is the reach
    assert row["tpot_concurrency_limit"] is None  # no tpot target
    assert row["latency_concurrency_limit"] == math.floor(limit) == 29
    assert row["users_per_replica"] == 29 and row["users_binding_constraint"] == "latency"
    quarters = _quarters(kv)
    assert [quarters[q]["gpus_needed"] for q in ("2026Q3", "2026Q4")] == [4, 9] == [math.ceil(100 / 29),
                                                                                   math.ceil(250 / 29)]


def test_a_ttft_target_one_request_misses_serves_no_user(kv, engine):
    """80 ms to the first token: one request alone waits request_overhead_s and its prefill, 57 ms + 35.0 ms =
    92.0 ms with today's factors, over the target at every concurrency (q < 0). users_per_replica 0, no replicas,
    and the reason names the ttft target."""
    kv("plan", "set", PLAN, "--input-tokens", "1000", "--output-tokens", "500", "--ttft-ms", "80")
    t = _chat_terms(engine)
    one_request_ms = 1000 * (t["f"].request_overhead_s + t["prefill_s"])
    assert one_request_ms == pytest.approx(92.0, abs=0.05) and one_request_ms > 80
    row = _plan(kv)
    assert row["ttft_ms"] == pytest.approx(one_request_ms, rel=1e-9)  # the plan's figures at one request
    assert row["ttft_concurrency_limit"] == 0 and row["latency_concurrency_limit"] == 0
    assert row["fits"] == 1 and row["users_per_replica"] == 0 and row["users_binding_constraint"] == "latency"
    assert row["reason"] == "fits in memory, but no replica meets the ttft target even with one request"
    assert [(r["replicas_needed"], r["gpus_needed"]) for r in _quarters(kv).values()] == [(None, None)] * 2


def test_plan_list_and_show_print_the_binding_limit_in_every_format(kv):
    """With a latency target the table prints users_binding_constraint in place of fits, json and csv carry the
    same value, and a loose target's latency limit is never 1,000,000,000: null in json, empty in csv, and in the
    table the words the web pages use ("none"; "no target" for a plan without one), never an empty cell."""
    import csv
    import io

    kv("plan", "set", PLAN, "--input-tokens", "1000", "--output-tokens", "500", "--ttft-ms", "95")
    kv("plan", "set", "docs-llama3-8b", "--input-tokens", "1000", "--output-tokens", "500", "--ttft-ms", "100000")
    lines = kv("plan", "list", "--wide").output.splitlines()
    head = lines[0].split()
    assert "users_binding_constraint" in head and "fits" not in head
    at = lines[0].index("users_binding_constraint")  # a text column: left-aligned under its heading
    rows = {line.split()[0]: line for line in lines[2:]}
    assert [rows[p][at:].split()[:2] for p in (PLAN, "docs-llama3-8b", "longctx-llama31-70b")] == [
        ["latency"], ["memory", "fits,"], ["no", "target"]]  # docs-llama3-8b's reason follows: "fits, beyond ..."
    assert "1,000,000,000" not in "\n".join(lines)
    listed = {r["plan"]: r for r in kv.json("plan", "list")}
    from_csv = {r["plan"]: r for r in csv.DictReader(io.StringIO(kv("plan", "list", "--format", "csv").output))}
    assert [listed[p]["users_binding_constraint"] for p in (PLAN, "docs-llama3-8b")] == ["latency", "memory"]
    assert [from_csv[p]["users_binding_constraint"] for p in (PLAN, "docs-llama3-8b")] == ["latency", "memory"]
    assert listed["docs-llama3-8b"]["latency_concurrency_limit"] is None
    assert from_csv["docs-llama3-8b"]["latency_concurrency_limit"] == ""
    # without demand, plan show prints the plan's record: the binding limit, the blank latency limit, no fits
    kv("plan", "add", "docs-loose", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1",
       "--context", "8K", "--input-tokens", "1000", "--output-tokens", "500", "--ttft-ms", "100000")
    record = dict(line.split(None, 1) if " " in line.strip() else (line.strip(), "")
                  for line in kv("plan", "show", "docs-loose").output.splitlines())
    assert record["users_binding_constraint"] == "memory" and record["latency_concurrency_limit"] == "none"
    assert "fits" not in record


def test_one_plan_is_said_the_same_way_in_the_cli_web_report_and_workbook(kv, tmp_path):
    """The chat plan with an 80 ms TTFT target (one request needs 92.0 ms, worked above) serves no user. Each
    output reads the same view row and says it in the same words (kvreg.figures.labels): SERVES_NO_USER and the
    view's reason, the binding limit latency, and 'fits in memory' where a table heads the fits column."""
    import re

    from openpyxl import load_workbook

    from kvreg.figures.labels import FITS_IN_MEMORY, SERVES_NO_USER

    said = kv("plan", "set", PLAN, "--input-tokens", "1000", "--output-tokens", "500", "--ttft-ms", "80").output
    reason = "fits in memory, but no replica meets the ttft target even with one request"
    assert _plan(kv)["reason"] == reason and _plan(kv)["users_binding_constraint"] == "latency"
    assert f"{SERVES_NO_USER.lower()}: {reason}" in said  # the CLI's note
    assert next(r for r in kv.json("plan", "show", PLAN))["users_binding_constraint"] == "latency"

    page = _web(kv, f"/plans/{PLAN}")
    lead = re.search(r'<p class="lead" id="users-served">([^<]*)</p>', page).group(1)
    assert lead == f"{SERVES_NO_USER}: {reason}"  # the page leads with it, before the notes
    assert page.index(lead) < page.index('class="notes"')
    listing = _web(kv, "/plans")
    assert f">{FITS_IN_MEMORY}<" in listing and ">latency<" in listing

    folder = tmp_path / "r"
    kv("report", "--quarter", "2026Q4", "--out", str(folder), "--format", "md,xlsx")
    md = next(folder.rglob("capacity.md")).read_text()
    assert f"**{SERVES_NO_USER}:** {reason}." in md
    # its demand line: 250 users, unmet because of the latency target
    assert (f"Demand in 2026Q4: 250 users, unmet because of the latency target: the plan serves no user ({reason}),"
            " so no GPUs are counted for it.") in md
    assert "**latency binds**" in md

    book = load_workbook(next(folder.rglob("capacity.xlsx")), data_only=True)  # the values stored with formulas
    cards = book["Plan cards"]
    (top, col), = [(c.row, c.column) for row in cards.iter_rows() for c in row if c.value == PLAN]
    below = {cards.cell(r, col).value: cards.cell(r, col + 1).value for r in range(top + 1, top + 40)}
    assert below["Users per replica (users)"] == 0 and below["Binding limit (memory or latency)"] == "latency"
    assert reason in [cards.cell(r, col).value for r in range(top + 1, top + 40)]
    assert "Fits in memory (1 = yes, 0 = no)" in below


def _web(kv, path: str) -> str:
    """The page `kvreg serve` answers at `path` for kv's registry, called in this process, entities unescaped."""
    import html

    import anyio
    import httpx

    from kvreg.web.app import create_app

    async def get():
        transport = httpx.ASGITransport(app=create_app(kv.url))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return (await client.get(path)).text

    return html.unescape(anyio.run(get))


def test_the_web_says_which_limit_binds_and_leaves_no_latency_cell_empty(kv):
    """The chat plan's 95 ms TTFT target binds at 29 users (worked above): its page leads with it, its facts
    read as labels. On the plans table, a plan with a target every concurrency meets (docs, 100 s) has no latency
    limit, "none", and memory binds; a plan without a target reads "none" and "no target", never an empty cell."""
    import re

    kv("plan", "set", PLAN, "--input-tokens", "1000", "--output-tokens", "500", "--ttft-ms", "95")
    kv("plan", "set", "docs-llama3-8b", "--input-tokens", "1000", "--output-tokens", "500", "--ttft-ms", "100000")
    page = _web(kv, f"/plans/{PLAN}")
    assert re.search(r'<p class="lead" id="users-served">([^<]*)</p>', page).group(1) == (
        "Latency binds: 29.00 users per replica")  # a real figure: 29.00 on SQLite and PostgreSQL alike
    assert '<span title="users_binding_constraint">Binding limit (memory or latency)</span><b>latency</b>' in page
    assert '<span title="fits">Fits in memory</span><b>yes</b>' in page
    assert '<span title="kv_pool_gib_per_gpu">KV pool per GPU (GiB)</span>' in page
    listing = _web(kv, "/plans")
    heads = re.findall(r"<th[^>]*>(?:<[^>]+>)*([^<]+)", listing.split("<tbody")[0])
    rows = {re.search(r'href="/plans/([^"]+)"', tr).group(1): re.findall(r"<td[^>]*>(?:<a[^>]*>)?([^<]*)", tr)
            for tr in listing.split("<tbody")[1].split("<tr")[1:]}
    cell = {p: dict(zip(heads, cells)) for p, cells in rows.items()}
    assert [cell[p]["latency limit"] for p in (PLAN, "docs-llama3-8b", "longctx-llama31-70b")] == [
        "29", "none", "none"]
    assert [cell[p]["binds"] for p in (PLAN, "docs-llama3-8b", "longctx-llama31-70b")] == [
        "latency", "memory", "no target"]
    assert all(cell[p][h] for p in cell for h in ("memory limit", "latency limit", "binds", "fits in memory"))
