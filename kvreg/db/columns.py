"""Each registry table's columns in order: the order rows are read in (kvreg.db.read) and json/csv
output follows, and the order kvreg.db.tables gives the generated table.

Standard library only (the read path's fast path imports it). A table's columns are its LAYOUT, then
every input declared in it (kvreg.figures.inputs) that the layout does not name, in declaration order,
as a migration appends a new column last: adding an input adds no name here.
"""

from __future__ import annotations

from kvreg.figures.inputs import INPUTS, KV_GROUPS

# The relations of kvreg.figures.inputs.INPUT_TABLES each registry table stores inputs of.
STORES = {
    "model": ("model",),
    "gpu": ("gpu",),
    "plan": ("deployment", "workload", "calibration"),
    "scenario": ("deployment", "workload"),
    "workload_class": ("class",),
    "demand": ("demand",),
}

# A deployment's columns, first on plan and scenario alike.
_DEPLOYMENT = (
    "gpus_per_node", "tp", "pp", "dp_attention", "context_tokens", "avg_tokens", "reserve", "kv_cache_memory_bytes",
    "block_size", "rule", "gpu_memory_utilization", "max_num_batched_tokens", "max_concurrent_batches",
    "activation_bytes", "cuda_graph_bytes", "mem_fraction_static", "engine_version", "engine_release",
    "non_torch_bytes", "weights_measured_bytes", "max_num_seqs", "input_tokens", "output_tokens", "concurrency",
    "tpot_target_ms", "ttft_target_ms",
)
# The order of the columns as they stood when the inputs came to be declared (schema 0018): the columns
# that are no input (keys, names, references, texts) and the inputs, where each was added.
LAYOUT = {
    "model": (
        "id", "name", "architecture", "family", "layers", "full_layers", "sliding_layers", "sliding_window",
        "chunked_layers", "attention_chunk_size", "linear_layers", "linear_state_elements_per_layer",
        "linear_state_heads", "linear_state_dtype", "attention_heads", "kv_heads", "head_dim", "v_head_dim",
        "kv_lora_rank", "qk_rope_head_dim", "indexer_bytes_per_token_per_layer", "hidden_size", "intermediate_size",
        "vocab_size", "params_total", "params_active", "weight_dtype", "max_position_embeddings", "source",
        "source_sha256", "imported_at", "notes", "no_cache_layers", "sliding_kv_heads", "sliding_head_dim",
        "chunked_kv_heads", "chunked_head_dim", "k_eq_v_layers", "linear_recurrent_elements_per_layer",
        "embedding_matrices", "experts", "expert_intermediate_size", "moe_layers", "rotary_dim", "indexer_layers",
        "linear_state_kind", *[f"kv_{what}_{n}" for n in KV_GROUPS for what in ("heads", "layers")],
        "expert_hidden_size",
    ),
    "gpu": (
        "id", "name", "vendor", "memory_bytes", "memory_bandwidth_bytes_per_s", "interconnect", "price_per_hour",
        "unit_price", "notes", "reported_memory_bytes", "compute_capability", "fabric", "lead_time_quarters",
        "node_gpus", "flops_bf16_per_s", "flops_fp8_per_s", "flops_fp4_per_s", "reported_memory_estimated",
    ),
    "plan": (*_DEPLOYMENT, "id", "name", "model_id", "gpu_id", "kv_dtype", "weight_dtype", "notes",
             "measured_kv_cache_tokens", "measured_max_concurrency", "measured_engine_version",
             "measured_kv_cache_bytes", "calibration_source", "allow_gpus", "allow_kv_dtypes"),
    "scenario": (*_DEPLOYMENT, "id", "model_id", "gpu_id", "kv_dtype", "weight_dtype"),
    "workload_class": ("id", "plan_id", "name", "avg_tokens", "share"),
    "demand": ("id", "plan_id", "quarter", "users"),
}


def stored_inputs(table: str) -> list:
    """The input declarations a registry table holds a column of, in declaration order."""
    return [i for i in INPUTS.values() if i.table in STORES[table]]


def columns_of(table: str) -> tuple[str, ...]:
    """A registry table's columns in order: its layout, then the declared inputs the layout does not name."""
    layout = LAYOUT[table]
    return layout + tuple(i.column for i in stored_inputs(table) if i.column not in layout)
