"""`kvreg plan ...` and `kvreg demand ...`: saved deployments, quarterly demand, the procurement
rollup and the reverse solvers. Every figure printed here is read from a view."""

from __future__ import annotations

import click

from kvreg.app.options import deployment_options, plan_add_options, plan_latency_options
from kvreg.cli.common import emit, emit_record, format_option, open_db, read, render, user_errors

LIST_TABLE_COLUMNS = ["plan", "rule", "model", "gpu", "tp", "pp", "gpus_per_node", "context_tokens", "workload_tokens",
                      "kv_dtype", "kv_pool_gib_per_gpu", "max_concurrency", "workload_concurrency", "fits", "reason"]
# What a table too wide for the terminal keeps first (kvreg.export.text.fit).
LIST_KEYS = ("plan", "model", "gpu", "max_concurrency", "fits", "tp", "context_tokens", "workload_concurrency")
QUARTER_KEYS = ("plan", "quarter", "users", "gpu", "gpus_needed", "cost_per_month")
ROLLUP_KEYS = ("gpu", "quarter", "gpus_to_buy", "capex_to_buy", "gpus_needed", "gpus_installed")
QUARTER_TABLE_COLUMNS = ["plan", "quarter", "users", "carried_from", "gpu", "tp", "workload_concurrency", "replicas_needed",
                         "gpus_needed", "nodes_needed", "headroom_users", "cost_per_month", "capex", "reason"]
# `plan show` of a plan without demand: the figures a planner reads first (--all: every field).
SHOW_KEY_COLUMNS = ["plan", "model", "gpu", "rule", "tp", "pp", "dp_attention", "gpus_per_node", "context_tokens",
                    "workload_tokens", "kv_dtype", "weight_dtype", "kv_bytes_per_token_per_gpu",
                    "kv_gib_per_sequence_per_gpu", "weights_gib_per_gpu", "kv_pool_gib_per_gpu", "max_concurrency",
                    "whole_sequences", "workload_concurrency", "replicas_per_node", "node_concurrency",
                    "context_within_claim", "fits", "reason", "allow_gpus", "allow_kv_dtypes"]
CLASS_TABLE_COLUMNS = ["plan", "workload_class", "class_tokens", "share", "class_kv_bytes_per_request_per_gpu",
                       "class_concurrency"]
# A plan with a latency target: its targets, the users a replica runs within them and what binds, printed after
# workload_concurrency (the memory limit) when any plan shown has one.
LATENCY_TABLE_COLUMNS = ["tpot_target_ms", "ttft_target_ms", "users_per_replica", "users_binding_constraint"]
LATENCY_SHOW_COLUMNS = ["input_tokens", "output_tokens", "workload_input_tokens", "workload_output_tokens",
                        "workload_tpot_target_ms", "workload_ttft_target_ms", "tpot_concurrency_limit",
                        "ttft_concurrency_limit", "latency_concurrency_limit", "users_per_replica",
                        "users_binding_constraint"]
CLASS_LATENCY_COLUMNS = ["class_input_tokens", "class_output_tokens", "class_tpot_target_ms", "class_ttft_target_ms"]


def _with_latency(columns: list[str], rows: list[dict], extra: list[str]) -> list[str]:
    """`columns` with `extra` after workload_concurrency when a row has a latency target (else as they are).
    The binding limit (users_binding_constraint: memory or latency) then stands in for `fits`: a plan that
    does not fit in memory says so in its reason."""
    if not any(r.get("users_binding_constraint") for r in rows):
        return columns
    at = columns.index("workload_concurrency") + 1
    return [c for c in columns[:at] + [c for c in extra if c not in columns] + columns[at:] if c != "fits"]
CALIBRATION_COLUMNS = ["plan", "rule", "measured_engine_version", "kv_cache_tokens", "kv_pool_tokens",
                       "measured_kv_cache_tokens", "kv_cache_tokens_error_fraction", "sequences_per_rank",
                       "measured_max_concurrency", "max_concurrency_error_fraction"]
