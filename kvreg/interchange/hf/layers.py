"""Layer kinds: one kind per layer (full, sliding, chunked, linear, or none) from every spelling the engines
accept (layer_types, layers_block_type, hybrid_override_pattern, attn_type_list, linear_attn_config,
block_configs...), and the counts per kind the row keeps."""

from __future__ import annotations

from dataclasses import dataclass

from .config import (
    HIDDEN_KEYS, MAX_TOKENS, WINDOW_KEYS, Config, ConfigError, Findings, json_type, show_value, whole_number,
)
from .keys import KDA_HARMLESS, KDA_READ, unknown_key


# layer_types entries -> our layer kinds.
_LAYER_TYPE_KINDS = {
    "full_attention": "full", "attention": "full", "global_attention": "full",
    "sliding_attention": "sliding", "local_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear", "mamba": "linear", "mamba2": "linear",
    "conv": "linear",  # LFM2 / LFM2.5: a gated short convolution, a fixed conv state per sequence
    # GLM-5.2 in transformers 5 (nvidia/GLM-5.2-NVFP4): an MLA layer with a DeepSeek sparse-attention indexer
    "deepseek_sparse_attention": "full",
}


@dataclass
class Block:
    """One DeciLM (Nemotron-NAS) decoder layer: its cache kind and what its parameters are."""

    kind: str  # full, sliding or none (no-op attention, or a linear layer in place of attention)
    kv_heads: int | None
    window: int | None
    attention: str  # gqa, linear or none
    ffn: str  # mlp, linear or none
    ffn_width: int


_DECI_ATTENTION_READ = {"n_heads_in_group", "no_op", "replace_with_linear", "window_length"}
_DECI_ATTENTION_OFF = {"sparsify": None, "num_sink_tokens": None, "unshifted_sink": False,
                       "use_prefill_window_in_sink_attention": False}
_DECI_FFN_READ = {"ffn_mult", "no_op", "replace_with_linear", "sparsify"}


def decilm_ffn_width(ffn_mult: float, hidden: int) -> int:
    """DeciLM's MLP width: int(2 x ffn_mult x hidden / 3), rounded up to a multiple of 256 (as vLLM's
    nemotron_nas.py and the model's own code compute it)."""
    width = int(2 * ffn_mult * hidden / 3)
    return width if width % 256 == 0 else width + 256 - width % 256


def decilm_blocks(cfg: Config, layers: int, heads: int, findings: Findings, accept_unknown: bool) -> list[Block]:
    """Llama-Nemotron Super/Ultra: one entry per layer, each with its own attention and MLP."""
    _, blocks = cfg.raw("block_configs")
    if not isinstance(blocks, list) or len(blocks) != layers:
        size = f"{len(blocks)} entries" if isinstance(blocks, list) else f"a {json_type(blocks)}"
        raise ConfigError(f"{cfg.source}: block_configs has {size} but the model has {layers} layers; fix the config")
    hidden = cfg.count(HIDDEN_KEYS, "hidden size")
    out = []
    for i, block in enumerate(blocks):
        where = f"block_configs[{i}]"
        attention = block.get("attention") if isinstance(block, dict) else None
        ffn = block.get("ffn", {}) if isinstance(block, dict) else None
        if not isinstance(attention, dict) or not isinstance(ffn, dict):
            raise ConfigError(f"{cfg.source}: {where} needs an attention object and an ffn object; fix the config")
        for key, value in attention.items():
            if key in _DECI_ATTENTION_READ or (key in _DECI_ATTENTION_OFF and value == _DECI_ATTENTION_OFF[key]):
                continue
            unknown_key(cfg, findings, accept_unknown, f"{where}.attention.{key}", value)
        for key in ffn:
            if key not in _DECI_FFN_READ:
                findings.warn(f"{where}.ffn.{key} not understood: the parameter estimate ignores it")
        if attention.get("no_op") or attention.get("replace_with_linear"):
            kind, kv, window = "none", None, None
            how = "linear" if attention.get("replace_with_linear") and not attention.get("no_op") else "none"
        else:
            group = whole_number(attention.get("n_heads_in_group"), f"{where}.attention.n_heads_in_group", cfg.source)
            if heads % group:
                raise ConfigError(f"{cfg.source}: {where}.attention.n_heads_in_group = {group} does not divide the "
                                  f"{heads} attention heads; fix the config")
            kv, how = heads // group, "gqa"
            window = attention.get("window_length")
            kind = "full" if window is None else "sliding"
            if window is not None:
                window = whole_number(window, f"{where}.attention.window_length", cfg.source, maximum=MAX_TOKENS)
        if ffn.get("no_op"):
            ffn_kind, width = "none", 0
        elif ffn.get("replace_with_linear"):
            ffn_kind, width = "linear", 0
        else:
            mult = ffn.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult < 1000:
                raise ConfigError(f"{cfg.source}: {where}.ffn.ffn_mult is {show_value(mult)}, not a positive number; "
                                  "fix the config")
            ffn_kind, width = "mlp", decilm_ffn_width(mult, hidden)
        out.append(Block(kind, kv, window, how, ffn_kind, width))
    return out


