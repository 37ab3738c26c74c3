"""Architectures of 2025-2026 whose layers are not all softmax attention, or not all alike: each imports with
the cache its engines keep, or is refused naming the key and why (issue #40).

- linear ("lightning") attention hybrids, their layer kinds in ``attn_type_list`` (MiniMax-Text-01 / M1);
- KDA + MLA hybrids described by ``linear_attn_config`` (Kimi-Linear, Kimi-K3), experts per token spelt
  ``num_experts_per_token``;
- short-convolution hybrids (``layer_types`` "conv", or the first configs' ``full_attn_idxs``: LFM2, LFM2.5,
  and LFM2-VL nesting one in ``text_config``);
- per-layer query heads (``num_attention_heads_per_layer``: Laguna);
- sparse-attention indexers per layer (``indexer_types``: GLM-5.2).

Real configs are vendored under tests/data/hf-configs/ (MANIFEST.md gives each one's public source and sha256):
MiniMax-M1 (the config.json MiniMax ships in its model card's GitHub repository, MiniMax-AI/MiniMax-M1), LFM2-1.2B
and LFM2-350M (LiquidAI's first config.json form, with full_attn_idxs, as mirrored or downloaded by other projects),
besides Kimi-K3 and the others below. Where no unedited public copy was found (MiniMax-Text-01, LFM2-VL-1.6B,
LFM2.5-1.2B, Kimi-Linear-48B-A3B), the config is built here from the keys and values the model's published config.json
documents, and says so: those are not claimed to be the real files.

State shapes and dtypes are vLLM's (vllm/model_executor/layers/mamba/mamba_utils.py,
MambaStateShapeCalculator / MambaStateDtypeCalculator):
- linear_attention_state_shape: (num_heads // tp, head_dim, head_dim), dtype the model's (mamba_cache_dtype auto);
- kda_state_shape: conv (3 x num_heads x head_dim // tp, kernel - 1) in the model dtype, recurrent
  (num_heads // tp, head_dim, head_dim) in float32 (kda_state_dtype returns (state_dtype, torch.float32));
- short_conv_state_shape: (hidden_size // tp, conv_L_cache - 1) in the model dtype (vLLM's lfm2.py passes
  hidden_size).
The bytes per token and per 8,192- and 131,072-token sequence per GPU at TP 1, 2, 4 and 8 are worked by hand
below and compared with the registry's views.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvreg.app.access import open_registry
from kvreg.app.capacity import Question, ask
from kvreg.app.registry import add_model
from kvreg.interchange.hf.config import ConfigError
from kvreg.interchange.hf.row import import_path, model_from_config

DATA = Path(__file__).parent / "data" / "hf-configs"
TPS = (1, 2, 4, 8)
SEQ = (8192, 131072)


def real(name: str) -> Path:
    return DATA / name


def load(name: str) -> dict:
    return json.loads(real(name).read_text())


# ------------------------------------------------------------------------------ constructed configs

# Built from the keys MiniMaxAI/MiniMax-Text-01's config.json documents (no unedited public copy found): 80 layers
# of 7 lightning-attention layers then one softmax layer, 64 heads of 128, 8 kv heads, 32 experts, 2 per token.
MINIMAX_TEXT_01 = {
    "architectures": ["MiniMaxText01ForCausalLM"], "model_type": "minimax_text_01", "torch_dtype": "bfloat16",
    "attn_type_list": [0, 0, 0, 0, 0, 0, 0, 1] * 10, "head_dim": 128, "hidden_size": 6144,
    "intermediate_size": 9216, "layernorm_full_attention_alpha": 3.5565588200778455,
    "layernorm_full_attention_beta": 1.0, "layernorm_linear_attention_alpha": 3.5565588200778455,
    "layernorm_linear_attention_beta": 1.0, "layernorm_mlp_alpha": 3.5565588200778455, "layernorm_mlp_beta": 1.0,
    "max_position_embeddings": 10240000, "num_attention_heads": 64, "num_experts_per_tok": 2,
    "num_hidden_layers": 80, "num_key_value_heads": 8, "num_local_experts": 32, "postnorm": True,
    "rms_norm_eps": 1e-05, "rope_theta": 10000000, "rotary_dim": 64, "shared_intermediate_size": 0,
    "shared_moe_mode": "sigmoid", "tie_word_embeddings": False, "vocab_size": 200064, "block_size": 256,
}
# MiniMax-M1's real config.json is vendored (MiniMaxAI__MiniMax-M1-80k.json): the same network, attn_type_list and all.
# This one spells the layer kinds decoder_attention_types, the other key vLLM's minimax_text_01.py reads.
MINIMAX_DECODER_ATTENTION_TYPES = {**{k: v for k, v in MINIMAX_TEXT_01.items() if k != "attn_type_list"},
                                   "architectures": ["MiniMaxM1ForCausalLM"], "model_type": "minimax_m1",
                                   "decoder_attention_types": [0, 0, 0, 0, 0, 0, 0, 1] * 10}

# LiquidAI/LFM2-1.2B's real first config.json is vendored (LiquidAI__LFM2-1.2B.json): attention layers named by
# full_attn_idxs (no layer_types), 32 heads of 64 (hidden 2,048), 8 kv heads, conv_L_cache 3.
LFM2_FULL_ATTN = [2, 5, 8, 10, 12, 14]
# Built (no real copy found): LiquidAI/LFM2.5-1.2B-Instruct is the same shape with the layer kinds as layer_types,
# so it is the real LFM2-1.2B file with full_attn_idxs rewritten that way.
LFM25_1_2B = {**{k: v for k, v in load("LiquidAI__LFM2-1.2B.json").items() if k != "full_attn_idxs"},
              "layer_types": ["full_attention" if i in LFM2_FULL_ATTN else "conv" for i in range(16)]}
# Built (no real copy found): LiquidAI/LFM2-VL-1.6B, an Lfm2VlForConditionalGeneration whose text_config is
# LFM2-1.2B's.
LFM2_VL = {"architectures": ["Lfm2VlForConditionalGeneration"], "model_type": "lfm2_vl", "downsample_factor": 2,
           "projector_hidden_size": 2560, "text_config": {**LFM25_1_2B},
           "vision_config": {"model_type": "siglip2_vision_model", "hidden_size": 1152, "num_attention_heads": 16,
                             "num_hidden_layers": 27}}

# Built from moonshotai/Kimi-Linear-48B-A3B-Instruct's published config.json, every key and value as it ships (no
# standalone public copy of the file was found to vendor; copies seen only inside other documents): 27 layers, MLA
# in every 4th and the last (1-based 4, 8, ..., 24, 27), KDA in the other 20 (32 heads of 128, conv kernel 4); the
# model dtype spelt "dtype" (transformers 4.57), no torch_dtype.
KIMI_LINEAR_FULL = [4, 8, 12, 16, 20, 24, 27]
KIMI_LINEAR_48B = {
    "architectures": ["KimiLinearForCausalLM"],
    "auto_map": {"AutoConfig": "configuration_kimi.KimiLinearConfig", "AutoModel": "modeling_kimi.KimiLinearModel",
                 "AutoModelForCausalLM": "modeling_kimi.KimiLinearForCausalLM"},
    "bos_token_id": 163584, "dtype": "bfloat16", "eos_token_id": 163586, "first_k_dense_replace": 1, "head_dim": 72,
    "hidden_act": "silu", "hidden_size": 2304, "initializer_range": 0.02, "intermediate_size": 9216,
    "kv_lora_rank": 512, "linear_attn_config": {"full_attn_layers": KIMI_LINEAR_FULL, "head_dim": 128,
                                                "kda_layers": [i for i in range(1, 28) if i not in KIMI_LINEAR_FULL],
                                                "num_heads": 32, "short_conv_kernel_size": 4},
    "mla_use_nope": True, "model_max_length": 1048576, "model_type": "kimi_linear", "moe_intermediate_size": 1024,
    "moe_layer_freq": 1, "moe_renormalize": True, "moe_router_activation_func": "sigmoid", "num_attention_heads": 32,
    "num_expert_group": 1, "num_experts": 256, "num_experts_per_token": 8, "num_hidden_layers": 27,
    "num_key_value_heads": 32, "num_nextn_predict_layers": 0, "num_shared_experts": 1, "pad_token_id": 163839,
    "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 10000.0, "routed_scaling_factor": 2.446, "tie_word_embeddings": False, "topk_group": 1,
    "transformers_version": "4.57.1", "use_cache": True, "use_grouped_topk": True, "v_head_dim": 128,
    "vocab_size": 163840,
}


def _imported(source) -> tuple[dict, list[str]]:
    if isinstance(source, Path):
        return import_path(source)
    return model_from_config(source, name="x", source="constructed")


FAMILIES = {name: _imported(src) for name, src in {
    "MiniMax-Text-01": MINIMAX_TEXT_01,
    "MiniMax-M1": real("MiniMaxAI__MiniMax-M1-80k.json"),
    "MiniMax-decoder_attention_types": MINIMAX_DECODER_ATTENTION_TYPES,
    "Kimi-Linear-48B": KIMI_LINEAR_48B,
    "Kimi-K3": real("moonshotai__Kimi-K3.json"),
    "LFM2-1.2B": real("LiquidAI__LFM2-1.2B.json"),
    "LFM2.5-1.2B": LFM25_1_2B,
    "LFM2-VL-1.6B": LFM2_VL,
    "LFM2-350M": real("LiquidAI__LFM2-350M.json"),
    "Laguna-XS.2": real("poolside__Laguna-XS.2-FP8.json"),
    "Laguna-S-2.1": real("poolside__Laguna-S-2.1-FP8.json"),
    "GLM-5.2": real("zai-org__GLM-5.2.json"),
    "GLM-5.1": real("zai-org__GLM-5.1.json"),
}.items()}


def row(name: str) -> dict:
    return FAMILIES[name][0]


@pytest.fixture(scope="module")
def registry(module_db_url):
    engine = open_registry(module_db_url)
    with engine.begin() as conn:
        for name, (r, _) in FAMILIES.items():
            add_model(conn, {**r, "name": name})
    yield engine
    engine.dispose()


def per_gpu(engine, model: str, tp: int, rule: str | None = None) -> dict:
    return per_gpu_of(engine, [model], tp, rule)[model]


def per_gpu_of(engine, models: list[str], tp: int, rule: str | None = None) -> dict[str, dict]:
    """per_gpu for several models, by model name, from one question (one query on the what-if's SQL)."""
    with engine.connect() as conn:
        kwargs = {"rule": rule} if rule else {}
        rows = ask(conn, Question(models=models, contexts=list(SEQ), tp=tp, gpus=["H100-SXM"], block_size=16,
                                  **kwargs))
    out = {}
    for model in models:
        by_ctx = {r["context_tokens"]: r for r in rows if r["model"] == model}
        r = by_ctx[8192]
        out[model] = {"all": r["kv_bytes_per_token_per_gpu"], "full": r["kv_bytes_per_token_full_per_gpu"],
                      "state": r["state_bytes_per_sequence_per_gpu"],
                      8192: r["kv_bytes_per_sequence_per_gpu"], 131072: by_ctx[131072]["kv_bytes_per_sequence_per_gpu"]}
    return out


# ------------------------------------------------------------------- lightning attention (MiniMax)


@pytest.mark.parametrize("name", ["MiniMax-Text-01", "MiniMax-M1", "MiniMax-decoder_attention_types"])
def test_minimax_lightning_layers_hold_a_head_dim_square_per_head(name):
    r = row(name)
    assert (r["layers"], r["full_layers"], r["linear_layers"], r["kv_heads"], r["head_dim"]) == (80, 10, 70, 8, 128)
    assert r["linear_state_elements_per_layer"] == 64 * 128 * 128 == 1_048_576  # no conv state
    assert r["linear_state_heads"] == 64  # vLLM: num_heads // tp_size
    assert r["linear_state_dtype"] is None  # the model dtype, bf16: 2,097,152 B per layer
    assert r["linear_recurrent_elements_per_layer"] is None


@pytest.mark.parametrize("name", ["MiniMax-Text-01", "MiniMax-M1", "MiniMax-decoder_attention_types"])
def test_minimax_per_gpu_bytes(registry, name):
    for tp in TPS:
        token = 10 * max(1, 8 // tp) * 128 * 2 * 2  # 40,960 / 20,480 / 10,240 / 5,120 B
        state = 70 * 64 * 128 * 128 * 2 // min(tp, 64)  # 146,800,640 B at TP1, split by the 64 heads
        assert per_gpu(registry, name, tp) == {
            "all": token, "full": token, "state": state, 8192: token * 8192 + state, 131072: token * 131072 + state}, tp


def test_minimax_m1_real_config():
    """MiniMaxAI__MiniMax-M1-80k.json: attn_type_list of 80 entries, 0 in layers 0-6, 8-14, ..., 72-78 and 1 in every
    8th (7, 15, ..., 79); 64 query heads of head_dim 128, 8 kv heads; no torch_dtype, so bf16 is assumed and said."""
    cfg = load("MiniMaxAI__MiniMax-M1-80k.json")
    assert [i for i, t in enumerate(cfg["attn_type_list"]) if t == 1] == list(range(7, 80, 8))
    r, warnings = FAMILIES["MiniMax-M1"]
    assert (r["architecture"], r["linear_state_kind"], r["weight_dtype"]) == (
        "MiniMaxM1ForCausalLM", "lightning", "bf16")
    assert "config names no torch_dtype: weight_dtype bf16 assumed; correct the row if not" in warnings
    assert r["max_position_embeddings"] == 10_240_000
    keys = ("layers", "full_layers", "linear_layers", "kv_heads", "head_dim", "linear_state_elements_per_layer",
            "linear_state_heads", "linear_state_kind")
    for other in ("MiniMax-Text-01", "MiniMax-decoder_attention_types"):  # the built configs import alike
        assert {k: row(other)[k] for k in keys} == {k: r[k] for k in keys}, other


def test_minimax_in_transformers_layer_types_imports_alike():
    """transformers' MiniMaxConfig (model_type minimax) writes the kinds as layer_types, 0 -> "linear_attention"."""
    hf = {k: v for k, v in MINIMAX_TEXT_01.items() if k != "attn_type_list"} | {
        "model_type": "minimax", "architectures": ["MiniMaxForCausalLM"],
        "layer_types": (["linear_attention"] * 7 + ["full_attention"]) * 10}
    r, _ = model_from_config(hf, name="m", source="constructed")
    keys = ("full_layers", "linear_layers", "linear_state_elements_per_layer", "linear_state_heads", "linear_state_kind")
    assert {k: r[k] for k in keys} == {k: row("MiniMax-Text-01")[k] for k in keys}
    assert r["linear_state_kind"] == "lightning"


def test_attn_type_list_of_the_wrong_length_or_values_is_refused():
    with pytest.raises(ConfigError, match=r"^constructed: attn_type_list must list 0 \(lightning attention\) or 1"):
        model_from_config({**MINIMAX_TEXT_01, "attn_type_list": [0, 1] * 10}, name="m", source="constructed")
    with pytest.raises(ConfigError, match=r"attn_type_list must list 0"):
        model_from_config({**MINIMAX_TEXT_01, "attn_type_list": [2] * 80}, name="m", source="constructed")


# ------------------------------------------------------------------------------ KDA + MLA (Kimi)


def test_kimi_linear_kda_state_and_mla_layers():
    r = row("Kimi-Linear-48B")
    assert (r["layers"], r["full_layers"], r["linear_layers"]) == (27, 7, 20)
    assert (r["kv_lora_rank"], r["qk_rope_head_dim"]) == (512, 64)
    conv = 3 * 32 * 128 * (4 - 1)  # 36,864 elements in bf16
    recurrent = 32 * 128 * 128  # 524,288 elements in float32, whatever the model dtype
    assert r["linear_state_dtype"] == "fp32"
    assert r["linear_state_elements_per_layer"] * 4 == conv * 2 + recurrent * 4 == 2_170_880
    assert r["linear_recurrent_elements_per_layer"] == recurrent
    assert r["linear_state_heads"] == 32
    assert r["max_position_embeddings"] == 1_048_576  # model_max_length
    assert r["experts"] == 256  # num_experts_per_token read as the top-k: an estimate of 8 of 256 experts
    assert r["weight_dtype"] == "bf16"  # read from "dtype", the only spelling the file has
    assert not [w for w in FAMILIES["Kimi-Linear-48B"][1] if "torch_dtype" in w or "ignored" in w]
    assert r["params_active"] < r["params_total"] / 10


def test_kimi_k3_real_config_in_text_config():
    """moonshotai__Kimi-K3.json: a KimiK3ForConditionalGeneration whose text_config is a kimi_linear of 93 layers,
    69 KDA (96 heads of 128) and 24 MLA."""
    r = row("Kimi-K3")
    assert (r["layers"], r["full_layers"], r["linear_layers"]) == (93, 24, 69)
    conv, recurrent = 3 * 96 * 128 * 3, 96 * 128 * 128  # 110,592 bf16 and 1,572,864 fp32 elements
    assert r["linear_state_elements_per_layer"] * 4 == conv * 2 + recurrent * 4 == 6_512_640
    assert (r["linear_state_heads"], r["kv_lora_rank"], r["qk_rope_head_dim"]) == (96, 512, 64)
    assert r["max_position_embeddings"] == 1_048_576


def test_kimi_k3_routed_experts_work_in_the_expert_latent():
    """Kimi-K3's routed experts work in routed_expert_hidden_size (3,584) rather than hidden_size (7,168): a
    routed_expert_down_proj (hidden -> latent) before the experts and a routed_expert_up_proj after them, once per
    MoE layer; the router and the two shared experts (num_shared_experts x moe_intermediate_size wide) keep the full
    hidden width (the checkpoint's block_sparse_moe tensors). The estimate was 5.49T total / 141B active before it
    read the latent."""
    r = row("Kimi-K3")
    hidden, vocab = 7168, 163840
    embeddings = 2 * vocab * hidden  # tie_word_embeddings false
    mla = (hidden * 1536 + 1536 * 96 * (128 + 64)  # q_lora_rank 1536, 96 heads of 128 nope + 64 rope
           + hidden * (512 + 64) + 512 * 96 * (128 + 128)  # kv_lora_rank 512: the latent, then K nope and V
           + 96 * 128 * hidden)  # o_proj
    kda = (4 * hidden * 96 * 128 + 2 * (hidden * 128 + 128 * 96 * 128)  # q, k, v, o; forget and output gates
           + hidden * 96 + 3 * 96 * 128 * 4)  # b_proj; three depthwise convolutions of 4 taps
    dense = 3 * hidden * 33792  # layer 0 (first_k_dense_replace 1)
    expert = 3 * 3584 * 3072  # gate, up, down in the latent
    per_moe_layer = 2 * 3 * hidden * 3072 + hidden * 896 + 2 * hidden * 3584  # shared experts, router, down + up
    base = embeddings + 24 * mla + 69 * kda + dense
    assert r["params_total"] == base + 92 * (896 * expert + per_moe_layer) == 2_771_459_489_792
    assert r["params_active"] == base + 92 * (16 * expert + per_moe_layer) == 97_339_031_552


def test_kimi_k3_mxfp4_experts_are_laid_out_in_the_latent(registry):
    """Kimi-K3's checkpoint is MXFP4 (compressed-tensors mxfp4-pack-quantized, group 32: weight_dtype fp4), so the
    engine rules lay its routed experts out as the MoE kernels do, each expert 3 x 3,072 x 3,584 (the latent it works
    in, expert_hidden_size), not x 7,168: the routed experts are 2.72T of the 2.77T parameters, not 5.45T."""
    assert row("Kimi-K3")["expert_hidden_size"] == 3584
    with registry.connect() as conn:
        (r,) = ask(conn, Question(models=["Kimi-K3"], contexts=[8192], tp=8, gpus=["B200"], rule="vllm"))
    assert r["expert_params"] == 92 * 896 * 3 * 3584 * 3072 == 2_722_740_830_208
    assert r["expert_params"] < row("Kimi-K3")["params_total"] == 2_771_459_489_792
    assert r["mxfp4_hidden"] == 3584  # Triton kernels (v0.11.1 on): the width unpadded


@pytest.mark.parametrize("name, mla, kda, per_layer, heads", [
    ("Kimi-Linear-48B", 7, 20, 2_170_880, 32), ("Kimi-K3", 24, 69, 6_512_640, 96)])
def test_kimi_per_gpu_bytes(registry, name, mla, kda, per_layer, heads):
    for tp in TPS:
        token = mla * (512 + 64) * 2  # the latent is whole on every GPU: 8,064 / 27,648 B
        state = kda * per_layer // min(tp, heads)  # 43,417,600 / 449,372,160 B at TP1
        assert per_gpu(registry, name, tp) == {
            "all": token, "full": token, "state": state, 8192: token * 8192 + state, 131072: token * 131072 + state}, tp


def test_kda_config_keys_that_would_change_the_state_are_refused():
    bad = {**KIMI_LINEAR_48B, "linear_attn_config": {**KIMI_LINEAR_48B["linear_attn_config"], "num_k_heads": 16}}
    with pytest.raises(ConfigError, match=r"^constructed: linear_attn_config.num_k_heads = 16 could change the KDA "
                                          r"state and kvreg does not understand it"):
        model_from_config(bad, name="k", source="constructed")
    gap = {**KIMI_LINEAR_48B, "linear_attn_config": {**KIMI_LINEAR_48B["linear_attn_config"], "full_attn_layers": [4]}}
    with pytest.raises(ConfigError, match=r"kda_layers and full_attn_layers must number each of the 27 layers"):
        model_from_config(gap, name="k", source="constructed")


# --------------------------------------------------------------------------- short convolution (LFM2)


@pytest.mark.parametrize("name", ["LFM2-1.2B", "LFM2.5-1.2B", "LFM2-VL-1.6B"])
def test_lfm2_conv_layers_keep_a_short_conv_state(name):
    r = row(name)
    assert (r["layers"], r["full_layers"], r["linear_layers"], r["kv_heads"], r["head_dim"]) == (16, 6, 10, 8, 64)
    assert r["linear_state_elements_per_layer"] == 2048 * (3 - 1) == 4096  # hidden_size x (conv_L_cache - 1)
    assert r["linear_state_heads"] == 2048  # vLLM divides the 2,048 channels by TP
    assert r["linear_state_dtype"] is None and r["linear_recurrent_elements_per_layer"] is None


@pytest.mark.parametrize("name", ["LFM2-1.2B", "LFM2.5-1.2B", "LFM2-VL-1.6B"])
def test_lfm2_per_gpu_bytes(registry, name):
    for tp in TPS:
        token = 6 * max(1, 8 // tp) * 64 * 2 * 2  # 12,288 / 6,144 / 3,072 / 1,536 B
        state = 10 * 4096 * 2 // tp  # 81,920 B at TP1
        assert per_gpu(registry, name, tp) == {
            "all": token, "full": token, "state": state, 8192: token * 8192 + state, 131072: token * 131072 + state}, tp


def test_lfm2_1_2b_real_config_is_the_first_form():
    """LiquidAI__LFM2-1.2B.json names its attention layers by full_attn_idxs and has no layer_types; the built
    LFM2.5 config (layer_types) and LFM2-VL (the same in text_config) must import exactly as it does."""
    cfg = load("LiquidAI__LFM2-1.2B.json")
    assert "layer_types" not in cfg and cfg["full_attn_idxs"] == LFM2_FULL_ATTN
    assert (cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["conv_L_cache"]) == (
        2048, 32, 8, 3)  # head_dim 2,048 / 32 = 64
    keys = ("layers", "full_layers", "linear_layers", "kv_heads", "head_dim", "linear_state_elements_per_layer",
            "linear_state_heads", "linear_state_dtype", "linear_state_kind")
    for built in ("LFM2.5-1.2B", "LFM2-VL-1.6B"):
        assert {k: row(built)[k] for k in keys} == {k: row("LFM2-1.2B")[k] for k in keys}, built


def test_lfm2_350m_real_config():
    """LiquidAI__LFM2-350M.json: the first LFM2 form, full_attn_idxs [2, 5, 8, 10, 12, 14] and no layer_types; hidden
    1,024 = 16 heads of 64, 8 kv heads, conv_L_cache 3 (conv_dim 1,024, the hidden size vLLM sizes the state by)."""
    cfg = load("LiquidAI__LFM2-350M.json")
    assert "layer_types" not in cfg and cfg["full_attn_idxs"] == LFM2_FULL_ATTN
    r = row("LFM2-350M")
    assert (r["layers"], r["full_layers"], r["linear_layers"], r["kv_heads"], r["head_dim"]) == (16, 6, 10, 8, 64)
    assert r["linear_state_elements_per_layer"] == 1024 * (3 - 1) == 2048  # hidden_size x (conv_L_cache - 1)
    assert (r["linear_state_heads"], r["linear_state_kind"], r["weight_dtype"]) == (1024, "short_conv", "bf16")
    assert r["linear_state_dtype"] is None and r["linear_recurrent_elements_per_layer"] is None


def test_lfm2_350m_per_gpu_bytes(registry):
    for tp in TPS:
        # 6 attention layers x 8/4/2/1 kv heads x (K + V) 2 x 64 x 2 B: 12,288 / 6,144 / 3,072 / 1,536 B
        token = 6 * max(1, 8 // tp) * 64 * 2 * 2
        state = 10 * 2048 * 2 // tp  # 10 conv layers x 2,048 bf16 elements = 40,960 B at TP1, 1,024 channels split
        assert per_gpu(registry, "LFM2-350M", tp) == {
            "all": token, "full": token, "state": state, 8192: token * 8192 + state, 131072: token * 131072 + state}, tp
    assert per_gpu(registry, "LFM2-350M", 1)[131072] == 12_288 * 131_072 + 40_960 == 1_610_653_696
    assert per_gpu(registry, "LFM2-350M", 8)[8192] == 1_536 * 8_192 + 5_120 == 12_588_032


@pytest.mark.parametrize("wrapper", ["llm_config", "language_config"])
def test_other_wrappers_nest_the_language_model_alike(wrapper):
    nested = {k: v for k, v in LFM2_VL.items() if k != "text_config"} | {wrapper: LFM2_VL["text_config"]}
    r, _ = model_from_config(nested, name="w", source="constructed")
    assert {k: r[k] for k in ("full_layers", "linear_layers", "linear_state_elements_per_layer")} == {
        "full_layers": 6, "linear_layers": 10, "linear_state_elements_per_layer": 4096}


def test_an_unknown_layer_type_is_still_refused_by_name():
    bad = {**LFM25_1_2B, "layer_types": ["conv"] * 15 + ["retention"]}
    with pytest.raises(ConfigError, match=r"layer_types entry \"retention\" is not a layer kind kvreg knows"):
        model_from_config(bad, name="l", source="constructed")


# ------------------------------------------------------------------------ per-layer heads (Laguna)


def test_laguna_per_layer_query_heads_keep_one_kv_head_count():
    """poolside__Laguna-XS.2-FP8.json: 48 query heads on the full layers, 64 on the sliding ones, 8 kv heads in all."""
    r = row("Laguna-XS.2")
    assert (r["layers"], r["full_layers"], r["sliding_layers"], r["sliding_window"]) == (40, 10, 30, 512)
    assert (r["kv_heads"], r["head_dim"], r["attention_heads"]) == (8, 128, 16)  # gcd(48, 64)
    assert "num_attention_heads_per_layer: query heads per layer (48 heads in 10 layers, 64 heads in 30 layers)" \
        in r["notes"]
    s = row("Laguna-S-2.1")
    assert (s["layers"], s["full_layers"], s["sliding_layers"], s["attention_heads"]) == (48, 12, 36, 24)  # gcd(48, 72)


@pytest.mark.parametrize("name, full_layers, sliding_layers", [("Laguna-XS.2", 10, 30), ("Laguna-S-2.1", 12, 36)])
def test_laguna_per_gpu_bytes(registry, name, full_layers, sliding_layers):
    for tp in TPS:
        layer = max(1, 8 // tp) * 128 * 2 * 2  # 4,096 / 2,048 / 1,024 / 512 B
        full, sliding = full_layers * layer, sliding_layers * layer
        assert per_gpu(registry, name, tp) == {
            "all": full + sliding, "full": full, "state": 0,
            8192: full * 8192 + sliding * 512, 131072: full * 131072 + sliding * 512}, tp


def test_per_layer_heads_that_split_a_kv_group_are_refused():
    bad = load("poolside__Laguna-XS.2-FP8.json")
    bad["num_attention_heads_per_layer"][3] = 60
    with pytest.raises(ConfigError, match=r"num_attention_heads_per_layer\[3\] = 60 is not a multiple of the 8 kv heads"):
        model_from_config(bad, name="l", source="constructed")
    bad["num_attention_heads_per_layer"] = [48] * 39
    with pytest.raises(ConfigError, match=r"num_attention_heads_per_layer has 39 entries but the model has 40 layers"):
        model_from_config(bad, name="l", source="constructed")


def test_per_layer_kv_heads_beside_sliding_layers_are_refused_naming_the_key():
    """Laguna has sliding layers: kvreg keeps per-layer kv heads for full attention only (tests/test_layer_heads.py)."""
    bad = {**load("poolside__Laguna-XS.2-FP8.json"), "num_key_value_heads_per_layer": [8, 4] * 20}
    with pytest.raises(ConfigError, match=r"^constructed: num_key_value_heads_per_layer gives the layers different kv "
                                          r"head counts \(8 kv heads in 20 layers, 4 kv heads in 20 layers\) in a model "
                                          r"with sliding, chunked or linear layers"):
        model_from_config(bad, name="l", source="constructed")


# ---------------------------------------------------------------- sparse-attention indexers (GLM-5.2)


def test_glm52_indexer_types_count_the_layers_keeping_an_indexer():
    """zai-org__GLM-5.2.json: indexer_types marks 21 of 78 layers "full" (layers 0-2, then every 4th from 6 to 74),
    the others "shared" (they reuse the last full layer's top-k and have no indexer); GLM-5.1 has no such list."""
    r = row("GLM-5.2")
    assert (r["layers"], r["full_layers"], r["kv_lora_rank"], r["qk_rope_head_dim"]) == (78, 78, 512, 64)
    assert r["indexer_bytes_per_token_per_layer"] == 128 + 128 // 128 * 4 == 132  # fp8 key + one fp32 scale
    assert r["indexer_layers"] == len([0, 1, 2] + list(range(6, 75, 4))) == 21
    assert row("GLM-5.1")["indexer_layers"] is None  # every MLA layer keeps one


@pytest.mark.parametrize("name, indexer_layers", [("GLM-5.2", 21), ("GLM-5.1", 78)])
def test_glm5_per_gpu_bytes(registry, name, indexer_layers):
    latent = 78 * (512 + 64) * 2  # 89,856 B: the MLA latent is whole on every GPU
    for tp in TPS:
        for rule, token in (("theoretical", latent), ("vllm", latent + indexer_layers * 132)):  # 92,628 / 100,152
            got = per_gpu(registry, name, tp, rule)
            assert (got["all"], got["full"], got[8192], got[131072]) == (token, token, token * 8192, token * 131072), \
                (tp, rule)


@pytest.mark.parametrize("name, indexer_layers", [("GLM-5.2", 21), ("GLM-5.1", 78)])
def test_glm5_vllm_pages_hold_an_indexer_only_on_the_layers_keeping_one(registry, name, indexer_layers):
    """vLLM (deepseek_v2.py, DeepseekV2MLAAttention.__init__) builds an Indexer, and with it a
    DeepseekV32IndexerCache layer whose MLAAttentionSpec is one 132-byte uint8 entry per token, only on the layers
    that do not skip top-k; GLM-5.2's index_topk_freq 4 and index_skip_topk_offset 3 skip 57 of 78, the same layers
    indexer_types marks "shared". All specs being full attention of one block size, get_kv_cache_groups
    (vllm/v1/core/kv_cache_utils.py) puts every layer in one UniformTypeKVCacheSpecs group, whose page is the sum of
    each layer's own page (vllm/v1/kv_cache_interface.py): the shared layers add no indexer page."""
    with registry.connect() as conn:
        for tp in TPS:
            (r,) = ask(conn, Question(models=[name], contexts=[8192], tp=tp, gpus=["H100-SXM"], block_size=16,
                                      rule="vllm"))
            block = r["kv_block_tokens"]
            latent_page = block * 78 * (512 + 64) * 2  # 78 MLA layers of 1,152 B a token: 1,437,696 B at 16 tokens
            indexer_page = block * indexer_layers * 132  # GLM-5.2: 44,352 B; GLM-5.1: 164,736 B
            assert r["page_bytes_per_gpu"] == latent_page + indexer_page, tp
            assert r["page_bytes_per_gpu"] == block * r["kv_bytes_per_token_per_gpu"], tp
            assert r["num_blocks"] == max(0, r["kv_pool_bytes_per_gpu"] // r["page_bytes_per_gpu"]), tp  # 0: no fit
    if name == "GLM-5.2":
        assert (block, latent_page, indexer_page) == (16, 1_437_696, 44_352)  # 1,482,048 B a block (16 x 78 x 1,284 = 1,602,432 before)


def test_indexer_types_must_be_full_or_shared_per_layer():
    bad = {**load("zai-org__GLM-5.2.json"), "indexer_types": ["full", "lazy"] * 39}
    with pytest.raises(ConfigError, match=r'^constructed: indexer_types must list "full" or "shared" for each of the 78'):
        model_from_config(bad, name="g", source="constructed")


# ------------------------------------------------------------------------ kvreg model show --layers


def test_model_show_layers_lists_each_group_with_its_bytes_on_one_gpu(tmp_path):
    from click.testing import CliRunner

    from kvreg.cli import cli

    db, runner = f"sqlite:///{tmp_path / 'r.db'}", CliRunner()
    for name in ("moonshotai__Kimi-K3.json", "zai-org__GLM-5.2.json", "poolside__Laguna-XS.2-FP8.json"):
        assert runner.invoke(cli, ["--db", db, "model", "import", str(real(name)), "--params-b", "30"]).exit_code == 0

    def groups(model, *args):
        out = runner.invoke(cli, ["--db", db, "model", "show", model, "--layers", "--format", "json", *args])
        assert out.exit_code == 0, out.output
        return {g["kind"]: g for g in json.loads(out.output)}

    kimi = groups("Kimi-K3", "--tp", "4")
    assert (kimi["mla"]["layers"], kimi["mla"]["k_width"], kimi["mla"]["bytes_per_token_per_gpu"]) == (
        24, "512 latent + 64 rope", 24 * 576 * 2)  # 27,648 B: the latent is whole on each GPU
    assert (kimi["kda"]["layers"], kimi["kda"]["state_elements_per_layer"], kimi["kda"]["state_dtype"]) == (
        69, 1_628_160, "fp32")
    assert kimi["kda"]["state_bytes_per_sequence_per_gpu"] == 69 * 6_512_640 // 4 == 112_343_040
    glm = groups("GLM-5.2", "--rule", "vllm")
    assert (glm["mla"]["indexer_layers"], glm["mla"]["indexer_bytes_per_token_per_layer"]) == (21, 132)
    assert glm["mla"]["bytes_per_token_per_gpu"] == 78 * 1152 + 21 * 132 == 92_628
    assert groups("GLM-5.2")["mla"]["bytes_per_token_per_gpu"] == 78 * 1152  # theoretical: no indexer
    laguna = groups("Laguna-XS.2-FP8", "--tp", "8")
    assert (laguna["full"]["kv_heads_per_gpu"], laguna["full"]["bytes_per_token_per_gpu"]) == (1, 10 * 1 * 128 * 2 * 2)
    assert (laguna["sliding"]["window"], laguna["sliding"]["bytes_per_token_per_gpu"]) == (512, 30 * 512)
    table = runner.invoke(cli, ["--db", db, "model", "show", "Kimi-K3", "--layers"]).output
    assert table.splitlines()[0].split()[:3] == ["kind", "layers", "layers_per_gpu"]
    bad = runner.invoke(cli, ["--db", db, "model", "show", "Kimi-K3", "--layers", "--tp", "5"])
    assert bad.exit_code != 0 and "TP 5" in bad.output and "Traceback" not in bad.output


def test_model_check_says_which_cache_keys_were_read_and_which_ignored():
    from click.testing import CliRunner

    from kvreg.cli import cli

    out = CliRunner().invoke(cli, ["model", "check", str(real("zai-org__GLM-5.2.json")), str(real("moonshotai__Kimi-K3.json")),
                                   "--format", "json"])
    assert out.exit_code == 0, out.output
    glm, kimi = json.loads(out.output)
    assert {"indexer_types", "index_head_dim", "kv_lora_rank", "qk_rope_head_dim"} <= set(glm["cache_keys_read"])
    assert glm["cache_keys_ignored"] == ["index_n_heads", "index_share_for_mtp_iteration"]
    assert {"linear_attn_config", "kv_lora_rank"} <= set(kimi["cache_keys_read"])
    assert "pruned_heads" in kimi["cache_keys_ignored"]  # Kimi-K3's text_config sets it to {}: known inert
    assert (glm["indexer_layers"], kimi["linear_state_kind"]) == (21, "kda")


def test_docs_name_every_key_read_or_known_inert():
    """docs/config-keys.md lists what the importer reads and what it knows not to change the cache."""
    from kvreg.interchange.hf import config, keys as accounting

    page = (Path(__file__).resolve().parents[1] / "docs" / "config-keys.md").read_text(encoding="utf-8")
    keys = (accounting._UNDERSTOOD | accounting._HARMLESS | accounting.KDA_READ | accounting.KDA_HARMLESS
            | set(config.TEXT_CONFIG_KEYS))
    assert sorted(k for k in keys if f"`{k}`" not in page) == []


# ------------------------------------------------------- 2025-2026 releases, real configs, one table

# Each row read by hand from the vendored file (MANIFEST.md gives its source): attention layers as (layers, kv heads,
# K + V width per head), sliding layers likewise with their window, MLA layers and the layers keeping an indexer, and
# the state: layers, bytes per layer per sequence at TP1 (worked out beside it) and the heads it shards by.
NEMOTRON_NANO_STATE = (64 * 64 + 2 * 8 * 128) * 3 * 2 + 64 * 64 * 128 * 4  # conv bf16 36,864 + SSM fp32 2,097,152
NEMOTRON_SUPER_STATE = (128 * 64 + 2 * 8 * 128) * 3 * 2 + 128 * 64 * 128 * 4  # 61,440 + 4,194,304
QWEN35_MOE_STATE = (2 * 16 * 128 + 64 * 128) * 3 * 2 + 64 * 128 * 128 * 4  # conv bf16 73,728 + recurrent fp32 4,194,304
QWEN36_27B_STATE = (2 * 16 * 128 + 48 * 128) * 3 * 2 + 48 * 128 * 128 * 4  # 61,440 + 3,145,728
QWEN36_35B_STATE = (2 * 16 * 128 + 32 * 128) * 3 * 2 + 32 * 128 * 128 * 4  # 49,152 + 2,097,152
KIMI_K3_STATE = 3 * 96 * 128 * 3 * 2 + 96 * 128 * 128 * 4  # KDA conv bf16 221,184 + recurrent fp32 6,291,456
RELEASES = {
    # file: (full (layers, kv heads, K+V), sliding (layers, kv heads, K+V, window), MLA (layers, indexer layers),
    #        state (layers, bytes per layer, shard heads))
    "Qwen__Qwen3-VL-8B-Instruct.json": ((36, 8, 256), None, None, None),  # text_config
    "Qwen__Qwen3-VL-30B-A3B-Instruct.json": ((48, 4, 256), None, None, None),  # text_config
    "MiniMaxAI__MiniMax-M2.5.json": ((62, 8, 256), None, None, None),  # attn_type_list all 1
    "openai__gpt-oss-20b.json": ((12, 8, 128), (12, 8, 128, 128), None, None),
    "stepfun-ai__Step-3.7-Flash.json": ((12, 8, 256), (33, 8, 256, 512), None, None),
    "poolside__Laguna-XS.2-FP8.json": ((10, 8, 256), (30, 8, 256, 512), None, None),  # per-layer query heads
    "poolside__Laguna-S-2.1-FP8.json": ((12, 8, 256), (36, 8, 256, 512), None, None),
    "deepseek-ai__DeepSeek-V3.2.json": (None, None, (61, 61), None),
    "zai-org__GLM-5.json": (None, None, (78, 78), None),
    "zai-org__GLM-5.1.json": (None, None, (78, 78), None),
    "zai-org__GLM-5.2.json": (None, None, (78, 21), None),  # indexer_types
    "zai-org__GLM-5.3.json": (None, None, (78, 21), None),
    "nvidia__GLM-5.2-NVFP4.json": (None, None, (78, 21), None),  # layer_types "deepseek_sparse_attention"
    "moonshotai__Kimi-K2.5.json": (None, None, (61, 0), None),  # text_config
    "nvidia__Kimi-K2.6-NVFP4.json": (None, None, (61, 0), None),
    "moonshotai__Kimi-K3.json": (None, None, (24, 0), (69, KIMI_K3_STATE, 96)),  # KDA, text_config
    "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json": ((6, 2, 256), None, None, (23, NEMOTRON_NANO_STATE, 64)),
    "nvidia__NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4.json": ((6, 2, 256), None, None,
                                                                  (23, NEMOTRON_NANO_STATE, 64)),
    "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json": ((8, 2, 256), None, None, (40, NEMOTRON_SUPER_STATE, 128)),
    "Qwen__Qwen3.5-122B-A10B.json": ((12, 2, 512), None, None, (36, QWEN35_MOE_STATE, 16)),
    "Qwen__Qwen3.5-397B-A17B.json": ((15, 2, 512), None, None, (45, QWEN35_MOE_STATE, 16)),
    "nvidia__Qwen3.6-27B-NVFP4.json": ((16, 4, 512), None, None, (48, QWEN36_27B_STATE, 16)),
    "nvidia__Qwen3.6-35B-A3B-NVFP4.json": ((10, 2, 512), None, None, (30, QWEN36_35B_STATE, 16)),
}
# Real configs whose cache kvreg cannot model: refused with the key named and why.
REFUSED = {
    "MiniMaxAI__MiniMax-M3.json": "sparse_attention_config",  # a block-sparse index beside the KV cache
    "deepseek-ai__DeepSeek-V4-Flash.json": "compress_ratios",  # KV compressed 4x or 128x per layer
}


@pytest.fixture(scope="module")
def releases(module_db_url):
    """Every release imported into one registry, and each one's per_gpu at every TP and rule: one question
    per TP and rule for all of them (a question per release made the PostgreSQL half 30 times the SQLite's)."""
    engine = open_registry(module_db_url)
    with engine.begin() as conn:
        for name in RELEASES:
            r, _ = import_path(real(name))
            add_model(conn, {**r, "name": name})
    got = {}
    for tp in TPS:
        for rule in ("theoretical", "vllm"):
            for name, bytes_ in per_gpu_of(engine, sorted(RELEASES), tp, rule).items():
                got[name, tp, rule] = bytes_
    yield got
    engine.dispose()


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_release_per_token_and_per_sequence_bytes(releases, name):
    full, sliding, mla, state = RELEASES[name]
    for tp in TPS:
        for rule in ("theoretical", "vllm"):
            f = full[0] * max(1, full[1] // tp) * full[2] * 2 if full else 0  # bf16: 2 B an element
            s = sliding[0] * max(1, sliding[1] // tp) * sliding[2] * 2 if sliding else 0
            if mla:  # the 512 + 64 latent whole on each GPU; vLLM adds 132 B of indexer on the layers keeping one
                f = mla[0] * (512 + 64) * 2 + (mla[1] * 132 if rule == "vllm" else 0)
            st = state[0] * state[1] // min(tp, state[2]) if state else 0
            window = sliding[3] if sliding else 0
            got = releases[name, tp, rule]
            assert got == {"all": f + s, "full": f, "state": st, 8192: f * 8192 + s * min(8192, window) + st,
                           131072: f * 131072 + s * min(131072, window) + st}, (tp, rule)


@pytest.mark.parametrize("name, key", sorted(REFUSED.items()))
def test_release_whose_cache_kvreg_cannot_model_is_refused_naming_the_key(name, key):
    with pytest.raises(ConfigError, match=rf"^{re.escape(name)}: {key} = .* could change the KV cache"):
        import_path(DATA / "refused" / name)


def test_model_add_takes_the_layers_keeping_an_indexer(tmp_path):
    from click.testing import CliRunner

    from kvreg.cli import cli

    db, runner = f"sqlite:///{tmp_path / 'r.db'}", CliRunner()
    base = ["--db", db, "model", "add", "G", "--layers", "78", "--attention-heads", "64", "--kv-heads", "64",
            "--head-dim", "256", "--kv-lora-rank", "512", "--qk-rope-head-dim", "64", "--params-b", "744"]
    out = runner.invoke(cli, [*base, "--indexer-layers", "21"])
    assert out.exit_code != 0 and "give --indexer-bytes-per-token-per-layer too" in out.output
    out = runner.invoke(cli, [*base, "--indexer-bytes-per-token-per-layer", "132", "--indexer-layers", "79"])
    assert out.exit_code != 0 and out.output == (
        "Error: model 'G': indexer_layers (79 layers) must be at most full_layers (78 layers); indexer_layers: MLA"
        ' layers keeping an indexer cache of their own (GLM-5.2 indexer_types "full"; left out: every MLA layer)\n')
    out = runner.invoke(cli, [*base, "--indexer-bytes-per-token-per-layer", "132", "--indexer-layers", "21"])
    assert out.exit_code == 0, out.output
    shown = runner.invoke(cli, ["--db", db, "model", "show", "G", "--layers", "--rule", "sglang", "--format", "json"])
    (mla,) = json.loads(shown.output)
    assert mla["bytes_per_token_per_gpu"] == 78 * 1152 + 21 * 132
