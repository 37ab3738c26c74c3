"""Every capacity figure kvreg prints, declared once: name (with its unit), meaning, expression.

These declarations are the only place a figure is computed. They compile to the SQL views
(SQLite and PostgreSQL) and to the workbook's cell formulas (Excel/LibreOffice); the CLI and
the Markdown report only read views. SPEC.md is the authority for every formula here.

Names used in expressions are either inputs (columns of the relation a view is computed
over: registry fields, dtype sizes, plan settings) or other figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import (
    Const,
    Expr,
    Input,
    Ref,
    and_,
    ceil,
    coalesce,
    concat,
    floor,
    fmt,
    greatest,
    if_,
    isnull,
    least,
    mod,
    not_,
    or_,
)

GIB = 2**30
HOURS_PER_MONTH = 730  # 8,760 hours a year / 12


@dataclass(frozen=True)
class Figure:
    name: str
    unit: str  # bytes, GiB, tokens, sequences, count, flag, text, USD, ...
    meaning: str
    expr: Expr
    kind: str = "real"  # int | real | flag | text


@dataclass(frozen=True)
class InputDecl:
    name: str
    unit: str
    meaning: str
    kind: str = "int"


# --------------------------------------------------------------------------- inputs

_INPUTS = [
    # model
    InputDecl("layers", "layers", "transformer layers"),
    InputDecl("full_layers", "layers", "layers with full (global) attention"),
    InputDecl("sliding_layers", "layers", "layers with sliding-window attention"),
    InputDecl("sliding_window", "tokens", "sliding window length"),
    InputDecl("chunked_layers", "layers", "layers with chunked local attention"),
    InputDecl("attention_chunk_size", "tokens", "attention chunk length"),
    InputDecl("linear_layers", "layers", "linear-attention / state-space layers"),
    InputDecl("linear_state_elements_per_layer", "elements", "fixed state per sequence per linear layer at TP1"),
    InputDecl("linear_state_heads", "heads", "heads the linear state shards by under TP"),
    InputDecl("attention_heads", "heads", "query heads"),
    InputDecl("kv_heads", "heads", "key/value heads"),
    InputDecl("head_dim", "elements", "key head dimension"),
    InputDecl("v_head_dim", "elements", "value head dimension"),
    InputDecl("kv_lora_rank", "elements", "MLA latent rank (NULL when not MLA)"),
    InputDecl("qk_rope_head_dim", "elements", "MLA decoupled RoPE key dimension"),
    InputDecl("params_total", "params", "all parameters (all experts)"),
    InputDecl("params_active", "params", "parameters read per token"),
    InputDecl("max_position_embeddings", "tokens", "claimed context length"),
    # dtypes
    InputDecl("kv_dtype", "name", "KV cache dtype", "text"),
    InputDecl("kv_bytes_per_element", "bytes", "bytes per KV element", "real"),
    InputDecl("kv_mla_bytes_per_token_per_layer", "bytes", "a format's own MLA bytes per token per layer"),
    InputDecl("weight_bytes_per_param", "bytes", "bytes per weight", "real"),
    InputDecl("state_bytes_per_element", "bytes", "bytes per linear-state element (model dtype)", "real"),
    # gpu
    InputDecl("memory_bytes", "bytes", "GPU memory"),
    InputDecl("memory_bandwidth_bytes_per_s", "bytes/s", "GPU memory bandwidth"),
    InputDecl("price_per_hour", "USD/h", "price per GPU-hour", "real"),
    InputDecl("unit_price", "USD", "price to buy one GPU", "real"),
    # deployment
    InputDecl("gpus_per_node", "GPUs", "GPUs in a node"),
    InputDecl("tp", "GPUs", "tensor-parallel size"),
    InputDecl("pp", "GPUs", "pipeline-parallel size"),
    InputDecl("dp_attention", "ranks", "attention data-parallel size inside a TP group"),
    InputDecl("context_tokens", "tokens", "context length a sequence may reach (max_model_len)"),
    InputDecl("avg_tokens", "tokens", "average tokens a request holds (prompt + output)"),
    InputDecl("reserve", "fraction", "share of GPU memory held back for activations and overheads", "real"),
    InputDecl("kv_cache_memory_bytes", "bytes", "KV pool per GPU given directly (overrides the reserve)"),
    InputDecl("block_size", "tokens", "paged-KV block size (0: no rounding)"),
    # demand
    InputDecl("users", "users", "target concurrent users in a quarter"),
]
INPUTS = {i.name: i for i in _INPUTS}


def I(name: str) -> Input:  # noqa: E743 - short on purpose: declarations read like formulas
    assert name in INPUTS, name
    return Input(name)


def F(name: str) -> Ref:
    return Ref(name)


# --------------------------------------------------------------------------- helpers


def _round_to_blocks(tokens: Expr) -> Expr:
    """Paged KV: a layer's tokens occupy whole blocks."""
    return if_(I("block_size") > 0, ceil(tokens / I("block_size")) * I("block_size"), tokens)


