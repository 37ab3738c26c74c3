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
import re
from dataclasses import dataclass, field
from typing import Any

from kvreg.errors import UserError
from kvreg.figures.inputs import KV_GROUPS

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
_HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
_KV_HEAD_KEYS = ("num_key_value_heads", "n_head_kv", "num_kv_heads")
_HEAD_DIM_KEYS = ("head_dim", "kv_channels", "attention_head_dim")
_HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model")
# model_max_length: Kimi-Linear names its context only there (vLLM's _get_and_verify_max_len reads it too)
_MAX_POS_KEYS = ("max_position_embeddings", "seq_length", "n_positions", "model_max_length")
_WINDOW_KEYS = ("sliding_window", "sliding_window_size")

_FALCON_FAMILIES = {"falcon", "RefinedWeb", "RefinedWebModel"}
# Families whose attention is multi-head by design: their configs have no kv-head key to read.
_MHA_FAMILIES = {"gpt2", "gpt_neox", "gptj", "bloom", "opt", "phi", "mpt"}
FALCON_CONTEXT = 2048  # the context Falcon-7B/40B were trained with; their first configs omit it
# Families whose MLP is up/down only (2 matrices); every other family is gated (3 matrices).
_PLAIN_MLP_FAMILIES = _FALCON_FAMILIES | {"gpt2", "gpt_neox", "gptj", "gpt_bigcode", "bloom", "opt", "phi", "mpt"}

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
# Wrappers (vision-language and other multimodal configs) that nest the language model's config; vLLM's
# get_hf_text_config reads the first of these that is set.
_TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config")


# What transformers' config classes fill in when a config.json leaves a key out (the defaults of their
# __init__ signatures). Published configs rely on them: google/gemma-3-4b-it's text_config names only
# hidden_size, intermediate_size, num_hidden_layers, rope_scaling and sliding_window. tests/test_import_layouts.py
# checks this table against transformers' classes when transformers is installed (it is never required).
ARCH_DEFAULTS: dict[str, dict[str, Any]] = {
    # Gemma3TextConfig: every 6th layer global (sliding_window_pattern 6), the other five slide over 4,096 tokens.
    "gemma3_text": {
        "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131_072,
        "sliding_window": 4096, "sliding_window_pattern": 6, "tie_word_embeddings": True,
    },
    # Llama4TextConfig: an lm_head of its own (Llama 4's published text_config leaves the key out).
    "llama4_text": {"tie_word_embeddings": False},
    # Gemma2Config: alternating sliding (4,096) and global layers.
    "gemma2": {
        "vocab_size": 256_000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 8192,
        "sliding_window": 4096, "tie_word_embeddings": True,
    },
}
# A Gemma3ForConditionalGeneration whose text_config names no model_type is a gemma3_text inside.
_DEFAULTS_ALIASES = {"gemma3": "gemma3_text"}

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
    # Kimi-Linear: KDA layers, MLA layers and the KDA state's shape (read by _kda_config)
    "linear_attn_config",
    # Laguna: query heads per layer; the cache takes num_key_value_heads, one count for every layer
    "num_attention_heads_per_layer",
    # DeciLM-7B (and Laguna's config class): kv heads per layer, read as groups of layers (_kv_head_groups)
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


class ConfigError(UserError, ValueError):
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
    read: list[str] = field(default_factory=list)  # cache-shaping keys the config sets and the import reads
    ignored: list[str] = field(default_factory=list)  # cache-looking keys known not to change the cache

    def note(self, text: str) -> None:
        self.notes.append(text)

    def warn(self, text: str) -> None:
        self.warnings.append(text)
        self.notes.append(text)


class _Config:
    """Key lookup over a config: ``text_config`` first (multimodal checkpoints), then the top level."""

    def __init__(self, config: dict, source: str):
        self.wrapper = next((k for k in _TEXT_CONFIG_KEYS if config.get(k) is not None), "text_config")
        text = config.get(self.wrapper)
        if text is not None and not isinstance(text, dict):
            raise ConfigError(f"{source}: {self.wrapper} is a {_json_type(text)}, not an object; fix the config")
        self.top, self.text, self.source = config, text or {}, source
        # The text model's type drives the family defaults (gemma2 vs gemma3, llama4_text...).
        self.model_type = _text(self.text.get("model_type")) or _text(config.get("model_type"))
        self.defaults = ARCH_DEFAULTS.get(_DEFAULTS_ALIASES.get(self.model_type, self.model_type), {})
        self.defaulted: dict[str, Any] = {}  # architecture defaults the import relied on, in order of use
        self.heads_per_layer: list[int] | None = None  # num_attention_heads_per_layer (Laguna), once read
        self.kv_heads_per_layer: list[int | None] | None = None  # per-layer kv heads (None: no attention), once read

    def raw(self, *keys: str) -> tuple[str | None, Any]:
        """``(key, value)`` of the first key set to a non-null value, or ``(None, None)``."""
        for scope in (self.text, self.top):
            for key in keys:
                if scope.get(key) is not None:
                    return key, scope[key]
        for key in keys:
            if key in self.defaults:
                self.defaulted[key] = self.defaults[key]
                return key, self.defaults[key]
        return None, None

    def items(self):
        """Every (key, value) the config sets, text_config first; a key set in both is the text model's."""
        seen = set()
        for scope in (self.text, self.top):
            for key, value in scope.items():
                if key not in seen:
                    seen.add(key)
                    yield key, value

    def per_layer(self, keys: tuple[str, ...], what: str, layers: int, *, required: bool = True,
                  minimum: int = 1) -> list[int] | None:
        """One whole number per layer: a list of ``layers`` entries (Hunyuan's moe_topk...) or one number for all."""
        key, value = self.raw(*keys)
        if key is None:
            if required:
                raise ConfigError(f"{self.source}: no {what} ({_alternatives(keys)}); add it to the config")
            return None
        if isinstance(value, list):
            if len(value) != layers:
                raise ConfigError(
                    f"{self.source}: {key} lists {len(value)} values but the model has {layers} layers; fix the config"
                )
            return [_whole(v, f"{key}[{i}]", self.source, minimum=minimum) for i, v in enumerate(value)]
        return [_whole(value, key, self.source, minimum=minimum)] * layers

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


def _attention(cfg: _Config, findings: _Findings, blocks: list[_Block] | None = None) -> dict:
    """Heads and head widths; MLA models also get their latent width."""
    heads = cfg.count(_HEAD_KEYS, "attention head count")
    kv_heads = _blocks_kv_heads(cfg, blocks, heads) if blocks is not None else _kv_heads(cfg, heads, findings)
    if _is_mla(cfg):
        return _mla_attention(cfg, heads, kv_heads)
    if heads % kv_heads:
        kv_key = cfg.raw(*_KV_HEAD_KEYS, "multi_query_group_num")[0]
        raise ConfigError(
            f"{cfg.source}: {kv_key} = {kv_heads} does not divide the {heads} attention heads; "
            "each kv head serves a whole group of query heads: fix the config"
        )
    head_dim = _head_dim(cfg, heads)
    # V may be narrower than K (MiMo-V2-Flash: K 192, V 128; vLLM caches each at its own width)
    v_head_dim = cfg.count(("v_head_dim",), "value head width", required=False) or head_dim
    return {
        "attention_heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "v_head_dim": v_head_dim,
        "kv_lora_rank": None, "qk_rope_head_dim": None,
    }


def _kind_heads(cfg: _Config, att: dict, kinds: list[str], findings: _Findings) -> dict:
    """Gemma 4: full layers may have their own kv heads and head width, and may share K and V.

    As transformers and vLLM read it: a full layer's head width is global_head_dim; its kv heads are
    num_global_key_value_heads only when attention_k_eq_v is on (else num_key_value_heads). A K=V layer
    has no v_proj, but vLLM still caches K and V (it loads K's weights into both): the cache is not halved.
    """
    if isinstance(cfg.raw("hybrid_layer_pattern")[1], list):
        return _swa_heads(cfg, att, kinds)
    k_eq_v = bool(cfg.flag("attention_k_eq_v"))
    global_dim = cfg.count(("global_head_dim",), "full-layer head width", required=False)
    global_kv = cfg.count(("num_global_key_value_heads",), "full-layer kv heads", required=False)
    out = {"k_eq_v_layers": kinds.count("full") if k_eq_v else 0}
    if global_dim is None and global_kv is None or att["kv_lora_rank"] is not None:
        return out
    if global_kv is not None and not k_eq_v:
        findings.note("num_global_key_value_heads not used: without attention_k_eq_v the full layers take "
                      "num_key_value_heads (as transformers and vLLM do)")
    full_kv = global_kv if k_eq_v and global_kv is not None else att["kv_heads"]
    full_dim = global_dim or att["head_dim"]
    if att["attention_heads"] % full_kv:
        raise ConfigError(f"{cfg.source}: num_global_key_value_heads = {full_kv} does not divide the "
                          f"{att['attention_heads']} attention heads; fix the config")
    local_kv, local_dim = att["kv_heads"], att["head_dim"]
    out.update(kv_heads=full_kv, head_dim=full_dim, v_head_dim=full_dim)
    if "sliding" in kinds and (local_kv, local_dim) != (full_kv, full_dim):
        out.update(sliding_kv_heads=local_kv, sliding_head_dim=local_dim)
    if "chunked" in kinds and (local_kv, local_dim) != (full_kv, full_dim):
        out.update(chunked_kv_heads=local_kv, chunked_head_dim=local_dim)
    return out


