"""The built-in catalog data (kvreg/catalog/*.toml): names, columns, and the figures SPEC pins.

KV bytes per token are recomputed here by hand from each row's architecture fields and checked
against SPEC's golden figures, so a typo in a data file cannot pass silently.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from pathlib import Path

import pytest

from kvreg.catalog import load_catalog
from kvreg.db.tables import DTYPE_FIELDS, GPU_FIELDS, MODEL_FIELDS

from conftest import HF_CONFIGS

GiB = 2**30
BF16 = 2  # bytes per element

DTYPE_NAMES = [
    "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp8", "int8",
    "int4", "fp4", "nvfp4", "int2", "fp8_ds_mla", "int8_per_token_head", "fp8_per_token_head",
]
GPU_NAMES = [
    "H100-SXM", "H200", "A100-40GB", "A100-80GB", "L40S",
    "RTX-4090", "RTX-5090", "MI300X", "B200", "M3-Ultra",
]
MODEL_NAMES = [
    "Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B",
    "Qwen2.5-7B", "Qwen2.5-7B-Instruct-1M", "Qwen2.5-72B",
    "Qwen3-8B", "Qwen3-235B-A22B", "Qwen3-Next-80B-A3B",
    "Mistral-Large-2411", "Command-R-plus-0824", "Yi-34B-200K",
    "GLM-4-9B-chat-1M", "ChatGLM3-6B-128K", "GLM-4.5",
    "DeepSeek-V2-Chat", "DeepSeek-V3", "Kimi-K2",
    "Llama-2-7B", "Llama-3-8B", "Llama-3-70B",
    "gpt-oss-120b", "falcon-40b", "gemma-2-9b-it",
]
MOE_MODELS = {
    "Qwen3-235B-A22B", "Qwen3-Next-80B-A3B", "GLM-4.5",
    "DeepSeek-V2-Chat", "DeepSeek-V3", "Kimi-K2", "gpt-oss-120b",
}


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def models(catalog):
    return {row["name"]: row for row in catalog["models"]}


@pytest.fixture(scope="module")
def gpus(catalog):
    return {row["name"]: row for row in catalog["gpus"]}


@pytest.fixture(scope="module")
def dtypes(catalog):
    return {row["name"]: row for row in catalog["dtypes"]}


# ---------------------------------------------------------------- shape of the data


def test_catalog_has_exactly_the_three_tables(catalog):
    assert sorted(catalog) == ["demand", "dtypes", "gpus", "models", "plans"]


def test_exact_names(catalog):
    assert [r["name"] for r in catalog["dtypes"]] == DTYPE_NAMES
    assert [r["name"] for r in catalog["gpus"]] == GPU_NAMES
    assert [r["name"] for r in catalog["models"]] == MODEL_NAMES


@pytest.mark.parametrize(
    "key, fields",
    [("dtypes", DTYPE_FIELDS), ("gpus", GPU_FIELDS), ("models", MODEL_FIELDS)],
)
def test_every_key_is_a_column(catalog, key, fields):
    assert "id" not in fields
    for row in catalog[key]:
        unknown = set(row) - set(fields)
        assert not unknown, f"{key} row {row.get('name')!r} has unknown keys {sorted(unknown)}"
        assert all(v is not None for v in row.values())
        assert row["notes"], f"{key} row {row['name']!r} has no notes"


def test_every_row_satisfies_the_schema(catalog):
    """Insert the whole catalog into a fresh SQLite registry: CHECKs and foreign keys must hold."""
    from sqlalchemy import create_engine, event, insert
    from sqlmodel import SQLModel

    from kvreg.db.tables import Dtype, Gpu, Model

    engine = create_engine("sqlite://")

    @event.listens_for(engine, "connect")
    def _foreign_keys_on(dbapi_conn, _record):
        dbapi_conn.execute("PRAGMA foreign_keys=ON")

    SQLModel.metadata.create_all(engine)
    with engine.begin() as conn:
        for key, table in (("dtypes", Dtype), ("gpus", Gpu), ("models", Model)):
            for row in catalog[key]:  # one at a time: rows omit different NULL keys
                conn.execute(insert(table.__table__).values(**row))
        assert conn.exec_driver_sql("SELECT count(*) FROM model").scalar() == len(MODEL_NAMES)


# ---------------------------------------------------------------- dtypes


def test_dtype_bytes_and_kinds_exact(dtypes):
    expected = {
        "fp32": (4, "both"),
        "bf16": (2, "both"),
        "fp16": (2, "both"),
        "fp8_e4m3": (1, "both"),
        "fp8_e5m2": (1, "both"),
        "fp8": (1, "both"),
        "int8": (1, "both"),
        "int4": (0.5, "both"),
        "fp4": (0.5, "both"),
        "nvfp4": (0.5625, "both"),  # 4 bits + one 8-bit scale per 16 elements = 4.5 bits
        "int2": (0.25, "kv"),
        "fp8_ds_mla": (1, "kv"),
    }
    for name, (nbytes, kind) in expected.items():
        assert dtypes[name]["bytes_per_element"] == nbytes, name
        assert dtypes[name]["kind"] == kind, name
    assert dtypes["nvfp4"]["bytes_per_element"] == (4 + 8 / 16) / 8


def test_only_fp8_ds_mla_has_its_own_mla_layout(dtypes):
    # 512 fp8 latent bytes + 4 fp32 scales + 64 bf16 rope elements
    assert dtypes["fp8_ds_mla"]["mla_bytes_per_token_per_layer"] == 512 * 1 + 4 * 4 + 64 * 2 == 656
    others = [n for n, r in dtypes.items() if "mla_bytes_per_token_per_layer" in r and n != "fp8_ds_mla"]
    assert others == []


# ---------------------------------------------------------------- GPUs


def test_gpu_memory_bytes_exact(gpus):
    expected_gib = {
        "H100-SXM": 80, "H200": 141, "A100-40GB": 40, "A100-80GB": 80, "L40S": 48,
        "RTX-4090": 24, "RTX-5090": 32, "MI300X": 192, "B200": 192, "M3-Ultra": 192,
    }
    for name, gib in expected_gib.items():
        assert gpus[name]["memory_bytes"] == gib * GiB, name
        assert isinstance(gpus[name]["memory_bytes"], int)


def test_gpu_bandwidth_exact(gpus):
    expected = {
        "H100-SXM": 3_350_000_000_000, "H200": 4_800_000_000_000,
        "A100-40GB": 1_555_000_000_000, "A100-80GB": 2_039_000_000_000,
        "L40S": 864_000_000_000, "RTX-4090": 1_008_000_000_000, "RTX-5090": 1_792_000_000_000,
        "MI300X": 5_300_000_000_000, "B200": 8_000_000_000_000, "M3-Ultra": 800_000_000_000,
    }
    for name, bw in expected.items():
        assert gpus[name]["memory_bandwidth_bytes_per_s"] == bw, name


def test_gpu_prices_are_nominal(gpus):
    expected = {
        "H100-SXM": (2.5, 30000), "H200": (3.5, 35000), "A100-80GB": (1.6, 15000),
        "A100-40GB": (1.2, 10000), "L40S": (1.0, 9000), "MI300X": (2.5, 20000),
        "B200": (5.0, 45000), "RTX-4090": (0.4, 1800), "RTX-5090": (0.6, 2500),
        "M3-Ultra": (None, 5500),
    }
    for name, (hourly, unit) in expected.items():
        assert gpus[name].get("price_per_hour") == hourly, name
        assert gpus[name]["unit_price"] == unit, name
        assert "nominal" in gpus[name]["notes"], name


TFLOPS = 10**12


def test_gpu_dense_flops_exact(gpus):
    """Dense tensor FLOP/s (no 2:4 sparsity) from the vendors' sheets; None: no units for that dtype."""
    expected = {  # name: (BF16, FP8, FP4) in TFLOPS
        # NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 SXM5: 989.4 / 1,978.9 dense; no FP4
        "H100-SXM": (989.4, 1978.9, None),
        # H200 datasheet: 1,979 / 3,958 with sparsity; the H100 SXM's die and clocks, so its dense figures
        "H200": (989.4, 1978.9, None),
        # A100 datasheet: BF16 312 (624 sparse); Ampere has no FP8 or FP4 units
        "A100-40GB": (312, None, None), "A100-80GB": (312, None, None),
        # L40S datasheet: BF16 362.05 (733 sparse), FP8 733 (1,466 sparse)
        "L40S": (362.05, 733, None),
        # Ada whitepaper appendix, RTX 4090, FP32 accumulate: 165.2 / 330.3 (GeForce's FP16 accumulate is twice)
        "RTX-4090": (165.2, 330.3, None),
        # RTX Blackwell whitepaper appendix, RTX 5090, FP32 accumulate: 209.5 / 419 / 1,676 (3,352 AI TOPS is sparse)
        "RTX-5090": (209.5, 419, 1676),
        # AMD Instinct MI300X datasheet: 1,307.4 / 2,614.9 dense; no FP4 units
        "MI300X": (1307.4, 2614.9, None),
        # HGX B200 datasheet, 8 GPUs with sparsity: BF16 36, FP8 72, FP4 144 PFLOPS -> / 8 GPUs / 2 (dense)
        "B200": (36_000 / 8 / 2, 72_000 / 8 / 2, 144_000 / 8 / 2),
        "M3-Ultra": (None, None, None),  # Apple publishes no tensor FLOP/s
    }
    assert expected["B200"] == (2250, 4500, 9000)
    for name, figures in expected.items():
        got = tuple(gpus[name].get(c) for c in ("flops_bf16_per_s", "flops_fp8_per_s", "flops_fp4_per_s"))
        want = tuple(None if t is None else round(Decimal(str(t)) * TFLOPS) for t in figures)
        assert got == want, name
        assert all(v is None or isinstance(v, int) for v in got), name
        if figures[0] is not None:
            notes = gpus[name]["notes"]
            assert "FLOP/s" in notes and ("datasheet" in notes or "whitepaper" in notes), name


