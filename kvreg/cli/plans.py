"""`kvreg plan ...` and `kvreg demand ...`: saved deployments, quarterly demand, the procurement
rollup and the reverse solvers. Every figure printed here is read from a view."""

from __future__ import annotations

import click

from kvreg.cli.common import emit, emit_record, engine_options, format_option, open_db, user_errors

LIST_TABLE_COLUMNS = ["plan", "rule", "model", "gpu", "tp", "pp", "gpus_per_node", "context_tokens", "workload_tokens",
                      "kv_dtype", "kv_pool_gib_per_gpu", "max_concurrency", "workload_concurrency", "fits", "reason"]
QUARTER_TABLE_COLUMNS = ["plan", "quarter", "users", "gpu", "tp", "workload_concurrency", "replicas_needed",
                         "gpus_needed", "nodes_needed", "headroom_users", "cost_per_month", "capex", "reason"]
CLASS_TABLE_COLUMNS = ["plan", "workload_class", "class_tokens", "share", "class_kv_bytes_per_request_per_gpu",
                       "class_concurrency"]
CALIBRATION_COLUMNS = ["plan", "rule", "measured_engine_version", "kv_cache_tokens", "kv_pool_tokens",
                       "measured_kv_cache_tokens", "kv_cache_tokens_error_fraction", "sequences_per_rank",
                       "measured_max_concurrency", "max_concurrency_error_fraction"]
ROLLUP_COLUMNS = ["gpu", "quarter", "plans", "plans_not_fitting", "users", "gpus_needed", "nodes_needed",
                  "cost_per_month", "capex", "previous_gpus_needed", "gpus_change"]
SOLVE_TABLE = {
    "context": ["model", "gpu", "tp", "users", "gpus", "context_tokens", "context", "max_concurrency",
                "workload_concurrency", "replicas_needed", "gpus_needed", "context_within_claim", "limited_by"],
    "gpus": ["model", "gpu", "tp", "users", "context_tokens", "workload_concurrency", "replicas_needed", "gpus_needed",
             "nodes_needed", "headroom_users", "cost_per_month", "capex"],
}


def _deployment_options(*, defaults: bool, notes: bool = True, context: bool = True, tp: str = "1",
                        tp_auto: str = "the smallest valid TP in the node that holds one sequence"):
    """The `kvreg capacity` options for one deployment. Without defaults (plan set) an option left
    out keeps the stored value."""

    def d(value):
        return value if defaults else None

    opts = [
        click.option("--model", help="Model name (see `kvreg model list`)."),
        click.option("--gpu", help="GPU name (see `kvreg gpu list`)."),
        click.option("--gpus-per-node", type=int, default=d(8), show_default=defaults),
        click.option("--tp", default=d(tp), show_default=defaults,
                     help=f"Tensor-parallel size, or auto ({tp_auto})."),
        click.option("--pp", type=int, default=d(1), show_default=defaults, help="Pipeline-parallel size."),
        click.option("--dp-attention", type=int, default=d(1), show_default=defaults,
                     help="Attention data-parallel size in a TP group."),
        click.option("--kv-dtype", default=d("bf16"), show_default=defaults, help="KV cache dtype: bf16, fp8, ..."),
        click.option("--weight-dtype", default=d("native"), show_default=defaults,
                     help="Weight dtype, or native (the model's own)."),
        click.option("--avg-tokens", help="Average tokens a request holds (prompt + output); default: the context"
                     + ("." if defaults else "; none clears it.")),
        click.option("--workload", multiple=True, metavar="CLASS=TOKENS:SHARE",
                     help="A request class of a workload mix, repeatable: --workload chat=1500:0.8 --workload "
                     "docs=13000:0.2 (or both comma-separated in one). Shares are relative weights (80% works); "
                     "replaces --avg-tokens" + ("." if defaults else "; none clears the mix.")),
        click.option("--reserve", help="Share of GPU memory held back, in [0, 1) (default 0.12)"
                     + ("." if defaults else "; switches the plan from --kv-cache-memory back to the reserve.")),
        click.option("--kv-cache-memory", help="KV pool per GPU given directly (53GB, 40GiB), as vLLM's "
                     "kv_cache_memory_bytes; not with --reserve" + ("." if defaults else "; none clears it.")),
        click.option("--block-size", type=int, default=d(16), show_default=defaults,
                     help="Paged-KV block in tokens (SGLang: its page size); 0: no rounding."),
        *engine_options(defaults),
    ]
    if context:
        opts.insert(8, click.option("--context", default=d("128K"), show_default=defaults,
                                    help="Max context per sequence (max_model_len): 128K = 131,072, 128k = 128,000."))
    if notes:
        opts.append(click.option("--notes", help="Free text."))

    def decorate(fn):
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return decorate


def _spec(opts: dict, *, partial: bool) -> dict:
    from kvreg.plans import spec_from_options

    return spec_from_options(opts, partial=partial)


