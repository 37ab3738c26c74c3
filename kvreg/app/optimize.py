"""`kvreg plan optimize`: the cheapest fleet for a horizon, solved exactly as a mixed-integer program.

Per plan the program picks one setting (GPU type, TP, KV dtype) among the allowed ones, held over
the horizon; per GPU type and quarter it picks the GPUs to buy. A plan may use its own GPU type and
KV dtype, those stored on it (plan columns allow_gpus and allow_kv_dtypes, `kvreg plan set
--allow-gpus`) and those the run allows every plan; TP is free among the layouts the model allows;
PP and every other setting stay the plan's own. Every candidate's capacity is read from the views:
each distinct deployment (plan settings x GPU x TP x KV dtype) is bound once as a what-if (nothing
is written) and all are read through `plan_quarter` in one query (kvreg.app.whatif.evaluate); its GPUs
needed for a quarter's users is the declared `gpus_needed` figure evaluated on that row
(kvreg.figures.python.PythonEvaluator), never a second formula.

The program (scipy.optimize.milp, HiGHS's branch and bound):

- x[p, c] in {0, 1}: plan p runs setting c; sum_c x[p, c] = 1.
- k[g, q] >= 0 whole: purchases of GPU type g landing in quarter q, in units of node_gpus with
  --whole-nodes, else of single GPUs. GPUs bought stay bought.
- For every GPU type g and quarter q: sum_{p, c on g} gpus_needed[p, c, q] x[p, c]
  <= installed[g, q] + sum_{q' <= q} unit[g] k[g, q'] (the installed fleet is reused).
- Lead times: k[g, q] = 0 when q - lead_time_quarters[g] is before the horizon's first quarter; a
  GPU type without a unit_price cannot be bought.
- An optional budget per quarter: sum_g unit_price[g] unit[g] k[g, q] <= budget (the capex landing
  in q).
- Objective: sum capex (1 - residual) + sum_q running cost, the running cost of a quarter being
  price_per_hour x 730 h x 3 months x the GPUs in use (a GPU type without a price_per_hour runs free).

`current_cost` is the same program with every plan held at its own setting: today's plans with the
purchases they need (within the same lead times and budget).
"""

from __future__ import annotations

import copy
import math

from kvreg.app.capacity import valid_tps
from kvreg.app.plans import LATENCY_FIELDS, PLAN_WORKLOAD, SPEC_DEFAULTS, allowed_names, check_allowed, set_plan
from kvreg.app.registry import dtype_names, get_gpu
from kvreg.app.whatif import evaluate
from kvreg.core.errors import KvregError
from kvreg.db.read import list_gpus, rollup, runner, schedule_horizon
from kvreg.figures.declarations import FIGURES, HOURS_PER_MONTH
from kvreg.figures.expr import Ref, names
from kvreg.figures.python import PythonEvaluator
from kvreg.figures.quarters import index_of_quarter, quarter_of_index

MONTHS_PER_QUARTER = 3
STATUS = {0: "optimal", 1: "time limit reached", 2: "infeasible", 3: "unbounded", 4: "solver error"}
PLAN_COLUMNS = ["plan", "gpu", "tp", "kv_dtype", "changed", "current_gpu", "current_tp", "current_kv_dtype",
                "gpus_in_last_quarter"]
PURCHASE_COLUMNS = ["gpu", "quarter", "gpus_to_buy", "capex_to_buy", "order_by"]


def _view_names(name: str) -> set[str]:
    """The figures `name`'s declaration refers to directly."""
    return set(names(FIGURES[name].expr, (Ref,)))


# What a candidate's plan_quarter row must carry: whether it fits and what gpus_needed reads.
VIEW_COLUMNS = tuple(sorted(({"fits"} | _view_names("gpus_needed") | _view_names("replicas_needed"))
                            - {"replicas_needed", "gpus_needed"}))


def gpus_needed(view_row: dict, users: int) -> int | None:
    """The declared gpus_needed for `users` on a candidate whose plan_quarter row is `view_row`
    (read for 1 user): None when it does not fit."""
    def ref(name):
        if name in ("replicas_needed", "gpus_needed"):
            return ev.eval(FIGURES[name].expr)
        return view_row[name]

    ev = PythonEvaluator(lambda n: users if n == "users" else view_row[n], ref)
    value = ev.eval(FIGURES["gpus_needed"].expr)
    return None if value is None else int(value)