def test_no_fp8_flops_below_compute_capability_8_9(gpus):
    """FP8 tensor units came with Ada and Hopper (8.9, 9.0); FP4 with Blackwell (10.0, 12.0)."""
    for name, g in gpus.items():
        cc = g.get("compute_capability")
        if cc is not None:
            assert (g.get("flops_fp8_per_s") is not None) == (cc >= 8.9), name
            assert (g.get("flops_fp4_per_s") is not None) == (cc >= 10.0), name


# ---------------------------------------------------------------- models: internal consistency


def test_model_rows_are_consistent(models, dtypes):
    for name, m in models.items():
        kinds = m["full_layers"] + m["sliding_layers"] + m["chunked_layers"] + m["linear_layers"]
        assert kinds == m["layers"], name
        assert (m["sliding_layers"] > 0) == ("sliding_window" in m), name
        assert (m["chunked_layers"] > 0) == ("attention_chunk_size" in m), name
        assert (m["linear_layers"] > 0) == ("linear_state_elements_per_layer" in m), name
        assert ("linear_state_elements_per_layer" in m) == ("linear_state_heads" in m), name
        assert ("kv_lora_rank" in m) == ("qk_rope_head_dim" in m), name
        if "kv_lora_rank" in m:
            assert m["full_layers"] == m["layers"], name  # every MLA layer caches the latent
        assert dtypes[m["weight_dtype"]]["kind"] in ("weight", "both"), name
        assert 0 < m["params_active"] <= m["params_total"], name
        if name not in MOE_MODELS:
            assert m["params_active"] == m["params_total"], name
        if m["source"] == "manual":
            assert "source_sha256" not in m and "imported_at" not in m, name
        else:
            assert m["source"].endswith(".json"), name
            assert m["imported_at"] == "2026-11-29T00:00:00Z", name
            assert f"from tests/data/hf-configs/{m['source']}" in m["notes"], name
            assert (HF_CONFIGS / m["source"]).is_file(), name  # vendored with its public source