def _fit_note(row: dict) -> str:
    return "" if row["fits"] else f"; it does not fit: {row['reason']}"


# --------------------------------------------------------------------------- plan


@click.group("plan")
def plan_group():
    """Deployment plans: add, set, list, show, remove; the procurement rollup; reverse solvers."""


@plan_group.command("add")
@click.argument("name")
@_deployment_options(defaults=True)
@click.pass_context
@user_errors
def plan_add(ctx, name, **opts):
    """Save a deployment plan. A plan that does not fit is saved too; list and show say why.

    Example: kvreg plan add chat --model Llama-3-8B --gpu H100-SXM --gpus-per-node 1 --context 8K
    --avg-tokens 1500 --kv-cache-memory 53GB
    """
    from kvreg.plans import add_plan

    spec = {"name": name, **_spec(opts, partial=False)}
    with open_db(ctx).begin() as conn:
        row = add_plan(conn, spec)
    click.echo(f"added plan {name}{_fit_note(row)}")


@plan_group.command("set")
@click.argument("name")
@click.option("--rename", help="A new name for the plan.")
@_deployment_options(defaults=False)
@click.pass_context
@user_errors
def plan_set(ctx, name, rename, **opts):
    """Change a plan's fields; options left out keep their values. The result is validated like `plan add`.

    Example: kvreg plan set chat --tp 2 --kv-dtype fp8
    """
    from kvreg.plans import set_plan

    changes = _spec(opts, partial=True)
    if rename is not None:
        changes["rename"] = rename
    with open_db(ctx).begin() as conn:
        row = set_plan(conn, name, changes)
    click.echo(f"changed plan {row['plan']}{_fit_note(row)}")


@plan_group.command("calibrate")
@click.argument("name")
@click.option("--kv-cache-tokens", help="What the engine printed as its KV cache size in tokens: vLLM's "
              "'GPU KV cache size: 434,176 tokens', SGLang's max_total_num_tokens; none clears it.")
@click.option("--max-concurrency", help="vLLM's 'Maximum concurrency for N tokens per request: 3.31x'; none clears it.")
@click.option("--engine-version", help="The engine and version that printed them (vllm 0.33.0); none clears it.")
@format_option()
@click.pass_context
@user_errors
def plan_calibrate(ctx, name, kv_cache_tokens, max_concurrency, engine_version, fmt):
    """Record what the engine printed at startup for a plan, to set against kvreg's figures: the
    plan_capacity view, the report and the workbook show predicted, measured and the error.
    Changing the plan's settings later clears what was recorded.

    Example: kvreg plan calibrate chat --kv-cache-tokens 434,176 --max-concurrency 3.31x --engine-version "vllm 0.33.0"
    """
    from kvreg.plans import calibrate_plan

    with open_db(ctx).begin() as conn:
        row = calibrate_plan(conn, name, kv_cache_tokens=kv_cache_tokens, max_concurrency=max_concurrency,
                             engine_version=engine_version)
    emit_record({k: row.get(k) for k in CALIBRATION_COLUMNS}, fmt)


@plan_group.command("list")
@format_option()
@click.pass_context
@user_errors
def plan_list(ctx, fmt):
    """Every plan with its deployment figures (the plan_capacity view); json and csv carry every column."""
    from kvreg.plans import list_plans

    with open_db(ctx).connect() as conn:
        rows = list_plans(conn)
    emit(rows, fmt, LIST_TABLE_COLUMNS if fmt == "table" else None)


@plan_group.command("show")
@click.argument("name")
@click.option("--quarter", help="Only this quarter (2026Q4).")
@format_option()
@click.pass_context
@user_errors
def plan_show(ctx, name, quarter, fmt):
    """One plan per quarter of demand: users, replicas, GPUs, cost (plan_quarter), then the plan's figures.

    With no demand, the plan's figures alone.
    """
    from kvreg.plans import show_plan

    with open_db(ctx).connect() as conn:
        rows = show_plan(conn, name, quarter)
    if fmt != "table":
        emit(rows, fmt)
    elif len(rows) == 1 and rows[0]["users"] is None:
        emit_record({k: v for k, v in rows[0].items() if v is not None}, fmt)
    else:
        emit(rows, fmt, QUARTER_TABLE_COLUMNS)


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
    from kvreg.errors import KvregError
    from kvreg.plans import plan_classes

    with open_db(ctx).connect() as conn:
        rows = plan_classes(conn, name)
    if not rows and fmt == "table":
        raise KvregError(f"plan {name!r} has no workload mix: give one with "
                         f"`kvreg plan set {name} --workload CLASS=TOKENS:SHARE ...`")
    emit(rows, fmt, CLASS_TABLE_COLUMNS if fmt == "table" else None)


