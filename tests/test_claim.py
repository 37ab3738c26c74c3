"""A context beyond the model's claimed one (max_position_embeddings) is said everywhere (issue 13):
the capacity table's reason, the report's verdict, `plan add` (a warning; the plan is saved) and
`plan solve context` (capped at the claim unless --beyond-claim)."""

from __future__ import annotations

import re

from test_report_md import read, report

# Llama-3-8B claims 8,192 tokens; Llama-3.1-70B 131,072 (max_position_embeddings in their configs).


def test_the_capacity_reason_says_beyond_the_claim(kv):
    rows = kv.json("capacity", "--model", "Llama-3-8B", "--context", "8K,32K,1m")
    assert [r["context_within_claim"] for r in rows] == [1, 0, 0]
    assert [r["fits"] for r in rows] == [1, 1, 0]
    assert rows[0]["reason"] == ""
    assert rows[1]["reason"] == "fits, beyond the model's 8,192-token claim"
    assert rows[2]["reason"].endswith("GiB; beyond the model's 8,192-token claim")
    table = kv("capacity", "--model", "Llama-3-8B", "--context", "32K").stdout
    assert table.splitlines()[2].endswith("fits, beyond the model's 8,192-token claim")


def test_the_report_verdict_says_beyond_the_claim(tmp_path):
    """The catalog's plans at 13,000 tokens on Llama-3-8B (claim 8,192) and at 128K on Qwen3-235B-A22B
    (claim 40,960) fit but are past the claim: no section says a bare "Fits:" for them."""
    from kvreg.app.access import open_registry

    eng = open_registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        md, data = read(report(eng, tmp_path / "reports").folder)
    finally:
        eng.dispose()
    beyond = sorted(p["plan"] for p in data["plans"] if p["fits"] and not p["context_within_claim"])
    assert beyond == ["docs-llama3-8b", "longctx-qwen3-235b", "mixed-llama3-8b"]
    for name in beyond:
        section = md.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        assert "**Fits:**" not in section
        claim = "8,192" if "llama3" in name else "40,960"
        assert re.search(rf"\*\*Fits, beyond the model's {claim}-token claim:\*\* one replica holds", section), name


def test_plan_add_warns_beyond_the_claim_and_saves(kv):
    result = kv("plan", "add", "long", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--context", "32K")
    assert result.stdout == "added plan long\n"
    assert result.stderr.splitlines()[-1] == (
        "kvreg: warning: plan long's context (32,768 tokens) is beyond Llama-3-8B's 8,192-token claim "
        "(max_position_embeddings); saved, but the model is not known to answer well past it")
    assert kv.json("plan", "show", "long")[0]["context_within_claim"] == 0
    within = kv("plan", "add", "short", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--context", "8K")
    assert within.stderr == ""


def test_solve_context_stops_at_the_claim_unless_asked(kv):
    """8 users on 8 H100s, Llama-3.1-70B: memory allows 176,816 tokens at TP8 (docs/plans.md), past the
    131,072-token claim; the answer is the claim unless --beyond-claim."""
    args = ["plan", "solve", "context", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--users", "8", "--gpus", "8"]
    capped = kv.json(*args)[0]
    assert (capped["context_tokens"], capped["context_within_claim"], capped["limited_by"]) == (131_072, 1,
                                                                                                "model's claim")
    beyond = kv.json(*args, "--beyond-claim")[0]
    assert (beyond["context_tokens"], beyond["context_within_claim"], beyond["limited_by"]) == (176_816, 0, "memory")


def test_solve_prints_each_figure_once(kv):
    table = kv("plan", "solve", "context", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--users", "8",
               "--gpus", "8").stdout
    keys = [line.split()[0] for line in table.splitlines()]
    assert len(keys) == len(set(keys))
    assert "context" not in keys and "workload_concurrency" not in keys  # 128K beside 131,072; = max_concurrency
    assert re.search(r"^context_tokens +131,072$", table, re.M)