def layer_kinds(cfg: Config, layers: int, findings: Findings, blocks: list[Block] | None = None) -> list[str]:
    """One kind per layer: 'full', 'sliding', 'chunked', 'linear', or 'none' (a layer holding no cache)."""
    kinds = attention_kinds(cfg, layers, findings, blocks)
    shared = cfg.count(("num_kv_shared_layers",), "KV-shared layers", required=False, minimum=0) or 0
    if shared:
        # Gemma 3n / 4: the last num_kv_shared_layers layers read the cache of an earlier layer of their kind.
        if shared >= len(kinds):
            raise ConfigError(f"{cfg.source}: num_kv_shared_layers = {shared} leaves no layer holding a cache "
                              f"({len(kinds)} layers); fix the config")
        kinds = kinds[: len(kinds) - shared] + ["none"] * shared
        findings.note(f"the last {shared} layers (num_kv_shared_layers) reuse earlier layers' KV cache and hold none")
    return kinds


def attention_kinds(cfg: Config, layers: int, findings: Findings, blocks: list[Block] | None) -> list[str]:
    if blocks is not None:
        none = sum(b.kind == "none" for b in blocks)
        if none:
            findings.note(f"{none} of {layers} block_configs layers have no attention (no_op or a linear layer "
                          "in its place) and hold no KV cache")
        return [b.kind for b in blocks]
    if cfg.raw("linear_attn_config")[0] is not None:
        return _kinds_from_kda_config(cfg, layers)
    if cfg.raw("attn_type_list", "decoder_attention_types")[0] is not None:
        return _kinds_from_attn_type_list(cfg, layers, findings)
    if cfg.raw("layer_types")[0] is not None:
        return _kinds_from_layer_types(cfg, layers)
    if cfg.raw("full_attn_idxs")[0] is not None:
        return _kinds_from_full_attn_idxs(cfg, layers)
    if hybrid_pattern(cfg) is not None:
        return _kinds_from_hybrid_pattern(cfg, layers, findings)
    if cfg.raw("hybrid_layer_pattern")[0] is not None:
        return _kinds_from_swa_flags(cfg, layers)
    interval = cfg.count(("full_attention_interval",), "full attention interval", required=False)
    if interval is not None:
        # Qwen3-Next: every interval-th layer is full attention, the rest Gated DeltaNet.
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(layers)]
    if cfg.raw("attention_chunk_size")[0] is not None:
        return _llama4_kinds(cfg, layers)
    key, pattern = cfg.raw("sliding_window_pattern")
    if isinstance(pattern, str):
        return _kinds_from_pattern_string(cfg, layers, pattern)
    pattern = cfg.count(("sliding_window_pattern",), "sliding window pattern", required=False)
    if pattern is not None and cfg.raw(*WINDOW_KEYS)[0] is None:
        return ["full"] * layers  # EXAONE 4 / Gemma 3 with sliding_window null: every layer attends fully
    if pattern is None and cfg.model_type == "gemma2":
        pattern = 2  # Gemma-2: even layers slide, odd layers are global (first-release configs)
    if pattern is not None:
        return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]
    use_sliding = cfg.flag("use_sliding_window")
    has_window = cfg.raw(*WINDOW_KEYS)[0] is not None
    if use_sliding is not None:
        # Qwen2 semantics: the window applies only when switched on, and only from max_window_layers up.
        if not (use_sliding and has_window):
            return ["full"] * layers
        first = cfg.count(("max_window_layers",), "first sliding layer", minimum=0)
        return ["full" if i < first else "sliding" for i in range(layers)]
    # Mistral style: a window with no per-layer description applies to every layer.
    if has_window:
        findings.note("sliding_window with no per-layer layout (layer_types, a pattern or use_sliding_window): "
                      "every layer slides, as Mistral's do")
    return ["sliding" if has_window else "full"] * layers