@plan_group.command("remove")
@click.argument("name")
@click.pass_context
@user_errors
def plan_remove(ctx, name):
    """Remove a plan and its demand."""
    from kvreg.plans import remove_plan

    with open_db(ctx).begin() as conn:
        remove_plan(conn, name)
    click.echo(f"removed plan {name}")


@plan_group.command("rollup")
@click.option("--quarter", help="Only this quarter (2026Q4).")
@format_option()
@click.pass_context
@user_errors
def plan_rollup(ctx, quarter, fmt):
    """What to buy: GPUs, nodes, cost per month and capex per GPU type per quarter, summed over plans,
    and the change in GPUs from the quarter before (the procurement view)."""
    from kvreg.plans import rollup

    with open_db(ctx).connect() as conn:
        rows = rollup(conn, quarter)
    emit(rows, fmt, ROLLUP_COLUMNS)


# --------------------------------------------------------------------------- plan solve


@plan_group.group("solve")
def solve_group():
    """Reverse questions, answered by searching through the views: context, gpus, reserve."""


@solve_group.command("context")
@click.option("--users", required=True, help="Concurrent users to serve.")
@click.option("--gpus", required=True, help="GPUs available.")
@_deployment_options(defaults=True, notes=False, context=False, tp="auto", tp_auto="try every valid TP")
@format_option()
@click.pass_context
@user_errors
def solve_context_cmd(ctx, users, gpus, fmt, **opts):
    """The longest context that serves N concurrent users on G GPUs. Each user holds a whole context
    unless --avg-tokens or --workload is given. --tp auto (the default) tries every valid TP.

    Example: kvreg plan solve context --model Llama-3.1-70B --gpu H100-SXM --tp 4 --users 8 --gpus 8
    """
    from kvreg.plans import solve_context

    spec = _spec(opts, partial=False)
    with open_db(ctx).connect() as conn:
        row = solve_context(conn, spec, users, gpus)
    _emit_solution(row, fmt, "context")


@solve_group.command("gpus")
@click.option("--users", required=True, help="Concurrent users to serve.")
@_deployment_options(defaults=True, notes=False, tp="auto", tp_auto="try every valid TP")
@format_option()
@click.pass_context
@user_errors
def solve_gpus_cmd(ctx, users, fmt, **opts):
    """The fewest GPUs that serve N concurrent users at --context (each user holding a whole context
    unless --avg-tokens or --workload is given). --tp auto (the default) tries every valid TP in the node.

    Example: kvreg plan solve gpus --model Llama-3.1-70B --gpu H100-SXM --tp auto --users 20 --context 128K
    """
    from kvreg.plans import solve_gpus

    spec = _spec(opts, partial=False)
    with open_db(ctx).connect() as conn:
        row = solve_gpus(conn, spec, users)
    _emit_solution(row, fmt, "gpus")


@solve_group.command("reserve")
@click.argument("plan")
@click.option("--quarter", help="Only this quarter (2026Q4); default: every quarter with demand.")
@format_option()
@click.pass_context
@user_errors
def solve_reserve_cmd(ctx, plan, quarter, fmt):
    """The largest memory reserve (to 0.0001) at which a plan still serves each quarter's users with
    the GPUs it needs now."""
    from kvreg.plans import solve_reserve

    with open_db(ctx).connect() as conn:
        rows = solve_reserve(conn, plan, quarter)
    emit(rows, fmt)


def _emit_solution(row: dict, fmt: str, kind: str) -> None:
    if fmt == "table":
        emit_record({k: row.get(k) for k in SOLVE_TABLE[kind] if k in row}, fmt)
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
    """Set a plan's target concurrent users in a quarter (added, or changed if already set).

    Example: kvreg demand set chat-llama3-8b 2027Q1 400
    """
    from kvreg.plans import set_demand

    with open_db(ctx).begin() as conn:
        d = set_demand(conn, plan, quarter, users)
    click.echo(f"{'set' if d['added'] else 'changed'} demand of {plan} in {d['quarter']}: {d['users']} users")


@demand_group.command("list")
@click.option("--plan", help="Only this plan.")
@click.option("--quarter", help="Only this quarter (2026Q4).")
@format_option()
@click.pass_context
@user_errors
def demand_list(ctx, plan, quarter, fmt):
    """Demand per plan and quarter with replicas, GPUs, nodes, headroom and cost (the plan_quarter view)."""
    from kvreg.plans import list_demand

    with open_db(ctx).connect() as conn:
        rows = list_demand(conn, plan, quarter)
    emit(rows, fmt, QUARTER_TABLE_COLUMNS if fmt == "table" else None)


@demand_group.command("remove")
@click.argument("plan")
@click.argument("quarter")
@click.pass_context
@user_errors
def demand_remove(ctx, plan, quarter):
    """Remove a plan's demand in one quarter."""
    from kvreg.plans import remove_demand

    with open_db(ctx).begin() as conn:
        remove_demand(conn, plan, quarter)
    click.echo(f"removed demand of {plan} in {quarter}")