_SWA_KEYS = ("swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim", "swa_num_attention_heads")


def _swa_heads(cfg: _Config, att: dict, kinds: list[str]) -> dict:
    """MiMo-V2-Flash: the sliding layers' own kv heads (swa_num_key_value_heads). kvreg keeps one set of
    query heads and K/V widths, so the sliding layers' must equal the full layers' (they do in MiMo-V2-Flash:
    64 heads, K 192, V 128); else the import stops naming the key."""
    same = {"swa_head_dim": att["head_dim"], "swa_v_head_dim": att["v_head_dim"],
            "swa_num_attention_heads": att["attention_heads"]}
    for key, expected in same.items():
        value = cfg.count((key,), key, required=False)
        if value is not None and value != expected:
            raise ConfigError(f"{cfg.source}: {key} = {value} differs from the full layers' {expected}, which kvreg "
                              "cannot hold for sliding layers; enter this model by hand")
    swa_kv = cfg.count(("swa_num_key_value_heads",), "sliding-layer kv heads", required=False)
    if swa_kv is None or "sliding" not in kinds or swa_kv == att["kv_heads"]:
        return {"k_eq_v_layers": 0}
    if att["attention_heads"] % swa_kv:
        raise ConfigError(f"{cfg.source}: swa_num_key_value_heads = {swa_kv} does not divide the "
                          f"{att['attention_heads']} attention heads; fix the config")
    return {"k_eq_v_layers": 0, "sliding_kv_heads": swa_kv}


def _per_layer_query_heads(cfg: _Config, layers: int, att: dict, findings: _Findings) -> None:
    """Laguna: num_attention_heads_per_layer gives each layer its own query heads; the K/V projections keep
    num_key_value_heads in every layer (vLLM's and transformers' Laguna attention), so the cache is an ordinary
    one. Each count must be a whole number of kv head groups, and divide by TP as num_attention_heads does."""
    key, value = cfg.raw("num_attention_heads_per_layer")
    if key is None:
        return
    if not isinstance(value, list) or len(value) != layers:
        size = f"{len(value)} entries" if isinstance(value, list) else f"a {_json_type(value)}"
        raise ConfigError(f"{cfg.source}: {key} has {size} but the model has {layers} layers; fix the config")
    counts = [_whole(v, f"{key}[{i}]", cfg.source) for i, v in enumerate(value)]
    kv = cfg.kv_heads_per_layer or [att["kv_heads"]] * layers
    for i, heads in enumerate(counts):
        if att["kv_lora_rank"] is None and kv[i] and heads % kv[i]:
            raise ConfigError(f"{cfg.source}: {key}[{i}] = {heads} is not a multiple of the {kv[i]} kv heads; "
                              "fix the config")
    # tp_valid checks attention_heads % TP: their greatest common divisor divides by TP exactly when every layer's does
    att["attention_heads"] = math.gcd(*counts)
    cfg.heads_per_layer = counts
    shown = ", ".join(f"{n} heads in {counts.count(n)} layers" for n in sorted(set(counts)))
    findings.note(f"{key}: query heads per layer ({shown}); the KV cache keeps {att['kv_heads']} kv heads in every "
                  f"layer; attention_heads holds their greatest common divisor {att['attention_heads']}, which TP must "
                  "divide")


def _kv_heads(cfg: _Config, heads: int, findings: _Findings) -> int:
    """KV head count across the families' spellings; missing means one per attention head (MHA)."""
    # Falcon-7B / StarCoder: multi_query means one shared K/V head, unless Falcon's
    # new_decoder_architecture (40B/180B in the transformers format) says to read num_kv_heads.
    if cfg.flag("multi_query") and not cfg.flag("new_decoder_architecture"):
        return 1
    per_layer = _kv_head_list(cfg)
    if per_layer is not None:
        return _most_common(per_layer)
    if cfg.raw(*_KV_HEAD_KEYS)[0] is not None:
        return cfg.count(_KV_HEAD_KEYS, "kv head count")
    if cfg.raw("multi_query_group_num")[0] is not None:
        # ChatGLM reads multi_query_group_num only when multi_query_attention is on.
        if cfg.flag("multi_query_attention"):
            return cfg.count(("multi_query_group_num",), "kv group count")
        findings.warn("multi_query_group_num ignored: multi_query_attention is not true, so every head has its own K/V")
        return heads
    if cfg.model_type not in _MHA_FAMILIES:
        # Never silently: a config that leaves the kv heads out (or null) may hide a per-layer layout.
        findings.warn(f"no kv head count ({_alternatives(_KV_HEAD_KEYS)}): multi-head attention assumed, "
                      f"{heads} kv heads (one per attention head); check the model card")
    return heads


def _kv_head_list(cfg: _Config) -> list[int] | None:
    """Per-layer kv heads given as a list, one count per layer: num_key_value_heads_per_layer (DeciLM-7B), or a
    num_key_value_heads that is a list; None when the config gives one count for every layer."""
    key, value = cfg.raw("num_key_value_heads_per_layer", *_KV_HEAD_KEYS)
    if not isinstance(value, list):
        return None
    layers = cfg.count(_LAYER_KEYS, "layer count")
    if len(value) != layers:
        raise ConfigError(f"{cfg.source}: {key} lists {len(value)} values but the model has {layers} layers; fix the config")
    counts = [_whole(v, f"{key}[{i}]", cfg.source) for i, v in enumerate(value)]
    cfg.kv_heads_per_layer = counts
    return counts


def _most_common(counts: list[int | None]) -> int:
    """The kv head count most attention layers hold (the larger on a tie): the row's kv_heads."""
    held = [c for c in counts if c is not None]
    return max(set(held), key=lambda c: (held.count(c), c))