def kv_bytes_per_token(m: dict, bytes_per_element: int) -> int:
    """SPEC "KV bytes per token" at TP1, full-attention part only."""
    if "kv_lora_rank" in m:
        # MLA: one latent of kv_lora_rank + qk_rope_head_dim per layer; no K/V factor, no kv_heads
        return m["full_layers"] * (m["kv_lora_rank"] + m["qk_rope_head_dim"]) * bytes_per_element
    return m["full_layers"] * m["kv_heads"] * (m["head_dim"] + m["v_head_dim"]) * bytes_per_element


# SPEC "Golden figures" (seed 000), plus seed 002's Llama-3-8B (128 KiB) and Llama-2-7B (4x that),
# and SPEC errata for Llama-3-70B (8 KV heads: 40 GiB at 128K) and ChatGLM3-6B-128K.
GOLDEN_BF16_BYTES_PER_TOKEN = {
    "Llama-3.1-8B": 131072,        # 32 * 8 * (128 + 128) * 2 = 128.0 KiB
    "Llama-3.1-70B": 327680,       # 80 * 8 * 256 * 2 = 320.0 KiB
    "Llama-3.1-405B": 516096,      # 126 * 8 * 256 * 2 = 504.0 KiB
    "Qwen2.5-7B": 57344,           # 28 * 4 * 256 * 2 = 56.0 KiB
    "Qwen2.5-7B-Instruct-1M": 57344,
    "Qwen2.5-72B": 327680,         # 80 * 8 * 256 * 2
    "Qwen3-8B": 147456,            # 36 * 8 * 256 * 2 = 144.0 KiB
    "Qwen3-235B-A22B": 192512,     # 94 * 4 * 256 * 2 = 188.0 KiB
    "Qwen3-Next-80B-A3B": 24576,   # 12 * 2 * 512 * 2 = 24.0 KiB (36 linear layers cost 0 per token)
    "Mistral-Large-2411": 360448,  # 88 * 8 * 256 * 2 = 352.0 KiB
    "Command-R-plus-0824": 262144,  # 64 * 8 * 256 * 2 = 256.0 KiB
    "Yi-34B-200K": 245760,         # 60 * 8 * 256 * 2 = 240.0 KiB
    "DeepSeek-V2-Chat": 69120,     # 60 * (512 + 64) * 2 = 67.5 KiB
    "DeepSeek-V3": 70272,          # 61 * (512 + 64) * 2 = 68.6 KiB
    "Kimi-K2": 70272,
    "GLM-4.5": 376832,             # 92 * 8 * 256 * 2 = 368.0 KiB
    "GLM-4-9B-chat-1M": 81920,     # 40 * 4 * 256 * 2 = 80.0 KiB
    "ChatGLM3-6B-128K": 28672,     # 28 * 2 * 256 * 2 (SPEC erratum: seed 000 says 32,768)
    "Llama-3-8B": 131072,          # seed 002: 128 KiB
    "Llama-2-7B": 524288,          # 32 * 32 * 256 * 2 = 512 KiB (MHA)
    "Llama-3-70B": 327680,         # SPEC erratum on seed 001: GQA, 40 GiB at 131,072 tokens
}


