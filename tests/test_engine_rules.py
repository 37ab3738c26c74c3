"""Engine rules (issue 7): what vLLM and SGLang will allocate and print at startup, offline.

Every expected value is worked here from the formulas of the source files SPEC cites (vLLM
v0.33 vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py, vllm/config/vllm.py;
SGLang model_executor/pool_configurator.py) and docs/engine-rules.md, then read back from the
views through the CLI. The theoretical rule must not move (tests/test_golden.py holds its
figures); bad input is one line, a non-zero exit and nothing written; a registry made at schema
revision 0001 upgrades with every row intact and downgrades back.
"""

from __future__ import annotations

import json
import math

import pytest
from conftest import Kvreg

GiB = 2**30
MiB = 2**20
H100 = 80 * GiB
BF16 = 2
# Llama-3.1-8B: 32 layers x 8 KV heads x (128 + 128) x 2 B
LLAMA_8B_PER_TOKEN = 32 * 8 * (128 + 128) * BF16  # 131,072 B
LLAMA_8B_WEIGHTS = 8_050_000_000 * BF16


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@pytest.fixture(scope="module")
def reader(module_db_url) -> Kvreg:
    """One registry per engine for the questions that only read."""
    kv = Kvreg(module_db_url)
    kv("init")
    return kv


@pytest.fixture(scope="module")
def cap(reader):
    """`kvreg capacity ... --format json`: the one row a question answers, or every row."""

    def ask(*args, rows=False):
        out = reader.json("capacity", *args)
        return out if rows else out[0]

    return ask


def plan_row(kv, name: str) -> dict:
    """Every plan_capacity figure of a plan (plan show, no demand: one row)."""
    [row] = kv.json("plan", "show", name)
    return row


def fails(kv, state, *args) -> str:
    """A command that must fail: non-zero exit, one line on stderr, the registry unchanged."""
    before = state()
    result = kv(*args, ok=False)
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert state() == before
    return lines[0]


# --------------------------------------------------------------------------- vLLM: the two log lines


def test_llama_8b_with_a_53_gib_pool_prints_what_vllm_prints(cap):
    r = cap("--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1", "--context", "128K",
            "--rule", "vllm", "--kv-cache-memory", "53GiB", "--block-size", "16")
    # One model, one kind of layer: one group of 32 layers; a block costs block x bytes per token.
    page = 16 * LLAMA_8B_PER_TOKEN
    assert r["rule"] == "vllm"
    assert r["page_bytes_per_gpu"] == page == 2_097_152
    assert r["num_blocks"] == 53 * 2**30 // page == 27_136
    # "GPU KV cache size: 434,176 tokens" = num_blocks // 1 group x 16
    assert r["kv_cache_tokens"] == 27_136 * 16 == 434_176
    # "Maximum concurrency for 131,072 tokens per request: 3.31x" = num_blocks / cdiv(131,072, 16)
    assert r["blocks_per_request"] == cdiv(131_072, 16) == 8_192
    assert r["max_concurrency"] == 27_136 / 8_192 == 3.3125
    assert f"{r['max_concurrency']:.2f}x" == "3.31x"


def test_seed_002s_53e9_byte_pool(cap):
    r = cap("--model", "Llama-3.1-8B", "--gpus-per-node", "1", "--context", "128K", "--rule", "vllm",
            "--kv-cache-memory", "53GB")
    assert r["num_blocks"] == 53_000_000_000 // (16 * LLAMA_8B_PER_TOKEN) == 25_272
    assert r["kv_cache_tokens"] == 25_272 * 16 == 404_352  # seed 002's 404,352 tokens


def test_vllm_pool_from_gpu_memory_utilization_and_the_estimates(cap):
    """vLLM's determine_available_memory: the memory CUDA reports (79.19 GiB on an H100) x 0.92 (the
    latest release's default) - activations - non-torch memory - weights (with RoPE's cos/sin table), in whole
    2 MiB blocks. CUDA graphs are captured after the KV cache is sized: nothing is taken for them."""
    r = cap("--model", "Llama-3.1-8B", "--gpus-per-node", "1", "--context", "128K", "--rule", "vllm")
    reported = 85_029_615_043  # 79.19 GiB, the H100-SXM row's reported_memory_bytes
    # the larger of the forward pass, 8,192 batched tokens x (3 x 14,336 MLP + 3 x 4,096 hidden: the residual, the
    # MLP's input and down_proj's output) x 2 B, and the V1 sampler warm-up after it: 1,024 rows (max_num_seqs on a
    # GPU reporting 70 GiB or more, fewer than the 8,192 batched tokens) x 128,256 vocabulary x 20 B (v0.17 to v0.20:
    # the Triton top-k/top-p kernel, in place), beside the forward's 8,192 x 4,096 x 2 B output hidden states
    mlp = 8192 * (3 * 14_336 + 3 * 4_096) * 2
    sampler = 8192 * 4_096 * 2 + 1024 * 128_256 * 20
    activations = max(mlp, sampler)
    assert (mlp, sampler, activations) == (905_969_664, 2_693_791_744, 2_693_791_744)  # 2.51 GiB
    non_torch = round(0.13 * GiB)  # 139,586,437 B: from v0.11 at TP 1
    allocatable = reported * 0.92 - activations - non_torch
    rope = 131_072 * 128 * 2  # RoPE's cos/sin table, whole on every GPU (vLLM: the model's dtype): 33,554,432 B
    pool = allocatable - LLAMA_8B_WEIGHTS - rope
    assert r["allocatable_gib_per_gpu"] == pytest.approx(allocatable / GiB, rel=1e-12)  # 70.22 GiB
    assert r["kv_pool_gib_per_gpu"] == pytest.approx(pool / GiB, rel=1e-12)  # 55.19 GiB
    assert r["num_blocks"] == math.floor(pool / (16 * LLAMA_8B_PER_TOKEN)) == 28_257
    assert r["kv_cache_tokens"] == 28_257 * 16 == 452_112
    assert r["max_concurrency"] == pytest.approx(28_257 / 8_192)  # 3.45x


