"""The model row: a config (or a model folder, a Hugging Face cache folder, stdin) read into the columns of
kvreg.db.tables.Model, with the warnings and, for `kvreg model check`, every assumption and where the parameter
counts came from."""

from __future__ import annotations

import datetime as _dt
import json
import math
import pathlib
import re

from kvreg.core.limits import MAX_CONFIG_BYTES, MAX_DEPTH, MB, depth
from kvreg.figures.engine_defaults import TOWER_BYTES_PER_PARAM

from .attention import attention_fields, kind_heads, kv_head_groups, per_layer_query_heads
from .checkpoint import params_from_index, params_from_tensors, read_checkpoint
from .config import (
    HEAD_KEYS, LAYER_KEYS, TEXT_CONFIG_KEYS, Config, ConfigError, Findings, json_type, show_value, text_of,
)
from .dtypes import WEIGHT_BYTES, max_positions, weight_dtype
from .keys import check_unknown_keys
from .layers import decilm_blocks, hybrid_pattern, layer_kinds, layout_counts
from .params import embedding_matrices, expert_layout, param_counts, rotary_dim
from .read import INDEX_FILE, read_config, read_file
from .state import linear_fields
from .tower import tower_fields


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
        raise ConfigError(f"{source}: config is a {json_type(config)}, not a JSON object; pass a config.json")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{source}: the model needs a name; pass --name")
    cfg, findings = Config(config, source), Findings()
    check_unknown_keys(cfg, findings, accept_unknown)
    layers = cfg.count(LAYER_KEYS, "layer count", required=cfg.raw("layers_block_type")[0] is None)
    if layers is None:
        layers = len(hybrid_pattern(cfg))  # Nemotron 3: layers_block_type lists every block
    blocks = None
    if cfg.raw("block_configs")[0] is not None:
        blocks = decilm_blocks(cfg, layers, cfg.count(HEAD_KEYS, "attention head count"), findings, accept_unknown)
    att = attention_fields(cfg, findings, blocks)
    per_layer_query_heads(cfg, layers, att, findings)
    kinds = layer_kinds(cfg, layers, findings, blocks)
    att.update(kind_heads(cfg, att, kinds, findings))
    groups = kv_head_groups(cfg, att, kinds, findings)
    layout = layout_counts(cfg, kinds, blocks)
    linear = linear_fields(cfg, layout["linear_layers"], findings)  # validates the state shapes the estimate reads
    total, active = param_counts(cfg, att, layout, params_total, params_active, findings, blocks)
    if cfg.defaulted:
        findings.note(f"{cfg.model_type} architecture defaults used (the config leaves them out): "
                      + ", ".join(f"{k} {show_value(v)}" for k, v in cfg.defaulted.items()))
    architectures = config.get("architectures")
    row = {
        "name": name.strip(),
        "architecture": architectures[0] if isinstance(architectures, list) and architectures
        and isinstance(architectures[0], str) else "",
        "family": text_of(config.get("model_type")) or cfg.model_type,
        **layout,
        **linear,
        **att,
        **groups,
        "params_total": total,
        "params_active": active,
        "weight_dtype": weight_dtype(cfg, findings),
        "max_position_embeddings": max_positions(cfg, findings),
        **_activation_widths(config, cfg.defaults),
        "embedding_matrices": embedding_matrices(cfg),
        **expert_layout(cfg, layout, blocks),
        "rotary_dim": rotary_dim(cfg, att),
        **tower_fields(cfg, findings),
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
    wrapper = next((k for k in TEXT_CONFIG_KEYS if isinstance(config.get(k), dict)), None)
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
            params_total, params_active, how = params_from_tensors(weights, config, source)
        else:
            params_total, how = params_from_index(config_file.parent / INDEX_FILE, config, source)
    row, warnings, details = _model_from_config(config, name=name, source=source, sha256=sha,
                                                params_total=params_total, params_active=params_active,
                                                accept_unknown=accept_unknown)
    if how and params_b is None:  # params x bytes is the checkpoint's size: its 16-bit vocabulary matrices included
        row["embedding_matrices"] = None
    if how and row.get("tower_params"):
        how = _without_tower(row, how, active_counted=params_active is not None
                             or row["params_active"] == row["params_total"])
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


def _without_tower(row: dict, how: str, *, active_counted: bool) -> str:
    """A count of the whole checkpoint (given, or its safetensors) holds the multimodal tower, which the row keeps
    apart in tower_params at TOWER_BYTES_PER_PARAM bytes a parameter: take its bytes out of params_total and
    params_active (when it too was counted from the checkpoint, not estimated from the text config) so that params x
    the weight dtype's bytes + the tower's bytes is the checkpoint's size."""
    tower = row["tower_params"]
    taken = round(tower * TOWER_BYTES_PER_PARAM / WEIGHT_BYTES[row["weight_dtype"]])
    if taken >= row["params_total"]:
        raise ConfigError(f"{row['source']}: the checkpoint's {row['params_total']:,} params cannot hold the multimodal "
                          f"tower's {tower:,}; give the language model's count with --params-b")
    row["params_total"] -= taken
    row["params_active"] = max(1, min(row["params_active"] - (taken if active_counted else 0), row["params_total"]))
    return (f"{how}, less the multimodal tower's {tower:,} params ({tower * TOWER_BYTES_PER_PARAM:,} B at "
            f"{TOWER_BYTES_PER_PARAM} B a param), kept in tower_params")


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
        raw = read_file(file, HF_QUANT_FILE)  # at most the config's byte limit, as the config itself
    except OSError as exc:  # unreadable: permission denied, an I/O error
        raise ConfigError(f"{file}: not readable ({exc.strerror or exc}); fix or remove it") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{file}: larger than {MAX_CONFIG_BYTES // MB} MB, too big for a quantization file; fix or"
                          " remove it")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: bad JSON, or a 4,300-digit number
        raise ConfigError(f"{file}: not readable JSON ({' '.join(str(exc).split())}); fix or remove it") from None
    if depth(data) > MAX_DEPTH:
        raise ConfigError(f"{file}: nested more than {MAX_DEPTH} levels deep, not a quantization file; fix or remove it")
    quant = data.get("quantization") if isinstance(data, dict) else None
    if not isinstance(quant, dict):
        raise ConfigError(f"{file}: has no \"quantization\" object; fix or remove it")
    algo = quant.get("quant_algo")
    return ({**config, "quantization_config": {"quant_method": "modelopt", **quant}},
            f"quantization from {HF_QUANT_FILE} beside config.json (quant_algo {show_value(algo)})")


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
        raise ConfigError(f"{source}: params_b {show_value(params_b)} is not a parameter count in billions; e.g. 8.03")
    return round(params_b * 1e9)