def _kv_head_groups(cfg: _Config, att: dict, kinds: list[str], findings: _Findings) -> dict:
    """Per-layer kv heads as the row keeps them: kv_heads (the count most full layers hold) and, for each other
    count, kv_heads_N with the full layers holding it in kv_layers_N, N = 2, 3, 4. Engines give each layer its own
    K/V heads (vLLM's nemotron_nas.py builds every DeciLM layer's attention with num_attention_heads //
    n_heads_in_group kv heads), each split over TP or replicated past it as in any layer."""
    out = {f"kv_{what}_{n}": None for n in KV_GROUPS for what in ("heads", "layers")}
    counts = cfg.kv_heads_per_layer
    if counts is None or att["kv_lora_rank"] is not None:
        return out
    held = [c for c, kind in zip(counts, kinds) if kind != "none" and c is not None]
    others = sorted(set(held) - {att["kv_heads"]}, key=lambda c: (-held.count(c), -c))
    if not others:
        return out
    key = "block_configs" if cfg.raw("block_configs")[0] is not None else \
        cfg.raw("num_key_value_heads_per_layer", *_KV_HEAD_KEYS)[0]
    shown = ", ".join(f"{c} kv heads in {held.count(c)} layers" for c in sorted(set(held), reverse=True))
    if len(others) > len(KV_GROUPS):
        raise ConfigError(f"{cfg.source}: {key} gives the attention layers {len(others) + 1} kv head counts ({shown}); "
                          f"kvreg keeps at most {len(KV_GROUPS) + 1}: enter this model by hand")
    if set(kinds) - {"full", "none"}:
        raise ConfigError(f"{cfg.source}: {key} gives the layers different kv head counts ({shown}) in a model with "
                          "sliding, chunked or linear layers; kvreg keeps per-layer kv heads for full attention only: "
                          "enter this model by hand")
    for count in others:
        if att["attention_heads"] % count:
            raise ConfigError(f"{cfg.source}: {key}: {count} kv heads do not divide the {att['attention_heads']} "
                              "attention heads; fix the config")
    for n, count in zip(KV_GROUPS, others):
        out.update({f"kv_heads_{n}": count, f"kv_layers_{n}": held.count(count)})
    findings.note(f"{key}: kv heads per layer ({shown}); kv_heads holds the {held.count(att['kv_heads'])} layers' "
                  f"{att['kv_heads']}, kv_heads_N / kv_layers_N the others, each split over TP or replicated past it "
                  "layer by layer")
    return out


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
    key, types = cfg.raw("indexer_types")
    if cfg.raw("index_head_dim")[0] is None:
        if key is not None:
            raise ConfigError(f"{cfg.source}: indexer_types is set but there is no index_head_dim to size the indexer "
                              "cache; fix the config")
        return {}
    dim = cfg.count(("index_head_dim",), "indexer head width")
    out = {"indexer_bytes_per_token_per_layer": dim + dim // 128 * 4, "indexer_layers": None}
    if key is not None:
        # GLM-5.2: "full" layers run their own indexer and cache its keys; "shared" layers reuse the last full
        # layer's top-k and have no indexer (no weights, no cache)
        layers = cfg.count(_LAYER_KEYS, "layer count")
        if not isinstance(types, list) or len(types) != layers or any(t not in ("full", "shared") for t in types) \
                or types[0] != "full":
            raise ConfigError(f"{cfg.source}: indexer_types must list \"full\" or \"shared\" for each of the {layers} "
                              "layers, the first one \"full\"; fix the config")
        full = types.count("full")
        if full < layers:
            out["indexer_layers"] = full
    return out


# ------------------------------------------------------------------------- DeciLM block_configs


@dataclass
class _Block:
    """One DeciLM (Nemotron-NAS) decoder layer: its cache kind and what its parameters are."""

    kind: str  # full, sliding or none (no-op attention, or a linear layer in place of attention)
    kv_heads: int | None
    window: int | None
    attention: str  # gqa, linear or none
    ffn: str  # mlp, linear or none
    ffn_width: int


# Keys of a block's attention kvreg reads, and those it accepts only at their no-effect value.
_DECI_ATTENTION_READ = {"n_heads_in_group", "no_op", "replace_with_linear", "window_length"}
_DECI_ATTENTION_OFF = {"sparsify": None, "num_sink_tokens": None, "unshifted_sink": False,
                       "use_prefill_window_in_sink_attention": False}
_DECI_FFN_READ = {"ffn_mult", "no_op", "replace_with_linear", "sparsify"}


def decilm_ffn_width(ffn_mult: float, hidden: int) -> int:
    """DeciLM's MLP width: int(2 x ffn_mult x hidden / 3), rounded up to a multiple of 256 (as vLLM's
    nemotron_nas.py and the model's own code compute it)."""
    width = int(2 * ffn_mult * hidden / 3)
    return width if width % 256 == 0 else width + 256 - width % 256


def _decilm_blocks(cfg: _Config, layers: int, heads: int, findings: _Findings, accept_unknown: bool) -> list[_Block]:
    """Llama-Nemotron Super/Ultra: one entry per layer, each with its own attention and MLP."""
    _, blocks = cfg.raw("block_configs")
    if not isinstance(blocks, list) or len(blocks) != layers:
        size = f"{len(blocks)} entries" if isinstance(blocks, list) else f"a {_json_type(blocks)}"
        raise ConfigError(f"{cfg.source}: block_configs has {size} but the model has {layers} layers; fix the config")
    hidden = cfg.count(_HIDDEN_KEYS, "hidden size")
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
            _unknown(cfg, findings, accept_unknown, f"{where}.attention.{key}", value)
        for key in ffn:
            if key not in _DECI_FFN_READ:
                findings.warn(f"{where}.ffn.{key} not understood: the parameter estimate ignores it")
        if attention.get("no_op") or attention.get("replace_with_linear"):
            kind, kv, window = "none", None, None
            how = "linear" if attention.get("replace_with_linear") and not attention.get("no_op") else "none"
        else:
            group = _whole(attention.get("n_heads_in_group"), f"{where}.attention.n_heads_in_group", cfg.source)
            if heads % group:
                raise ConfigError(f"{cfg.source}: {where}.attention.n_heads_in_group = {group} does not divide the "
                                  f"{heads} attention heads; fix the config")
            kv, how = heads // group, "gqa"
            window = attention.get("window_length")
            kind = "full" if window is None else "sliding"
            if window is not None:
                window = _whole(window, f"{where}.attention.window_length", cfg.source, maximum=MAX_TOKENS)
        if ffn.get("no_op"):
            ffn_kind, width = "none", 0
        elif ffn.get("replace_with_linear"):
            ffn_kind, width = "linear", 0
        else:
            mult = ffn.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult < 1000:
                raise ConfigError(f"{cfg.source}: {where}.ffn.ffn_mult is {_show(mult)}, not a positive number; "
                                  "fix the config")
            ffn_kind, width = "mlp", decilm_ffn_width(mult, hidden)
        out.append(_Block(kind, kv, window, how, ffn_kind, width))
    return out


def _blocks_kv_heads(cfg: _Config, blocks: list[_Block], heads: int) -> int:
    """The kv head count most attention layers of a DeciLM model hold (Llama-Nemotron Super/Ultra: all of them);
    layers with another count (n_heads_in_group varying by layer) become groups of their own (_kv_head_groups)."""
    cfg.kv_heads_per_layer = [block.kv_heads for block in blocks]
    if all(count is None for count in cfg.kv_heads_per_layer):
        return heads
    return _most_common(cfg.kv_heads_per_layer)


def _unknown(cfg: _Config, findings: _Findings, accept_unknown: bool, key: str, value: Any) -> None:
    """A key that could change the cache and that kvreg does not read: an error, or with --accept-unknown a warning."""
    if accept_unknown:
        findings.warn(f"{key} = {_show(value)} not understood and ignored (--accept-unknown): "
                      "the KV figures may be wrong for this model")
        return
    raise ConfigError(
        f"{cfg.source}: {key} = {_show(value)} could change the KV cache and kvreg does not understand it; "
        "enter this model by hand, or pass --accept-unknown to import it without that key"
    )


def _check_unknown_keys(cfg: _Config, findings: _Findings, accept_unknown: bool) -> None:
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
        _unknown(cfg, findings, accept_unknown, key, value)


# --------------------------------------------------------------------------------- layer kinds


def _layer_kinds(cfg: _Config, layers: int, findings: _Findings, blocks: list[_Block] | None = None) -> list[str]:
    """One kind per layer: 'full', 'sliding', 'chunked', 'linear', or 'none' (a layer holding no cache)."""
    kinds = _attention_kinds(cfg, layers, findings, blocks)
    shared = cfg.count(("num_kv_shared_layers",), "KV-shared layers", required=False, minimum=0) or 0
    if shared:
        # Gemma 3n / 4: the last num_kv_shared_layers layers read the cache of an earlier layer of their kind.
        if shared >= len(kinds):
            raise ConfigError(f"{cfg.source}: num_kv_shared_layers = {shared} leaves no layer holding a cache "
                              f"({len(kinds)} layers); fix the config")
        kinds = kinds[: len(kinds) - shared] + ["none"] * shared
        findings.note(f"the last {shared} layers (num_kv_shared_layers) reuse earlier layers' KV cache and hold none")
    return kinds


def _attention_kinds(cfg: _Config, layers: int, findings: _Findings, blocks: list[_Block] | None) -> list[str]:
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
    if _hybrid_pattern(cfg) is not None:
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
    if pattern is not None and cfg.raw(*_WINDOW_KEYS)[0] is None:
        return ["full"] * layers  # EXAONE 4 / Gemma 3 with sliding_window null: every layer attends fully
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
    if has_window:
        findings.note("sliding_window with no per-layer layout (layer_types, a pattern or use_sliding_window): "
                      "every layer slides, as Mistral's do")
    return ["sliding" if has_window else "full"] * layers


def _kinds_from_attn_type_list(cfg: _Config, layers: int, findings: _Findings) -> list[str]:
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


# linear_attn_config keys: read, or known not to change the cache (the gate's parametrisation).
_KDA_READ = {"kda_layers", "full_attn_layers", "num_heads", "head_dim", "short_conv_kernel_size"}
_KDA_HARMLESS = {"gate_lower_bound", "use_full_rank_gate", "use_kda_lora", "kda_use_qk_l2norm_in_kernel"}


def _kda_config(cfg: _Config) -> dict:
    """Kimi-Linear's linear_attn_config, its keys checked: an unknown one that could shape the state stops the import
    (num_k_heads / head_k_dim would change the conv state vLLM's kda_state_shape sizes)."""
    key, value = cfg.raw("linear_attn_config")
    if not isinstance(value, dict):
        raise ConfigError(f"{cfg.source}: linear_attn_config is {_show(value)}, not an object; fix the config")
    for inner in value:
        if inner not in _KDA_READ and inner not in _KDA_HARMLESS and value[inner] is not None:
            raise ConfigError(f"{cfg.source}: linear_attn_config.{inner} = {_show(value[inner])} could change the KDA "
                              "state and kvreg does not understand it; enter this model by hand")
    return value


def _kinds_from_kda_config(cfg: _Config, layers: int) -> list[str]:
    """Kimi-Linear: linear_attn_config.kda_layers and full_attn_layers number the layers from 1 (vLLM's
    KimiLinearConfig.is_kda_layer: ``layer_idx + 1 in kda_layers``); KDA layers keep a state, the others MLA."""
    kda = _kda_config(cfg)
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


def _kinds_from_full_attn_idxs(cfg: _Config, layers: int) -> list[str]:
    """LFM2's first configs: full_attn_idxs numbers the attention layers from 0; every other layer is a short
    convolution (transformers' and vLLM's Lfm2Config build layer_types so when it is absent)."""
    _, idxs = cfg.raw("full_attn_idxs")
    if not isinstance(idxs, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers
                                             for i in idxs):
        raise ConfigError(f"{cfg.source}: full_attn_idxs must list layer numbers from 0 to {layers - 1}; fix the config")
    return ["full" if i in idxs else "linear" for i in range(layers)]


def _kinds_from_swa_flags(cfg: _Config, layers: int) -> list[str]:
    """MiMo-V2-Flash: hybrid_layer_pattern lists 1 for a sliding-window layer (its own swa_* heads, a window of
    sliding_window_size) and 0 for a full-attention layer, as vLLM's mimo_v2_flash.py reads it."""
    _, flags = cfg.raw("hybrid_layer_pattern")
    if not isinstance(flags, list) or len(flags) != layers or any(f not in (0, 1) or f is True or f is False
                                                                  for f in flags):
        raise ConfigError(f"{cfg.source}: hybrid_layer_pattern must list 0 (full) or 1 (sliding) for each of the "
                          f"{layers} layers; fix the config")
    return ["sliding" if f == 1 else "full" for f in flags]


def _kinds_from_pattern_string(cfg: _Config, layers: int, pattern: str) -> list[str]:
    """EXAONE 4: sliding_window_pattern "LLLG" repeats over the layers, L local (sliding), G global, and
    the last layer is global whatever the pattern says there (Exaone4Config's check_is_sliding:
    ``layer_idx != num_hidden_layers - 1 and pattern[layer_idx % len(pattern)] == "L"``)."""
    if not pattern or set(pattern) - set("LG"):
        raise ConfigError(f"{cfg.source}: sliding_window_pattern {_show(pattern)} is not a string of L (local) and "
                          "G (global) layers; fix the config")
    if cfg.raw(*_WINDOW_KEYS)[0] is None:
        return ["full"] * layers
    return ["sliding" if i != layers - 1 and pattern[i % len(pattern)] == "L" else "full" for i in range(layers)]


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


_BLOCK_TYPES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _hybrid_pattern(cfg: _Config) -> str | None:
    """Nemotron-H's block pattern: hybrid_override_pattern, or newer configs' layers_block_type list
    ("mamba", "attention", "mlp", "moe") written as the same characters."""
    key, value = cfg.raw("hybrid_override_pattern", "layers_block_type")
    if key == "layers_block_type":
        if not isinstance(value, list) or not all(isinstance(v, str) and v in _BLOCK_TYPES for v in value):
            raise ConfigError(f"{cfg.source}: layers_block_type must list {', '.join(_BLOCK_TYPES)} blocks; "
                              "an unknown block type could change the cache: enter this model by hand")
        return "".join(_BLOCK_TYPES[v] for v in value)
    return value


def _kinds_from_hybrid_pattern(cfg: _Config, layers: int, findings: _Findings) -> list[str]:
    """Nemotron-H: 'M' Mamba2, '*' attention, '-' MLP and 'E' MoE blocks, one character per block."""
    pattern = _hybrid_pattern(cfg)
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


def _layout(cfg: _Config, kinds: list[str], blocks: list[_Block] | None = None) -> dict:
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
        window = cfg.count(_WINDOW_KEYS, "sliding window size for the sliding layers", maximum=MAX_TOKENS)
    if chunked:
        chunk = cfg.count(("attention_chunk_size",), "chunk size for the chunked layers", maximum=MAX_TOKENS)
    return {
        "layers": len(kinds) - kinds.count("none"), "full_layers": kinds.count("full"),
        "sliding_layers": sliding, "sliding_window": window,
        "chunked_layers": chunked, "attention_chunk_size": chunk,
        "linear_layers": kinds.count("linear"), "no_cache_layers": kinds.count("none"),
    }


# -------------------------------------------------------------------------------- linear state


def _state_kind(cfg: _Config) -> str:
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


def _linear_state(cfg: _Config) -> tuple[int, int, int]:
    """(state elements per sequence per linear layer, of which conv state, head count it shards by under TP);
    the rest is the recurrent state. Each shape is vLLM's MambaStateShapeCalculator's
    (vllm/model_executor/layers/mamba/mamba_utils.py) for that layer, at TP1."""
    kind = _state_kind(cfg)
    if kind == "kda":
        # Kimi Delta Attention (kda_state_shape): a conv state over q, k and v of num_heads x head_dim channels
        # each, (short_conv_kernel_size - 1) deep, and one head_dim x head_dim matrix per head.
        kda = _kda_config(cfg)
        heads = _whole(kda.get("num_heads"), "linear_attn_config.num_heads", cfg.source)
        dim = _whole(kda.get("head_dim"), "linear_attn_config.head_dim", cfg.source)
        kernel = _whole(kda.get("short_conv_kernel_size"), "linear_attn_config.short_conv_kernel_size", cfg.source,
                        minimum=2)
        conv = 3 * heads * dim * (kernel - 1)
        return conv + heads * dim * dim, conv, heads
    if kind == "lightning":
        # MiniMax lightning attention (linear_attention_state_shape): num_attention_heads x head_dim x head_dim,
        # no conv state; vLLM's minimax_text_01.py passes num_attention_heads and head_dim.
        heads = cfg.count(_HEAD_KEYS, "attention head count")
        dim = _head_dim(cfg, heads)
        return heads * dim * dim, 0, heads
    if kind == "short_conv":
        # LFM2 short convolution (short_conv_state_shape): hidden_size channels, conv_L_cache - 1 deep, sharded
        # over TP by channel (vLLM's lfm2.py passes hidden_size; transformers' Lfm2Config defaults conv_L_cache to 3)
        hidden = cfg.count(_HIDDEN_KEYS, "hidden size (the short convolution's channels)")
        key, cache = cfg.raw("conv_L_cache")
        depth = 3 if key is None else _whole(cache, key, cfg.source, minimum=2)
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


def _linear_fields(cfg: _Config, linear_layers: int, findings: _Findings) -> dict:
    """The state shape and dtype. vLLM keeps the recurrent (SSM) state in the config's mamba_ssm_cache_dtype
    (Nemotron-H) or mamba_ssm_dtype (Qwen3.5) and the conv state in the model dtype. The row holds one
    state dtype, so when the two differ the conv elements are counted in units of the state dtype's
    bytes (conv x its bytes / state bytes): the bytes per sequence come out exact."""
    elements = recurrent = heads = dtype = None
    if linear_layers:
        elements, conv, heads = _linear_state(cfg)
        recurrent = elements - conv
        key, value = cfg.raw("mamba_ssm_cache_dtype", "mamba_ssm_dtype")
        if _state_kind(cfg) == "kda":
            # vLLM's MambaStateDtypeCalculator.kda_state_dtype returns (model dtype, torch.float32): the recurrent
            # state is float32 whatever the model dtype, the conv state in the model dtype.
            key, value = "kda_state_dtype", "float32"
        elif _state_kind(cfg) in ("lightning", "short_conv"):
            # vLLM's linear_attention_state_dtype and short_conv_state_dtype: one tensor in the model dtype
            # (--mamba-cache-dtype auto), no separate SSM dtype; not split (SGLang's float32 SSM rule does not apply)
            key, recurrent = None, None
        if key is not None and value != "auto":
            dtype = _TORCH_DTYPES.get(value) if isinstance(value, str) else None  # lists are unhashable
            if dtype is None:
                raise ConfigError(
                    f"{cfg.source}: {key} {_show(value)} is not one of "
                    f"{', '.join(sorted(_TORCH_DTYPES))} or auto; fix the config"
                )
            model = _model_dtype(cfg)
            if WEIGHT_BYTES[model] != WEIGHT_BYTES[dtype]:
                scaled = conv * WEIGHT_BYTES[model] / WEIGHT_BYTES[dtype]
                if scaled.is_integer():
                    elements = elements - conv + int(scaled)
                    findings.note(
                        f"recurrent state in {dtype} ({key}), conv state in the model dtype {model}: the "
                        f"{conv:,} conv elements per layer count as {int(scaled):,} {dtype} elements "
                        f"(linear_state_elements_per_layer {elements:,})"
                    )
    kind = {"gdn": "gated_deltanet"}.get(_state_kind(cfg), _state_kind(cfg)) if linear_layers else None
    return {"linear_state_elements_per_layer": elements, "linear_recurrent_elements_per_layer": recurrent,
            "linear_state_heads": heads, "linear_state_dtype": dtype, "linear_state_kind": kind or None}


def _model_dtype(cfg: _Config) -> str:
    """The dtype activations and unquantized state run in: torch_dtype (bf16 when the config names none)."""
    _, value = cfg.raw("torch_dtype", "dtype")
    return _TORCH_DTYPES.get(value, "bf16") if isinstance(value, str) else "bf16"


# ------------------------------------------------------------------------------ dtype, context


def _weight_dtype(cfg: _Config, findings: _Findings) -> str:
    """Native weight dtype: the quantization format when the checkpoint ships quantized, else torch_dtype."""
    _, quant = cfg.raw("quantization_config")
    if quant is not None:
        if not isinstance(quant, dict):
            raise ConfigError(f"{cfg.source}: quantization_config is not an object; fix the config")
        _kv_cache_quantization_note(quant, findings)
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


def _kv_cache_quantization_note(quant: dict, findings: _Findings) -> None:
    """A checkpoint that ships KV-cache scales (modelopt / compressed-tensors kv_cache_scheme, or
    kv_cache_quant_algo) is meant to be served with an 8-bit cache; the KV dtype is a question of the
    deployment (--kv-dtype), not a column of the model, so the import says so and changes nothing."""
    scheme, algo = quant.get("kv_cache_scheme"), quant.get("kv_cache_quant_algo")
    if isinstance(scheme, dict) and scheme.get("num_bits") == 8:
        kind = "fp8" if scheme.get("type") == "float" else "int8"
        findings.note(f"quantization_config.kv_cache_scheme: the checkpoint ships {kind} KV-cache scales; served "
                      f"with --kv-cache-dtype {kind}, ask kvreg with --kv-dtype {kind}")
    elif isinstance(algo, str) and algo.upper() == "FP8":
        findings.note("quantization_config.kv_cache_quant_algo FP8: the checkpoint ships fp8 KV-cache scales; served "
                      "with --kv-cache-dtype fp8, ask kvreg with --kv-dtype fp8")


def _quantized_dtype(quant: dict, findings: _Findings) -> str | None:
    """Our dtype name for a quantization_config, or None when the format is not recognised."""
    method = str(quant.get("quant_method", "")).lower()
    if method == "fp8":
        # fmt "e4m3" (DeepSeek), or torch's dtype name "float8_e4m3fn" (MiniMax-M2.7)
        fmt = str(quant.get("fmt", "e4m3")).lower().removeprefix("float8_").removesuffix("fn")
        return {"e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2"}.get(fmt)
    if method == "mxfp4":
        findings.note(
            "weights are MXFP4 (4-bit e2m1 + one 8-bit scale per 32 values, on the MoE experts; attention, "
            "router and embeddings stay bf16): recorded as fp4, scales and bf16 parts not counted"
        )
        return "fp4"
    if method == "nvfp4" or str(quant.get("quant_algo", "")).upper() == "NVFP4":
        return "nvfp4"
    if method in ("modelopt", "") and str(quant.get("quant_algo", "")).upper() == "FP8":
        return "fp8_e4m3"  # ModelOpt; some of its configs name no quant_method (producer modelopt)
    if method == "compressed-tensors":
        return _compressed_tensors_dtype(quant, findings)
    if method in ("awq", "gptq") or method.startswith("gptq"):
        bits = quant.get("bits")
        return {4: "int4", 8: "int8"}.get(bits) if isinstance(bits, int) else None
    if method == "bitsandbytes":
        if quant.get("load_in_4bit"):
            return "int4"
        return "int8" if quant.get("load_in_8bit") else None
    return None


def _compressed_tensors_dtype(quant: dict, findings: _Findings) -> str | None:
    """compressed-tensors: the weights' format shared by every config_groups entry (num_bits, type, group_size)."""
    groups = quant.get("config_groups")
    weights = [g.get("weights") for g in groups.values() if isinstance(g, dict)] if isinstance(groups, dict) else []
    formats = {(w.get("num_bits"), w.get("type"), w.get("group_size")) for w in weights if isinstance(w, dict)}
    if len(formats) != 1:
        return None
    ((bits, kind, group),) = formats
    dtype = {(4, "int"): "int4", (8, "int"): "int8", (8, "float"): "fp8_e4m3",
             (4, "float"): "nvfp4" if group == 16 else "fp4"}.get((bits, kind))
    if dtype is not None:
        findings.note(f"compressed-tensors weights: {bits}-bit {kind} (config_groups), recorded as {dtype}; the "
                      "modules it ignores stay in torch_dtype and scales are not counted")
    return dtype


def _max_positions(cfg: _Config, findings: _Findings) -> int:
    if cfg.raw(*_MAX_POS_KEYS)[0] is None and cfg.model_type in _FALCON_FAMILIES:
        findings.warn(
            f"config has no max_position_embeddings: {FALCON_CONTEXT} assumed, the context Falcon was trained with"
        )
        return FALCON_CONTEXT
    return cfg.count(_MAX_POS_KEYS, "context length", maximum=MAX_TOKENS)


# ---------------------------------------------------------------------------------- parameters


_EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_topk", "top_k_experts", "num_experts_per_token")
_SHARED_COUNT_KEYS = ("n_shared_experts", "num_shared_expert", "num_shared_experts")


def _moe_shape(cfg: _Config) -> tuple[int, int]:
    """(routed experts, experts per token) of the widest MoE layer; (0, 0) for a dense model.

    Per-layer lists (Hunyuan's moe_topk) are read whole by _mlp_params; this is the summary."""
    key, value = cfg.raw(*_EXPERT_KEYS)
    values = value if isinstance(value, list) else [value]
    experts = max((_whole(v, key, cfg.source, minimum=0) for v in values), default=0) if key else 0
    if experts <= 1:
        return 0, 0
    key, value = cfg.raw(*_TOP_K_KEYS)
    if key is None:
        raise ConfigError(f"{cfg.source}: no experts per token ({_alternatives(_TOP_K_KEYS)}); add it to the config")
    values = value if isinstance(value, list) else [value]
    return experts, max(_whole(v, key, cfg.source) for v in values)


def _moe_layer_flags(cfg: _Config, layers: int) -> list[bool]:
    """Which decoder layers carry experts (DeepSeek/GLM first_k_dense_replace, Qwen mlp_only_layers...)."""
    _, kinds = cfg.raw("mlp_layer_types")
    if isinstance(kinds, list) and len(kinds) == layers and set(kinds) <= {"dense", "sparse"}:
        return [k == "sparse" for k in kinds]  # GLM-5.2: "dense" or "sparse" (MoE) per layer
    _, mlp_only = cfg.raw("mlp_only_layers")
    if not isinstance(mlp_only, (list, type(None))):
        raise ConfigError(f"{cfg.source}: mlp_only_layers is {_show(mlp_only)}, not a list of layer numbers; fix the config")
    dense = set(i for i in mlp_only or [] if isinstance(i, int))
    first_moe = cfg.count(("first_k_dense_replace",), "first MoE layer", required=False, minimum=0) or 0
    step = cfg.count(("decoder_sparse_step", "interleave_moe_layer_step"), "MoE layer step", required=False) or 1
    _, freq_value = cfg.raw("moe_layer_freq")
    if isinstance(freq_value, list):  # MiMo-V2-Flash: a 0/1 flag per layer
        if len(freq_value) != layers or any(f not in (0, 1) for f in freq_value):
            raise ConfigError(f"{cfg.source}: moe_layer_freq lists {len(freq_value)} values but the model has "
                              f"{layers} layers, or values other than 0 and 1; fix the config")
        return [f == 1 and i not in dense for i, f in enumerate(freq_value)]
    freq = cfg.count(("moe_layer_freq",), "MoE layer frequency", required=False) or 1
    return [i not in dense and i >= first_moe and (i + 1) % step == 0 and i % freq == 0 for i in range(layers)]


def _mlp_params(cfg: _Config, hidden: int, moe_flags: list[bool]) -> tuple[int, int]:
    """(all MLP parameters, those used per token) over MLP blocks flagged MoE or dense.

    Expert counts, experts per token, expert widths and shared experts may each be one number or a
    list with one entry per layer (Hunyuan). A shared_expert_intermediate_size of 0 means no shared
    expert (Qwen3-Coder). Gemma 4's enable_moe_block runs a dense MLP beside the experts in every layer."""
    layers = len(moe_flags)
    _, act = cfg.raw("mlp_hidden_act", "hidden_act")
    # Up/down only: the GPT-2 / Falcon families, and Nemotron-H's squared-ReLU MLP; else gated (3 matrices).
    matrices = 2 if cfg.model_type in _PLAIN_MLP_FAMILIES or act == "relu2" else 3
    # Llama 4 names its dense layers' width intermediate_size_mlp (intermediate_size is the expert's)
    dense_width = cfg.count(("intermediate_size_mlp", "intermediate_size", "ffn_hidden_size", "n_inner"), "MLP width",
                            required=False)
    dense = matrices * hidden * (dense_width or 4 * hidden)  # 4 x hidden: GPT-2 / Falcon default
    if not _moe_shape(cfg)[0]:
        return dense * layers, dense * layers
    experts = cfg.per_layer(_EXPERT_KEYS, "expert count", layers, minimum=0)
    top_k = cfg.per_layer(_TOP_K_KEYS, "experts per token", layers)
    width = cfg.per_layer(("moe_intermediate_size", "expert_intermediate_size", "intermediate_size"),
                          "expert MLP width", layers)
    n_shared = cfg.per_layer(_SHARED_COUNT_KEYS, "shared experts", layers, required=False, minimum=0)
    if n_shared is None and cfg.model_type == "llama4_text":
        n_shared = [1] * layers  # Llama4TextMoe: one shared expert of the expert width in every MoE layer, unnamed
    shared_width = cfg.count(("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"),
                             "shared expert width", required=False, minimum=0)
    # The shared experts' width in each MoE layer: Qwen's shared_expert_intermediate_size is one shared expert;
    # Nemotron-H's moe_shared_expert_intermediate_size x n_shared_experts (vLLM nemotron_h.py NemotronHMoE); else
    # n_shared_experts experts of the routed experts' width (DeepSeek, Kimi, GLM, Llama 4).
    if shared_width is not None:
        shared_widths = [shared_width * n for n in n_shared or [1] * layers]
    else:
        shared_widths = [w * n for w, n in zip(width, n_shared or [0] * layers)]
    beside = dense if cfg.flag("enable_moe_block") else 0
    # The routed experts work in a smaller latent width, projected down and up once per layer: Nemotron 3 Super /
    # Ultra (moe_latent_size) and Kimi-K3 (routed_expert_hidden_size; Kimi-Linear leaves it 0 or out). The router
    # and the shared experts keep the full hidden width.
    latent = _moe_latent(cfg)
    expert_in, beside = (latent, beside + 2 * hidden * latent) if latent else (hidden, beside)
    total = active = 0
    for i, is_moe in enumerate(moe_flags):
        if not is_moe or experts[i] <= 1:
            total, active = total + dense, active + dense
            continue
        expert = matrices * expert_in * width[i]
        shared = matrices * hidden * shared_widths[i]
        router = hidden * experts[i]
        total += experts[i] * expert + shared + router + beside
        active += min(top_k[i], experts[i]) * expert + shared + router + beside
    return total, active


def _moe_latent(cfg: _Config) -> int | None:
    """The routed experts' latent width where they work in one (Nemotron 3 moe_latent_size, Kimi-K3
    routed_expert_hidden_size; Kimi-Linear leaves it 0 or out): None without one."""
    return cfg.count(("moe_latent_size", "routed_expert_hidden_size"), "MoE latent width", required=False,
                     minimum=0) or None


def _attention_params(cfg: _Config, att: dict, hidden: int, kind: str = "full") -> int:
    """Projection weights of one attention layer of a kind (biases and norms are noise at this precision)."""
    heads = att["attention_heads"]
    if att["kv_lora_rank"] is None:
        kv_heads = att.get(f"{kind}_kv_heads") or att["kv_heads"]
        dim = att.get(f"{kind}_head_dim") or att["head_dim"]
        v_dim = att.get(f"{kind}_head_dim") or att["v_head_dim"]
        v_heads = 0 if kind == "full" and att.get("k_eq_v_layers") else kv_heads  # K=V: no v_proj
        # q and k at the key width, v and o at the value width (MiMo-V2-Flash: 192 and 128)
        return hidden * (dim * (heads + kv_heads) + v_dim * (v_heads + heads))
    rope, qk_dim, v_dim = att["qk_rope_head_dim"], att["head_dim"], att["v_head_dim"]
    q_rank = cfg.count(("q_lora_rank",), "query rank", required=False)
    query = hidden * q_rank + q_rank * heads * qk_dim if q_rank else hidden * heads * qk_dim
    kv = hidden * (att["kv_lora_rank"] + rope) + att["kv_lora_rank"] * heads * (qk_dim - rope + v_dim)
    return query + kv + heads * v_dim * hidden


def _linear_layer_params(cfg: _Config, hidden: int) -> int:
    """Projection weights of one Gated DeltaNet, Mamba2, KDA, lightning-attention or short-convolution layer."""
    def get(key: str) -> int:  # shapes were validated by _linear_state already
        return cfg.count((key,), key)

    kind = _state_kind(cfg)
    if kind == "kda":
        # q, k, v and o projections of num_heads x head_dim; the forget and output gates' low-rank pairs
        # (hidden -> head_dim -> heads x head_dim); b_proj (one beta per head); three depthwise convolutions
        kda = _kda_config(cfg)
        heads, dim, kernel = kda["num_heads"], kda["head_dim"], kda["short_conv_kernel_size"]
        return 4 * hidden * heads * dim + 2 * (hidden * dim + dim * heads * dim) + hidden * heads + 3 * heads * dim * kernel
    if kind == "lightning":
        # MiniMax: qkv_proj (3 x heads x head_dim), output_gate and out_proj
        heads = cfg.count(_HEAD_KEYS, "attention head count")
        return 5 * hidden * heads * _head_dim(cfg, heads)
    if kind == "short_conv":
        # LFM2 ShortConv: in_proj (B, C, x gates), out_proj, and a depthwise convolution of conv_L_cache taps
        _, depth = cfg.raw("conv_L_cache")
        return 4 * hidden * hidden + hidden * (depth or 3)
    if kind == "gdn":
        keys = get("linear_num_key_heads") * get("linear_key_head_dim")
        values = get("linear_num_value_heads") * get("linear_value_head_dim")
        # in_proj_qkvz + in_proj_ba (two gates per value head) + out_proj
        return hidden * (2 * keys + 2 * values + 2 * get("linear_num_value_heads")) + values * hidden
    inner = get("mamba_num_heads") * get("mamba_head_dim")
    # in_proj (x, z, B, C, dt) + out_proj
    return hidden * (2 * inner + 2 * get("n_groups") * get("ssm_state_size") + get("mamba_num_heads")) + inner * hidden


def _decilm_params(att: dict, hidden: int, blocks: list[_Block]) -> int:
    """DeciLM layers: each its own attention (GQA, a hidden x hidden linear, or nothing) and MLP width."""
    total = 0
    for block in blocks:
        if block.attention == "gqa":
            total += hidden * att["head_dim"] * (2 * att["attention_heads"] + 2 * block.kv_heads)
        elif block.attention == "linear":
            total += hidden * hidden
        total += 3 * hidden * block.ffn_width if block.ffn == "mlp" else hidden * hidden if block.ffn == "linear" else 0
    return total


def _embedding_matrices(cfg: _Config) -> int:
    """The vocab x hidden matrices the checkpoint holds: 1 when tie_word_embeddings is true or left out
    (transformers ties by default; ARCH_DEFAULTS holds the classes that do not), else 2."""
    tied = cfg.flag("tie_word_embeddings")
    return 1 if tied or tied is None else 2


def _rotary_dim(cfg: _Config, att: dict) -> int | None:
    """The elements of a head RoPE rotates where that is not the whole head: rotary_dim (GPT-J, CodeGen), else
    head_dim x partial_rotary_factor (top level, or in rope_parameters); ChatGLM's model file rotates half the
    head (vLLM chatglm.py: rotary_dim // 2). None for the whole head, and for MLA (its qk_rope_head_dim)."""
    head = att["head_dim"]
    if att.get("kv_lora_rank") is not None:
        return None
    _, dim = cfg.raw("rotary_dim")
    if isinstance(dim, int) and not isinstance(dim, bool) and 0 < dim < head:
        return dim
    _, factor = cfg.raw("partial_rotary_factor")
    if factor is None:
        _, rope = cfg.raw("rope_parameters")
        factor = rope.get("partial_rotary_factor") if isinstance(rope, dict) else None
    if isinstance(factor, (int, float)) and not isinstance(factor, bool) and 0 < factor < 1:
        return int(head * factor)
    return head // 2 if cfg.model_type == "chatglm" else None


def _expert_layout(cfg: _Config, layout: dict, blocks: list[_Block] | None) -> dict:
    """experts, expert_intermediate_size and moe_layers: the routed experts of a layer, one expert's width and
    the layers that carry them, when every MoE layer has the same shape (else, and for a dense model, None)."""
    none = {"experts": None, "expert_intermediate_size": None, "moe_layers": None, "expert_hidden_size": None}
    if blocks is not None or not _moe_shape(cfg)[0]:
        return none
    pattern = _hybrid_pattern(cfg)
    all_layers = layout["layers"] + layout["no_cache_layers"]
    flags = [c == "E" for c in pattern if c in "-E"] if isinstance(pattern, str) else _moe_layer_flags(cfg, all_layers)
    _, experts = cfg.raw(*_EXPERT_KEYS)
    _, width = cfg.raw("moe_intermediate_size", "expert_intermediate_size", "intermediate_size")
    if not sum(flags) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (experts, width)):
        return none  # per-layer lists (Hunyuan) have no one shape
    return {"experts": experts, "expert_intermediate_size": width, "moe_layers": sum(flags),
            "expert_hidden_size": _moe_latent(cfg)}