@pytest.mark.parametrize("name, expected", sorted(GOLDEN_BF16_BYTES_PER_TOKEN.items()))
def test_bf16_kv_bytes_per_token_match_spec(models, name, expected):
    assert kv_bytes_per_token(models[name], BF16) == expected


def test_golden_gib_at_128k(models):
    # SPEC: "KiB per token / GiB at 131,072 tokens"
    gib_at_128k = lambda n: kv_bytes_per_token(models[n], BF16) * 131072 / GiB  # noqa: E731
    assert gib_at_128k("Llama-3.1-8B") == 16.0
    assert gib_at_128k("Llama-3.1-405B") == 63.0
    assert gib_at_128k("Qwen3-Next-80B-A3B") == 3.0
    assert gib_at_128k("ChatGLM3-6B-128K") == 3.5
    assert round(gib_at_128k("DeepSeek-V3"), 2) == 8.58
    assert round(kv_bytes_per_token(models["Llama-3.1-8B"], BF16) * 1_000_000 / GiB, 2) == 122.07


def test_qwen3_next_linear_state(models):
    m = models["Qwen3-Next-80B-A3B"]
    k_heads, v_heads, k_dim, v_dim, conv_kernel = 16, 32, 128, 128, 4
    conv = (2 * k_heads * k_dim + v_heads * v_dim) * (conv_kernel - 1)
    recurrent = v_heads * k_dim * v_dim
    assert m["linear_state_elements_per_layer"] == conv + recurrent == 548864
    assert m["linear_state_heads"] == k_heads
    # SPEC errata: 39,518,208 B per sequence at TP1 in bf16
    assert m["linear_layers"] * m["linear_state_elements_per_layer"] * BF16 == 39_518_208


