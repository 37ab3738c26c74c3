"""The config as the importer reads it: the text model's keys first (a multimodal wrapper's text_config,
llm_config or language_config), then the top level, then the family defaults transformers' config classes fill
in; one-line ConfigErrors; what the import assumed (Findings)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from kvreg.core.errors import UserError


MAX_COUNT = 1_000_000  # layers, heads, widths: anything larger is a typo or an attack
MAX_TOKENS = 1_000_000_000  # context lengths and windows (Llama 4 Scout claims 10,485,760)


LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
KV_HEAD_KEYS = ("num_key_value_heads", "n_head_kv", "num_kv_heads")
HEAD_DIM_KEYS = ("head_dim", "kv_channels", "attention_head_dim")
HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model")
# model_max_length: Kimi-Linear names its context only there (vLLM's _get_and_verify_max_len reads it too)
MAX_POS_KEYS = ("max_position_embeddings", "seq_length", "n_positions", "model_max_length")
WINDOW_KEYS = ("sliding_window", "sliding_window_size")

FALCON_FAMILIES = {"falcon", "RefinedWeb", "RefinedWebModel"}
# Families whose attention is multi-head by design: their configs have no kv-head key to read.
MHA_FAMILIES = {"gpt2", "gpt_neox", "gptj", "bloom", "opt", "phi", "mpt"}
FALCON_CONTEXT = 2048  # the context Falcon-7B/40B were trained with; their first configs omit it
# Families whose MLP is up/down only (2 matrices); every other family is gated (3 matrices).
PLAIN_MLP_FAMILIES = FALCON_FAMILIES | {"gpt2", "gpt_neox", "gptj", "gpt_bigcode", "bloom", "opt", "phi", "mpt"}


# Wrappers (vision-language and other multimodal configs) that nest the language model's config; vLLM's
# get_hf_text_config reads the first of these that is set.
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config")


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


class ConfigError(UserError, ValueError):
    """A config that cannot be imported; the one-line message names the file, the problem and the fix."""

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))  # one line, whatever was interpolated


def json_type(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), "null")


@dataclass
class Findings:
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


class Config:
    """Key lookup over a config: ``text_config`` first (multimodal checkpoints), then the top level."""

    def __init__(self, config: dict, source: str):
        self.wrapper = next((k for k in TEXT_CONFIG_KEYS if config.get(k) is not None), "text_config")
        text = config.get(self.wrapper)
        if text is not None and not isinstance(text, dict):
            raise ConfigError(f"{source}: {self.wrapper} is a {json_type(text)}, not an object; fix the config")
        self.top, self.text, self.source = config, text or {}, source
        # The text model's type drives the family defaults (gemma2 vs gemma3, llama4_text...).
        self.model_type = text_of(self.text.get("model_type")) or text_of(config.get("model_type"))
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
                raise ConfigError(f"{self.source}: no {what} ({alternatives(keys)}); add it to the config")
            return None
        if isinstance(value, list):
            if len(value) != layers:
                raise ConfigError(
                    f"{self.source}: {key} lists {len(value)} values but the model has {layers} layers; fix the config"
                )
            return [whole_number(v, f"{key}[{i}]", self.source, minimum=minimum) for i, v in enumerate(value)]
        return [whole_number(value, key, self.source, minimum=minimum)] * layers

    def count(self, keys: tuple[str, ...], what: str, *, required: bool = True, minimum: int = 1,
              maximum: int = MAX_COUNT) -> int | None:
        """A whole number from the first of ``keys`` present; missing and ``required`` is an error."""
        key, value = self.raw(*keys)
        if key is None:
            if required:
                raise ConfigError(
                    f"{self.source}: no {what} ({alternatives(keys)}); add it to the config, "
                    "or enter this model by hand"
                )
            return None
        return whole_number(value, key, self.source, minimum=minimum, maximum=maximum)

    def flag(self, key: str) -> bool | None:
        """A JSON boolean, or None when absent."""
        _, value = self.raw(key)
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{self.source}: {key} is {show_value(value)}, not true or false; fix the config")
        return value

    def missing(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"{self.source}: no {key}, needed because {why}; add it to the config")


def text_of(value: Any) -> str:
    return value if isinstance(value, str) else ""


def alternatives(keys: tuple[str, ...]) -> str:
    return keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " or " + keys[-1]


def show_value(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def whole_number(value: Any, key: str, source: str, *, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """``value`` as an int in [minimum, maximum]; bools, strings, fractions, NaN and inf are errors."""
    shown = show_value(value)  # as the config wrote it: 1e+308, not its 309 digits
    ok = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        ok, value = True, int(value)
    if not ok:
        raise ConfigError(f"{source}: {key} is {show_value(value)}, not a whole number; fix the config")
    if value < minimum:
        bound = "positive" if minimum == 1 else f"at least {minimum}"
        raise ConfigError(f"{source}: {key} is {shown}, it must be {bound}; fix the config")
    if value > maximum:
        raise ConfigError(f"{source}: {key} is {shown}, more than {maximum:,}, which cannot be right; fix the config")
    return value
