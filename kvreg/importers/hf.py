"""Read a Hugging Face ``config.json`` into a model row (the columns of ``kvreg.db.tables.Model``).

Pure functions: no database, no network, no ``transformers``. The family defaults that matter
for memory (Falcon's kv heads and context, Gemma-2's alternating windows, Llama 4's chunked
layers, Qwen2's ``max_window_layers``) are written out here, each next to the rule it follows.

Every problem is a :class:`ConfigError` whose message is one line: the file, what is wrong, and
what to do. Anything the importer had to assume is returned as a warning and kept in ``notes``.

Parameter counts, in order of preference (``import_path``):
1. ``params_b`` given by the user (billions);
2. ``model.safetensors.index.json`` next to ``config.json``: ``metadata.total_size`` bytes divided
   by the bytes per parameter of the native weight dtype. For mixed checkpoints (fp8 linears with
   bf16 embeddings and fp32 scales) this is not the exact count, but params x weight bytes then
   equals the checkpoint's size on disk, which is what the weights occupy in GPU memory;
3. an estimate from the config (embeddings + attention + MLP; MoE: all experts in
   ``params_total``, the routed top-k plus shared experts in ``params_active``), with a warning.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import pathlib
from dataclasses import dataclass, field
from typing import Any

MAX_CONFIG_BYTES = 10_000_000  # real config.json files are a few KB; 10 MB is surely not one
# A safetensors index lists every tensor: ~9 MB for a 1T-param MoE. A 20 MB one (261,052 tensors)
# imports with a 155 MB peak (a 97 MB one took 1.4 GB).
MAX_INDEX_BYTES = 20_000_000
MAX_JSON_DEPTH = 64  # real configs nest 3-4 levels
MAX_COUNT = 1_000_000  # layers, heads, widths: anything larger is a typo or an attack
MAX_TOKENS = 1_000_000_000  # context lengths and windows (Llama 4 Scout claims 10,485,760)

INDEX_FILE = "model.safetensors.index.json"

# Bytes per parameter of each weight dtype; mirrors kvreg/catalog/dtypes.toml (no DB access here).
WEIGHT_BYTES = {
    "fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0,
    "int4": 0.5, "fp4": 0.5, "nvfp4": 0.5625,
}
_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}

_LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer")
_HEAD_KEYS = ("num_attention_heads", "n_head")
_KV_HEAD_KEYS = ("num_key_value_heads", "n_head_kv", "num_kv_heads")
_HEAD_DIM_KEYS = ("head_dim", "kv_channels", "attention_head_dim")
_HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model")
_MAX_POS_KEYS = ("max_position_embeddings", "seq_length", "n_positions")
_WINDOW_KEYS = ("sliding_window", "sliding_window_size")

_FALCON_FAMILIES = {"falcon", "RefinedWeb", "RefinedWebModel"}
FALCON_CONTEXT = 2048  # the context Falcon-7B/40B were trained with; their first configs omit it
# Families whose MLP is up/down only (2 matrices); every other family is gated (3 matrices).
_PLAIN_MLP_FAMILIES = _FALCON_FAMILIES | {"gpt2", "gpt_neox", "gptj", "gpt_bigcode", "bloom", "opt", "phi", "mpt"}

# layer_types entries -> our layer kinds.
_LAYER_TYPE_KINDS = {
    "full_attention": "full", "attention": "full", "global_attention": "full",
    "sliding_attention": "sliding", "local_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear", "mamba": "linear", "mamba2": "linear",
}


class ConfigError(ValueError):
    """A config that cannot be imported; the one-line message names the file, the problem and the fix."""

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))  # one line, whatever was interpolated


# ------------------------------------------------------------------------------------ reading


def read_config(path_or_text: str | bytes | pathlib.Path, *, source_name: str | None = None) -> tuple[dict, str, str]:
    """Parse a config and return ``(config, source file name, sha256 hex of the raw bytes)``.

    ``bytes`` are the file's content; a ``pathlib.Path`` is a file; a ``str`` is JSON text when
    it starts with ``{`` or ``[`` (after blanks), else a file path.
    """
    if isinstance(path_or_text, bytes):
        raw, source = path_or_text, source_name or "stdin"
    elif isinstance(path_or_text, str) and path_or_text.lstrip()[:1] in ("{", "["):
        raw, source = path_or_text.encode("utf-8"), source_name or "stdin"
    else:
        path = pathlib.Path(path_or_text)
        source = source_name or path.name
        raw = _read_file(path, source)
    return _parse(raw, source), source, hashlib.sha256(raw).hexdigest()


def _read_file(path: pathlib.Path, source: str, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The file's bytes, at most ``limit + 1`` of them (so /dev/zero or a weights file cannot exhaust memory)."""
    if not path.exists():
        raise ConfigError(f"{path}: no such file; give the path of a config.json or of the model folder holding it")
    if not path.is_file():
        raise ConfigError(f"{path}: not a regular file; give the path of a config.json")
    with path.open("rb") as fh:
        return fh.read(limit + 1)


def _parse(raw: bytes, source: str, limit: int = MAX_CONFIG_BYTES) -> dict:
    """JSON object from raw bytes, with one-line errors for every way it can go wrong."""
    if len(raw) > limit:
        raise ConfigError(
            f"{source}: larger than {limit // 1_000_000} MB, too big for a model's JSON metadata; "
            "pass the model's config.json, not a weights or data file"
        )
    try:
        config = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not UTF-8 text; pass the model's config.json") from None
    except RecursionError:
        raise ConfigError(f"{source}: JSON nested too deeply to be a config; pass the model's config.json") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); pass the model's config.json"
        ) from None
    if not isinstance(config, dict):
        raise ConfigError(
            f"{source}: JSON is a {_json_type(config)}, not an object; a config.json is one JSON object {{...}}"
        )
    if _json_depth(config) > MAX_JSON_DEPTH:
        raise ConfigError(
            f"{source}: JSON nested more than {MAX_JSON_DEPTH} levels deep, too deep to be a config; "
            "pass the model's config.json"
        )
    return config