# ---------------------------------------------------------------- models: parameter counts


def gb(text: str) -> int:
    """Seed 000's decimal gigabytes as whole bytes."""
    return int(Decimal(text) * 10**9)


SEED_000_BF16_WEIGHTS = {
    "ChatGLM3-6B-128K": gb("12.8"),
    "Qwen2.5-7B": gb("15.2"),
    "Qwen2.5-7B-Instruct-1M": gb("15.2"),
    "GLM-4-9B-chat-1M": gb("18.8"),
    "Llama-3.1-8B": gb("16.1"),
    "Qwen3-8B": gb("16.4"),
    "Yi-34B-200K": gb("69.6"),
    "Llama-3.1-70B": gb("141.2"),
    "Qwen2.5-72B": gb("145.4"),
    "Mistral-Large-2411": gb("246.0"),
    "Command-R-plus-0824": gb("208.0"),
    "Qwen3-235B-A22B": gb("470.0"),
    "Qwen3-Next-80B-A3B": gb("160.0"),
    "GLM-4.5": gb("710.0"),
    "Llama-3.1-405B": gb("811.8"),
}


@pytest.mark.parametrize("name, weight_bytes", sorted(SEED_000_BF16_WEIGHTS.items()))
def test_params_reproduce_seed_weights(models, name, weight_bytes):
    assert models[name]["params_total"] * 2 == weight_bytes


def test_published_param_counts(models):
    expected = {
        "DeepSeek-V2-Chat": (236e9, 21e9),
        "DeepSeek-V3": (671e9, 37e9),
        "Kimi-K2": (1.04e12, 32e9),
        "Qwen3-235B-A22B": (235e9, 22e9),
        "Qwen3-Next-80B-A3B": (80e9, 3e9),
        "GLM-4.5": (355e9, 32e9),
        "gpt-oss-120b": (116.8e9, 5.1e9),
        "Llama-2-7B": (6.74e9, 6.74e9),
        "Llama-3-8B": (8.03e9, 8.03e9),
        "Llama-3-70B": (70.6e9, 70.6e9),
        "falcon-40b": (41.8e9, 41.8e9),
        "gemma-2-9b-it": (9.24e9, 9.24e9),
    }
    for name, (total, active) in expected.items():
        assert models[name]["params_total"] == int(total), name
        assert models[name]["params_active"] == int(active), name


# ---------------------------------------------------------------- models: provenance