def _estimate_params(cfg: _Config, att: dict, layout: dict, blocks: list[_Block] | None = None) -> tuple[int, int]:
    """(params_total, params_active) from the config's shapes: embeddings + attention + MLP.

    Multi-token-prediction layers (num_nextn_predict_layers) are left out: engines load them only
    for speculative decoding.
    """
    hidden = cfg.count(_HIDDEN_KEYS, "hidden size, needed to estimate the parameter count (or pass --params-b)")
    vocab = cfg.count(("vocab_size", "padded_vocab_size"), "vocabulary size, needed to estimate the "
                      "parameter count (or pass --params-b)", maximum=100_000_000)
    embeddings = vocab * hidden * _embedding_matrices(cfg)
    if blocks is not None:
        total = embeddings + _decilm_params(att, hidden, blocks)
        return total, total
    linear = layout["linear_layers"]
    attention = sum(layout[f"{kind}_layers"] * _attention_params(cfg, att, hidden, kind)
                    for kind in ("full", "sliding", "chunked"))
    if cfg.heads_per_layer is not None or cfg.kv_heads_per_layer is not None:  # each layer's own query / kv heads
        all_layers = layout["layers"] + layout["no_cache_layers"]
        kinds = _attention_kinds(cfg, all_layers, _Findings(), None)
        query = cfg.heads_per_layer or [att["attention_heads"]] * all_layers
        kv = cfg.kv_heads_per_layer or [att["kv_heads"]] * all_layers
        attention = sum(_attention_params(cfg, {**att, "attention_heads": heads, "kv_heads": kv_heads}, hidden, kind)
                        for heads, kv_heads, kind in zip(query, kv, kinds) if kind in ("full", "sliding", "chunked"))
    all_layers = layout["layers"] + layout["no_cache_layers"]
    # Layers that only read another layer's cache (num_kv_shared_layers, Gemma 3n / 4) keep their own
    # attention weights, each of its own kind (Gemma 4 E2B: 16 sliding of 256 and 4 full of 512).
    shared = cfg.count(("num_kv_shared_layers",), "KV-shared layers", required=False, minimum=0) or 0
    if shared:
        shared_kinds = _attention_kinds(cfg, all_layers, _Findings(), None)[-shared:]
        attention += sum(_attention_params(cfg, att, hidden, kind) for kind in shared_kinds)
    attention += linear * _linear_layer_params(cfg, hidden) if linear else 0
    pattern = _hybrid_pattern(cfg)
    if isinstance(pattern, str):
        moe_flags = [c == "E" for c in pattern if c in "-E"]
    else:
        moe_flags = _moe_layer_flags(cfg, all_layers)
    mlp_total, mlp_active = _mlp_params(cfg, hidden, moe_flags)
    if shared and cfg.flag("use_double_wide_mlp"):
        # vLLM's Gemma4DecoderLayer: intermediate_size x 2 on the KV-shared layers (a gated MLP, 3 matrices)
        wide = shared * 3 * hidden * cfg.count(("intermediate_size",), "MLP width")
        mlp_total, mlp_active = mlp_total + wide, mlp_active + wide
    extra = _per_layer_embedding_params(cfg, hidden, all_layers)
    return embeddings + attention + mlp_total + extra, embeddings + attention + mlp_active + extra