def _json_type(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), "null")


def _json_depth(value: Any) -> int:
    """Nesting depth of parsed JSON, iteratively (no recursion limit to hit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


# ------------------------------------------------------------------------------------ lookups


@dataclass
class _Findings:
    """What the importer assumed: ``warnings`` for the user now, ``notes`` kept on the row."""

    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def warn(self, text: str) -> None:
        self.warnings.append(text)
        self.notes.append(text)


class _Config:
    """Key lookup over a config: ``text_config`` first (multimodal checkpoints), then the top level."""

    def __init__(self, config: dict, source: str):
        text = config.get("text_config")
        if text is not None and not isinstance(text, dict):
            raise ConfigError(f"{source}: text_config is a {_json_type(text)}, not an object; fix the config")
        self.top, self.text, self.source = config, text or {}, source
        # The text model's type drives the family defaults (gemma2 vs gemma3, llama4_text...).
        self.model_type = _text(self.text.get("model_type")) or _text(config.get("model_type"))

    def raw(self, *keys: str) -> tuple[str | None, Any]:
        """``(key, value)`` of the first key set to a non-null value, or ``(None, None)``."""
        for scope in (self.text, self.top):
            for key in keys:
                if scope.get(key) is not None:
                    return key, scope[key]
        return None, None

    def count(self, keys: tuple[str, ...], what: str, *, required: bool = True, minimum: int = 1,
              maximum: int = MAX_COUNT) -> int | None:
        """A whole number from the first of ``keys`` present; missing and ``required`` is an error."""
        key, value = self.raw(*keys)
        if key is None:
            if required:
                raise ConfigError(
                    f"{self.source}: no {what} ({_alternatives(keys)}); add it to the config, "
                    "or enter this model by hand"
                )
            return None
        return _whole(value, key, self.source, minimum=minimum, maximum=maximum)

    def flag(self, key: str) -> bool | None:
        """A JSON boolean, or None when absent."""
        _, value = self.raw(key)
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{self.source}: {key} is {_show(value)}, not true or false; fix the config")
        return value

    def missing(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"{self.source}: no {key}, needed because {why}; add it to the config")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _alternatives(keys: tuple[str, ...]) -> str:
    return keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " or " + keys[-1]


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _whole(value: Any, key: str, source: str, *, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """``value`` as an int in [minimum, maximum]; bools, strings, fractions, NaN and inf are errors."""
    shown = _show(value)  # as the config wrote it: 1e+308, not its 309 digits
    ok = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        ok, value = True, int(value)
    if not ok:
        raise ConfigError(f"{source}: {key} is {_show(value)}, not a whole number; fix the config")
    if value < minimum:
        bound = "positive" if minimum == 1 else f"at least {minimum}"
        raise ConfigError(f"{source}: {key} is {shown}, it must be {bound}; fix the config")
    if value > maximum:
        raise ConfigError(f"{source}: {key} is {shown}, more than {maximum:,}, which cannot be right; fix the config")
    return value


# ---------------------------------------------------------------------------------- attention


def _is_mla(cfg: _Config) -> bool:
    return cfg.raw("kv_lora_rank")[0] is not None and cfg.raw("qk_rope_head_dim")[0] is not None


def _attention(cfg: _Config, findings: _Findings) -> dict:
    """Heads and head widths; MLA models also get their latent width."""
    heads = cfg.count(_HEAD_KEYS, "attention head count")
    kv_heads = _kv_heads(cfg, heads, findings)
    if _is_mla(cfg):
        return _mla_attention(cfg, heads, kv_heads)
    if heads % kv_heads:
        kv_key = cfg.raw(*_KV_HEAD_KEYS, "multi_query_group_num")[0]
        raise ConfigError(
            f"{cfg.source}: {kv_key} = {kv_heads} does not divide the {heads} attention heads; "
            "each kv head serves a whole group of query heads: fix the config"
        )
    head_dim = _head_dim(cfg, heads)
    return {
        "attention_heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "v_head_dim": head_dim,
        "kv_lora_rank": None, "qk_rope_head_dim": None,
    }


def _kv_heads(cfg: _Config, heads: int, findings: _Findings) -> int:
    """KV head count across the families' spellings; missing means one per attention head (MHA)."""
    # Falcon-7B / StarCoder: multi_query means one shared K/V head, unless Falcon's
    # new_decoder_architecture (40B/180B in the transformers format) says to read num_kv_heads.
    if cfg.flag("multi_query") and not cfg.flag("new_decoder_architecture"):
        return 1
    if cfg.raw(*_KV_HEAD_KEYS)[0] is not None:
        return cfg.count(_KV_HEAD_KEYS, "kv head count")
    if cfg.raw("multi_query_group_num")[0] is not None:
        # ChatGLM reads multi_query_group_num only when multi_query_attention is on.
        if cfg.flag("multi_query_attention"):
            return cfg.count(("multi_query_group_num",), "kv group count")
        findings.warn("multi_query_group_num ignored: multi_query_attention is not true, so every head has its own K/V")
    return heads


