"""`kvreg model check`: what importing a config would store, and why, without writing anything.

The per-token figures it shows are the figure declarations evaluated on the row the import would
write (a bf16 KV cache on one GPU), so they are the numbers `kvreg model show` prints once imported.
"""

from __future__ import annotations

from kvreg.figures.declarations import FIGURES, INPUTS
from kvreg.figures.inputs import KV_GROUPS
from kvreg.figures.python import PythonEvaluator

from kvreg.interchange.hf.dtypes import WEIGHT_BYTES

# What a check reports beside the row's fields: figures at TP1 in a bf16 KV cache.
CHECK_FIGURES = ("kv_bytes_per_token", "kv_bytes_per_token_full", "state_bytes_per_sequence")
KV_BYTES_PER_ELEMENT = 2.0  # bf16


def tp1_figures(row: dict) -> dict:
    """CHECK_FIGURES for an imported row (bf16 KV cache, state in its own dtype), from the declarations."""
    inputs = {name: row.get(name) for name in INPUTS}
    inputs.update(
        kv_dtype="bf16", kv_bytes_per_element=KV_BYTES_PER_ELEMENT, kv_mla_bytes_per_token_per_layer=None,
        kv_scale_bytes_per_token_per_head=None, rule="theoretical",
        weight_bytes_per_param=WEIGHT_BYTES.get(row.get("weight_dtype")),
        state_bytes_per_element=WEIGHT_BYTES.get(row.get("linear_state_dtype") or row.get("weight_dtype")),
    )
    memo: dict = {}

    def ref(name: str):
        if name not in memo:
            memo[name] = PythonEvaluator(inputs.__getitem__, ref).eval(FIGURES[name].expr)
        return memo[name]

    values = {name: ref(name) for name in CHECK_FIGURES}
    return {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in values.items()}


def explain(row: dict, warnings: list[str], details: dict) -> dict:
    """One record saying what the import read: layer kinds, heads and widths per kind, state, params
    (and where they came from), the per-token figures, and every assumption and warning."""
    same = "same as full"
    figures = tp1_figures(row)
    mla = row.get("kv_lora_rank") is not None
    out = {
        "model": row["name"],
        "source": row.get("source"),
        "architecture": row.get("architecture"),
        "family": row.get("family"),
        "layers_with_cache": row["layers"],
        "full_layers": row["full_layers"],
        "sliding_layers": row["sliding_layers"],
        "sliding_window": row.get("sliding_window"),
        "chunked_layers": row["chunked_layers"],
        "attention_chunk_size": row.get("attention_chunk_size"),
        "linear_layers": row["linear_layers"],
        "no_cache_layers": row.get("no_cache_layers", 0),
        "attention_heads": row["attention_heads"],
        "kv_heads": row["kv_heads"],
        "head_dim": row["head_dim"],
        "v_head_dim": row["v_head_dim"],
        "sliding_kv_heads": row.get("sliding_kv_heads") or (same if row["sliding_layers"] else None),
        "sliding_head_dim": row.get("sliding_head_dim") or (same if row["sliding_layers"] else None),
        "chunked_kv_heads": row.get("chunked_kv_heads") or (same if row["chunked_layers"] else None),
        "chunked_head_dim": row.get("chunked_head_dim") or (same if row["chunked_layers"] else None),
        "k_eq_v_layers": row.get("k_eq_v_layers", 0),
        # per-layer kv heads: each other count and the full layers holding it (empty: every full layer at kv_heads)
        "kv_head_groups": [{"kv_heads": row[f"kv_heads_{n}"], "layers": row[f"kv_layers_{n}"]}
                           for n in KV_GROUPS if row.get(f"kv_layers_{n}")],
        "mla_latent": row["kv_lora_rank"] + row["qk_rope_head_dim"] if mla else None,
        "linear_state_elements_per_layer": row.get("linear_state_elements_per_layer"),
        "linear_recurrent_elements_per_layer": row.get("linear_recurrent_elements_per_layer"),
        "embedding_matrices": row.get("embedding_matrices"),
        "experts": row.get("experts"),
        "expert_intermediate_size": row.get("expert_intermediate_size"),
        "moe_layers": row.get("moe_layers"),
        "expert_hidden_size": row.get("expert_hidden_size"),
        "rotary_dim": row.get("rotary_dim"),
        "indexer_bytes_per_token_per_layer": row.get("indexer_bytes_per_token_per_layer"),
        "indexer_layers": row.get("indexer_layers"),
        "linear_state_heads": row.get("linear_state_heads"),
        "linear_state_dtype": row.get("linear_state_dtype") or (row["weight_dtype"] if row["linear_layers"] else None),
        "params_total": row["params_total"],
        "params_active": row["params_active"],
        "params_from": details["params_from"],
        # a multimodal model's towers, apart from params_total (every GPU holds them under the engine rules)
        "tower_params": row.get("tower_params"),
        "weight_dtype": row["weight_dtype"],
        "max_position_embeddings": row["max_position_embeddings"],
        **{f"{name}_bf16_tp1": value for name, value in figures.items()},
        "linear_state_kind": row.get("linear_state_kind"),
        # which of the config's cache-shaping keys the import read, and which it knows not to change the cache
        "cache_keys_read": details.get("cache_keys_read", []),
        "cache_keys_ignored": details.get("cache_keys_ignored", []),
        "assumptions": [n for n in details["assumptions"] if n not in warnings],
        "warnings": list(warnings),
    }
    return out
