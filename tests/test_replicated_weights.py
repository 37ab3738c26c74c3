"""What every GPU holds whole under the engine rules, beside its share of the weights (docs/engine-rules.md):

- RoPE's cos/sin table: max_position_embeddings x the rotated width, built once per model on every GPU while it
  loads (vLLM in the model's 16-bit dtype, SGLang in float32 on CUDA);
- the K and V projections at TP above the KV heads: QKVParallelLinear gives every rank a whole KV head.

Worked by hand from the catalog's rows and read back through the CLI; the rotated width is read from real
config.json files (tests/data/hf-configs, sources in its MANIFEST.md).
"""

from __future__ import annotations

import json

import pytest

from conftest import HF_CONFIGS
from kvreg.interchange.hf.row import model_from_config

GiB = 2**30


def weights(kv, name: str) -> int:
    [row] = kv.json("plan", "show", name)
    return row["weights_bytes_per_gpu"]


def test_ropes_table_is_on_every_gpu_in_the_engines_dtype(kv):
    """Llama-3.1-8B (131,072 positions x head_dim 128, all of it rotated; the catalog's 8.05e9 params) on one H100."""
    common = ("--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1")
    for rule in ("theoretical", "vllm", "sglang"):
        kv("plan", "add", rule, *common, "--rule", rule)
    assert weights(kv, "theoretical") == 8_050_000_000 * 2  # the theoretical rule: parameters x bytes, no more
    assert weights(kv, "vllm") == 8_050_000_000 * 2 + 131_072 * 128 * 2 == 16_133_554_432  # + 32 MiB, bf16
    assert weights(kv, "sglang") == 8_050_000_000 * 2 + 131_072 * 128 * 4 == 16_167_108_864  # + 64 MiB, float32
    # not split by TP: at TP 2 each GPU holds half the parameters and the whole table
    kv("plan", "add", "vllm-tp2", *common[:4], "--gpus-per-node", "2", "--tp", "2", "--rule", "vllm")
    assert weights(kv, "vllm-tp2") == 8_050_000_000 * 2 / 2 + 131_072 * 128 * 2 == 8_083_554_432


def test_a_partial_rotary_model_keeps_a_narrower_table(kv):
    """GLM-4.5 rotates half its 128-element heads (partial_rotary_factor 0.5: the catalog's rotary_dim 64); an MLA
    model rotates its qk_rope_head_dim (DeepSeek-V3: 64 of its 192-element query-key heads)."""
    for model in ("GLM-4.5", "DeepSeek-V3"):
        for rule in ("theoretical", "vllm"):
            kv("plan", "add", f"{model}-{rule}", "--model", model, "--gpu", "H200", "--gpus-per-node", "8",
               "--tp", "8", "--weight-dtype", "fp8_e4m3", "--rule", rule)
    glm = weights(kv, "GLM-4.5-vllm") - weights(kv, "GLM-4.5-theoretical")
    deepseek = weights(kv, "DeepSeek-V3-vllm") - weights(kv, "DeepSeek-V3-theoretical")
    # beside the rope table, the engine rules keep the vocabulary matrices at 16 bits and the routers whole, and
    # GLM-4.5's 8 KV heads are one a GPU at TP 8: take those out to leave the table
    [g] = kv.json("plan", "show", "GLM-4.5-vllm")
    [d] = kv.json("plan", "show", "DeepSeek-V3-vllm")
    assert g["rope_cache_bytes_per_gpu"] == 131_072 * 64 * 2 == 16_777_216
    assert d["rope_cache_bytes_per_gpu"] == 163_840 * 64 * 2 == 20_971_520
    assert g["engine_kv_head_extra_bytes_per_gpu"] == 0  # 8 KV heads over 8 GPUs: one each, nothing replicated
    assert d["engine_kv_head_extra_bytes_per_gpu"] == 0  # MLA: one latent, no heads
    assert glm == pytest.approx(g["engine_embedding_extra_bytes"] / 8 + g["engine_router_extra_bytes_per_gpu"]
                                + 16_777_216, abs=1)
    assert deepseek == pytest.approx(d["engine_embedding_extra_bytes"] / 8 + d["engine_router_extra_bytes_per_gpu"]
                                     + 20_971_520, abs=1)


def test_tp_above_the_kv_heads_gives_each_gpu_a_whole_kv_head(kv):
    """Qwen3-235B-A22B in FP8 (94 layers, 4 KV heads of 128, hidden 4,096): at TP 4 each GPU holds one KV head's
    K and V projections, its share; at TP 8 still one (QKVParallelLinear replicates it on 2 ranks), where an even
    split would give half: 94 x 2 x 4,096 x 128 x (1 - 4/8) x 1 B more a GPU."""
    for tp in (4, 8):
        kv("plan", "add", f"tp{tp}", "--model", "Qwen3-235B-A22B", "--gpu", "H200", "--gpus-per-node", "8",
           "--tp", str(tp), "--weight-dtype", "fp8_e4m3", "--rule", "vllm")
    [tp4] = kv.json("plan", "show", "tp4")
    [tp8] = kv.json("plan", "show", "tp8")
    assert tp4["engine_kv_head_extra_bytes_per_gpu"] == 0
    assert tp8["engine_kv_head_extra_bytes_per_gpu"] == 94 * 2 * 4_096 * 128 * (1 - 4 / 8) * 1 == 49_283_072
    rope = 40_960 * 128 * 2  # Qwen3-235B's 40,960 positions
    assert tp8["engine_replicated_bytes_per_gpu"] == tp8["engine_router_extra_bytes_per_gpu"] + rope + 49_283_072


def _config(name: str) -> dict:
    return json.loads((HF_CONFIGS / name).read_text())


@pytest.mark.parametrize("config, rotary_dim", [
    ("Qwen__Qwen3-Next-80B-A3B-Thinking.json", 64),  # partial_rotary_factor 0.25 x head_dim 256
    ("zai-org__GLM-4.5.json", 64),  # partial_rotary_factor 0.5 x head_dim 128
    ("THUDM__chatglm3-6b-128k.json", 64),  # model_type chatglm: vLLM's chatglm.py rotates half the 128
    ("meta-llama__Llama-3.1-8B.json", None),  # the whole head
    ("deepseek-ai__DeepSeek-V3.json", None),  # MLA: its qk_rope_head_dim (64) is the width already
])
def test_the_import_reads_the_rotated_width(config, rotary_dim):
    row, _ = model_from_config(_config(config), name="m", source=config)
    assert row["rotary_dim"] == rotary_dim


def test_a_rotated_width_wider_than_the_head_is_refused(kv):
    kv("init")
    args = ("model", "add", "Wide", "--layers", "32", "--kv-heads", "8", "--attention-heads", "32", "--head-dim",
            "128", "--params-b", "8")
    result = kv(*args, "--rotary-dim", "256", ok=False)
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines() == [
        "Error: model 'Wide': rotary_dim (256) cannot exceed head_dim (128); give the elements of a head RoPE"
        " rotates (partial_rotary_factor x head_dim)"]
    assert kv("model", "show", "Wide", ok=False).exit_code != 0  # nothing written
    kv(*args, "--rotary-dim", "64")
    assert kv.json("model", "show", "Wide")["model"]["rotary_dim"] == 64