def _sequence_bytes_per_gpu(tokens: Expr) -> Expr:
    """KV bytes one sequence of `tokens` tokens holds on one GPU (SPEC "Per sequence")."""
    per_layer = F("kv_bytes_per_token_per_layer_per_gpu")
    full = F("full_layers_per_gpu") * per_layer * _round_to_blocks(tokens)
    sliding = F("sliding_layers_per_gpu") * per_layer * _round_to_blocks(least(tokens, coalesce(I("sliding_window"), 0)))
    chunked = F("chunked_layers_per_gpu") * per_layer * _round_to_blocks(
        least(tokens, coalesce(I("attention_chunk_size"), 0))
    )
    return full + sliding + chunked + F("state_bytes_per_sequence_per_gpu")


def _sequence_bytes(tokens: Expr) -> Expr:
    """KV bytes one sequence holds across the whole model (TP1, no blocks): the catalog figure."""
    return (
        F("kv_bytes_per_token_full") * tokens
        + F("kv_bytes_per_token_sliding") * least(tokens, coalesce(I("sliding_window"), 0))
        + F("kv_bytes_per_token_chunked") * least(tokens, coalesce(I("attention_chunk_size"), 0))
        + F("state_bytes_per_sequence")
    )


# --------------------------------------------------------------------------- figures

