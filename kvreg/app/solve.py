"""The reverse solvers: `kvreg plan solve context`, `solve gpus` and `solve reserve`.

They answer reverse questions ("the longest context that serves N users on G GPUs") by searching: candidate
plans are evaluated as what-ifs (kvreg.app.whatif.evaluate: bound as parameters in place of plan and demand
rows and read through `plan_quarter`'s own SQL; nothing is written), so the only thing Python does is compare
a view's `gpus_needed` with a target. No formula is written twice.
"""

from __future__ import annotations

import math

from kvreg.app.plans import plan_spec, validate_plan, validate_workload
from kvreg.app.registry import check_int, get_model
from kvreg.app.whatif import evaluate, fewest_gpus, solver_tps
from kvreg.core.errors import KvregError
from kvreg.core.units import format_tokens, parse_quarter
from kvreg.db.read import list_demand

# The largest context the context solver tries: parse_tokens' own limit.
MAX_CONTEXT = 2**40
# The reserve solver answers on a grid of 0.01 percentage points.
RESERVE_STEP = 10_000


def _serves(r: dict, gpus: int) -> bool:
    """An unsaved plan serves its users on `gpus` GPUs: it fits and needs no more than that."""
    return bool(r["fits"]) and r["gpus_needed"] is not None and r["gpus_needed"] <= gpus