@pytest.mark.parametrize("release, gmu, non_torch", [
    # v0.6.5: utilization 0.9; non-torch from before CUDA init, 1.79 GiB + 1.79 GiB of NCCL at TP 2
    ("0.6.5", 0.9, 2 * round(1.79 * GiB)),
    # v0.10.1: utilization 0.9; the V1 worker's snapshot precedes NCCL's set-up until v0.11: 0.25 GiB + the
    # 1.79 GiB of NCCL buffers at TP 2
    ("0.10.1", 0.9, round(0.25 * GiB) + round(1.79 * GiB)),
    # v0.11.0: NCCL set up before the snapshot: 0.13 GiB, and 0.42 GiB more at TP > 1 (llm-d's TP 2 runs)
    ("0.11.0", 0.9, round(0.13 * GiB) + round(0.42 * GiB)),
    # v0.20.0: utilization 0.92
    ("0.20.0", 0.92, round(0.13 * GiB) + round(0.42 * GiB)),
    # v0.21.0: 0.13 GiB at any TP (vllm#50722's run at TP 4)
    ("0.21.0", 0.92, round(0.13 * GiB)),
])
def test_each_budget_term_of_qwen3_8b_at_tp2_by_release(cap, release, gmu, non_torch):
    """Qwen3-8B (36 layers, 8 KV heads of 128, hidden 4,096, MLP 12,288, vocabulary 151,936) on two H100s."""
    r = cap("--model", "Qwen3-8B", "--tp", "2", "--gpus-per-node", "2", "--context", "32K", "--rule", "vllm",
            "--engine-version", release)
    requested = 85_029_615_043 * gmu
    # not divided by TP; the larger of the forward pass and the sampler warm-up beside 8,192 x 4,096 x 2 B of hidden
    # states, in V0 (v0.6.5: 256 rows) as in V1 (1,024 rows on the H100): 38 B a logit with the sort-based
    # top-k/top-p (both engines' profile runs sample with top_k = vocab - 1), 20 B with the Triton kernel (v0.17),
    # 24 B with FlashInfer's sampler (v0.21)
    mlp = 8192 * (3 * 12_288 + 3 * 4_096) * 2
    per_logit = {"0.20.0": 20, "0.21.0": 24}.get(release, 38)
    rows = 256 if release == "0.6.5" else 1024
    activations = max(mlp, 8192 * 4_096 * 2 + rows * 151_936 * per_logit)
    assert activations == {"0.6.5": 67_108_864 + 1_478_033_408, "0.20.0": 67_108_864 + 3_111_649_280,
                           "0.21.0": 67_108_864 + 3_733_979_136}.get(release, 67_108_864 + 5_912_133_632)
    rope = 40_960 * 128 * 2  # RoPE's cos/sin table, whole on every GPU (vLLM: the model's dtype): 10,485,760 B
    weights = 8.2e9 * 2 / 2 + rope
    assert r["allocatable_gib_per_gpu"] == pytest.approx((requested - activations - non_torch) / GiB, rel=1e-12)
    pool = requested - activations - non_torch - weights
    assert r["kv_pool_gib_per_gpu"] == pytest.approx(pool / GiB, rel=1e-12)
    per_token = 36 * 4 * 256 * 2  # 8 KV heads over TP 2: 73,728 B
    assert r["num_blocks"] == math.floor(pool / (16 * per_token))
    assert r["max_concurrency"] == pytest.approx(r["num_blocks"] / (32_768 // 16))


def test_measured_memory_and_utilization_replace_the_estimates(cap):
    r = cap("--model", "Llama-3.1-8B", "--gpus-per-node", "1", "--rule", "vllm", "--gpu-memory-utilization", "0.9",
            "--activation-memory", "1.19GiB", "--cuda-graph-memory", "0")
    measured = cap("--model", "Llama-3.1-8B", "--gpus-per-node", "1", "--rule", "vllm", "--gpu-memory-utilization",
                   "0.9", "--activation-memory", "1.19GiB", "--non-torch-memory", "0.5GiB", "--weights-memory", "14.99GiB")
    assert measured["kv_pool_gib_per_gpu"] == pytest.approx(
        (85_029_615_043 * 0.9 - round(1.19 * GiB) - round(0.5 * GiB) - round(14.99 * GiB)) / GiB, rel=1e-12)
    rope = 131_072 * 128 * 2  # RoPE's cos/sin table, whole on every GPU (vLLM: the model's dtype)
    pool = 85_029_615_043 * 0.9 - round(1.19 * GiB) - round(0.13 * GiB) - LLAMA_8B_WEIGHTS - rope
    assert r["num_blocks"] == math.floor(pool / (16 * LLAMA_8B_PER_TOKEN)) == 28_121
    assert r["kv_cache_tokens"] == 28_121 * 16 == 449_936


def test_a_quantized_checkpoint_keeps_its_vocabulary_matrices_at_16_bits_under_the_engine_rules(cap):
    """vLLM and SGLang quantize linear and MoE layers, not the embeddings or the lm_head; the theoretical rule
    prices every weight at the weight dtype (params x bytes)."""
    fp8 = ("--model", "Llama-3.1-70B", "--weight-dtype", "fp8_e4m3", "--tp", "2")
    vocab = 2 * 128_256 * 8_192  # the input embeddings and the lm_head, untied
    assert cap(*fp8)["weights_gib_per_gpu"] * GiB == pytest.approx(70_600_000_000 * 1 / 2, rel=1e-12)
    # RoPE's cos/sin table, whole on every GPU: 131,072 positions x 128 x 2 B under vLLM (the model's dtype), 4 B
    # under SGLang (float32)
    rope = {"vllm": 131_072 * 128 * 2, "sglang": 131_072 * 128 * 4}
    # 33.89 GiB (vLLM), 33.92 GiB (SGLang); llm-d measured 33.88 GiB of Llama-3.3-70B-FP8 at TP 2
    for rule in ("vllm", "sglang"):
        assert cap(*fp8, "--rule", rule)["weights_gib_per_gpu"] * GiB == pytest.approx(
            (70_600_000_000 * 1 + vocab * (2 - 1)) / 2 + rope[rule], rel=1e-12)
    bf16 = cap("--model", "Llama-3.1-70B", "--tp", "2", "--rule", "vllm")  # 16-bit weights: no vocabulary to add
    assert bf16["weights_gib_per_gpu"] * GiB == pytest.approx(70_600_000_000 * 2 / 2 + rope["vllm"], rel=1e-12)
    tied = cap("--model", "gemma-2-9b-it", "--weight-dtype", "int4", "--rule", "sglang")  # one tied matrix
    gemma_rope = 8_192 * 256 * 4  # RoPE's cos/sin table under SGLang (float32), whole on the GPU
    params = tied["weights_gib_per_gpu"] * GiB - 256_000 * 3_584 * (2 - 0.5) - gemma_rope
    assert params == pytest.approx(cap("--model", "gemma-2-9b-it", "--weight-dtype", "int4")["weights_gib_per_gpu"]
                                   * GiB, rel=1e-12)


def test_an_mxfp4_checkpoint_lays_its_experts_out_as_the_engines_moe_kernels_pad_them(cap):
    """gpt-oss-120b (config.json: 36 layers of 128 experts of width 2,880, hidden 2,880; 116.8B params as
    published): only the experts are MXFP4, 4-bit values (1/2 B) and one scale byte per 32 (1/32 B); the other
    116.8e9 - 36 x 128 x 3 x 2,880 x 2,880 = 2,138,214,400 params stay bf16."""
    experts = 36 * 128 * 3 * 2_880 * 2_880
    assert experts == 114_661_785_600
    rest = (116_800_000_000 - experts) * 2
    assert rest == 4_276_428_800
    oss = ("--model", "gpt-oss-120b", "--rule", "vllm")
    # RoPE's cos/sin table, whole on every GPU at any TP: 131,072 positions x the 64-wide head x 2 B under vLLM (the
    # model's dtype), 4 B under SGLang (float32)
    rope = 131_072 * 64 * 2
    assert rope == 16_777_216
    # theoretical: params x 0.5 B, as SPEC prices weights
    assert cap("--model", "gpt-oss-120b")["weights_gib_per_gpu"] * GiB == pytest.approx(116_800_000_000 * 0.5, rel=1e-12)
    # vLLM v0.10.1 (Marlin): width 2,880 -> 2,944 (a multiple of 128), hidden 2,880 -> 3,072 (of 256)
    marlin = 3 * 2_944 * 3_072 * (1 / 2 + 1 / 32)
    assert marlin == 14_413_824
    weights = rest + 36 * 128 * marlin + rope  # 70,712,107,008 B = 65.86 GiB; vllm#23278 logged 65.97 GiB on an H100
    assert cap(*oss, "--engine-version", "0.10.1")["weights_gib_per_gpu"] * GiB == pytest.approx(weights, rel=1e-12)
    assert weights == 70_695_329_792 + 16_777_216 == 70_712_107_008
    # vLLM v0.11.1 on (Triton, Hopper): width 2,880 (a multiple of 64) and hidden unpadded, plus the scales' swizzled
    # copy, rows 2 x 2,880 -> 5,888 and 2,880 -> 3,072 (multiples of 256), 2,880 / 32 = 90 scales a row
    triton = 3 * 2_880 * 2_880 * (1 / 2 + 1 / 32) + (5_888 * 2_880 + 3_072 * 2_880) / 32
    assert triton == 13_219_200 + 806_400
    assert cap(*oss)["weights_gib_per_gpu"] * GiB == pytest.approx(rest + 36 * 128 * triton + rope, rel=1e-12)
    # TP 2: each rank holds half of every expert's width, 1,440 -> 1,472 (Triton, 64) and -> 1,536 (Marlin, 128);
    # the bf16 rest is split too, but for the routers, which every rank holds whole: 36 x 128 x 2,880 params, half of
    # them counted in rest / 2; and the RoPE table, whole on each rank (8 KV heads split evenly over TP 2: no head
    # replicated)
    routers = 36 * 128 * 2_880 * (2 - 2 / 2)
    assert routers == 13_271_040
    tp2 = 3 * 1_472 * 2_880 * (1 / 2 + 1 / 32) + (3_072 * 2_880 + 3_072 * 1_472) / 32
    assert cap(*oss, "--tp", "2")["weights_gib_per_gpu"] * GiB == pytest.approx(
        rest / 2 + 36 * 128 * tp2 + routers + rope, rel=1e-12)
    tp2_marlin = 3 * 1_536 * 3_072 * (1 / 2 + 1 / 32)
    assert cap(*oss, "--tp", "2", "--engine-version", "0.10.1")["weights_gib_per_gpu"] * GiB == pytest.approx(
        rest / 2 + 36 * 128 * tp2_marlin + routers + rope, rel=1e-12)
    # SGLang: the width to a multiple of 64, nothing copied; its RoPE table in float32, 4 B an element
    sglang = cap("--model", "gpt-oss-120b", "--rule", "sglang")["weights_gib_per_gpu"] * GiB
    assert sglang == pytest.approx(rest + 36 * 128 * 13_219_200 + 131_072 * 64 * 4, rel=1e-12)
    # another 4-bit dtype is not MXFP4: params x 0.5 B plus the vocabulary and the routers at 16 bits, as for any
    # quantized checkpoint, and the RoPE table
    int4 = cap(*oss, "--weight-dtype", "int4")["weights_gib_per_gpu"] * GiB
    assert int4 == pytest.approx(116_800_000_000 * 0.5 + 2 * 201_088 * 2_880 * 1.5 + 36 * 128 * 2_880 * 1.5 + rope,
                                 rel=1e-12)


# --------------------------------------------------------------------------- MLA formats


def test_deepseek_v3_holds_the_whole_latent_on_every_gpu(cap):
    rows = cap("--model", "DeepSeek-V3", "--gpu", "H200", "--tp", "8", "--rule", "vllm", "--kv-cache-memory", "40GiB",
               "--kv-dtype", "bf16,fp8,fp8_ds_mla", rows=True)
    per_token = {r["kv_dtype"]: r["kv_bytes_per_token_per_gpu"] for r in rows}
    assert per_token["bf16"] == 61 * (512 + 64) * 2 == 70_272  # no TP division: vLLM max_tp_shards=1
    assert per_token["fp8"] == 61 * (512 + 64) * 1 == 35_136
    assert per_token["fp8_ds_mla"] == 61 * 656 == 40_016  # 512 fp8 + 4 fp32 scales + 64 bf16 rope = 656 B
    ds_mla = next(r for r in rows if r["kv_dtype"] == "fp8_ds_mla")
    assert ds_mla["num_blocks"] == 40 * GiB // (16 * 40_016) == 67_082


def test_deepseek_v32_indexer_cache_under_the_engine_rules(kv):
    kv("model", "add", "DeepSeek-V3.2-like", "--layers", "61", "--kv-heads", "128", "--attention-heads", "128",
       "--head-dim", "192", "--v-head-dim", "128", "--kv-lora-rank", "512", "--qk-rope-head-dim", "64",
       "--indexer-bytes-per-token-per-layer", "132", "--params-b", "671", "--weight-dtype", "fp8_e4m3")
    common = ("--model", "DeepSeek-V3.2-like", "--gpu", "H200", "--tp", "8", "--kv-cache-memory", "40GiB")
    vllm = kv.json("capacity", *common, "--rule", "vllm", "--kv-dtype", "fp8_ds_mla")[0]
    sglang = kv.json("capacity", *common, "--rule", "sglang", "--kv-dtype", "bf16")[0]
    theoretical = kv.json("capacity", *common, "--kv-dtype", "fp8_ds_mla")[0]
    # index_head_dim 128 fp8 bytes + one fp32 scale per 128 = 132 B per token per layer, beside the latent
    assert vllm["kv_bytes_per_token_per_gpu"] == 61 * (656 + 132) == 48_068
    assert sglang["cell_bytes_per_token_per_gpu"] == 61 * (576 * 2 + 132) == 78_324
    # SPEC's theoretical MLA formula has no indexer term
    assert theoretical["kv_bytes_per_token_per_gpu"] == 61 * 656 == 40_016


def test_per_token_head_formats_carry_their_scales(cap):
    rows = cap("--model", "Llama-3.1-8B", "--gpus-per-node", "1", "--rule", "vllm", "--kv-cache-memory", "40GiB",
               "--kv-dtype", "int8_per_token_head,fp8_per_token_head,fp8", rows=True)
    per_token = {r["kv_dtype"]: r["kv_bytes_per_token_per_gpu"] for r in rows}
    # 32 layers x 8 heads x (256 one-byte values + an fp32 scale for K and one for V)
    assert per_token["int8_per_token_head"] == per_token["fp8_per_token_head"] == 32 * 8 * (256 + 2 * 4) == 67_584
    assert per_token["fp8"] == 32 * 8 * 256 == 65_536


# --------------------------------------------------------------------------- hybrid models


def test_qwen3_next_at_tp4_pads_state_pages_to_the_attention_page(kv):
    kv("plan", "add", "next", "--model", "Qwen3-Next-80B-A3B", "--gpu", "H100-SXM", "--tp", "4", "--context", "256K",
       "--rule", "vllm", "--kv-cache-memory", "40GiB")
    r = plan_row(kv, "next")
    # 2 KV heads over TP4: each GPU keeps one whole head (SPEC errata: 12,288, not 6,144)
    per_layer = 1 * (256 + 256) * BF16
    assert r["kv_bytes_per_token_per_gpu"] == 12 * per_layer == 12_288
    # Gated DeltaNet state per layer: 548,864 elements sharded by TP4 (16 key heads), bf16
    state = 548_864 // 4 * BF16
    assert r["state_bytes_per_layer_per_gpu"] == state == 274_432
    # attention block raised to 16 x cdiv(state, 16 x bytes per token) so one page holds a state
    assert r["kv_block_tokens"] == 16 * cdiv(state, 16 * per_layer) == 272
    assert r["page_bytes_per_layer_per_gpu"] == 272 * per_layer == 278_528
    # 36 state layers >= 1.5 x 12 attention layers: groups of 12, 1 attention + 3 state groups
    assert (r["kv_group_layers"], r["kv_groups"]) == (12, 1 + 36 // 12)
    assert r["page_bytes_per_gpu"] == 12 * 278_528 == 3_342_336
    assert r["num_blocks"] == 40 * GiB // 3_342_336 == 12_850
    assert r["kv_cache_tokens"] == 12_850 // 4 * 272 == 873_664
    # full: cdiv(262,144, 272); each state group: one block
    assert r["blocks_per_request"] == cdiv(262_144, 272) + 3 == 967
    assert r["max_concurrency"] == pytest.approx(12_850 / 967)


def test_gpt_oss_sliding_layers_reserve_window_plus_in_flight_tokens(cap):
    # H200: 58.4 GB of fp4 weights and a 40 GiB pool fit in 141 GiB (not in an H100's 80)
    common = ("--model", "gpt-oss-120b", "--gpu", "H200", "--gpus-per-node", "1", "--rule", "vllm",
              "--kv-cache-memory", "40GiB")
    r = cap(*common, "--context", "128K")
    per_layer = 8 * (64 + 64) * BF16  # 2,048 B
    # 18 full + 18 sliding layers: two groups of 18, a block id takes a page in each of 18 layers
    assert r["page_bytes_per_gpu"] == 16 * per_layer * 18 == 589_824
    assert r["num_blocks"] == 40 * GiB // (16 * per_layer * 18) == 72_817
    assert r["kv_cache_tokens"] == 72_817 // 2 * 16 == 582_528
    in_flight = 2 * 8192  # two batches in flight (async scheduling) x max_num_batched_tokens
    sliding = cdiv(min(128 - 1 + in_flight, 131_072), 16) + 1
    assert sliding == 1_033
    assert r["blocks_per_request"] == cdiv(131_072, 16) + sliding == 9_225
    assert r["max_concurrency"] == pytest.approx(72_817 / 9_225)

    small = cap(*common, "--context", "128K", "--max-num-batched-tokens", "2048", "--max-concurrent-batches", "1")
    assert small["blocks_per_request"] == 8_192 + cdiv(128 - 1 + 2048, 16) + 1 == 8_192 + 137
    short = cap(*common, "--context", "4096")  # the window and in-flight tokens exceed max_model_len
    assert short["blocks_per_request"] == cdiv(4096, 16) + cdiv(min(128 - 1 + in_flight, 4096), 16) + 1 == 513


# --------------------------------------------------------------------------- SGLang


def test_qwen3_235b_at_tp8_replicates_heads_under_sglang(cap):
    common = ("--model", "Qwen3-235B-A22B", "--tp", "8", "--rule", "sglang")
    r = cap(*common, "--kv-cache-memory", "20GiB")
    # 4 KV heads over TP8: every GPU keeps one whole head (seed 000's 24,064 halves a head)
    cell = 94 * 1 * (128 + 128) * BF16
    assert r["cell_bytes_per_token_per_gpu"] == cell == 48_128 != 24_064
    assert r["kv_cache_tokens"] == (20 * GiB // cell) // 16 * 16 == 446_192  # rounded down to the page

    default = cap(*common, "--engine-version", "0.5.6")
    # SGLang's rest_memory = available after weights - available before load x (1 - mem_fraction_static)
    # = (reported 79.19 GiB - what is in use before the load) x mem_fraction_static - weights per GPU, with the
    # fraction its server derives (v0.5.6's server_args.py _handle_gpu_memory_settings) from the GPU's 81,090.56 MiB:
    # an H100 tier (60-90 GiB) at TP 8 has chunked_prefill_size 8,192 and cuda_graph_max_bs 512, so
    # reserved = 512 + 8,192 x 1.5 + 512 x 2 + 8 x 1 / 8 x 1,024 = 14,848 MiB (over the 10,240 floor) and
    # round((81,090.56 - 14,848) / 81,090.56, 3) = round(0.81690, 3) = 0.817. In use before the load at TP 8:
    # 1.85 GiB (an H100 node's ranks started loading with 77.33 of 79.18 GiB free, sglang-mystous-*-tp8.log)
    reported = 85_029_615_043
    assert 512 + 8192 * 1.5 + 512 * 2 + 8 / 8 * 1024 == 14_848
    assert round((reported / 2**20 - 14_848) / (reported / 2**20), 3) == 0.817
    in_use = round(1.85 * GiB)
    # the weights: 235e9 params split 8 ways, but for the routers (94 layers x 128 experts x 4,096), which every GPU
    # holds whole (a ReplicatedLinear), 7/8 of them more
    rope = 40_960 * 128 * 4  # RoPE's cos/sin table, whole on every GPU (SGLang: float32): 20,971,520 B
    # 4 KV heads over TP 8: each GPU holds a whole head of K and V, not half of one: 94 layers x K and V x hidden
    # 4,096 x 128 x (1 - 4 / 8) x 2 B more
    kv_heads = 94 * 2 * 4_096 * 128 * (1 - 4 / 8) * BF16
    assert (rope, kv_heads) == (20_971_520, 98_566_144)
    weights = 235e9 * BF16 / 8 + 94 * 128 * 4_096 * BF16 * (1 - 1 / 8) + rope + kv_heads
    assert weights == 58_750_000_000 + 86_245_376 + 20_971_520 + 98_566_144
    pool = (reported - in_use) * 0.817 - weights
    assert default["kv_pool_gib_per_gpu"] == pytest.approx(pool / GiB, rel=1e-12)  # 8.28 GiB
    assert default["kv_cache_tokens"] == math.floor(pool / cell) // 16 * 16 == 184_720
    assert default["max_concurrency"] == pytest.approx(184_720 / 131_072)  # 1.41

    page_one = cap(*common, "--block-size", "1", "--mem-fraction-static", "0.85")
    assert page_one["kv_cache_tokens"] == math.floor(((reported - in_use) * 0.85 - weights) / cell) == 241_666
    # 2 GiB in use before the load (measured: --non-torch-memory) comes off before the fraction
    used = cap(*common, "--block-size", "1", "--non-torch-memory", "2GiB", "--engine-version", "0.5.6")
    assert used["kv_cache_tokens"] == math.floor(((reported - 2 * GiB) * 0.817 - weights) / cell)

    # From v0.5.10 (and so by default: the latest release) SGLang also leaves 8 MiB for each prefill (piecewise) CUDA
    # graph it captures, 58 sizes up to the 8,192-token chunk (8 of 4-32, 14 of 48-256, 8 of 288-512, 8 of 576-1,024,
    # 12 of 1,280-4,096, 8 of 4,608-8,192): 14,848 + 58 x 8 = 15,312 MiB, round(0.81117, 3) = 0.811
    assert 8 + 14 + 8 + 8 + 12 + 8 == 58 and 14_848 + 58 * 8 == 15_312
    assert round((reported / 2**20 - 15_312) / (reported / 2**20), 3) == 0.811
    latest = cap(*common)
    pool = (reported - in_use) * 0.811 - weights
    assert latest["kv_pool_gib_per_gpu"] == pytest.approx(pool / GiB, rel=1e-12)  # 7.82 GiB
    assert latest["kv_cache_tokens"] == math.floor(pool / cell) // 16 * 16 == 174_368


def test_the_engines_cap_on_running_requests(cap):
    """A pool can hold more short requests than the engine runs at once. SGLang's max_running_requests
    (kv_cache_configurator.py resolve_max_num_reqs): min(max(min(int(tokens / context x 512), 4,096), 2,048),
    tokens // 2); vLLM's max_num_seqs: 1,024 on an H100 (arg_utils: 70 GiB or more, V1)."""
    common = ("--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1", "--kv-cache-memory", "53GiB")
    # SGLang: a cell is 32 layers x 8 heads x (128 + 128) x 2 B = 131,072 B, so 53 GiB holds 434,176 tokens
    short = cap(*common, "--context", "64", "--rule", "sglang")
    assert short["cell_bytes_per_token_per_gpu"] == 32 * 8 * 256 * BF16 == 131_072
    assert short["kv_cache_tokens"] == 53 * GiB // 131_072 == 434_176
    # the pool holds 434,176 / 64 = 6,784 requests; int(6,784 x 512) is over 4,096, so SGLang runs 4,096
    assert short["sequences_per_rank"] == 434_176 / 64 == 6_784
    assert short["max_running_requests"] == min(max(min(int(434_176 / 64 * 512), 4096), 2048), 434_176 // 2) == 4096
    assert short["max_concurrency"] == short["whole_sequences"] == 4096
    # at 128K the estimate int(434,176 / 131,072 x 512) = 1,696 is raised to 2,048, far above the 3.31 the pool holds
    long = cap(*common, "--context", "128K", "--rule", "sglang")
    assert int(434_176 / 131_072 * 512) == 1_696
    assert long["max_running_requests"] == 2048
    assert long["max_concurrency"] == long["sequences_per_rank"] == 434_176 / 131_072
    # vLLM: 27,136 blocks of 16 tokens; a 64-token request takes 4 blocks, so its "Maximum concurrency" line says
    # 6,784x (sequences_per_rank), but the scheduler runs at most max_num_seqs = 1,024
    vllm = cap(*common, "--context", "64", "--rule", "vllm", "--block-size", "16")
    assert vllm["num_blocks"] == 27_136 and vllm["blocks_per_request"] == 4
    assert vllm["sequences_per_rank"] == 27_136 / 4 == 6_784
    assert vllm["max_running_requests"] == 1024
    assert vllm["max_concurrency"] == vllm["whole_sequences"] == 1024
    # the theoretical rule has no scheduler: no cap
    theory = cap(*common, "--context", "64")
    assert "max_running_requests" not in theory
    assert theory["max_concurrency"] == pytest.approx(theory["kv_pool_gib_per_gpu"] * GiB / (64 * 131_072))
    assert theory["max_concurrency"] > 4096


def test_the_running_request_cap_reaches_the_gpus_to_buy(kv):
    """Workload sizing under SGLang: 8,000 users of 100 tokens on a 53 GiB pool (4,341.76 of them fit) need two
    replicas, not one, because SGLang runs at most 4,096 at once (context 256: int(434,176 / 256 x 512) > 4,096)."""
    kv("plan", "add", "short", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--tp", "1", "--gpus-per-node", "1",
       "--context", "256", "--rule", "sglang", "--kv-cache-memory", "53GiB", "--avg-tokens", "100")
    r = plan_row(kv, "short")
    # 100 tokens fill 7 pages of 16 (112 tokens) x 131,072 B: 53 GiB / 14,680,064 B = 3,876.6 requests fit
    assert r["kv_bytes_per_request_per_gpu"] == cdiv(100, 16) * 16 * 131_072 == 14_680_064
    assert r["max_running_requests"] == 4096
    assert r["workload_concurrency"] == pytest.approx(53 * GiB / 14_680_064)  # 3,876.6: under the cap
    kv("plan", "set", "short", "--avg-tokens", "50")  # 4 pages: 53 GiB / 8,388,608 B = 6,784 fit, 4,096 run
    r = plan_row(kv, "short")
    assert 53 * GiB / (4 * 16 * 131_072) == 6_784
    assert r["workload_concurrency"] == 4096


def test_a_given_max_num_seqs_caps_the_engines_and_sizes_vllms_sampler_warm_up(cap):
    """--max-num-seqs (vLLM) and --max-running-requests (SGLang), one setting: the most requests the engine runs.
    vLLM also warms its sampler up with that many rows, so a smaller max_num_seqs leaves more memory for the KV
    cache; SGLang (resolve_max_num_reqs) takes min(given // DP-attention size, tokens // 2)."""
    common = ("--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1", "--context", "64")
    pool = ("--kv-cache-memory", "53GiB")  # 434,176 tokens, 6,784 requests of 64 tokens (the test above)
    sglang = cap(*common, *pool, "--rule", "sglang", "--max-running-requests", "512")
    assert sglang["sequences_per_rank"] == 6_784
    assert sglang["max_running_requests"] == min(512, 434_176 // 2) == 512
    assert sglang["max_concurrency"] == 512
    # more than the pool's tokens // 2: SGLang takes 217,088
    assert cap(*common, *pool, "--rule", "sglang", "--max-running-requests", "300000")["max_running_requests"] == 217_088
    vllm = cap(*common, *pool, "--rule", "vllm", "--max-num-seqs", "512")
    assert vllm["max_running_requests"] == 512
    assert vllm["max_concurrency"] == 512
    # from the GPU alone: the sampler warm-up is max_num_seqs x 128,256 vocabulary x 20 B (the latest release's
    # Triton top-k/top-p) beside 8,192 x 4,096 x 2 B of hidden states: 2,693,791,744 B at the H100's default 1,024
    # rows, the peak; at 256 rows it is 723,779,584 B and the forward pass, 8,192 x (3 x 14,336 + 3 x 4,096) x 2 B =
    # 905,969,664 B, is the peak: 1,787,822,080 B (1.67 GiB) freed
    default = cap(*common, "--rule", "vllm")
    small = cap(*common, "--rule", "vllm", "--max-num-seqs", "256")
    hidden = 8192 * 4_096 * 2
    freed = (hidden + 1024 * 128_256 * 20) - max(hidden + 256 * 128_256 * 20, 8192 * (3 * 14_336 + 3 * 4_096) * 2)
    assert freed == 2_693_791_744 - 905_969_664 == 1_787_822_080
    assert (default["max_running_requests"], small["max_running_requests"]) == (1024, 256)
    assert (small["allocatable_gib_per_gpu"] - default["allocatable_gib_per_gpu"]) * GiB == pytest.approx(freed, abs=1)
    assert (small["kv_pool_gib_per_gpu"] - default["kv_pool_gib_per_gpu"]) * GiB == pytest.approx(freed, abs=1)


def test_sglangs_given_max_running_requests_is_shared_by_its_dp_attention_ranks(cap):
    """SGLang divides --max-running-requests among the DP-attention ranks (max_running_requests // attn_dp_size);
    vLLM gives every DP rank its own scheduler and max_num_seqs."""
    common = ("--model", "Qwen3-235B-A22B", "--gpu", "H100-SXM", "--tp", "8", "--dp-attention", "4",
              "--gpus-per-node", "8", "--context", "64", "--kv-cache-memory", "20GiB")
    sglang = cap(*common, "--rule", "sglang", "--max-running-requests", "1000")
    assert sglang["max_running_requests"] == 1000 // 4 == 250
    assert sglang["max_concurrency"] == 250 * 4  # four ranks of 250
    vllm = cap(*common, "--rule", "vllm", "--max-num-seqs", "1000")
    assert vllm["max_running_requests"] == 1000
    assert vllm["max_concurrency"] == 1000 * 4


def test_too_few_running_requests_for_the_dp_attention_ranks_is_one_line(kv, state):
    kv("plan", "add", "q", "--model", "Qwen3-235B-A22B", "--gpu", "H100-SXM", "--tp", "8", "--dp-attention", "4",
       "--gpus-per-node", "8", "--rule", "sglang")
    before = state()
    for args in (("capacity", "--model", "Qwen3-235B-A22B", "--tp", "8", "--dp-attention", "4", "--rule", "sglang",
                  "--max-running-requests", "3"), ("plan", "set", "q", "--max-running-requests", "3")):
        r = kv(*args, ok=False)
        assert r.exit_code == 1
        assert r.stderr.strip() == ("Error: --max-running-requests 3 is shared by 4 DP-attention ranks, none each: give "
                                    "at least 4 (SGLang divides it among the ranks)")
    assert state() == before


def test_sglang_gives_a_hybrid_models_state_slots_of_their_own(cap):
    """SGLang sizes a hybrid model's state slots before its KV cells (kv_cache_configurator.py
    _handle_max_mamba_cache, with PR 32184's padding slot): the slots and one padding slot take rest x 0.9 / 1.9,
    each slot holds the conv state in bf16 and the recurrent state in float32, and at most slots // 3 requests
    run (radix cache on)."""
    r = cap("--model", "Qwen3-Next-80B-A3B", "--gpu", "H100-SXM", "--tp", "4", "--gpus-per-node", "8", "--rule",
            "sglang", "--block-size", "1", "--kv-cache-memory", "30GiB", "--context", "32K")
    # Gated DeltaNet, 36 linear layers: conv (2 x 16 x 128 + 32 x 128) x 3 = 24,576 elements at 2 B, recurrent
    # 32 x 128 x 128 = 524,288 at 4 B, sharded over TP 4 (of its 16 linear key heads)
    per_request = 36 * (24_576 * 2 + 524_288 * 4) // 4
    assert per_request == 19_316_736  # 18.4 MiB per request per GPU
    slots = math.floor((30 * GiB * 0.9 / 1.9 - per_request) / per_request)
    assert slots == 788 == r["sglang_state_slots"]
    # the cells: 12 full layers x 1 KV head per GPU (2 over TP 4, replicated) x (256 + 256) x 2 B = 12,288 B
    assert r["cell_bytes_per_token_per_gpu"] == 12 * 1 * 512 * 2 == 12_288
    assert r["kv_cache_tokens"] == (30 * GiB - (slots + 1) * per_request) // 12_288 == 1_381_132
    # before, every byte of the pool went to cells: 30 GiB / 12,288 B = 2,621,440 tokens, 1.9x too many
    assert 30 * GiB // 12_288 == 2_621_440
    assert r["sequences_per_rank"] == pytest.approx(1_381_132 / 32_768)  # 42.1 requests of 32K
    # the running-request cap: min(max(min(int(1,381,132 / 32,768 x 512), 4,096), 2,048), 690,566, 788 // 3)
    assert r["max_running_requests"] == 788 // 3 == 262
    short = cap("--model", "Qwen3-Next-80B-A3B", "--gpu", "H100-SXM", "--tp", "4", "--gpus-per-node", "8", "--rule",
                "sglang", "--block-size", "1", "--kv-cache-memory", "30GiB", "--context", "1K")
    assert short["sequences_per_rank"] == pytest.approx(1_381_132 / 1024)  # 1,348.8 fit, 262 run
    assert short["max_concurrency"] == 262


@pytest.mark.parametrize("gpu, tp, chunk, graph_bs, reserved, fraction", [
    # H100 (81,090.56 MiB reported), TP 1: 512 + 8,192 x 1.5 + 256 x 2 + 1 / 8 x 1,024 = 13,440 MiB
    ("H100-SXM", 1, 8192, 256, 13_440, 0.834),  # (81,090.56 - 13,440) / 81,090.56 = 0.83426
    # A100 40GB (40,325.09 MiB): the 35-60 GiB tier, TP 4: 512 + 4,096 x 1.5 + 160 x 2 + 4 / 8 x 1,024 = 7,488;
    # under 60 GiB, no 10 GiB floor
    ("A100-40GB", 4, 4096, 160, 7_488, 0.814),  # (40,325.09 - 7,488) / 40,325.09 = 0.81431
    # B200 (178.35 GiB reported = 182,630.4 MiB): the top tier, TP 8: 512 + 16,384 x 1.5 + 512 x 2 + 1,024 = 27,136
    ("B200", 8, 16384, 512, 27_136, 0.851),  # (182,630.4 - 27,136) / 182,630.4 = 0.85142
])
def test_sglang_default_mem_fraction_static_from_gpu_memory_and_tp(kv, gpu, tp, chunk, graph_bs, reserved, fraction):
    kv("plan", "add", "s", "--model", "Qwen3-235B-A22B", "--gpu", gpu, "--tp", str(tp), "--gpus-per-node", "8",
       "--rule", "sglang", "--engine-version", "0.5.6")  # v0.5.5 to v0.5.9 (no prefill graphs by default)
    r = plan_row(kv, "s")
    assert 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp / 8 * 1024 == reserved
    mib = r["sglang_gpu_memory_mib"]
    assert round((mib - reserved) / mib, 3) == fraction
    assert (r["sglang_chunked_prefill_size"], r["sglang_cuda_graph_max_bs"]) == (chunk, graph_bs)
    assert (r["sglang_reserved_mib"], r["mem_fraction_static_used"]) == (reserved, fraction)


H100_MIB = 85_029_615_043 / 2**20  # 81,090.56 MiB reported
H200_MIB = 150_119_844_413 / 2**20  # 143,165.44 MiB
B200_MIB = 191_501_854_310 / 2**20  # 182,630.4 MiB
RTX4090_MIB = 25_383_256_719 / 2**20  # 24,207.36 MiB


@pytest.mark.parametrize("version, model, gpu, tp, fraction", [
    # up to v0.4.5 by TP alone (server_args.py __post_init__): 0.88 at TP 1, 0.81 from TP 8 (0.82 in v0.3)
    ("0.3.6", "Llama-3.1-8B", "H200", 8, 0.82),
    ("0.4.5", "Llama-3.1-8B", "H200", 8, 0.81),
    ("0.4.5", "Llama-3.1-8B", "H100-SXM", 1, 0.88),
    # v0.4.6: above 81,920 MiB (gpu_mem - 13 x 1,024) / gpu_mem, unrounded
    ("0.4.6", "Llama-3.1-8B", "H200", 8, (H200_MIB - 13 * 1024) / H200_MIB),  # 0.90702
    ("0.4.6", "Llama-3.1-8B", "H100-SXM", 8, 0.81),  # at most 81,920 MiB: the TP tiers
    # v0.4.7: above 96 GiB min(0.88 + 48 GiB x 0.12 / gpu_mem, (gpu_mem - 18 GiB) / gpu_mem); above 180,000 MiB 0.79
    ("0.4.7", "Llama-3.1-8B", "H200", 8, min(0.88 + 48 * 1024 * 0.12 / H200_MIB, (H200_MIB - 18 * 1024) / H200_MIB)),
    ("0.4.7", "Llama-3.1-8B", "B200", 8, 0.79),
    # v0.4.8 to v0.5.2: reserved = (9.5 + P / 2) GiB from 35 to 90 GiB, (2.8 + P / 10) GiB below 35
    ("0.4.9", "Llama-3.1-8B", "H100-SXM", 1, round((H100_MIB - (9.5 + 1 / 2) * 1024) / H100_MIB, 3)),  # 0.874
    ("0.5.2", "Llama-3.1-8B", "RTX-4090", 1, round((RTX4090_MIB - (2.8 + 1 / 10) * 1024) / RTX4090_MIB, 3)),  # 0.877
    ("0.5.2", "Llama-3.1-8B", "B200", 8, round((B200_MIB - 32 * 1024) / B200_MIB, 3)),  # 0.821
    # v0.5.3 and v0.5.4: cuda_graph_max_bs 16 (24 from v0.5.5) on a 20-35 GiB GPU below TP 4
    ("0.5.3", "Llama-3.1-8B", "RTX-4090", 1, round((RTX4090_MIB - (512 + 2048 * 1.5 + 16 * 2 + 128)) / RTX4090_MIB, 3)),
    ("0.5.6", "Llama-3.1-8B", "RTX-4090", 1, round((RTX4090_MIB - (512 + 2048 * 1.5 + 24 * 2 + 128)) / RTX4090_MIB, 3)),
    # from v0.5.10: 8 MiB a prefill graph at PP 1 (42 up to 2,048 tokens, 58 up to 8,192), 1.5 GiB for an MLA model
    ("0.5.10", "Llama-3.1-8B", "RTX-4090", 1,
     round((RTX4090_MIB - (512 + 2048 * 1.5 + 24 * 2 + 128 + 42 * 8)) / RTX4090_MIB, 3)),  # 0.831
    ("0.5.10", "Llama-3.1-8B", "H100-SXM", 1, round((H100_MIB - (512 + 8192 * 1.5 + 256 * 2 + 128 + 58 * 8)) / H100_MIB,
                                                      3)),  # 0.829
    ("0.5.10", "DeepSeek-V3", "H200", 8, round((H200_MIB - (512 + 8192 * 1.5 + 512 * 2 + 1024 + 1536)) / H200_MIB, 3)),
])
def test_sglang_default_mem_fraction_static_by_release(kv, version, model, gpu, tp, fraction):
    """SGLang's default mem_fraction_static as each release's server_args.py derives it (docs/engine-rules.md cites
    the lines of each)."""
    kv("plan", "add", "s", "--model", model, "--gpu", gpu, "--tp", str(tp), "--gpus-per-node", "8", "--rule", "sglang",
       "--engine-version", version)
    assert plan_row(kv, "s")["mem_fraction_static_used"] == pytest.approx(fraction, abs=1e-12)


def test_sglang_cells_of_hybrid_models(cap):
    swa = cap("--model", "gpt-oss-120b", "--gpus-per-node", "1", "--rule", "sglang", "--kv-cache-memory", "40GiB")
    # full layers, plus sliding layers at swa_full_tokens_ratio 0.8
    assert swa["cell_bytes_per_token_per_gpu"] == pytest.approx(2048 * (18 + 0.8 * 18))  # 66,355.2
    nxt = cap("--model", "Qwen3-Next-80B-A3B", "--tp", "4", "--rule", "sglang", "--kv-cache-memory", "40GiB")
    assert nxt["cell_bytes_per_token_per_gpu"] == 12 * 1024  # only the 12 full-attention layers


# --------------------------------------------------------------------------- the theoretical rule stays


def test_theoretical_is_the_default_and_unchanged(cap):
    args = ("--model", "Llama-3.1-8B,DeepSeek-V3,Qwen3-Next-80B-A3B", "--gpu", "H100-SXM,H200", "--tp", "auto")
    default = cap(*args, rows=True)
    assert default == cap(*args, "--rule", "theoretical", rows=True)
    assert {r["rule"] for r in default} == {"theoretical"}
    assert "num_blocks" not in default[0] and "kv_cache_tokens" not in default[0]
    llama = next(r for r in default if r["model"] == "Llama-3.1-8B" and r["gpu"] == "H100-SXM")
    # SPEC golden: (80 GiB x 0.88 - 16.1e9) / 16 GiB = 3.46 (3.5 as seed 000 prints it)
    assert llama["max_concurrency"] == pytest.approx((H100 * 0.88 - 16.1e9) / (131_072 * LLAMA_8B_PER_TOKEN))


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("args, words", [
    (("--rule", "bogus"), "rule 'bogus' is not known"),
    (("--rule", "vllm", "--gpu-memory-utilization", "0"), "--gpu-memory-utilization"),
    (("--rule", "vllm", "--gpu-memory-utilization", "1.5"), "at most 1"),
    (("--rule", "vllm", "--activation-memory", "-1GiB"), "--activation-memory '-1GiB' is negative"),
    (("--rule", "vllm", "--cuda-graph-memory", "lots"), "--cuda-graph-memory"),
    (("--gpu-memory-utilization", "0.9"), "add --rule vllm"),
    (("--rule", "vllm", "--mem-fraction-static", "0.8"), "add --rule sglang"),
    (("--rule", "vllm", "--block-size", "0"), "vLLM"),
    (("--rule", "vllm", "--max-num-batched-tokens", "0"), "--max-num-batched-tokens"),
    (("--rule", "vllm", "--sampler", "cuda"), "--sampler 'cuda' is not a vLLM sampler backend: use torch or flashinfer"),
    (("--rule", "sglang", "--sampler", "flashinfer"), "add --rule vllm"),
    # its declared maximum, 2**31 - 1: past it the engine rules' products overflow PostgreSQL's BIGINT
    (("--rule", "vllm", "--max-num-batched-tokens", "100000000000"),
     "--max-num-batched-tokens 100,000,000,000 is too large: at most 2,147,483,647"),
    # the reserve is the theoretical rule's: under an engine's rule it would change nothing, in silence
    (("--rule", "vllm", "--reserve", "0.3"),
     "--reserve is the theoretical rule's share held back, and the rule is vllm: its pool follows "
     "--gpu-memory-utilization"),
    (("--rule", "sglang", "--reserve", "0.3"), "the rule is sglang: its pool follows --mem-fraction-static"),
    (("--reserve", "0.3", "--kv-cache-memory", "40GiB"), "give --reserve or --kv-cache-memory, not both"),
    # a release of the other engine would pick that engine's release rules under this one's
    (("--rule", "sglang", "--engine-version", "vllm 0.11.0"),
     "--engine-version 'vllm 0.11.0' names vLLM but the rule is sglang: give SGLang's release, or --rule vllm"),
], ids=["rule", "gmu-zero", "gmu-above-one", "negative-activation", "bad-size", "knob-without-rule",
        "other-engines-knob", "vllm-block-zero", "zero-batched-tokens", "unknown-sampler", "sampler-without-vllm",
        "batched-tokens-past-int32", "reserve-under-vllm", "reserve-under-sglang", "reserve-and-pool",
        "other-engines-release"])
def test_bad_engine_settings_are_one_line_and_write_nothing(kv, state, args, words):
    kv("init")
    line = fails(kv, state, "capacity", "--model", "Llama-3.1-8B", *args)
    assert words in line
    line = fails(kv, state, "plan", "add", "p", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", *args)
    assert words in line
    assert kv.json("plan", "list") and "p" not in {r["plan"] for r in kv.json("plan", "list")}


def test_a_plan_under_an_engine_rule_refuses_a_reserve_and_takes_its_engines_release(kv, state):
    kv("init")
    kv("plan", "add", "p", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--rule", "vllm")
    assert "the rule is vllm: its pool follows --gpu-memory-utilization" in fails(kv, state, "plan", "set", "p",
                                                                                 "--reserve", "0.3")
    assert "names SGLang but the rule is vllm" in fails(kv, state, "plan", "set", "p", "--engine-version",
                                                        "SGLang v0.5.3")
    kv("plan", "set", "p", "--engine-version", "vLLM v0.11.0")  # its own engine's name, in any case, is fine
    kv("plan", "set", "p", "--rule", "theoretical", "--reserve", "0.3")  # back to the reserve: it applies again
    assert plan_row(kv, "p")["reserve"] == 0.3



def test_a_plan_stored_before_the_release_check_keeps_working_until_its_release_or_rule_changes(kv, state, tmp_path):
    """A registry may hold a plan whose release names the other engine, stored before kvreg refused it: editing its
    notes, exporting and applying the export work on (nothing written), and changing its rule or release checks the
    pair again."""
    from sqlalchemy import create_engine, text

    kv("init")
    kv("plan", "add", "sg", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--rule", "sglang",
       "--engine-version", "0.5.3")
    engine = create_engine(kv.url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE plan SET engine_version = 'vllm 0.10.1' WHERE name = 'sg'"))
    engine.dispose()
    kv("plan", "set", "sg", "--notes", "hi")
    assert plan_row(kv, "sg")["notes"] == "hi"
    exported = tmp_path / "registry.toml"
    exported.write_text(kv("export").stdout)
    before = state()
    kv("apply", str(exported))
    assert state() == before
    assert "names vLLM but the rule is sglang" in fails(kv, state, "plan", "set", "sg", "--block-size", "32",
                                                        "--engine-version", "vllm 0.10.2")
    kv("plan", "set", "sg", "--engine-version", "0.5.3")  # the plan's own engine's release: fixed
    assert plan_row(kv, "sg")["engine_version"] == "0.5.3"


# --------------------------------------------------------------------------- plans and calibration


def test_calibrate_records_the_log_and_shows_the_error(kv, state):
    kv("plan", "add", "chat", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1", "--rule", "vllm",
       "--kv-cache-memory", "53GiB")
    [row] = kv.json("plan", "calibrate", "chat", "--kv-cache-tokens", "434,176", "--max-concurrency", "3.31x",
                    "--engine-version", "vllm 0.33.0")
    assert row["measured_kv_cache_tokens"] == 434_176 and row["measured_engine_version"] == "vllm 0.33.0"
    assert row["kv_cache_tokens_error_fraction"] == 0  # (434,176 - 434,176) / 434,176
    assert row["max_concurrency_error_fraction"] == pytest.approx((27_136 / 8_192 - 3.31) / 3.31)
    r = plan_row(kv, "chat")
    assert (r["measured_max_concurrency"], r["rule"]) == (3.31, "vllm")

    assert "--max-concurrency" in fails(kv, state, "plan", "calibrate", "chat", "--max-concurrency", "many")
    assert "nothing to record" in fails(kv, state, "plan", "calibrate", "chat")
    assert "unknown plan 'chta': did you mean chat?" in fails(kv, state, "plan", "calibrate", "chta",
                                                              "--kv-cache-tokens", "1")

    kv("plan", "set", "chat", "--block-size", "32")  # new settings: the old measurement no longer applies
    r = plan_row(kv, "chat")
    assert r["measured_kv_cache_tokens"] is None and r["kv_cache_tokens_error_fraction"] is None
    assert r["num_blocks"] == 53 * GiB // (32 * LLAMA_8B_PER_TOKEN) == 13_568


def test_theoretical_plans_are_calibrated_by_their_pool_tokens(kv):
    kv("plan", "add", "t", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1", "--context", "8K",
       "--kv-cache-memory", "53GB")
    [row] = kv.json("plan", "calibrate", "t", "--kv-cache-tokens", "400000")
    assert row["kv_cache_tokens"] is None and row["kv_pool_tokens"] == 404_352
    assert row["kv_cache_tokens_error_fraction"] == pytest.approx((404_352 - 400_000) / 400_000)


def test_changing_the_rule_drops_the_other_engines_settings(kv):
    kv("plan", "add", "p", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--rule", "vllm",
       "--gpu-memory-utilization", "0.9", "--max-num-batched-tokens", "4K")
    r = plan_row(kv, "p")
    assert (r["gpu_memory_utilization"], r["max_num_batched_tokens"], r["in_flight_tokens"]) == (0.9, 4096, 2 * 4096)
    kv("plan", "set", "p", "--rule", "sglang", "--mem-fraction-static", "0.85")
    r = plan_row(kv, "p")
    assert (r["rule"], r["gpu_memory_utilization"], r["max_num_batched_tokens"]) == ("sglang", None, None)
    assert r["mem_fraction_static_used"] == 0.85 and r["num_blocks"] is None
    kv("plan", "set", "p", "--rule", "theoretical")
    r = plan_row(kv, "p")
    assert (r["rule"], r["mem_fraction_static"], r["kv_cache_tokens"]) == ("theoretical", None, None)


def test_the_report_says_which_rule_produced_a_plans_figures(kv, tmp_path):
    kv("plan", "add", "eng", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1", "--rule", "vllm",
       "--kv-cache-memory", "53GiB")
    kv("plan", "calibrate", "eng", "--kv-cache-tokens", "434,176", "--max-concurrency", "3.31x")
    kv("report", "--quarter", "2026Q4", "--out", tmp_path, "--format", "md")
    folder = tmp_path / "2026-Q4"
    page = (folder / "capacity.md").read_text()
    section = page.split("### eng\n")[1].split("\n### ")[0]
    assert "Rule: **vllm**" in section
    # token counts print as numbers in the report's tables: 27,136 blocks x 16 = 434,176 tokens (not 424K)
    assert "| Number of blocks (blocks) | 27,136 |" in section and "| KV cache tokens (tokens) | 434,176 |" in section
    assert "**Calibration**" in section and "| KV cache tokens error fraction (share) | 0.0% |" in section
    assert "Rule: **theoretical**" in page.split("### chat-llama3-8b\n")[1]
    data = json.loads((folder / "data.json").read_text())
    eng = next(p for p in data["plans"] if p["plan"] == "eng")
    assert (eng["rule"], eng["num_blocks"], eng["kv_cache_tokens"]) == ("vllm", 27_136, 434_176)


# --------------------------------------------------------------------------- migration 0002 on real data


_V1_ROWS = {
    "dtype": "INSERT INTO dtype (name, bytes_per_element, kind, mla_bytes_per_token_per_layer, notes)"
             " VALUES ('bf16', 2.0, 'both', NULL, 'bfloat16'), ('fp8_ds_mla', 1.0, 'kv', 656, 'MLA')",
    "gpu": "INSERT INTO gpu (id, name, vendor, memory_bytes, memory_bandwidth_bytes_per_s, interconnect,"
           " price_per_hour, unit_price, notes) VALUES (1, 'H100-SXM', 'NVIDIA', 85899345920, 3350000000000, '',"
           " 2.5, 30000.0, '')",
    "model": "INSERT INTO model (id, name, architecture, family, layers, full_layers, sliding_layers, chunked_layers,"
             " linear_layers, attention_heads, kv_heads, head_dim, v_head_dim, params_total, params_active,"
             " weight_dtype, max_position_embeddings, source, notes) VALUES (1, 'Llama-3.1-8B', '', '', 32, 32, 0, 0,"
             " 0, 32, 8, 128, 128, 8050000000, 8050000000, 'bf16', 131072, 'manual', 'kept')",
    "plan": "INSERT INTO plan (id, name, model_id, gpu_id, gpus_per_node, tp, pp, dp_attention, kv_dtype, weight_dtype,"
            " context_tokens, avg_tokens, reserve, kv_cache_memory_bytes, block_size, notes) VALUES"
            " (1, 'chat', 1, 1, 1, 1, 1, 1, 'bf16', 'bf16', 131072, 1500, 0.12, NULL, 16, 'from 0001')",
    "demand": "INSERT INTO demand (id, plan_id, quarter, users) VALUES (1, 1, '2026Q4', 100), (2, 1, '2027Q1', 250)",
    "kvreg_meta": "INSERT INTO kvreg_meta (key, value) VALUES ('seeded', 'existing')",
}


def _rows(url: str, columns: dict[str, list[str]]) -> dict:
    from sqlalchemy import text

    from kvreg.db.engine import make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {t: [tuple(r) for r in conn.execute(text(f"SELECT {', '.join(c)} FROM {t} ORDER BY 1"))]
                    for t, c in columns.items()}
    finally:
        engine.dispose()


def registry_with_v1_rows(url: str, at: str) -> tuple[dict, dict]:
    """A registry migrated to revision `at` holding _V1_ROWS: (columns per table, their rows)."""
    from sqlalchemy import inspect, text

    from kvreg.db.engine import make_engine
    from test_migrations import alembic

    alembic(url, "upgrade", at)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for sql in _V1_ROWS.values():
                conn.execute(text(sql))
            # kvreg_meta is bookkeeping (the views' hash appears at head); every other table is compared
            columns = {t: [c["name"] for c in inspect(conn).get_columns(t)] for t in _V1_ROWS if t != "kvreg_meta"}
    finally:
        engine.dispose()
    return columns, _rows(url, columns)


def test_a_registry_at_0001_upgrades_with_every_row_and_back(empty_db_url):
    from sqlalchemy import text

    from kvreg.db.engine import head_revision, make_engine
    from test_migrations import alembic, revision

    columns, before = registry_with_v1_rows(empty_db_url, "0001")

    alembic(empty_db_url, "upgrade", "head")
    assert revision(empty_db_url) == head_revision()
    assert _rows(empty_db_url, columns) == before  # every 0001 value, unchanged
    new = _rows(empty_db_url, {"plan": ["rule", "gpu_memory_utilization", "measured_kv_cache_tokens"],
                               "dtype": ["name", "scale_bytes_per_token_per_head"],
                               "model": ["indexer_bytes_per_token_per_layer"]})
    assert new["plan"] == [("theoretical", None, None)]  # an old plan keeps its rule: theoretical
    assert new["dtype"] == [("bf16", None), ("fp8_ds_mla", None)] and new["model"] == [(None,)]
    [pc] = _rows(empty_db_url, {"plan_capacity": ["plan", "rule", "max_concurrency", "kv_cache_tokens"]})[
        "plan_capacity"]
    assert pc[:2] == ("chat", "theoretical") and pc[3] is None
    assert pc[2] == pytest.approx((H100 * 0.88 - LLAMA_8B_WEIGHTS) / (131_072 * LLAMA_8B_PER_TOKEN))
    [users] = _rows(empty_db_url, {"plan_quarter": ["users"]}).values()
    assert sorted(users) == [(100,), (250,)]

    # the constraints of 0002 hold on the upgraded tables
    engine = make_engine(empty_db_url)
    try:
        with pytest.raises(Exception, match="ck_plan_rule"):
            with engine.begin() as conn:
                conn.execute(text("UPDATE plan SET rule = 'bogus'"))
        with pytest.raises(Exception, match="ck_plan_vllm_block"):
            with engine.begin() as conn:
                conn.execute(text("UPDATE plan SET rule = 'vllm', block_size = 0"))
        with engine.begin() as conn:
            conn.execute(text("UPDATE plan SET rule = 'vllm', gpu_memory_utilization = 0.9"))
    finally:
        engine.dispose()

    alembic(empty_db_url, "downgrade", "0001")
    assert revision(empty_db_url) == "0001"
    assert _rows(empty_db_url, columns) == before  # lossy only in what 0001 cannot hold
    alembic(empty_db_url, "upgrade", "head")
    assert _rows(empty_db_url, {"plan": ["rule"]})["plan"] == [("theoretical",)]


def test_every_workbook_formula_fits_in_excels_limit():
    """Excel refuses formulas over 8,192 characters (LibreOffice does not); the engine rules' figures
    are the longest ones the workbook compiles."""
    from kvreg.export.excel_layout import figure_template
    from kvreg.figures.declarations import FIGURES

    longest = max(FIGURES, key=lambda n: len(figure_template(n, lambda _: "ZZ")))
    assert len(figure_template(longest, lambda _: "ZZ").replace("\x00", "1048576")) <= 8192, longest


def test_import_reads_the_indexer_of_a_deepseek_v32_config():
    """DeepSeek-V3.2's config names index_head_dim 128: 128 fp8 key bytes + 128 // 128 fp32 scales x 4 B."""
    from conftest import HF_CONFIGS

    from kvreg.interchange.hf.row import model_from_config

    config = json.loads((HF_CONFIGS / "deepseek-ai__DeepSeek-V3.json").read_text())
    v3, _ = model_from_config(config, name="DeepSeek-V3")
    v32, _ = model_from_config({**config, "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048},
                               name="DeepSeek-V3.2")
    assert "indexer_bytes_per_token_per_layer" not in v3
    assert v32["indexer_bytes_per_token_per_layer"] == 128 + 128 // 128 * 4 == 132


def test_solving_for_the_reserve_needs_the_theoretical_rule(kv, state):
    kv("plan", "add", "v", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--rule", "vllm")
    kv("demand", "set", "v", "2026Q4", "10")
    line = fails(kv, state, "plan", "solve", "reserve", "v")
    assert "follows the vllm rule" in line and "--rule theoretical" in line


@pytest.mark.parametrize("gpu, release, batched, seqs, per_logit", [
    # H100 (79.19 GiB reported, over 70 GiB), V1: 8,192 batched tokens and 1,024 sampler rows of 38 B
    ("H100-SXM", "0.10.1", 8192, 1024, 38),
    # A100 40GB (39.38 GiB), V1: the small-GPU defaults, 2,048 batched tokens and 256 rows
    ("A100-40GB", "0.10.1", 2048, 256, 38),
    # the same GPU in V0 (v0.6.5): 8,192 unless given, 256 rows of 38 B (its profile run samples through the same
    # sort-based top-k/top-p)
    ("A100-40GB", "0.6.5", 8192, 256, 38),
    # the last release with the sort-based top-k/top-p (v0.16), the Triton kernel (v0.17 to v0.20), FlashInfer's
    # sampler by default (v0.21 on)
    ("H100-SXM", "0.16.0", 8192, 1024, 38),
    ("H100-SXM", "0.17.0", 8192, 1024, 20),
    ("A100-40GB", "0.19.1", 2048, 256, 20),
    ("H100-SXM", "0.21.0", 8192, 1024, 24),
    # an A100 80GB (79.25 GiB) keeps the small defaults from v0.9.0 (PR 17885: `"a100" not in device_name`), the
    # large ones in v0.8.5
    ("A100-80GB", "0.9.0", 2048, 256, 38),
    ("A100-80GB", "0.20.0", 2048, 256, 20),
    ("A100-80GB", "0.8.5", 8192, 1024, 38),
])
def test_vllm_profile_run_defaults_by_gpu_and_release(kv, gpu, release, batched, seqs, per_logit):
    """vllm/engine/arg_utils.py get_batch_defaults: GPUs reporting 70 GiB or more (from v0.9.0 not A100s) get
    max_num_batched_tokens 8,192 and max_num_seqs 1,024 for the OpenAI server, the others 2,048 and 256; the
    sampler warm-up holds 38 B per logit after the forward pass in V0 as in V1 (Llama-3.1-8B: MLP 14,336, hidden
    4,096, vocabulary 128,256)."""
    kv("plan", "add", "v", "--model", "Llama-3.1-8B", "--gpu", gpu, "--gpus-per-node", "1", "--context", "8K",
       "--rule", "vllm", "--engine-version", release)
    r = plan_row(kv, "v")
    assert (r["max_num_batched_tokens_used"], r["vllm_max_num_seqs_used"], r["sampler_bytes_per_logit"]) == (
        batched, seqs, per_logit)
    forward, warm_up = batched * (3 * 14_336 + 3 * 4_096) * 2, seqs * 128_256 * per_logit
    expected = max(forward, batched * 4_096 * 2 + warm_up)
    assert r["activation_peak_bytes_per_gpu"] == expected


@pytest.mark.parametrize("release, sampler, per_logit", [
    ("0.10.1", "flashinfer", 14),  # FlashInfer installed: top_k_mask_logits and softmax beside the logits, 2 + 4 + 4 + 4
    ("0.10.1", "torch", 38),  # the sort path
    ("0.10.1", None, 38),  # the default depends on whether flashinfer is installed: kvreg takes the sort path
    ("0.20.0", "flashinfer", 14),  # v0.10.2 to v0.20: FlashInfer's only by VLLM_USE_FLASHINFER_SAMPLER=1
    ("0.20.0", None, 20),  # PyTorch's backend, vLLM's Triton top-k/top-p kernel from v0.17
    ("0.21.0", None, 24),  # FlashInfer's by default from v0.21 (as measured on vllm#50722)
    ("0.21.0", "torch", 20),  # VLLM_USE_FLASHINFER_SAMPLER=0: the Triton kernel
    ("0.6.5", "flashinfer", 38),  # the V0 engine's sampler: the sort path whatever the backend
])
def test_the_sampler_backend_sizes_the_warm_up(kv, release, sampler, per_logit):
    """Llama-3.1-8B on an A100 80GB (the small defaults from v0.9: 2,048 batched tokens, 256 sequences; 128,256
    logits a row): the warm-up is 256 x 128,256 x the backend's bytes a logit beside 2,048 x 4,096 x 2 B of hidden
    states, larger than the forward pass's 2,048 x (3 x 14,336 + 3 x 4,096) x 2 B = 226,492,416 at every rate here."""
    seqs, batched = (256, 2_048) if release != "0.6.5" else (256, 8_192)
    kv("plan", "add", "s", "--model", "Llama-3.1-8B", "--gpu", "A100-80GB", "--gpus-per-node", "1", "--context", "8K",
       "--rule", "vllm", "--engine-version", release, *(("--sampler", sampler) if sampler else ()))
    r = plan_row(kv, "s")
    assert (r["sampler"], r["sampler_bytes_per_logit"]) == (sampler, per_logit)
    assert r["activation_peak_bytes_per_gpu"] == max(batched * (3 * 14_336 + 3 * 4_096) * 2,
                                                     batched * 4_096 * 2 + seqs * 128_256 * per_logit)


def test_plan_set_changes_and_clears_the_sampler(kv, state):
    """256 x 128,256 logits at 14 B (FlashInfer's path, v0.10.1) are 459,669,504 B, at 38 (the sort path)
    1,247,674,368; `none` returns to the release's default (the sort path at v0.10.1), an unknown backend is one line
    and changes nothing."""
    kv("plan", "add", "f", "--model", "Llama-3.1-8B", "--gpu", "A100-80GB", "--gpus-per-node", "1", "--context", "8K",
       "--rule", "vllm", "--engine-version", "0.10.1", "--sampler", "flashinfer")
    hidden = 2_048 * 4_096 * 2
    assert plan_row(kv, "f")["activation_peak_bytes_per_gpu"] == hidden + 256 * 128_256 * 14 == hidden + 459_669_504
    assert "--sampler 'sort' is not a vLLM sampler backend" in fails(kv, state, "plan", "set", "f", "--sampler", "sort")
    assert plan_row(kv, "f")["sampler"] == "flashinfer"
    kv("plan", "set", "f", "--sampler", "none")
    r = plan_row(kv, "f")
    assert r["sampler"] is None and r["activation_peak_bytes_per_gpu"] == hidden + 256 * 128_256 * 38
    assert 256 * 128_256 * 38 == 1_247_674_368


def test_vllm_reads_the_gpus_name_as_its_device_name(kv):
    """vLLM's `"a100" in device_name.lower()`: a GPU row named like an A100, in either case, gets the small batch
    defaults from v0.9.0; another 80 GB card of the same memory does not."""
    for name in ("a100-sxm4-80gb", "A800-80GB"):
        kv("gpu", "add", name, "--memory", "80GiB", "--reported-memory", "79.25GiB")
        kv("plan", "add", name, "--model", "Llama-3.1-8B", "--gpu", name, "--gpus-per-node", "1", "--rule", "vllm")
    small, large = plan_row(kv, "a100-sxm4-80gb"), plan_row(kv, "A800-80GB")
    assert (small["vllm_large_batch_defaults"], small["vllm_max_num_seqs_used"], small["max_running_requests"]) == (
        0, 256, 256)
    assert (large["vllm_large_batch_defaults"], large["vllm_max_num_seqs_used"], large["max_running_requests"]) == (
        1, 1024, 1024)
    # the pools differ by the warm-up: 1,024 - 256 rows of 128,256 logits of 20 B (v0.20), less the batch's
    # hidden states (8,192 - 2,048 tokens x 4,096 x 2 B)
    gap = (1024 - 256) * 128_256 * 20 + (8192 - 2048) * 4_096 * 2
    assert small["kv_pool_bytes_per_gpu"] - large["kv_pool_bytes_per_gpu"] == pytest.approx(gap, abs=1)


def test_the_report_shows_the_state_slots_and_the_running_request_cap(kv, tmp_path):
    """An SGLang plan of a hybrid model lists its state slots beside the KV cache tokens, and every engine plan its
    cap on running requests (here the 200 it was given), in its engine figures and in data.json."""
    kv("plan", "add", "nx", "--model", "Qwen3-Next-80B-A3B", "--gpu", "H100-SXM", "--tp", "4", "--gpus-per-node", "8",
       "--rule", "sglang", "--block-size", "1", "--kv-cache-memory", "30GiB", "--context", "1K",
       "--max-running-requests", "200")
    kv("report", "--quarter", "2026Q4", "--format", "md", "--out", str(tmp_path))
    md = (tmp_path / "2026-Q4" / "capacity.md").read_text(encoding="utf-8")
    # 788 slots and 1,381,132 tokens (test_sglang_gives_a_hybrid_models_state_slots_of_their_own); 200 run, of the
    # 1,348.8 1K requests the cells hold and the 788 // 3 = 262 the slots allow
    assert "| SGLang state slots (requests) | 788 |\n| KV cache tokens (tokens) | 1,381,132 |\n" in md
    assert "| Max running requests (sequences) | 200 |" in md
    data = json.loads((tmp_path / "2026-Q4" / "data.json").read_text(encoding="utf-8"))
    plan = next(p for p in data["plans"] if p["plan"] == "nx")
    assert (plan["max_num_seqs"], plan["max_running_requests"], plan["max_concurrency"]) == (200, 200, 200)


# --------------------------------------------------------------------------- the GPU's own facts (0011)


def test_pcie_gpus_keep_the_small_communication_buffers(kv):
    """NCCL's and the custom all-reduce's buffers, which the engines count before sizing the KV cache at TP > 1, were
    measured on NVLink H100s; over PCIe they stay small: an 8 x L40S v0.10.2 run logged 0.21 GiB of non-torch memory
    (tests/data/logs/vllm-roethig-qwen3-235b-fp8-l40s-tp8.log). Qwen3-8B at TP 2, vLLM v0.10.1 and SGLang."""
    common = ("--model", "Qwen3-8B", "--tp", "2", "--gpus-per-node", "2", "--context", "32K")
    for gpu in ("H100-SXM", "L40S"):
        kv("plan", "add", f"v-{gpu}", "--gpu", gpu, *common, "--rule", "vllm", "--engine-version", "0.10.1")
        kv("plan", "add", f"s-{gpu}", "--gpu", gpu, *common, "--rule", "sglang")
    # vLLM before v0.11: 0.25 GiB, and NCCL's 1.79 GiB on a fabric only
    assert plan_row(kv, "v-H100-SXM")["non_torch_bytes_per_gpu"] == round(0.25 * GiB) + round(1.79 * GiB)
    assert plan_row(kv, "v-L40S")["non_torch_bytes_per_gpu"] == round(0.25 * GiB) == 268_435_456
    # SGLang: in use before the load, 1.85 GiB at TP > 1 on a fabric, TP 1's 0.70 GiB over PCIe
    assert plan_row(kv, "s-H100-SXM")["non_torch_bytes_per_gpu"] == round(1.85 * GiB)
    assert plan_row(kv, "s-L40S")["non_torch_bytes_per_gpu"] == round(0.70 * GiB) == 751_619_277
    # the L40S's pool, from its 44.42 GiB: 47,695,611,822 x 0.9 - the warm-up (256 rows: under 70 GiB) - 0.25 GiB
    # - 8.2e9 x 2 B / 2 - RoPE's cos/sin table, whole on every GPU (vLLM: the model's dtype)
    row = plan_row(kv, "v-L40S")
    activation = max(2048 * (3 * 12_288 + 2 * 4_096) * 2, 2048 * 4_096 * 2 + 256 * 151_936 * 38)
    assert row["activation_peak_bytes_per_gpu"] == activation == 1_494_810_624
    rope = 40_960 * 128 * 2  # 10,485,760 B
    pool = 47_695_611_822 * 0.9 - activation - 268_435_456 - 8.2e9 - rope
    assert row["kv_pool_gib_per_gpu"] == pytest.approx(pool / GiB, rel=1e-12)  # 30.69 GiB


def test_fp8_on_a_gpu_without_fp8_units_carries_marlins_group_scales(kv):
    """A100s (compute capability 8.0) run FP8 checkpoints through vLLM's Marlin kernels, which turn 128 x 128 block
    scales into one 16-bit scale per 128 inputs of every output row. Qwen3-8B in FP8: 8.2e9 params, its two
    151,936 x 4,096 vocabulary matrices kept at 16 bits."""
    common = ("--model", "Qwen3-8B", "--gpus-per-node", "1", "--weight-dtype", "fp8_e4m3")
    kv("plan", "add", "a100", "--gpu", "A100-80GB", *common, "--rule", "vllm")
    kv("plan", "add", "h100", "--gpu", "H100-SXM", *common, "--rule", "vllm")
    kv("plan", "add", "a100-sglang", "--gpu", "A100-80GB", *common, "--rule", "sglang")
    kv("plan", "add", "a100-bf16", "--gpu", "A100-80GB", "--model", "Qwen3-8B", "--gpus-per-node", "1",
       "--rule", "vllm")
    vocabulary = 2 * 151_936 * 4_096  # 1,244,659,712 params
    fp8 = 8.2e9 * 1 + vocabulary * (2 - 1)  # 9,444,659,712 B
    scales = (8.2e9 - vocabulary) * 2 / 128  # 108,677,192 B
    # RoPE's cos/sin table, whole on every GPU: 40,960 positions x 128 x 2 B under vLLM (the model's dtype), 4 B under
    # SGLang (float32)
    rope, rope_sglang = 40_960 * 128 * 2, 40_960 * 128 * 4
    assert plan_row(kv, "h100")["weights_bytes_per_gpu"] == pytest.approx(fp8 + rope)
    assert plan_row(kv, "a100")["marlin_fp8_scale_bytes"] == pytest.approx(scales) == 108_677_192
    assert plan_row(kv, "a100")["weights_bytes_per_gpu"] == pytest.approx(fp8 + scales + rope)
    # no scales: vLLM's kernels only
    assert plan_row(kv, "a100-sglang")["weights_bytes_per_gpu"] == pytest.approx(fp8 + rope_sglang)
    assert plan_row(kv, "a100-bf16")["marlin_fp8_scale_bytes"] == 0
    # Llama-3.1-8B in FP8 at TP 2 on A100s: 8.05e9 params, two 128,256 x 4,096 vocabulary matrices; the scales split
    # with the weights
    kv("plan", "add", "llama", "--gpu", "A100-80GB", "--model", "Llama-3.1-8B", "--tp", "2", "--gpus-per-node", "2",
       "--weight-dtype", "fp8_e4m3", "--rule", "vllm")
    vocabulary = 2 * 128_256 * 4_096  # 1,050,673,152 params
    row = plan_row(kv, "llama")
    assert row["marlin_fp8_scale_bytes"] == pytest.approx((8.05e9 - vocabulary) * 2 / 128) == 109_364_482
    rope = 131_072 * 128 * 2  # RoPE's cos/sin table, not split: whole on both GPUs
    assert row["weights_bytes_per_gpu"] == pytest.approx((8.05e9 + vocabulary + 109_364_482) / 2 + rope)


def test_vllm_sizes_every_pipeline_stage_and_keeps_the_fewest_blocks(kv):
    """vLLM splits the layers with get_pp_indices (the remainder to the stages before the last), runs the sampler
    warm-up on the last stage only, and sizes every worker to the smallest block count. Qwen3-235B-A22B (94 MoE
    layers, bf16, two 151,936 x 4,096 vocabulary matrices, which vLLM's qwen3_moe.py builds on every stage) at
    TP 2 x PP 4 on H200s, vLLM v0.10.1."""
    kv("plan", "add", "q", "--model", "Qwen3-235B-A22B", "--gpu", "H200", "--tp", "2", "--pp", "4", "--gpus-per-node",
       "8", "--rule", "vllm", "--engine-version", "0.10.1", "--context", "32768")
    row = plan_row(kv, "q")
    # 94 = 4 x 23 + 2: stages of 23, 24, 24 and 23 layers
    assert (row["pp_stage_layers_first"], row["pp_stage_layers_middle"], row["pp_stage_layers_last"]) == (23, 24, 23)
    vocab = 151_936 * 4_096 * 2  # one matrix, 1,244,659,712 B
    layers = 235e9 * 2 - 2 * vocab  # the replica's decoder layers, 467,510,680,576 B
    assert row["replica_layer_weight_bytes"] == pytest.approx(layers) == 467_510_680_576
    routers = 94 * 128 * 4_096 * (2 - 2 / 2) / 4  # whole on both TP ranks, a quarter of them on each stage
    assert row["engine_router_extra_bytes_per_gpu"] == pytest.approx(routers) == 12_320_768
    assert row["pp_vocab_on_every_stage"] == 1  # Qwen3MoeForCausalLM: both matrices on every stage
    # RoPE's cos/sin table, whole on every GPU of every stage (vLLM: the model's dtype); 4 KV heads over TP 2 split
    # evenly, none replicated
    rope = 40_960 * 128 * 2  # 10,485,760 B
    first = (23 * layers / 94 + 2 * vocab) / 2 + routers + rope
    middle = (24 * layers / 94 + 2 * vocab) / 2 + routers + rope
    assert row["pp_stage_weights_first_bytes"] == pytest.approx(first, rel=1e-12)  # 54.45 GiB
    assert row["pp_stage_weights_middle_bytes"] == pytest.approx(middle, rel=1e-12)  # 56.76 GiB
    assert row["pp_stage_weights_last_bytes"] == pytest.approx(first, rel=1e-12)
    # the pools: the first and middle stages' forward pass, 8,192 x (3 x 12,288 + 3 x 4,096) x 2 B; the last's
    # sampler warm-up (1,024 rows of 151,936 logits of 38 B beside 8,192 x 4,096 hidden states); v0.10's 0.25 + 1.79 GiB
    forward = 8_192 * (3 * 12_288 + 3 * 4_096) * 2
    sampler = 8_192 * 4_096 * 2 + 1_024 * 151_936 * 38
    assert (row["activation_forward_bytes_per_gpu"], row["activation_last_stage_bytes_per_gpu"]) == (forward, sampler)
    left = 150_119_844_413 * 0.9 - round(0.25 * 2**30) - round(1.79 * 2**30)
    page = 16 * 2 * 128 * 2 * 2  # a layer's block: 16 tokens x 2 KV heads a GPU x 128 x K and V x 2 B
    blocks = {"first": math.floor((left - forward - first) / (page * 23)),
              "middle": math.floor((left - forward - middle) / (page * 24)),
              "last": math.floor((left - sampler - first) / (page * 23))}
    assert blocks == {"first": 195_443, "middle": 180_975, "last": 181_712}
    assert {s: row[f"pp_stage_blocks_{s}"] for s in blocks} == blocks
    # a middle stage limits (its extra layer outweighs the last stage's sampler): its weights, activation, layers
    # and blocks are the GPU's figures
    assert row["pp_limiting_stage"] == 1 and row["num_blocks"] == 180_975 and row["kv_group_layers"] == 24
    assert (row["weights_bytes_per_gpu"], row["activation_peak_bytes_per_gpu"]) == (pytest.approx(middle), forward)
    assert row["kv_pool_bytes_per_gpu"] == pytest.approx(left - forward - middle, rel=1e-12)
    assert row["kv_cache_tokens"] == 180_975 * 16
    # Llama's file builds the embeddings on the first stage and the lm_head on the last: one matrix each
    kv("plan", "add", "l", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "2", "--pp", "2",
       "--gpus-per-node", "4", "--rule", "vllm")
    llama = plan_row(kv, "l")
    assert llama["pp_vocab_on_every_stage"] == 0
    rope = 131_072 * 128 * 2  # RoPE's cos/sin table, whole on every GPU of both stages: 33,554,432 B
    assert llama["pp_stage_weights_first_bytes"] == pytest.approx(
        (40 * (70.6e9 * 2 - 2 * 128_256 * 8_192 * 2) / 80 + 128_256 * 8_192 * 2) / 2 + rope) == 35.3e9 + 33_554_432
    # without PP nothing changes: one stage, weights split by TP alone
    kv("plan", "add", "q1", "--model", "Qwen3-235B-A22B", "--gpu", "H200", "--tp", "8", "--rule", "vllm")
    one = plan_row(kv, "q1")
    assert one["pp_stages_modelled"] == 0 and one["pp_limiting_stage"] is None
    # plus RoPE's table and, 4 KV heads over TP 8, a whole head of K and V on each GPU: 94 layers x K and V x 4,096 x
    # 128 x (1 - 4 / 8) x 2 B more
    rope, kv_heads = 40_960 * 128 * 2, 94 * 2 * 4_096 * 128 * (1 - 4 / 8) * 2
    assert one["weights_bytes_per_gpu"] == pytest.approx(235e9 * 2 / 8 + 94 * 128 * 4_096 * (2 - 2 / 8) + rope
                                                         + kv_heads)


def test_leading_dense_layers_sit_on_the_first_stage(kv):
    """DeepSeek-V3 (61 layers, the first 3 dense, 58 with 256 experts of 2,048) at PP 2: the first stage holds 31
    layers of which 28 have experts, the last 30 with experts; the experts' share of the layers' weights goes to the
    MoE layers only."""
    kv("plan", "add", "d", "--model", "DeepSeek-V3", "--gpu", "H200", "--tp", "8", "--pp", "2", "--gpus-per-node",
       "16", "--rule", "vllm")
    row = plan_row(kv, "d")
    assert (row["pp_stage_layers_first"], row["pp_stage_layers_last"]) == (31, 30)  # 61 = 2 x 30 + 1
    assert (row["dense_layers"], row["pp_stage_moe_layers_first"], row["pp_stage_moe_layers_last"]) == (3, 28, 30)
    experts, layers = row["replica_expert_weight_bytes"], row["replica_layer_weight_bytes"]
    per_layer = (layers - experts) / 61
    per_moe_layer = experts / 58
    vocab = row["vocab_matrix_bytes"]
    # RoPE's cos/sin table, whole on every GPU of both stages: 163,840 positions x the 64-wide qk_rope_head_dim (MLA)
    # x 2 B (vLLM: the model's dtype); MLA keeps one latent, no KV head to replicate
    rope = 163_840 * 64 * 2
    assert row["pp_stage_weights_first_bytes"] == pytest.approx(
        (31 * per_layer + 28 * per_moe_layer + vocab) / 8 + row["engine_router_extra_bytes_per_gpu"] + rope, rel=1e-12)
    assert row["pp_stage_weights_last_bytes"] == pytest.approx(
        (30 * per_layer + 30 * per_moe_layer + vocab) / 8 + row["engine_router_extra_bytes_per_gpu"] + rope, rel=1e-12)


def test_a_gpus_facts_are_options_and_bad_ones_are_one_line(kv, state):
    kv("gpu", "add", "RTX-3080", "--memory", "10GiB", "--reported-memory", "9.6GiB", "--compute-capability", "8.6",
       "--pcie-only")
    [row] = [g for g in kv.json("gpu", "list") if g["name"] == "RTX-3080"]
    assert (row["compute_capability"], row["fabric"]) == (8.6, 0)
    [rtx3090] = [g for g in kv.json("gpu", "list") if g["name"] == "RTX-3090"]  # the catalog's
    assert (rtx3090["compute_capability"], rtx3090["fabric"]) == (8.6, 0)
    [h100] = [g for g in kv.json("gpu", "list") if g["name"] == "H100-SXM"]
    assert (h100["compute_capability"], h100["fabric"]) == (9.0, 1)
    line = fails(kv, state, "gpu", "add", "X", "--memory", "24GiB", "--compute-capability", "0")
    assert "compute_capability must be a finite number of more than 0 and at most 100, not 0.0 (an H100 is 9.0)" in line


def test_v0_pads_an_mla_latent_to_256_bytes(cap):
    """vLLM's V0 engine from v0.7.3 stored each 576-element bf16 latent in 1,280 B (PR 12676) until PR 14842; V1
    never padded. DeepSeek-R1 on 8 x H200 (v0.7.3, tests/data/logs/vllm-flowasbrook-deepseek-r1-h200-tp8-v073.log)
    kept 21.43 GiB for its KV cache and printed 18,418 blocks of 16 tokens."""
    common = ("--model", "DeepSeek-V3", "--gpu", "H200", "--tp", "8", "--rule", "vllm", "--kv-cache-memory", "21.43GiB")
    v073 = cap(*common, "--engine-version", "0.7.3")
    assert v073["num_blocks"] == math.floor(round(21.43 * GiB) / (16 * 61 * 1_280)) == 18_418  # 18,418.6 in the log
    v080 = cap(*common, "--engine-version", "0.8.0")
    assert v080["num_blocks"] == math.floor(round(21.43 * GiB) / (16 * 61 * 1_152)) == 20_465
    assert cap("--model", "DeepSeek-V3", "--gpu", "H200", "--tp", "8")["kv_bytes_per_token_per_gpu"] == 61 * 1_152


def test_the_sampler_warm_up_holds_the_smaller_of_the_batch_and_max_num_seqs(kv):
    """V1's profile run warms the sampler up with one row per dummy request, min(max_num_batched_tokens,
    max_num_seqs) of them (gpu_model_runner.py _dummy_run): 2,048 rows here, not 4,096. v0.20: 20 B a logit."""
    kv("plan", "add", "many", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1", "--rule", "vllm",
       "--engine-version", "0.20.0", "--max-num-seqs", "4096", "--max-num-batched-tokens", "2048")
    r = plan_row(kv, "many")
    assert r["activation_peak_bytes_per_gpu"] == max(2048 * (3 * 14_336 + 3 * 4_096) * 2,
                                                     2048 * 4_096 * 2 + 2048 * 128_256 * 20) == 5_270_142_976


def test_vllms_v2_model_runner_by_release_and_architecture(kv):
    """vLLM runs Qwen3ForCausalLM on its V2 model runner by default from v0.22, LlamaForCausalLM from v0.23
    (vllm/config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES): its sampler warm-up holds 6 B a logit (the
    model-dtype logits and their fp32 copy), V1's FlashInfer sampler 24 from v0.21. Llama-3.1-8B on one H100:
    1,024 rows of 128,256 logits beside 8,192 hidden states, or the forward pass when that is larger."""
    for name, model, release in (("v22", "Llama-3.1-8B", "0.22.0"), ("v23", "Llama-3.1-8B", "0.23.0"),
                                 ("qwen", "Qwen3-8B", "0.22.0")):
        kv("plan", "add", name, "--model", model, "--gpu", "H100-SXM", "--gpus-per-node", "1", "--rule", "vllm",
           "--engine-version", release)
    v22, v23, qwen = (plan_row(kv, n) for n in ("v22", "v23", "qwen"))
    assert (v22["vllm_v2_model_runner"], v22["sampler_bytes_per_logit"]) == (0, 24)
    assert (v23["vllm_v2_model_runner"], v23["sampler_bytes_per_logit"]) == (1, 6)
    assert (qwen["vllm_v2_model_runner"], qwen["sampler_bytes_per_logit"]) == (1, 6)
    assert v22["activation_peak_bytes_per_gpu"] == 8_192 * 4_096 * 2 + 1_024 * 128_256 * 24 == 3_219_128_320
    # on the V2 runner the warm-up, 8,192 x 4,096 x 2 + 1,024 x 128,256 x 6 = 855,113,728 B, is lighter than the
    # forward pass, 8,192 x (3 x 14,336 + 3 x 4,096) x 2 B, which is then the peak
    assert v23["activation_peak_bytes_per_gpu"] == max(8_192 * 4_096 * 2 + 1_024 * 128_256 * 6,
                                                       8_192 * (3 * 14_336 + 3 * 4_096) * 2) == 905_969_664
    # 2.14 GiB more for the KV cache: the same weights, non-torch memory and utilization
    assert (v23["kv_pool_gib_per_gpu"] - v22["kv_pool_gib_per_gpu"]) * GiB == pytest.approx(
        3_219_128_320 - 905_969_664, rel=1e-9)


def test_below_compute_capability_8_vllm_08_to_010_runs_its_v0_engine(kv):
    """vllm/engine/arg_utils.py _is_v1_supported_oracle: on a CUDA GPU below compute capability 8.0 vLLM v0.8 to
    v0.10 fall back to the V0 engine ("Compute Capability < 8.0 is not supported by the V1 Engine. Falling back to
    V0."); v0.11 removed V0. The V0 engine keeps V0's defaults (256 sequences, 8,192 batched tokens on any GPU); its
    worker, like V1's before v0.11, takes its memory snapshot before NCCL's set-up (vllm/worker/worker.py
    Worker.init_device), so at TP 2 over NVLink both count NCCL's 1.79 GiB."""
    kv("gpu", "add", "V100-32GB", "--memory", "32GiB", "--reported-memory", "31.74GiB", "--compute-capability", "7.0",
       "--fabric")
    kv("gpu", "add", "A100-32GB-test", "--memory", "32GiB", "--reported-memory", "31.74GiB", "--compute-capability",
       "8.0", "--fabric")
    for name, gpu, release in (("v100-082", "V100-32GB", "0.8.2"), ("v100-0101", "V100-32GB", "0.10.1"),
                               ("v100-011", "V100-32GB", "0.11.0"), ("a100-082", "A100-32GB-test", "0.8.2")):
        kv("plan", "add", name, "--model", "Llama-3.1-8B", "--gpu", gpu, "--tp", "2", "--gpus-per-node", "2",
           "--context", "8K", "--rule", "vllm", "--engine-version", release)
    v0, v0_late, v1_removed, v1 = (plan_row(kv, n) for n in ("v100-082", "v100-0101", "v100-011", "a100-082"))
    assert [r["vllm_v1_engine"] for r in (v0, v0_late, v1_removed, v1)] == [0, 0, 1, 1]
    # V0: 8,192 batched tokens and 256 sequences whatever the GPU; V1 on a GPU under 70 GiB: 2,048 and 256
    assert (v0["max_num_batched_tokens_used"], v0["vllm_max_num_seqs_used"]) == (8192, 256)
    assert (v1["max_num_batched_tokens_used"], v1["vllm_max_num_seqs_used"]) == (2048, 256)
    # non-torch memory at TP 2 over NVLink: 0.25 GiB + 1.79 GiB of NCCL buffers in either engine before v0.11;
    # v0.11 on 0.13 + 0.42 GiB
    assert v0["non_torch_bytes_per_gpu"] == v0_late["non_torch_bytes_per_gpu"] == v1["non_torch_bytes_per_gpu"] == (
        round(0.25 * GiB) + round(1.79 * GiB))
    assert v1_removed["non_torch_bytes_per_gpu"] == round(0.13 * GiB) + round(0.42 * GiB)
    # both engines' profile runs take the larger of the forward pass and the sampler warm-up (256 rows at 38 B a
    # logit beside the hidden states): V0's 8,192 tokens make a forward pass of 8,192 x (3 x 14,336 + 3 x 4,096) x 2 B
    # = 905,969,664 B, lighter than its warm-up, 8,192 x 4,096 x 2 + 256 x 128,256 x 38 = 1,314,783,232 B
    assert v0["activation_peak_bytes_per_gpu"] == max(8_192 * (3 * 14_336 + 3 * 4_096) * 2,
                                                      8_192 * 4_096 * 2 + 256 * 128_256 * 38) == 1_314_783_232
    assert v1["activation_peak_bytes_per_gpu"] == max(2_048 * (3 * 14_336 + 3 * 4_096) * 2,
                                                      2_048 * 4_096 * 2 + 256 * 128_256 * 38) == 1_264_451_584


def test_vllm_from_v07_counts_little_non_torch_memory_on_one_gpu(kv):
    """From v0.7 the baseline snapshot follows CUDA's set-up (PR 11809, PR 12126): on one GPU the profile run sees
    0.11 GiB outside PyTorch (the median of vllm#12529's 0.04, mellea#416's 0.16 and vllm#23278's 0.11) until v0.11's
    0.13; v0.6.4 and earlier, which counted the CUDA context and other processes too, keep 0.25; v0.6.5 and v0.6.6,
    which measured from before CUDA's initialisation, 1.79."""
    releases = ("0.6.4", "0.6.5", "0.7.0", "0.10.1", "0.11.0")
    for r in releases:
        kv("plan", "add", f"nt-{r}", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--gpus-per-node", "1",
           "--context", "8K", "--rule", "vllm", "--engine-version", r)
    by_release = {r: plan_row(kv, f"nt-{r}")["non_torch_bytes_per_gpu"] for r in releases}
    assert by_release == {"0.6.4": round(0.25 * GiB), "0.6.5": round(1.79 * GiB), "0.7.0": round(0.11 * GiB),
                          "0.10.1": round(0.11 * GiB), "0.11.0": round(0.13 * GiB)}
    assert round(0.11 * GiB) == 118_111_601


def test_the_reason_a_sequence_does_not_fit_counts_what_the_engine_counts(cap):
    """gpt-oss-120b at 128K on one H100 under vLLM: its pool is 8,475 blocks and a 131,072-token request takes
    9,225 (sliding and full layers' blocks), so it holds 8,475 / 9,225 = 0.92 of one. The reason names what vLLM
    needs, 9,225 blocks of the pool's block size (pool / 8,475) = 5.07 GiB, not the 4.50 GiB of the request's bytes
    before vLLM's block rounding, which the pool's 4.66 GiB would seem to hold."""
    r = cap("--model", "gpt-oss-120b", "--gpu", "H100-SXM", "--rule", "vllm", "--tp", "1", "--gpus-per-node", "1",
            "--context", "128K")
    assert (r["num_blocks"], r["blocks_per_request"]) == (8475, 9225)
    assert r["sequences_per_rank"] == pytest.approx(8475 / 9225)
    needs = 9225 * (r["kv_pool_gib_per_gpu"] / 8475)  # 5.07 GiB
    assert f"{needs:.2f}" == "5.07" and f"{r['kv_gib_per_sequence_per_gpu']:.2f}" == "4.50"
    assert r["reason"] == "one 131,072-token sequence needs 5.07 GiB per GPU but the KV pool holds 4.66 GiB"