LOG_CALIBRATION_COLUMNS = ["calibration_source", "measured_kv_cache_bytes", "kv_pool_gib_per_gpu",
                           "kv_cache_memory_error_fraction", "weights_measured_bytes", "activation_bytes",
                           "non_torch_bytes", "cuda_graph_bytes", "max_num_seqs", "engine_version", "sampler"]
ROLLUP_COLUMNS = ["gpu", "quarter", "gpus_to_buy", "capex_to_buy", "order_by", "gpus_needed", "gpus_installed",
                  "gpus_bought", "gpus_spare", "plans", "plans_not_fitting", "users", "cost_per_month",
                  "gpus_needed_quarter_change", "driving_plans"]
SOLVE_TABLE = {
    "context": ["model", "gpu", "tp", "users", "gpus", "context_tokens", "max_concurrency",
                "workload_concurrency", "replicas_needed", "gpus_needed", "context_within_claim", "limited_by"],
    "gpus": ["model", "gpu", "tp", "users", "context_tokens", "workload_concurrency", "users_per_replica",
             "users_binding_constraint", "replicas_needed", "gpus_needed", "nodes_needed", "headroom_users",
             "cost_per_month", "capex"],
}


def _spec(opts: dict, *, partial: bool) -> dict:
    from kvreg.app.plans import spec_from_options

    return spec_from_options(opts, partial=partial)


def _claim_warning(conn, row: dict) -> str:
    """A warning for a plan whose context is past its model's max_position_embeddings ("" otherwise):
    the plan is saved, and the memory may hold the context, but the model does not claim to work there."""
    from kvreg.app.registry import get_model

    if row["context_within_claim"]:
        return ""
    claim = get_model(conn, row["model"])["max_position_embeddings"]
    return (f"kvreg: warning: plan {row['plan']}'s context ({int(row['context_tokens']):,} tokens) is beyond "
            f"{row['model']}'s {claim:,}-token claim (max_position_embeddings); saved, but the model is not known "
            "to answer well past it")


def allowance_options(fn):
    """--allow-gpus / --allow-kv-dtypes of `plan add` and `plan set`: what `plan optimize` may change."""
    fn = click.option("--allow-kv-dtypes", help="KV dtypes `plan optimize` may move the plan to, beyond its own, "
                                                "comma-separated (bf16,fp8); none clears them.")(fn)
    return click.option("--allow-gpus", help="GPU types `plan optimize` may move the plan to, beyond its own, "
                                             "comma-separated (H100-SXM,H200); none clears them.")(fn)


def _allowances(opts: dict) -> dict:
    return {k: opts.pop(k) for k in ("allow_gpus", "allow_kv_dtypes") if opts.get(k) is not None}


def _fit_note(row: dict) -> str:
    from kvreg.export.text import cell
    from kvreg.figures.labels import SERVES_NO_USER, serves_no_user, users_served

    if not row["fits"]:
        return f"; it does not fit: {row['reason']}"
    if serves_no_user(row["fits"], row["users_per_replica"]):
        return (f"; {SERVES_NO_USER.lower()}: {row['reason']}: its demand gets no GPUs until the target is loosened"
                " or the deployment changed (plan show: tpot_concurrency_limit, ttft_concurrency_limit)")
    if row.get("users_binding_constraint") == "latency":
        users = cell(row["users_per_replica"], "users_per_replica")  # as the table prints it: 79.00
        return f"; {users_served('latency', users)} (its KV pool holds {row['workload_concurrency']:,.2f})"
    return ""


# --------------------------------------------------------------------------- plan


@click.group("plan")
def plan_group():
    """Deployment plans: add, set, list, show, remove; the procurement rollup; reverse solvers."""


