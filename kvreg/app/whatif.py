"""Unsaved plans answered through the views: the what-if evaluation the solvers, `plan add --tp auto` and
the optimizer share.

Candidate plans are bound as parameters in place of the plan, workload_class and demand tables' rows and
read through `plan_quarter`'s (and `plan_capacity`'s) own SQL (kvreg.db.read.whatif): nothing is written,
and no formula is written twice.
"""

from __future__ import annotations

from kvreg.app.capacity import check_dp_attention, check_layout, valid_tps
from kvreg.core.errors import KvregError
from kvreg.db.read import whatif

# The quarter of an unsaved plan's one demand entry (evaluate): any quarter serves, its users hold in it.
_WHATIF_QUARTER = "1970Q1"


def evaluate(conn, rows: list[dict], *, full: bool = False, columns: tuple[str, ...] | None = None) -> list[dict]:
    """plan_quarter rows for unsaved plans: each row is a validated plan row (no name) plus `users`.

    Each row is a plan with one demand entry, bound as parameters in place of the plan, workload_class
    and demand tables' rows and read through the views' own SQL (kvreg.db.read.whatif): nothing is
    written. `full` adds the plan_capacity figures; `columns` reads only these plan_quarter columns, and
    computes only the figures they need (a search over many candidates that needs a few figures).
    """
    if len(rows) > WHATIF_BATCH:
        return [r for i in range(0, len(rows), WHATIF_BATCH)
                for r in evaluate(conn, rows[i:i + WHATIF_BATCH], full=full, columns=columns)]
    if not rows:
        return []
    tables = _whatif_tables(rows)
    # With `columns` the what-if computes only the figures they need (a slim plan_quarter, compiled from the
    # same declarations: kvreg.figures.views.slim_grains).
    by_id = {r["plan_id"]: r for r in whatif(conn, "plan_quarter", tables, _WHATIF_QUARTER_SQL, columns=columns)}
    if full:
        for cap in whatif(conn, "plan_capacity", tables, _WHATIF_CAPACITY_SQL):
            pid = cap["plan_id"]
            by_id[pid] = {**by_id[pid], **{k: v for k, v in cap.items() if k not in by_id[pid]}}
    out = []
    for pid in range(1, len(rows) + 1):
        r = by_id[pid]
        for k in ("plan_id", "plan", "quarter"):
            r.pop(k, None)
        out.append(r)
    return out


# Unsaved plans answered per statement. The bound rows are read as tables without indexes, so the views'
# joins on plan_id cost the square of the rows in one statement: 3,948 candidates in one statement took
# 92 s, in batches of this size they take about a second.
WHATIF_BATCH = 256


def _whatif_tables(rows: list[dict]) -> dict[str, list[dict]]:
    """The plan, workload_class and demand rows of unsaved plans, numbered 1, 2, ... in order; each plan
    has one demand entry, in a quarter no report uses."""
    plans, classes, demand = [], [], []
    for pid, r in enumerate(rows, start=1):
        plans.append({**{k: v for k, v in r.items() if k not in ("users", "workload")}, "id": pid,
                      "name": f"what-if {pid}"})
        classes += [{**c, "plan_id": pid} for c in r.get("workload") or []]
        demand.append({"id": pid, "plan_id": pid, "quarter": _WHATIF_QUARTER, "users": r["users"]})
    for cid, c in enumerate(classes, start=1):
        c["id"] = cid
    return {"plan": plans, "workload_class": classes, "demand": demand}


# Fixed statement texts, so the driver's statement cache prepares the (large) view queries once
# per connection; a search runs them many times.
_WHATIF_QUARTER_SQL = "SELECT * FROM plan_quarter"
_WHATIF_CAPACITY_SQL = "SELECT * FROM plan_capacity"


def solver_tps(conn, row: dict, model: str, tp, max_gpus: int | None = None) -> list[int]:
    """The TPs a solver tries: the one given, or (auto) every valid TP of the node the DP size divides."""
    if tp != "auto":
        return [row["tp"]]
    check_layout("auto", row["pp"], row["dp_attention"], row["gpus_per_node"])
    valid = valid_tps(conn, model, row["gpus_per_node"], row["pp"])
    if not valid:
        raise KvregError(f"no TP is valid for {model} in a {row['gpus_per_node']}-GPU node with PP {row['pp']}")
    check_dp_attention(row["dp_attention"], "auto", valid)
    limit = row["gpus_per_node"] if max_gpus is None else min(row["gpus_per_node"], max_gpus // row["pp"])
    return [t for t in valid if t % row["dp_attention"] == 0 and t <= limit]


def fewest_gpus(conn, row: dict, tps: list[int], users: int) -> tuple[dict | None, list[dict]]:
    """Of the layouts at these TPs, the one that serves `users` with the fewest GPUs (ties: the smaller
    TP, which gives more, smaller replicas), or None when none fits; and every layout's figures.
    One function for `plan solve gpus` and `plan add --tp auto`."""
    results = evaluate(conn, [{**row, "tp": t, "users": users} for t in tps], full=True)
    fitting = [r for r in results if r["fits"] and r["gpus_needed"] is not None]
    best = min(fitting, key=lambda r: (r["gpus_needed"], r["tp"])) if fitting else None
    return best, results