def _per_layer_embedding_params(cfg: _Config, hidden: int, layers: int) -> int:
    """Gemma 3n / 4 per-layer embeddings (hidden_size_per_layer_input > 0): a second embedding table of
    vocab_size_per_layer_input x (layers x width), its projection from the hidden state (hidden x layers x
    width), and in every layer a gate (hidden x width) and a projection back (width x hidden). The engine
    loads the table onto the GPU with the rest; Google's "effective" parameter count leaves it out."""
    width = cfg.count(("hidden_size_per_layer_input",), "per-layer input width", required=False, minimum=0)
    if not width:
        return 0
    vocab = cfg.count(("vocab_size_per_layer_input", "vocab_size"), "per-layer embedding vocabulary",
                      maximum=100_000_000)
    return vocab * layers * width + hidden * layers * width + layers * 2 * hidden * width


def _params(cfg: _Config, att: dict, layout: dict, total: int | None, active: int | None,
            findings: _Findings, blocks: list[_Block] | None = None) -> tuple[int, int]:
    """Given counts win; whatever is missing is estimated from the config, with a warning."""
    if total is not None:
        total = _whole(total, "params_total", cfg.source, maximum=10**15)
    if active is not None:
        active = _whole(active, "params_active", cfg.source, maximum=10**15)
    is_moe = _moe_shape(cfg)[0] > 0
    if total is not None and active is None and not is_moe:
        return total, total
    if total is None or active is None:
        est_total, est_active = _estimate_params(cfg, att, layout, blocks)
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
                      params_total: int | None = None, params_active: int | None = None,
                      accept_unknown: bool = False) -> tuple[dict, list[str]]:
    """A model row (keys of ``MODEL_FIELDS``) and the warnings raised while reading ``config``.

    A key that could change the cache and that kvreg does not read stops the import, naming the key;
    ``accept_unknown`` turns that into a warning."""
    row, warnings, _ = _model_from_config(config, name=name, source=source, sha256=sha256, params_total=params_total,
                                          params_active=params_active, accept_unknown=accept_unknown)
    return row, warnings