@plan_group.command("add")
@click.argument("name")
@plan_add_options
@allowance_options
@click.pass_context
@user_errors
def plan_add(ctx, name, **opts):
    """Save a deployment plan. A plan that does not fit is saved too; list and show say why.

    Example: kvreg plan add chat --model Llama-3-8B --gpu H100-SXM --gpus-per-node 1 --context 8K
    --avg-tokens 1500 --kv-cache-memory 53GB

    With a latency target, a replica serves the smaller of what its KV pool holds and the requests it runs
    within the target (users_per_replica); replicas and GPUs follow. A plan takes no --concurrency: that is
    what its figures solve for.

    Example: kvreg plan add chat-slo --model Llama-3-8B --gpu H100-SXM --gpus-per-node 1 --context 8K
    --avg-tokens 1500 --input-tokens 1000 --output-tokens 500 --tpot-ms 15 --ttft-ms 2000
    """
    from kvreg.app.plans import add_plan

    allow = _allowances(opts)
    spec = {"name": name, **_spec(opts, partial=False), **allow}
    with open_db(ctx).begin() as conn:
        row = add_plan(conn, spec)
        claim = _claim_warning(conn, row)
    click.echo(f"added plan {name}{_fit_note(row)}")
    if claim:
        click.echo(claim, err=True)


@plan_group.command("set")
@click.argument("name")
@click.option("--rename", help="A new name for the plan.")
@deployment_options(defaults=False)
@plan_latency_options(defaults=False)
@allowance_options
@click.pass_context
@user_errors
def plan_set(ctx, name, rename, **opts):
    """Change a plan's fields; options left out keep their values. The result is validated like `plan add`.

    --allow-gpus and --allow-kv-dtypes store what `kvreg plan optimize` may change in the plan: the
    GPU types and KV dtypes it may move the plan to, beyond its own (TP is always free; PP stays).

    Example: kvreg plan set chat --tp 2 --kv-dtype fp8

    Example: kvreg plan set chat --allow-gpus H100-SXM,H200 --allow-kv-dtypes bf16,fp8

    Example: kvreg plan set chat --input-tokens 1000 --output-tokens 500 --tpot-ms 15

    Example: kvreg plan set mixed --workload chat=1500:0.8:1000/500:15/2000,docs=13000:0.2:12000/1000
    """
    from kvreg.app.plans import set_plan

    allow = _allowances(opts)
    changes = {**_spec(opts, partial=True), **allow}
    if rename is not None:
        changes["rename"] = rename
    with open_db(ctx).begin() as conn:
        row = set_plan(conn, name, changes)
        claim = _claim_warning(conn, row)
    click.echo(f"changed plan {row['plan']}{_fit_note(row)}")
    if claim:
        click.echo(claim, err=True)


@plan_group.command("calibrate")
@click.argument("name")
@click.option("--log", "log_path", type=click.Path(dir_okay=False),
              help="A vLLM or SGLang startup log: its measured weights, activation peak and non-torch memory become "
              "the plan's inputs and its KV cache lines the measured figures.")
@click.option("--kv-cache-tokens", help="What the engine printed as its KV cache size in tokens: vLLM's "
              "'GPU KV cache size: 434,176 tokens', SGLang's max_total_num_tokens; none clears it.")
@click.option("--max-concurrency", help="vLLM's 'Maximum concurrency for N tokens per request: 3.31x'; none clears it.")
@click.option("--engine-version", help="The engine and version that printed them (vllm 0.33.0); none clears it.")
@format_option()
@click.pass_context
@user_errors
def plan_calibrate(ctx, name, log_path, kv_cache_tokens, max_concurrency, engine_version, fmt):
    """Record what the engine printed at startup for a plan, to set against kvreg's figures: the
    plan_capacity view, the report and the workbook show predicted, measured and the error.
    Changing the plan's settings later clears what was recorded.

    With --log, the log is read instead: what it measured (weights, activation peak, non-torch memory)
    is kept as the plan's inputs, so its figures at other contexts, utilizations and KV dtypes use them,
    until the plan's model, GPU, layout, weight dtype, batch size or release changes. The report marks
    the plan as calibrated from that log.

    Example: kvreg plan calibrate chat --kv-cache-tokens 434,176 --max-concurrency 3.31x --engine-version "vllm 0.33.0"

    Example: kvreg plan calibrate chat --log server.log
    """
    from kvreg.app.calibrate import calibrate_plan, calibrate_plan_from_log

    if log_path is not None:
        if kv_cache_tokens is not None or max_concurrency is not None or engine_version is not None:
            from kvreg.core.errors import KvregError

            raise KvregError("give --log or the numbers (--kv-cache-tokens, --max-concurrency, --engine-version), "
                             "not both: the log carries them")
        from kvreg.core.enginelog import read_log

        log, source = read_log(log_path)
        with open_db(ctx).begin() as conn:
            row, notes = calibrate_plan_from_log(conn, name, log, source)
        for note in notes:
            click.echo(f"note: {note}", err=True)
        emit_record({k: row.get(k) for k in CALIBRATION_COLUMNS + LOG_CALIBRATION_COLUMNS}, fmt)
        return
    with open_db(ctx).begin() as conn:
        row = calibrate_plan(conn, name, kv_cache_tokens=kv_cache_tokens, max_concurrency=max_concurrency,
                             engine_version=engine_version)
    emit_record({k: row.get(k) for k in CALIBRATION_COLUMNS}, fmt)