def _head_dim(cfg: _Config, heads: int) -> int:
    """Explicit head_dim wins (Qwen3, Gemma, gpt-oss set one != hidden/heads); else hidden // heads."""
    explicit = cfg.count(_HEAD_DIM_KEYS, "head width", required=False)
    if explicit is not None:
        return explicit
    hidden = cfg.count(_HIDDEN_KEYS, "head width: no head_dim, and no hidden size to derive it from")
    if hidden % heads:
        raise ConfigError(
            f"{cfg.source}: hidden_size {hidden} is not divisible by {heads} attention heads and there is "
            "no head_dim; add head_dim to the config"
        )
    return hidden // heads


def _mla_attention(cfg: _Config, heads: int, kv_heads: int) -> dict:
    """DeepSeek V2/V3, Kimi-K2: the cache is one latent per layer; heads are stored for reference."""
    rope = cfg.count(("qk_rope_head_dim",), "MLA rope width", minimum=0)
    nope = cfg.count(("qk_nope_head_dim",), "MLA no-rope query/key width")
    return {
        "attention_heads": heads,
        "kv_heads": kv_heads,  # irrelevant to an MLA cache, kept as the config says
        "head_dim": nope + rope,
        "v_head_dim": cfg.count(("v_head_dim",), "MLA value head width"),  # informational only
        "kv_lora_rank": cfg.count(("kv_lora_rank",), "MLA latent rank"),
        "qk_rope_head_dim": rope,
        **_indexer(cfg),
    }


def _indexer(cfg: _Config) -> dict:
    """DeepSeek-V3.2's sparse-attention indexer caches a key of index_head_dim fp8 bytes plus one fp32
    scale per 128 of them per token per layer (vLLM and SGLang alike: 128 + 4 = 132 B)."""
    if cfg.raw("index_head_dim")[0] is None:
        return {}
    dim = cfg.count(("index_head_dim",), "indexer head width")
    return {"indexer_bytes_per_token_per_layer": dim + dim // 128 * 4}


# --------------------------------------------------------------------------------- layer kinds


def _layer_kinds(cfg: _Config, layers: int, findings: _Findings) -> list[str]:
    """One kind per cache-holding layer: 'full', 'sliding', 'chunked' or 'linear'."""
    if cfg.raw("layer_types")[0] is not None:
        return _kinds_from_layer_types(cfg, layers)
    if cfg.raw("hybrid_override_pattern")[0] is not None:
        return _kinds_from_hybrid_pattern(cfg, layers, findings)
    interval = cfg.count(("full_attention_interval",), "full attention interval", required=False)
    if interval is not None:
        # Qwen3-Next: every interval-th layer is full attention, the rest Gated DeltaNet.
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(layers)]
    if cfg.raw("attention_chunk_size")[0] is not None:
        return _llama4_kinds(cfg, layers)
    pattern = cfg.count(("sliding_window_pattern",), "sliding window pattern", required=False)
    if pattern is None and cfg.model_type == "gemma2":
        pattern = 2  # Gemma-2: even layers slide, odd layers are global (first-release configs)
    if pattern is not None:
        return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]
    use_sliding = cfg.flag("use_sliding_window")
    has_window = cfg.raw(*_WINDOW_KEYS)[0] is not None
    if use_sliding is not None:
        # Qwen2 semantics: the window applies only when switched on, and only from max_window_layers up.
        if not (use_sliding and has_window):
            return ["full"] * layers
        first = cfg.count(("max_window_layers",), "first sliding layer", minimum=0)
        return ["full" if i < first else "sliding" for i in range(layers)]
    # Mistral style: a window with no per-layer description applies to every layer.
    return ["sliding" if has_window else "full"] * layers


