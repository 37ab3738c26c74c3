"""Words and numbers a user can read (issue 13): integers grouped in tables, token counts as numbers,
prices with two decimals."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_table_integers_are_grouped(kv):
    lines = kv("capacity", "--model", "Llama-3-8B", "--context", "8K,32K").stdout.splitlines()
    # 8K = 8,192 and 32K = 32,768 tokens, both grouped (8192 used to stand beside 32,768)
    assert re.search(r"\b1 +8,192 +bf16 +131,072\b", lines[2]) and re.search(r"\b1 +32,768 +bf16 +131,072\b", lines[3])


def test_prices_show_two_decimals(kv):
    gpus = {line.split()[0]: line for line in kv("gpu", "list").stdout.splitlines()[2:]}
    # H100-SXM: 2.5 USD/h and 30,000 USD a card (the catalog's prices)
    assert re.search(r" 2\.50 +30,000\.00$", gpus["H100-SXM"])
    solved = kv("plan", "solve", "gpus", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--users", "10",
                "--context", "8K").stdout
    # one H100 for a month: 2.50 USD/h x 730 h = 1,825.00 USD; capex one card 30,000.00 USD
    assert re.search(r"^cost_per_month +1,825\.00$", solved, re.M) and re.search(r"^capex +30,000\.00$", solved, re.M)


def test_report_tables_give_token_counts_as_numbers():
    """The seeded report (tests/snapshots/capacity.md, regenerated and compared by test_report_md):
    the documents plan's 13,000-token context reads 13,000, not 13k."""
    rows = [line for line in (REPO / "tests" / "snapshots" / "capacity.md").read_text().splitlines()
            if line.startswith("| ") and "---" not in line]
    assert any("| 13,000 |" in r for r in rows)
    assert not [r for r in rows if re.search(r"\| \d+k \|", r)]


def test_plan_show_without_demand_prints_key_figures_and_all_on_request(kv):
    kv("plan", "add", "q", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--context", "8K")
    keys = [line.split()[0] for line in kv("plan", "show", "q").stdout.splitlines()]
    assert keys[:9] == ["plan", "model", "gpu", "rule", "tp", "pp", "dp_attention", "gpus_per_node", "context_tokens"]
    assert keys[-3:] == ["context_within_claim", "fits", "reason"] and len(keys) == 24
    every = [line.split()[0] for line in kv("plan", "show", "q", "--all").stdout.splitlines()]
    assert set(keys) < set(every) and "usable_gib_per_gpu" in every and "usable_gib_per_gpu" not in keys
    assert len(every) == len(set(every))