@plan_group.command("list")
@format_option()
@click.pass_context
@user_errors
def plan_list(ctx, fmt):
    """Every plan with its deployment figures (the plan_capacity view); json and csv carry every column.
    When a plan has a latency target, the table adds the targets, users_per_replica and
    users_binding_constraint (memory or latency) after workload_concurrency."""
    from kvreg.db.read import list_plans

    rows = read(ctx, list_plans)
    emit(rows, fmt, _with_latency(LIST_TABLE_COLUMNS, rows, LATENCY_TABLE_COLUMNS) if fmt == "table" else None,
         keys=LIST_KEYS)


@plan_group.command("show")
@click.argument("name")
@click.option("--quarter", help="Only this quarter (2026Q4).")
@click.option("--all", "show_all", is_flag=True, help="Without demand: every field of the plan, not only its key "
              "figures (json and csv always carry every field).")
@format_option()
@click.pass_context
@user_errors
def plan_show(ctx, name, quarter, show_all, fmt):
    """One plan per quarter of demand: users, replicas, GPUs, cost (plan_quarter), then the plan's figures.

    With no demand, the plan's key figures (its layout, KV per sequence, pool, concurrency, whether
    it fits and why); --all prints every field. A plan with a latency target (--tpot-ms, --ttft-ms) also
    shows the users a replica runs within it, users_per_replica (the smaller of that and the memory limit,
    workload_concurrency), and users_binding_constraint: memory or latency.
    """
    from kvreg.db.read import show_plan

    rows = read(ctx, lambda conn: show_plan(conn, name, quarter))
    if fmt != "table":
        emit(rows, fmt)
    elif len(rows) == 1 and rows[0]["users"] is None:
        shown = _with_latency(SHOW_KEY_COLUMNS, rows, LATENCY_SHOW_COLUMNS)
        keys = list(rows[0]) if show_all else [k for k in shown if k in rows[0]]
        # with a target, the latency limit is printed blank when every concurrency meets it (not left out)
        blank = ("reason", "latency_concurrency_limit") if rows[0].get("users_binding_constraint") else ("reason",)
        emit_record({k: rows[0][k] for k in keys if rows[0][k] is not None or k in blank}, fmt)
    else:
        emit(rows, fmt, _with_latency(QUARTER_TABLE_COLUMNS, rows, ["users_per_replica", "users_binding_constraint"]))


@plan_group.command("workload")
@click.argument("name")
@format_option()
@click.pass_context
@user_errors
def plan_workload(ctx, name, fmt):
    """A plan's workload mix, one row per request class (the plan_class view): its tokens and share,
    the KV one request of it holds per GPU, and how many of it alone a replica would hold. The plan
    holds the share-weighted mean request (plan show: workload_tokens, workload_concurrency).

    Example: kvreg plan workload mixed-llama3-8b
    """
    from kvreg.core.errors import KvregError
    from kvreg.db.read import plan_classes

    rows = read(ctx, lambda conn: plan_classes(conn, name))
    if not rows and fmt == "table":
        raise KvregError(f"plan {name!r} has no workload mix: give one with "
                         f"`kvreg plan set {name} --workload CLASS=TOKENS:SHARE ...`")
    with_latency = any(r.get(c) is not None for r in rows for c in CLASS_LATENCY_COLUMNS)
    emit(rows, fmt, (CLASS_TABLE_COLUMNS + CLASS_LATENCY_COLUMNS * with_latency) if fmt == "table" else None)