def _model_from_config(config: dict, *, name: str, source: str, sha256: str | None, params_total: int | None,
                       params_active: int | None, accept_unknown: bool) -> tuple[dict, list[str], dict]:
    """model_from_config, plus what `kvreg model check` shows beside the row: every assumption one by
    one, and where the parameter counts came from."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: config is a {_json_type(config)}, not a JSON object; pass a config.json")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{source}: the model needs a name; pass --name")
    cfg, findings = _Config(config, source), _Findings()
    _check_unknown_keys(cfg, findings, accept_unknown)
    layers = cfg.count(_LAYER_KEYS, "layer count", required=cfg.raw("layers_block_type")[0] is None)
    if layers is None:
        layers = len(_hybrid_pattern(cfg))  # Nemotron 3: layers_block_type lists every block
    blocks = None
    if cfg.raw("block_configs")[0] is not None:
        blocks = _decilm_blocks(cfg, layers, cfg.count(_HEAD_KEYS, "attention head count"), findings, accept_unknown)
    att = _attention(cfg, findings, blocks)
    _per_layer_query_heads(cfg, layers, att, findings)
    kinds = _layer_kinds(cfg, layers, findings, blocks)
    att.update(_kind_heads(cfg, att, kinds, findings))
    groups = _kv_head_groups(cfg, att, kinds, findings)
    layout = _layout(cfg, kinds, blocks)
    linear = _linear_fields(cfg, layout["linear_layers"], findings)  # validates the state shapes the estimate reads
    total, active = _params(cfg, att, layout, params_total, params_active, findings, blocks)
    if cfg.defaulted:
        findings.note(f"{cfg.model_type} architecture defaults used (the config leaves them out): "
                      + ", ".join(f"{k} {_show(v)}" for k, v in cfg.defaulted.items()))
    architectures = config.get("architectures")
    row = {
        "name": name.strip(),
        "architecture": architectures[0] if isinstance(architectures, list) and architectures
        and isinstance(architectures[0], str) else "",
        "family": _text(config.get("model_type")) or cfg.model_type,
        **layout,
        **linear,
        **att,
        **groups,
        "params_total": total,
        "params_active": active,
        "weight_dtype": _weight_dtype(cfg, findings),
        "max_position_embeddings": _max_positions(cfg, findings),
        **_activation_widths(config, cfg.defaults),
        "embedding_matrices": _embedding_matrices(cfg),
        **_expert_layout(cfg, layout, blocks),
        "rotary_dim": _rotary_dim(cfg, att),
        "source": source,
        "source_sha256": sha256,
        "imported_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "notes": "; ".join(findings.notes),
    }
    for key in ("sliding_kv_heads", "sliding_head_dim", "chunked_kv_heads", "chunked_head_dim"):
        row.setdefault(key, None)
    details = {"assumptions": list(findings.notes), "cache_keys_read": findings.read,
               "cache_keys_ignored": findings.ignored,
               "params_from": "given" if params_total is not None else
               "ESTIMATE from the config's shapes (embeddings + attention + MLP)"}
    return row, findings.warnings, details


def _activation_widths(config: dict, defaults: dict | None = None) -> dict:
    """hidden_size, the MLP width a token passes through (MoE: moe_intermediate_size x experts per token)
    and vocab_size: the widths vLLM's profile run holds activations at. A value the config lacks is the
    architecture's default (Gemma 3's text_config leaves vocab_size out), else None."""
    wrapper = next((k for k in _TEXT_CONFIG_KEYS if isinstance(config.get(k), dict)), None)
    text = config[wrapper] if wrapper else config
    text = {**(defaults or {}), **{k: v for k, v in text.items() if v is not None}}

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


def import_path(path: str | pathlib.Path, *, name: str | None = None, params_b: float | None = None,
                accept_unknown: bool = False) -> tuple[dict, list[str]]:
    """Import a config.json file, a model folder holding one, or a Hugging Face cache folder; see explain_path."""
    row, warnings, _ = explain_path(path, name=name, params_b=params_b, accept_unknown=accept_unknown)
    return row, warnings


def explain_path(path: str | pathlib.Path, *, name: str | None = None, params_b: float | None = None,
                 accept_unknown: bool = False) -> tuple[dict, list[str], dict]:
    """Import a config.json file, a model folder holding one, or a Hugging Face cache folder
    (``models--org--name``, whose ``snapshots/<revision>`` holds the files).

    Parameter counts, best first: ``params_b`` (billions) when given; the tensor headers of the
    ``*.safetensors`` files beside config.json (exact bytes per dtype, no weights read); the
    ``model.safetensors.index.json`` total size when the shards themselves are absent; else an estimate.
    """
    path = _resolve_hf_cache(pathlib.Path(path))
    config_file = path / "config.json" if path.is_dir() else path
    if path.is_dir() and not config_file.is_file():
        raise ConfigError(f"{path}: folder has no config.json; give the config file or the model folder holding it")
    config, source, sha = read_config(config_file)
    name = name or default_name(config_file)
    quant_from = None
    if config_file.name == "config.json":
        config, quant_from = _with_modelopt_quantization(config, config_file.parent)
    params_total, params_active, how = _given_params(params_b, source), None, None
    if params_total is not None:
        how = f"params_total given: {params_b:g}B (--params-b)"
    elif config_file.name == "config.json":
        weights = read_checkpoint(config_file.parent)
        if weights is not None:
            params_total, params_active, how = _params_from_tensors(weights, config, source)
        else:
            params_total, how = _params_from_index(config_file.parent / INDEX_FILE, config, source)
    row, warnings, details = _model_from_config(config, name=name, source=source, sha256=sha,
                                                params_total=params_total, params_active=params_active,
                                                accept_unknown=accept_unknown)
    if how and params_b is None:  # params x bytes is the checkpoint's size: its 16-bit vocabulary matrices included
        row["embedding_matrices"] = None
    if how:
        row["notes"] = "; ".join(filter(None, [how, row["notes"]]))
        details["params_from"] = how
        details["assumptions"].insert(0, how)
    extra = [quant_from] if quant_from else []
    label = config_file.parent.name if config_file.name == "config.json" else config_file.stem
    if row["weight_dtype"] in ("bf16", "fp16", "fp32") and _QUANTIZED_NAME.search(f"{name} {label}"):
        hint = (f"the name says {_QUANTIZED_NAME.search(f'{name} {label}').group(2)} but the config names no "
                f"quantization kvreg reads: weight_dtype {row['weight_dtype']} from torch_dtype; put the checkpoint's "
                f"{HF_QUANT_FILE} beside config.json, or correct weight_dtype")
        warnings.append(hint)
        extra.append(hint)
    if extra:
        row["notes"] = "; ".join(filter(None, [*extra, row["notes"]]))
        details["assumptions"][:0] = extra
    return row, warnings, details


HF_QUANT_FILE = "hf_quant_config.json"
# A model name that says its weights are quantized (nvidia/...-FP8, ...-NVFP4, ...-AWQ).
_QUANTIZED_NAME = re.compile(r"(?i)(^|[-_. ])(fp8|nvfp4|mxfp4|fp4|awq|gptq|int4|int8|w4a16|w8a8)(?=$|[-_. ])")


def _with_modelopt_quantization(config: dict, folder: pathlib.Path) -> tuple[dict, str | None]:
    """NVIDIA ModelOpt checkpoints (nvidia/...-FP8, ...-NVFP4) often name no quantization in config.json and
    keep it in hf_quant_config.json beside it ({"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo":
    "FP8", ...}}), where vLLM's ModelOpt support reads it. Read as a modelopt quantization_config."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    file = folder / HF_QUANT_FILE
    if config.get("quantization_config") is not None or text.get("quantization_config") is not None \
            or not file.is_file():
        return config, None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{file}: not readable JSON ({exc}); fix or remove it") from None
    quant = data.get("quantization") if isinstance(data, dict) else None
    if not isinstance(quant, dict):
        raise ConfigError(f"{file}: has no \"quantization\" object; fix or remove it")
    algo = quant.get("quant_algo")
    return ({**config, "quantization_config": {"quant_method": "modelopt", **quant}},
            f"quantization from {HF_QUANT_FILE} beside config.json (quant_algo {_show(algo)})")