def _kinds_from_layer_types(cfg: _Config, layers: int) -> list[str]:
    _, types = cfg.raw("layer_types")
    if not isinstance(types, list) or len(types) != layers:
        size = f"{len(types)} entries" if isinstance(types, list) else f"a {_json_type(types)}"
        raise ConfigError(f"{cfg.source}: layer_types has {size} but the model has {layers} layers; fix the config")
    unknown = [t for t in types if not isinstance(t, str) or t not in _LAYER_TYPE_KINDS]
    if unknown:
        raise ConfigError(
            f"{cfg.source}: layer_types entry {_show(unknown[0])} is not a layer kind kvreg knows "
            f"({', '.join(sorted(_LAYER_TYPE_KINDS))}); enter this model by hand"
        )
    return [_LAYER_TYPE_KINDS[t] for t in types]


def _kinds_from_hybrid_pattern(cfg: _Config, layers: int, findings: _Findings) -> list[str]:
    """Nemotron-H: 'M' Mamba2, '*' attention, '-' MLP and 'E' MoE blocks, one character per block."""
    _, pattern = cfg.raw("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != layers or set(pattern) - set("M*-E"):
        raise ConfigError(
            f"{cfg.source}: hybrid_override_pattern must be {layers} characters of M, *, - or E; fix the config"
        )
    kinds = ["linear" if c == "M" else "full" for c in pattern if c in "M*"]
    findings.note(
        f"{layers - len(kinds)} of {layers} hybrid_override_pattern blocks are MLP/MoE-only and hold no "
        f"cache; layers counts the {len(kinds)} attention and Mamba blocks"
    )
    return kinds


def _llama4_kinds(cfg: _Config, layers: int) -> list[str]:
    """Llama 4: RoPE layers use chunked attention, NoPE layers (every 4th by default) attend fully."""
    _, no_rope = cfg.raw("no_rope_layers")
    if no_rope is None:
        every = cfg.count(("no_rope_layer_interval",), "NoPE layer interval", required=False) or 4
        # transformers' Llama4TextConfig default: 1 (= uses RoPE) except every `every`-th layer.
        no_rope = [int((i + 1) % every != 0) for i in range(layers)]
    if not isinstance(no_rope, list) or len(no_rope) != layers or any(v not in (0, 1) for v in no_rope):
        raise ConfigError(f"{cfg.source}: no_rope_layers must list 0 or 1 for each of the {layers} layers; fix the config")
    return ["chunked" if uses_rope else "full" for uses_rope in no_rope]


def _layout(cfg: _Config, kinds: list[str]) -> dict:
    """Counts per kind, plus the window / chunk size where such layers exist (else NULL)."""
    sliding, chunked = kinds.count("sliding"), kinds.count("chunked")
    window = chunk = None
    if sliding:
        window = cfg.count(_WINDOW_KEYS, "sliding window size for the sliding layers", maximum=MAX_TOKENS)
    if chunked:
        chunk = cfg.count(("attention_chunk_size",), "chunk size for the chunked layers", maximum=MAX_TOKENS)
    return {
        "layers": len(kinds), "full_layers": kinds.count("full"),
        "sliding_layers": sliding, "sliding_window": window,
        "chunked_layers": chunked, "attention_chunk_size": chunk,
        "linear_layers": kinds.count("linear"),
    }


# -------------------------------------------------------------------------------- linear state


def _linear_state(cfg: _Config) -> tuple[int, int]:
    """(state elements per sequence per linear layer, head count it shards by under TP)."""
    if cfg.raw("linear_num_key_heads")[0] is not None:
        # Gated DeltaNet (Qwen3-Next): conv state over q, k, v channels + one k x v matrix per value head.
        k_heads = cfg.count(("linear_num_key_heads",), "linear key heads")
        v_heads = cfg.count(("linear_num_value_heads",), "linear value heads")
        k_dim = cfg.count(("linear_key_head_dim",), "linear key head width")
        v_dim = cfg.count(("linear_value_head_dim",), "linear value head width")
        kernel = cfg.count(("linear_conv_kernel_dim",), "linear conv kernel size")
        conv = (2 * k_heads * k_dim + v_heads * v_dim) * (kernel - 1)
        return conv + v_heads * k_dim * v_dim, k_heads
    if cfg.raw("mamba_num_heads")[0] is not None:
        # Mamba2 (Nemotron-H): conv state over x, B, C channels + SSM state heads x head_dim x state.
        heads = cfg.count(("mamba_num_heads",), "Mamba heads")
        head_dim = cfg.count(("mamba_head_dim",), "Mamba head width")
        state = cfg.count(("ssm_state_size",), "Mamba state size")
        groups = cfg.count(("n_groups",), "Mamba group count")
        kernel = cfg.count(("conv_kernel",), "Mamba conv kernel size")
        conv = (kernel - 1) * (heads * head_dim + 2 * groups * state)
        return conv + heads * head_dim * state, heads
    raise ConfigError(
        f"{cfg.source}: has linear/state layers but no state shape kvreg can read (Gated DeltaNet "
        "linear_num_key_heads... or Mamba2 mamba_num_heads...); enter this model by hand"
    )


def _linear_fields(cfg: _Config, linear_layers: int) -> dict:
    elements = heads = dtype = None
    if linear_layers:
        elements, heads = _linear_state(cfg)
        key, value = cfg.raw("mamba_ssm_cache_dtype")
        if key is not None and value != "auto":
            dtype = _TORCH_DTYPES.get(value) if isinstance(value, str) else None  # lists are unhashable
            if dtype is None:
                raise ConfigError(
                    f"{cfg.source}: mamba_ssm_cache_dtype {_show(value)} is not one of "
                    f"{', '.join(sorted(_TORCH_DTYPES))} or auto; fix the config"
                )
    return {"linear_state_elements_per_layer": elements, "linear_state_heads": heads, "linear_state_dtype": dtype}


# ------------------------------------------------------------------------------ dtype, context


def _weight_dtype(cfg: _Config, findings: _Findings) -> str:
    """Native weight dtype: the quantization format when the checkpoint ships quantized, else torch_dtype."""
    _, quant = cfg.raw("quantization_config")
    if quant is not None:
        if not isinstance(quant, dict):
            raise ConfigError(f"{cfg.source}: quantization_config is not an object; fix the config")
        dtype = _quantized_dtype(quant, findings)
        if dtype is not None:
            return dtype
        method = quant.get("quant_method")
        findings.warn(
            f"quantization {_show(method)} not understood: weight_dtype taken from torch_dtype; "
            "correct the row if the weights are smaller"
        )
    key, value = cfg.raw("torch_dtype", "dtype")
    if key is None:
        findings.warn("config names no torch_dtype: weight_dtype bf16 assumed; correct the row if not")
        return "bf16"
    if not isinstance(value, str) or value not in _TORCH_DTYPES:
        raise ConfigError(
            f"{cfg.source}: {key} {_show(value)} is not one of {', '.join(sorted(_TORCH_DTYPES))}; fix the config"
        )
    return _TORCH_DTYPES[value]


def _quantized_dtype(quant: dict, findings: _Findings) -> str | None:
    """Our dtype name for a quantization_config, or None when the format is not recognised."""
    method = str(quant.get("quant_method", "")).lower()
    if method == "fp8":
        return {"e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2"}.get(str(quant.get("fmt", "e4m3")).lower())
    if method == "mxfp4":
        findings.note(
            "weights are MXFP4 (4-bit e2m1 + one 8-bit scale per 32 values, on the MoE experts; attention, "
            "router and embeddings stay bf16): recorded as fp4, scales and bf16 parts not counted"
        )
        return "fp4"
    if method == "nvfp4" or str(quant.get("quant_algo", "")).upper() == "NVFP4":
        return "nvfp4"
    if method == "modelopt" and str(quant.get("quant_algo", "")).upper() == "FP8":
        return "fp8_e4m3"
    if method in ("awq", "gptq") or method.startswith("gptq"):
        bits = quant.get("bits")
        return {4: "int4", 8: "int8"}.get(bits) if isinstance(bits, int) else None
    if method == "bitsandbytes":
        if quant.get("load_in_4bit"):
            return "int4"
        return "int8" if quant.get("load_in_8bit") else None
    return None


def _max_positions(cfg: _Config, findings: _Findings) -> int:
    if cfg.raw(*_MAX_POS_KEYS)[0] is None and cfg.model_type in _FALCON_FAMILIES:
        findings.warn(
            f"config has no max_position_embeddings: {FALCON_CONTEXT} assumed, the context Falcon was trained with"
        )
        return FALCON_CONTEXT
    return cfg.count(_MAX_POS_KEYS, "context length", maximum=MAX_TOKENS)


# ---------------------------------------------------------------------------------- parameters


def _moe_shape(cfg: _Config) -> tuple[int, int]:
    """(routed experts, experts per token); (0, 0) for a dense model."""
    experts = cfg.count(("n_routed_experts", "num_experts", "num_local_experts"), "expert count",
                        required=False, minimum=0) or 0
    if experts <= 1:
        return 0, 0
    top_k = cfg.count(("num_experts_per_tok", "experts_per_token", "moe_topk"), "experts per token")
    return experts, top_k


def _moe_layer_flags(cfg: _Config, layers: int) -> list[bool]:
    """Which decoder layers carry experts (DeepSeek/GLM first_k_dense_replace, Qwen mlp_only_layers...)."""
    _, mlp_only = cfg.raw("mlp_only_layers")
    if not isinstance(mlp_only, (list, type(None))):
        raise ConfigError(f"{cfg.source}: mlp_only_layers is {_show(mlp_only)}, not a list of layer numbers; fix the config")
    dense = set(i for i in mlp_only or [] if isinstance(i, int))
    first_moe = cfg.count(("first_k_dense_replace",), "first MoE layer", required=False, minimum=0) or 0
    step = cfg.count(("decoder_sparse_step", "interleave_moe_layer_step"), "MoE layer step", required=False) or 1
    freq = cfg.count(("moe_layer_freq",), "MoE layer frequency", required=False) or 1
    return [i not in dense and i >= first_moe and (i + 1) % step == 0 and i % freq == 0 for i in range(layers)]


def _mlp_params(cfg: _Config, hidden: int, moe_flags: list[bool]) -> tuple[int, int]:
    """(all MLP parameters, those used per token) over MLP blocks flagged MoE or dense."""
    matrices = 2 if cfg.model_type in _PLAIN_MLP_FAMILIES else 3
    dense_width = cfg.count(("intermediate_size", "ffn_hidden_size", "n_inner"), "MLP width", required=False)
    dense = matrices * hidden * (dense_width or 4 * hidden)  # 4 x hidden: GPT-2 / Falcon default
    experts, top_k = _moe_shape(cfg)
    if not experts:
        return dense * len(moe_flags), dense * len(moe_flags)
    expert = matrices * hidden * cfg.count(("moe_intermediate_size", "intermediate_size"), "expert MLP width")
    shared = expert * (cfg.count(("n_shared_experts",), "shared experts", required=False, minimum=0) or 0)
    shared_width = cfg.count(("shared_expert_intermediate_size",), "shared expert width", required=False)
    shared += matrices * hidden * shared_width if shared_width else 0
    router = hidden * experts
    moe_layers = sum(moe_flags)
    dense_layers = len(moe_flags) - moe_layers
    total = dense_layers * dense + moe_layers * (experts * expert + shared + router)
    active = dense_layers * dense + moe_layers * (top_k * expert + shared + router)
    return total, active


def _attention_params(cfg: _Config, att: dict, hidden: int) -> int:
    """Projection weights of one attention layer (biases and norms are noise at this precision)."""
    heads = att["attention_heads"]
    if att["kv_lora_rank"] is None:
        return hidden * att["head_dim"] * (2 * heads + 2 * att["kv_heads"])
    rope, qk_dim, v_dim = att["qk_rope_head_dim"], att["head_dim"], att["v_head_dim"]
    q_rank = cfg.count(("q_lora_rank",), "query rank", required=False)
    query = hidden * q_rank + q_rank * heads * qk_dim if q_rank else hidden * heads * qk_dim
    kv = hidden * (att["kv_lora_rank"] + rope) + att["kv_lora_rank"] * heads * (qk_dim - rope + v_dim)
    return query + kv + heads * v_dim * hidden


def _linear_layer_params(cfg: _Config, hidden: int) -> int:
    """Projection weights of one Gated DeltaNet or Mamba2 layer."""
    def get(key: str) -> int:  # shapes were validated by _linear_state already
        return cfg.count((key,), key)

    if cfg.raw("linear_num_key_heads")[0] is not None:
        keys = get("linear_num_key_heads") * get("linear_key_head_dim")
        values = get("linear_num_value_heads") * get("linear_value_head_dim")
        # in_proj_qkvz + in_proj_ba (two gates per value head) + out_proj
        return hidden * (2 * keys + 2 * values + 2 * get("linear_num_value_heads")) + values * hidden
    inner = get("mamba_num_heads") * get("mamba_head_dim")
    # in_proj (x, z, B, C, dt) + out_proj
    return hidden * (2 * inner + 2 * get("n_groups") * get("ssm_state_size") + get("mamba_num_heads")) + inner * hidden


def _estimate_params(cfg: _Config, att: dict, layout: dict) -> tuple[int, int]:
    """(params_total, params_active) from the config's shapes: embeddings + attention + MLP.

    Multi-token-prediction layers (num_nextn_predict_layers) are left out: engines load them only
    for speculative decoding.
    """
    hidden = cfg.count(_HIDDEN_KEYS, "hidden size, needed to estimate the parameter count (or pass --params-b)")
    vocab = cfg.count(("vocab_size", "padded_vocab_size"), "vocabulary size, needed to estimate the "
                      "parameter count (or pass --params-b)", maximum=100_000_000)
    tied = cfg.flag("tie_word_embeddings")
    embeddings = vocab * hidden * (1 if tied or tied is None else 2)  # transformers ties by default
    linear = layout["linear_layers"]
    attention = (layout["layers"] - linear) * _attention_params(cfg, att, hidden)
    attention += linear * _linear_layer_params(cfg, hidden) if linear else 0
    _, pattern = cfg.raw("hybrid_override_pattern")
    if isinstance(pattern, str):
        moe_flags = [c == "E" for c in pattern if c in "-E"]
    else:
        moe_flags = _moe_layer_flags(cfg, layout["layers"])
    mlp_total, mlp_active = _mlp_params(cfg, hidden, moe_flags)
    return embeddings + attention + mlp_total, embeddings + attention + mlp_active


def _params(cfg: _Config, att: dict, layout: dict, total: int | None, active: int | None,
            findings: _Findings) -> tuple[int, int]:
    """Given counts win; whatever is missing is estimated from the config, with a warning."""
    if total is not None:
        total = _whole(total, "params_total", cfg.source, maximum=10**15)
    if active is not None:
        active = _whole(active, "params_active", cfg.source, maximum=10**15)
    is_moe = _moe_shape(cfg)[0] > 0
    if total is not None and active is None and not is_moe:
        return total, total
    if total is None or active is None:
        est_total, est_active = _estimate_params(cfg, att, layout)
        if total is None:
            total = est_total
            findings.warn(
                f"params_total {est_total / 1e9:.2f}B is an ESTIMATE from the config (embeddings + attention + MLP); "
                "pass --params-b, or put model.safetensors.index.json next to config.json"
            )
        if active is None:
            active = min(est_active, total)
            if is_moe:
                findings.warn(f"params_active {active / 1e9:.2f}B is an ESTIMATE from the config (routed top-k + shared experts)")
    if active > total:
        raise ConfigError(f"{cfg.source}: params_active {active:,} exceeds params_total {total:,}; fix the counts")
    return total, active


# -------------------------------------------------------------------------------------- public


def model_from_config(config: dict, *, name: str, source: str = "manual", sha256: str | None = None,
                      params_total: int | None = None, params_active: int | None = None) -> tuple[dict, list[str]]:
    """A model row (keys of ``MODEL_FIELDS``) and the warnings raised while reading ``config``."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: config is a {_json_type(config)}, not a JSON object; pass a config.json")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{source}: the model needs a name; pass --name")
    cfg, findings = _Config(config, source), _Findings()
    layers = cfg.count(_LAYER_KEYS, "layer count")
    att = _attention(cfg, findings)
    layout = _layout(cfg, _layer_kinds(cfg, layers, findings))
    linear = _linear_fields(cfg, layout["linear_layers"])  # validates the state shapes the estimate reads
    total, active = _params(cfg, att, layout, params_total, params_active, findings)
    architectures = config.get("architectures")
    row = {
        "name": name.strip(),
        "architecture": architectures[0] if isinstance(architectures, list) and architectures
        and isinstance(architectures[0], str) else "",
        "family": _text(config.get("model_type")) or cfg.model_type,
        **layout,
        **linear,
        **att,
        "params_total": total,
        "params_active": active,
        "weight_dtype": _weight_dtype(cfg, findings),
        "max_position_embeddings": _max_positions(cfg, findings),
        **_activation_widths(config),
        "source": source,
        "source_sha256": sha256,
        "imported_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "notes": "; ".join(findings.notes),
    }
    return row, findings.warnings


def _activation_widths(config: dict) -> dict:
    """hidden_size, the MLP width a token passes through (MoE: moe_intermediate_size x experts per token)
    and vocab_size: the widths vLLM's profile run holds activations at. A value the config lacks is None."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config

    def whole(*keys):
        for key in keys:
            value = text.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    experts = whole("num_experts_per_tok", "moe_topk", "num_experts_per_token", "experts_per_token")
    # Mixtral and gpt-oss name the expert's width intermediate_size beside their expert count
    moe = whole("num_local_experts", "num_experts", "n_routed_experts")
    expert_width = whole("moe_intermediate_size") or (whole("intermediate_size") if moe and experts else None)
    mlp = expert_width * experts if expert_width and experts else whole("intermediate_size", "ffn_hidden_size")
    return {"hidden_size": whole("hidden_size", "d_model", "n_embd"), "intermediate_size": mlp,
            "vocab_size": whole("vocab_size", "padded_vocab_size")}


def import_path(path: str | pathlib.Path, *, name: str | None = None,
                params_b: float | None = None) -> tuple[dict, list[str]]:
    """Import a config.json file, or a model folder holding one.

    A ``model.safetensors.index.json`` beside a file named ``config.json`` supplies params_total,
    unless ``params_b`` (billions) is given, which always wins.
    """
    path = pathlib.Path(path)
    config_file = path / "config.json" if path.is_dir() else path
    if path.is_dir() and not config_file.is_file():
        raise ConfigError(f"{path}: folder has no config.json; give the config file or the model folder holding it")
    config, source, sha = read_config(config_file)
    name = name or default_name(config_file)
    params_total, how = _given_params(params_b, source), None
    if params_total is None and config_file.name == "config.json":
        params_total, how = _params_from_index(config_file.parent / INDEX_FILE, config, source)
    row, warnings = model_from_config(config, name=name, source=source, sha256=sha, params_total=params_total)
    if how:
        row["notes"] = "; ".join(filter(None, [how, row["notes"]]))
    return row, warnings


def import_text(text: str | bytes, *, name: str, params_b: float | None = None) -> tuple[dict, list[str]]:
    """Import a config given as text (e.g. read from stdin); the row's source is "stdin"."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    config, source, sha = read_config(raw, source_name="stdin")
    return model_from_config(config, name=name, source=source, sha256=sha,
                             params_total=_given_params(params_b, source))


def default_name(config_file: pathlib.Path) -> str:
    """``org__Model.json`` -> ``Model``; ``<folder>/config.json`` -> the folder's name; else the stem."""
    if config_file.name == "config.json":
        return config_file.resolve().parent.name
    stem = config_file.name.removesuffix(".json")
    return stem.split("__", 1)[1] if "__" in stem else stem


def _given_params(params_b: float | None, source: str) -> int | None:
    """Billions typed by the user -> a whole parameter count."""
    if params_b is None:
        return None
    if isinstance(params_b, bool) or not isinstance(params_b, (int, float)) or not math.isfinite(params_b) \
            or not 0 < params_b <= 1_000_000:
        raise ConfigError(f"{source}: params_b {_show(params_b)} is not a parameter count in billions; e.g. 8.03")
    return round(params_b * 1e9)


def _params_from_index(index_file: pathlib.Path, config: dict, source: str) -> tuple[int | None, str | None]:
    """params_total from a safetensors index's byte total, with the note saying how; (None, None) if absent."""
    if not index_file.is_file():
        return None, None
    index = _parse(_read_file(index_file, index_file.name, MAX_INDEX_BYTES), index_file.name, MAX_INDEX_BYTES)
    metadata = index.get("metadata")
    total_bytes = metadata.get("total_size") if isinstance(metadata, dict) else None
    if total_bytes is None:
        raise ConfigError(f"{index_file.name}: no metadata.total_size; remove the file or pass --params-b")
    total_bytes = _whole(total_bytes, "metadata.total_size", index_file.name, maximum=10**16)
    dtype = _weight_dtype(_Config(config, source), _Findings())
    total = round(total_bytes / WEIGHT_BYTES[dtype])
    return total, f"params_total from {INDEX_FILE}: {total_bytes:,} B / {WEIGHT_BYTES[dtype]:g} B per {dtype} param"
