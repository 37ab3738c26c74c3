"""Attention heads and widths: query and kv heads (per kind, per layer group), head widths, MLA latents and the
sparse-attention indexer cache."""

from __future__ import annotations

import math

from kvreg.figures.inputs import KV_GROUPS

from .config import (
    HEAD_DIM_KEYS, HEAD_KEYS, HIDDEN_KEYS, KV_HEAD_KEYS, LAYER_KEYS, MHA_FAMILIES, Config, ConfigError, Findings,
    alternatives, json_type, whole_number,
)
from .layers import Block


def _is_mla(cfg: Config) -> bool:
    return cfg.raw("kv_lora_rank")[0] is not None and cfg.raw("qk_rope_head_dim")[0] is not None


def attention_fields(cfg: Config, findings: Findings, blocks: list[Block] | None = None) -> dict:
    """Heads and head widths; MLA models also get their latent width."""
    heads = cfg.count(HEAD_KEYS, "attention head count")
    kv_heads = _blocks_kv_heads(cfg, blocks, heads) if blocks is not None else _kv_heads(cfg, heads, findings)
    if _is_mla(cfg):
        return _mla_attention(cfg, heads, kv_heads)
    if heads % kv_heads:
        kv_key = cfg.raw(*KV_HEAD_KEYS, "multi_query_group_num")[0]
        raise ConfigError(
            f"{cfg.source}: {kv_key} = {kv_heads} does not divide the {heads} attention heads; "
            "each kv head serves a whole group of query heads: fix the config"
        )
    head_dim = head_width(cfg, heads)
    # V may be narrower than K (MiMo-V2-Flash: K 192, V 128; vLLM caches each at its own width)
    v_head_dim = cfg.count(("v_head_dim",), "value head width", required=False) or head_dim
    return {
        "attention_heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "v_head_dim": v_head_dim,
        "kv_lora_rank": None, "qk_rope_head_dim": None,
    }


def kind_heads(cfg: Config, att: dict, kinds: list[str], findings: Findings) -> dict:
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


def _swa_heads(cfg: Config, att: dict, kinds: list[str]) -> dict:
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


def per_layer_query_heads(cfg: Config, layers: int, att: dict, findings: Findings) -> None:
    """Laguna: num_attention_heads_per_layer gives each layer its own query heads; the K/V projections keep
    num_key_value_heads in every layer (vLLM's and transformers' Laguna attention), so the cache is an ordinary
    one. Each count must be a whole number of kv head groups, and divide by TP as num_attention_heads does."""
    key, value = cfg.raw("num_attention_heads_per_layer")
    if key is None:
        return
    if not isinstance(value, list) or len(value) != layers:
        size = f"{len(value)} entries" if isinstance(value, list) else f"a {json_type(value)}"
        raise ConfigError(f"{cfg.source}: {key} has {size} but the model has {layers} layers; fix the config")
    counts = [whole_number(v, f"{key}[{i}]", cfg.source) for i, v in enumerate(value)]
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


def _kv_heads(cfg: Config, heads: int, findings: Findings) -> int:
    """KV head count across the families' spellings; missing means one per attention head (MHA)."""
    # Falcon-7B / StarCoder: multi_query means one shared K/V head, unless Falcon's
    # new_decoder_architecture (40B/180B in the transformers format) says to read num_kv_heads.
    if cfg.flag("multi_query") and not cfg.flag("new_decoder_architecture"):
        return 1
    per_layer = _kv_head_list(cfg)
    if per_layer is not None:
        return _most_common(per_layer)
    if cfg.raw(*KV_HEAD_KEYS)[0] is not None:
        return cfg.count(KV_HEAD_KEYS, "kv head count")
    if cfg.raw("multi_query_group_num")[0] is not None:
        # ChatGLM reads multi_query_group_num only when multi_query_attention is on.
        if cfg.flag("multi_query_attention"):
            return cfg.count(("multi_query_group_num",), "kv group count")
        findings.warn("multi_query_group_num ignored: multi_query_attention is not true, so every head has its own K/V")
        return heads
    if cfg.model_type not in MHA_FAMILIES:
        # Never silently: a config that leaves the kv heads out (or null) may hide a per-layer layout.
        findings.warn(f"no kv head count ({alternatives(KV_HEAD_KEYS)}): multi-head attention assumed, "
                      f"{heads} kv heads (one per attention head); check the model card")
    return heads


def _kv_head_list(cfg: Config) -> list[int] | None:
    """Per-layer kv heads given as a list, one count per layer: num_key_value_heads_per_layer (DeciLM-7B), or a
    num_key_value_heads that is a list; None when the config gives one count for every layer."""
    key, value = cfg.raw("num_key_value_heads_per_layer", *KV_HEAD_KEYS)
    if not isinstance(value, list):
        return None
    layers = cfg.count(LAYER_KEYS, "layer count")
    if len(value) != layers:
        raise ConfigError(f"{cfg.source}: {key} lists {len(value)} values but the model has {layers} layers; fix the config")
    counts = [whole_number(v, f"{key}[{i}]", cfg.source) for i, v in enumerate(value)]
    cfg.kv_heads_per_layer = counts
    return counts


def _most_common(counts: list[int | None]) -> int:
    """The kv head count most attention layers hold (the larger on a tie): the row's kv_heads."""
    held = [c for c in counts if c is not None]
    return max(set(held), key=lambda c: (held.count(c), c))


def kv_head_groups(cfg: Config, att: dict, kinds: list[str], findings: Findings) -> dict:
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
        cfg.raw("num_key_value_heads_per_layer", *KV_HEAD_KEYS)[0]
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


def _blocks_kv_heads(cfg: Config, blocks: list[Block], heads: int) -> int:
    """The kv head count most attention layers of a DeciLM model hold (Llama-Nemotron Super/Ultra: all of them);
    layers with another count (n_heads_in_group varying by layer) become groups of their own (kv_head_groups)."""
    cfg.kv_heads_per_layer = [block.kv_heads for block in blocks]
    if all(count is None for count in cfg.kv_heads_per_layer):
        return heads
    return _most_common(cfg.kv_heads_per_layer)


def head_width(cfg: Config, heads: int) -> int:
    """Explicit head_dim wins (Qwen3, Gemma, gpt-oss set one != hidden/heads); else hidden // heads."""
    explicit = cfg.count(HEAD_DIM_KEYS, "head width", required=False)
    if explicit is not None:
        return explicit
    hidden = cfg.count(HIDDEN_KEYS, "head width: no head_dim, and no hidden size to derive it from")
    if hidden % heads:
        raise ConfigError(
            f"{cfg.source}: hidden_size {hidden} is not divisible by {heads} attention heads and there is "
            "no head_dim; add head_dim to the config"
        )
    return hidden // heads


def _mla_attention(cfg: Config, heads: int, kv_heads: int) -> dict:
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


def _indexer(cfg: Config) -> dict:
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
        layers = cfg.count(LAYER_KEYS, "layer count")
        if not isinstance(types, list) or len(types) != layers or any(t not in ("full", "shared") for t in types) \
                or types[0] != "full":
            raise ConfigError(f"{cfg.source}: indexer_types must list \"full\" or \"shared\" for each of the {layers} "
                              "layers, the first one \"full\"; fix the config")
        full = types.count("full")
        if full < layers:
            out["indexer_layers"] = full
    return out
