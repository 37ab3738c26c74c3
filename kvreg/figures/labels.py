"""Column headers in words with units, for people: ``kv_bytes_per_token_per_gpu`` ->
"KV per token per GPU (bytes)".

The figure's name stays the key (views, JSON, the workbook's hidden name row); a label is
only how a header reads. Labels are made from the name and the declared unit, so a new
figure gets one without a line here; LABELS overrides the few that read badly.
"""

from __future__ import annotations

from .declarations import AGGREGATES, FIGURES, INPUTS

# Words spelled as people write them.
_WORDS = {
    "kv": "KV", "gpu": "GPU", "gpus": "GPUs", "tp": "TP", "pp": "PP", "dp": "DP", "mla": "MLA", "gib": "GiB",
    "gb": "GB", "id": "ID", "usd": "USD", "cuda": "CUDA", "qk": "QK", "v": "V", "lora": "LoRA", "128k": "128K",
    "capex": "Capex", "num": "number of", "max": "max", "avg": "average", "params": "parameters",
    "tpot": "TPOT", "ttft": "TTFT",
}
# Unit words in a name that the "(unit)" suffix already says.
_UNIT_TOKENS = {"bytes": {"bytes"}, "GiB": {"gib"}, "GB": {"gb"}, "USD": {"usd"}, "bytes/s": {"bytes", "per", "s"}, "ms": {"ms"}}
# How a unit reads in a header.
_UNITS = {"USD/h": "USD per hour", "bytes/s": "bytes per second", "tokens/s": "tokens per second",
          "fraction": "share", "flag": "1 = yes, 0 = no", "name": "", "text": "", "weight": "share"}


def capitalized(text: str) -> str:
    """`text` with its first letter upper case, the rest as written (str.capitalize would lower "KV" and "GPU")."""
    return text[:1].upper() + text[1:]


def _declared(name: str, words: str = "{}", unit: str | None = None) -> str:
    """An input's header from the label it declares (kvreg.figures.inputs: what its form field reads), set in
    `words` at {}, with its unit in brackets (`unit`: the declared unit as a header reads it, unless given)."""
    decl = INPUTS[name]
    shown = _UNITS.get(decl.unit, decl.unit) if unit is None else unit
    text = capitalized(words.format(decl.label))
    return f"{text} ({shown})" if shown else text