def _names(conn, values, option: str, field: str) -> list[str]:
    """--allow-gpus / --allow-kv-dtypes of the command line, checked (an unknown name: one line)."""
    names = allowed_names(values, option)
    if names is not None and not names:
        raise KvregError(f"{option} needs at least one name, comma-separated")
    return check_allowed(conn, field, names) if names else []


def _stored(plan: str, text_: str | None, known, option: str, what: str) -> list[str]:
    """A plan's stored allowance (kvreg plan set --allow-gpus ...) -> names; one that the registry no
    longer has is a one-line error naming the plan."""
    names = [n for n in (text_ or "").split(",") if n]
    for n in names:
        if n not in known:
            raise KvregError(f"plan {plan} allows {what} {n!r}, which the registry does not have: change it with "
                             f"`kvreg plan set {plan} {option} ...`")
    return names


def _plan_rows(conn, plans: list[str]) -> dict[str, dict]:
    """The stored rows of these plans (one query), each with its GPU's name and its workload mix."""
    run = runner(conn)
    rows = {r["name"]: r for r in run.rows("SELECT p.*, g.name AS gpu_name, m.name AS model_name FROM plan p"
                                           " JOIN gpu g ON g.id = p.gpu_id JOIN model m ON m.id = p.model_id")
            if r["name"] in set(plans)}
    mix: dict = {}
    for c in run.rows("SELECT * FROM workload_class ORDER BY id"):
        mix.setdefault(c["plan_id"], []).append({k: c[k] for k in ("name", "avg_tokens", "share", *LATENCY_FIELDS)})
    for r in rows.values():
        r["workload"] = mix.get(r["id"], [])
    return rows


def _candidates(conn, plans: list[str], allow_gpus, allow_kv_dtypes) -> dict[str, list[dict]]:
    """Per plan: its own setting and every other allowed GPU x TP x KV dtype that fits, each with its
    plan_quarter row for one user (read through the views). A plan may move to its own GPU type and
    KV dtype, those its stored allowances name (kvreg plan set --allow-gpus / --allow-kv-dtypes) and
    those the command allows every plan; TP is free among those the `tp_valid` figure accepts for the
    model (kvreg.app.capacity.valid_tps); everything else stays as stored. Every distinct candidate is
    bound once as a what-if (nothing written) and all are read in one query (kvreg.app.whatif.evaluate): plans
    that share a deployment share its candidates' rows."""
    gpu_ids = {g["name"]: g["id"] for g in list_gpus(conn)}
    kv_known = set(dtype_names(conn, "kv"))
    extra_gpus = _names(conn, allow_gpus, "--allow-gpus", "allow_gpus")
    extra_kv = _names(conn, allow_kv_dtypes, "--allow-kv-dtypes", "allow_kv_dtypes")
    stored = _plan_rows(conn, plans)
    tps_of: dict = {}
    specs: dict = {}  # a candidate's full deployment -> its index in `unique`
    unique: list[dict] = []
    keys = []
    for name in plans:
        row = stored[name]
        # the workload too: a candidate serves the users its targets allow (users_per_replica)
        base = {k: row[k] for k in (*SPEC_DEFAULTS, *PLAN_WORKLOAD) if k != "tp"}
        base.update(model_id=row["model_id"], notes="", workload=row["workload"])
        layout = (row["model_name"], row["gpus_per_node"], row["pp"])
        if layout not in tps_of:
            tps_of[layout] = valid_tps(conn, *layout)
        tps = [t for t in tps_of[layout] if t % row["dp_attention"] == 0]
        gpus = [row["gpu_name"], *_stored(name, row["allow_gpus"], gpu_ids, "--allow-gpus", "GPU type"), *extra_gpus]
        kvds = [row["kv_dtype"], *_stored(name, row["allow_kv_dtypes"], kv_known, "--allow-kv-dtypes", "KV dtype"),
                *extra_kv]
        own = (row["gpu_name"], row["tp"], row["kv_dtype"])
        options = [own] if row["tp"] in tps else []
        for g in dict.fromkeys(gpus):
            for kvd in dict.fromkeys(kvds):
                options += [(g, t, kvd) for t in tps if (g, t, kvd) != own]
        for g, t, kvd in options:
            spec = {**base, "gpu_id": gpu_ids[g], "tp": t, "kv_dtype": kvd, "users": 1}
            key = repr(sorted((k, v if k != "workload" else repr(v)) for k, v in spec.items()))
            if key not in specs:
                specs[key] = len(unique)
                unique.append(spec)
            keys.append((name, g, t, kvd, (g, t, kvd) == own, specs[key]))
    rows = evaluate(conn, unique, columns=VIEW_COLUMNS)
    out: dict[str, list[dict]] = {name: [] for name in plans}
    for name, g, t, kvd, own, i in keys:
        if own or rows[i]["fits"]:
            out[name].append({"gpu": g, "tp": t, "kv_dtype": kvd, "own": own, "row": rows[i], "spec": i})
    return out