def test_source_sha256_matches_config_file(models):
    imported = [m for m in models.values() if m["source"] != "manual"]
    assert len(imported) == 17
    for m in imported:
        digest = hashlib.sha256((HF_CONFIGS / m["source"]).read_bytes()).hexdigest()
        assert m["source_sha256"] == digest, m["name"]


def test_vendored_configs_live_in_the_repository_with_their_sources():
    """A fresh clone tests on its own: the configs are under tests/data/hf-configs, and MANIFEST.md
    gives each one's public Hugging Face repository and the sha256 of the bytes kept here."""
    repo = Path(__file__).resolve().parents[1]
    assert HF_CONFIGS.resolve().is_relative_to(repo)
    files = sorted(p.name for p in HF_CONFIGS.glob("*.json"))
    rows = {}
    for line in (HF_CONFIGS / "MANIFEST.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0].endswith(".json"):
            rows[cells[0]] = cells
    assert sorted(rows) == files and len(files) >= 17
    for name, (_file, hf_repo, *_rest, sha256) in rows.items():
        org, model = name.removesuffix(".json").split("__", 1)
        assert hf_repo == f"https://huggingface.co/{org}/{model}", name
        assert sha256 == hashlib.sha256((HF_CONFIGS / name).read_bytes()).hexdigest(), name


def _first(cfg: dict, *keys):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return None


_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def test_rows_agree_with_their_configs(models):
    """The architecture fields read back from each config.json (a small, independent reading)."""
    for m in models.values():
        if m["source"] == "manual":
            continue
        cfg = json.loads((HF_CONFIGS / m["source"]).read_text())
        name = m["name"]
        layers = _first(cfg, "num_hidden_layers", "num_layers", "n_layer")
        heads = _first(cfg, "num_attention_heads", "n_head")
        assert m["layers"] == layers, name
        assert m["attention_heads"] == heads, name
        assert m["kv_heads"] == _first(cfg, "num_key_value_heads", "multi_query_group_num", "n_head_kv"), name
        if "kv_lora_rank" in cfg:
            assert m["kv_lora_rank"] == cfg["kv_lora_rank"], name
            assert m["qk_rope_head_dim"] == cfg["qk_rope_head_dim"], name
            assert m["head_dim"] == cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"], name
            assert m["v_head_dim"] == cfg["v_head_dim"], name
        else:
            head_dim = _first(cfg, "head_dim", "kv_channels") or cfg["hidden_size"] // heads
            assert m["head_dim"] == m["v_head_dim"] == head_dim, name
        max_pos = _first(cfg, "max_position_embeddings", "seq_length")
        if max_pos is not None:  # falcon-40b's original config has none
            assert m["max_position_embeddings"] == max_pos, name
        # attention layout
        if "layer_types" in cfg:
            assert m["sliding_layers"] == cfg["layer_types"].count("sliding_attention"), name
            assert m["full_layers"] == cfg["layer_types"].count("full_attention"), name
            assert m["sliding_window"] == cfg["sliding_window"], name
        elif cfg.get("model_type") == "gemma2":  # alternating local/global, starting local
            assert m["sliding_layers"] == (layers + 1) // 2, name
            assert m["sliding_window"] == cfg["sliding_window"], name
        elif "full_attention_interval" in cfg:
            assert m["full_layers"] == layers // cfg["full_attention_interval"], name
            assert m["linear_layers"] == layers - m["full_layers"], name
        else:
            assert m["full_layers"] == layers, name  # incl. Qwen2.5: use_sliding_window false
        # weight dtype: quantization_config first, else torch_dtype
        quant = cfg.get("quantization_config")
        if quant and quant["quant_method"] == "fp8":
            assert m["weight_dtype"] == "fp8_" + quant["fmt"], name
        elif quant and quant["quant_method"] == "mxfp4":
            assert m["weight_dtype"] == "fp4", name
        else:
            assert m["weight_dtype"] == _TORCH_DTYPES[cfg["torch_dtype"]], name