_FIGURES: list[Figure] = [
    # ---- per model and KV dtype
    Figure("is_mla", "flag", "1 when the model caches an MLA latent", if_(isnull(I("kv_lora_rank")), 0, 1), "flag"),
    Figure(
        "kv_bytes_per_token_per_layer",
        "bytes",
        "KV bytes one token adds to one attention layer (standard: kv_heads x (head_dim + v_head_dim);"
        " MLA: one latent of kv_lora_rank + qk_rope_head_dim; no K/V factor, no heads)",
        if_(
            F("is_mla"),
            coalesce(
                I("kv_mla_bytes_per_token_per_layer"),
                (I("kv_lora_rank") + I("qk_rope_head_dim")) * I("kv_bytes_per_element"),
            ),
            I("kv_heads") * (I("head_dim") + I("v_head_dim")) * I("kv_bytes_per_element"),
        ),
    ),
    Figure("kv_bytes_per_token_full", "bytes", "KV bytes per token in full-attention layers",
           I("full_layers") * F("kv_bytes_per_token_per_layer")),
    Figure("kv_bytes_per_token_sliding", "bytes", "KV bytes per token in sliding-window layers (up to the window)",
           I("sliding_layers") * F("kv_bytes_per_token_per_layer")),
    Figure("kv_bytes_per_token_chunked", "bytes", "KV bytes per token in chunked-attention layers (up to the chunk)",
           I("chunked_layers") * F("kv_bytes_per_token_per_layer")),
    Figure(
        "kv_bytes_per_token",
        "bytes",
        "KV bytes per token over all attention layers at TP1 (linear layers add none)",
        F("kv_bytes_per_token_full") + F("kv_bytes_per_token_sliding") + F("kv_bytes_per_token_chunked"),
    ),
    Figure(
        "state_bytes_per_sequence",
        "bytes",
        "fixed linear-attention state per sequence at TP1, in the model dtype (never the KV dtype)",
        I("linear_layers") * coalesce(I("linear_state_elements_per_layer"), 0) * I("state_bytes_per_element"),
    ),
    Figure("kv_bytes_per_128k_sequence", "bytes", "KV bytes of one 131,072-token sequence at TP1 (state included)",
           _sequence_bytes(Const(131072))),
    Figure("kv_gib_per_128k_sequence", "GiB", "the same in GiB", F("kv_bytes_per_128k_sequence") / GIB),
    # ---- weights
    Figure("weights_bytes", "bytes", "all weights at the weight dtype", I("params_total") * I("weight_bytes_per_param")),
    Figure("weights_gb", "GB", "the same in GB (10^9 bytes)", F("weights_bytes") / 1e9),
    # ---- parallelism
    Figure("attention_tp", "GPUs", "GPUs one attention head group is split over: TP / DP-attention",
           floor(I("tp") / I("dp_attention")), "int"),
    Figure(
        "tp_valid",
        "flag",
        "1 when attention_heads % TP = 0 and (kv_heads % TP = 0 or TP % kv_heads = 0), and TP x PP fits the node",
        and_(
            mod(I("attention_heads"), I("tp")).eq(0),
            or_(mod(I("kv_heads"), I("tp")).eq(0), mod(I("tp"), I("kv_heads")).eq(0)),
            (I("tp") * I("pp")) <= I("gpus_per_node"),
        ),
        "flag",
    ),
    Figure(
        "kv_heads_per_gpu",
        "heads",
        "KV heads each GPU holds: max(1, kv_heads // TP); past kv_heads the cache is replicated",
        greatest(1, floor(I("kv_heads") / F("attention_tp"))),
        "int",
    ),
    Figure("full_layers_per_gpu", "layers", "full-attention layers on the fullest pipeline stage",
           ceil(I("full_layers") / I("pp")), "int"),
    Figure("sliding_layers_per_gpu", "layers", "sliding layers on the fullest stage", ceil(I("sliding_layers") / I("pp")), "int"),
    Figure("chunked_layers_per_gpu", "layers", "chunked layers on the fullest stage", ceil(I("chunked_layers") / I("pp")), "int"),
    Figure("linear_layers_per_gpu", "layers", "linear layers on the fullest stage", ceil(I("linear_layers") / I("pp")), "int"),
    Figure(
        "kv_bytes_per_token_per_layer_per_gpu",
        "bytes",
        "KV bytes per token per layer on one GPU: MLA latents are not sharded by TP; heads are, down to one",
        if_(
            F("is_mla"),
            F("kv_bytes_per_token_per_layer"),
            F("kv_heads_per_gpu") * (I("head_dim") + I("v_head_dim")) * I("kv_bytes_per_element"),
        ),
    ),
    Figure(
        "kv_bytes_per_token_per_gpu",
        "bytes",
        "KV bytes one token adds on one GPU, all attention layers of the fullest stage",
        (F("full_layers_per_gpu") + F("sliding_layers_per_gpu") + F("chunked_layers_per_gpu"))
        * F("kv_bytes_per_token_per_layer_per_gpu"),
    ),
    Figure(
        "state_bytes_per_sequence_per_gpu",
        "bytes",
        "linear-attention state per sequence on one GPU: shards by TP like heads, replicated past the head count",
        F("linear_layers_per_gpu")
        * coalesce(I("linear_state_elements_per_layer"), 0)
        * I("state_bytes_per_element")
        / least(F("attention_tp"), coalesce(I("linear_state_heads"), 1)),
    ),
    Figure("kv_bytes_per_sequence", "bytes", "KV bytes of one context-length sequence at TP1, no blocks",
           _sequence_bytes(I("context_tokens"))),
    Figure("kv_gib_per_sequence", "GiB", "the same in GiB", F("kv_bytes_per_sequence") / GIB),
    Figure(
        "kv_bytes_per_sequence_per_gpu",
        "bytes",
        "KV bytes of one context-length sequence on one GPU (windows capped, state added, blocks rounded)",
        _sequence_bytes_per_gpu(I("context_tokens")),
    ),
    Figure("kv_gib_per_sequence_per_gpu", "GiB", "the same in GiB", F("kv_bytes_per_sequence_per_gpu") / GIB),
    Figure("weights_bytes_per_gpu", "bytes", "weights on one GPU: params x bytes / (TP x PP)",
           F("weights_bytes") / (I("tp") * I("pp"))),
    Figure("weights_gib_per_gpu", "GiB", "the same in GiB", F("weights_bytes_per_gpu") / GIB),
    Figure("memory_gib", "GiB", "GPU memory in GiB", I("memory_bytes") / GIB),
    Figure("usable_bytes_per_gpu", "bytes", "memory x (1 - reserve)", I("memory_bytes") * (1 - I("reserve"))),
    Figure("usable_gib_per_gpu", "GiB", "the same in GiB", F("usable_bytes_per_gpu") / GIB),
    Figure(
        "kv_pool_bytes_per_gpu",
        "bytes",
        "memory left for KV on one GPU: usable - weights, or kv_cache_memory_bytes when given",
        if_(isnull(I("kv_cache_memory_bytes")), F("usable_bytes_per_gpu") - F("weights_bytes_per_gpu"),
            I("kv_cache_memory_bytes")),
    ),
    Figure("kv_pool_gib_per_gpu", "GiB", "the same in GiB", F("kv_pool_bytes_per_gpu") / GIB),
    Figure(
        "weights_fit",
        "flag",
        "1 when the weights leave a positive KV pool (with kv_cache_memory_bytes: weights + pool fit in memory)",
        if_(
            isnull(I("kv_cache_memory_bytes")),
            F("kv_pool_bytes_per_gpu") > 0,
            (F("weights_bytes_per_gpu") + I("kv_cache_memory_bytes")) <= I("memory_bytes"),
        ),
        "flag",
    ),
    Figure(
        "kv_dtype_valid",
        "flag",
        "1 unless an MLA-only KV format (such as fp8_ds_mla) is used on a model without MLA",
        or_(F("is_mla"), isnull(I("kv_mla_bytes_per_token_per_layer"))),
        "flag",
    ),
    Figure(
        "sequences_per_rank",
        "sequences",
        "context-length sequences one attention rank's pool holds (a real number)",
        if_(and_(F("weights_fit"), F("kv_dtype_valid"), F("tp_valid")),
            F("kv_pool_bytes_per_gpu") / F("kv_bytes_per_sequence_per_gpu"), 0),
    ),
    Figure(
        "max_concurrency",
        "sequences",
        "context-length sequences one replica (a TP x PP group) holds at once: pool / bytes per sequence,"
        " times the DP-attention size (3.46 = three whole sequences and part of a fourth)",
        F("sequences_per_rank") * I("dp_attention"),
    ),
    Figure("whole_sequences", "sequences", "whole context-length sequences a replica holds",
           floor(F("sequences_per_rank")) * I("dp_attention"), "int"),
    Figure(
        "fits",
        "flag",
        "1 when a replica can hold at least one whole context-length sequence",
        and_(F("tp_valid"), F("kv_dtype_valid"), F("weights_fit"), F("whole_sequences") >= 1),
        "flag",
    ),
    Figure(
        "reason",
        "text",
        "why it does not fit (empty when it fits)",
        if_(
            not_(F("tp_valid")),
            concat("TP ", I("tp"), " x PP ", I("pp"), " is not valid for ", I("attention_heads"), " attention heads, ",
                   I("kv_heads"), " KV heads and ", I("gpus_per_node"), " GPUs per node"),
            if_(
                not_(F("kv_dtype_valid")),
                concat("KV dtype ", I("kv_dtype"), " is for MLA models only"),
                if_(
                    not_(F("weights_fit")),
                    if_(
                        isnull(I("kv_cache_memory_bytes")),
                        concat("weights need ", fmt(F("weights_gib_per_gpu"), 2), " GiB per GPU but only ",
                               fmt(F("usable_gib_per_gpu"), 2), " GiB is usable"),
                        concat("weights (", fmt(F("weights_gib_per_gpu"), 2), " GiB) plus the KV pool (",
                               fmt(F("kv_pool_gib_per_gpu"), 2), " GiB) exceed ", fmt(F("memory_gib"), 2),
                               " GiB per GPU"),
                    ),
                    if_(
                        F("whole_sequences") < 1,
                        concat("one ", I("context_tokens"), "-token sequence needs ",
                               fmt(F("kv_gib_per_sequence_per_gpu"), 2), " GiB per GPU but the KV pool holds ",
                               fmt(F("kv_pool_gib_per_gpu"), 2), " GiB"),
                        "",
                    ),
                ),
            ),
        ),
        "text",
    ),
    Figure(
        "kv_pool_tokens",
        "tokens",
        "tokens the pool of one GPU holds (whole blocks when paged); the engine log's 'GPU KV cache size'",
        if_(
            and_(F("weights_fit"), F("kv_bytes_per_token_per_gpu") > 0),
            if_(
                I("block_size") > 0,
                floor(F("kv_pool_bytes_per_gpu") / (I("block_size") * F("kv_bytes_per_token_per_gpu"))) * I("block_size"),
                floor(F("kv_pool_bytes_per_gpu") / F("kv_bytes_per_token_per_gpu")),
            ),
            0,
        ),
        "int",
    ),
    Figure("replicas_per_node", "replicas", "TP x PP groups in a node: gpus_per_node // (TP x PP)",
           floor(I("gpus_per_node") / (I("tp") * I("pp"))), "int"),
    Figure("node_concurrency", "sequences", "context-length sequences a whole node holds",
           F("replicas_per_node") * F("max_concurrency")),
    Figure(
        "decode_bytes_per_step_per_gpu",
        "bytes",
        "bytes one GPU reads per decode step: active weights plus the batch's KV (the whole sequences it holds, at least one)",
        I("params_active") * I("weight_bytes_per_param") / (I("tp") * I("pp"))
        + greatest(1, floor(F("sequences_per_rank"))) * F("kv_bytes_per_sequence_per_gpu"),
    ),
    Figure(
        "decode_tokens_per_s_per_sequence",
        "tokens/s",
        "memory-bandwidth ceiling on decode speed per sequence: bandwidth / bytes per step, over the PP stages",
        if_(F("fits"), I("memory_bandwidth_bytes_per_s") / (F("decode_bytes_per_step_per_gpu") * I("pp")), Const(None)),
    ),
    Figure("context_within_claim", "flag", "1 when the context is within the model's max_position_embeddings",
           I("context_tokens") <= I("max_position_embeddings"), "flag"),
    # ---- workload (paged: a request holds what it uses)
    Figure("workload_tokens", "tokens", "tokens an average request holds (avg_tokens, else the context)",
           coalesce(I("avg_tokens"), I("context_tokens")), "int"),
    Figure("kv_bytes_per_request_per_gpu", "bytes", "KV bytes an average request holds on one GPU",
           _sequence_bytes_per_gpu(F("workload_tokens"))),
    Figure(
        "workload_concurrency",
        "users",
        "average requests one replica holds at once (pool / bytes per average request x DP-attention)",
        if_(F("fits"), F("kv_pool_bytes_per_gpu") / F("kv_bytes_per_request_per_gpu") * I("dp_attention"), 0),
    ),
    Figure("gpus_per_replica", "GPUs", "TP x PP", I("tp") * I("pp"), "int"),
    # ---- demand (plan x quarter)
    Figure(
        "replicas_needed",
        "replicas",
        "replicas to serve the quarter's users: ceil(users / workload concurrency); NULL when the plan does not fit",
        if_(F("fits"), ceil(I("users") / F("workload_concurrency")), Const(None)),
        "int",
    ),
    Figure("gpus_needed", "GPUs", "GPUs the replicas occupy: replicas x TP x PP",
           F("replicas_needed") * F("gpus_per_replica"), "int"),
    Figure("nodes_needed", "nodes", "nodes to house the replicas: ceil(replicas / replicas per node)",
           ceil(F("replicas_needed") / F("replicas_per_node")), "int"),
    Figure("capacity_users", "users", "users the needed replicas can hold",
           F("replicas_needed") * F("workload_concurrency")),
    Figure("headroom_users", "users", "spare users: capacity - demand", F("capacity_users") - I("users")),
    Figure("headroom_fraction", "fraction", "spare share of capacity: headroom / capacity",
           F("headroom_users") / F("capacity_users")),
    Figure("cost_per_month", "USD", "GPUs needed x price per GPU-hour x 730 hours",
           F("gpus_needed") * I("price_per_hour") * HOURS_PER_MONTH),
    Figure("capex", "USD", "GPUs needed x unit price", F("gpus_needed") * I("unit_price")),
    Figure("cost_per_user_per_month", "USD", "cost per month / users", F("cost_per_month") / I("users")),
]

FIGURES: dict[str, Figure] = {}
for _f in _FIGURES:
    assert _f.name not in FIGURES and _f.name not in INPUTS, _f.name
    FIGURES[_f.name] = _f


def dependencies(name: str, _seen: frozenset = frozenset()) -> set[str]:
    """All inputs a figure depends on, through other figures."""
    if name in INPUTS:
        return {name}
    if name in _seen:
        raise ValueError(f"figure {name} depends on itself")
    out: set[str] = set()
    stack = [FIGURES[name].expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Input):
            out.add(e.name)
        elif isinstance(e, Ref):
            out |= dependencies(e.name, _seen | {name})
        stack.extend(e.children())
    return out