@plan_group.command("remove")
@click.argument("name")
@click.pass_context
@user_errors
def plan_remove(ctx, name):
    """Remove a plan and its demand."""
    from kvreg.app.plans import remove_plan

    with open_db(ctx).begin() as conn:
        remove_plan(conn, name)
    click.echo(f"removed plan {name}")


@plan_group.command("rollup")
@click.option("--quarter", help="Only this quarter (2026Q4); demand and fleet entries carry forward into it.")
@click.option("--from", "start", help="First quarter of the horizon (2026Q4); default: the current quarter.")
@click.option("--quarters", help="Quarters in the horizon from --from (default 4, or on to the last entry).")
@click.option("--whole-nodes", is_flag=True,
              help="Buy whole nodes: purchases rounded up to the GPU type's node_gpus (kvreg gpu set --node-gpus).")
@format_option()
@click.pass_context
@user_errors
def plan_rollup(ctx, quarter, start, quarters, whole_nodes, fmt):
    """The purchase schedule per GPU type and quarter: GPUs the plans need, GPUs installed (kvreg
    fleet), GPUs to buy and their capex, the quarter each order must be placed by, and the plans that
    drive it; totals per GPU type and overall.

    GPUs bought stay bought: gpus_to_buy is the increment beyond the installed fleet and the
    horizon's earlier purchases (gpus_bought, the largest shortfall so far), so the column adds up to
    what the horizon buys. order_by is the quarter the purchase lands in less the GPU type's lead
    time (kvreg gpu set --lead-time 2); order_late is 1 when that is before the horizon's first
    quarter. Demand and fleet entries hold until their next entry.

    The horizon starts at --from, by default the current quarter: purchases made before it are in
    the installed fleet (record them with kvreg fleet set), never bought again. It runs --quarters
    quarters, by default 4 or on to the last quarter with a demand or fleet entry, whichever is
    later. The report, the workbook's Summary and the web page's procurement view use the same rule.
    The table shows the quarters side by side per GPU type; --quarter Q shows that one quarter as a
    horizon of its own. json: an object with the horizon's quarters, the schedule's rows, the totals
    per GPU type and the total; csv: the schedule's rows.

    Example: kvreg plan rollup --from 2026Q4 --quarters 4 --whole-nodes
    """
    from kvreg.db.read import purchase_schedule

    sched = read(ctx, lambda conn: purchase_schedule(conn, quarter, start, quarters, whole_nodes=whole_nodes))
    rows = sched["schedule"]
    if fmt == "json":
        import json  # lazy: only json output needs it (start-up time)

        body = render(rows, "json")
        head = json.dumps({k: v for k, v in sched.items() if k != "schedule"})
        click.echo(head[:-1] + ', "schedule": ' + body.rstrip("\n") + "}")
        return
    if fmt == "csv":
        emit(rows, fmt)
        return
    if quarter is None:
        from kvreg.app.fleet import horizon_table

        columns, table = horizon_table(rows)
        emit(table, fmt, columns)
    else:
        emit(rows, fmt, ROLLUP_COLUMNS if fmt == "table" else None, keys=ROLLUP_KEYS)
    click.echo("")
    emit([*sched["totals"], {"gpu": "total", **sched["total"]}], fmt,
         ["gpu", "gpus_to_buy", "capex_to_buy", "first_order_by", "orders_late"])


def _bad_time_limit():
    raise click.BadParameter("nan is not a number of seconds: give one above 0, such as 60", param_hint="'--time-limit'")


@plan_group.command("optimize")
@click.option("--from", "start", help="First quarter of the horizon (2026Q4); default: the current quarter.")
@click.option("--quarters", help="Quarters in the horizon (default 4, or on to the last entry).")
@click.option("--allow-gpus", help="GPU types every plan may move to in this run, comma-separated (H100-SXM,H200), "
                                   "beyond each plan's own and those it allows (plan set --allow-gpus).")
@click.option("--allow-kv-dtypes", help="KV dtypes every plan may use in this run, comma-separated (bf16,fp8), "
                                        "beyond each plan's own and those it allows (plan set --allow-kv-dtypes).")