# Headers that read better than the name makes them; an input's says its declared label (_declared).
LABELS = {
    "gpu": "GPU type",
    "plan": "Plan",
    "model": "Model",
    "quarter": "Quarter",
    "vendor": "Vendor",
    "plans": "Plans (count)",
    "memory_bandwidth_bytes_per_s": "Memory bandwidth (bytes per second)",
    "price_per_hour": "Price per GPU-hour (USD)",
    "unit_price": "Price per GPU (USD)",
    "cost_per_month": "Cost per month (USD)",
    "cost_per_user_per_month": "Cost per user per month (USD)",
    "capex": "Purchase cost (USD)",
    "capex_to_buy": "Purchase cost of the GPUs to buy (USD)",
    "reserved_price_per_hour": "Reserved price per GPU-hour (USD)",
    "reserve": _declared("reserve", unit="share of GPU memory"),
    "share": "Share of requests (weight)",
    "fits": "Fits in memory (1 = yes, 0 = no)",
    "reason": "Why it does not fit",
    "users_binding_constraint": "Binding limit (memory or latency)",
    "context_tokens": _declared("context_tokens"),
    "avg_tokens": _declared("avg_tokens", "{} per request"),
    "class_tokens": "Tokens per request of the class (tokens)",
    "workload_class": "Workload class",
    "dp_attention": _declared("dp_attention"),
    "kv_gib_per_128k_sequence": "KV per 128K sequence (GiB)",
    "kv_bytes_per_token_full": "KV per token past the windows: full layers only (bytes)",
    "kv_bytes_per_token_full_per_gpu": "KV per token past the windows per GPU: full layers only (bytes)",
    "kv_bytes_per_128k_sequence": "KV per 128K sequence (bytes)",
    "users": "Concurrent users (users)",
    "plans_not_fitting": "Plans that do not fit (count)",
    "previous_gpus_needed": "GPUs needed the quarter before (GPUs)",
    "previous_quarter_gpus_needed": "GPUs needed the quarter before (GPUs)",
    "gpus_needed_quarter_change": "Change in GPUs needed from the quarter before (GPUs)",
    "gpus_change": "Change in GPUs needed (GPUs)",
    "capacity_users": "Capacity (users)",
    "headroom_users": "Headroom (users)",
    "headroom_fraction": "Headroom (share of capacity)",
    "decode_tokens_per_s_per_sequence": "Decode speed ceiling per sequence (tokens per second)",
    "mem_fraction_static": _declared("mem_fraction_static", "SGLang {}"),
    "mem_fraction_static_used": "SGLang mem fraction static used (share)",
    "sglang_state_slots": "SGLang state slots (requests)",
    "sglang_state_bytes_per_request_per_gpu": "SGLang state slot per request per GPU (bytes)",
    "max_num_seqs": _declared("max_num_seqs", "{} given"),
    "memory_gib": "Memory (GiB)",
    "weight_bytes_per_param": "Weight per parameter (bytes)",
    "gpus_to_buy": "GPUs to buy, beyond the fleet and earlier purchases (GPUs)",
    "gpus_bought": "GPUs bought so far in the horizon (GPUs)",
    "gpus_short": "GPUs short of the fleet alone (GPUs)",
    "order_by": "Order by (quarter)",
    "order_by_whole_nodes": "Order by, whole nodes (quarter)",
    "order_late": "Order late (1 = yes, 0 = no)",
    "order_by_index": "Order by (quarter index)",
    "driving_plans": "Plans driving the purchase (GPUs more)",
    "first_order_by": "First order by (quarter)",
    "orders_late": "Orders already late (count)",
    "lead_time_quarters": "Lead time (quarters)",
    "node_gpus": "GPUs per node bought (GPUs)",
    "flops_bf16_per_s": "Dense BF16 tensor FLOP per second",
    "flops_fp8_per_s": "Dense FP8 tensor FLOP per second",
    "flops_fp4_per_s": "Dense FP4 tensor FLOP per second",
}


def unit_of(name: str) -> str:
    decl = FIGURES.get(name) or INPUTS.get(name) or AGGREGATES.get(name)
    return decl.unit if decl else ""


def label(name: str, unit: str | None = None) -> str:
    """A header in words with its unit in brackets; `unit` defaults to the declared one."""
    if name in LABELS:
        return LABELS[name]
    unit = unit_of(name) if unit is None else unit
    tokens = name.split("_")
    drop = _UNIT_TOKENS.get(unit, set())
    if unit == "bytes/s" and tokens[-3:] == ["bytes", "per", "s"]:
        tokens = tokens[:-3]
    else:
        kept = [t for t in tokens if t not in drop]
        tokens = kept or tokens
    words = [_WORDS.get(t, t) for t in tokens]
    text = " ".join(words).strip()
    text = capitalized(text)
    shown = _UNITS.get(unit, unit)
    return f"{text} ({shown})" if shown else text


# A plan's users served (users_per_replica: the smaller of its memory and latency limits), said in the same
# words by every output: the CLI, the web pages, the report and the workbook. The figures are read from the
# views; these are only how they read.
FITS_IN_MEMORY = "fits in memory"  # the heading of `fits` where a table is read by people
SERVES_NO_USER = "Serves no user"  # a plan that fits in memory but whose latency target one request misses


def serves_no_user(fits, users_per_replica) -> bool:
    """A plan that fits in memory yet serves no user (users_per_replica 0: no replica meets its latency
    target even with one request); a plan that does not fit says so in its reason instead."""
    return bool(fits) and users_per_replica is not None and not users_per_replica


def users_served(binds: str, users_text: str) -> str:
    """'latency binds: 79.00 users per replica', the limit read from users_binding_constraint and the users as
    the output formats users_per_replica."""
    return f"{binds} binds: {users_text} users per replica"
