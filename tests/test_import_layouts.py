"""Model layouts of 2025-2026 configs: they import exactly, or say precisely why not.

Real configs are vendored under tests/data/hf-configs/ (sources and sha256 in its MANIFEST.md):
google__gemma-3-4b-it.json, tencent__Hunyuan-A13B-Instruct.json, tiiuae__falcon-7b-instruct.json
(and its later `falcon` revision under later-revisions/), besides the Nemotron, Gemma 4, Qwen3-Coder,
Qwen3.5 and Nemotron 3 files. Where no unedited public copy of a config.json could be found (Gemma 4
E2B, EXAONE 4, OLMo 3), the test builds the config from the keys the model's published config.json
documents, and says so next to it: those are not claimed to be the real files.

For each family the bytes per token and per 8,192- and 131,072-token sequence per GPU at TP 1,
2, 4 and 8 are worked by hand here and compared with the registry's views on SQLite and
PostgreSQL (the figures `kvreg capacity` and `model show` print); an invalid TP is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvreg.app.access import open_registry
from kvreg.app.capacity import Question, ask
from kvreg.app.registry import add_model
from kvreg.cli import cli
from kvreg.core.errors import KvregError
from kvreg.interchange.hf.checkpoint import read_checkpoint, read_safetensors_header
from kvreg.interchange.hf.config import ARCH_DEFAULTS, ConfigError
from kvreg.interchange.hf.layers import decilm_ffn_width
from kvreg.interchange.hf.row import import_path, model_from_config

DATA = Path(__file__).parent / "data" / "hf-configs"
TPS = (1, 2, 4, 8)
SEQ = (8192, 131072)


def real(name: str) -> Path:
    return DATA / name


def load(name: str) -> dict:
    return json.loads(real(name).read_text())


@pytest.mark.parametrize("folder, pattern", [(DATA, "*.json"), (DATA / "later-revisions", "*.json"),
                                             (DATA / "model-folders", "*/*.json"), (DATA / "refused", "*.json")],
                         ids=["hf-configs", "later-revisions", "model-folders", "refused"])
def test_manifest_lists_every_vendored_file_with_its_sha256(folder, pattern):
    manifest = (folder / "MANIFEST.md").read_text()
    files = list(folder.glob(pattern))
    assert files
    for path in files:
        name = path.relative_to(folder).as_posix()
        row = next((line for line in manifest.splitlines() if line.startswith(f"| {name} |")), None)
        assert row is not None, f"{name} has no MANIFEST.md row"
        assert hashlib.sha256(path.read_bytes()).hexdigest() in row
        assert "github.com/" in row  # the public copy the bytes were taken from


# --------------------------------------------------------------------------- the registry side


@pytest.fixture(scope="module")
def registry(module_db_url):
    """One registry per engine holding every family of this file."""
    engine = open_registry(module_db_url)
    with engine.begin() as conn:
        for name, (row, _) in FAMILIES.items():
            add_model(conn, {**row, "name": name})
    yield engine
    engine.dispose()


def per_gpu(engine, model: str, tp: int) -> dict:
    """kv_bytes_per_token(_full)_per_gpu and the bytes of an 8,192- and a 131,072-token sequence on one GPU."""
    with engine.connect() as conn:
        rows = ask(conn, Question(models=[model], contexts=list(SEQ), tp=tp, gpus=["H100-SXM"], block_size=16))
    by_ctx = {r["context_tokens"]: r for r in rows}
    r = by_ctx[8192]
    return {
        "all": r["kv_bytes_per_token_per_gpu"], "full": r["kv_bytes_per_token_full_per_gpu"],
        8192: by_ctx[8192]["kv_bytes_per_sequence_per_gpu"], 131072: by_ctx[131072]["kv_bytes_per_sequence_per_gpu"],
    }


# --------------------------------------------------------------------------- the families

# Real, unedited files (MANIFEST.md): the Gemma 3 4B text_config names only hidden_size, intermediate_size,
# num_hidden_layers, rope_scaling and sliding_window and leaves heads, kv heads, head_dim, vocab size, context
# and the layer pattern to Gemma3TextConfig's defaults; Hunyuan-A13B gives moe_topk and friends per layer.
GEMMA3_4B = real("google__gemma-3-4b-it.json")
HUNYUAN_A13B = load("tencent__Hunyuan-A13B-Instruct.json")
FALCON_7B = real("tiiuae__falcon-7b-instruct.json")  # RefinedWebModel, multi-query (May 2023 revision)
FALCON_7B_LATER = DATA / "later-revisions" / "tiiuae__falcon-7b-instruct.json"  # model_type falcon (Sep 2023)
# Built from the keys google/gemma-3-27b-it's config.json documents (its text_config; no unedited public copy of the
# file was found): unlike the 4B it names its heads, kv heads and head_dim; the layer pattern is the default.
GEMMA3_27B = {
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "torch_dtype": "bfloat16",
    "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
                    "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
                    "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"},
}
# Built from the keys google/gemma-4-E2B-it's config.json documents (its text_config; no unedited public copy of
# the file was found): 35 layers of 4 sliding (512) + 1 full, the last 20 KV-shared, per-layer embeddings of 256
# per layer, a double-wide MLP on the KV-shared layers, K and V separate (attention_k_eq_v false).
GEMMA4_E2B = {
    "architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "tie_word_embeddings": True,
    "text_config": {
        "attention_bias": False, "attention_k_eq_v": False, "dtype": "bfloat16", "enable_moe_block": False,
        "final_logit_softcapping": 30.0, "global_head_dim": 512, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1536, "hidden_size_per_layer_input": 256,
        "intermediate_size": 6144, "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
        "max_position_embeddings": 131072, "model_type": "gemma4_text", "num_attention_heads": 8,
        "num_experts": None, "num_global_key_value_heads": None, "num_hidden_layers": 35, "num_key_value_heads": 1,
        "num_kv_shared_layers": 20, "sliding_window": 512, "tie_word_embeddings": True, "top_k_experts": None,
        "use_double_wide_mlp": True, "vocab_size": 262144, "vocab_size_per_layer_input": 262144,
    },
}
# Built from the keys LGAI-EXAONE/EXAONE-4.0-32B documents: "LLLG" repeated, 4,096-token windows.
EXAONE4_32B = {
    "architectures": ["Exaone4ForCausalLM"], "model_type": "exaone4", "hidden_size": 5120, "head_dim": 128,
    "num_hidden_layers": 64, "num_attention_heads": 40, "num_key_value_heads": 8, "intermediate_size": 27392,
    "sliding_window": 4096, "sliding_window_pattern": "LLLG", "vocab_size": 102400,
    "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
}
# Built from the keys allenai/Olmo-3-1025-7B documents: layer_types, three sliding then one full.
OLMO3_7B = {
    "architectures": ["Olmo3ForCausalLM"], "model_type": "olmo3", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 100278,
    "sliding_window": 4096, "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 8,
    "max_position_embeddings": 65536, "torch_dtype": "bfloat16",
}


def _imported(source) -> tuple[dict, list[str]]:
    if isinstance(source, Path):
        return import_path(source)
    return model_from_config(source, name="x", source="constructed")


FAMILIES = {name: _imported(src) for name, src in {
    "Nemotron-Super-49B": real("nvidia__Llama-3_3-Nemotron-Super-49B-v1.json"),
    "Gemma-4-26B-A4B": real("google__gemma-4-26B-A4B.json"),
    "Gemma-4-31B-NVFP4": real("nvidia__Gemma-4-31B-IT-NVFP4.json"),
    "Qwen3-Coder-480B": real("Qwen__Qwen3-Coder-480B-A35B-Instruct.json"),
    "Qwen3.5-27B": real("Qwen__Qwen3.5-27B.json"),
    "Qwen3.5-35B-A3B": real("Qwen__Qwen3.5-35B-A3B.json"),
    "Nemotron-3-Ultra": real("nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.json"),
    "MiniMax-M2.7": real("MiniMaxAI__MiniMax-M2.7.json"),
    "Llama-4-Scout": real("meta-llama__Llama-4-Scout-17B-16E-Instruct.json"),
    "MiMo-V2-Flash": real("XiaomiMiMo__MiMo-V2-Flash.json"),
    "Gemma-3-4B": GEMMA3_4B,
    "Gemma-3-27B": GEMMA3_27B,
    "Gemma-4-E2B": GEMMA4_E2B,
    "Hunyuan-A13B": real("tencent__Hunyuan-A13B-Instruct.json"),
    "Falcon-7B": FALCON_7B,
    "EXAONE-4-32B": EXAONE4_32B,
    "OLMo-3-7B": OLMO3_7B,
}.items()}


def row(name: str) -> dict:
    return FAMILIES[name][0]


# --------------------------------------------------------------------------- Nemotron-Super 49B


def test_nemotron_super_block_configs():
    r = row("Nemotron-Super-49B")
    # 80 blocks: 49 with attention (n_heads_in_group 8: 64 / 8 = 8 kv heads), 31 no_op (no KV at all).
    assert (r["layers"], r["full_layers"], r["no_cache_layers"]) == (49, 49, 31)
    assert (r["attention_heads"], r["kv_heads"], r["head_dim"]) == (64, 8, 128)  # 8192 / 64
    assert "31 of 80 block_configs layers have no attention" in r["notes"]


def test_nemotron_super_parameter_count_follows_each_block():
    r = row("Nemotron-Super-49B")
    hidden, vocab, heads, kv, d = 8192, 128256, 64, 8, 128
    # MLP width per ffn_mult: int(2 * mult * 8192 / 3) rounded up to a multiple of 256
    widths = {5.25: 28672, 1.3125: 7168, 1.0: 5632, 2.625: 14336, 0.5: 2816, 3.28125: 17920}
    assert {m: decilm_ffn_width(m, hidden) for m in widths} == widths
    blocks = {5.25: 49, 1.3125: 10, 1.0: 8, 2.625: 6, 0.5: 6, 3.28125: 1}  # layers per ffn_mult in the config
    mlp = sum(3 * hidden * widths[m] * n for m, n in blocks.items())
    attention = 49 * hidden * d * (2 * heads + 2 * kv)
    embeddings = 2 * vocab * hidden  # tie_word_embeddings false
    assert r["params_total"] == r["params_active"] == embeddings + attention + mlp == 49_866_080_256  # 49.9B published


def test_nemotron_super_per_gpu_bytes(registry):
    layer = 8 * (128 + 128) * 2  # kv heads x (K + V widths) x bf16 = 4,096 B per layer per token
    for tp in TPS:
        heads = max(1, 8 // tp)
        token = 49 * heads * (128 + 128) * 2  # 200,704 / 100,352 / 50,176 / 25,088
        got = per_gpu(registry, "Nemotron-Super-49B", tp)
        assert got == {"all": token, "full": token, 8192: token * 8192, 131072: token * 131072}, tp
    assert per_gpu(registry, "Nemotron-Super-49B", 1)["all"] == 49 * layer == 200_704  # not 80 layers of MHA
    assert 80 * 64 * 256 * 2 / 200_704 > 13  # what reading it as 80 MHA layers would have claimed


def test_invalid_tp_is_refused(registry):
    with registry.connect() as conn:
        with pytest.raises(KvregError, match=r"TP 3 is not valid for Nemotron-Super-49B.*valid TPs in a 8-GPU node are 1, 2, 4, 8"):
            ask(conn, Question(models=["Nemotron-Super-49B"], tp=3))
        # Falcon-7B: 71 query heads divide by no TP above 1.
        with pytest.raises(KvregError, match=r"TP 2 is not valid for Falcon-7B.*are 1$"):
            ask(conn, Question(models=["Falcon-7B"], tp=2))


# --------------------------------------------------------------------------- Gemma 3 / Gemma 4


def test_gemma3_4b_takes_the_architecture_defaults():
    r = row("Gemma-3-4B")
    # Gemma3TextConfig: 8 heads, 4 kv heads, head_dim 256, vocab 262,208, 131,072 context, every 6th layer global.
    assert (r["attention_heads"], r["kv_heads"], r["head_dim"], r["max_position_embeddings"]) == (8, 4, 256, 131072)
    # 34 layers: full at 5, 11, 17, 23, 29 (i + 1 divisible by 6), the other 29 slide over 1,024 tokens.
    assert (r["layers"], r["full_layers"], r["sliding_layers"], r["sliding_window"]) == (34, 5, 29, 1024)
    assert "gemma3_text architecture defaults used" in r["notes"] and "head_dim 256" in r["notes"]
    assert (r["hidden_size"], r["intermediate_size"], r["vocab_size"]) == (2560, 10240, 262_208)  # vocab: the default
    # The text decoder only (the SigLIP vision tower, about 0.4B, is not counted), tied embeddings:
    embeddings = 262_208 * 2560  # 671,252,480
    attention = 2560 * 256 * (2 * 8 + 4 + 4)  # q, o: 8 heads; k, v: 4 kv heads of 256 = 15,728,640 per layer
    mlp = 3 * 2560 * 10240  # gate, up, down = 78,643,200 per layer
    assert r["params_total"] == embeddings + 34 * (attention + mlp) == 3_879_895_040  # "4B" with the vision tower


def test_gemma3_per_gpu_bytes(registry):
    for tp in TPS:
        layer = max(1, 4 // tp) * (256 + 256) * 2  # 4,096 / 2,048 / 1,024 / 1,024 (TP8 > 4 kv heads: replicated)
        full, sliding = 5 * layer, 29 * layer
        got = per_gpu(registry, "Gemma-3-4B", tp)
        assert got == {"all": full + sliding, "full": full,
                       8192: full * 8192 + sliding * 1024, 131072: full * 131072 + sliding * 1024}, tp
    at_128k = per_gpu(registry, "Gemma-3-4B", 1)[131072]
    assert at_128k == 20_480 * 131072 + 118_784 * 1024 == 2_805_989_376
    assert at_128k / (34 * 4096 * 1024) > 19  # every layer sliding would claim 19.7x too little


def test_gemma3_27b_names_its_heads_and_takes_the_default_pattern():
    r = row("Gemma-3-27B")
    assert (r["attention_heads"], r["kv_heads"], r["head_dim"]) == (32, 16, 128)  # the config's, not the defaults
    # 62 layers, global where (i + 1) % 6 == 0: 5, 11, ..., 59 = 10 full, 52 sliding over 1,024 tokens
    assert (r["layers"], r["full_layers"], r["sliding_layers"], r["sliding_window"]) == (62, 10, 52, 1024)
    assert r["max_position_embeddings"] == 131072 and r["vocab_size"] == 262_208  # defaults
    embeddings = 262_208 * 5376  # tied
    per_layer = 5376 * 128 * (2 * 32 + 2 * 16) + 3 * 5376 * 21504  # attention 66,060,288 + MLP 346,816,512
    assert r["params_total"] == embeddings + 62 * per_layer == 27_007_991_808  # "27B" (vision tower not counted)


def test_gemma3_27b_per_gpu_bytes(registry):
    for tp in TPS:
        layer = (16 // tp) * (128 + 128) * 2  # 8,192 / 4,096 / 2,048 / 1,024 B
        full, sliding = 10 * layer, 52 * layer
        assert per_gpu(registry, "Gemma-3-27B", tp) == {
            "all": full + sliding, "full": full,
            8192: full * 8192 + sliding * 1024, 131072: full * 131072 + sliding * 1024}, tp


def test_gemma4_full_and_sliding_layers_have_their_own_heads():
    r = row("Gemma-4-26B-A4B")
    # layer_types: 25 sliding (1,024) + 5 full. Full: global_head_dim 512 and, with attention_k_eq_v,
    # num_global_key_value_heads 2; sliding: num_key_value_heads 8, head_dim 256.
    assert (r["full_layers"], r["sliding_layers"], r["sliding_window"]) == (5, 25, 1024)
    assert (r["kv_heads"], r["head_dim"], r["v_head_dim"]) == (2, 512, 512)
    assert (r["sliding_kv_heads"], r["sliding_head_dim"], r["k_eq_v_layers"]) == (8, 256, 5)
    # experts per token from top_k_experts; a dense MLP beside 128 experts in every layer (enable_moe_block)
    hidden, vocab = 2816, 262144
    sliding_attn = hidden * 256 * (2 * 16 + 8 + 8)
    full_attn = hidden * 512 * (2 * 16 + 2)  # K=V: no v_proj
    dense, expert, router = 3 * hidden * 2112, 3 * hidden * 704, hidden * 128
    total = vocab * hidden + 25 * sliding_attn + 5 * full_attn + 30 * (dense + 128 * expert + router)
    active = vocab * hidden + 25 * sliding_attn + 5 * full_attn + 30 * (dense + 8 * expert + router)
    assert (r["params_total"], r["params_active"]) == (total, active) == (25_232_441_344, 3_821_830_144)


def test_gemma4_per_gpu_bytes(registry):
    for tp in TPS:
        full_layer = max(1, 2 // tp) * (512 + 512) * 2  # K and V both cached, K=V or not (as vLLM does)
        sliding_layer = max(1, 8 // tp) * (256 + 256) * 2
        full, sliding = 5 * full_layer, 25 * sliding_layer
        got = per_gpu(registry, "Gemma-4-26B-A4B", tp)
        assert got == {"all": full + sliding, "full": full,
                       8192: full * 8192 + sliding * 1024, 131072: full * 131072 + sliding * 1024}, tp
    assert per_gpu(registry, "Gemma-4-26B-A4B", 1)["all"] == 5 * 4096 + 25 * 8192 == 225_280
    assert per_gpu(registry, "Gemma-4-26B-A4B", 8)["full"] == 5 * 2048 == 10_240


def test_gemma4_31b_nvfp4():
    r = row("Gemma-4-31B-NVFP4")
    assert (r["full_layers"], r["sliding_layers"], r["kv_heads"], r["head_dim"]) == (10, 50, 4, 512)
    assert (r["sliding_kv_heads"], r["sliding_head_dim"], r["weight_dtype"]) == (16, 256, "nvfp4")
    # quantization_config.kv_cache_scheme {num_bits 8, type float}: said, the KV dtype stays the question's
    assert "ships fp8 KV-cache scales; served with --kv-cache-dtype fp8, ask kvreg with --kv-dtype fp8" in r["notes"]


def test_gemma4_31b_nvfp4_per_gpu_bytes(registry):
    for tp in TPS:
        full_layer = max(1, 4 // tp) * (512 + 512) * 2  # num_global_key_value_heads 4 of global_head_dim 512, bf16
        sliding_layer = max(1, 16 // tp) * (256 + 256) * 2  # 16 kv heads of 256
        full, sliding = 10 * full_layer, 50 * sliding_layer  # 40,960 + 819,200 B at TP1
        assert per_gpu(registry, "Gemma-4-31B-NVFP4", tp) == {
            "all": full + sliding, "full": full,
            8192: full * 8192 + sliding * 1024, 131072: full * 131072 + sliding * 1024}, tp


def test_gemma4_without_k_eq_v_reads_num_key_value_heads_on_full_layers():
    cfg = load("google__gemma-4-26B-A4B.json")
    cfg["text_config"]["attention_k_eq_v"] = False
    r, _ = model_from_config(cfg, name="g")
    assert (r["kv_heads"], r["head_dim"], r["k_eq_v_layers"]) == (8, 512, 0)
    assert "num_global_key_value_heads not used" in r["notes"]


def test_gemma4_e2b_kv_shared_layers_and_per_layer_embeddings():
    r = row("Gemma-4-E2B")
    # Layers 0-14 keep a cache (12 sliding + 3 full); 15-34 read the last earlier layer of their kind.
    assert (r["layers"], r["full_layers"], r["sliding_layers"], r["no_cache_layers"]) == (15, 3, 12, 20)
    assert (r["kv_heads"], r["head_dim"], r["sliding_kv_heads"], r["sliding_head_dim"]) == (1, 512, 1, 256)
    assert r["k_eq_v_layers"] == 0 and r["sliding_window"] == 512
    # Parameters, all 35 layers (28 sliding, 7 full, KV-shared ones keep their projections), tied embeddings:
    hidden, vocab, ple = 1536, 262144, 256
    embeddings = vocab * hidden  # 402,653,184
    attention = 28 * hidden * 256 * (2 * 8 + 1 + 1) + 7 * hidden * 512 * (2 * 8 + 1 + 1)  # 297,271,296
    mlp = 15 * 3 * hidden * 6144 + 20 * 3 * hidden * 12288  # double-wide on the 20 KV-shared layers: 1,557,135,360
    per_layer_table = vocab * 35 * ple  # 2,348,810,240: the per-layer embeddings
    per_layer_rest = hidden * 35 * ple + 35 * 2 * hidden * ple  # model projection + each layer's gate and projection
    assert r["params_total"] == r["params_active"] == (
        embeddings + attention + mlp + per_layer_table + per_layer_rest) == 4_647_157_760
    # Google publishes 2.3B "effective" (without the per-layer table) and 5.1B with the embeddings and the
    # vision (~0.15B) and audio (~0.3B) encoders, which kvreg does not count:
    assert round((r["params_total"] - per_layer_table) / 1e9, 1) == 2.3
    assert round(r["params_total"] / 1e9 + 0.15 + 0.3, 1) == 5.1


def test_gemma4_e2b_per_gpu_bytes(registry):
    # 1 kv head in every kind: replicated, never split, so every TP of the 8 query heads holds the same bytes.
    full, sliding = 3 * 1 * (512 + 512) * 2, 12 * 1 * (256 + 256) * 2  # 6,144 + 12,288 B
    for tp in TPS:
        assert per_gpu(registry, "Gemma-4-E2B", tp) == {
            "all": full + sliding, "full": full,
            8192: full * 8192 + sliding * 512, 131072: full * 131072 + sliding * 512}, tp
    assert per_gpu(registry, "Gemma-4-E2B", 1)[131072] == 805_306_368 + 6_291_456 == 811_597_824


def test_kv_shared_layers_hold_no_cache():
    cfg = load("google__gemma-4-26B-A4B.json")
    cfg["text_config"]["num_kv_shared_layers"] = 6  # the last 6 layers read earlier layers' caches
    r, _ = model_from_config(cfg, name="g")
    # layers 0-23: 20 sliding + 4 full keep a cache; 24-29 hold none
    assert (r["layers"], r["full_layers"], r["sliding_layers"], r["no_cache_layers"]) == (24, 4, 20, 6)


def test_gemma_defaults_match_transformers():
    """The defaults table against the reference implementation's config classes (skipped without transformers)."""
    transformers = pytest.importorskip("transformers")
    classes = {"gemma3_text": transformers.Gemma3TextConfig, "gemma2": transformers.Gemma2Config,
               "llama4_text": transformers.Llama4TextConfig}
    for family, defaults in ARCH_DEFAULTS.items():
        config = classes[family]()
        for key, value in defaults.items():
            if key == "sliding_window_pattern":  # kept as _sliding_window_pattern or expanded to layer_types
                pattern = getattr(config, "sliding_window_pattern", None) or getattr(config, "_sliding_window_pattern")
                assert pattern == value, family
                continue
            assert getattr(config, key) == value, (family, key)


