"""Recurrent state per sequence of the linear layers (Mamba2, Gated DeltaNet, KDA, lightning attention, short
convolution): its elements, the part that is conv state, the heads it shards by, and its dtype, as vLLM's
MambaStateShapeCalculator and MambaStateDtypeCalculator size them."""

from __future__ import annotations

from .attention import head_width
from .config import HEAD_KEYS, HIDDEN_KEYS, Config, ConfigError, Findings, show_value, whole_number
from .dtypes import TORCH_DTYPES, WEIGHT_BYTES, model_dtype
from .layers import kda_config


def state_kind(cfg: Config) -> str:
    """Which recurrent layer the config's linear layers are: kda, lightning, short_conv, gdn or mamba2."""
    if cfg.raw("linear_attn_config")[0] is not None:
        return "kda"
    _, flags = cfg.raw("attn_type_list", "decoder_attention_types")
    if isinstance(flags, list) and 0 in flags:
        return "lightning"
    if cfg.model_type.startswith("minimax") and cfg.raw("linear_num_key_heads")[0] is None:
        # transformers' MiniMaxConfig (model_type minimax) spells the same layers layer_types "linear_attention"
        return "lightning"
    _, types = cfg.raw("layer_types")
    if (isinstance(types, list) and "conv" in types) or cfg.raw("full_attn_idxs")[0] is not None:
        return "short_conv"
    if cfg.raw("linear_num_key_heads")[0] is not None:
        return "gdn"
    if cfg.raw("mamba_num_heads")[0] is not None:
        return "mamba2"
    return ""


def _linear_state(cfg: Config) -> tuple[int, int, int]:
    """(state elements per sequence per linear layer, of which conv state, head count it shards by under TP);
    the rest is the recurrent state. Each shape is vLLM's MambaStateShapeCalculator's
    (vllm/model_executor/layers/mamba/mamba_utils.py) for that layer, at TP1."""
    kind = state_kind(cfg)
    if kind == "kda":
        # Kimi Delta Attention (kda_state_shape): a conv state over q, k and v of num_heads x head_dim channels
        # each, (short_conv_kernel_size - 1) deep, and one head_dim x head_dim matrix per head.
        kda = kda_config(cfg)
        heads = whole_number(kda.get("num_heads"), "linear_attn_config.num_heads", cfg.source)
        dim = whole_number(kda.get("head_dim"), "linear_attn_config.head_dim", cfg.source)
        kernel = whole_number(kda.get("short_conv_kernel_size"), "linear_attn_config.short_conv_kernel_size",
                              cfg.source, minimum=2)
        conv = 3 * heads * dim * (kernel - 1)
        return conv + heads * dim * dim, conv, heads
    if kind == "lightning":
        # MiniMax lightning attention (linear_attention_state_shape): num_attention_heads x head_dim x head_dim,
        # no conv state; vLLM's minimax_text_01.py passes num_attention_heads and head_dim.
        heads = cfg.count(HEAD_KEYS, "attention head count")
        dim = head_width(cfg, heads)
        return heads * dim * dim, 0, heads
    if kind == "short_conv":
        # LFM2 short convolution (short_conv_state_shape): hidden_size channels, conv_L_cache - 1 deep, sharded
        # over TP by channel (vLLM's lfm2.py passes hidden_size; transformers' Lfm2Config defaults conv_L_cache to 3)
        hidden = cfg.count(HIDDEN_KEYS, "hidden size (the short convolution's channels)")
        key, cache = cfg.raw("conv_L_cache")
        depth = 3 if key is None else whole_number(cache, key, cfg.source, minimum=2)
        conv = hidden * (depth - 1)
        return conv, conv, hidden
    if kind == "gdn":
        # Gated DeltaNet (Qwen3-Next): conv state over q, k, v channels + one k x v matrix per value head.
        k_heads = cfg.count(("linear_num_key_heads",), "linear key heads")
        v_heads = cfg.count(("linear_num_value_heads",), "linear value heads")
        k_dim = cfg.count(("linear_key_head_dim",), "linear key head width")
        v_dim = cfg.count(("linear_value_head_dim",), "linear value head width")
        kernel = cfg.count(("linear_conv_kernel_dim",), "linear conv kernel size")
        conv = (2 * k_heads * k_dim + v_heads * v_dim) * (kernel - 1)
        return conv + v_heads * k_dim * v_dim, conv, k_heads
    if kind == "mamba2":
        # Mamba2 (Nemotron-H): conv state over x, B, C channels + SSM state heads x head_dim x state.
        heads = cfg.count(("mamba_num_heads",), "Mamba heads")
        head_dim = cfg.count(("mamba_head_dim",), "Mamba head width")
        state = cfg.count(("ssm_state_size",), "Mamba state size")
        groups = cfg.count(("n_groups",), "Mamba group count")
        kernel = cfg.count(("conv_kernel",), "Mamba conv kernel size")
        conv = (kernel - 1) * (heads * head_dim + 2 * groups * state)
        return conv + heads * head_dim * state, conv, heads
    raise ConfigError(
        f"{cfg.source}: has linear/state layers but no state shape kvreg can read (Gated DeltaNet "
        "linear_num_key_heads..., Mamba2 mamba_num_heads..., Kimi-Linear linear_attn_config, MiniMax attn_type_list "
        "or LFM2 conv layers); enter this model by hand"
    )