def _resolve_hf_cache(path: pathlib.Path) -> pathlib.Path:
    """A ``models--org--name`` cache folder -> the snapshot refs/main names (or its only snapshot)."""
    if not (path.is_dir() and path.name.startswith("models--") and (path / "snapshots").is_dir()):
        return path
    ref = path / "refs" / "main"
    if ref.is_file():
        revision = ref.read_text(encoding="utf-8", errors="replace").strip()
        snapshot = path / "snapshots" / revision
        if revision and "/" not in revision and snapshot.is_dir():
            return snapshot
    snapshots = sorted(p for p in (path / "snapshots").iterdir() if p.is_dir())
    if len(snapshots) != 1:
        raise ConfigError(f"{path}: a Hugging Face cache folder with {len(snapshots)} snapshots and no usable "
                          "refs/main; give the snapshots/<revision> folder to import")
    return snapshots[0]


def import_text(text: str | bytes, *, name: str, params_b: float | None = None,
                accept_unknown: bool = False) -> tuple[dict, list[str]]:
    """Import a config given as text (e.g. read from stdin); the row's source is "stdin"."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    config, source, sha = read_config(raw, source_name="stdin")
    return model_from_config(config, name=name, source=source, sha256=sha,
                             params_total=_given_params(params_b, source), accept_unknown=accept_unknown)


def default_name(config_file: pathlib.Path) -> str:
    """``org__Model.json`` -> ``Model``; ``<folder>/config.json`` -> the folder's name (in a Hugging Face
    cache, ``models--org--Model/snapshots/<revision>`` -> ``Model``); else the stem."""
    if config_file.name == "config.json":
        folder = config_file.parent.absolute()
        cache = folder.parent.parent
        if folder.parent.name == "snapshots" and cache.name.startswith("models--"):
            return cache.name.split("--")[-1]
        return folder.resolve().name
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


# ------------------------------------------------------------------------------- safetensors

# Bytes per element of each safetensors dtype (the format's names).
SAFETENSORS_BYTES = {
    "F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2,
    "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
}
MAX_HEADER_BYTES = 100_000_000  # the safetensors format's own limit on its JSON header
# Routed experts' tensors (per-expert or fused), not the shared expert(s).
_EXPERT_TENSOR = re.compile(r"\.experts\.(\d+\.|gate_up_proj|down_proj|w1|w2|w3|gate_proj|up_proj)")


@dataclass
class Checkpoint:
    """What the tensor headers of a checkpoint's safetensors files say (no weights are read)."""

    files: int
    bytes_by_dtype: dict[str, int]
    elements: int
    expert_bytes: int

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_by_dtype.values())