@click.option("--whole-nodes", is_flag=True, help="Buy whole nodes of the GPU type's node_gpus.")
@click.option("--budget", type=float, help="At most this much capex (USD) landing in any one quarter.")
@click.option("--residual", type=float, default=0.0, show_default=True,
              help="Share of the capex recovered at the horizon's end (resale), taken off the purchases' cost.")
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True, max=86400), default=60.0, show_default=True,
              callback=lambda _ctx, _param, v: v if v == v else _bad_time_limit(),  # NaN passes FloatRange's test
              help="Seconds the solver may take (above 0, at most a day).")
@click.option("--apply", "apply_", is_flag=True, help="Write the chosen settings to the plans (one transaction). "
                                                      "Default: a dry run.")
@format_option()
@click.pass_context
@user_errors
def plan_optimize(ctx, start, quarters, allow_gpus, allow_kv_dtypes, whole_nodes, budget, residual, time_limit,
                  apply_, fmt):
    """The cheapest fleet for the horizon: per plan a GPU type, TP and KV dtype, per GPU type and
    quarter the GPUs to buy.

    A plan may move to its own GPU type and KV dtype, to those stored on it (kvreg plan set NAME
    --allow-gpus H100-SXM,H200 --allow-kv-dtypes bf16,fp8) and to those this run's --allow-gpus /
    --allow-kv-dtypes name; TP is free among the layouts the model allows; PP and every other
    setting stay the plan's own. The horizon follows plan rollup's rule: from --from (default the
    current quarter), 4 quarters or on to the last entry.

    The cost is the purchases' capex (less --residual) plus the running cost of the GPUs in use
    (price_per_hour x 730 h x 3 per quarter) over the horizon. Every plan's users are served in every
    quarter (capacity from the views), the installed fleet is reused, purchases land no earlier than
    the GPU type's lead time allows, and --budget caps each quarter's capex. Solved exactly as a
    mixed-integer program (scipy's HiGHS); status and gap say how. current_cost is today's plans
    with the purchases they need; saving the difference.

    table: the summary, the plans' settings and the purchases; json: one object; csv: the plans.

    Example: kvreg plan optimize --from 2026Q4 --quarters 4 --allow-gpus H100-SXM,H200 --allow-kv-dtypes bf16,fp8
    """
    from kvreg.app.optimize import PLAN_COLUMNS, PURCHASE_COLUMNS, apply_optimum, optimize

    args = dict(allow_gpus=allow_gpus, allow_kv_dtypes=allow_kv_dtypes, whole_nodes=whole_nodes, budget=budget,
                residual=residual, time_limit=time_limit)
    if apply_:
        with open_db(ctx).begin() as conn:
            result = optimize(conn, start, quarters, **args)
            changed = apply_optimum(conn, result)
    else:
        with open_db(ctx).connect() as conn:  # candidates are what-ifs: nothing is written
            result = optimize(conn, start, quarters, **args)
        changed = None
    if fmt == "json":
        import json  # lazy: only json output needs it (start-up time)

        click.echo(json.dumps({**result, "applied": changed}))
        return
    if fmt == "csv":
        emit(result["plans"], fmt, PLAN_COLUMNS)
        return
    summary = {k: result[k] for k in ("status", "gap", "current_cost", "optimal_cost", "saving")}
    emit([summary], fmt)
    click.echo("")
    emit(result["plans"], fmt, PLAN_COLUMNS)
    click.echo("")
    emit(result["purchases"], fmt, PURCHASE_COLUMNS)
    if changed is not None:
        click.echo(f"applied: {len(changed)} plan(s) changed" + (f" ({', '.join(changed)})" if changed else ""))
    else:
        click.echo("dry run: nothing written (--apply writes the plans' settings)")


# --------------------------------------------------------------------------- plan solve


@plan_group.group("solve")
def solve_group():
    """Reverse questions, answered by searching through the views: context, gpus, reserve."""