def _kinds_from_attn_type_list(cfg: Config, layers: int, findings: Findings) -> list[str]:
    """MiniMax-Text-01 / M1: attn_type_list gives each layer 0 (lightning attention, a linear-attention state per
    sequence) or 1 (softmax attention, a KV cache), as vLLM's minimax_text_01.py reads it (older configs:
    decoder_attention_types). MiniMax-M2.x lists 62 ones: every layer ordinary attention."""
    key, flags = cfg.raw("attn_type_list", "decoder_attention_types")
    if not isinstance(flags, list) or len(flags) != layers or any(f not in (0, 1) or isinstance(f, bool) for f in flags):
        raise ConfigError(f"{cfg.source}: {key} must list 0 (lightning attention) or 1 (softmax attention) for each "
                          f"of the {layers} layers; fix the config")
    if all(f == 1 for f in flags):
        findings.note(f"{key}: every layer 1 (softmax attention), read as full attention")
    else:
        findings.note(f"{key}: {flags.count(0)} lightning (linear) attention layers holding a state per sequence, "
                      f"{flags.count(1)} softmax attention layers holding a KV cache")
    return ["full" if f == 1 else "linear" for f in flags]


def kda_config(cfg: Config) -> dict:
    """Kimi-Linear's linear_attn_config, its keys checked: an unknown one that could shape the state stops the import
    (num_k_heads / head_k_dim would change the conv state vLLM's kda_state_shape sizes)."""
    key, value = cfg.raw("linear_attn_config")
    if not isinstance(value, dict):
        raise ConfigError(f"{cfg.source}: linear_attn_config is {show_value(value)}, not an object; fix the config")
    for inner in value:
        if inner not in KDA_READ and inner not in KDA_HARMLESS and value[inner] is not None:
            raise ConfigError(f"{cfg.source}: linear_attn_config.{inner} = {show_value(value[inner])} could change "
                              "the KDA state and kvreg does not understand it; enter this model by hand")
    return value


def _kinds_from_kda_config(cfg: Config, layers: int) -> list[str]:
    """Kimi-Linear: linear_attn_config.kda_layers and full_attn_layers number the layers from 1 (vLLM's
    KimiLinearConfig.is_kda_layer: ``layer_idx + 1 in kda_layers``); KDA layers keep a state, the others MLA."""
    kda = kda_config(cfg)
    sets = {}
    for name in ("kda_layers", "full_attn_layers"):
        ids = kda.get(name)
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ConfigError(f"{cfg.source}: linear_attn_config.{name} must list layer numbers; fix the config")
        sets[name] = set(ids)
    if sets["kda_layers"] & sets["full_attn_layers"] or sets["kda_layers"] | sets["full_attn_layers"] != set(
            range(1, layers + 1)):
        raise ConfigError(f"{cfg.source}: linear_attn_config.kda_layers and full_attn_layers must number each of the "
                          f"{layers} layers (from 1) exactly once; fix the config")
    return ["linear" if i + 1 in sets["kda_layers"] else "full" for i in range(layers)]


def _kinds_from_full_attn_idxs(cfg: Config, layers: int) -> list[str]:
    """LFM2's first configs: full_attn_idxs numbers the attention layers from 0; every other layer is a short
    convolution (transformers' and vLLM's Lfm2Config build layer_types so when it is absent)."""
    _, idxs = cfg.raw("full_attn_idxs")
    if not isinstance(idxs, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers
                                             for i in idxs):
        raise ConfigError(f"{cfg.source}: full_attn_idxs must list layer numbers from 0 to {layers - 1}; fix the config")
    return ["full" if i in idxs else "linear" for i in range(layers)]


def _kinds_from_swa_flags(cfg: Config, layers: int) -> list[str]:
    """MiMo-V2-Flash: hybrid_layer_pattern lists 1 for a sliding-window layer (its own swa_* heads, a window of
    sliding_window_size) and 0 for a full-attention layer, as vLLM's mimo_v2_flash.py reads it."""
    _, flags = cfg.raw("hybrid_layer_pattern")
    if not isinstance(flags, list) or len(flags) != layers or any(f not in (0, 1) or f is True or f is False
                                                                  for f in flags):
        raise ConfigError(f"{cfg.source}: hybrid_layer_pattern must list 0 (full) or 1 (sliding) for each of the "
                          f"{layers} layers; fix the config")
    return ["sliding" if f == 1 else "full" for f in flags]


def _kinds_from_pattern_string(cfg: Config, layers: int, pattern: str) -> list[str]:
    """EXAONE 4: sliding_window_pattern "LLLG" repeats over the layers, L local (sliding), G global, and
    the last layer is global whatever the pattern says there (Exaone4Config's check_is_sliding:
    ``layer_idx != num_hidden_layers - 1 and pattern[layer_idx % len(pattern)] == "L"``)."""
    if not pattern or set(pattern) - set("LG"):
        raise ConfigError(f"{cfg.source}: sliding_window_pattern {show_value(pattern)} is not a string of L (local) "
                          "and G (global) layers; fix the config")
    if cfg.raw(*WINDOW_KEYS)[0] is None:
        return ["full"] * layers
    return ["sliding" if i != layers - 1 and pattern[i % len(pattern)] == "L" else "full" for i in range(layers)]