def read_safetensors_header(path: pathlib.Path) -> dict[str, dict]:
    """The tensors of one .safetensors file: {name: {"dtype", "shape", "data_offsets"}}, read from the
    8-byte little-endian header length and the JSON header that follows it."""
    with path.open("rb") as fh:
        size = fh.read(8)
        if len(size) < 8:
            raise ConfigError(f"{path.name}: shorter than a safetensors header; remove the file or pass --params-b")
        length = int.from_bytes(size, "little")
        if length > MAX_HEADER_BYTES:
            raise ConfigError(f"{path.name}: header of {length:,} bytes is larger than safetensors allows; "
                              "remove the file or pass --params-b")
        raw = fh.read(length)
    if len(raw) < length:
        raise ConfigError(f"{path.name}: truncated safetensors header; remove the file or pass --params-b")
    header = _parse(raw.rstrip(b" "), path.name, MAX_HEADER_BYTES)
    header.pop("__metadata__", None)
    return header


def read_checkpoint(folder: pathlib.Path) -> Checkpoint | None:
    """Sum the tensor headers of the checkpoint in `folder`: the shards its index lists (all must be
    present), else every *.safetensors file; None when there is nothing to read."""
    index = folder / INDEX_FILE
    if index.is_file():
        parsed = _parse(_read_file(index, index.name, MAX_INDEX_BYTES), index.name, MAX_INDEX_BYTES)
        weight_map = parsed.get("weight_map")
        if not isinstance(weight_map, dict):
            return None
        files = sorted({folder / f for f in weight_map.values() if isinstance(f, str) and "/" not in f})
        if not files or not all(f.is_file() for f in files):
            return None  # the index alone: its metadata.total_size is read instead
    else:
        files = sorted(folder.glob("*.safetensors"))
        if not files:
            return None
    by_dtype: dict[str, int] = {}
    elements = experts = 0
    for file in files:
        for name, tensor in read_safetensors_header(file).items():
            where = f"{file.name}: tensor {name}"
            if not isinstance(tensor, dict):
                raise ConfigError(f"{where} is not described by an object; the file is damaged")
            dtype, shape, offsets = tensor.get("dtype"), tensor.get("shape"), tensor.get("data_offsets")
            if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                    or not isinstance(offsets, list) or len(offsets) != 2
                    or not all(isinstance(o, int) and o >= 0 for o in offsets) or offsets[1] < offsets[0]):
                raise ConfigError(f"{where} has no valid shape and data_offsets; the file is damaged")
            nbytes, count = offsets[1] - offsets[0], math.prod(shape)
            if dtype in SAFETENSORS_BYTES and nbytes != count * SAFETENSORS_BYTES[dtype]:
                raise ConfigError(f"{where}: {count:,} {dtype} elements cannot take {nbytes:,} bytes; the file is damaged")
            by_dtype[str(dtype)] = by_dtype.get(str(dtype), 0) + nbytes
            elements += count
            experts += nbytes if _EXPERT_TENSOR.search(name) else 0
    return Checkpoint(len(files), by_dtype, elements, experts)


def _params_from_tensors(weights: Checkpoint, config: dict, source: str) -> tuple[int, int, str]:
    """params_total / params_active so that params x the weight dtype's bytes is the checkpoint's exact size:
    the tensor element count itself when every tensor is stored in the weight dtype; for a MoE, the
    routed experts' bytes count top-k / experts towards the active parameters."""
    cfg = _Config(config, source)
    dtype = _weight_dtype(cfg, _Findings())
    per = WEIGHT_BYTES[dtype]
    total_bytes = weights.total_bytes
    if total_bytes <= 0:
        raise ConfigError(f"{source}: the safetensors files hold no tensors; remove them or pass --params-b")
    experts, top_k = _moe_shape(cfg)
    active_bytes = total_bytes - (weights.expert_bytes * (experts - top_k) / experts if experts else 0)
    total, active = round(total_bytes / per), max(1, round(active_bytes / per))
    shown = ", ".join(f"{d} {b:,} B" for d, b in sorted(weights.bytes_by_dtype.items()))
    how = (f"params_total from the tensor headers of {weights.files} safetensors file(s): {total_bytes:,} B "
           f"({shown}) / {per:g} B per {dtype} param; {weights.elements:,} tensor elements")
    if experts:
        how += (f"; params_active counts {top_k} of {experts} routed experts' {weights.expert_bytes:,} B")
    return total, active, how


# --------------------------------------------------------------------------- a batch's messages

_ESTIMATE = re.compile(r"^(params_total|params_active) (\d[\d.,]*B) is an ESTIMATE from the config (\([^)]*\))(.*)$")


def batch_warnings(imported: list[tuple[str, list[str], bool]]) -> list[str]:
    """The warnings of an import, one per kind for the whole batch rather than one per model.

    `imported`: per model, (its name, its warnings, whether the registry kept its own parameter
    counts: an update by --replace from an estimate). A kept count's ESTIMATE warning is dropped (the
    estimate was not stored); the other ESTIMATEs become one line per count naming each model with
    its estimate; any other warning the same for several models becomes one line naming them."""
    estimates: dict[tuple[str, str, str], list[str]] = {}
    others: dict[str, list[str]] = {}
    for name, warns, kept_params in imported:
        for w in warns:
            m = _ESTIMATE.match(w)
            if m:
                if not kept_params:
                    estimates.setdefault((m.group(1), m.group(3), m.group(4)), []).append(f"{name} {m.group(2)}")
            else:
                others.setdefault(w, []).append(name)
    out = []
    for (count, how, advice), models in estimates.items():
        what = "models" if len(models) > 1 else "model"
        out.append(f"{count} is an ESTIMATE from the config {how} for {len(models)} {what}: {', '.join(models)}"
                   f"{advice}")
    out += [f"{', '.join(models)}: {w}" for w, models in others.items()]
    return out