_PLAN_OPTIONS = [
    click.option("--plan", "plan_name", help="Take the deployment from this saved plan; options given override it."),
    click.option("--quarter", help="With --plan: the users are the plan's demand in force in this quarter (2026Q4), "
                 "unless --users is given."),
]


def _plan_options(fn):
    for opt in reversed(_PLAN_OPTIONS):
        fn = opt(fn)
    return fn


def _solver_input(ctx, conn, opts: dict, plan_name, quarter, users):
    """The solver's deployment spec and users: the options, or a saved plan with the options given
    on the command line laid over it."""
    from kvreg.app.plans import plan_demand_users, plan_solver_spec
    from kvreg.core.errors import KvregError

    if plan_name is None:
        if quarter is not None:
            raise KvregError("--quarter takes the users from a plan's demand: give --plan NAME too")
        if users is None:
            raise KvregError("give --users N, or --plan NAME --quarter Q to take a plan's demand")
        for key in ("model", "gpu"):
            if not opts.get(key):
                raise KvregError(f"give --{key}, or --plan NAME to take the deployment from a saved plan")
        return _spec(opts, partial=False), users
    given = {k: v for k, v in opts.items()
             if ctx.get_parameter_source(k) not in (None, click.core.ParameterSource.DEFAULT)}
    spec = {**plan_solver_spec(conn, plan_name), **_spec(given, partial=True)}
    if users is None:
        if quarter is None:
            raise KvregError(f"give --users N or --quarter Q (the users of {plan_name!r} in force then)")
        users = plan_demand_users(conn, plan_name, quarter)
    return spec, users


@solve_group.command("context")
@click.option("--users", help="Concurrent users to serve (with --plan and --quarter: the plan's demand).")
@click.option("--gpus", required=True, help="GPUs available.")
@click.option("--beyond-claim", is_flag=True, help="Search past the model's claimed context (max_position_embeddings); "
              "without it the answer is at most the claim.")
@_plan_options
@deployment_options(defaults=True, notes=False, context=False, tp="auto", tp_auto="try every valid TP")
@format_option()
@click.pass_context
@user_errors
def solve_context_cmd(ctx, users, gpus, beyond_claim, plan_name, quarter, fmt, **opts):
    """The longest context that serves N concurrent users on G GPUs, at most the model's claimed
    context unless --beyond-claim (limited_by says which bound it met: memory, the model's claim).
    Each user holds a whole context unless --avg-tokens or --workload is given. --tp auto (the
    default) tries every valid TP; with --plan the plan's own settings are used unless given here.

    Example: kvreg plan solve context --model Llama-3.1-70B --gpu H100-SXM --tp 4 --users 8 --gpus 8

    Example: kvreg plan solve context --plan chat-llama3-8b --quarter 2026Q4 --gpus 2
    """
    from kvreg.app.solve import solve_context

    with open_db(ctx).connect() as conn:
        spec, users = _solver_input(ctx, conn, opts, plan_name, quarter, users)
        row = solve_context(conn, spec, users, gpus, beyond_claim=beyond_claim)
    _emit_solution(row, fmt, "context")


@solve_group.command("gpus")
@click.option("--users", help="Concurrent users to serve (with --plan and --quarter: the plan's demand).")
@_plan_options
@deployment_options(defaults=True, notes=False, tp="auto", tp_auto="try every valid TP")
@format_option()
@click.pass_context
@user_errors
def solve_gpus_cmd(ctx, users, plan_name, quarter, fmt, **opts):
    """The fewest GPUs that serve N concurrent users at --context (each user holding a whole context
    unless --avg-tokens or --workload is given). --tp auto (the default) tries every valid TP in the node;
    with --plan the plan's own settings (its TP too) are used unless given here.

    Example: kvreg plan solve gpus --model Llama-3.1-70B --gpu H100-SXM --tp auto --users 20 --context 128K

    Example: kvreg plan solve gpus --plan longctx-llama31-70b --quarter 2026Q4 --tp auto
    """
    from kvreg.app.solve import solve_gpus

    with open_db(ctx).connect() as conn:
        spec, users = _solver_input(ctx, conn, opts, plan_name, quarter, users)
        row = solve_gpus(conn, spec, users)
    _emit_solution(row, fmt, "gpus")