def _kinds_from_layer_types(cfg: Config, layers: int) -> list[str]:
    _, types = cfg.raw("layer_types")
    if not isinstance(types, list) or len(types) != layers:
        size = f"{len(types)} entries" if isinstance(types, list) else f"a {json_type(types)}"
        raise ConfigError(f"{cfg.source}: layer_types has {size} but the model has {layers} layers; fix the config")
    unknown = [t for t in types if not isinstance(t, str) or t not in _LAYER_TYPE_KINDS]
    if unknown:
        raise ConfigError(
            f"{cfg.source}: layer_types entry {show_value(unknown[0])} is not a layer kind kvreg knows "
            f"({', '.join(sorted(_LAYER_TYPE_KINDS))}); enter this model by hand"
        )
    return [_LAYER_TYPE_KINDS[t] for t in types]


_BLOCK_TYPES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def hybrid_pattern(cfg: Config) -> str | None:
    """Nemotron-H's block pattern: hybrid_override_pattern, or newer configs' layers_block_type list
    ("mamba", "attention", "mlp", "moe") written as the same characters."""
    key, value = cfg.raw("hybrid_override_pattern", "layers_block_type")
    if key == "layers_block_type":
        if not isinstance(value, list) or not all(isinstance(v, str) and v in _BLOCK_TYPES for v in value):
            raise ConfigError(f"{cfg.source}: layers_block_type must list {', '.join(_BLOCK_TYPES)} blocks; "
                              "an unknown block type could change the cache: enter this model by hand")
        return "".join(_BLOCK_TYPES[v] for v in value)
    return value


def _kinds_from_hybrid_pattern(cfg: Config, layers: int, findings: Findings) -> list[str]:
    """Nemotron-H: 'M' Mamba2, '*' attention, '-' MLP and 'E' MoE blocks, one character per block."""
    pattern = hybrid_pattern(cfg)
    if not isinstance(pattern, str) or len(pattern) != layers or set(pattern) - set("M*-E"):
        raise ConfigError(
            f"{cfg.source}: hybrid_override_pattern must be {layers} characters of M, *, - or E; fix the config"
        )
    kinds = ["linear" if c == "M" else "full" if c == "*" else "none" for c in pattern]
    findings.note(
        f"{kinds.count('none')} of {layers} hybrid_override_pattern blocks are MLP/MoE-only and hold no "
        f"cache (no_cache_layers); layers counts the {layers - kinds.count('none')} attention and Mamba blocks"
    )
    return kinds


def _llama4_kinds(cfg: Config, layers: int) -> list[str]:
    """Llama 4: RoPE layers use chunked attention, NoPE layers (every 4th by default) attend fully."""
    _, no_rope = cfg.raw("no_rope_layers")
    if no_rope is None:
        every = cfg.count(("no_rope_layer_interval",), "NoPE layer interval", required=False) or 4
        # transformers' Llama4TextConfig default: 1 (= uses RoPE) except every `every`-th layer.
        no_rope = [int((i + 1) % every != 0) for i in range(layers)]
    if not isinstance(no_rope, list) or len(no_rope) != layers or any(v not in (0, 1) for v in no_rope):
        raise ConfigError(f"{cfg.source}: no_rope_layers must list 0 or 1 for each of the {layers} layers; fix the config")
    return ["chunked" if uses_rope else "full" for uses_rope in no_rope]


def layout_counts(cfg: Config, kinds: list[str], blocks: list[Block] | None = None) -> dict:
    """Counts per kind, plus the window / chunk size where such layers exist (else NULL)."""
    sliding, chunked = kinds.count("sliding"), kinds.count("chunked")
    window = chunk = None
    if sliding and blocks is not None:
        windows = {b.window for b in blocks if b.kind == "sliding"}
        if len(windows) > 1:
            raise ConfigError(f"{cfg.source}: block_configs give the sliding layers different window_length values "
                              f"({', '.join(map(str, sorted(windows)))}); kvreg keeps one window: enter this model by hand")
        window = windows.pop()
    elif sliding:
        window = cfg.count(WINDOW_KEYS, "sliding window size for the sliding layers", maximum=MAX_TOKENS)
    if chunked:
        chunk = cfg.count(("attention_chunk_size",), "chunk size for the chunked layers", maximum=MAX_TOKENS)
    return {
        "layers": len(kinds) - kinds.count("none"), "full_layers": kinds.count("full"),
        "sliding_layers": sliding, "sliding_window": window,
        "chunked_layers": chunked, "attention_chunk_size": chunk,
        "linear_layers": kinds.count("linear"), "no_cache_layers": kinds.count("none"),
    }
