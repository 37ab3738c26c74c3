"""Parallelism that cannot exist is refused, and --tp auto chooses by the declared figures (issue 13).

DP-attention splits one TP group's GPUs into ranks that hold different sequences, so it must divide
TP. `--tp auto` picks by the `fits` figure (a replica holds one whole sequence), not by
max_concurrency >= 1; `plan add/set --tp auto` picks the layout with the fewest GPUs for the plan's
demand, exactly what `plan solve gpus` answers. A replica that cannot hold one whole sequence
serves nothing: node_concurrency and the users figures are 0.
"""

from __future__ import annotations

import math

from test_plans import fails_cleanly

GiB = 2**30
# Llama-3.1-70B: 80 layers x 8 KV heads x (128 + 128) x 2 B (bf16) per token; 70.6e9 params x 2 B
LLAMA_70B_KV_PER_TOKEN = 80 * 8 * 256 * 2  # 327,680 B
LLAMA_70B_WEIGHTS = 70_600_000_000 * 2
H200 = 141 * GiB
USABLE = H200 * (1 - 0.12)


def per_rank(tp: int, dp: int, tokens: int = 1_000_000) -> float:
    """Sequences one DP-attention rank holds: each rank splits its heads over tp / dp GPUs."""
    heads_per_gpu = max(1, 8 // (tp // dp))
    seq = tokens * LLAMA_70B_KV_PER_TOKEN // 8 * heads_per_gpu  # 1,000,000 is whole 16-token blocks
    return (USABLE - LLAMA_70B_WEIGHTS / tp) / seq


def test_dp_attention_that_does_not_divide_tp_is_refused(kv, state):
    line = fails_cleanly(kv, state, "capacity", "--model", "Llama-3.1-8B", "--tp", "1", "--dp-attention", "3")
    assert line == ("Error: --dp-attention 3 does not divide --tp 1: DP-attention splits a TP group into equal ranks, "
                    "so give a TP that is a multiple of 3 (or --tp auto)")
    line = fails_cleanly(kv, state, "capacity", "--model", "Llama-3.1-8B", "--tp", "auto", "--dp-attention", "3")
    assert line == ("Error: --dp-attention 3 divides none of the TPs a node allows (1, 2, 4, 8): lower --dp-attention "
                    "or raise --gpus-per-node")
    line = fails_cleanly(kv, state, "plan", "add", "p", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--tp", "2",
                         "--dp-attention", "4")
    assert line.startswith("Error: --dp-attention 4 does not divide --tp 2")
    line = fails_cleanly(kv, state, "plan", "solve", "gpus", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM",
                         "--tp", "auto", "--dp-attention", "3", "--users", "10")
    assert line.startswith("Error: --dp-attention 3 divides none of the TPs")


def test_tp_auto_chooses_by_fits_not_by_max_concurrency(kv):
    """At TP4 with DP-attention 2 each rank holds 0.60 of a 1m-token sequence: max_concurrency 1.20 but
    no whole sequence (fits 0). TP8 holds 1.41 per rank: the answer is TP8, 2.82 sequences."""
    assert math.isclose(per_rank(4, 2), 0.5977, abs_tol=1e-4) and math.isclose(per_rank(8, 2), 1.4109, abs_tol=1e-4)
    args = ["capacity", "--model", "Llama-3.1-70B", "--gpu", "H200", "--context", "1m", "--dp-attention", "2"]
    tp4 = kv.json(*args, "--tp", "4")[0]
    assert (tp4["fits"], tp4["whole_sequences"]) == (0, 0)
    assert math.isclose(tp4["max_concurrency"], 2 * per_rank(4, 2), rel_tol=1e-9)
    assert tp4["node_concurrency"] == 0  # not 2 replicas x 1.20
    auto = kv.json(*args, "--tp", "auto")[0]
    assert (auto["tp"], auto["fits"], auto["whole_sequences"]) == (8, 1, 2)
    assert math.isclose(auto["max_concurrency"], 2 * per_rank(8, 2), rel_tol=1e-9)
    assert math.isclose(auto["node_concurrency"], 2 * per_rank(8, 2), rel_tol=1e-9)  # one TP8 replica per node


def test_plan_tp_auto_is_the_fewest_gpus_for_the_demand(kv):
    """Llama-3.1-70B on H100 at 128K: TP4 is the smallest TP that fits (4 GPUs serve one user), but
    100 users need fewer GPUs at TP8. plan add (no demand: one user) and plan set after demand
    agree with plan solve gpus."""
    spec = ["--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--context", "128K"]
    kv("plan", "add", "big", *spec, "--tp", "auto")
    assert kv.json("plan", "show", "big")[0]["tp"] == 4
    one = kv.json("plan", "solve", "gpus", *spec, "--tp", "auto", "--users", "1")[0]
    assert (one["tp"], one["gpus"]) == (4, 4)
    kv("demand", "set", "big", "2027Q1", "100")
    kv("plan", "set", "big", "--tp", "auto")
    hundred = kv.json("plan", "solve", "gpus", *spec, "--tp", "auto", "--users", "100")[0]
    at4 = kv.json("plan", "solve", "gpus", *spec, "--tp", "4", "--users", "100")[0]
    assert hundred["tp"] == 8 and hundred["gpus"] < at4["gpus"]
    shown = kv.json("plan", "show", "big")[0]
    assert (shown["tp"], shown["gpus_needed"]) == (8, hundred["gpus"])


# A layout no node (or model) can hold, and the line kvreg.app.capacity.check_layout or check_pp_layers refuses it
# with: the same for a capacity question, a plan and a solver (one validator, so the three cannot drift apart).
IMPOSSIBLE_LAYOUTS = [
    (("--tp", "4", "--pp", "4"),
     "Error: TP 4 x PP 4 needs 16 GPUs but a node has 8 (--gpus-per-node): lower --tp or --pp, or raise --gpus-per-node"),
    (("--tp", "auto", "--pp", "16"), "Error: PP 16 does not fit in a node of 8 GPUs (--gpus-per-node)"),
    (("--tp", "1", "--pp", "40", "--gpus-per-node", "64"),
     "Error: PP 40 is more than Llama-3.1-8B's 32 layers (every pipeline stage holds at least one): lower --pp to 32 "
     "or less"),
    (("--tp", "2", "--dp-attention", "4"),
     "Error: --dp-attention 4 does not divide --tp 2: DP-attention splits a TP group into equal ranks, so give a TP "
     "that is a multiple of 4 (or --tp auto)"),
]


def test_one_layout_check_for_questions_plans_and_solvers(kv, state):
    for layout, expected in IMPOSSIBLE_LAYOUTS:
        where = ("--model", "Llama-3.1-8B", "--gpu", "H100-SXM", *layout)
        lines = {
            "capacity": fails_cleanly(kv, state, "capacity", *where),
            "plan add": fails_cleanly(kv, state, "plan", "add", "p", *where),
            "plan solve gpus": fails_cleanly(kv, state, "plan", "solve", "gpus", *where, "--users", "10"),
        }
        assert lines == dict.fromkeys(lines, expected), layout