@solve_group.command("reserve")
@click.argument("plan", required=False)
@click.option("--plan", "plan_name", help="The plan (the same as giving it as the argument).")
@click.option("--quarter", help="Only this quarter (2026Q4, demand carried into it); default: every quarter with "
              "a demand entry.")
@format_option()
@click.pass_context
@user_errors
def solve_reserve_cmd(ctx, plan, plan_name, quarter, fmt):
    """The largest memory reserve (to 0.0001) at which a plan still serves each quarter's users with
    the GPUs it needs now.

    Example: kvreg plan solve reserve --plan chat-llama3-8b --quarter 2026Q4
    """
    from kvreg.app.solve import solve_reserve

    if plan and plan_name and plan != plan_name:
        raise click.ClickException(f"two plans given ({plan} and --plan {plan_name}): give one")
    if not (plan or plan_name):
        raise click.ClickException("give the plan: kvreg plan solve reserve --plan NAME")
    with open_db(ctx).connect() as conn:
        rows = solve_reserve(conn, plan or plan_name, quarter)
    emit(rows, fmt)


def _emit_solution(row: dict, fmt: str, kind: str) -> None:
    if fmt == "table":
        # the users a replica serves and what binds them only where a latency target can bind (as plan show)
        keys = [k for k in SOLVE_TABLE[kind] if k in row
                and (row.get("users_binding_constraint") or k not in ("users_per_replica", "users_binding_constraint"))]
        if row.get("workload_concurrency") == row.get("max_concurrency") and "max_concurrency" in keys:
            keys.remove("workload_concurrency")  # no average or mix: the same figure, printed once
        emit_record({k: row[k] for k in keys}, fmt)
    else:
        emit([row], fmt)


# --------------------------------------------------------------------------- demand


@click.group("demand")
def demand_group():
    """Target concurrent users per plan per quarter."""


@demand_group.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("plan")
@click.argument("quarter")
@click.argument("users")
@click.pass_context
@user_errors
def demand_set(ctx, plan, quarter, users):
    """Set a plan's target concurrent users from a quarter on (added, or changed if already set). The
    value holds in later quarters until the plan's next entry; 0 ends the plan's demand.

    Example: kvreg demand set chat-llama3-8b 2027Q1 400
    """
    from kvreg.app.plans import set_demand

    with open_db(ctx).begin() as conn:
        d = set_demand(conn, plan, quarter, users)
    click.echo(f"{'set' if d['added'] else 'changed'} demand of {plan} in {d['quarter']}: {d['users']} users")


@demand_group.command("list")
@click.option("--plan", help="Only this plan.")
@click.option("--quarter", help="Each plan's demand in force in this quarter (2026Q4): the latest entry at or "
              "before it (0 ends it); carried values name the quarter they were set in. Default: every entry.")
@format_option()
@click.pass_context
@user_errors
def demand_list(ctx, plan, quarter, fmt):
    """Demand per plan and quarter with replicas, GPUs, nodes, headroom and cost (the plan_quarter view).

    Example: kvreg demand list --quarter 2027Q2
    """
    from kvreg.db.read import list_demand

    rows = read(ctx, lambda conn: list_demand(conn, plan, quarter))
    # as plan show's quarters: with a latency target, the users a replica serves and what binds them
    emit(rows, fmt, _with_latency(QUARTER_TABLE_COLUMNS, rows, ["users_per_replica", "users_binding_constraint"])
         if fmt == "table" else None, keys=QUARTER_KEYS)


@demand_group.command("remove")
@click.argument("plan")
@click.argument("quarter")
@click.pass_context
@user_errors
def demand_remove(ctx, plan, quarter):
    """Remove a plan's demand in one quarter."""
    from kvreg.app.plans import remove_demand

    with open_db(ctx).begin() as conn:
        remove_demand(conn, plan, quarter)
    click.echo(f"removed demand of {plan} in {quarter}")


def _bulk_commands():
    from kvreg.cli.fleet import export_command, import_command

    import_command(demand_group, "demand", "plan,quarter,users", "demand.csv")
    export_command(demand_group, "demand")


_bulk_commands()
