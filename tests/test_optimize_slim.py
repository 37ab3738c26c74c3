"""The optimizer's slim what-if (kvreg.figures.views.slim_grains): plan_quarter compiled from the same
declarations but computing only the figures the requested columns need gives, for every candidate,
exactly the full view's values in those columns. Candidates: the built-in catalog's models on its
GPUs (tests/test_plans.py works such plans by hand), chosen to reach the branches the slim statement
could lose: latency targets on the plan and on workload classes, a mixture-of-experts model, an fp8
KV cache, and plans that do not fit.
"""

from __future__ import annotations

import pytest

from kvreg.app import plans, whatif
from kvreg.app.access import open_registry
from kvreg.app.optimize import VIEW_COLUMNS
from kvreg.figures.views import GRAIN, slim_grains, whatif_with

# name -> the plan's options as `kvreg plan add` takes them
CANDIDATES = {
    "llama-8b": {"model": "Llama-3-8B", "gpu": "H100-SXM", "context": "8k"},
    "llama-8b-fp8-latency": {"model": "Llama-3-8B", "gpu": "H100-SXM", "context": "32k", "kv_dtype": "fp8",
                             "input_tokens": 2000, "output_tokens": 500, "tpot_ms": 30, "ttft_ms": 1000},
    "llama-8b-classes": {"model": "Llama-3-8B", "gpu": "H200", "context": "16k",
                         "workload": ["chat=1500:0.8:1000/300:40/2000", "rag=12000:0.2"]},
    "moe-deepseek": {"model": "DeepSeek-V3", "gpu": "H200", "tp": 8, "context": "32k"},
    "moe-qwen-fp8-latency": {"model": "Qwen3-235B-A22B", "gpu": "H100-SXM", "tp": 8, "context": "16k",
                             "kv_dtype": "fp8", "input_tokens": 4000, "output_tokens": 1000, "tpot_ms": 50},
    # 671B parameters on one 24 GB card: the weights alone do not fit.
    "no-fit-deepseek": {"model": "DeepSeek-V3", "gpu": "RTX-4090", "tp": 1, "context": "8k"},
    # a latency target no GPU meets: fits in memory, serves no one within it
    "tpot-too-tight": {"model": "Llama-3-8B", "gpu": "L40S", "context": "8k", "tpot_ms": 0.01,
                       "input_tokens": 1000, "output_tokens": 100},
}
# The optimizer's columns, then more of plan_quarter's: its own figures (gpus_needed, cost) and
# plan_capacity's, the latency limit among them.
COLUMN_SETS = [VIEW_COLUMNS, ("gpus_needed", "replicas_needed", "cost_per_month", "users_binding_constraint",
                              "max_concurrency", "reason", "workload_concurrency")]


@pytest.fixture(scope="module")
def candidates(tmp_path_factory):
    eng = open_registry(f"sqlite:///{tmp_path_factory.mktemp('slim') / 'registry.db'}")
    rows = []
    try:
        with eng.connect() as conn:
            for opts in CANDIDATES.values():
                spec = plans.spec_from_options(opts, partial=False)
                base = plans.validate_plan(conn, spec, named=False)
                # the mix's rows as the workload_class table stores them (as kvreg.app.optimize binds them)
                base["workload"] = plans.validate_workload(spec.get("workload"), base["context_tokens"],
                                                           base["avg_tokens"])
                rows += [{**base, "users": users} for users in (1, 700)]
            full = whatif.evaluate(conn, rows)
            slim = {cols: whatif.evaluate(conn, rows, columns=cols) for cols in COLUMN_SETS}
    finally:
        eng.dispose()
    return rows, full, slim


@pytest.mark.parametrize("cols", COLUMN_SETS, ids=["optimizer", "more"])
def test_the_slim_what_if_equals_the_full_view(candidates, cols):
    rows, full, slim = candidates
    assert [sorted(r) for r in slim[cols]] == [sorted(cols)] * len(rows)
    assert slim[cols] == [{c: r[c] for c in cols} for r in full]


def test_the_candidates_reach_every_branch(candidates):
    """Not a vacuous equality: the set holds fitting and non-fitting plans, the latency limit binding,
    and the MoE and fp8 rows differ from their dense / bf16 neighbours."""
    rows, full, _ = candidates
    by_name = dict(zip([n for n in CANDIDATES for _users in (1, 700)], full))
    assert by_name["no-fit-deepseek"]["fits"] == 0 and by_name["no-fit-deepseek"]["gpus_needed"] is None
    assert by_name["llama-8b"]["fits"] == 1 and by_name["moe-deepseek"]["fits"] == 1
    assert by_name["tpot-too-tight"]["users_per_replica"] == 0
    bound = {r["users_binding_constraint"] for r in full if r["fits"]}
    assert len(bound) > 1, bound  # memory on some candidates, a latency target on others


def test_the_slim_statement_computes_fewer_figures():
    """The point of it: plan_capacity's slim grain leaves out the figures the optimizer never reads, and
    plan_quarter shows plan_id and the columns asked for."""
    grains = slim_grains("plan_quarter", VIEW_COLUMNS)
    assert grains["plan_quarter"].outputs() == [] and sorted(grains["plan_quarter"].passthrough) == sorted(("plan_id", *VIEW_COLUMNS))
    assert set(grains["plan_capacity"].figures()) < set(GRAIN["plan_capacity"].figures())
    assert "cost_per_month" not in whatif_with("plan_quarter", columns=VIEW_COLUMNS)


def test_an_unknown_column_is_refused():
    with pytest.raises(ValueError, match="plan_quarter has no column no_such_figure"):
        slim_grains("plan_quarter", ("fits", "no_such_figure"))
