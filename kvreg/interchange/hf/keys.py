"""Key accounting: which of a config's keys could shape the KV cache, which the importer reads, which it knows
to be inert, and the refusal (or, with --accept-unknown, the warning) for any other; `kvreg model check` lists the
first two."""

from __future__ import annotations

import re
from typing import Any

from .config import Config, ConfigError, Findings, show_value


# Keys whose names say they could shape the cache (heads, head widths, windows, layer kinds, KV sharing,
# state dtypes). Each one the importer meets must be read (_UNDERSTOOD) or known not to touch the cache
# (_HARMLESS); any other stops the import with the key named (--accept-unknown: a warning).
_CACHE_HINT = re.compile(
    r"heads?($|_)|head_dim|(^|_)kv($|_)|window|(?<!mlp_)layer_types|layers_block_type|block_config|(^|_)swa($|_)"
    r"|(^|_)global_|kv_shared|k_eq_v|cache_dtype|ssm_dtype|attn_type|sparse_attention|linear_attn|(^|_)sinks?($|_)|sink_tok"
    r"|(^|_)cla($|_)|compress_ratio|indexer_types|attention_types|full_attn|conv_l_cache"
, re.IGNORECASE)
_UNDERSTOOD = {
    "num_attention_heads", "n_head", "n_heads", "num_heads", "num_key_value_heads", "n_head_kv", "num_kv_heads", "head_dim", "kv_channels",
    "attention_head_dim", "v_head_dim", "qk_nope_head_dim", "qk_rope_head_dim", "qk_head_dim", "kv_lora_rank",
    "sliding_window", "sliding_window_size", "sliding_window_pattern", "use_sliding_window", "max_window_layers",
    "layer_types", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "mamba_num_heads", "mamba_head_dim", "mamba_ssm_cache_dtype", "mamba_ssm_dtype", "num_global_key_value_heads",
    "global_head_dim", "attention_k_eq_v", "num_kv_shared_layers", "block_configs", "index_head_dim",
    "multi_query_group_num", "layers_block_type",
    # MiniMax-Text-01 / M1: 0 lightning (linear) attention, 1 softmax attention per layer (vLLM also reads the
    # older spelling decoder_attention_types)
    "attn_type_list", "decoder_attention_types",
    # Kimi-Linear: KDA layers, MLA layers and the KDA state's shape (read by kda_config)
    "linear_attn_config",
    # Laguna: query heads per layer; the cache takes num_key_value_heads, one count for every layer
    "num_attention_heads_per_layer",
    # DeciLM-7B (and Laguna's config class): kv heads per layer, read as groups of layers (kv_head_groups)
    "num_key_value_heads_per_layer",
    # GLM-5.2: "full" layers keep their own sparse-attention indexer, "shared" ones reuse the last full one's
    "indexer_types",
    "full_attn_idxs", "conv_L_cache",  # LFM2: its attention layers (configs before layer_types), conv state length
}
_HARMLESS = {
    "pruned_heads",  # transformers' bookkeeping of removed heads, empty in released checkpoints
    "num_reward_heads",  # reward-model output heads, not attention
    "index_n_heads",  # DeepSeek-V3.2 indexer query heads: its cache is one key (index_head_dim) per token
    "use_unified_vision_chunk",
    # Hunyuan's cross-layer attention share factor: read only when use_cla is on, and use_cla (caught by
    # the hint) stops the import.
    "cla_share_factor",
    "mtp_layers_block_type",  # the multi-token-prediction head's blocks, loaded only for speculative decoding
    "swa_rope_theta",  # MiMo-V2-Flash: the sliding layers' RoPE base
    "add_swa_attention_sink_bias",  # MiMo-V2-Flash: a learned per-head sink logit, no cached tokens
    "index_share_for_mtp_iteration",  # GLM-5.2: the MTP head reuses the indexer's top-k, no cache of its own
}


_SWA_KEYS = ("swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim", "swa_num_attention_heads")


# linear_attn_config keys: read, or known not to change the cache (the gate's parametrisation).
KDA_READ = {"kda_layers", "full_attn_layers", "num_heads", "head_dim", "short_conv_kernel_size"}
KDA_HARMLESS = {"gate_lower_bound", "use_full_rank_gate", "use_kda_lora", "kda_use_qk_l2norm_in_kernel"}


def unknown_key(cfg: Config, findings: Findings, accept_unknown: bool, key: str, value: Any) -> None:
    """A key that could change the cache and that kvreg does not read: an error, or with --accept-unknown a warning."""
    if accept_unknown:
        findings.warn(f"{key} = {show_value(value)} not understood and ignored (--accept-unknown): "
                      "the KV figures may be wrong for this model")
        return
    raise ConfigError(
        f"{cfg.source}: {key} = {show_value(value)} could change the KV cache and kvreg does not understand it; "
        "enter this model by hand, or pass --accept-unknown to import it without that key"
    )


def check_unknown_keys(cfg: Config, findings: Findings, accept_unknown: bool) -> None:
    """Stop at any key whose name says it could shape the cache and that kvreg neither reads nor knows to be inert."""
    for key, value in cfg.items():
        if key in _UNDERSTOOD:
            findings.read.append(key)
            continue
        if key in _HARMLESS:
            findings.ignored.append(key)
            continue
        if not _CACHE_HINT.search(key):
            continue
        if key in _SWA_KEYS and isinstance(cfg.raw("hybrid_layer_pattern")[1], list):
            findings.read.append(key)
            continue  # MiMo-V2-Flash's sliding layers, read by _swa_heads
        if value is None or value is False or value == 0 or value == [] or value == {}:
            findings.ignored.append(f"{key} (switched off)")
            continue  # switched off: no effect on the cache
        unknown_key(cfg, findings, accept_unknown, key, value)