def _demand(conn, quarters: list[str]) -> dict[str, list[int]]:
    """Users per plan in each quarter (carried forward), for plans with users in some quarter: the
    demand entries read once, each held from its quarter until the plan's next entry (0 ends it)."""
    axis = [index_of_quarter(q) for q in quarters]
    users: dict[str, list[int]] = {}
    for d in runner(conn).rows("SELECT plan, quarter_index, until_index, users FROM plan_quarter"):
        for i, qi in enumerate(axis):
            if d["quarter_index"] <= qi and (d["until_index"] is None or d["until_index"] > qi):
                users.setdefault(d["plan"], [0] * len(quarters))[i] = d["users"] or 0
    return {p: u for p, u in sorted(users.items()) if any(u)}


def build_program(conn, start: str, quarters=None, *, allow_gpus=None, allow_kv_dtypes=None,
                  whole_nodes: bool = False, budget=None, residual=0.0) -> "Program":
    """The program for the purchase schedule's horizon (kvreg.db.read.schedule_horizon: from `start`,
    by default the current quarter, `quarters` long, by default 4 or on to the last entry): demand,
    candidates and their GPUs needed (from the views), the GPU types' facts and installed fleet."""
    axis = schedule_horizon(conn, start, quarters)
    residual = float(residual or 0)
    if not 0 <= residual < 1:
        raise KvregError(f"--residual is the share of capex recovered at the horizon's end, from 0 up to 1, not {residual}")
    if budget is not None:
        budget = float(budget)
        if not math.isfinite(budget) or budget < 0:
            raise KvregError(f"--budget must be a number of USD per quarter, at least 0, not {budget}")
    users = _demand(conn, axis)
    cands = _candidates(conn, list(users), allow_gpus, allow_kv_dtypes)
    need: dict = {}
    # (the columns gpus_needed reads, users) -> GPUs needed: gpus_needed is a function of VIEW_COLUMNS and
    # users only, so candidates (shared or not) with the same values share one evaluation
    known: dict = {}
    for p, cs in cands.items():
        for ci, c in enumerate(cs):
            values = tuple(c["row"][k] for k in VIEW_COLUMNS)
            for u in users[p]:
                if u and (values, u) not in known:
                    known[(values, u)] = gpus_needed(c["row"], u)
            need[(p, ci)] = [known[(values, u)] if u else 0 for u in users[p]]
        for qi, q in enumerate(axis):
            if users[p][qi] and not any(need[(p, ci)][qi] is not None for ci in range(len(cs))):
                raise KvregError(f"plan {p} cannot be served in {q}: no allowed setting fits (widen --allow-gpus or "
                                 "--allow-kv-dtypes, or change the plan)")
    gpu_names = sorted({c["gpu"] for cs in cands.values() for c in cs})
    facts = {g: get_gpu(conn, g) for g in gpu_names}
    installed = {(r["gpu"], r["quarter"]): r["gpus_installed"]
                 for r in rollup(conn, start=axis[0], quarters=len(axis))}
    return Program(axis, users, cands, need, facts, installed, whole_nodes, budget, residual)


def optimize(conn, start: str, quarters=None, *, allow_gpus=None, allow_kv_dtypes=None, whole_nodes: bool = False,
             budget=None, residual=0.0, time_limit: float = 60.0) -> dict:
    """The cheapest fleet for the horizon from `start` (`quarters` long, default 4): the chosen
    setting per plan, the purchases per GPU type and quarter, the cost of today's plans and the
    saving. Nothing is written (`apply_optimum` writes the settings)."""
    problem = build_program(conn, start, quarters, allow_gpus=allow_gpus, allow_kv_dtypes=allow_kv_dtypes,
                            whole_nodes=whole_nodes, budget=budget, residual=residual)
    best = problem.solve(time_limit)
    if best["status"] == "infeasible":
        raise KvregError(problem.why_infeasible(time_limit))
    current = problem.solve(time_limit, fixed=True)
    out = problem.answer(best)
    out["current_cost"] = current["cost"] if current["status"] == "optimal" else None
    out["current_status"] = current["status"]
    out["saving"] = None if out["current_cost"] is None else out["current_cost"] - out["optimal_cost"]
    return out


