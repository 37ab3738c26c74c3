"""Dtypes and context: the weights' native dtype (a quantization the checkpoint names, else torch_dtype), the
model dtype state runs in, and the context length."""

from __future__ import annotations

from .config import FALCON_CONTEXT, FALCON_FAMILIES, MAX_POS_KEYS, MAX_TOKENS, Config, ConfigError, Findings, show_value


# Bytes per parameter of each weight dtype; mirrors kvreg/catalog/dtypes.toml (no DB access here).
WEIGHT_BYTES = {
    "fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0,
    "int4": 0.5, "fp4": 0.5, "nvfp4": 0.5625,
}
TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


def model_dtype(cfg: Config) -> str:
    """The dtype activations and unquantized state run in: torch_dtype (bf16 when the config names none)."""
    _, value = cfg.raw("torch_dtype", "dtype")
    return TORCH_DTYPES.get(value, "bf16") if isinstance(value, str) else "bf16"


def weight_dtype(cfg: Config, findings: Findings) -> str:
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
            f"quantization {show_value(method)} not understood: weight_dtype taken from torch_dtype; "
            "correct the row if the weights are smaller"
        )
    key, value = cfg.raw("torch_dtype", "dtype")
    if key is None:
        findings.warn("config names no torch_dtype: weight_dtype bf16 assumed; correct the row if not")
        return "bf16"
    if not isinstance(value, str) or value not in TORCH_DTYPES:
        raise ConfigError(
            f"{cfg.source}: {key} {show_value(value)} is not one of {', '.join(sorted(TORCH_DTYPES))}; fix the config"
        )
    return TORCH_DTYPES[value]


def _kv_cache_quantization_note(quant: dict, findings: Findings) -> None:
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


def _quantized_dtype(quant: dict, findings: Findings) -> str | None:
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


def _compressed_tensors_dtype(quant: dict, findings: Findings) -> str | None:
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


def max_positions(cfg: Config, findings: Findings) -> int:
    if cfg.raw(*MAX_POS_KEYS)[0] is None and cfg.model_type in FALCON_FAMILIES:
        findings.warn(
            f"config has no max_position_embeddings: {FALCON_CONTEXT} assumed, the context Falcon was trained with"
        )
        return FALCON_CONTEXT
    return cfg.count(MAX_POS_KEYS, "context length", maximum=MAX_TOKENS)
