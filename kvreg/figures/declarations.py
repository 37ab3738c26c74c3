"""Every capacity figure kvreg prints, declared once: name (with its unit), meaning, expression.

These declarations are the only place a figure is computed. They compile to the SQL views
(SQLite and PostgreSQL) and to the workbook's cell formulas (Excel/LibreOffice); the CLI and
the Markdown report only read views. SPEC.md is the authority for every formula here.

Names used in expressions are either inputs (columns of the relation a view is computed
over: registry fields, dtype sizes, plan settings) or other figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kvreg.core.rules import RULES

from .expr import (
    Const,
    Expr,
    Input,
    Ref,
    and_,
    ceil,
    coalesce,
    concat,
    contains,
    floor,
    fmt,
    greatest,
    grouped,
    if_,
    isnull,
    least,
    mod,
    names,
    not_,
    or_,
)
# The engines' defaults and constants, each named once with its source, and the inputs, declared in their
# own modules (stdlib only, for the commands that need no figure); the figures below read them by name.
from .engine_defaults import *  # noqa: F403
from .inputs import INPUT_TABLES, INPUTS, KV_GROUPS, inputs_of  # noqa: F401
from .performance import (
    ACTIVATION_WIRE_BYTES,
    ALLREDUCES_PER_LAYER,
    DEFAULT_PREFILL_CHUNK_TOKENS,
    EAGER_ALLREDUCE_LATENCY_S,
    EFFICIENCIES,
    FABRIC_LINK_BYTES_PER_S,
    FABRIC_LINK_DEFAULT_BYTES_PER_S,
    PCIE_LINK_BYTES_PER_S,
)

HOURS_PER_MONTH = 730  # 8,760 hours a year / 12


@dataclass(frozen=True)
class Figure:
    name: str
    unit: str  # bytes, GiB, tokens, sequences, count, flag, text, USD, ...
    meaning: str
    expr: Expr
    kind: str = "real"  # int | real | flag | text


def I(name: str) -> Input:  # noqa: E743 - short on purpose: declarations read like formulas
    assert name in INPUTS, name
    return Input(name)


def F(name: str) -> Ref:
    return Ref(name)


# --------------------------------------------------------------------------- helpers


def _rule(name: str) -> Expr:
    """1 when the deployment follows this allocation rule."""
    assert name in RULES, name
    return I("rule").eq(name)


def _or_all(kind: str) -> Expr:
    """A kind's layers on the fullest stage, or all of the stage's layers when the model has none of that
    kind: the smallest of these is the fewest layers of any kind present."""
    return if_(F(kind) > 0, F(kind), ceil(I("layers") / I("pp")))


def _forward_activation():
    """vLLM's profile run, forward pass: the MLP's gate-up and activated outputs beside three hidden-width vectors
    (the residual, the MLP's input and down_proj's output) for every batched token (not divided by TP: vLLM v0.6.5
    logged 1.26 GiB for Llama-3-8B at TP 1 and at TP 2)."""
    return (F("max_num_batched_tokens_used")
            * (ACTIVATION_INTERMEDIATE_VECTORS * I("intermediate_size") + ACTIVATION_HIDDEN_VECTORS * I("hidden_size"))
            * ACTIVATION_BYTES_PER_ELEMENT)


def _sampler_warm_up():
    """vLLM's profile run, sampler warm-up: one row of logits over the vocabulary per dummy request,
    min(max_num_batched_tokens, max_num_seqs) of them (V1: gpu_model_runner.py _dummy_run, num_reqs =
    min(num_tokens, max_num_reqs); V0: model_runner.py profile_run spreads max_num_batched_tokens over max_num_seqs
    prompts, one sampled token each)."""
    rows = least(F("vllm_max_num_seqs_used"), F("max_num_batched_tokens_used"))
    return rows * coalesce(I("vocab_size"), 0) * F("sampler_bytes_per_logit")


def _indexer_less_bytes_per_gpu() -> Expr:
    """KV bytes per token the MLA layers without an indexer of their own do not hold on one GPU, under an engine
    rule (GLM-5.2's indexer_types "shared" layers); 0 when every MLA layer keeps one (indexer_layers NULL)."""
    return if_(and_(F("is_mla"), not_(_rule("theoretical")), not_(isnull(I("indexer_layers")))),
               (F("full_layers_per_gpu") - ceil(coalesce(I("indexer_layers"), 0) / I("pp")))
               * coalesce(I("indexer_bytes_per_token_per_layer"), 0), 0)


def _state_shards() -> Expr:
    """The GPUs a linear layer's state is split over: TP, up to the heads it shards by (replicated past them)."""
    return least(F("attention_tp"), coalesce(I("linear_state_heads"), 1))


def _running(per_rank: Expr) -> Expr:
    """Requests one attention rank runs: what its pool holds, at most the engine's max_running_requests (none under
    the theoretical rule)."""
    return least(per_rank, coalesce(F("max_running_requests"), per_rank))


# SGLang runs at most half its token pool's size in requests (resolve_max_num_reqs: max_total_num_tokens // 2).
_SGLANG_TOKEN_CAP = floor(F("kv_cache_tokens") / SGLANG_TOKENS_PER_RUNNING_REQUEST)


def _sglang_tier(column: int) -> Expr:
    """The SGLANG_MEMORY_TIERS column (1 chunked_prefill_size, 2 cuda_graph_max_bs below TP 4, 3 from TP 4) of
    the tier the GPU's memory falls in."""
    *bounded, (_top, *last) = SGLANG_MEMORY_TIERS
    out: Expr = Const(([None] + last)[column])
    for top, *values in reversed(bounded):
        out = if_(F("sglang_gpu_memory_mib") < top, values[column - 1], out)
    return out


def _sglang_reserved() -> Expr:
    """server_args.py's reserved_mem before its floor on large GPUs."""
    return (SGLANG_RESERVED_BASE_MIB
            + greatest(F("sglang_chunked_prefill_size"), SGLANG_RESERVED_MIN_PREFILL_TOKENS)
            * SGLANG_RESERVED_MIB_PER_PREFILL_TOKEN
            + F("sglang_cuda_graph_max_bs") * SGLANG_RESERVED_MIB_PER_CUDA_GRAPH_BS
            + I("tp") * I("pp") / 8 * SGLANG_RESERVED_MIB_PER_8_RANKS
            + F("sglang_prefill_graphs_mib"))


def _sglang_prefill_graphs() -> Expr:
    """How many prefill CUDA graphs SGLang captures at its chunked_prefill_size (one of the tiers' sizes)."""
    out: Expr = Const(sglang_prefill_graph_sizes(SGLANG_MEMORY_TIERS[-1][1]))
    for chunk in sorted({t[1] for t in SGLANG_MEMORY_TIERS[:-1]}, reverse=True):
        out = if_(F("sglang_chunked_prefill_size").eq(chunk), sglang_prefill_graph_sizes(chunk), out)
    return out


def _sglang_legacy_reserved() -> Expr:
    """v0.4.8 to v0.5.2's reserve in MiB: (a + TP x PP x b) x 1024 by the GPU's memory (SGLANG_LEGACY_RESERVED_TIERS)."""
    *bounded, (_top, a, b) = SGLANG_LEGACY_RESERVED_TIERS
    parallel = I("tp") * I("pp")
    out: Expr = (a + parallel * b) * 1024
    for top, a, b in reversed(bounded):
        out = if_(F("sglang_gpu_memory_mib") < top, (a + parallel * b) * 1024, out)
    return out


def _sglang_tp_fraction(parallel: Expr) -> Expr:
    """Releases before v0.4.8: the fraction by parallel size (SGLANG_TP_FRACTIONS; 0.82 from 8 before v0.4.0)."""
    out: Expr = Const(SGLANG_SMALL_TP_FRACTION)
    for size, fraction in reversed(SGLANG_TP_FRACTIONS):
        if size == 8:
            fraction = if_(F("engine_release_used") < SGLANG_FRACTION_040_FROM, SGLANG_TP8_FRACTION_BEFORE_040, fraction)
        out = if_(parallel >= size, fraction, out)
    return out


def _sglang_fraction_before_v048() -> Expr:
    """mem_fraction_static's default up to v0.4.7 (see engine_defaults.py), from the tier figures."""
    gpu = F("sglang_gpu_memory_mib")
    by_tp = F("sglang_tp_tier_fraction")
    v047_base = if_(gpu <= SGLANG_V046_LARGE_GPU_MIB, F("sglang_parallel_tier_fraction"), SGLANG_SMALL_TP_FRACTION)
    v047 = if_(gpu > SGLANG_V047_HUGE_GPU_MIB, SGLANG_V047_HUGE_GPU_FRACTION,
               if_(gpu > SGLANG_V047_BIG_GPU_MIB,
                   least(v047_base + SGLANG_V047_HEADROOM_MIB * (1 - v047_base) / gpu,
                         (gpu - SGLANG_V047_RESERVED_MIB) / gpu),
                   v047_base))
    return if_(F("engine_release_used") < SGLANG_FRACTION_BY_MEMORY_FROM, by_tp,
               if_(F("engine_release_used") < SGLANG_V047_FROM,
                   if_(gpu <= SGLANG_V046_LARGE_GPU_MIB, by_tp, (gpu - SGLANG_V046_RESERVED_MIB) / gpu),
                   v047))


_KIND_LAYERS = ("full_layers_per_gpu", "sliding_layers_per_gpu", "chunked_layers_per_gpu", "linear_layers_per_gpu")


def _groups(kind: str) -> Expr:
    """vLLM: KV cache groups a layer kind splits into: cdiv(its layers, layers per group); at PP > 1 (full-attention
    layers only) one group of the limiting stage's layers."""
    return if_(F("pp_stages_modelled"), 1 if kind == "full_layers_per_gpu" else 0, ceil(F(kind) / F("kv_group_layers")))


def _block_alignment() -> Expr:
    return if_(F("is_mla"), VLLM_MLA_BLOCK_ALIGNMENT, VLLM_BLOCK_ALIGNMENT)


def _round_to_blocks(tokens: Expr) -> Expr:
    """Paged KV: a layer's tokens occupy whole blocks."""
    return if_(I("block_size") > 0, ceil(tokens / I("block_size")) * I("block_size"), tokens)


def _layer_bytes(kv_heads: Expr, kind: str) -> Expr:
    """A standard (not MLA) layer's KV bytes per token for `kv_heads` heads: K and V at the kind's head
    widths (sliding and chunked layers may have their own), plus a per-token-head format's scales."""
    widths = I("head_dim") + I("v_head_dim")
    if kind != "full":
        widths = if_(isnull(I(f"{kind}_head_dim")), widths, 2 * I(f"{kind}_head_dim"))
    return kv_heads * (widths * I("kv_bytes_per_element") + coalesce(I("kv_scale_bytes_per_token_per_head"), 0))


def _kind_kv_heads(kind: str) -> Expr:
    return I("kv_heads") if kind == "full" else coalesce(I(f"{kind}_kv_heads"), I("kv_heads"))


def _no_target() -> Expr:
    """1 when the workload has neither a tpot nor a ttft target."""
    return and_(isnull(F("workload_tpot_target_ms")), isnull(F("workload_ttft_target_ms")))


def _binds(memory_limit: Expr) -> Expr:
    """latency when the targets' limit is below the memory limit, else memory (a target every concurrency
    meets leaves latency_concurrency_limit NULL: memory binds)."""
    return if_(isnull(F("latency_concurrency_limit")), "memory",
               if_(F("latency_concurrency_limit") < memory_limit, "latency", "memory"))


def _tp_fits_heads(kv_heads: Expr) -> Expr:
    return or_(mod(kv_heads, I("tp")).eq(0), mod(I("tp"), kv_heads).eq(0))


def _group_kv_heads(n: int) -> Expr:
    """Per-layer kv heads: the kv heads of group n's full layers (kv_heads when the model has no such group)."""
    return coalesce(I(f"kv_heads_{n}"), I("kv_heads"))


def _grouped_layers() -> Expr:
    """The full layers that hold kv heads of their own (per-layer kv heads), not kv_heads; 0 for most models."""
    total: Expr = coalesce(I(f"kv_layers_{KV_GROUPS[0]}"), 0)
    for n in KV_GROUPS[1:]:
        total = total + coalesce(I(f"kv_layers_{n}"), 0)
    return total


def _expert_hidden() -> Expr:
    """The routed experts' input and output width: the MoE latent where the model has one (Kimi-K3
    routed_expert_hidden_size, Nemotron 3 moe_latent_size), else hidden_size."""
    return coalesce(I("expert_hidden_size"), I("hidden_size"))


def _replicated_kv_layers(layers: Expr, kv_heads: Expr) -> Expr:
    """Layers x the share of a K/V projection a GPU holds beyond its even split when TP exceeds the kv heads:
    layers x (1 - kv_heads / TP), 0 at TP up to the kv heads."""
    return if_(I("tp") > kv_heads, layers * (1 - kv_heads / I("tp")), 0)


def _kv_groups_sum(term: Callable[[int], Expr]) -> Expr:
    total = term(KV_GROUPS[0])
    for n in KV_GROUPS[1:]:
        total = total + term(n)
    return total


def _sequence_bytes_per_gpu(tokens: Expr) -> Expr:
    """KV bytes one sequence of `tokens` tokens holds on one GPU (SPEC "Per sequence")."""
    full = F("kv_bytes_per_token_full_per_gpu") * _round_to_blocks(tokens)
    sliding = F("sliding_layers_per_gpu") * F("kv_bytes_per_token_per_sliding_layer_per_gpu") * _round_to_blocks(
        least(tokens, coalesce(I("sliding_window"), 0)))
    chunked = F("chunked_layers_per_gpu") * F("kv_bytes_per_token_per_chunked_layer_per_gpu") * _round_to_blocks(
        least(tokens, coalesce(I("attention_chunk_size"), 0))
    )
    return full + sliding + chunked + F("state_bytes_per_sequence_per_gpu")


def _local_bytes_per_gpu() -> Expr:
    """KV bytes per token on one GPU in the sliding and chunked layers together."""
    return (F("sliding_layers_per_gpu") * F("kv_bytes_per_token_per_sliding_layer_per_gpu")
            + F("chunked_layers_per_gpu") * F("kv_bytes_per_token_per_chunked_layer_per_gpu"))


def _sequence_bytes(tokens: Expr) -> Expr:
    """KV bytes one sequence holds across the whole model (TP1, no blocks): the catalog figure."""
    return (
        F("kv_bytes_per_token_full") * tokens
        + F("kv_bytes_per_token_sliding") * least(tokens, coalesce(I("sliding_window"), 0))
        + F("kv_bytes_per_token_chunked") * least(tokens, coalesce(I("attention_chunk_size"), 0))
        + F("state_bytes_per_sequence")
    )


# --------------------------------------------------------------------------- figures

# Why a layout does not fit, or "" when it does (the reason figure adds the model's claim).
_WHY_NOT = (
        if_(
            not_(F("tp_valid")),
            concat("TP ", I("tp"), " x PP ", I("pp"), " is not valid for ", I("attention_heads"), " attention heads, ",
                   I("kv_heads"), " KV heads and ", I("gpus_per_node"), " GPUs per node"),
            if_(
                not_(F("kv_dtype_valid")),
                concat("KV dtype ", I("kv_dtype"), " is for MLA models only"),
                if_(
                    not_(F("engine_serves_layout")),
                    "SGLang does not serve a model whose layers differ in kv heads (variable GQA)",
                    if_(
                        not_(F("weights_fit")),
                        if_(
                            isnull(I("kv_cache_memory_bytes")),
                            concat("weights need ", fmt(F("weights_gib_per_gpu"), 2), " GiB per GPU but only ",
                                   fmt(F("allocatable_gib_per_gpu"), 2), " GiB is usable"),
                            concat("weights (", fmt(F("weights_gib_per_gpu"), 2), " GiB) plus the KV pool (",
                                   fmt(F("kv_pool_gib_per_gpu"), 2), " GiB) exceed ", fmt(F("memory_gib"), 2),
                                   " GiB per GPU"),
                        ),
                        if_(
                            F("whole_sequences") < 1,
                            # what the rule sizes a sequence by: the pool over the sequences it holds (vLLM's whole
                            # blocks, SGLang's cells; the theoretical rule's bytes per sequence)
                            concat("one ", grouped(I("context_tokens")), "-token sequence needs ",
                                   fmt(if_(F("sequences_per_rank") > 0,
                                           F("kv_pool_gib_per_gpu") / F("sequences_per_rank"),
                                           F("kv_gib_per_sequence_per_gpu")), 2),
                                   " GiB per GPU but the KV pool holds ", fmt(F("kv_pool_gib_per_gpu"), 2), " GiB"),
                            "",
                        ),
                    ),
                ),
            ),
        )
)


_FIGURES: list[Figure] = [
    # ---- per model and KV dtype
    Figure("is_mla", "flag", "1 when the model caches an MLA latent", if_(isnull(I("kv_lora_rank")), 0, 1), "flag"),
    Figure(
        "kv_bytes_per_token_per_layer",
        "bytes",
        "KV bytes one token adds to one attention layer (standard: kv_heads x (head_dim + v_head_dim), plus a"
        " per-token-head format's scales; MLA: one latent of kv_lora_rank + qk_rope_head_dim; no K/V factor, no heads)",
        if_(
            F("is_mla"),
            coalesce(
                I("kv_mla_bytes_per_token_per_layer"),
                (I("kv_lora_rank") + I("qk_rope_head_dim")) * I("kv_bytes_per_element"),
            ),
            _layer_bytes(I("kv_heads"), "full"),
        ),
    ),
    *[Figure(f"kv_bytes_per_token_per_{kind}_layer", "bytes",
             f"KV bytes one token adds to one {kind} layer: its own kv heads and head width"
             f" ({kind}_kv_heads, {kind}_head_dim) where the model gives them, else the full layers'",
             if_(F("is_mla"), F("kv_bytes_per_token_per_layer"), _layer_bytes(_kind_kv_heads(kind), kind)))
      for kind in ("sliding", "chunked")],
    Figure("kv_bytes_per_token_full", "bytes",
           "KV bytes per token in full-attention layers: what each token past the windows costs (TP1); with"
           " per-layer kv heads, the kv_layers_N layers at kv_heads_N heads and the others at kv_heads",
           (I("full_layers") - _grouped_layers()) * F("kv_bytes_per_token_per_layer")
           + if_(F("is_mla"), 0, _kv_groups_sum(lambda n: coalesce(I(f"kv_layers_{n}"), 0)
                                               * _layer_bytes(_group_kv_heads(n), "full")))),
    Figure("kv_bytes_per_token_sliding", "bytes", "KV bytes per token in sliding-window layers (up to the window)",
           I("sliding_layers") * F("kv_bytes_per_token_per_sliding_layer")),
    Figure("kv_bytes_per_token_chunked", "bytes", "KV bytes per token in chunked-attention layers (up to the chunk)",
           I("chunked_layers") * F("kv_bytes_per_token_per_chunked_layer")),
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
        "1 when attention_heads % TP = 0 and (kv_heads % TP = 0 or TP % kv_heads = 0) for the kv heads of every"
        " layer kind and every group of per-layer kv heads, and TP x PP fits the node",
        and_(
            mod(I("attention_heads"), I("tp")).eq(0),
            _tp_fits_heads(I("kv_heads")),
            _tp_fits_heads(_kind_kv_heads("sliding")),
            _tp_fits_heads(_kind_kv_heads("chunked")),
            *[_tp_fits_heads(_group_kv_heads(n)) for n in KV_GROUPS],
            (I("tp") * I("pp")) <= I("gpus_per_node"),
        ),
        "flag",
    ),
    Figure(
        "kv_heads_per_gpu",
        "heads",
        "KV heads each GPU holds in a full layer: max(1, kv_heads // TP); past kv_heads the cache is replicated",
        greatest(1, floor(I("kv_heads") / F("attention_tp"))),
        "int",
    ),
    *[Figure(f"{kind}_kv_heads_per_gpu", "heads", f"KV heads each GPU holds in a {kind} layer",
             greatest(1, floor(_kind_kv_heads(kind) / F("attention_tp"))), "int") for kind in ("sliding", "chunked")],
    *[Figure(f"kv_heads_{n}_per_gpu", "heads", f"per-layer kv heads: KV heads each GPU holds in one of the"
             f" kv_layers_{n} full layers, max(1, kv_heads_{n} // TP) (kv_heads_per_gpu when the group is empty)",
             greatest(1, floor(_group_kv_heads(n) / F("attention_tp"))), "int") for n in KV_GROUPS],
    Figure("full_layers_per_gpu", "layers", "full-attention layers on the fullest pipeline stage",
           ceil(I("full_layers") / I("pp")), "int"),
    Figure("sliding_layers_per_gpu", "layers", "sliding layers on the fullest stage", ceil(I("sliding_layers") / I("pp")), "int"),
    Figure("chunked_layers_per_gpu", "layers", "chunked layers on the fullest stage", ceil(I("chunked_layers") / I("pp")), "int"),
    Figure("linear_layers_per_gpu", "layers", "linear layers on the fullest stage", ceil(I("linear_layers") / I("pp")), "int"),
    Figure(
        "kv_bytes_per_token_per_layer_per_gpu",
        "bytes",
        "KV bytes per token per layer on one GPU: MLA latents are not sharded by TP (under an engine rule they"
        " carry DeepSeek-V3.2's indexer cache too); heads are, down to one",
        if_(
            F("is_mla"),
            F("kv_bytes_per_token_per_layer")
            + if_(_rule("theoretical"), 0, coalesce(I("indexer_bytes_per_token_per_layer"), 0)),
            _layer_bytes(F("kv_heads_per_gpu"), "full"),
        ),
    ),
    *[Figure(f"kv_bytes_per_token_per_{kind}_layer_per_gpu", "bytes",
             f"KV bytes per token per {kind} layer on one GPU (its own heads and widths where it has them)",
             if_(F("is_mla"), F("kv_bytes_per_token_per_layer_per_gpu"),
                 _layer_bytes(F(f"{kind}_kv_heads_per_gpu"), kind)))
      for kind in ("sliding", "chunked")],
    Figure(
        "kv_bytes_per_token_per_gpu",
        "bytes",
        "KV bytes one token adds on one GPU, all attention layers of the fullest stage (a token inside every window):"
        " kv_bytes_per_token_full_per_gpu plus the sliding and chunked layers'",
        F("kv_bytes_per_token_full_per_gpu") + _local_bytes_per_gpu(),
    ),
    *[Figure(f"kv_layers_{n}_per_gpu", "layers", f"per-layer kv heads: of the fullest stage's full layers, those"
             f" holding kv_heads_{n} kv heads (kv_layers_{n} / PP rounded up; 0 without the group)",
             ceil(coalesce(I(f"kv_layers_{n}"), 0) / I("pp")), "int") for n in KV_GROUPS],
    *[Figure(f"kv_bytes_per_token_kv_group_{n}_per_gpu", "bytes", f"per-layer kv heads: KV bytes one token adds on"
             f" one GPU in the kv_layers_{n} full layers holding kv_heads_{n} kv heads each (0 without the group)",
             if_(F("is_mla"), 0, F(f"kv_layers_{n}_per_gpu") * _layer_bytes(F(f"kv_heads_{n}_per_gpu"), "full")))
      for n in KV_GROUPS],
    Figure("kv_heads_layers_per_gpu", "layers", "of the fullest stage's full layers, those holding kv_heads: all of"
           " them, less the kv_layers_N_per_gpu of a model with per-layer kv heads",
           F("full_layers_per_gpu") - _kv_groups_sum(lambda n: F(f"kv_layers_{n}_per_gpu")), "int"),
    Figure(
        "kv_bytes_per_token_kv_heads_layers_per_gpu",
        "bytes",
        "KV bytes one token adds on one GPU in the full layers holding kv_heads (all of them unless the model has"
        " per-layer kv heads): kv_heads_layers_per_gpu x kv_bytes_per_token_per_layer_per_gpu; under an engine rule"
        " the MLA layers that keep no indexer of their own (indexer_layers) hold none",
        F("kv_heads_layers_per_gpu") * F("kv_bytes_per_token_per_layer_per_gpu") - _indexer_less_bytes_per_gpu(),
    ),
    Figure(
        "kv_bytes_per_token_full_per_gpu",
        "bytes",
        "KV bytes one token adds on one GPU in full-attention layers alone: what each token past the windows"
        " costs (equal to kv_bytes_per_token_per_gpu for a model with only full attention): the layers holding"
        " kv_heads plus each group of per-layer kv heads",
        F("kv_bytes_per_token_kv_heads_layers_per_gpu")
        + _kv_groups_sum(lambda n: F(f"kv_bytes_per_token_kv_group_{n}_per_gpu")),
    ),
    *[Figure(f"kv_bytes_per_token_{kind}_per_gpu", "bytes",
             f"KV bytes one token inside the {'window' if kind == 'sliding' else 'chunk'} adds on one GPU in the"
             f" {kind} layers of the fullest stage (the {kind} layer group of `kvreg model show --layers`)",
             F(f"{kind}_layers_per_gpu") * F(f"kv_bytes_per_token_per_{kind}_layer_per_gpu"))
      for kind in ("sliding", "chunked")],
    Figure(
        "kv_page_bytes_per_token_per_layer_per_gpu",
        "bytes",
        "vLLM: the largest per-layer KV bytes per token on one GPU over the attention kinds the model has;"
        " every layer's page is sized to it (vLLM unifies page sizes across KV cache groups); the V0 engine from"
        f" v0.7.3 pads an MLA latent entry to a multiple of {VLLM_V0_KV_ENTRY_ALIGN_BYTES} B (576 bf16 elements take"
        " 1,280 B)",
        if_(and_(_rule("vllm"), F("is_mla"), F("engine_release_used") >= VLLM_V0_KV_ENTRY_ALIGN_FROM,
                 F("engine_release_used") < VLLM_V1_FIRST_RELEASE),
            ceil(F("kv_bytes_per_token_per_layer_per_gpu") / VLLM_V0_KV_ENTRY_ALIGN_BYTES) * VLLM_V0_KV_ENTRY_ALIGN_BYTES,
            greatest(greatest(if_(F("full_layers_per_gpu") > 0, F("kv_bytes_per_token_per_layer_per_gpu"), 0),
                              if_(F("sliding_layers_per_gpu") > 0, F("kv_bytes_per_token_per_sliding_layer_per_gpu"),
                                  0)),
                     if_(F("chunked_layers_per_gpu") > 0, F("kv_bytes_per_token_per_chunked_layer_per_gpu"), 0))),
    ),
    Figure(
        "state_bytes_per_sequence_per_gpu",
        "bytes",
        "linear-attention state per sequence on one GPU: shards by TP like heads, replicated past the head count",
        F("linear_layers_per_gpu")
        * coalesce(I("linear_state_elements_per_layer"), 0)
        * I("state_bytes_per_element")
        / _state_shards(),
    ),
    Figure(
        "state_bytes_per_layer_per_gpu",
        "bytes",
        "linear-attention state per sequence of one linear layer on one GPU (a vLLM state page before padding)",
        coalesce(I("linear_state_elements_per_layer"), 0) * I("state_bytes_per_element")
        / _state_shards(),
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
    Figure("embedding_params", "params", "the vocabulary matrices: vocab_size x hidden_size x embedding_matrices (the"
           " input embeddings and the lm_head, one matrix when tied); 0 when one of them is unknown",
           # Const(1) first: PostgreSQL multiplies the three integer columns in 64 bits (Kimi-K2's is 2.3e9)
           coalesce(Const(1) * I("vocab_size") * I("hidden_size") * I("embedding_matrices"), 0), "int"),
    Figure("expert_params", "params", "the routed experts' parameters: moe_layers x experts x 3 x the experts' input"
           " width (expert_hidden_size, else hidden_size) x expert_intermediate_size (gate, up and down matrices); 0 for"
           " a dense model or an unknown layout",
           coalesce(Const(1) * I("moe_layers") * I("experts") * 3 * _expert_hidden() * I("expert_intermediate_size"),
                    0), "int"),
    Figure("mxfp4_layout", "flag", "1 under an engine rule when the checkpoint is MXFP4 (weight_dtype fp4) and its"
           " expert layout is known: only the experts are 4-bit, laid out as the engine's MoE kernels pad them",
           and_(not_(_rule("theoretical")), I("weight_dtype_name").eq("fp4"), F("expert_params") > 0), "flag"),
    Figure("mxfp4_marlin", "flag", "1 when vLLM before v0.11.1 lays MXFP4 experts out for its Marlin kernels (pads"
           f" the width to {VLLM_MARLIN_MXFP4_WIDTH_ALIGN} and hidden_size to {VLLM_MARLIN_MXFP4_HIDDEN_ALIGN}); else"
           f" its Triton kernels from v0.11.1 and SGLang's (the width to {MXFP4_TRITON_WIDTH_ALIGN})",
           and_(_rule("vllm"), F("engine_release_used") < VLLM_MXFP4_TRITON_FROM), "flag"),
    Figure("mxfp4_expert_width_per_gpu", "elements", "an MXFP4 expert's width on one GPU as the kernels pad it:"
           " expert_intermediate_size / TP rounded up to the backend's multiple",
           if_(F("mxfp4_layout"), ceil(ceil(I("expert_intermediate_size") / I("tp"))
                                       / if_(F("mxfp4_marlin"), VLLM_MARLIN_MXFP4_WIDTH_ALIGN, MXFP4_TRITON_WIDTH_ALIGN))
               * if_(F("mxfp4_marlin"), VLLM_MARLIN_MXFP4_WIDTH_ALIGN, MXFP4_TRITON_WIDTH_ALIGN), Const(None)), "int"),
    Figure("mxfp4_hidden", "elements", "the experts' input width (expert_hidden_size, else hidden_size) as the MXFP4"
           f" kernels pad it (Marlin: to a multiple of {VLLM_MARLIN_MXFP4_HIDDEN_ALIGN})",
           if_(F("mxfp4_layout"), if_(F("mxfp4_marlin"), ceil(_expert_hidden() / VLLM_MARLIN_MXFP4_HIDDEN_ALIGN)
                                      * VLLM_MARLIN_MXFP4_HIDDEN_ALIGN, _expert_hidden()), Const(None)), "int"),
    Figure("mxfp4_bytes_per_expert_per_gpu", "bytes",
           f"one MXFP4 expert on one GPU: 3 x width x hidden (both padded) x (1/{MXFP4_VALUES_PER_BYTE} + 1/{MXFP4_BLOCK})"
           f" B of values and scales; vLLM's Triton kernels (v0.11.1 on) add the scales' swizzled copy, (width x 2 and"
           f" hidden_size rounded up to {VLLM_TRITON_MXFP4_SCALE_ROWS_ALIGN} rows) x (hidden_size and width) /"
           f" {MXFP4_BLOCK} B",
           if_(F("mxfp4_layout"),
               3 * F("mxfp4_expert_width_per_gpu") * F("mxfp4_hidden")
               * (1 / MXFP4_VALUES_PER_BYTE + 1 / MXFP4_BLOCK)
               + if_(and_(_rule("vllm"), not_(F("mxfp4_marlin"))),
                     (ceil(2 * F("mxfp4_expert_width_per_gpu") / VLLM_TRITON_MXFP4_SCALE_ROWS_ALIGN)
                      * VLLM_TRITON_MXFP4_SCALE_ROWS_ALIGN * _expert_hidden()
                      + ceil(_expert_hidden() / VLLM_TRITON_MXFP4_SCALE_ROWS_ALIGN) * VLLM_TRITON_MXFP4_SCALE_ROWS_ALIGN
                      * F("mxfp4_expert_width_per_gpu")) / MXFP4_BLOCK, 0),
               Const(None))),
    Figure("engine_embedding_extra_bytes", "bytes",
           f"under an engine rule, what a checkpoint quantized below {ENGINE_EMBEDDING_BYTES_PER_PARAM} bytes a"
           f" weight adds by keeping its vocabulary matrices at {ENGINE_EMBEDDING_BYTES_PER_PARAM} bytes (vLLM and"
           " SGLang quantize linear and MoE layers, not the embeddings or the lm_head): embedding_params x"
           f" ({ENGINE_EMBEDDING_BYTES_PER_PARAM} - weight_bytes_per_param); 0 under the theoretical rule, for"
           " 16-bit and wider weights and for an MXFP4 layout (which prices every non-expert weight at 16 bits)",
           if_(and_(not_(_rule("theoretical")), I("weight_bytes_per_param") < ENGINE_EMBEDDING_BYTES_PER_PARAM,
                    not_(F("mxfp4_layout"))),
               F("embedding_params") * (ENGINE_EMBEDDING_BYTES_PER_PARAM - I("weight_bytes_per_param")), 0)),
    Figure("marlin_fp8_scale_bytes", "bytes",
           f"vLLM on a GPU without FP8 units (compute_capability below {VLLM_MARLIN_FP8_CAPABILITY_BELOW}) runs an FP8"
           " checkpoint through its Marlin kernels, which keep a 16-bit scale per"
           f" {MARLIN_FP8_GROUP} inputs of every output row: (params - embedding_params) x {MARLIN_FP8_SCALE_BYTES} /"
           f" {MARLIN_FP8_GROUP} B; 0 otherwise (other rules and dtypes, a GPU with FP8 units or of unknown capability)",
           if_(and_(_rule("vllm"), not_(isnull(I("compute_capability"))),
                    I("compute_capability") < VLLM_MARLIN_FP8_CAPABILITY_BELOW,
                    or_(*[I("weight_dtype_name").eq(name) for name in FP8_WEIGHT_DTYPES])),
               (I("params_total") - F("embedding_params")) * MARLIN_FP8_SCALE_BYTES / MARLIN_FP8_GROUP, 0)),
    Figure("router_params", "params", "the MoE routers: moe_layers x experts x hidden_size (one gate row per routed"
           " expert in every MoE layer); 0 for a dense model or an unknown layout",
           coalesce(Const(1) * I("moe_layers") * I("experts") * I("hidden_size"), 0), "int"),
    Figure("engine_router_extra_bytes_per_gpu", "bytes",
           "under an engine rule, what the routers add on one GPU by being replicated, not split: both engines build"
           " the gate as a ReplicatedLinear, and quantized checkpoints keep it at"
           f" {ENGINE_EMBEDDING_BYTES_PER_PARAM} bytes a weight, so router_params / PP x"
           f" ({ENGINE_EMBEDDING_BYTES_PER_PARAM} or the wider weight bytes - the bytes already counted for them / TP);"
           " 0 under the theoretical rule and for a dense model",
           if_(_rule("theoretical"), 0,
               F("router_params") / I("pp")
               * (greatest(I("weight_bytes_per_param"), ENGINE_EMBEDDING_BYTES_PER_PARAM)
                  - if_(F("mxfp4_layout"), ENGINE_EMBEDDING_BYTES_PER_PARAM, I("weight_bytes_per_param")) / I("tp")))),
    Figure("rope_cache_bytes_per_gpu", "bytes",
           "under an engine rule, RoPE's cos/sin table, which every GPU builds whole while the model loads:"
           " max_position_embeddings x the rotated width (rotary_dim, else an MLA model's qk_rope_head_dim, else"
           f" head_dim) x {VLLM_ROPE_CACHE_BYTES_PER_ELEMENT} B under vLLM (the model's dtype),"
           f" {SGLANG_ROPE_CACHE_BYTES_PER_ELEMENT} B under SGLang (float32); 0 under the theoretical rule",
           if_(_rule("theoretical"), 0,
               Const(1) * I("max_position_embeddings") * coalesce(I("rotary_dim"), coalesce(I("qk_rope_head_dim"),
                                                                                          I("head_dim")))
               * if_(_rule("vllm"), VLLM_ROPE_CACHE_BYTES_PER_ELEMENT, SGLANG_ROPE_CACHE_BYTES_PER_ELEMENT))),
    Figure("engine_kv_head_extra_bytes_per_gpu", "bytes",
           "under an engine rule at TP above the KV heads, what the K and V projections add on one GPU by holding"
           " a whole KV head each (QKVParallelLinear replicates a head over TP / kv_heads ranks rather than split it):"
           " (layers - linear_layers) / PP x 2 x hidden_size x head_dim x (1 - kv_heads / TP) x the weight bytes"
           f" ({ENGINE_EMBEDDING_BYTES_PER_PARAM} for an MXFP4 layout, which keeps attention at 16 bits), each group"
           " of per-layer kv heads (kv_layers_N at kv_heads_N) on its own; 0 for MLA (one latent, not heads), for"
           " layers at TP up to their KV heads, under the theoretical rule or without hidden_size",
           if_(and_(not_(_rule("theoretical")), not_(F("is_mla"))),
               coalesce(Const(1) * (_replicated_kv_layers(I("layers") - I("linear_layers") - _grouped_layers(),
                                                          I("kv_heads"))
                                    + _kv_groups_sum(lambda n: _replicated_kv_layers(coalesce(I(f"kv_layers_{n}"), 0),
                                                                                     _group_kv_heads(n))))
                        / I("pp") * 2 * I("hidden_size") * I("head_dim")
                        * if_(F("mxfp4_layout"), ENGINE_EMBEDDING_BYTES_PER_PARAM, I("weight_bytes_per_param")), 0),
               0)),
    Figure("tower_bytes_per_gpu", "bytes",
           "under an engine rule, a multimodal model's vision/audio towers on one GPU: every GPU of every pipeline"
           f" stage builds them, split over TP, at {TOWER_BYTES_PER_PARAM} bytes a parameter whatever the language"
           f" model's dtype: tower_params x {TOWER_BYTES_PER_PARAM} / TP; 0 under the theoretical rule and without a"
           " tower",
           if_(_rule("theoretical"), 0, coalesce(Const(1) * I("tower_params"), 0) * TOWER_BYTES_PER_PARAM / I("tp"))),
    Figure("engine_replicated_bytes_per_gpu", "bytes", "what every GPU of an engine rule holds beside its even share"
           " of the language model's weights: engine_router_extra_bytes_per_gpu + rope_cache_bytes_per_gpu +"
           " engine_kv_head_extra_bytes_per_gpu + tower_bytes_per_gpu",
           F("engine_router_extra_bytes_per_gpu") + F("rope_cache_bytes_per_gpu")
           + F("engine_kv_head_extra_bytes_per_gpu") + F("tower_bytes_per_gpu")),
    Figure("weights_estimated_bytes_per_gpu", "bytes", "weights on one GPU as the rule estimates them, with the"
           " layers split evenly over the pipeline stages: for an MXFP4 layout (params - expert_params) x"
           f" {ENGINE_EMBEDDING_BYTES_PER_PARAM} B / (TP x PP) + moe_layers x experts / PP x"
           " mxfp4_bytes_per_expert_per_gpu; else (params x bytes + engine_embedding_extra_bytes +"
           " marlin_fp8_scale_bytes) / (TP x PP); both plus engine_replicated_bytes_per_gpu",
           if_(F("mxfp4_layout"),
               (I("params_total") - F("expert_params")) * ENGINE_EMBEDDING_BYTES_PER_PARAM / (I("tp") * I("pp"))
               + I("moe_layers") * I("experts") / I("pp") * F("mxfp4_bytes_per_expert_per_gpu"),
               (F("weights_bytes") + F("engine_embedding_extra_bytes") + F("marlin_fp8_scale_bytes"))
               / (I("tp") * I("pp")))
           + F("engine_replicated_bytes_per_gpu")),
    Figure("weights_split_bytes_per_gpu", "bytes", "weights on one GPU, the stages split evenly: the measured"
           " weights_measured_bytes (an engine rule's calibration), else weights_estimated_bytes_per_gpu",
           coalesce(I("weights_measured_bytes"), F("weights_estimated_bytes_per_gpu"))),
    Figure("memory_gib", "GiB", "GPU memory in GiB", I("memory_bytes") / GIB),
    Figure(
        "engine_memory_bytes",
        "bytes",
        "GPU memory the rule sizes from: under an engine rule what CUDA reports (reported_memory_bytes, else"
        " memory_bytes); under the theoretical rule the nominal memory_bytes",
        if_(_rule("theoretical"), I("memory_bytes"), coalesce(I("reported_memory_bytes"), I("memory_bytes"))),
    ),
    Figure("engine_memory_gib", "GiB", "the same in GiB", F("engine_memory_bytes") / GIB),
    Figure("usable_bytes_per_gpu", "bytes", "memory x (1 - reserve)", I("memory_bytes") * (1 - I("reserve"))),
    Figure("usable_gib_per_gpu", "GiB", "the same in GiB", F("usable_bytes_per_gpu") / GIB),
    # ---- engine knobs as the engine resolves them (NULL under a rule that has no such knob)
    Figure("engine_release_used", "release", f"the engine release the rule follows: engine_release, else the"
           f" latest kvreg knows ({VLLM_LATEST_RELEASE:,}, vLLM 0.20)",
           if_(_rule("theoretical"), Const(None), coalesce(I("engine_release"), VLLM_LATEST_RELEASE)), "int"),
    Figure("gpu_memory_utilization_used", "fraction",
           f"vLLM: gpu_memory_utilization, else the release's default: {VLLM_GPU_MEMORY_UTILIZATION} from v0.20,"
           f" {VLLM_GPU_MEMORY_UTILIZATION_BEFORE} before",
           if_(_rule("vllm"), coalesce(I("gpu_memory_utilization"),
                                       if_(F("engine_release_used") >= VLLM_GMU_092_RELEASE, VLLM_GPU_MEMORY_UTILIZATION,
                                           VLLM_GPU_MEMORY_UTILIZATION_BEFORE)), Const(None))),
    Figure("requested_bytes_per_gpu", "bytes", "vLLM: the memory the instance may use on one GPU: engine memory x"
           " gpu_memory_utilization (its log's 'total_gpu_memory x gpu_memory_utilization')",
           if_(_rule("vllm"), F("engine_memory_bytes") * F("gpu_memory_utilization_used"), Const(None))),
    Figure("communicates_over_fabric", "flag", "1 when the GPUs of a replica exchange activations (TP x PP > 1) over"
           " a GPU fabric (fabric 1, or not known): the engines' communication buffers, counted before the KV cache"
           " is sized, are those measured on NVLink H100s; over PCIe only (fabric 0) they are the small ones of"
           " TP 1", and_((I("tp") * I("pp")) > 1, coalesce(I("fabric"), 1).eq(1)), "flag"),
    Figure(
        "non_torch_bytes_per_gpu",
        "bytes",
        "memory in use before the weights load that the rule takes off: SGLang the CUDA context and communication"
        f" buffers before its 'Load weight begin' (non_torch_bytes when measured, else {SGLANG_STARTUP_BYTES / GIB:.2f}"
        f" GiB, {SGLANG_STARTUP_TP_BYTES / GIB:.2f} GiB when communicates_over_fabric);"
        " vLLM the non-torch memory of the profile run: non_torch_bytes when measured, else"
        f" {VLLM_V065_CONTEXT_BYTES / GIB:.2f} GiB of CUDA context plus {VLLM_V065_NCCL_BYTES_PER_GPU / GIB:.2f} GiB"
        f" of NCCL buffers when communicates_over_fabric in v0.6.5 and v0.6.6; from v0.11"
        f" {VLLM_V011_NON_TORCH_BYTES / GIB:.2f} GiB, plus {VLLM_V011_TP_NON_TORCH_BYTES / GIB:.2f} GiB when"
        f" communicates_over_fabric before v0.21; from v0.7 to before v0.11 {VLLM_V07_TP1_NON_TORCH_BYTES / GIB:.2f}"
        f" GiB on one GPU (TP x PP 1: the snapshot follows CUDA's set-up); {VLLM_NON_TORCH_BYTES / GIB:.2f} GiB"
        " otherwise, plus"
        f" the same {VLLM_V065_NCCL_BYTES_PER_GPU / GIB:.2f} GiB of NCCL buffers when communicates_over_fabric from"
        " v0.7 to before v0.11, V0 and V1 alike (their memory snapshot preceded the distributed set-up)",
        if_(_rule("vllm"), coalesce(
            I("non_torch_bytes"),
            if_(and_(F("engine_release_used") >= VLLM_V065_FIRST, F("engine_release_used") <= VLLM_V065_LAST),
                VLLM_V065_CONTEXT_BYTES + if_(F("communicates_over_fabric"), VLLM_V065_NCCL_BYTES_PER_GPU, 0),
                if_(F("engine_release_used") >= VLLM_V1_NCCL_IN_SNAPSHOT_BEFORE,
                    VLLM_V011_NON_TORCH_BYTES
                    + if_(and_(F("engine_release_used") < VLLM_V011_TP_NON_TORCH_BEFORE, F("communicates_over_fabric")),
                          VLLM_V011_TP_NON_TORCH_BYTES, 0),
                    if_(and_(F("engine_release_used") >= VLLM_SNAPSHOT_AFTER_CUDA_FROM, (I("tp") * I("pp")).eq(1)),
                        VLLM_V07_TP1_NON_TORCH_BYTES, VLLM_NON_TORCH_BYTES)
                    + if_(and_(F("engine_release_used") >= VLLM_SNAPSHOT_AFTER_CUDA_FROM, F("communicates_over_fabric")),
                          VLLM_V065_NCCL_BYTES_PER_GPU, 0)))),
            if_(_rule("sglang"), coalesce(I("non_torch_bytes"), if_(F("communicates_over_fabric"),
                                                                   SGLANG_STARTUP_TP_BYTES, SGLANG_STARTUP_BYTES)),
                Const(None))),
    ),
    Figure("vllm_v1_engine", "flag",
           f"vLLM: 1 when the release runs its V1 engine: from v0.8, except on a CUDA GPU below compute capability"
           f" {VLLM_V0_FALLBACK_CAPABILITY_BELOW} before v0.{VLLM_V0_REMOVED_RELEASE // 1000}, where vLLM falls back to"
           " its V0 engine (vllm/engine/arg_utils.py _is_v1_supported_oracle: 'Compute Capability < 8.0'); 0 on V0",
           if_(_rule("vllm"), and_(F("engine_release_used") >= VLLM_V1_FIRST_RELEASE,
                                   not_(and_(F("engine_release_used") < VLLM_V0_REMOVED_RELEASE,
                                             not_(isnull(I("compute_capability"))),
                                             I("compute_capability") < VLLM_V0_FALLBACK_CAPABILITY_BELOW))),
               Const(None)), "flag"),
    Figure("vllm_large_batch_defaults", "flag",
           f"vLLM: 1 when its server picks the large batch defaults (V1, from v0.8): a GPU reporting"
           f" {VLLM_LARGE_GPU_BYTES // GIB} GiB or more, but from v0.9 not an A100 (its device name holds 'a100': the"
           " GPU row's name is read as it)",
           if_(_rule("vllm"), and_(F("vllm_v1_engine"),
                                   F("engine_memory_bytes") >= VLLM_LARGE_GPU_BYTES,
                                   not_(and_(F("engine_release_used") >= VLLM_A100_SMALL_DEFAULTS_FROM,
                                             contains(I("gpu_name"), "a100")))), Const(None)), "flag"),
    Figure("max_num_batched_tokens_used", "tokens",
           f"vLLM: max_num_batched_tokens, else the server's default: {VLLM_SMALL_GPU_MAX_NUM_BATCHED_TOKENS:,} from v0.8"
           f" (V1) without vllm_large_batch_defaults, else {VLLM_MAX_NUM_BATCHED_TOKENS:,}",
           if_(_rule("vllm"), coalesce(
               I("max_num_batched_tokens"),
               if_(and_(F("vllm_v1_engine"), not_(F("vllm_large_batch_defaults"))),
                   VLLM_SMALL_GPU_MAX_NUM_BATCHED_TOKENS, VLLM_MAX_NUM_BATCHED_TOKENS)), Const(None)), "int"),
    Figure("max_concurrent_batches_used", "batches",
           f"vLLM: max_concurrent_batches, else {VLLM_ASYNC_CONCURRENT_BATCHES} at PP 1 (async scheduling)"
           " and PP otherwise (vllm/config/vllm.py max_concurrent_batches)",
           if_(_rule("vllm"), coalesce(I("max_concurrent_batches"),
                                       if_(I("pp") > 1, I("pp"), VLLM_ASYNC_CONCURRENT_BATCHES)), Const(None)), "int"),
    Figure("in_flight_tokens", "tokens",
           "vLLM: tokens scheduled but not yet settled: max concurrent batches x max_num_batched_tokens",
           F("max_concurrent_batches_used") * F("max_num_batched_tokens_used"), "int"),
    Figure("vllm_max_num_seqs_used", "sequences",
           "vLLM: max_num_seqs, the most requests it runs at once and the rows its profile run warms the sampler up"
           f" with: max_num_seqs when given, else {VLLM_LARGE_GPU_MAX_NUM_SEQS:,} with vllm_large_batch_defaults,"
           f" else {VLLM_SAMPLER_SEQS}",
           if_(_rule("vllm"), coalesce(I("max_num_seqs"),
                                       if_(F("vllm_large_batch_defaults"),
                                           VLLM_LARGE_GPU_MAX_NUM_SEQS, VLLM_SAMPLER_SEQS)), Const(None)), "int"),
    Figure("vllm_v2_model_runner", "flag",
           "vLLM: 1 when the release runs the model's architecture on its V2 model runner by default ("
           + "; ".join(f"v0.{r // 1000}: " + ", ".join(a) for r, a in VLLM_V2_RUNNER_ARCHITECTURES)
           + f", and on), and from v0.{VLLM_V2_RUNNER_DENSE_FROM // 1000} every dense model (no expert and no linear"
           " layer); 0 on the V1 model runner",
           if_(_rule("vllm"), or_(*[and_(F("engine_release_used") >= release, I("architecture").eq(a))
                                    for release, archs in VLLM_V2_RUNNER_ARCHITECTURES for a in archs],
                                  and_(F("engine_release_used") >= VLLM_V2_RUNNER_DENSE_FROM,
                                       coalesce(I("moe_layers"), 0).eq(0), coalesce(I("linear_layers"), 0).eq(0))),
               Const(None)), "flag"),
    Figure("sampler_bytes_per_logit", "bytes",
           f"vLLM: bytes live per logit at the sampler warm-up's peak, by the sampler backend (the input sampler;"
           f" NULL: flashinfer from v0.{VLLM_FLASHINFER_SAMPLER_FROM // 1000}, torch before). torch:"
           f" {VLLM_V1_SAMPLER_BYTES_PER_LOGIT} before v0.17"
           " (the profile run samples with top_k = vocab - 1 and top_p < 1 through the sort-based top-k/top-p, in the V0"
           f" engine as in V1; as measured on llm-d's v0.11 H100 runs), {VLLM_TRITON_SAMPLER_BYTES_PER_LOGIT} from v0.17"
           " (its Triton top-k/top-p kernel, in place). flashinfer: "
           f"{VLLM_FLASHINFER_V1_SAMPLER_BYTES_PER_LOGIT} before v0.{VLLM_FLASHINFER_SAMPLER_FROM // 1000} (the model's"
           " logits, their fp32 copy, FlashInfer's top-k-masked logits and their softmax: 2 + 4 + 4 + 4),"
           f" {VLLM_FLASHINFER_SAMPLER_BYTES_PER_LOGIT} from v0.{VLLM_FLASHINFER_SAMPLER_FROM // 1000} (as measured)."
           " The V0 engine (before v0.8, and v0.8 to v0.10 below compute capability 8.0) takes the torch figure whatever"
           f" the backend; the V2 model runner {VLLM_V2_SAMPLER_BYTES_PER_LOGIT} (fp32 logits beside the"
           " model's, a Gumbel kernel)",
           if_(_rule("vllm"),
               if_(F("vllm_v2_model_runner"), VLLM_V2_SAMPLER_BYTES_PER_LOGIT,
               if_(and_(F("vllm_v1_engine"),
                        or_(I("sampler").eq("flashinfer"),
                            and_(isnull(I("sampler")), F("engine_release_used") >= VLLM_FLASHINFER_SAMPLER_FROM))),
                   if_(F("engine_release_used") >= VLLM_FLASHINFER_SAMPLER_FROM, VLLM_FLASHINFER_SAMPLER_BYTES_PER_LOGIT,
                       VLLM_FLASHINFER_V1_SAMPLER_BYTES_PER_LOGIT),
                   if_(F("engine_release_used") >= VLLM_TRITON_SAMPLER_FROM, VLLM_TRITON_SAMPLER_BYTES_PER_LOGIT,
                       VLLM_V1_SAMPLER_BYTES_PER_LOGIT))), Const(None)), "int"),
    Figure("activation_forward_bytes_per_gpu", "bytes", "vLLM: peak activation memory of the profile run's forward"
           " pass on one GPU (all of it on a stage that does not sample, before the last at PP > 1): activation_bytes"
           f" when measured; else max_num_batched_tokens x ({ACTIVATION_INTERMEDIATE_VECTORS} x intermediate_size +"
           f" {ACTIVATION_HIDDEN_VECTORS} x hidden_size) x {ACTIVATION_BYTES_PER_ELEMENT} B (the MLP's gate-up and"
           " activated outputs beside the residual, the MLP's input and down_proj's output);"
           " for a model without those widths max_num_batched_tokens x attention_heads x head_dim x"
           f" {ACTIVATION_BYTES_PER_ELEMENT} B x {ACTIVATION_VECTORS_PER_TOKEN} live vectors",
           if_(_rule("vllm"), coalesce(
               I("activation_bytes"),
               if_(or_(isnull(I("hidden_size")), isnull(I("intermediate_size"))),
                   F("max_num_batched_tokens_used") * I("attention_heads") * I("head_dim") * ACTIVATION_BYTES_PER_ELEMENT
                   * ACTIVATION_VECTORS_PER_TOKEN, _forward_activation())), Const(None))),
    Figure(
        "activation_last_stage_bytes_per_gpu",
        "bytes",
        "vLLM: peak activation memory of the profile run on a GPU of the last pipeline stage, the one that samples"
        " (every GPU without PP): activation_forward_bytes_per_gpu when measured or without the model's widths;"
        " else the larger of that forward pass and the sampler warm-up (min(max_num_batched_tokens,"
        " vllm_max_num_seqs_used) rows x vocab_size x sampler_bytes_per_logit) beside the forward's output"
        f" (max_num_batched_tokens x hidden_size x {ACTIVATION_BYTES_PER_ELEMENT} B): the V0 and V1 engines both"
        " sample after the forward pass has freed its activations",
        if_(or_(not_(isnull(I("activation_bytes"))), isnull(I("hidden_size")), isnull(I("intermediate_size"))),
            F("activation_forward_bytes_per_gpu"),
            greatest(F("activation_forward_bytes_per_gpu"),
                     F("max_num_batched_tokens_used") * I("hidden_size") * ACTIVATION_BYTES_PER_ELEMENT
                     + _sampler_warm_up())),
    ),
    Figure(
        "cuda_graph_bytes_per_gpu",
        "bytes",
        "vLLM: CUDA graph memory taken from the KV pool on one GPU: cuda_graph_bytes when given, else 0 (before"
        " v0.21 vLLM captures its graphs after sizing the KV cache, out of the memory gpu_memory_utilization leaves;"
        " from v0.21 it profiles them into the budget, and kvreg takes them from a log or the setting)",
        if_(_rule("vllm"), coalesce(I("cuda_graph_bytes"), 0), Const(None)),
    ),
    # ---- SGLang's default mem_fraction_static (server_args.py _handle_gpu_memory_settings)
    Figure("sglang_gpu_memory_mib", "MiB", "SGLang: the GPU memory its defaults are picked from, in MiB (the engine"
           " memory / 2^20)", if_(_rule("sglang"), F("engine_memory_bytes") / MIB, Const(None))),
    Figure("sglang_chunked_prefill_size", "tokens",
           "SGLang: its default chunked_prefill_size by GPU memory: " + ", ".join(
               f"{chunk:,} {'under ' + format(top // 1024) + ' GiB' if top else 'above'}"
               for top, chunk, _bs, _bs_tp in SGLANG_MEMORY_TIERS),
           if_(_rule("sglang"), _sglang_tier(1), Const(None)), "int"),
    Figure("sglang_cuda_graph_max_bs", "sequences",
           f"SGLang: its default cuda_graph_max_bs by GPU memory, below TP {SGLANG_CUDA_GRAPH_TP} and from it: "
           + ", ".join(f"{bs}/{bs_tp} {'under ' + format(top // 1024) + ' GiB' if top else 'above'}"
                       for top, _chunk, bs, bs_tp in SGLANG_MEMORY_TIERS)
           + f" (before v0.5.{SGLANG_CUDA_GRAPH_BS_24_FROM % 1000}:"
           f" {SGLANG_V053_SMALL_CUDA_GRAPH_BS} below TP {SGLANG_CUDA_GRAPH_TP} on GPUs of 20 to 35 GiB)",
           if_(_rule("sglang"), if_(I("tp") < SGLANG_CUDA_GRAPH_TP,
                                    if_(and_(F("engine_release_used") < SGLANG_CUDA_GRAPH_BS_24_FROM,
                                             F("sglang_gpu_memory_mib") >= SGLANG_MEMORY_TIERS[0][0],
                                             F("sglang_gpu_memory_mib") < SGLANG_MEMORY_TIERS[1][0]),
                                        SGLANG_V053_SMALL_CUDA_GRAPH_BS, _sglang_tier(2)),
                                    _sglang_tier(3)), Const(None)),
           "int"),
    Figure("sglang_tp_tier_fraction", "fraction", "SGLang before v0.4.8: its default mem_fraction_static by TP:"
           " 0.79 from 16, 0.81 from 8 (0.82 before v0.4), 0.85 from 4, 0.87 from 2, else 0.88",
           if_(_rule("sglang"), _sglang_tp_fraction(I("tp")), Const(None))),
    Figure("sglang_parallel_tier_fraction", "fraction", "SGLang v0.4.7: the same tiers by TP x PP",
           if_(_rule("sglang"), _sglang_tp_fraction(I("tp") * I("pp")), Const(None))),
    Figure("sglang_prefill_graphs_mib", "MiB", "SGLang from v0.5.10: memory its default mem_fraction_static leaves"
           f" for the prefill (piecewise) CUDA graphs at PP 1: {SGLANG_MIB_PER_PREFILL_GRAPH} MiB for each graph size"
           " up to chunked_prefill_size (42 at 2,048 tokens, 50 at 4,096, 58 at 8,192, 74 at 16,384), 1.5 GiB for an"
           " MLA model; 0 before and at PP > 1",
           if_(and_(_rule("sglang"), F("engine_release_used") >= SGLANG_PREFILL_GRAPHS_FROM, I("pp").eq(1)),
               if_(F("is_mla"), SGLANG_MLA_PREFILL_GRAPHS_MIB, _sglang_prefill_graphs() * SGLANG_MIB_PER_PREFILL_GRAPH),
               0)),
    Figure("sglang_legacy_reserved_mib", "MiB", "SGLang v0.4.8 to v0.5.2: memory its default mem_fraction_static"
           " leaves out: (a + TP x PP x b) GiB by GPU memory (2.8 + P / 10 below 35 GiB, 9.5 + P / 2 below 90, 12 +"
           " P / 2 below 160, else 32)",
           if_(_rule("sglang"), _sglang_legacy_reserved(), Const(None))),
    Figure("sglang_reserved_mib", "MiB",
           f"SGLang: memory its default mem_fraction_static leaves out: {SGLANG_RESERVED_BASE_MIB} + max(chunked_prefill"
           f"_size, {SGLANG_RESERVED_MIN_PREFILL_TOKENS:,}) x {SGLANG_RESERVED_MIB_PER_PREFILL_TOKEN} + cuda_graph_max_bs"
           f" x {SGLANG_RESERVED_MIB_PER_CUDA_GRAPH_BS} + TP x PP / 8 x {SGLANG_RESERVED_MIB_PER_8_RANKS} MiB"
           f" (from v0.5.10 at PP 1 also {SGLANG_MIB_PER_PREFILL_GRAPH} MiB a prefill CUDA graph, 1.5 GiB for an MLA"
           f" model), at least {SGLANG_LARGE_GPU_MIN_RESERVED_MIB:,} MiB on GPUs above {SGLANG_LARGE_GPU_MIB:,} MiB;"
           " v0.4.8 to v0.5.2: (a + TP x PP x b) GiB by GPU memory (2.8 + P / 10 below 35 GiB, 9.5 + P / 2 below 90,"
           " 12 + P / 2 below 160, else 32); NULL before v0.4.8, whose default had no reserve",
           if_(_rule("sglang"),
               if_(F("engine_release_used") >= SGLANG_RESERVE_FORMULA_V053_FROM,
                   if_(F("sglang_gpu_memory_mib") > SGLANG_LARGE_GPU_MIB,
                       greatest(_sglang_reserved(), SGLANG_LARGE_GPU_MIN_RESERVED_MIB), _sglang_reserved()),
                   if_(F("engine_release_used") >= SGLANG_RESERVED_FORMULA_FROM, F("sglang_legacy_reserved_mib"),
                       Const(None))),
               Const(None))),
    Figure("mem_fraction_static_default", "fraction",
           "SGLang: its server's default mem_fraction_static before any multimodal scaling: from v0.4.8 round((GPU"
           f" memory - sglang_reserved_mib) / GPU memory, {SGLANG_MEM_FRACTION_DECIMALS}); up to v0.4.5 by TP: 0.79 from"
           " 16, 0.81 from 8 (0.82 before v0.4), 0.85 from 4, 0.87 from 2, else 0.88; v0.4.6 the same up to 81,920 MiB,"
           " else (GPU memory - 13 GiB) / GPU memory; v0.4.7 the tiers by TP x PP up to 81,920 MiB, else 0.88, then"
           " 0.79 above 180,000 MiB and above 96 GiB min(f + 48 GiB x (1 - f) / GPU memory, (GPU memory - 18 GiB) /"
           " GPU memory)",
           if_(_rule("sglang"),
               if_(F("engine_release_used") >= SGLANG_RESERVED_FORMULA_FROM,
                   floor((F("sglang_gpu_memory_mib") - F("sglang_reserved_mib")) / F("sglang_gpu_memory_mib")
                         * 10**SGLANG_MEM_FRACTION_DECIMALS + 0.5) / 10**SGLANG_MEM_FRACTION_DECIMALS,
                   _sglang_fraction_before_v048()), Const(None))),
    Figure("sglang_vlm_complexity_ratio", "ratio",
           "SGLang from v0.4.10, a multimodal model: its vision tower's size over ViT-L/14's, vision_num_hidden_layers"
           f" ({SGLANG_VLM_BASELINE_LAYERS} when NULL) x vision_hidden_size ({SGLANG_VLM_BASELINE_HIDDEN:,} when NULL)"
           f" squared / ({SGLANG_VLM_BASELINE_LAYERS} x {SGLANG_VLM_BASELINE_HIDDEN:,} squared); NULL otherwise",
           if_(and_(_rule("sglang"), coalesce(I("tower_params"), 0) > 0),
               Const(1) * coalesce(I("vision_num_hidden_layers"), SGLANG_VLM_BASELINE_LAYERS)
               * coalesce(I("vision_hidden_size"), SGLANG_VLM_BASELINE_HIDDEN)
               * coalesce(I("vision_hidden_size"), SGLANG_VLM_BASELINE_HIDDEN)
               / (SGLANG_VLM_BASELINE_LAYERS * SGLANG_VLM_BASELINE_HIDDEN * SGLANG_VLM_BASELINE_HIDDEN), Const(None))),
    Figure("sglang_multimodal_factor", "fraction",
           f"SGLang: what it scales mem_fraction_static by for a multimodal model (tower_params set): up to v0.4.4"
           f" {SGLANG_MM_FRACTION_BEFORE_045}, v0.4.5 to v0.4.9 {SGLANG_MM_FRACTION_090}, from v0.4.10"
           f" {SGLANG_VLM_BASE_FACTOR} x clamp(1 - {SGLANG_VLM_SENSITIVITY} x (sglang_vlm_complexity_ratio - 1),"
           f" {SGLANG_VLM_FACTOR_MIN}, {SGLANG_VLM_FACTOR_MAX}); 1 for a model without a tower",
           if_(_rule("sglang"),
               if_(coalesce(I("tower_params"), 0) > 0,
                   if_(F("engine_release_used") < SGLANG_MM_FRACTION_090_FROM, SGLANG_MM_FRACTION_BEFORE_045,
                       if_(F("engine_release_used") < SGLANG_MM_VIT_SCALED_FROM, SGLANG_MM_FRACTION_090,
                           SGLANG_VLM_BASE_FACTOR * greatest(SGLANG_VLM_FACTOR_MIN, least(
                               SGLANG_VLM_FACTOR_MAX,
                               1 - SGLANG_VLM_SENSITIVITY * (F("sglang_vlm_complexity_ratio") - 1))))), 1),
               Const(None))),
    Figure("mem_fraction_static_used", "fraction",
           "SGLang: the fraction its server uses: up to v0.4.8 (mem_fraction_static, else mem_fraction_static_default)"
           " x sglang_multimodal_factor (its model runner scaled any fraction); from v0.4.9 mem_fraction_static, else"
           " mem_fraction_static_default x sglang_multimodal_factor (the server scales only its own default)",
           if_(_rule("sglang"),
               if_(F("engine_release_used") < SGLANG_MM_DEFAULT_ONLY_FROM,
                   coalesce(I("mem_fraction_static"), F("mem_fraction_static_default")) * F("sglang_multimodal_factor"),
                   coalesce(I("mem_fraction_static"),
                            F("mem_fraction_static_default") * F("sglang_multimodal_factor"))), Const(None))),
    # ---- vLLM's pipeline stages (vllm/distributed/utils.py get_pp_indices; each worker sizes its own KV cache and
    # the engine keeps the smallest block count, vllm/v1/core/kv_cache_utils.py)
    Figure("pp_stages_modelled", "flag", "1 under vLLM at PP > 1 for a model of full-attention layers only: the"
           " stages' weights, activations and layers differ, and the GPU figures are the limiting stage's",
           and_(_rule("vllm"), I("pp") > 1, (I("sliding_layers") + I("chunked_layers") + I("linear_layers")).eq(0)),
           "flag"),
    Figure("pp_stage_layers_last", "layers", "vLLM: layers of the last pipeline stage: layers // PP (get_pp_indices"
           " gives the remainder to the stages before it, the one just before the last first)",
           if_(F("pp_stages_modelled"), floor(I("layers") / I("pp")), Const(None)), "int"),
    Figure("pp_stage_layers_first", "layers", "vLLM: layers of the first stage: layers // PP, one more when the"
           " remainder reaches it (remainder = PP - 1)",
           if_(F("pp_stages_modelled"), floor(I("layers") / I("pp"))
               + if_(mod(I("layers"), I("pp")).eq(I("pp") - 1), 1, 0), Const(None)), "int"),
    Figure("pp_stage_layers_middle", "layers", "vLLM: layers of the fullest middle stage (PP 3 and more): layers //"
           " PP, one more when there is a remainder",
           if_(and_(F("pp_stages_modelled"), I("pp") > 2), floor(I("layers") / I("pp"))
               + if_(mod(I("layers"), I("pp")) > 0, 1, 0), Const(None)), "int"),
    Figure("vocab_matrix_bytes", "bytes", "one vocabulary matrix (the input embeddings, or the lm_head) under an"
           f" engine rule: vocab_size x hidden_size x the larger of the weight bytes and {ENGINE_EMBEDDING_BYTES_PER_PARAM}"
           " (the engines keep it at 16 bits); 0 when the widths or embedding_matrices are unknown",
           if_(F("embedding_params") > 0, F("embedding_params") / I("embedding_matrices")
               * greatest(I("weight_bytes_per_param"), ENGINE_EMBEDDING_BYTES_PER_PARAM), 0)),
    Figure("replica_layer_weight_bytes", "bytes", "vLLM at PP > 1: the decoder layers' weights of one replica"
           " (over its TP x PP GPUs): the estimate less what every GPU holds whole and the vocabulary matrices",
           if_(F("pp_stages_modelled"),
               (F("weights_estimated_bytes_per_gpu") - F("engine_replicated_bytes_per_gpu")) * I("tp") * I("pp")
               - coalesce(I("embedding_matrices"), 0) * F("vocab_matrix_bytes"), Const(None))),
    Figure("replica_expert_weight_bytes", "bytes", "vLLM at PP > 1: the routed experts' share of those: an MXFP4"
           " layout's experts as laid out, else replica_layer_weight_bytes x expert_params / (params -"
           " embedding_params); 0 for a dense model or an unknown expert layout",
           if_(F("pp_stages_modelled"),
               if_(F("mxfp4_layout"), I("moe_layers") * I("experts") * F("mxfp4_bytes_per_expert_per_gpu") * I("tp"),
                   if_(F("expert_params") > 0, F("replica_layer_weight_bytes") * F("expert_params")
                       / (I("params_total") - F("embedding_params")), 0)), Const(None))),
    Figure("dense_layers", "layers", "layers without routed experts: layers - moe_layers (taken to lead the"
           " model, as DeepSeek's first_k_dense_replace layers do); all of them for a dense model",
           I("layers") - coalesce(I("moe_layers"), 0), "int"),
    *[Figure(f"pp_stage_moe_layers_{stage}", "layers", f"vLLM: layers with routed experts on the {stage} stage"
             + (": its layers less the leading dense layers" if stage == "first" else
                ": its layers, less the dense layers the first stage could not hold" if stage == "middle" else
                ": its layers"),
             if_(and_(F(f"pp_stage_layers_{stage}") > 0, coalesce(I("moe_layers"), 0) > 0), greatest(0, {
                 "first": F("pp_stage_layers_first") - F("dense_layers"),
                 "middle": F("pp_stage_layers_middle") - greatest(0, F("dense_layers") - F("pp_stage_layers_first")),
                 "last": F("pp_stage_layers_last")}[stage]), if_(F(f"pp_stage_layers_{stage}") > 0, 0, Const(None))), "int")
      for stage in ("first", "middle", "last")],
    Figure("pp_vocab_on_every_stage", "flag", "vLLM at PP > 1: 1 when the architecture's model file builds the"
           " input embeddings and the lm_head on every stage (" + ", ".join(VLLM_VOCAB_ON_EVERY_STAGE) + "); else"
           " the first stage holds the embeddings and the last the lm_head",
           if_(F("pp_stages_modelled"), or_(*[I("architecture").eq(a) for a in VLLM_VOCAB_ON_EVERY_STAGE]),
               Const(None)), "flag"),
    *[Figure(f"pp_stage_weights_{stage}_bytes", "bytes",
             f"vLLM: weights on a GPU of the {stage} stage: (its layers x the layers' weights without experts /"
             " layers + its MoE layers x the experts' weights / moe_layers + "
             + {"first": "the input embeddings", "last": "the lm_head (tied or not: the last stage keeps its own copy)",
                "middle": "nothing"}[stage]
             + ", or every vocabulary matrix with pp_vocab_on_every_stage) / TP + what every GPU holds whole"
             " (engine_replicated_bytes_per_gpu); weights_measured_bytes"
             " when measured",
             if_(F(f"pp_stage_layers_{stage}") > 0,
                 coalesce(I("weights_measured_bytes"),
                          (F(f"pp_stage_layers_{stage}")
                           * (F("replica_layer_weight_bytes") - F("replica_expert_weight_bytes")) / I("layers")
                           + if_(F(f"pp_stage_moe_layers_{stage}") > 0, F(f"pp_stage_moe_layers_{stage}")
                                 * F("replica_expert_weight_bytes") / I("moe_layers"), 0)
                           + if_(F("pp_vocab_on_every_stage"), coalesce(I("embedding_matrices"), 1),
                                 0 if stage == "middle" else 1) * F("vocab_matrix_bytes")) / I("tp")
                          + F("engine_replicated_bytes_per_gpu")), Const(None)))
      for stage in ("first", "middle", "last")],
    *[Figure(f"pp_stage_blocks_{stage}", "blocks",
             f"vLLM: KV blocks a GPU of the {stage} stage finds: (requested - its activation - non-torch memory -"
             " CUDA graphs - its weights, or kv_cache_memory_bytes when given) // (a layer's page x its layers)",
             if_(F(f"pp_stage_layers_{stage}") > 0,
                 greatest(0, floor(coalesce(
                     I("kv_cache_memory_bytes"),
                     F("requested_bytes_per_gpu")
                     - F("activation_last_stage_bytes_per_gpu" if stage == "last" else "activation_forward_bytes_per_gpu")
                     - F("non_torch_bytes_per_gpu") - F("cuda_graph_bytes_per_gpu")
                     - F(f"pp_stage_weights_{stage}_bytes"))
                     / (F("page_bytes_per_layer_per_gpu") * F(f"pp_stage_layers_{stage}")))), Const(None)), "int")
      for stage in ("first", "middle", "last")],
    Figure("pp_limiting_stage", "stage", "vLLM at PP > 1: the stage with the fewest blocks, which the engine sizes"
           " every worker to: 0 the first, 1 a middle one, 2 the last",
           if_(F("pp_stages_modelled"),
               if_(and_(F("pp_stage_blocks_first") <= F("pp_stage_blocks_last"),
                        F("pp_stage_blocks_first") <= coalesce(F("pp_stage_blocks_middle"), F("pp_stage_blocks_first"))),
                   0, if_(F("pp_stage_blocks_last") <= coalesce(F("pp_stage_blocks_middle"), F("pp_stage_blocks_last")),
                          2, 1)), Const(None)), "int"),
    Figure("weights_bytes_per_gpu", "bytes", "weights on one GPU: weights_split_bytes_per_gpu; under vLLM at PP > 1"
           " the limiting stage's (pp_stage_weights_*_bytes)",
           if_(F("pp_stages_modelled"),
               if_(F("pp_limiting_stage").eq(0), F("pp_stage_weights_first_bytes"),
                   if_(F("pp_limiting_stage").eq(2), F("pp_stage_weights_last_bytes"),
                       F("pp_stage_weights_middle_bytes"))),
               F("weights_split_bytes_per_gpu"))),
    Figure("weights_gib_per_gpu", "GiB", "the same in GiB", F("weights_bytes_per_gpu") / GIB),
    Figure("activation_peak_bytes_per_gpu", "bytes", "vLLM: peak activation memory of the profile run on one GPU"
           " (its 'PyTorch activation peak memory'): activation_last_stage_bytes_per_gpu; under vLLM at PP > 1 the"
           " limiting stage's (activation_forward_bytes_per_gpu before the last)",
           if_(and_(F("pp_stages_modelled"), F("pp_limiting_stage") < 2), F("activation_forward_bytes_per_gpu"),
               F("activation_last_stage_bytes_per_gpu"))),
    Figure(
        "allocatable_bytes_per_gpu",
        "bytes",
        "memory the rule gives weights and the KV pool on one GPU: theoretical usable_bytes_per_gpu; vLLM"
        " requested - peak activations - non-torch memory - CUDA graphs given; SGLang (engine memory - memory in"
        " use before the weights load) x mem_fraction_static, so that the pool is SGLang's rest_memory ="
        " available after weights - available before load x (1 - mem_fraction_static)",
        if_(_rule("vllm"),
            F("requested_bytes_per_gpu") - F("activation_peak_bytes_per_gpu") - F("non_torch_bytes_per_gpu")
            - F("cuda_graph_bytes_per_gpu"),
            if_(_rule("sglang"), (F("engine_memory_bytes") - F("non_torch_bytes_per_gpu")) * F("mem_fraction_static_used"),
                F("usable_bytes_per_gpu"))),
    ),
    Figure("allocatable_gib_per_gpu", "GiB", "the same in GiB", F("allocatable_bytes_per_gpu") / GIB),
    Figure(
        "kv_pool_bytes_per_gpu",
        "bytes",
        "memory left for KV on one GPU: allocatable - weights, or kv_cache_memory_bytes when given",
        if_(isnull(I("kv_cache_memory_bytes")), F("allocatable_bytes_per_gpu") - F("weights_bytes_per_gpu"),
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
        "engine_serves_layout",
        "flag",
        "0 under the SGLang rule for a model with per-layer kv heads (kv_layers_N): SGLang refuses variable GQA"
        " (python/sglang/srt/configs/model_config.py, get_total_num_kv_heads: \"Variable GQA (VGQA) is not yet"
        " supported for nemotron-nas in sglang\"); 1 otherwise",
        if_(and_(_rule("sglang"), _grouped_layers() > 0), 0, 1),
        "flag",
    ),
    Figure(
        "kv_dtype_valid",
        "flag",
        "1 unless an MLA-only KV format (such as fp8_ds_mla) is used on a model without MLA",
        or_(F("is_mla"), isnull(I("kv_mla_bytes_per_token_per_layer"))),
        "flag",
    ),
    # ---- vLLM: pages, blocks and the two startup log lines (vllm/v1/core/kv_cache_utils.py)
    Figure(
        "kv_block_tokens",
        "tokens",
        "vLLM: tokens per KV block: block_size, raised for models with attention and state layers until one"
        " attention page holds a layer's state: alignment x cdiv(state page, alignment x attention bytes per"
        f" token), alignment {VLLM_BLOCK_ALIGNMENT} (MLA {VLLM_MLA_BLOCK_ALIGNMENT})",
        if_(
            _rule("vllm"),
            if_(
                and_(F("linear_layers_per_gpu") > 0,
                     (F("full_layers_per_gpu") + F("sliding_layers_per_gpu") + F("chunked_layers_per_gpu")) > 0),
                greatest(I("block_size"), _block_alignment() * ceil(
                    F("state_bytes_per_layer_per_gpu") / (_block_alignment() * F("kv_page_bytes_per_token_per_layer_per_gpu"))
                )),
                I("block_size"),
            ),
            Const(None),
        ),
        "int",
    ),
    Figure(
        "page_bytes_per_layer_per_gpu",
        "bytes",
        "vLLM: one layer's page (one block) on one GPU: kv_block_tokens x the largest KV bytes per token per"
        " layer of the model's attention kinds; state pages are padded to it",
        F("kv_block_tokens") * F("kv_page_bytes_per_token_per_layer_per_gpu"),
    ),
    Figure("fewest_kind_layers_per_gpu", "layers", "the fewest layers of any kind (full, sliding, chunked, linear) the"
           " model has on the fullest stage, over the kinds it has",
           least(least(_or_all(_KIND_LAYERS[0]), _or_all(_KIND_LAYERS[1])),
                 least(_or_all(_KIND_LAYERS[2]), _or_all(_KIND_LAYERS[3]))), "int"),
    Figure("most_kind_layers_per_gpu", "layers", "the most layers of any kind the model has on the fullest stage",
           greatest(greatest(F(_KIND_LAYERS[0]), F(_KIND_LAYERS[1])), greatest(F(_KIND_LAYERS[2]), F(_KIND_LAYERS[3]))),
           "int"),
    Figure(
        "kv_group_layers",
        "layers",
        "vLLM: layers per KV cache group: the fewest layers of any kind on the GPU, or the most when that is"
        " under 1.5 times the fewest (one kind: all its layers; at PP > 1 the limiting stage's)",
        if_(
            _rule("vllm"),
            if_(F("pp_stages_modelled"),
                if_(F("pp_limiting_stage").eq(0), F("pp_stage_layers_first"),
                    if_(F("pp_limiting_stage").eq(2), F("pp_stage_layers_last"), F("pp_stage_layers_middle"))),
                if_(F("most_kind_layers_per_gpu") < 1.5 * F("fewest_kind_layers_per_gpu"), F("most_kind_layers_per_gpu"),
                    F("fewest_kind_layers_per_gpu"))),
            Const(None),
        ),
        "int",
    ),
    Figure("kv_groups", "groups", "vLLM: KV cache groups: each layer kind split into groups of kv_group_layers",
           _groups(_KIND_LAYERS[0]) + _groups(_KIND_LAYERS[1]) + _groups(_KIND_LAYERS[2]) + _groups(_KIND_LAYERS[3]),
           "int"),
    Figure(
        "page_bytes_per_gpu",
        "bytes",
        "vLLM: bytes one KV block takes on one GPU: a page for each layer of a group (uniform models:"
        " block_size x kv_bytes_per_token_per_gpu); a layer with kv heads of its own (per-layer kv heads) has a page"
        " of its own size, and the MLA layers keeping no indexer of their own (indexer_layers) have no indexer page"
        " (vLLM gives such layers their own specs and, all being full attention, sums each layer's own page:"
        " UniformTypeKVCacheSpecs)",
        F("page_bytes_per_layer_per_gpu") * F("kv_group_layers")
        + F("kv_block_tokens") * (_kv_groups_sum(lambda n: F(f"kv_bytes_per_token_kv_group_{n}_per_gpu")
                                                 - F(f"kv_layers_{n}_per_gpu")
                                                 * F("kv_bytes_per_token_per_layer_per_gpu"))
                                  - _indexer_less_bytes_per_gpu()),
    ),
    Figure(
        "num_blocks",
        "blocks",
        "vLLM: KV blocks in one GPU's pool: pool // page_bytes_per_gpu, at least 0",
        if_(_rule("vllm"), greatest(0, floor(F("kv_pool_bytes_per_gpu") / F("page_bytes_per_gpu"))), Const(None)),
        "int",
    ),
    Figure(
        "blocks_per_request",
        "blocks",
        "vLLM: blocks one context-length request reserves, over its groups: full cdiv(max_model_len, block);"
        " sliding cdiv(min(window - 1 + in-flight tokens, max_model_len), block) + 1; chunked"
        " cdiv(min(chunk + in-flight tokens, max_model_len), block); state 1",
        _groups(_KIND_LAYERS[0]) * ceil(I("context_tokens") / F("kv_block_tokens"))
        + _groups(_KIND_LAYERS[1]) * (ceil(least(coalesce(I("sliding_window"), 0) - 1 + F("in_flight_tokens"),
                                                  I("context_tokens")) / F("kv_block_tokens")) + 1)
        + _groups(_KIND_LAYERS[2]) * ceil(least(coalesce(I("attention_chunk_size"), 0) + F("in_flight_tokens"),
                                                I("context_tokens")) / F("kv_block_tokens"))
        + _groups(_KIND_LAYERS[3]),
        "int",
    ),
    # ---- SGLang (python/sglang/srt/model_executor/pool_configurator.py)
    Figure(
        "cell_bytes_per_token_per_gpu",
        "bytes",
        "SGLang: KV bytes one token costs on one GPU (cell_size): full-attention layers, plus sliding and chunked"
        f" layers at swa_full_tokens_ratio {SGLANG_SWA_FULL_TOKENS_RATIO} from v0.4.10 (their pool of its own), at 1"
        " before (one pool, every layer holding every token); all of them when no layer is full; linear layers keep"
        " state, not cells",
        if_(
            _rule("sglang"),
            if_(
                F("full_layers_per_gpu") > 0,
                F("kv_bytes_per_token_full_per_gpu")
                + if_(F("engine_release_used") < SGLANG_HYBRID_SWA_POOL_FROM, 1, SGLANG_SWA_FULL_TOKENS_RATIO)
                * _local_bytes_per_gpu(),
                _local_bytes_per_gpu(),
            ),
            Const(None),
        ),
    ),
    Figure(
        "sglang_state_bytes_per_request_per_gpu",
        "bytes",
        "SGLang: one request's state slot on one GPU (mamba_cache_per_req): linear layers x (conv elements x"
        f" state_bytes_per_element + recurrent elements x {SGLANG_MAMBA_SSM_BYTES} B, float32), sharded as"
        " state_bytes_per_sequence_per_gpu; the whole state at state_bytes_per_element when the model does not"
        " split it (linear_recurrent_elements_per_layer NULL); NULL under the other rules",
        if_(_rule("sglang"),
            F("linear_layers_per_gpu")
            * ((coalesce(I("linear_state_elements_per_layer"), 0) - coalesce(I("linear_recurrent_elements_per_layer"), 0))
               * I("state_bytes_per_element")
               + coalesce(I("linear_recurrent_elements_per_layer"), 0) * SGLANG_MAMBA_SSM_BYTES)
            / _state_shards(),
            Const(None)),
    ),
    Figure(
        "sglang_state_slots",
        "requests",
        "SGLang: state slots of a model with linear layers (max_mamba_cache_size): int((kv_pool_bytes_per_gpu x"
        f" {SGLANG_MAMBA_FULL_MEMORY_RATIO} / (1 + {SGLANG_MAMBA_FULL_MEMORY_RATIO}) - one slot of padding)"
        " / sglang_state_bytes_per_request_per_gpu), at least 0, taken with the padding slot from the pool before"
        " its KV cells; NULL without linear layers",
        if_(and_(_rule("sglang"), F("sglang_state_bytes_per_request_per_gpu") > 0),
            greatest(0, floor((F("kv_pool_bytes_per_gpu") * SGLANG_MAMBA_FULL_MEMORY_RATIO
                               / (1 + SGLANG_MAMBA_FULL_MEMORY_RATIO) - F("sglang_state_bytes_per_request_per_gpu"))
                              / F("sglang_state_bytes_per_request_per_gpu"))),
            Const(None)),
        "int",
    ),
    Figure(
        "kv_cells_bytes_per_gpu",
        "bytes",
        "the KV cache memory the engine prints for one GPU: vLLM 'Available KV cache memory' (kv_pool_bytes_per_gpu);"
        " SGLang K size + V size, the pool less a hybrid model's state slots and their padding slot"
        " ((sglang_state_slots + 1) x sglang_state_bytes_per_request_per_gpu)",
        if_(_rule("sglang"),
            F("kv_pool_bytes_per_gpu")
            - coalesce((F("sglang_state_slots") + 1) * F("sglang_state_bytes_per_request_per_gpu"), 0),
            F("kv_pool_bytes_per_gpu")),
    ),
    Figure("kv_cells_gib_per_gpu", "GiB", "the same in GiB", F("kv_cells_bytes_per_gpu") / GIB),
    Figure(
        "kv_cache_tokens",
        "tokens",
        "the KV cache size the engine prints for one GPU: vLLM 'GPU KV cache size' = num_blocks // kv_groups x"
        f" kv_block_tokens, and from v0.{VLLM_KV_TOKENS_AS_CONCURRENCY_FROM // 1000}"
        " int(num_blocks / blocks_per_request x context), its concurrency in tokens (a hybrid model's is not its"
        " pool's); SGLang max_total_num_tokens = kv_cells_bytes_per_gpu // cell_bytes, rounded down to"
        " the page (block_size); NULL under the theoretical rule (see kv_pool_tokens)",
        if_(
            _rule("vllm"),
            if_(F("engine_release_used") >= VLLM_KV_TOKENS_AS_CONCURRENCY_FROM,
                floor(F("num_blocks") / F("blocks_per_request") * I("context_tokens")),
                floor(F("num_blocks") / F("kv_groups")) * F("kv_block_tokens")),
            if_(
                _rule("sglang"),
                if_(F("weights_fit"),
                    floor(floor(F("kv_cells_bytes_per_gpu") / F("cell_bytes_per_token_per_gpu"))
                          / greatest(I("block_size"), 1)) * greatest(I("block_size"), 1),
                    0),
                Const(None),
            ),
        ),
        "int",
    ),
    Figure(
        "max_running_requests",
        "sequences",
        "requests the engine runs at once on one attention rank, whatever its pool holds: vLLM max_num_seqs"
        " (vllm_max_num_seqs_used, each DP rank its own); SGLang max_running_requests = min(max_num_seqs //"
        " dp_attention when given, else max(min(int(kv_cache_tokens / context x"
        f" {SGLANG_RUNNING_REQUESTS_PER_CONTEXT}), {SGLANG_RUNNING_REQUESTS_CEILING:,}), {SGLANG_RUNNING_REQUESTS_FLOOR:,}),"
        f" kv_cache_tokens // {SGLANG_TOKENS_PER_RUNNING_REQUEST}), and for a model with linear layers at most"
        f" sglang_state_slots // {SGLANG_MAMBA_SLOTS_PER_REQUEST}; NULL (no limit) under the theoretical rule",
        if_(
            _rule("vllm"),
            F("vllm_max_num_seqs_used"),
            if_(
                _rule("sglang"),
                least(least(coalesce(floor(I("max_num_seqs") / I("dp_attention")),
                                     greatest(least(floor(F("kv_cache_tokens") / I("context_tokens")
                                                          * SGLANG_RUNNING_REQUESTS_PER_CONTEXT),
                                                    SGLANG_RUNNING_REQUESTS_CEILING), SGLANG_RUNNING_REQUESTS_FLOOR)),
                            _SGLANG_TOKEN_CAP),
                      coalesce(floor(F("sglang_state_slots") / SGLANG_MAMBA_SLOTS_PER_REQUEST), _SGLANG_TOKEN_CAP)),
                Const(None),
            ),
        ),
        "int",
    ),
    Figure(
        "sequences_per_rank",
        "sequences",
        "context-length sequences one attention rank's pool holds (a real number): theoretical pool / bytes"
        " per sequence; vLLM num_blocks / blocks_per_request (its 'Maximum concurrency' line); SGLang"
        " kv_cache_tokens / context",
        if_(
            and_(F("weights_fit"), F("kv_dtype_valid"), F("tp_valid")),
            if_(
                _rule("vllm"),
                F("num_blocks") / F("blocks_per_request"),
                if_(_rule("sglang"), F("kv_cache_tokens") / I("context_tokens"),
                    F("kv_pool_bytes_per_gpu") / F("kv_bytes_per_sequence_per_gpu")),
            ),
            0,
        ),
    ),
    Figure(
        "max_concurrency",
        "sequences",
        "context-length sequences one replica (a TP x PP group) holds at once: pool / bytes per sequence, at most"
        " the engine's max_running_requests, times the DP-attention size (3.46 = three whole sequences and part of"
        " a fourth)",
        _running(F("sequences_per_rank")) * I("dp_attention"),
    ),
    Figure("whole_sequences", "sequences", "whole context-length sequences a replica holds",
           floor(_running(F("sequences_per_rank"))) * I("dp_attention"), "int"),
    Figure(
        "fits",
        "flag",
        "1 when a replica can hold at least one whole context-length sequence",
        and_(F("tp_valid"), F("kv_dtype_valid"), F("engine_serves_layout"), F("weights_fit"),
             F("whole_sequences") >= 1),
        "flag",
    ),
    Figure(
        "reason",
        "text",
        "why it does not fit, or fits but serves no user because no replica meets its latency target even with one"
        " request (latency_concurrency_limit 0); empty when it fits, serves and the context is within the model's"
        " claim; a context beyond max_position_embeddings is said here too, fitting or not",
        # _WHY_NOT is "" exactly when the layout fits, so only the branch that does not fit spells it
        # out, once: the workbook's formula is half as long as with _WHY_NOT in every branch.
        if_(
            F("fits"),
            if_(coalesce(F("latency_concurrency_limit"), 1) < 1,
                concat("fits in memory, but no replica meets the ",
                       if_(coalesce(F("tpot_concurrency_limit"), 1) < 1, "tpot", "ttft"),
                       " target even with one request",
                       if_(F("context_within_claim"), "",
                           concat("; beyond the model's ", grouped(I("max_position_embeddings")), "-token claim"))),
                if_(F("context_within_claim"), "",
                    concat("fits, beyond the model's ", grouped(I("max_position_embeddings")), "-token claim"))),
            concat(_WHY_NOT, if_(F("context_within_claim"), "",
                                 concat("; beyond the model's ", grouped(I("max_position_embeddings")), "-token claim"))),
        ),
        "text",
    ),
    Figure(
        "kv_pool_tokens",
        "tokens",
        "tokens the pool of one GPU holds at kv_bytes_per_token_per_gpu (whole blocks when paged); under an engine"
        " rule the engine's own count is kv_cache_tokens",
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
    Figure("node_concurrency", "sequences",
           "context-length sequences a whole node holds: replicas x max concurrency; 0 when a replica cannot hold"
           " one whole sequence (fits = 0)",
           if_(F("fits"), F("replicas_per_node") * F("max_concurrency"), 0)),
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
    # ---- calibration: the figures against what the engine printed (plans only)
    Figure(
        "kv_cache_tokens_error_fraction",
        "fraction",
        "(predicted - measured) / measured KV cache tokens: kv_cache_tokens (kv_pool_tokens under the"
        " theoretical rule) against measured_kv_cache_tokens; positive: kvreg promises more than the engine has",
        (coalesce(F("kv_cache_tokens"), F("kv_pool_tokens")) - I("measured_kv_cache_tokens"))
        / I("measured_kv_cache_tokens"),
    ),
    Figure(
        "kv_cache_memory_error_fraction",
        "fraction",
        "(predicted - logged) / logged KV memory per GPU: kv_pool_bytes_per_gpu against measured_kv_cache_bytes",
        (F("kv_pool_bytes_per_gpu") - I("measured_kv_cache_bytes")) / I("measured_kv_cache_bytes"),
    ),
    Figure(
        "max_concurrency_error_fraction",
        "fraction",
        "(predicted - measured) / measured concurrency per engine: sequences_per_rank against"
        " measured_max_concurrency",
        (F("sequences_per_rank") - I("measured_max_concurrency")) / I("measured_max_concurrency"),
    ),
    # ---- workload (paged: a request holds what it uses)
    Figure("class_kv_bytes_per_request_per_gpu", "bytes",
           "KV bytes a request of one workload class holds on one GPU (whole blocks when paged)",
           _sequence_bytes_per_gpu(I("class_tokens"))),
    Figure("class_concurrency", "users",
           "requests of this class alone one replica holds at once: pool / class bytes, at most the engine's"
           " max_running_requests, x DP-attention",
           if_(F("fits"), _running(F("kv_pool_bytes_per_gpu") / F("class_kv_bytes_per_request_per_gpu"))
               * I("dp_attention"), 0)),
    Figure("class_weighted_tokens", "tokens", "share x class tokens (summed over a plan's classes for mix_avg_tokens)",
           I("share") * I("class_tokens")),
    Figure("class_weighted_input_tokens", "tokens", "share x class prompt tokens (summed over a plan's classes for"
           " mix_input_tokens; NULL for a class without lengths)", I("share") * I("class_input_tokens")),
    Figure("class_weighted_output_tokens", "tokens", "share x class output tokens (summed over a plan's classes for"
           " mix_output_tokens)", I("share") * I("class_output_tokens")),
    Figure("class_weighted_kv_bytes", "bytes",
           "share x class KV bytes per request (summed over a plan's classes for mix_kv_bytes_per_request_per_gpu)",
           I("share") * F("class_kv_bytes_per_request_per_gpu")),
    Figure("workload_tokens", "tokens",
           "tokens an average request holds: the classes' share-weighted mean, else avg_tokens, else the context",
           coalesce(I("mix_avg_tokens"), coalesce(I("avg_tokens"), I("context_tokens")))),
    Figure("kv_bytes_per_request_per_gpu", "bytes",
           "KV bytes an average request holds on one GPU: the classes' share-weighted mean (each class rounded to"
           " its own blocks and windows), else one request of workload_tokens",
           coalesce(I("mix_kv_bytes_per_request_per_gpu"), _sequence_bytes_per_gpu(F("workload_tokens")))),
    Figure(
        "workload_concurrency",
        "users",
        "average requests one replica holds at once: pool / bytes per average request, at most the engine's"
        " max_running_requests, x DP-attention",
        if_(F("fits"), _running(F("kv_pool_bytes_per_gpu") / F("kv_bytes_per_request_per_gpu")) * I("dp_attention"), 0),
    ),
    Figure("gpus_per_replica", "GPUs", "TP x PP", I("tp") * I("pp"), "int"),
    # ---- users served: the memory limit, or the latency limit where a target binds first
    Figure("users_per_replica", "users", "users one replica serves: workload_concurrency (what its KV pool holds);"
           " with a latency target (tpot or ttft) the smaller of that and latency_concurrency_limit (the requests it"
           " runs within the targets)",
           # x 1.0: a real number on every engine (SQLite's MIN would return the whole latency limit as an
           # integer, PostgreSQL's LEAST a double), so 79 users print as 79.00 on both, as 268.85 does
           if_(isnull(F("latency_concurrency_limit")), F("workload_concurrency"),
               least(F("workload_concurrency"), F("latency_concurrency_limit") * 1.0))),
    Figure("users_binding_constraint", "name", "what limits users_per_replica: memory (the KV pool) or latency"
           " (a target); NULL without a target",
           if_(_no_target(), Const(None), _binds(F("workload_concurrency"))), "text"),
    # ---- demand (plan x quarter)
    Figure(
        "replicas_needed",
        "replicas",
        "replicas to serve the quarter's users: ceil(users / users_per_replica); NULL when the plan does not fit"
        " or no replica meets its latency target",
        if_(and_(F("fits"), F("users_per_replica") > 0), ceil(I("users") / F("users_per_replica")), Const(None)),
        "int",
    ),
    Figure("gpus_needed", "GPUs", "GPUs the replicas occupy: replicas x TP x PP",
           F("replicas_needed") * F("gpus_per_replica"), "int"),
    Figure("nodes_needed", "nodes", "nodes to house the replicas: ceil(replicas / replicas per node)",
           ceil(F("replicas_needed") / F("replicas_per_node")), "int"),
    Figure("capacity_users", "users", "users the needed replicas serve: replicas_needed x users_per_replica",
           F("replicas_needed") * F("users_per_replica")),
    Figure("headroom_users", "users", "spare users: capacity - demand", F("capacity_users") - I("users")),
    Figure("headroom_fraction", "fraction", "spare share of capacity: headroom / capacity",
           F("headroom_users") / F("capacity_users")),
    Figure("cost_per_month", "USD", "GPUs needed x price per GPU-hour x 730 hours",
           F("gpus_needed") * I("price_per_hour") * HOURS_PER_MONTH),
    Figure("capex", "USD", "GPUs needed x unit price", F("gpus_needed") * I("unit_price")),
    Figure("cost_per_user_per_month", "USD", "cost per month / users", F("cost_per_month") / I("users")),
]



@dataclass(frozen=True)
class ClassMean:
    """A share-weighted mean over a plan's workload classes, an input of the plan's figures:
    SUM(weighted) / SUM(share) over the plan's rows of the plan_class grain; NULL (in the workbook
    blank) when the plan has no classes. Its two spellings are the methods below, side by side:
    the views' (`sql`, aggregated GROUP BY plan) and the workbook's (`excel`, SUMIFS over the
    Workload sheet).

    The workbook counts only the rows whose weighted figure is computed (> 0, as share and bytes
    always are), in the shares too: a row finance adds without copying the formulas down is left
    out of the mean rather than diluting it. In the registry every class row has its weighted
    figure, so both spellings take the same rows."""

    name: str  # the plan input it provides
    weighted: str  # the class figure summed: share x value (how="min": the class input minimised)
    how: str = "mean"  # "mean": SUM(weighted) / SUM(share); "min": the smallest of the classes' values

    def sql(self) -> str:
        """The mean (or the least) as an SQL aggregate over the plan_class rows of one plan; the
        least skips the classes without a value (NULL), as MIN does."""
        if self.how == "min":
            return f"MIN({self.weighted})"
        return f"SUM({self.weighted}) / SUM({CLASS_WEIGHT})"

    def excel(self, column: Callable[[str], str], key: str) -> str:
        """The mean as a cell formula (with '='): `column(name)` is the range of a plan_class column
        (plan, share, the weighted figure) in the workbook; `key` the plan's name as a literal
        SUMIFS criterion. The least is MINIFS over the rows with a value (> 0: targets are positive)."""
        weighted = column(self.weighted)
        crit = f'{column("plan")},"="&{key},{weighted},">0"'
        if self.how == "min":
            return f'=IF(COUNTIFS({crit})=0,"",_xlfn.MINIFS({weighted},{crit}))'
        share = f"SUMIFS({column(CLASS_WEIGHT)},{crit})"
        return f'=IF(COUNTIFS({crit})=0,"",SUMIFS({weighted},{crit})/{share})'

    def formula(self) -> str:
        """The rule in words for docs/methodology.md."""
        if self.how == "min":
            return f"min({self.weighted})"
        return f"sum({self.weighted}) / sum({CLASS_WEIGHT})"


CLASS_WEIGHT = "share"
CLASS_MEANS = (
    ClassMean("mix_avg_tokens", "class_weighted_tokens"),
    ClassMean("mix_kv_bytes_per_request_per_gpu", "class_weighted_kv_bytes"),
    # The latency workload of a mix: one replica serves every class, so its batch decodes the mean request
    # (the lengths' share-weighted means) and every request in it must meet the strictest class's target.
    ClassMean("mix_input_tokens", "class_weighted_input_tokens"),
    ClassMean("mix_output_tokens", "class_weighted_output_tokens"),
    ClassMean("mix_tpot_target_ms", "class_tpot_target_ms", "min"),
    ClassMean("mix_ttft_target_ms", "class_ttft_target_ms", "min"),
)

# --------------------------------------------------------------------------- latency
# A replica serving `concurrency` requests of input_tokens + output_tokens in a closed loop (each request sent
# when the last ended, as benchmark_serving's --max-concurrency does). Decode: each step every running
# sequence emits one token, and the step lasts as long as the slower of its reads (weights, KV, state) and its
# FLOPs, plus the TP all-reduces and the engine's fixed cost per step. Prefill: the prompt's FLOPs (the
# attention term included) or its chunks' weight reads, whichever is slower. docs/methodology.md derives the
# closed loop's terms; kvreg.figures.performance names every constant with its source.

_NO_LIMIT = 1e9  # "any concurrency": a latency target no concurrency reaches


def _limit_or_none(limit: Expr) -> Expr:
    """A concurrency limit, NULL where every concurrency meets the target (_NO_LIMIT): a loose target prints as
    no limit, never as a made-up 1,000,000,000."""
    return if_(limit >= _NO_LIMIT, Const(None), limit)


def _engine_is(engine: str) -> Expr:
    """1 when the latency figures follow this engine's efficiencies (the theoretical rule follows vLLM's)."""
    return I("rule").eq("sglang") if engine == "sglang" else not_(I("rule").eq("sglang"))


def _efficiency(field: str) -> Expr:
    """The first EFFICIENCIES entry the GPU's name and the engine match: its `field`."""
    out: Expr = Const(None)
    for e in reversed(EFFICIENCIES):
        cond = _engine_is(e.engine) if not e.needle else and_(_engine_is(e.engine), contains(I("gpu_name"), e.needle))
        out = if_(cond, getattr(e, field), out)
    return out


def _link_bytes_per_s() -> Expr:
    out: Expr = Const(FABRIC_LINK_DEFAULT_BYTES_PER_S)
    for needle, value in reversed(FABRIC_LINK_BYTES_PER_S):
        out = if_(contains(I("gpu_name"), needle), value, out)
    return if_(coalesce(I("fabric"), 1).eq(0), PCIE_LINK_BYTES_PER_S, out)


def _within(intercept, slope, target) -> Expr:
    """The largest x >= 0 with intercept + slope x <= target (_NO_LIMIT when every x is; 0 when none is)."""
    return if_(slope > 0, greatest(0, (target - intercept) / slope), if_(intercept <= target, _NO_LIMIT, 0))


def _decode_lines() -> list[tuple[Expr, Expr]]:
    """A decode step's read and FLOP time as lines a + b x B over the batch B (seconds): all weights read
    (every expert) plus B sequences' KV; the non-expert weights plus B sequences' experts and KV (the MoE read
    is the smaller of the two); B sequences' FLOPs. The step's time is max(min(first, second), third)."""
    return [
        (F("decode_weights_s") + F("decode_experts_s"), F("decode_kv_s_per_sequence")),
        (F("decode_weights_s"), F("decode_experts_s_per_sequence") + F("decode_kv_s_per_sequence")),
        (Const(0), F("decode_compute_s_per_sequence")),
    ]


def _decode_step(batch: Expr) -> Expr:
    (a1, b1), (a2, b2), (a3, b3) = _decode_lines()
    return (greatest(least(a1 + b1 * batch, a2 + b2 * batch), a3 + b3 * batch)
            + F("decode_fixed_s") + F("step_s_per_sequence") * batch)


def _tpot_limit() -> Expr:
    """Largest concurrency whose tpot (decode step + (C - 1) x prefill_s / output_tokens) meets the target."""
    target = F("workload_tpot_target_ms") / 1000
    rest_a = F("decode_fixed_s") - F("prefill_s") / F("workload_output_tokens")
    rest_b = F("step_s_per_sequence") + F("prefill_s") / F("workload_output_tokens")
    (a1, b1), (a2, b2), (a3, b3) = [(a + rest_a, b + rest_b) for a, b in _decode_lines()]
    return least(greatest(_within(a1, b1, target), _within(a2, b2, target)), _within(a3, b3, target))


def _ttft_limit() -> Expr:
    """Largest concurrency whose ttft (request_overhead_s + prefill_eager_s + prefill_s x (1 + (C - 1) / 2 x
    min(1, prefill_s / (output_tokens x decode step)))) meets the target: (C - 1) / 2 <= q, or (C - 1) x prefill_s <= 2 q
    output_tokens x decode step, with q = ttft_queue_allowance."""
    q = F("ttft_queue_allowance")
    k = 2 * q * F("workload_output_tokens")
    p = F("prefill_s")
    lines = [(a + F("decode_fixed_s"), b + F("step_s_per_sequence")) for a, b in _decode_lines()]
    # (C - 1) p <= k (a + b C)  <=>  (p - k b) C <= k a + p
    (s1, s2, s3) = [_within(0, p - k * b, k * a + p) for a, b in lines]
    return if_(q < 0, 0, greatest(1 + 2 * q, greatest(least(s1, s2), s3)))


_LATENCY_FIGURES = [
    # ---- the workload: a plan's classes where they give it (CLASS_MEANS), else its own (or a question's)
    Figure("workload_input_tokens", "tokens", "prompt tokens of the mean request: the classes' share-weighted"
           " mean (mix_input_tokens), else input_tokens", coalesce(I("mix_input_tokens"), I("input_tokens"))),
    Figure("workload_output_tokens", "tokens", "generated tokens of the mean request: mix_output_tokens, else"
           " output_tokens", coalesce(I("mix_output_tokens"), I("output_tokens"))),
    Figure("workload_tpot_target_ms", "ms", "the tpot target every request on a replica must meet: the strictest"
           " of the plan's (tpot_target_ms) and its classes' (mix_tpot_target_ms); NULL: none",
           least(I("tpot_target_ms"), I("mix_tpot_target_ms"))),
    Figure("workload_ttft_target_ms", "ms", "the ttft target every request must meet: the strictest of"
           " ttft_target_ms and mix_ttft_target_ms; NULL: none", least(I("ttft_target_ms"), I("mix_ttft_target_ms"))),
    Figure("latency_engine", "name", "the engine whose efficiencies the latency figures use: sglang under the"
           " sglang rule, else vllm", if_(_engine_is("sglang"), "sglang", "vllm"), "text"),
    Figure("bandwidth_efficiency", "fraction", "share of the datasheet memory bandwidth a decode step's reads"
           " reach on this GPU family under this engine (kvreg.figures.performance EFFICIENCIES, fitted on"
           " docs/latency-accuracy.md's measurements)", _efficiency("bandwidth")),
    Figure("compute_efficiency", "fraction", "share of the datasheet dense FLOP/s the matrix multiplications"
           " reach on this GPU family under this engine (EFFICIENCIES)", _efficiency("compute")),
    Figure("step_overhead_s", "s", "seconds each engine step costs beyond its reads and FLOPs: scheduling,"
           " kernel launches, sampling (EFFICIENCIES)", _efficiency("step_overhead_s")),
    Figure("request_overhead_s", "s", "seconds a request's first token waits beyond prefill: the HTTP round trip,"
           " tokenization, the first scheduling step (EFFICIENCIES)", _efficiency("request_overhead_s")),
    Figure("peak_flops_per_s", "FLOP/s", "the GPU's dense FLOP/s in the weights' format: FP8 and int8 weights"
           " the FP8 rate, FP4 weights the FP4 rate, where the GPU has such units; else BF16",
           if_(or_(*[I("weight_dtype_name").eq(n) for n in FP8_WEIGHT_DTYPES + ("int8",)]),
               coalesce(I("flops_fp8_per_s"), I("flops_bf16_per_s")),
               if_(or_(I("weight_dtype_name").eq("fp4"), I("weight_dtype_name").eq("nvfp4")),
                   coalesce(I("flops_fp4_per_s"), I("flops_bf16_per_s")), I("flops_bf16_per_s")))),
    Figure("expert_bandwidth_efficiency", "fraction", "share of the datasheet memory bandwidth the routed experts'"
           " reads reach: grouped MoE kernels over a few tokens an expert reach less than a dense layer's (EFFICIENCIES)",
           _efficiency("expert_bandwidth")),
    Figure("sequence_overhead_s", "s", "seconds each running request adds to a decode step beyond its reads,"
           " FLOPs and all-reduce bytes: the scheduler's and the sampler's work per request (EFFICIENCIES)",
           _efficiency("sequence_overhead_s")),
    Figure("allreduce_latency_s", "s", "seconds one TP all-reduce costs a decode step beyond its bytes: its launch,"
           " the GPUs' synchronisation and the kernels TP adds around it (EFFICIENCIES)",
           _efficiency("allreduce_latency_s")),
    Figure("effective_bandwidth_bytes_per_s", "bytes/s", "memory bandwidth x bandwidth_efficiency",
           I("memory_bandwidth_bytes_per_s") * F("bandwidth_efficiency")),
    Figure("effective_expert_bandwidth_bytes_per_s", "bytes/s", "memory bandwidth x expert_bandwidth_efficiency",
           I("memory_bandwidth_bytes_per_s") * F("expert_bandwidth_efficiency")),
    Figure("effective_flops_per_s", "FLOP/s", "peak_flops_per_s x compute_efficiency",
           F("peak_flops_per_s") * F("compute_efficiency")),
    Figure("link_bytes_per_s", "bytes/s", "one GPU's link bandwidth one way for the TP all-reduce: PCIe 4.0 x16"
           f" ({PCIE_LINK_BYTES_PER_S / 1e9:.0f} GB/s) over PCIe only (fabric 0), else the family's NVLink or"
           " Infinity Fabric (kvreg.figures.performance)", _link_bytes_per_s()),
    Figure("decode_mean_context_tokens", "tokens", "tokens a sequence holds on average while it decodes:"
           " input_tokens + output_tokens / 2", F("workload_input_tokens") + F("workload_output_tokens") / 2),
    Figure("latency_batch_sequences", "sequences", "requests decoding together on one replica: the concurrency"
           " (1 when not given), at most the whole sequences the KV pool holds (whole_sequences); the rest wait",
           if_(F("fits"), least(coalesce(I("concurrency"), 1), F("whole_sequences")), Const(None))),
    # ---- a decode step's terms (seconds, per replica: the stages one after the other)
    Figure("decode_weights_s", "s", "reading the weights every sequence shares, once per step: the non-expert"
           " weights (all of a dense model's params_active) / (TP x PP) / effective bandwidth, over the PP stages",
           if_(F("expert_params") > 0, I("params_total") - F("expert_params"), I("params_active"))
           * I("weight_bytes_per_param") / I("tp") / F("effective_bandwidth_bytes_per_s")),
    Figure("decode_experts_s", "s", "reading every routed expert once (a large batch touches them all)",
           F("expert_params") * I("weight_bytes_per_param") / I("tp") / F("effective_expert_bandwidth_bytes_per_s")),
    Figure("decode_experts_s_per_sequence", "s", "reading the routed experts one sequence's token activates:"
           " params_active less the non-expert weights (a small batch reads only these, for each sequence)",
           greatest(0, I("params_active") - I("params_total") + F("expert_params")) * I("weight_bytes_per_param")
           / I("tp") / F("effective_expert_bandwidth_bytes_per_s")),
    Figure("decode_kv_s_per_sequence", "s", "reading one sequence's KV and state at the mean decode context, on"
           " one GPU (an attention rank holds 1 / dp_attention of the batch), over the PP stages",
           _sequence_bytes_per_gpu(F("decode_mean_context_tokens")) * I("pp") / I("dp_attention")
           / F("effective_bandwidth_bytes_per_s")),
    Figure("attention_flops_per_context_token", "FLOP", "attention FLOPs one token spends on each earlier token"
           " in one layer: 4 x attention_heads x head_dim (QK and AV); MLA 2 x attention_heads x (2 x kv_lora_rank"
           " + qk_rope_head_dim), attending in the latent",
           if_(F("is_mla"), 2 * I("attention_heads") * (2 * coalesce(I("kv_lora_rank"), 0)
                                                       + coalesce(I("qk_rope_head_dim"), 0)),
               4 * I("attention_heads") * I("head_dim"))),
    Figure("decode_flops_per_sequence", "FLOP", "FLOPs one sequence's token costs in a decode step:"
           " 2 x params_active plus attention over the mean context (sliding and chunked layers up to their"
           " window)", 2 * I("params_active") + F("attention_flops_per_context_token") * (
               I("full_layers") * F("decode_mean_context_tokens")
               + I("sliding_layers") * least(F("decode_mean_context_tokens"), coalesce(I("sliding_window"), 0))
               + I("chunked_layers") * least(F("decode_mean_context_tokens"), coalesce(I("attention_chunk_size"), 0)))),
    Figure("decode_compute_s_per_sequence", "s", "one sequence's decode FLOPs / TP / effective FLOP/s (0 when"
           " the GPU's FLOP/s is not known)",
           coalesce(F("decode_flops_per_sequence") / I("tp") / F("effective_flops_per_s"), 0)),
    Figure("allreduces_per_step", "all-reduces", f"TP all-reduces one forward pass makes: {ALLREDUCES_PER_LAYER}"
           " per layer (after attention and after the MLP) at TP > 1; 0 at TP 1",
           if_(I("tp") > 1, ALLREDUCES_PER_LAYER * (I("layers") + I("no_cache_layers")), 0), "int"),
    Figure("communication_s_per_step", "s", "the all-reduces' fixed latency in one step:"
           " allreduces_per_step x allreduce_latency_s", F("allreduces_per_step") * F("allreduce_latency_s")),
    Figure("communication_s_per_sequence", "s", "one token's all-reduce traffic: allreduces_per_step x"
           f" hidden_size x {ACTIVATION_WIRE_BYTES} B x 2 (TP - 1) / TP (a ring all-reduce) / link_bytes_per_s",
           coalesce(F("allreduces_per_step") * I("hidden_size") * ACTIVATION_WIRE_BYTES * 2 * (I("tp") - 1) / I("tp")
                    / F("link_bytes_per_s"), 0)),
    Figure("step_s_per_sequence", "s", "what each running request adds to a decode step beyond its reads and"
           " FLOPs: its all-reduce traffic (communication_s_per_sequence) + sequence_overhead_s",
           F("communication_s_per_sequence") + F("sequence_overhead_s")),
    Figure("decode_fixed_s", "s", "what a decode step costs whatever the batch beyond its reads:"
           " communication_s_per_step + step_overhead_s",
           F("communication_s_per_step") + F("step_overhead_s")),
    Figure("decode_step_s", "s", "one decode step at latency_batch_sequences B: max(min(weights + experts + B x KV,"
           " weights + B x (experts per sequence + KV)), B x compute) + decode_fixed_s + B x"
           " step_s_per_sequence", _decode_step(F("latency_batch_sequences"))),
    # ---- prefill (one prompt, in chunks)
    Figure("prefill_chunk_tokens", "tokens", "prompt tokens one engine step takes: vLLM max_num_batched_tokens,"
           f" SGLang chunked_prefill_size, else {DEFAULT_PREFILL_CHUNK_TOKENS:,}",
           coalesce(F("max_num_batched_tokens_used"), coalesce(F("sglang_chunked_prefill_size"), coalesce(
               I("max_num_batched_tokens"), DEFAULT_PREFILL_CHUNK_TOKENS))), "int"),
    Figure("prefill_chunks", "steps", "engine steps one prompt takes: ceil(input_tokens / prefill_chunk_tokens)",
           ceil(F("workload_input_tokens") / F("prefill_chunk_tokens")), "int"),
    Figure("prefill_flops", "FLOP", "FLOPs of one prompt: 2 x params_active x input_tokens plus attention, each"
           " token over the tokens before it (full layers input_tokens^2 / 2; sliding and chunked layers up to"
           " their window)",
           2 * I("params_active") * F("workload_input_tokens") + F("attention_flops_per_context_token") * F("workload_input_tokens") * (
               I("full_layers") * F("workload_input_tokens") / 2
               + I("sliding_layers") * least(F("workload_input_tokens") / 2, coalesce(I("sliding_window"), 0))
               + I("chunked_layers") * least(F("workload_input_tokens") / 2, coalesce(I("attention_chunk_size"), 0) / 2))),
    Figure("prefill_eager", "flag", "1 when a prompt's forward pass runs without CUDA graphs: SGLang but where it"
           f" captures prefill graphs (from v0.5.10, release {SGLANG_PREFILL_GRAPHS_FROM:,}, at PP 1, as"
           " sglang_prefill_graphs_mib); its ForwardMode.is_cuda_graph() never holds EXTEND",
           and_(_rule("sglang"), not_(and_(F("engine_release_used") >= SGLANG_PREFILL_GRAPHS_FROM, I("pp").eq(1)))),
           "flag"),
    Figure("eager_allreduce_latency_s", "s", "seconds one TP all-reduce costs a forward pass run without CUDA graphs:"
           " its launch outside a graph and the TP ranks' kernel launches it waits for (kvreg.figures.performance"
           " EAGER_ALLREDUCE_LATENCY_S, fitted on SGLang runs at TP 8)", Const(EAGER_ALLREDUCE_LATENCY_S)),
    Figure("prefill_eager_s", "s", "what running its prompt's forward passes without CUDA graphs adds to a request's"
           " time to first token: prefill_chunks x allreduces_per_step x (eager_allreduce_latency_s -"
           " allreduce_latency_s) when prefill_eager, else 0. In the time to first token only: the time per output"
           " token measured at 16 to 100 requests does not show it in the other requests' prefills",
           if_(F("prefill_eager"), F("prefill_chunks") * F("allreduces_per_step")
               * greatest(0, F("eager_allreduce_latency_s") - F("allreduce_latency_s")), 0)),
    Figure("prefill_s", "s", "one prompt's prefill: the slower of its FLOPs / (TP x effective FLOP/s) and its"
           " chunks' weight reads, plus each chunk's fixed cost and the prompt's all-reduce traffic",
           greatest(coalesce(F("prefill_flops") / I("tp") / F("effective_flops_per_s"), 0),
                    F("prefill_chunks") * (F("decode_weights_s") + F("decode_experts_s")))
           + F("prefill_chunks") * F("decode_fixed_s") + F("workload_input_tokens") * F("communication_s_per_sequence")),
    # ---- a request in the closed loop
    Figure("tpot_s", "s", "time per output token: a decode step, stretched by the other running requests' prefills"
           " chunked in between ((B - 1) x prefill_s spread over output_tokens)",
           F("decode_step_s") + (F("latency_batch_sequences") - 1) * F("prefill_s") / F("workload_output_tokens")),
    Figure("ttft_queue_fraction", "fraction", "prompts ahead of a new one, per other running request: 1/2 when the"
           " requests arrive together, fewer (prefill_s / (output_tokens x decode step)) once they have spread out",
           least(1, F("prefill_s") / (F("workload_output_tokens") * F("decode_step_s")))),
    Figure("ttft_running_s", "s", "time to first token once the KV pool has room: request_overhead_s,"
           " prefill_eager_s, its own prefill and the prompts queued ahead, prefill_s x (B - 1) / 2 x"
           " ttft_queue_fraction",
           F("request_overhead_s") + F("prefill_eager_s")
           + F("prefill_s") * (1 + (F("latency_batch_sequences") - 1) / 2 * F("ttft_queue_fraction"))),
    Figure("request_running_s", "s", "a running request from its prompt to its last token: ttft_running_s +"
           " (output_tokens - 1) x tpot_s", F("ttft_running_s") + (F("workload_output_tokens") - 1) * F("tpot_s")),
    Figure("slot_wait_s", "s", "waiting for room in the KV pool when the concurrency is more than it holds:"
           " (concurrency / B - 1) x request_running_s",
           greatest(0, coalesce(I("concurrency"), 1) / F("latency_batch_sequences") - 1) * F("request_running_s")),
    Figure("ttft_ms", "ms", "time to first token: ttft_running_s + slot_wait_s",
           1000 * (F("ttft_running_s") + F("slot_wait_s"))),
    Figure("tpot_ms", "ms", "time per output token (after the first)", 1000 * F("tpot_s")),
    Figure("request_latency_s", "s", "a request from its prompt to its last token: ttft + (output_tokens - 1) x"
           " tpot", F("ttft_ms") / 1000 + (F("workload_output_tokens") - 1) * F("tpot_s")),
    Figure("output_tokens_per_s_per_gpu", "tokens/s", "tokens the replica generates per second / its GPUs:"
           " concurrency x output_tokens / request_latency_s / (TP x PP)",
           coalesce(I("concurrency"), 1) * F("workload_output_tokens") / F("request_latency_s") / (I("tp") * I("pp"))),
    Figure("total_tokens_per_s_per_gpu", "tokens/s", "prompt and generated tokens per second / its GPUs",
           coalesce(I("concurrency"), 1) * (F("workload_input_tokens") + F("workload_output_tokens")) / F("request_latency_s")
           / (I("tp") * I("pp"))),
    # ---- service-level objectives
    Figure("ttft_queue_allowance", "prompts", "prompts that may queue ahead of a new one within the ttft target:"
           " (ttft_target_ms / 1000 - request_overhead_s - prefill_eager_s) / prefill_s - 1",
           (F("workload_ttft_target_ms") / 1000 - F("request_overhead_s") - F("prefill_eager_s")) / F("prefill_s") - 1),
    # The reach is its own figure so the limit reads it once: inlined twice, ttft's workbook formula passed
    # Excel's 8,192 characters.
    Figure("tpot_concurrency_reach", "requests", "the most requests a replica runs with tpot within"
           " tpot_target_ms, 1,000,000,000 when every concurrency does (NULL: no target)",
           if_(isnull(F("workload_tpot_target_ms")), Const(None), _tpot_limit())),
    Figure("ttft_concurrency_reach", "requests", "the most requests a replica runs with ttft within"
           " ttft_target_ms, the KV pool not full; 1,000,000,000 when every concurrency does (NULL: no target)",
           if_(isnull(F("workload_ttft_target_ms")), Const(None), _ttft_limit())),
    Figure("tpot_concurrency_limit", "requests", "tpot_concurrency_reach, NULL when every concurrency meets the"
           " target (no limit) or there is none", _limit_or_none(F("tpot_concurrency_reach"))),
    Figure("ttft_concurrency_limit", "requests", "ttft_concurrency_reach, NULL when every concurrency meets the"
           " target (no limit) or there is none", _limit_or_none(F("ttft_concurrency_reach"))),
    Figure("latency_concurrency_limit", "requests", "the most whole requests within both targets (NULL: no target,"
           " or every concurrency meets them)",
           floor(least(F("tpot_concurrency_limit"), F("ttft_concurrency_limit"))), "int"),
    Figure("max_concurrency_within_slo", "requests", "requests one replica serves within the targets and its KV"
           " pool: the smaller of whole_sequences (memory) and latency_concurrency_limit; NULL without a target",
           if_(_no_target(), Const(None),
               if_(F("fits"), least(F("whole_sequences"), F("latency_concurrency_limit")), 0)), "int"),
    Figure("binding_constraint", "name", "what limits max_concurrency_within_slo: memory (the KV pool) or latency"
           " (a target)", if_(_no_target(), Const(None), _binds(F("whole_sequences"))), "text"),
]
_FIGURES += _LATENCY_FIGURES

FIGURES: dict[str, Figure] = {}
for _f in _FIGURES:
    assert _f.name not in FIGURES and _f.name not in INPUTS, _f.name
    FIGURES[_f.name] = _f


_DEPENDENCIES: dict[str, tuple[Figure, frozenset[str]]] = {}  # name -> (the figure, its inputs), worked out once


def dependencies(name: str, _seen: frozenset = frozenset()) -> set[str]:
    """All inputs a figure depends on, through other figures. Each figure's set is kept: walked
    afresh, every path through the latency figures was followed again (50 s for plan_capacity's)."""
    if name in INPUTS:
        return {name}
    known = _DEPENDENCIES.get(name)
    if known is not None and known[0] is FIGURES[name]:  # a test may swap a figure for another
        return set(known[1])
    if name in _seen:
        raise ValueError(f"figure {name} depends on itself")
    e = FIGURES[name].expr
    out = set(names(e, (Input,)))
    for ref in names(e, (Ref,)):
        out |= dependencies(ref, _seen | {name})
    _DEPENDENCIES[name] = (FIGURES[name], frozenset(out))
    return out


# --------------------------------------------------------------------------- procurement aggregates


@dataclass(frozen=True)
class Aggregate:
    """A figure per GPU type and quarter: a sum (or count) over the rows in force in that quarter,
    or an expression over other aggregates and the GPU's inputs.

    Rows in force: a demand entry (the plan_quarter view, one row per `demand set`) or a fleet
    entry (fleet_quarter) holds from its quarter until the next entry of the same plan (GPU type):
    the latest entry at or before the quarter (carry-forward; a demand of 0 ends a plan's demand).
    `quarter="previous"` takes the rows in force in the quarter before: the one declared notion of
    "previous quarter". kvreg.figures.aggregates compiles these to SQL GROUP BY and to SUMIFS.

    `running="max"`: the largest value of the aggregate `of` over the horizon's quarters up to this
    one (`quarter="previous"`: before this one; 0 in the horizon's first quarter), per GPU type: GPUs
    bought stay bought. SQL: a MAX window over the horizon's rows; Excel: the largest of a per-quarter
    block of the same aggregate.

    `unknown_without`: a GPU input the summed figure is a multiple of (price_per_hour for a cost): when the GPU
    type leaves it blank the sum is blank (unknown), as capex_to_buy is without a unit_price, never a sum of 0
    over figures that are each blank.
    """

    name: str
    unit: str
    meaning: str
    kind: str = "int"  # int | real
    over: str = ""  # "demand" | "fleet": summed over those rows; "" an expression
    of: str | None = None  # the column summed; None: the rows are counted
    where: tuple[tuple[str, str, object], ...] = ()  # (column, "=" or ">", number): only such rows
    quarter: str = "this"  # "this" | "previous"
    expr: Expr | None = None  # Ref(name): another aggregate; Input(name): a GPU input
    running: str = ""  # "max": the running largest of the aggregate `of` over the horizon
    unknown_without: str = ""  # a GPU input whose blank makes the sum blank (a cost without a price)


_LIVE = (("users", ">", 0),)  # a plan whose demand is 0 has ended: it is not counted

_AGGREGATES = [
    Aggregate("plans", "count", "plans with demand (more than 0 users) in force on this GPU type", over="demand",
              where=_LIVE),
    # users_per_replica is 0 exactly when the plan does not fit (workload_concurrency 0) or no replica meets its
    # latency target with one request (latency_concurrency_limit 0): either way it has no replicas to count.
    Aggregate("plans_not_fitting", "count", "of those, plans that serve no user (users_per_replica 0): they do not"
              " fit, or no replica meets their latency target even with one request (their GPUs are not counted)",
              over="demand", where=_LIVE + (("users_per_replica", "=", 0),)),
    Aggregate("users", "users", "concurrent users to serve: the plans' demand in force", over="demand", of="users"),
    Aggregate("gpus_needed", "GPUs", "GPUs the plans need (their replicas x TP x PP)", over="demand",
              of="gpus_needed"),
    Aggregate("nodes_needed", "nodes", "nodes to house the plans' replicas", over="demand", of="nodes_needed"),
    Aggregate("cost_per_month", "USD", "rental cost per month of the GPUs in use: gpus_needed x price_per_hour x 730"
              " (blank when the GPU type has no price_per_hour)", "real", over="demand", of="cost_per_month",
              unknown_without="price_per_hour"),
    Aggregate("gpus_owned", "GPUs", "GPUs owned (the fleet entry in force)", over="fleet", of="gpus_owned"),
    Aggregate("gpus_reserved", "GPUs", "committed or reserved cloud GPUs (the fleet entry in force)", over="fleet",
              of="gpus_reserved"),
    Aggregate("reserved_price_per_hour", "USD/h", "price per reserved GPU-hour (the fleet entry in force)", "real",
              over="fleet", of="reserved_price_per_hour"),
    Aggregate("gpus_installed", "GPUs", "GPUs installed: owned + reserved",
              expr=Ref("gpus_owned") + Ref("gpus_reserved")),
    Aggregate("gpus_short", "GPUs", "the shortfall against the fleet alone: max(0, gpus_needed - gpus_installed)",
              expr=greatest(0, Ref("gpus_needed") - Ref("gpus_installed"))),
    Aggregate("gpus_bought", "GPUs", "GPUs bought in the horizon up to this quarter: the largest gpus_short so far"
              " (GPUs bought stay bought)", over="schedule", of="gpus_short", running="max"),
    Aggregate("previous_gpus_bought", "GPUs", "GPUs bought in the horizon before this quarter (0 in its first)",
              over="schedule", of="gpus_short", running="max", quarter="previous"),
    Aggregate("gpus_to_buy", "GPUs", "the purchase landing this quarter: gpus_bought - previous_gpus_bought, the"
              " increment beyond the fleet and the horizon's earlier purchases",
              expr=Ref("gpus_bought") - Ref("previous_gpus_bought")),
    Aggregate("capex_to_buy", "USD", "the purchase's cost: gpus_to_buy x unit_price", "real",
              expr=Ref("gpus_to_buy") * Input("unit_price")),
    Aggregate("gpus_bought_whole_nodes", "GPUs", "gpus_bought rounded up to whole nodes of node_gpus",
              expr=ceil(Ref("gpus_bought") / Input("node_gpus")) * Input("node_gpus")),
    Aggregate("gpus_to_buy_whole_nodes", "GPUs", "the purchase landing this quarter in whole nodes:"
              " gpus_bought_whole_nodes less the same rounding of previous_gpus_bought",
              expr=Ref("gpus_bought_whole_nodes") - ceil(Ref("previous_gpus_bought") / Input("node_gpus"))
              * Input("node_gpus")),
    Aggregate("capex_to_buy_whole_nodes", "USD", "the whole-node purchase's cost: gpus_to_buy_whole_nodes x"
              " unit_price", "real", expr=Ref("gpus_to_buy_whole_nodes") * Input("unit_price")),
    Aggregate("order_by_index", "quarter index", "the quarter the purchase must be ordered in (YEAR x 4 + quarter"
              " - 1): this quarter less lead_time_quarters; blank with nothing to buy",
              expr=if_(Ref("gpus_to_buy") > 0, Input("quarter_index") - Input("lead_time_quarters"), None)),
    Aggregate("order_late", "flag", "1 when the purchase's order-by quarter is before the horizon's first quarter:"
              " too late to land it in time", expr=if_(and_(Ref("gpus_to_buy") > 0, Input("quarter_index")
              - Input("lead_time_quarters") < Input("horizon_start_index")), 1, 0)),
    Aggregate("order_by_index_whole_nodes", "quarter index", "order_by_index of the whole-node purchase",
              expr=if_(Ref("gpus_to_buy_whole_nodes") > 0, Input("quarter_index") - Input("lead_time_quarters"),
                       None)),
    Aggregate("order_late_whole_nodes", "flag", "order_late of the whole-node purchase",
              expr=if_(and_(Ref("gpus_to_buy_whole_nodes") > 0, Input("quarter_index") - Input("lead_time_quarters")
                            < Input("horizon_start_index")), 1, 0)),
    Aggregate("gpus_spare", "GPUs", "installed GPUs no plan needs: max(0, gpus_installed - gpus_needed)",
              expr=greatest(0, Ref("gpus_installed") - Ref("gpus_needed"))),
    Aggregate("reserved_cost_per_month", "USD", "cost per month of the reserved GPUs: gpus_reserved x"
              f" reserved_price_per_hour x {HOURS_PER_MONTH}", "real",
              expr=Ref("gpus_reserved") * Ref("reserved_price_per_hour") * HOURS_PER_MONTH),
    Aggregate("previous_quarter_gpus_needed", "GPUs", "gpus_needed in the quarter before", over="demand",
              of="gpus_needed", quarter="previous"),
    Aggregate("gpus_needed_quarter_change", "GPUs", "gpus_needed - previous_quarter_gpus_needed (quarter over quarter)",
              expr=Ref("gpus_needed") - Ref("previous_quarter_gpus_needed")),
]

AGGREGATES: dict[str, Aggregate] = {}
for _a in _AGGREGATES:
    assert _a.name not in AGGREGATES, _a.name
    AGGREGATES[_a.name] = _a
# The GPU type's own inputs an aggregate expression reads.
AGGREGATE_GPU_INPUTS = ("unit_price", "price_per_hour", "lead_time_quarters", "node_gpus")
# The axis's own columns an aggregate expression reads: the quarter's index and the horizon's first.
AGGREGATE_AXIS_INPUTS = ("quarter_index", "horizon_start_index")