# --------------------------------------------------------------------------- MoE lists, shared experts


def test_qwen3_coder_zero_shared_expert_means_none():
    r = row("Qwen3-Coder-480B")
    hidden, vocab, expert = 6144, 151936, 3 * 6144 * 2560
    attention = hidden * 128 * (2 * 96 + 2 * 8)
    router = hidden * 160
    total = 2 * vocab * hidden + 62 * (attention + 160 * expert + router)
    active = 2 * vocab * hidden + 62 * (attention + 8 * expert + router)
    assert (r["params_total"], r["params_active"]) == (total, active)  # 480B / 35B published
    assert round(total / 1e9) == 480 and round(active / 1e9) == 35


def test_qwen3_coder_per_gpu_bytes(registry):
    for tp in TPS:
        token = 62 * max(1, 8 // tp) * 256 * 2  # 253,952 / 126,976 / 63,488 / 31,744
        assert per_gpu(registry, "Qwen3-Coder-480B", tp) == {
            "all": token, "full": token, 8192: token * 8192, 131072: token * 131072}, tp


def test_hunyuan_per_layer_moe_lists():
    r = row("Hunyuan-A13B")
    # The real file: model_type hunyuan, 32 layers, GQA 32 query / 8 kv heads of attention_head_dim 128,
    # moe_topk, moe_intermediate_size and num_shared_expert each a list of 32 (all 8, 3072, 1).
    assert (r["family"], r["layers"], r["full_layers"]) == ("hunyuan", 32, 32)
    assert (r["attention_heads"], r["kv_heads"], r["head_dim"], r["v_head_dim"]) == (32, 8, 128, 128)
    assert (r["max_position_embeddings"], r["vocab_size"], r["weight_dtype"]) == (32768, 128167, "bf16")
    hidden, expert = 4096, 3 * 4096 * 3072
    attention = hidden * 128 * (2 * 32 + 2 * 8)
    shared, router = expert, hidden * 64  # num_shared_expert 1 of the expert width
    embeddings = 128167 * hidden  # tied
    assert r["params_total"] == embeddings + 32 * (attention + 64 * expert + shared + router)
    assert r["params_active"] == embeddings + 32 * (attention + 8 * expert + shared + router)  # about 13B
    assert (round(r["params_total"] / 1e9), round(r["params_active"] / 1e9)) == (80, 13)  # A13B: 80B total, 13B active


def test_per_layer_list_of_the_wrong_length_is_refused():
    with pytest.raises(ConfigError, match=r"^constructed: moe_topk lists 31 values but the model has 32 layers"):
        model_from_config({**HUNYUAN_A13B, "moe_topk": [8] * 31}, name="h", source="constructed")


def test_hunyuan_per_gpu_bytes(registry):
    for tp in TPS:
        token = 32 * max(1, 8 // tp) * 256 * 2  # 131,072 / 65,536 / 32,768 / 16,384 B
        assert per_gpu(registry, "Hunyuan-A13B", tp) == {
            "all": token, "full": token, 8192: token * 8192, 131072: token * 131072}, tp


# --------------------------------------------------------------------------- Qwen3.5 state dtype


def test_qwen35_state_dtype_follows_mamba_ssm_dtype():
    r = row("Qwen3.5-27B")
    assert (r["layers"], r["full_layers"], r["linear_layers"], r["kv_heads"], r["head_dim"]) == (64, 16, 48, 4, 256)
    conv = (2 * 16 * 128 + 48 * 128) * (4 - 1)  # 30,720 elements, kept in bf16 (the model dtype)
    recurrent = 48 * 128 * 128  # 786,432 elements in fp32 (mamba_ssm_dtype)
    assert r["linear_state_dtype"] == "fp32"
    assert r["linear_state_elements_per_layer"] * 4 == conv * 2 + recurrent * 4 == 3_207_168
    assert r["linear_recurrent_elements_per_layer"] == recurrent == 786_432


def test_qwen35_per_gpu_bytes(registry):
    state_tp1 = 48 * 3_207_168  # 153,944,064 B per sequence
    for tp in TPS:
        token = 16 * max(1, 4 // tp) * 512 * 2  # 65,536 / 32,768 / 16,384 / 16,384
        state = state_tp1 // min(tp, 16)  # shards by the 16 linear key heads
        assert per_gpu(registry, "Qwen3.5-27B", tp) == {
            "all": token, "full": token, 8192: token * 8192 + state, 131072: token * 131072 + state}, tp


def test_qwen35_moe_state_and_heads():
    """Qwen3.5-35B-A3B (qwen3_5_moe_text): 40 layers, a full one every 4th, 2 kv heads of 256."""
    r, _ = import_path(real("Qwen__Qwen3.5-35B-A3B.json"))
    assert (r["layers"], r["full_layers"], r["linear_layers"], r["kv_heads"], r["head_dim"]) == (40, 10, 30, 2, 256)
    conv = (2 * 16 * 128 + 32 * 128) * (4 - 1)  # 24,576 elements, kept in bf16 (the model dtype)
    recurrent = 32 * 128 * 128  # 524,288 elements in fp32 (mamba_ssm_dtype)
    assert r["linear_state_dtype"] == "fp32"
    assert r["linear_state_elements_per_layer"] * 4 == conv * 2 + recurrent * 4 == 2_146_304
    assert r["linear_recurrent_elements_per_layer"] == recurrent == 524_288


def test_qwen35_moe_per_gpu_bytes(registry):
    state_tp1 = 30 * 2_146_304  # 64,389,120 B per sequence
    for tp in TPS:
        token = 10 * max(1, 2 // tp) * 512 * 2  # 20,480 B at TP1, 10,240 from TP2 (2 kv heads, then replicated)
        state = state_tp1 // min(tp, 16)  # shards by the 16 linear key heads
        assert per_gpu(registry, "Qwen3.5-35B-A3B", tp) == {
            "all": token, "full": token, 8192: token * 8192 + state, 131072: token * 131072 + state}, tp


def test_nemotron3_layers_block_type():
    r = row("Nemotron-3-Ultra")
    # 108 blocks, no num_hidden_layers: 12 attention + 48 Mamba2 hold a cache, 48 MoE blocks hold none.
    assert (r["layers"], r["full_layers"], r["linear_layers"], r["no_cache_layers"]) == (60, 12, 48, 48)
    assert (r["kv_heads"], r["head_dim"], r["linear_state_heads"], r["linear_state_dtype"]) == (2, 128, 256, "fp32")
    conv = (4 - 1) * (256 * 64 + 2 * 8 * 128)  # 55,296 elements in bf16
    ssm = 256 * 64 * 128  # 2,097,152 elements in fp32 (mamba_ssm_cache_dtype)
    assert r["linear_state_elements_per_layer"] * 4 == conv * 2 + ssm * 4 == 8_499_200
    assert r["linear_recurrent_elements_per_layer"] == ssm == 2_097_152
    # squared-ReLU MLPs (2 matrices) and experts in the 2,048-wide latent: 550B total, 55B active published. The one
    # shared expert is moe_shared_expert_intermediate_size x n_shared_experts = 10,240 wide at the full 8,192 hidden
    # (vLLM nemotron_h.py NemotronHMoE), 2 x 8,192 x 10,240 = 167,772,160 a MoE layer; it was once counted again as a
    # routed expert in the latent (2 x 2,048 x 5,120 = 20,971,520 more in each of the 48 MoE layers).
    assert (r["params_total"], r["params_active"]) == (550_309_462_016 - 48 * 20_971_520,
                                                       57_059_311_616 - 48 * 20_971_520) == (549_302_829_056,
                                                                                             56_052_678_656)


def test_nemotron3_per_gpu_bytes(registry):
    for tp in TPS:
        token = 12 * max(1, 2 // tp) * 256 * 2  # 12,288 B at TP1, 6,144 from TP2 (2 kv heads)
        state = 48 * 8_499_200 // tp  # shards by the 256 Mamba heads
        assert per_gpu(registry, "Nemotron-3-Ultra", tp) == {
            "all": token, "full": token, 8192: token * 8192 + state, 131072: token * 131072 + state}, tp


# --------------------------------------------------------------------------- Falcon, EXAONE 4, OLMo 3


def test_falcon_refinedwebmodel_is_multi_query():
    r = row("Falcon-7B")
    assert (r["architecture"], r["family"]) == ("RWForCausalLM", "RefinedWebModel")
    assert (r["layers"], r["attention_heads"], r["kv_heads"], r["head_dim"]) == (32, 71, 1, 64)  # 4544 / 71
    assert r["max_position_embeddings"] == 2048  # the config names none: Falcon's training context
    # fused query_key_value (71 + 1 + 1 heads of 64) + dense, a 4 x 4544 up/down MLP, tied embeddings
    attention = 4544 * 64 * (71 + 1 + 1) + 4544 * 4544  # 41,877,504
    mlp = 2 * 4544 * (4 * 4544)  # 165,183,488
    assert r["params_total"] == 65024 * 4544 + 32 * (attention + mlp) == 6_921_420_800  # "7B" (norms not counted)


def test_falcon_later_revision_imports_alike():
    """The same repository's September-2023 config: model_type falcon, num_attention_heads, num_hidden_layers."""
    later, _ = import_path(FALCON_7B_LATER)
    assert (later["architecture"], later["family"]) == ("FalconForCausalLM", "falcon")
    first = row("Falcon-7B")
    same = ("layers", "full_layers", "attention_heads", "kv_heads", "head_dim", "v_head_dim", "params_total",
            "max_position_embeddings", "hidden_size", "vocab_size", "weight_dtype")
    assert {k: later[k] for k in same} == {k: first[k] for k in same}
    assert (later["kv_heads"], later["head_dim"]) == (1, 64)


def test_falcon_per_gpu_bytes(registry):
    token = 32 * 1 * (64 + 64) * 2  # 8,192 B
    assert per_gpu(registry, "Falcon-7B", 1) == {"all": token, "full": token, 8192: token * 8192,
                                                 131072: token * 131072}


def test_exaone4_pattern_string():
    r = row("EXAONE-4-32B")
    assert (r["layers"], r["full_layers"], r["sliding_layers"], r["sliding_window"]) == (64, 16, 48, 4096)


def test_exaone4_per_gpu_bytes(registry):
    for tp in TPS:
        layer = max(1, 8 // tp) * 256 * 2
        full, sliding = 16 * layer, 48 * layer
        assert per_gpu(registry, "EXAONE-4-32B", tp) == {
            "all": full + sliding, "full": full,
            8192: full * 8192 + sliding * 4096, 131072: full * 131072 + sliding * 4096}, tp


def test_exaone4_last_layer_is_global_whatever_the_pattern_says():
    """Exaone4Config (lgai-exaone/transformers @ aad0b7c8, configuration_exaone4.py, check_is_sliding):
    a layer slides when ``layer_idx != num_hidden_layers - 1`` and its pattern letter is "L": "The final
    layer always uses global attention regardless of the pattern." With 64 layers "LLLG" already ends on
    G; with 30 (constructed: the 32B keys, fewer layers) the pattern would end on layer 29 = "LLLG"[1] = L."""
    r, _ = model_from_config({**EXAONE4_32B, "num_hidden_layers": 30}, name="e")
    # G at 3, 7, ..., 27 (7 layers) + the last layer 29 = 8 full; the other 22 slide
    assert (r["layers"], r["full_layers"], r["sliding_layers"]) == (30, 8, 22)
    layer = 8 * 256 * 2  # 8 kv heads x (128 + 128) x bf16 = 4,096 B
    # what each token past the 4,096-token window costs: 32,768 B, not the 28,672 B of 7 full layers
    assert r["full_layers"] * layer == 32_768
    r, _ = model_from_config({**EXAONE4_32B, "num_hidden_layers": 31, "sliding_window_pattern": "LLLLG"}, name="e")
    assert (r["full_layers"], r["sliding_layers"]) == (6 + 1, 24)  # G at 4, 9, ..., 29 and the last layer 30


def test_exaone4_without_a_window_is_all_full():
    r, _ = model_from_config({**EXAONE4_32B, "sliding_window": None}, name="e")
    assert (r["full_layers"], r["sliding_layers"]) == (64, 0)


def test_olmo3_layer_types():
    r = row("OLMo-3-7B")
    assert (r["full_layers"], r["sliding_layers"], r["sliding_window"], r["kv_heads"]) == (8, 24, 4096, 32)


def test_olmo3_per_gpu_bytes(registry):
    for tp in TPS:
        layer = (32 // tp) * 256 * 2
        full, sliding = 8 * layer, 24 * layer
        assert per_gpu(registry, "OLMo-3-7B", tp) == {
            "all": full + sliding, "full": full,
            8192: full * 8192 + sliding * 4096, 131072: full * 131072 + sliding * 4096}, tp


# --------------------------------------------------------------------------- unknown keys


@pytest.mark.parametrize("change, key", [
    ({"swa_num_key_value_heads": 4}, "swa_num_key_value_heads"),  # MiMo-style: sliding layers' own heads
    # MiniMax-M3: a block-sparse attention index beside the KV cache (sparse_index_dim per token)
    ({"sparse_attention_config": {"use_sparse_attention": True, "sparse_index_dim": 128}}, "sparse_attention_config"),
    ({"compress_ratios": [0, 4] * 16}, "compress_ratios"),  # DeepSeek-V4: compressed KV per layer
    ({"use_cla": True}, "use_cla"),  # Hunyuan cross-layer attention shares KV across layers
    ({"num_memory_heads": 4}, "num_memory_heads"),
])
def test_unknown_cache_keys_stop_the_import_with_the_key_named(change, key):
    with pytest.raises(ConfigError, match=rf"^constructed: {key} = .* could change the KV cache and kvreg does not "
                                          r"understand it; enter this model by hand, or pass --accept-unknown"):
        model_from_config({**HUNYUAN_A13B, **change}, name="h", source="constructed")
    r, warnings = model_from_config({**HUNYUAN_A13B, **change}, name="h", source="constructed", accept_unknown=True)
    assert any(w.startswith(f"{key} = ") and "ignored (--accept-unknown)" in w for w in warnings)
    assert r["kv_heads"] == 8


def test_attn_type_list_of_softmax_layers_only_is_full_attention():
    """MiniMax marks each layer 1 (softmax attention) or 0 (lightning attention, a linear state kvreg does
    not model). MiniMax-M2.7's config lists 62 ones; vLLM's minimax_m2.py builds every layer as ordinary
    attention and never reads the list. A list with a 0 in it still stops the import (parametrized above)."""
    r, warnings = model_from_config({**HUNYUAN_A13B, "attn_type_list": [1] * 32}, name="h")
    assert (r["full_layers"], r["linear_layers"]) == (32, 0)
    assert "attn_type_list: every layer 1 (softmax attention), read as full attention" in r["notes"]
    assert not any("accept-unknown" in w for w in warnings)


def test_minimax_m27_real_config():
    """MiniMaxAI__MiniMax-M2.7.json: attn_type_list of 62 ones, fp8 weights named by torch's dtype name."""
    r = row("MiniMax-M2.7")
    assert (r["layers"], r["full_layers"], r["attention_heads"], r["kv_heads"], r["head_dim"]) == (62, 62, 48, 8, 128)
    assert r["weight_dtype"] == "fp8_e4m3"  # quantization_config fmt "float8_e4m3fn"
    hidden, vocab, expert = 3072, 200064, 3 * 3072 * 1536  # 256 local experts of 1,536, 8 per token, no shared one
    embeddings = 2 * vocab * hidden  # tie_word_embeddings false
    attention = hidden * 128 * (2 * 48 + 2 * 8)
    router = hidden * 256
    assert r["params_total"] == embeddings + 62 * (attention + 256 * expert + router) == 228_688_920_576  # 230B
    assert r["params_active"] == embeddings + 62 * (attention + 8 * expert + router) == 11_029_708_800
    assert round((r["params_active"] - embeddings) / 1e9, 1) == 9.8  # MiniMax's "10B activated" leaves out embeddings


def test_minimax_m27_per_gpu_bytes(registry):
    for tp in TPS:
        token = 62 * max(1, 8 // tp) * 256 * 2  # 253,952 / 126,976 / 63,488 / 31,744 B
        assert per_gpu(registry, "MiniMax-M2.7", tp) == {
            "all": token, "full": token, 8192: token * 8192, 131072: token * 131072}, tp


# Llama 4: per expert 3 x 5,120 x 8,192 (intermediate_size); dense layers 3 x 5,120 x 16,384 (intermediate_size_mlp);
# one shared expert beside the routed ones in every MoE layer (Llama4TextMoe, no config key); an lm_head of its own.
L4_EXPERT, L4_DENSE = 3 * 5120 * 8192, 3 * 5120 * 16384  # 125,829,120 and 251,658,240
L4_ATTENTION = 48 * 5120 * 128 * (2 * 40 + 2 * 8)  # 3,019,898,880
L4_EMBEDDINGS = 2 * 202048 * 5120  # 2,068,971,520


def test_llama4_scout_every_layer_moe_with_a_shared_expert():
    r = row("Llama-4-Scout")
    assert (r["layers"], r["full_layers"], r["chunked_layers"], r["attention_chunk_size"]) == (48, 12, 36, 8192)
    router = 5120 * 16
    total = L4_EMBEDDINGS + L4_ATTENTION + 48 * ((16 + 1) * L4_EXPERT + router)
    active = L4_EMBEDDINGS + L4_ATTENTION + 48 * ((1 + 1) * L4_EXPERT + router)
    assert (r["params_total"], r["params_active"]) == (total, active) == (107_769_364_480, 17_172_398_080)
    assert round(active / 1e9) == 17  # "17B active"; 109B total with the vision encoder kvreg does not count
    assert "llama4_text architecture defaults used (the config leaves them out): tie_word_embeddings false" in r["notes"]


def test_llama4_maverick_alternates_dense_and_moe_layers():
    r, _ = import_path(real("meta-llama__Llama-4-Maverick-17B-128E-Instruct.json"))
    router = 5120 * 128
    # interleave_moe_layer_step 2: layers 1, 3, ..., 47 carry 128 experts + the shared one; the other 24 are dense
    total = L4_EMBEDDINGS + L4_ATTENTION + 24 * ((128 + 1) * L4_EXPERT + router) + 24 * L4_DENSE
    active = L4_EMBEDDINGS + L4_ATTENTION + 24 * ((1 + 1) * L4_EXPERT + router) + 24 * L4_DENSE
    assert (r["params_total"], r["params_active"]) == (total, active) == (400_711_352_320, 17_184_194_560)
    assert (round(total / 1e9), round(active / 1e9)) == (401, 17)  # "400B total, 17B active"


def test_llama4_scout_per_gpu_bytes(registry):
    for tp in TPS:
        layer = max(1, 8 // tp) * 256 * 2  # 4,096 / 2,048 / 1,024 / 512 B
        full, chunked = 12 * layer, 36 * layer
        assert per_gpu(registry, "Llama-4-Scout", tp) == {
            "all": full + chunked, "full": full,
            8192: (full + chunked) * 8192, 131072: full * 131072 + chunked * 8192}, tp


def test_mimo_v2_flash_sliding_layers_have_their_own_kv_heads_and_v_is_narrower():
    """XiaomiMiMo__MiMo-V2-Flash.json: hybrid_layer_pattern 1 = a sliding layer (vLLM's mimo_v2_flash.py builds it
    with swa_num_key_value_heads and sliding_window_size), K 192 wide and V 128 in every layer."""
    r = row("MiMo-V2-Flash")
    # full at 0, 5, 11, 17, 23, 29, 35, 41, 47; the other 39 slide over 128 tokens
    assert (r["layers"], r["full_layers"], r["sliding_layers"], r["sliding_window"]) == (48, 9, 39, 128)
    assert (r["attention_heads"], r["kv_heads"], r["sliding_kv_heads"]) == (64, 4, 8)
    assert (r["head_dim"], r["v_head_dim"], r["sliding_head_dim"]) == (192, 128, None)  # None: the full layers' widths
    assert r["weight_dtype"] == "fp8_e4m3"
    hidden = 4096
    full_attn = hidden * (192 * (64 + 4) + 128 * (4 + 64))  # q, k at 192; v, o at 128: 89,128,960
    swa_attn = hidden * (192 * (64 + 8) + 128 * (8 + 64))  # 94,371,840
    expert, router, dense = 3 * hidden * 2048, hidden * 256, 3 * hidden * 16384  # moe_layer_freq: layer 0 dense
    base = 2 * 152576 * hidden + 9 * full_attn + 39 * swa_attn + dense  # untied embeddings
    assert r["params_total"] == base + 47 * (256 * expert + router) == 308_778_369_024  # 309B published
    assert r["params_active"] == base + 47 * (8 * expert + router) == 15_445_524_480  # 15B active


def test_mimo_v2_flash_per_gpu_bytes(registry):
    for tp in TPS:
        full = 9 * max(1, 4 // tp) * (192 + 128) * 2  # 23,040 B at TP1
        sliding = 39 * max(1, 8 // tp) * (192 + 128) * 2  # 199,680 B at TP1
        assert per_gpu(registry, "MiMo-V2-Flash", tp) == {
            "all": full + sliding, "full": full,
            8192: full * 8192 + sliding * 128, 131072: full * 131072 + sliding * 128}, tp


def test_swa_widths_kvreg_cannot_hold_stop_the_import():
    cfg = load("XiaomiMiMo__MiMo-V2-Flash.json")
    with pytest.raises(ConfigError, match=r"swa_head_dim = 128 differs from the full layers' 192, which kvreg "
                                          r"cannot hold for sliding layers; enter this model by hand$"):
        model_from_config({**cfg, "swa_head_dim": 128}, name="m")
    with pytest.raises(ConfigError, match=r"hybrid_layer_pattern must list 0 \(full\) or 1 \(sliding\) for each of "
                                          r"the 48 layers"):
        model_from_config({**cfg, "hybrid_layer_pattern": [1] * 47}, name="m")


def test_unknown_key_inside_text_config():
    cfg = load("google__gemma-4-26B-A4B.json")
    cfg["text_config"]["global_num_sink_tokens"] = 4
    with pytest.raises(ConfigError, match=r"global_num_sink_tokens = 4 could change the KV cache"):
        model_from_config(cfg, name="g")


def test_switched_off_keys_are_not_unknown():
    r, warnings = model_from_config({**HUNYUAN_A13B, "swa_num_key_value_heads": None, "use_sink_window": False},
                                    name="h")
    assert r["kv_heads"] == 8 and not any("accept-unknown" in w for w in warnings)
    # every layer with its own indexer ("full") is what kvreg counts: not unknown
    r, warnings = model_from_config({**HUNYUAN_A13B, "indexer_types": ["full"] * 32}, name="h")
    assert not any("accept-unknown" in w for w in warnings)


def test_unknown_layer_type_is_refused():
    with pytest.raises(ConfigError, match=r"layer_types entry \"hash_attention\" is not a layer kind kvreg knows"):
        model_from_config({**OLMO3_7B, "layer_types": ["hash_attention"] * 32}, name="o")


def test_block_configs_unknown_attention_key_and_mixed_heads():
    cfg = load("nvidia__Llama-3_3-Nemotron-Super-49B-v1.json")
    cfg["block_configs"][3]["attention"]["num_sink_tokens"] = 4
    with pytest.raises(ConfigError, match=r"block_configs\[3\]\.attention\.num_sink_tokens = 4 could change the KV cache"):
        model_from_config(cfg, name="n")
    r, warnings = model_from_config(cfg, name="n", accept_unknown=True)
    assert r["kv_heads"] == 8 and any("block_configs[3].attention.num_sink_tokens" in w for w in warnings)
    cfg = load("nvidia__Llama-3_3-Nemotron-Super-49B-v1.json")
    cfg["block_configs"][0]["attention"]["n_heads_in_group"] = 16
    r, _ = model_from_config(cfg, name="n")  # per-layer kv heads (tests/test_layer_heads.py): one layer of 4
    assert (r["kv_heads"], r["kv_heads_2"], r["kv_layers_2"]) == (8, 4, 1)


def test_block_configs_length_must_match_layers():
    cfg = load("nvidia__Llama-3_3-Nemotron-Super-49B-v1.json")
    cfg["block_configs"] = cfg["block_configs"][:79]
    with pytest.raises(ConfigError, match=r"block_configs has 79 entries but the model has 80 layers"):
        model_from_config(cfg, name="n")


def test_cli_import_refuses_unknown_keys_and_writes_nothing(tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    good = tmp_path / "ok.json"
    good.write_text(json.dumps(OLMO3_7B))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**OLMO3_7B, "swa_num_key_value_heads": 4}))
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", db, "model", "import", str(good), str(bad)])
    assert result.exit_code != 0
    assert "swa_num_key_value_heads = 4 could change the KV cache" in result.output
    assert len(result.output.strip().splitlines()) == 1
    listed = runner.invoke(cli, ["--db", db, "model", "list", "--format", "json"])
    assert "ok" not in {m["name"] for m in json.loads(listed.stdout)}
    result = runner.invoke(cli, ["--db", db, "model", "import", str(bad), "--accept-unknown"])
    assert result.exit_code == 0, result.output
    assert "warning: bad: swa_num_key_value_heads = 4 not understood and ignored (--accept-unknown)" in result.output


# --------------------------------------------------------------------------- model check


def test_model_check_explains_without_writing(tmp_path):
    db = tmp_path / "never.db"
    result = CliRunner().invoke(cli, ["--db", f"sqlite:///{db}", "model", "check", "--format", "json",
                                      str(real("google__gemma-4-26B-A4B.json"))])
    assert result.exit_code == 0, result.output
    (check,) = json.loads(result.output)
    assert (check["full_layers"], check["sliding_layers"], check["kv_heads"], check["sliding_kv_heads"]) == (5, 25, 2, 8)
    assert (check["head_dim"], check["sliding_head_dim"], check["k_eq_v_layers"]) == (512, 256, 5)
    assert check["kv_bytes_per_token_bf16_tp1"] == 5 * 2 * 1024 * 2 + 25 * 8 * 512 * 2 == 225_280
    assert check["kv_bytes_per_token_full_bf16_tp1"] == 20_480
    assert check["params_from"].startswith("ESTIMATE")
    assert not db.exists()


def test_model_check_reports_a_failing_config_and_exits_1(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**OLMO3_7B, "compress_ratios": [0, 4] * 16}))
    result = CliRunner().invoke(cli, ["model", "check", str(real("Qwen__Qwen3.5-27B.json")), str(bad)])
    assert result.exit_code == 1
    assert "linear_state_dtype" in result.output and "fp32" in result.output
    assert "compress_ratios = [0, 4" in result.output
    assert "1 of 2 config(s) cannot be imported" in result.output


# --------------------------------------------------------------------------- quantization beside the config


def test_modelopt_quantization_is_read_from_hf_quant_config_beside_config_json(tmp_path):
    """nvidia/Llama-3.1-70B-Instruct-FP8: config.json names no quantization (torch_dtype bfloat16); its
    hf_quant_config.json says quant_algo FP8, kv_cache_quant_algo FP8, as vLLM's ModelOpt support reads it."""
    folder = DATA / "model-folders" / "nvidia__Llama-3.1-70B-Instruct-FP8"
    r, warnings = import_path(folder)
    assert r["name"] == "nvidia__Llama-3.1-70B-Instruct-FP8" and r["weight_dtype"] == "fp8_e4m3"  # 1 B, not 2
    assert "quantization from hf_quant_config.json beside config.json (quant_algo \"FP8\")" in r["notes"]
    assert "fp8 KV-cache scales; served with --kv-cache-dtype fp8, ask kvreg with --kv-dtype fp8" in r["notes"]
    assert (r["layers"], r["kv_heads"], r["head_dim"]) == (80, 8, 128)
    assert r["params_total"] == 2 * 128256 * 8192 + 80 * (8192 * 128 * (2 * 64 + 2 * 8) + 3 * 8192 * 28672)
    assert r["source_sha256"] == hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
    # config.json given by path reads its folder too; the same bytes under another name, alone, cannot:
    assert import_path(folder / "config.json")[0]["weight_dtype"] == "fp8_e4m3"
    alone = tmp_path / "nvidia__Llama-3.1-70B-Instruct-FP8.json"
    alone.write_bytes((folder / "config.json").read_bytes())
    r, warnings = import_path(alone)
    assert r["weight_dtype"] == "bf16"
    assert any(w.startswith("the name says FP8 but the config names no quantization kvreg reads: weight_dtype bf16")
               and "hf_quant_config.json" in w for w in warnings)


def test_broken_hf_quant_config_is_refused(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_bytes((DATA / "model-folders" / "nvidia__Llama-3.1-70B-Instruct-FP8" /
                                          "config.json").read_bytes())
    (folder / "hf_quant_config.json").write_text('{"producer": {"name": "modelopt"}}')
    with pytest.raises(ConfigError, match=r"hf_quant_config.json: has no \"quantization\" object; fix or remove it$"):
        import_path(folder)
    (folder / "hf_quant_config.json").write_text("{")
    with pytest.raises(ConfigError, match=r"hf_quant_config.json: not readable JSON"):
        import_path(folder)
    # read within kvreg.core.limits, as the config beside it: 33 nested arrays (MAX_DEPTH is 32), 10 MB + 1 byte
    (folder / "hf_quant_config.json").write_text("[" * 33 + "]" * 33)
    with pytest.raises(ConfigError, match=r"hf_quant_config.json: nested more than 32 levels deep"):
        import_path(folder)
    (folder / "hf_quant_config.json").write_bytes(b" " * (10_000_000 + 1))
    with pytest.raises(ConfigError, match=r"hf_quant_config.json: larger than 10 MB, too big for a quantization file"):
        import_path(folder)
    # a file that cannot be read (an I/O error: /proc/self/mem read from offset 0) is one line, not a traceback
    (folder / "hf_quant_config.json").unlink()
    (folder / "hf_quant_config.json").symlink_to("/proc/self/mem")
    with pytest.raises(ConfigError, match=r"hf_quant_config.json: not readable \(Input/output error\); fix or remove it$"):
        import_path(folder)


@pytest.mark.parametrize("weights, dtype", [
    ({"num_bits": 4, "type": "int", "group_size": 32}, "int4"),  # moonshotai/Kimi-K2.5's experts
    ({"num_bits": 8, "type": "float"}, "fp8_e4m3"),
    ({"num_bits": 4, "type": "float", "group_size": 16}, "nvfp4"),
    ({"num_bits": 3, "type": "int"}, "bf16"),  # not understood: torch_dtype, with a warning
])
def test_compressed_tensors_weights(weights, dtype):
    quant = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": weights}}}
    r, warnings = model_from_config({**HUNYUAN_A13B, "quantization_config": quant}, name="h")
    assert r["weight_dtype"] == dtype
    assert (dtype == "bf16") == any('quantization "compressed-tensors" not understood' in w for w in warnings)


# --------------------------------------------------------------------------- safetensors headers


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> int:
    """A valid safetensors file with zeroed data; returns its data size in bytes."""
    sizes = {"BF16": 2, "F32": 4, "F8_E4M3": 1, "U8": 1}
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(offset))
    return offset


def test_safetensors_headers_give_exact_bytes(tmp_path):
    folder = tmp_path / "tiny-moe"
    folder.mkdir()
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_hidden_layers": 1,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "hidden_size": 32,
              "num_experts": 4, "num_experts_per_tok": 1, "moe_intermediate_size": 16, "vocab_size": 64,
              "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
              "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"}}
    (folder / "config.json").write_text(json.dumps(config))
    data = write_safetensors(folder / "model.safetensors", {
        "model.embed_tokens.weight": ("BF16", [64, 32]),  # 4,096 B kept in bf16
        "model.layers.0.self_attn.qkv_proj.weight": ("F8_E4M3", [64, 32]),  # 2,048 B
        "model.layers.0.self_attn.qkv_proj.weight_scale": ("F32", [1]),  # 4 B
        **{f"model.layers.0.mlp.experts.{e}.down_proj.weight": ("F8_E4M3", [32, 16]) for e in range(4)},  # 4 x 512 B
    })
    assert data == 4096 + 2048 + 4 + 4 * 512 == 8196
    weights = read_checkpoint(folder)
    assert weights.bytes_by_dtype == {"BF16": 4096, "F8_E4M3": 2048 + 2048, "F32": 4}
    assert weights.expert_bytes == 2048 and weights.elements == 2048 + 2048 + 1 + 2048
    r, _ = import_path(folder)
    # weight dtype fp8 (1 B): params x 1 B = the 8,196 bytes on disk; active: 1 of 4 experts' 2,048 B
    assert (r["weight_dtype"], r["params_total"], r["params_active"]) == ("fp8_e4m3", 8196, 8196 - 1536)
    # the bf16 embeddings are in those bytes already: nothing for the engine rules to add (from the config alone: 1)
    (tmp_path / "tiny-moe.json").write_text(json.dumps(config))  # no checkpoint beside it: params estimated
    assert r["embedding_matrices"] is None and import_path(tmp_path / "tiny-moe.json")[0]["embedding_matrices"] == 1
    assert "tensor headers of 1 safetensors file(s): 8,196 B (BF16 4,096 B, F32 4 B, F8_E4M3 4,096 B)" in r["notes"]


def test_safetensors_header_is_read_without_the_weights(tmp_path):
    f = tmp_path / "model.safetensors"
    write_safetensors(f, {"w": ("BF16", [2, 3])})
    assert read_safetensors_header(f) == {"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}
    f.write_bytes((10**9).to_bytes(8, "little"))
    with pytest.raises(ConfigError, match=r"header of 1,000,000,000 bytes is larger than safetensors allows"):
        read_safetensors_header(f)
    f.write_bytes(b"\x01\x02")
    with pytest.raises(ConfigError, match="shorter than a safetensors header"):
        read_safetensors_header(f)


def test_damaged_tensor_sizes_are_refused(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(OLMO3_7B))
    raw = json.dumps({"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 6]}}).encode()
    (folder / "model.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(6))
    with pytest.raises(ConfigError, match=r"tensor w: 4 BF16 elements cannot take 6 bytes"):
        import_path(folder)


def test_sharded_checkpoint_reads_the_shards_its_index_lists(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(OLMO3_7B))
    a = write_safetensors(folder / "model-00001-of-00002.safetensors", {"a": ("BF16", [1000])})
    b = write_safetensors(folder / "model-00002-of-00002.safetensors", {"b": ("BF16", [24])})
    (folder / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": 999}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                        "b": "model-00002-of-00002.safetensors"}}))
    r, _ = import_path(folder)
    assert r["params_total"] == (a + b) // 2 == 1024  # the headers win over the index's total_size
    (folder / "model-00002-of-00002.safetensors").unlink()  # a shard missing: the index total is used
    r, _ = import_path(folder)
    assert r["params_total"] == round(999 / 2) == 500  # 999 B / 2 B per bf16 param


def test_hugging_face_cache_folder_imports_like_a_model_folder(tmp_path):
    cache = tmp_path / "models--allenai--Olmo-3-1025-7B"
    snapshot = cache / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (cache / "refs").mkdir()
    (cache / "refs" / "main").write_text("0123abcd")
    (snapshot / "config.json").write_text(json.dumps(OLMO3_7B))
    write_safetensors(snapshot / "model.safetensors", {"w": ("BF16", [7, 8])})
    r, _ = import_path(cache)
    assert r["name"] == "Olmo-3-1025-7B" and r["params_total"] == 56 and r["full_layers"] == 8
    (snapshot.parent / "fedcba98").mkdir()
    (cache / "refs" / "main").unlink()
    with pytest.raises(ConfigError, match=r"cache folder with 2 snapshots and no usable refs/main"):
        import_path(cache)


# --------------------------------------------------------------------------- model show, hybrid figures


def test_model_show_prints_both_per_token_figures_for_hybrid_models(tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", db, "model", "import", str(real("google__gemma-4-26B-A4B.json")),
                               "--params-b", "25.2"]).exit_code == 0
    shown = runner.invoke(cli, ["--db", db, "model", "show", "gemma-4-26B-A4B"])
    assert shown.exit_code == 0, shown.output
    header = next(line for line in shown.output.splitlines() if "kv_bytes_per_token_per_gpu" in line)
    assert "kv_bytes_per_token_full_per_gpu" in header
    as_json = json.loads(runner.invoke(cli, ["--db", db, "model", "show", "gemma-4-26B-A4B", "--format", "json"]).output)
    at_128k = next(f for f in as_json["figures"] if f["context_tokens"] == 131072)
    tp = at_128k["tp"]
    full = 5 * max(1, 2 // tp) * 1024 * 2
    assert at_128k["kv_bytes_per_token_full_per_gpu"] == full
    assert at_128k["kv_bytes_per_token_per_gpu"] == full + 25 * max(1, 8 // tp) * 512 * 2
    assert re.search(r"sliding_kv_heads\s+8", shown.output)


def test_report_prints_both_per_token_figures_for_a_hybrid_plan(tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    for args in (["model", "import", str(real("google__gemma-4-26B-A4B.json")), "--params-b", "25.2"],
                 ["plan", "add", "gemma4", "--model", "gemma-4-26B-A4B", "--gpu", "H100-SXM", "--tp", "2",
                  "--context", "128K"],
                 ["report", "--quarter", "2026Q4", "--out", str(tmp_path / "reports"), "--format", "md"]):
        result = runner.invoke(cli, ["--db", db, *args])
        assert result.exit_code == 0, (args, result.output)
    md = (tmp_path / "reports" / "2026-Q4" / "capacity.md").read_text()
    section = md[md.index("### gemma4"):]
    section = section[:section.index("\n### ")] if "\n### " in section else section
    # TP2: full layers 5 x 1 kv head x 1,024 x 2 B; sliding 25 x 4 kv heads x 512 x 2 B
    from kvreg.figures.labels import label

    assert f"| {label('kv_bytes_per_token_per_gpu')} | 112,640 |" in section
    assert f"| {label('kv_bytes_per_token_full_per_gpu')} | 10,240 |" in section
    llama = md[md.index("### chat-llama3-8b"):md.index("### docs-llama3-8b")]
    assert label("kv_bytes_per_token_full_per_gpu") not in llama  # only full attention: one figure


# --------------------------------------------------------------------------- model add by hand


def test_model_add_takes_per_kind_heads_and_cache_less_layers(tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    base = ["--db", db, "model", "add"]
    ok = runner.invoke(cli, [*base, "G4", "--layers", "30", "--sliding-layers", "25", "--sliding-window", "1024",
                             "--attention-heads", "16", "--kv-heads", "2", "--head-dim", "512",
                             "--sliding-kv-heads", "8", "--sliding-head-dim", "256", "--no-cache-layers", "2",
                             "--params-b", "25.2"])
    assert ok.exit_code == 0, ok.output
    (cap,) = json.loads(runner.invoke(cli, ["--db", db, "capacity", "--model", "G4", "--tp", "2", "--context", "8K",
                                            "--format", "json"]).output)
    assert cap["kv_bytes_per_token_per_gpu"] == 5 * 1 * 1024 * 2 + 25 * 4 * 512 * 2 == 112_640
    assert cap["kv_bytes_per_token_full_per_gpu"] == 10_240
    for args, message in (
        (["--layers", "32", "--sliding-kv-heads", "4"], "sliding_kv_heads / sliding_head_dim describe sliding layers, "
                                                        "but the model has none"),
        (["--layers", "32", "--sliding-layers", "16", "--sliding-window", "4096", "--sliding-kv-heads", "3"],
         "sliding_kv_heads (3) must divide attention_heads (32)"),
        (["--layers", "32", "--no-cache-layers", "-1"], "no_cache_layers"),
    ):
        bad = runner.invoke(cli, [*base, "Bad", "--attention-heads", "32", "--kv-heads", "8", "--head-dim", "128",
                                  "--params-b", "8", *args])
        assert bad.exit_code != 0 and message in bad.output, (args, bad.output)