def linear_fields(cfg: Config, linear_layers: int, findings: Findings) -> dict:
    """The state shape and dtype. vLLM keeps the recurrent (SSM) state in the config's mamba_ssm_cache_dtype
    (Nemotron-H) or mamba_ssm_dtype (Qwen3.5) and the conv state in the model dtype. The row holds one
    state dtype, so when the two differ the conv elements are counted in units of the state dtype's
    bytes (conv x its bytes / state bytes): the bytes per sequence come out exact."""
    elements = recurrent = heads = dtype = None
    if linear_layers:
        elements, conv, heads = _linear_state(cfg)
        recurrent = elements - conv
        key, value = cfg.raw("mamba_ssm_cache_dtype", "mamba_ssm_dtype")
        if state_kind(cfg) == "kda":
            # vLLM's MambaStateDtypeCalculator.kda_state_dtype returns (model dtype, torch.float32): the recurrent
            # state is float32 whatever the model dtype, the conv state in the model dtype.
            key, value = "kda_state_dtype", "float32"
        elif state_kind(cfg) in ("lightning", "short_conv"):
            # vLLM's linear_attention_state_dtype and short_conv_state_dtype: one tensor in the model dtype
            # (--mamba-cache-dtype auto), no separate SSM dtype; not split (SGLang's float32 SSM rule does not apply)
            key, recurrent = None, None
        if key is not None and value != "auto":
            dtype = TORCH_DTYPES.get(value) if isinstance(value, str) else None  # lists are unhashable
            if dtype is None:
                raise ConfigError(
                    f"{cfg.source}: {key} {show_value(value)} is not one of "
                    f"{', '.join(sorted(TORCH_DTYPES))} or auto; fix the config"
                )
            model = model_dtype(cfg)
            if WEIGHT_BYTES[model] != WEIGHT_BYTES[dtype]:
                scaled = conv * WEIGHT_BYTES[model] / WEIGHT_BYTES[dtype]
                if scaled.is_integer():
                    elements = elements - conv + int(scaled)
                    findings.note(
                        f"recurrent state in {dtype} ({key}), conv state in the model dtype {model}: the "
                        f"{conv:,} conv elements per layer count as {int(scaled):,} {dtype} elements "
                        f"(linear_state_elements_per_layer {elements:,})"
                    )
    kind = {"gdn": "gated_deltanet"}.get(state_kind(cfg), state_kind(cfg)) if linear_layers else None
    return {"linear_state_elements_per_layer": elements, "linear_recurrent_elements_per_layer": recurrent,
            "linear_state_heads": heads, "linear_state_dtype": dtype, "linear_state_kind": kind or None}