def search_largest(lanes: list, lo: int, hi: int, probe, width: int = 16) -> dict:
    """Per lane, the largest x in [lo, hi] where a predicate holds; None where it fails at lo.

    The predicate must hold up to a point and fail after it (more context, or more reserve,
    never needs fewer GPUs). `probe([(lane, x), ...])` answers a batch in one trip through the
    views: first powers of two bracket each answer, then each round narrows every lane's
    bracket `width`-fold, so a 2^40 range takes a handful of trips whatever the lane count.
    """
    ladder = sorted({lo, hi} | {2**i for i in range(hi.bit_length()) if lo < 2**i < hi})
    good: dict = dict.fromkeys(lanes)  # largest x seen to hold
    bad = {lane: hi + 1 for lane in lanes}  # smallest x seen to fail (hi + 1: past the range)
    points = [(lane, x) for lane in lanes for x in ladder]
    while points:
        for (lane, x), ok in zip(points, probe(points)):
            if ok:
                good[lane] = x if good[lane] is None else max(good[lane], x)
            else:
                bad[lane] = min(bad[lane], x)
        points = []
        for lane in lanes:
            if good[lane] is None or bad[lane] - good[lane] <= 1:
                continue
            g, b = good[lane], bad[lane]
            n = min(width, b - g - 1)
            points += [(lane, x) for x in sorted({g + (b - g) * i // (n + 1) for i in range(1, n + 1)} - {g, b})]
    return good


def _solver_row(conn, spec: dict) -> tuple[dict, object]:
    """Validate a solver's deployment; with --tp auto the row's TP is None (the solver tries each)."""
    tp = spec.get("tp", 1)
    row = validate_plan(conn, spec, named=False, choose_tp=False)
    row["workload"] = validate_workload(spec.get("workload"), row["context_tokens"], row["avg_tokens"])
    return row, tp


# --------------------------------------------------------------------------- solvers


def solve_context(conn, spec: dict, users, gpus, *, beyond_claim: bool = False) -> dict:
    """The longest context that serves `users` concurrent users on `gpus` GPUs, at most the model's
    claimed context (max_position_embeddings) unless `beyond_claim`.

    Without avg_tokens or a workload mix each user holds a whole context (the workload is the
    context); with them the context is searched from the longest request up. With --tp auto every
    valid TP is searched and the longest context wins (ties: the smaller TP).
    """
    users = check_int(users, "users")
    gpus = check_int(gpus, "gpus")
    row, tp = _solver_row(conn, {**spec, "context_tokens": MAX_CONTEXT})
    row["users"] = users
    shortest = max([row["avg_tokens"] or 1] + [c["avg_tokens"] for c in row["workload"]])
    claim = int(get_model(conn, spec["model"])["max_position_embeddings"])
    limit = MAX_CONTEXT if beyond_claim else min(claim, MAX_CONTEXT)
    if shortest > limit:
        raise KvregError(f"requests of {shortest:,} tokens are longer than {spec['model']}'s {claim:,}-token claim "
                         "(max_position_embeddings): shorten them, or give --beyond-claim to search past it")
    tps = solver_tps(conn, row, spec["model"], tp, gpus)
    if not tps or tps[0] * row["pp"] > gpus:
        raise KvregError(f"{gpus} GPU(s) cannot hold one replica of TP {tps[0] if tps else 1} x PP {row['pp']}: "
                         "give more --gpus or a smaller --tp/--pp")

    def probe(points):
        return [_serves(r, gpus) for r in evaluate(conn, [{**row, "tp": t, "context_tokens": c} for t, c in points])]

    found = {t: c for t, c in search_largest(tps, shortest, limit, probe).items() if c is not None}
    if not found:
        at_one = evaluate(conn, [{**row, "tp": tps[-1], "context_tokens": shortest}])[0]
        why = at_one["reason"] or (f"even {shortest:,}-token contexts need {at_one['gpus_needed']} GPUs "
                                   f"at TP {tps[-1]}")
        raise KvregError(f"{users} users do not fit on {gpus} GPU(s) of {spec['gpu']} at any context: {why}")
    best_tp = max(found, key=lambda t: (found[t], -t))
    best = found[best_tp]
    result = evaluate(conn, [{**row, "tp": best_tp, "context_tokens": best}], full=True)[0]
    limited_by = ("search limit" if best == MAX_CONTEXT else "model's claim" if best == limit and not beyond_claim
                  else "memory")
    return _answer(result, users=users, gpus=gpus, context=format_tokens(best), limited_by=limited_by)


def solve_gpus(conn, spec: dict, users) -> dict:
    """The fewest GPUs that serve `users` concurrent users at the spec's context (and avg_tokens).

    With --tp auto every valid TP in the node is tried; the fewest GPUs win (ties: the smaller TP,
    which gives more, smaller replicas).
    """
    users = check_int(users, "users")
    row, tp = _solver_row(conn, spec)
    tps = solver_tps(conn, row, spec["model"], tp)
    best, results = fewest_gpus(conn, row, tps, users)
    if best is None:
        last = results[-1]
        raise KvregError(f"{spec['model']} does not fit on {spec['gpu']} at TP {last['tp']}: {last['reason']}")
    return _answer(best, users=users, gpus=best["gpus_needed"], context=format_tokens(int(best["context_tokens"])))


def solve_reserve(conn, plan: str, quarter: str | None = None) -> list[dict]:
    """Per demand quarter: the largest reserve (on a 0.0001 grid) at which the plan still serves its
    users with the GPUs it needs today. A larger reserve shrinks the KV pool and so never needs fewer GPUs."""
    spec = plan_spec(conn, plan)
    if spec["rule"] != "theoretical":
        raise KvregError(f"plan {plan!r} follows the {spec['rule']} rule, where the reserve does not change the KV "
                         f"pool: switch with `kvreg plan set {plan} --rule theoretical` to solve for it")
    if spec["kv_cache_memory_bytes"] is not None:
        raise KvregError(f"plan {plan!r} sets its KV pool directly (kv_cache_memory_bytes), so the reserve does not "
                         f"change it: switch with `kvreg plan set {plan} --reserve 0.12` first")
    demand = {d["quarter"]: d for d in list_demand(conn, plan=plan, quarter=quarter)}
    if not demand:
        where = f" in {parse_quarter(quarter)}" if quarter else ""
        raise KvregError(f"plan {plan!r} has no demand{where}: add it with `kvreg demand set {plan} QUARTER USERS`")
    for d in demand.values():
        if not d["fits"]:
            raise KvregError(f"plan {plan!r} does not fit: {d['reason']}")
    row = validate_plan(conn, spec)
    del row["name"]
    row["workload"] = validate_workload(spec["workload"], row["context_tokens"], row["avg_tokens"])

    def at(q: str, k: int) -> dict:
        return {**row, "reserve": k / RESERVE_STEP, "users": demand[q]["users"]}

    def probe(points):
        rs = evaluate(conn, [at(q, k) for q, k in points])
        return [_serves(r, demand[q]["gpus_needed"]) for (q, _), r in zip(points, rs)]

    # The stored reserve serves by definition; the grid point at or below it does too.
    lo = math.floor(row["reserve"] * RESERVE_STEP)
    best = search_largest(list(demand), lo, RESERVE_STEP - 1, probe)
    quarters = list(demand)
    finals = evaluate(conn, [at(q, best[q]) for q in quarters], full=True)
    return [dict(
        plan=plan, quarter=q, users=demand[q]["users"], reserve=row["reserve"], gpus_needed=demand[q]["gpus_needed"],
        max_reserve=best[q] / RESERVE_STEP, gpus_needed_at_max_reserve=f["gpus_needed"],
        workload_concurrency_at_max_reserve=f["workload_concurrency"],
        capacity_users_at_max_reserve=f["capacity_users"], kv_pool_gib_per_gpu_at_max_reserve=f["kv_pool_gib_per_gpu"],
    ) for q, f in zip(quarters, finals)]


SOLVE_COLUMNS = [
    "model", "gpu", "tp", "pp", "dp_attention", "gpus_per_node", "kv_dtype", "weight_dtype", "users", "gpus",
    "context_tokens", "context", "avg_tokens", "workload_tokens", "reserve", "kv_cache_memory_bytes", "block_size",
    "fits", "reason", "max_concurrency", "workload_concurrency", "users_per_replica", "users_binding_constraint",
    "replicas_needed", "gpus_needed", "nodes_needed",
    "capacity_users", "headroom_users", "kv_pool_gib_per_gpu", "context_within_claim",
    "cost_per_month", "capex", "limited_by",
]


def _answer(r: dict, **extra) -> dict:
    merged = {**r, **extra}
    return {k: merged.get(k) for k in SOLVE_COLUMNS if k in merged}