class Program:
    """The mixed-integer program over one horizon (the module docstring writes it out). `x` lists the
    (plan, candidate index) columns, `need[(plan, index)]` their GPUs needed per quarter, `cands[plan]`
    the candidates (gpu, tp, kv_dtype, own), `installed[(gpu, quarter)]` the fleet."""

    def __init__(self, axis, users, cands, need, facts, installed, whole_nodes, budget, residual):
        self.axis, self.users, self.cands, self.need, self.facts = axis, users, cands, need, facts
        self.installed, self.whole_nodes, self.budget, self.residual = installed, whole_nodes, budget, residual
        self.start = index_of_quarter(axis[0])
        self.gpus = sorted(facts)
        # x: one column per (plan, candidate) whose needs are known in every quarter with users
        self.x = [(p, ci) for p, cs in cands.items() for ci in range(len(cs))
                  if all(n is not None for n in need[(p, ci)])]
        self.k = [(g, qi) for g in self.gpus for qi in range(len(axis))]

    def unit(self, g) -> int:
        return self.facts[g]["node_gpus"] if self.whole_nodes else 1

    def run_cost(self, p, ci) -> float:
        price = self.facts[self.cands[p][ci]["gpu"]]["price_per_hour"] or 0
        return sum(self.need[(p, ci)]) * price * HOURS_PER_MONTH * MONTHS_PER_QUARTER

    def buy_cost(self, g) -> float:
        return (self.facts[g]["unit_price"] or 0) * self.unit(g) * (1 - self.residual)

    def solve(self, time_limit: float, fixed: bool = False, last: int | None = None) -> dict:
        """Solve the program (`fixed`: every plan at today's setting; `last`: the first `last`
        quarters only, capacity alone)."""
        if fixed and {p for (p, ci) in self.x if self.cands[p][ci]["own"]} != set(self.cands):
            return {"status": "infeasible", "cost": None, "gap": None}  # a plan's setting today does not serve
        # lazy: scipy and numpy load only when a program is solved (start-up time of every other command)
        import numpy as np
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_matrix

        nq = len(self.axis) if last is None else last
        nx, nk = len(self.x), len(self.k)
        cost = np.zeros(nx + nk)
        lower, upper = np.zeros(nx + nk), np.ones(nx + nk)
        for j, (p, ci) in enumerate(self.x):
            cost[j] = self.run_cost(p, ci) if last is None else 0
            if fixed:
                lower[j] = upper[j] = 1 if self.cands[p][ci]["own"] else 0
        real = cost.copy()
        for j, (g, qi) in enumerate(self.k, start=nx):
            real[j] = self.buy_cost(g)
            # Ties go to buying later (capital spent no earlier than needed): a purchase costs a
            # billionth more per quarter early, too little to change which fleet is cheapest.
            cost[j] = real[j] * (1 + 1e-9 * (len(self.axis) - qi)) + 1e-6 * (len(self.axis) - qi)
            lead = self.facts[g]["lead_time_quarters"] or 0
            can_buy = self.facts[g]["unit_price"] is not None and self.start + qi - lead >= self.start and qi < nq
            upper[j] = np.inf if can_buy else 0
        rows, cols, vals, lo, hi = [], [], [], [], []
        r = 0
        plan_cols: dict = {}
        for j, (p, _ci) in enumerate(self.x):
            plan_cols.setdefault(p, []).append(j)
        for p in self.cands:  # one setting per plan
            for j in plan_cols.get(p, []):
                rows.append(r), cols.append(j), vals.append(1)
            lo.append(1), hi.append(1)
            r += 1
        kcol = {key: j for j, key in enumerate(self.k, start=nx)}
        uses: dict = {}  # (GPU type, quarter) -> the columns using it and their GPUs needed
        for j, (p, ci) in enumerate(self.x):
            g = self.cands[p][ci]["gpu"]
            for qi, n in enumerate(self.need[(p, ci)][:nq]):
                if n:
                    uses.setdefault((g, qi), []).append((j, n))
        for g in self.gpus:  # GPUs in use within the fleet and the purchases so far
            for qi in range(nq):
                for j, n in uses.get((g, qi), []):
                    rows.append(r), cols.append(j), vals.append(n)
                for q2 in range(qi + 1):
                    rows.append(r), cols.append(kcol[(g, q2)]), vals.append(-self.unit(g))
                lo.append(-np.inf), hi.append(self.installed.get((g, self.axis[qi]), 0))
                r += 1
        if self.budget is not None:
            for qi in range(nq):
                for g in self.gpus:
                    rows.append(r), cols.append(kcol[(g, qi)]), vals.append((self.facts[g]["unit_price"] or 0)
                                                                           * self.unit(g))
                lo.append(-np.inf), hi.append(self.budget)
                r += 1
        a = coo_matrix((vals, (rows, cols)), shape=(r, nx + nk))
        integrality = np.ones(nx + nk)
        res = milp(cost, constraints=LinearConstraint(a, lo, hi), integrality=integrality,
                   bounds=Bounds(lower, upper), options={"time_limit": time_limit, "mip_rel_gap": 0})
        status = STATUS.get(res.status, "solver error")
        if res.x is None:
            return {"status": "infeasible" if res.status == 2 else status, "cost": None, "gap": None}
        return {"status": status, "cost": float(real @ np.round(res.x)),
                "gap": float(getattr(res, "mip_gap", 0) or 0),
                "x": [round(v) for v in res.x[:nx]], "k": [round(v) for v in res.x[nx:]]}

    def why_infeasible(self, time_limit: float) -> str:
        """One line naming the first quarter the demand cannot be served in and the plans that cannot be served
        then even alone (the program with every other plan's GPUs needed set to 0); when each can be alone, the
        plans in force together."""
        for last in range(1, len(self.axis) + 1):
            if self.solve(time_limit, last=last)["status"] == "infeasible":
                q = self.axis[last - 1]
                alone = [p for p in self.cands if self._alone(p).solve(time_limit, last=last)["status"] == "infeasible"]
                plans = (f"plan {', '.join(alone[:3])}{' and others' if len(alone) > 3 else ''} cannot be served"
                         if alone else "the plans in force cannot be served together")
                return (f"{plans} in {q}: no purchase lands by then within the lead times"
                        f"{' and the budget' if self.budget is not None else ''} (raise --budget, allow other GPUs, "
                        "or start the horizon later)")
        return "the demand cannot be served within the lead times and the budget"

    def _alone(self, plan: str) -> "Program":
        """This program with every plan but `plan` needing no GPUs: whether `plan` can be served by itself."""
        alone = copy.copy(self)
        alone.need = {k: (v if k[0] == plan else [0] * len(v)) for k, v in self.need.items()}
        return alone

    def answer(self, best: dict) -> dict:
        chosen = {}
        for j, (p, ci) in enumerate(self.x):
            if best["x"][j]:
                chosen[p] = ci
        plans = []
        for p in sorted(self.cands):
            own = next((c for c in self.cands[p] if c["own"]), {})
            c = self.cands[p][chosen[p]]
            plans.append({"plan": p, "gpu": c["gpu"], "tp": c["tp"], "kv_dtype": c["kv_dtype"], "changed": not c["own"],
                          "current_gpu": own.get("gpu"), "current_tp": own.get("tp"),
                          "current_kv_dtype": own.get("kv_dtype"),
                          "gpus_in_last_quarter": self.need[(p, chosen[p])][-1]})
        purchases = []
        for j, (g, qi) in enumerate(self.k):
            n = best["k"][j] * self.unit(g)
            if n:
                lead = self.facts[g]["lead_time_quarters"] or 0
                price = self.facts[g]["unit_price"]
                purchases.append({"gpu": g, "quarter": self.axis[qi], "gpus_to_buy": n,
                                  "capex_to_buy": None if price is None else n * price,
                                  "order_by": quarter_of_index(self.start + qi - lead)})
        purchases.sort(key=lambda r: (r["quarter"], r["gpu"]))
        return {"status": best["status"], "gap": best["gap"], "optimal_cost": best["cost"], "plans": plans,
                "purchases": purchases, "quarters": list(self.axis), "whole_nodes": self.whole_nodes,
                "budget_per_quarter": self.budget, "residual": self.residual}


def apply_optimum(conn, result: dict) -> list[str]:
    """Write the chosen settings of the plans that change (in the caller's transaction): their names."""
    changed = []
    for p in result["plans"]:
        if p["changed"]:
            set_plan(conn, p["plan"], {"gpu": p["gpu"], "tp": p["tp"], "kv_dtype": p["kv_dtype"]})
            changed.append(p["plan"])
    return changed
