"""The predicted-vs-logged table of docs/engine-rules.md, regenerated from the vendored public logs
(bench/engine_table.py): stale docs, or an error past its target (beyond the misses the bench records
with their measured error), fail."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("engine_table", ROOT / "bench" / "engine_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def table(bench):
    return bench.rows()


def test_the_docs_table_is_current_and_every_target_holds(bench, capsys):
    assert bench.main(["--check"]) == 0, capsys.readouterr().err


def test_dense_vllm_is_within_two_percent(bench, table):
    means = bench.mean_errors(table)
    assert means["vllm", "dense", "kv_cache_memory"][0] <= 0.02
    assert means["vllm", "dense", "kv_cache_tokens"][0] <= 0.02  # 1.6%: no longer a recorded miss
    assert ("vllm", "dense", "kv_cache_tokens") not in bench.KNOWN_MISSES
    # nineteen logs (dennislee22's four Qwen2-7B runs with FlashInfer's sampler among them), five of llm-d's measurements
    assert means["vllm", "dense", "kv_cache_memory"][1] == 24
    assert means["vllm", "dense", "kv_cache_tokens"][1] == 18


def test_sglang_with_its_logged_inputs_gives_its_tokens(table):
    [row] = [r for r in table if r["file"] == "sglang-pr18263-qwen3-30b-a3b-mi.log"]
    # SGLang sized the pool from 164,149,629,787 B; cells of 48 layers x 4 KV heads x 256 x 2 B, page 1
    assert row["tokens_predicted"] == 164_149_629_787 // (48 * 4 * 256 * 2) == row["tokens_logged"] == 1_669_816
    # rest_memory = (288 GiB - (288 - 230.20 - 56.98) GiB in use) x 0.911 - 56.98 GiB
    assert row["kv_gib_predicted"] == pytest.approx((230.20 + 56.98) * 0.911 - 56.98, abs=1e-6)
    assert row["kv_error"] == pytest.approx(0.0, abs=0.0001)


def test_sglangs_mla_cells_are_not_divided_by_tp(table):
    """Kimi-K2.5 on 8 x MI355X: memory before the load 283.56 GiB, weights 73.58 GiB, mem_fraction_static from its
    ServerArgs dump. An MLA cell is the whole latent on every rank: 61 layers x (512 + 64) x 2 B = 70,272 B."""
    [row] = [r for r in table if r["file"] == "sglang-amd-kimi-k25-mla-mi355x-tp8.log"]
    rest_gib = 283.56 * 0.8260405859375 - 73.58  # = 160.652 GiB; SGLang printed "KV size: 160.63 GB"
    assert row["kv_gib_predicted"] == pytest.approx(rest_gib, abs=1e-6)
    assert row["tokens_predicted"] == int(rest_gib * 2**30 // (61 * 576 * 2)) == 2_454_730
    assert row["tokens_logged"] == 2_454_421  # +0.013%: the logged GB have two decimals
    assert row["family"] == "mla" and row["tokens_error"] == pytest.approx(309 / 2_454_421)


def test_sglangs_hybrid_state_slots_come_out_of_the_pool_first(bench, table):
    """Qwen3.5-397B-A17B at TP 2 on RTX 4090s (ktransformers#1870, sglang 0.5.9): the state slots are sized first,
    the KV cells get what is left."""
    [row] = [r for r in table if r["file"] == "sglang-kt1870-qwen35-397b-hybrid-4090-tp2.log"]
    rest = ((19.08 + 3.76) * 0.85 - 3.76) * 2**30  # before the load x 0.85 - weights = 15.654 GiB
    # a slot on one GPU: 45 DeltaNet layers x (conv 36,864 elements x 2 B + recurrent 1,048,576 x 4 B) / TP 2
    per_req = 45 * (36_864 * 2 + 1_048_576 * 4) // 2
    assert per_req == 96_030_720
    slots = int((rest * 0.9 / 1.9 - per_req) / per_req)
    assert slots == 81  # sglang 0.5.9 logged 82: before PR 32184 its budget left the padding slot out,
    assert int(rest * 0.9 / 1.9 / per_req) == 82  # the same 82 slots' memory either way:
    cells = rest - (slots + 1) * per_req  # so the cells, and the tokens, agree with both releases
    cell = 15 * 1 * 256 * 2 * 2  # 15 attention layers x 1 KV head a GPU x 256 x K and V x 2 B
    assert row["tokens_predicted"] == int(cells // cell) == 581_629
    assert row["tokens_logged"] == 580_364 and row["tokens_error"] == pytest.approx(1_265 / 580_364)
    assert row["kv_gib_predicted"] == pytest.approx(cells / 2**30, abs=1e-6)  # 8.32; logged K + V = 4.15 + 4.15
    means = bench.mean_errors(table)
    assert means["sglang", "hybrid state (logged terms)", "kv_cache_tokens"] == (pytest.approx(1_265 / 580_364), 1)


def test_a_known_miss_is_reported_not_hidden(bench, table):
    means = bench.mean_errors(table)
    assert bench.KNOWN_MISSES == {} and bench.misses(means, table) == []  # every family within its target
    assert not any("FlashInfer" in family for _, family, _ in means)  # the sampler input prices those runs now
    overall = bench.overall_errors(table)
    assert overall["kv_cache_memory"][0] <= bench.TARGET and overall["kv_cache_tokens"][0] <= bench.TARGET
    worse = dict(means)
    worse["vllm", "dense", "kv_cache_memory"] = (0.05, 3)
    assert bench.misses(worse, table) == ["vllm dense kv_cache_memory: mean absolute error 5.0% over 3 logs, target 2%"]


def test_vllms_hybrid_pages_from_the_gpu_alone(table):
    """Qwen3-Next-80B-A3B-Instruct at TP 2 on two H200s (vLLM 0.10.2, defaults; sungwon-chae/arxiv_confi's log): every
    term logged, 74.28 / 5.58 / 1.38 GiB, and 973,760 tokens in 7,162 blocks of 544. The parameters are those kvreg's
    importer counts from the config, 79,572,238,336 (the catalog keeps the seed's round 80e9)."""
    [row] = [r for r in table if r["file"] == "vllm-sungwonchae-qwen3-next-80b-h200-tp2.log"]
    requested = 150_119_844_413 * 0.9  # the catalog's H200, 139.81 GiB as the log prints it
    rope = 262_144 * 64 * 2  # RoPE's cos/sin table, whole on each GPU: 262,144 positions x 64 rotated (0.25 of 256)
    weights = 79_572_238_336 * 2 / 2 + 48 * 512 * 2_048 * 2 * (1 - 1 / 2) + rope  # the routers whole on both GPUs
    activation = 8_192 * 2_048 * 2 + 1_024 * 151_936 * 38  # the sampler warm-up outweighs the MLP
    non_torch = round(0.25 * 2**30) + round(1.79 * 2**30)  # v0.10: the snapshot before NCCL's buffers
    kv = requested - weights - activation - non_torch
    assert weights / 2**30 == pytest.approx(74.19, abs=0.005)  # the log: 74.28
    assert row["kv_gib_predicted"] == pytest.approx(kv / 2**30, rel=1e-12)  # 44.07 GiB for the 44.59 logged
    # 12 attention layers per group of the 4 the hybrid allocator makes (1 of attention, 3 of DeltaNet state),
    # a page of 544 tokens x 1 KV head x 256 x K and V x 2 B per layer; a request takes a block of every group
    page = 544 * 1 * 256 * 2 * 2 * 12
    assert page == 6_684_672
    assert row["tokens_predicted"] == int(kv // page) // 4 * 544 == 962_336
    assert row["tokens_logged"] == 7_162 // 4 * 544 == 973_760  # its 7,162 blocks
    # what is off is its non-torch memory: 1.38 GiB logged at TP 2, where kvreg takes 2.04 (vllm#21429 at TP 4)
    assert row["kv_gib_logged"] - row["kv_gib_predicted"] == pytest.approx(
        (non_torch / 2**30 - 1.38) + (weights / 2**30 - 74.28) + (activation / 2**30 - 5.58), abs=0.01)


def test_vllms_mla_latent_and_pipeline_stages_from_the_gpu_alone(table):
    """DeepSeek-V2-Lite at TP 2 x PP 2 on four L4s (vllm#20665's reproducer, a build of the day after v0.9.2): stage 0
    holds the embeddings and 14 layers (the dense one and 13 with experts), stage 1 13 layers, the lm_head and the
    sampler; each sizes its own pool and the engine keeps stage 0's fewer blocks."""
    [row] = [r for r in table if r["file"] == "vllm-pr20665-deepseek-v2-lite-l4-tp2-pp2.log"]
    requested = round(22.03 * 2**30) * 0.9  # the L4's 22.03 GiB at the default utilization
    vocab = 102_400 * 2_048 * 2  # one vocabulary matrix, 16-bit
    layers = 15.7e9 * 2 - 2 * vocab  # the decoder layers of the replica
    experts = layers * (26 * 64 * 3 * 2_048 * 1_408) / (15.7e9 - 2 * 102_400 * 2_048)  # their experts' share
    routers = 26 * 64 * 2_048 * (2 - 2 / 2) / 2  # whole on both TP ranks, half of them on each stage
    rope = 163_840 * 64 * 2  # RoPE's table on every GPU: 163,840 positions x the 64-element rope part of a head
    stage0 = (14 * (layers - experts) / 27 + 13 * experts / 26 + vocab) / 2 + routers + rope  # 7.35 GiB
    forward = 2_048 * (3 * 10_944 + 3 * 2_048) * 2  # the L4's 2,048 batched tokens through the dense MLP
    pool0 = requested - forward - round(0.25 * 2**30) - stage0  # PCIe only: no NCCL buffers counted
    assert row["kv_gib_predicted"] == pytest.approx(pool0 / 2**30, rel=1e-9)  # 12.09 GiB for the 12.13 logged
    cell = 14 * 576 * 2  # a token on stage 0: 14 layers of one 576-element bf16 latent, not divided by TP
    assert row["tokens_predicted"] == int(pool0 // (16 * cell)) * 16 == 804_304  # the log: 807,792
    assert (row["kv_gib_logged"], row["tokens_logged"]) == (12.13, 807_792)  # stage 0's line, not stage 1's 11.33
    assert row["tokens_error"] == pytest.approx(804_304 / 807_792 - 1) and abs(row["tokens_error"]) < 0.005  # -0.43%


def test_a_moe_model_over_two_nodes_of_pipeline_stages(table):
    """Qwen3-30B-A3B-Instruct-2507 (bf16) at TP 4 x PP 2 on two Isambard-AI nodes of GH200s (95.00 GiB to CUDA), vLLM 0.10.1 with
    vllm bench throughput's 16,384 batched tokens: each stage printed its pool, and the last, which samples, has
    fewer tokens (70.58 GiB, 6,167,536) than the first (76.15 GiB, 6,654,432)."""
    [row] = [r for r in table if r["file"] == "vllm-rwood-qwen3-30b-a3b-gh200-tp4-pp2.log"]
    requested = round(95.00 * 2**30) * 0.9
    vocab = 151_936 * 2_048 * 2  # one vocabulary matrix
    layers = 30_532_134_912 * 2 - 2 * vocab  # the decoder layers, all 48 with experts: 24 a stage
    routers = 48 * 128 * 2_048 * (2 - 2 / 4) / 2
    rope = 262_144 * 128 * 2  # RoPE's cos/sin table, whole on every GPU: the 2507 release's 262,144 positions
    # vLLM's qwen3_moe.py builds the embeddings and the lm_head on every stage, not one on each edge stage
    last = (24 * layers / 48 + 2 * vocab) / 4 + routers + rope  # 7.33 GiB; the log: 7.3272
    sampler = 16_384 * 2_048 * 2 + 1_024 * 151_936 * 38  # 1,024 rows of 38 B logits beside the hidden states
    non_torch = round(0.25 * 2**30) + round(1.79 * 2**30)  # v0.10, NVLink within the node
    pool = requested - sampler - non_torch - last
    assert last / 2**30 == pytest.approx(7.3272, abs=0.0025)  # 7.3250
    assert row["kv_gib_predicted"] == pytest.approx(pool / 2**30, rel=1e-9)  # 70.57 GiB for the 70.58 logged
    page = 16 * 24 * 1 * 128 * 2 * 2  # a block of the stage: 24 layers x 1 KV head a GPU x 128 x K and V x 2 B
    assert row["tokens_predicted"] == int(pool // page) * 16 == 6_166_176  # the log: 6,167,536 (-0.02%)
    assert row["kv_gib_logged"] == 70.58 and row["tokens_logged"] == 6_167_536


def test_the_same_checkpoint_at_tp4_without_a_connector(table):
    """vllm#21429's 'Before' log: Qwen3-235B-A22B-FP8 at TP 4, utilization 0.5, on 139.72 GiB Hopper GPUs (kvreg's H200
    row, 139.81 GiB): 55.13 GiB of weights, 5.62 of activation, 2.04 of non-torch memory, 7.07 of KV cache."""
    [row] = [r for r in table if r["file"] == "vllm-pr21429-qwen3-235b-fp8-141gb-tp4.log"]
    rope = 40_960 * 128 * 2  # RoPE's cos/sin table, whole on every GPU
    weights = (235e9 * 1 + 2 * 151_936 * 4_096 * (2 - 1)) / 4 + 94 * 128 * 4_096 * (2 - 1 / 4) + rope
    assert weights / 2**30 == pytest.approx(55.10, abs=0.005)
    activation = 8_192 * 4_096 * 2 + 1_024 * 151_936 * 38  # 5.57 GiB
    kv = 150_119_844_413 * 0.5 - weights - activation - round(0.25 * 2**30) - round(1.79 * 2**30)
    assert row["kv_gib_predicted"] == pytest.approx(kv / 2**30, rel=1e-12)  # 7.20 GiB
    assert row["kv_gib_logged"] == 7.07 and row["kv_error"] == pytest.approx(kv / 2**30 / 7.07 - 1)


def test_llm_ds_h100_measurements_are_rows_from_the_gpu_alone(bench, table):
    """llm-d's table of vLLM v0.11.0 runs on an H100 (79.18 GiB, utilization 0.9): each row adds up, and kvreg
    predicts its KV memory from the GPU alone."""
    [row] = [r for r in table if r["file"] == "llm-d-empirical-vllm-memory-results.md (Llama-3.1-8B)"]
    assert (row["release"], row["kv_gib_logged"]) == ("0.11.0", 51.38)  # 71.26 - 14.99 - 4.76 - 0.13
    h100 = 85_029_615_043  # the catalog's 79.19 GiB
    # the sampler warm-up (1,024 x 128,256 logits of 38 B beside 8,192 hidden states) outweighs the MLP's 0.78 GiB
    activation = max(8192 * (3 * 14_336 + 3 * 4_096) * 2, 8192 * 4_096 * 2 + 1024 * 128_256 * 38)
    rope = 131_072 * 128 * 2  # RoPE's cos/sin table: 131,072 positions x 128, in bf16
    predicted = h100 * 0.9 - 8.05e9 * 2 - rope - activation - round(0.13 * 2**30)  # the catalog: 8.05e9 params; v0.11
    assert row["kv_gib_predicted"] == pytest.approx(predicted / 2**30, rel=1e-12)  # 51.41 GiB, +0.05%
    manifest = bench.load_manifest()
    [entry] = [m for m in manifest["measurement"] if m["summary_row"] == "Llama-3.1-8B"]
    broken = {**entry, "summary_row": "gpt-oss-120b (MoE)"}  # 71.26 - 64.38 - 7.38 - 0.13 is not 3.33
    with pytest.raises(ValueError, match="gpt-oss-120b \\(MoE\\) row does not add up"):
        bench.measurement_log(broken)
    means = bench.mean_errors(table)
    assert means["vllm", "dense", "kv_cache_memory"][1] == 24  # nineteen logs and five of llm-d's rows


def test_vllms_v2_model_runner_warms_its_sampler_up_lighter(table):
    """Qwen1.5-MoE-A2.7B at TP 2 (expert parallel) on two RTX 4090s, vLLM 0.25.1 (lyell0710/vllmExperience): from
    v0.24 vLLM runs Qwen2MoeForCausalLM on its V2 model runner, whose sampler warm-up holds the model-dtype logits and
    their fp32 copy, 6 B a logit, not V1's 24; it profiles no CUDA graphs."""
    [row] = [r for r in table if r["file"] == "vllm-lyell-qwen15-moe-4090-tp2-v0251.log"]
    requested = 25_383_256_719 * 0.88  # the catalog's RTX 4090 (23.64 GiB reported) at the run's utilization
    rope = 32_768 * 128 * 2  # RoPE's cos/sin table, whole on each GPU
    routers = 24 * 60 * 2_048 * (2 - 2 / 2)  # the 24 routers whole on both GPUs, half of them counted in the split
    weights = 14_315_784_192 * 2 / 2 + routers + rope  # 13.34 GiB; the log: 13.39
    # the 4090's small defaults: 2,048 batched tokens, 256 rows of 151,936 logits at 6 B beside the hidden states,
    # which outweigh the forward pass through 4 experts of 1,408 and the shared expert of 5,632
    forward = 2_048 * (3 * 11_264 + 2 * 2_048) * 2
    sampler = 2_048 * 2_048 * 2 + 256 * 151_936 * 6
    assert (forward, sampler) == (155_189_248, 241_762_304)
    non_torch = round(0.13 * 2**30)  # from v0.11, over PCIe: no NCCL buffers counted
    kv = requested - weights - sampler - non_torch
    assert row["kv_gib_predicted"] == pytest.approx(kv / 2**30, rel=1e-9)  # 7.10 GiB for the 6.97 logged (+1.9%)
    block = 16 * 24 * 8 * 128 * 2 * 2  # 16 tokens x 24 layers x 8 KV heads a GPU x 128 x K and V x 2 B
    assert row["tokens_predicted"] == int(kv // block) * 16 == 77_600  # the log: 76,160
    # on V1's sampler (24 B a logit) the row would be 0.65 GiB lower, -7.4%
    v1 = kv - 256 * 151_936 * (24 - 6)
    assert v1 / 2**30 / 6.97 - 1 == pytest.approx(-0.074, abs=0.001)


def test_a_v021_row_takes_the_cuda_graphs_its_log_estimated(bench, table):
    """Qwen3-30B-A3B-FP8 at TP 2 on the same RTX 4090s, vLLM 0.25.1 on its V1 model runner: the KV budget loses the
    1.27 GiB of CUDA graphs vLLM estimated, which kvreg does not estimate; the row takes that estimate from the log
    and is its own family, so the GPU-alone families are not flattered by it."""
    [row] = [r for r in table if r["file"] == "vllm-lyell-qwen3-30b-fp8-4090-tp2-v0251.log"]
    requested = 25_383_256_719 * 0.88
    vocab = 151_936 * 2_048
    rope = 40_960 * 128 * 2
    routers = 48 * 128 * 2_048 * (2 - 1 / 2)
    weights = ((30_532_134_912 - 2 * vocab) * 1 + 2 * vocab * 2) / 2 + routers + rope  # 14.53 GiB; the log: 14.54
    sampler = 2_048 * 2_048 * 2 + 256 * 151_936 * 24  # V1's FlashInfer sampler from v0.21
    kv = requested - weights - sampler - round(0.13 * 2**30) - round(1.27 * 2**30)
    assert row["kv_gib_predicted"] == pytest.approx(kv / 2**30, rel=1e-9)  # 3.99 GiB for the 4.09 logged
    assert row["kv_error"] == pytest.approx(kv / 2**30 / 4.09 - 1)  # -2.4%
    means = bench.mean_errors(table)
    assert means["vllm", "moe (CUDA graphs logged)", "kv_cache_memory"][1] == 3  # with the A100 v0.26.1 and H100 v0.22.1 runs
    assert means["vllm", "moe", "kv_cache_memory"][1] == 9  # not one of the GPU-alone rows


def test_a_t4_runs_v0_and_its_sampler_warm_up_is_the_peak(table):
    """Llama-3.2-3B (fp16) on a Colab T4, vLLM 0.8.2 falling back to its V0 engine (compute capability 7.5), from the
    Hugging Face cookbook's notebook: 2,048 batched tokens, 192 sequences, utilization 0.8938626454842437. No constant
    was set from this run. Its terms as logged: weights 6.02 GiB, non-torch 0.05, activation 0.90, KV cache 6.22."""
    [row] = [r for r in table if r["file"] == "vllm-hfcookbook-llama32-3b-t4-v082-v0.log"]
    requested = round(14.74 * 2**30) * 0.8938626454842437  # 13.18 GiB, as logged
    weights = 3_212_743_680 * 2 + 131_072 * 128 * 2  # tied embeddings; RoPE's table: 6.0155 GiB, the log 6.0160
    # V0's profile run samples 192 prompts through the sort-based top-k/top-p after its forward pass: 38 B a logit
    # beside the 2,048 hidden states, far above the forward pass's 2,048 x (3 x 8,192 + 3 x 3,072) x 2 B
    activation = max(2_048 * (3 * 8_192 + 3 * 3_072) * 2, 2_048 * 3_072 * 2 + 192 * 128_256 * 38)
    assert activation == 2_048 * 3_072 * 2 + 192 * 128_256 * 38 == 948_338_688  # 0.88 GiB; the log 0.90
    non_torch = round(0.11 * 2**30)  # v0.7 to v0.10 on one GPU; the log 0.05
    kv = requested - weights - activation - non_torch
    assert row["kv_gib_predicted"] == pytest.approx(kv / 2**30, rel=1e-9)  # 6.17 GiB for the 6.22 logged
    block = 16 * 28 * 8 * 128 * 2 * 2  # 16 tokens x 28 layers x 8 KV heads x 128 x K and V x 2 B = 1,835,008 B
    assert row["tokens_predicted"] == int(kv // block) * 16 == 57_728
    assert row["tokens_logged"] == 3_637 * 16 == 58_192 and abs(row["tokens_error"]) < 0.01
    # kvreg's earlier V0 rule (the sum of the forward pass and 192 rows at 8 B) took 0.30 GiB, 0.58 GiB under the log
    earlier = 2_048 * (3 * 8_192 + 2 * 3_072) * 2 + 192 * 128_256 * 8
    assert (activation - earlier) / 2**30 == pytest.approx(0.58, abs=0.01)


def test_a_tp_group_over_two_nodes_counts_no_nvlink_buffers(table):
    """Qwen2-7B-Instruct at TP 2 over two nodes of one A100 40GB each (dennislee22/vLLM-benchmarking, vLLM 0.10.1.1
    over Ray, utilization 0.5, the sort-path sampler: 'FlashInfer is not available'): its NCCL runs over the network, so
    the GPU row says no fabric and no NVLink buffers are counted; priced as NVLink it would be 1.79 GiB short."""
    [row] = [r for r in table if r["file"] == "vllm-dennislee-qwen2-7b-a100-40gb-tp2-two-nodes-v01011.log"]
    requested = round(39.38 * 2**30) * 0.5
    weights = 7_615_616_512 * 2 / 2 + 32_768 * 128 * 2  # the bf16 parameters split over TP 2, RoPE's table whole
    activation = max(2_048 * (3 * 18_944 + 3 * 3_584) * 2, 2_048 * 3_584 * 2 + 256 * 152_064 * 38)
    non_torch = round(0.25 * 2**30)  # v0.10 at TP 2 with no fabric: no NCCL buffers
    kv = requested - weights - activation - non_torch
    assert row["kv_gib_predicted"] == pytest.approx(kv / 2**30, rel=1e-9)  # 10.95 GiB for the 11.03 logged
    block = 16 * 28 * 2 * 128 * 2 * 2  # 16 tokens x 28 layers x 2 KV heads a GPU x 128 x K and V x 2 B
    assert row["tokens_predicted"] == int(kv // block) * 16 == 410_000  # the log: 412,944
    # with NVLink's 1.79 GiB of NCCL buffers (the catalog's A100-40GB, fabric 1) the row would be -17%
    assert (kv - round(1.79 * 2**30)) / 2**30 / 11.03 - 1 == pytest.approx(-0.170, abs=0.002)


def test_utilization_moves_the_pool_by_its_share_of_the_memory(table):
    """The same A100 80GB, model and release at utilization 0.25 and 0.5 (dennislee22): the pools differ by 0.25 x the
    reported memory, in the log (24.83 - 5.01 = 19.82 GiB) and in kvreg (0.25 x 79.25 GiB); what both runs took besides
    weights and KV cache, 0.55 GiB, is FlashInfer's sampler warm-up (the log: 'Using FlashInfer for top-p & top-k
    sampling') and non-torch memory: kvreg's 0.52 GiB of warm-up at 14 B a logit and 0.11 GiB, where the sort path's
    1.39 GiB of warm-up left the row 17.8% short."""
    low, high = ([r for r in table if r["file"] == f"vllm-dennislee-qwen2-7b-a100-80gb-gmu{g}-v01011.log"][0]
                 for g in ("025", "05"))
    assert high["kv_gib_logged"] - low["kv_gib_logged"] == pytest.approx(19.82)
    assert (high["kv_gib_predicted"] - low["kv_gib_predicted"]) * 2**30 == pytest.approx(0.25 * 85_094_039_552)
    assert round(0.25 * 79.25 - 14.2488 - 5.01, 2) == round(0.5 * 79.25 - 14.2488 - 24.83, 2) == 0.55
    requested = 0.25 * 85_094_039_552  # 79.25 GiB reported
    weights = 7_615_616_512 * 2 + 32_768 * 128 * 2  # the bf16 parameters, RoPE's table
    warm_up = 2_048 * 3_584 * 2 + 256 * 152_064 * 14  # 256 rows of 14 B logits beside the hidden states
    assert warm_up == 559_677_440 > 2_048 * (3 * 18_944 + 3 * 3_584) * 2  # above the forward pass
    kv = requested - weights - warm_up - round(0.11 * 2**30)  # v0.10 on one GPU: 0.11 GiB of non-torch memory
    assert low["kv_gib_predicted"] == pytest.approx(kv / 2**30, rel=1e-9)  # 4.99 GiB for the 5.01 logged: -0.4%
    block = 16 * 28 * 4 * 128 * 2 * 2  # 16 tokens x 28 layers x 4 KV heads x 128 x K and V x 2 B
    assert low["tokens_predicted"] == int(kv // block) * 16 == 93_392  # the log: 93,872
    # at the sort path's 38 B a logit the warm-up is 256 x 152,064 x 24 B = 0.87 GiB more: -17.8%, as before
    assert (kv - 256 * 152_064 * 24) / 2**30 / 5.01 - 1 == pytest.approx(-0.178, abs=0.001)


def test_from_v025_every_dense_model_runs_on_the_v2_model_runner(table):
    """Qwen2-7B-Instruct (Qwen2ForCausalLM, on no V2 list) at TP 2 on the lyell0710 RTX 4090s, vLLM 0.25.1: the log says
    'Using V2 Model Runner' (v0.25.0's notes: MRv2 the default for all dense models, vllm#44443), so its sampler warm-up
    is V2's 6 B a logit, and the forward pass is the profile's peak. Held out: no constant was set from this run."""
    [row] = [r for r in table if r["file"] == "vllm-lyell-qwen2-7b-4090-tp2-v0251.log"]
    requested = 25_383_256_719 * 0.88  # the catalog's RTX 4090 (23.64 GiB) at the run's utilization
    weights = 7_615_616_512 * 2 / 2 + 32_768 * 128 * 2  # bf16 split over TP 2, RoPE's table whole: 7.10 GiB (7.16 logged)
    forward = 2_048 * (3 * 18_944 + 3 * 3_584) * 2  # 2,048 batched tokens through the MLP: 0.258 GiB
    v2_sampler = 2_048 * 3_584 * 2 + 256 * 152_064 * 6  # 256 rows at V2's 6 B beside the hidden states: 0.231 GiB
    assert (forward, v2_sampler) == (276_824_064, 248_250_368)
    kv = requested - weights - max(forward, v2_sampler) - round(0.13 * 2**30)
    assert row["kv_gib_predicted"] == pytest.approx(kv / 2**30, rel=1e-9)  # 13.31 GiB for the 12.93 logged: +3.0%
    assert row["tokens_predicted"] == int(kv // (16 * 28 * 2 * 128 * 2 * 2)) * 16 == 498_624
    # on V1's FlashInfer sampler (24 B a logit, what kvreg took before) the row was -1.9%: two errors that cancelled;
    # what is left, 0.63 GiB logged for activation and non-torch memory where V2's rule gives 0.39, is not a sampler
    v1 = requested - weights - (2_048 * 3_584 * 2 + 256 * 152_064 * 24) - round(0.13 * 2**30)
    assert v1 / 2**30 / 12.93 - 1 == pytest.approx(-0.0186, abs=0.0001)


def test_a_blackwell_card_and_v012_from_the_gpu_alone(table):
    """Qwen3-30B-A3B-Instruct-2507 (bf16) on one RTX PRO 6000 Blackwell Server Edition, vLLM 0.12.0, eager, utilization
    0.85 (2215860382/VedioSifter): the card's 94.97 GiB from the same repository's training log; 8,192 batched tokens
    and 1,024 sequences, whose sort-path sampler warm-up is the activation peak. Held out."""
    [row] = [r for r in table if r["file"] == "vllm-vediosifter-qwen3-30b-rtx-pro-6000-v0120.log"]
    requested = round(94.97 * 2**30) * 0.85
    weights = 30_532_134_912 * 2 + 262_144 * 128 * 2  # TP 1: every parameter in bf16, the 2507 release's RoPE table
    assert weights / 2**30 == pytest.approx(56.933, abs=0.0005)  # the log: 56.9342
    sampler = 8_192 * 2_048 * 2 + 1_024 * 151_936 * 38  # 5.54 GiB, above the forward pass's 0.375
    kv = requested - weights - sampler - round(0.13 * 2**30)
    assert row["kv_gib_predicted"] == pytest.approx(kv / 2**30, rel=1e-9)  # 18.12 GiB for the 18.15 logged
    assert row["tokens_predicted"] == int(kv // (16 * 48 * 4 * 128 * 2 * 2)) * 16 == 197_952  # the log: 198,288


def test_sglang_057_sizes_its_pool_from_the_memory_free_at_start(table):
    """SGLang v0.5.7, Llama-3.2-3B at mem_fraction_static 0.2 (udbhav-ag/SGLang_setup): rest_memory = memory free after
    the load - memory free at start x (1 - 0.2) = free at start x 0.2 - the weights' 6.13 GB (44.11 - 6.13 is the
    37.97 free after, to the printed rounding), and the cells are 28 layers x 8 KV heads x 128 x K and V x 2 B."""
    [row] = [r for r in table if r["file"] == "sglang-udbhav-llama32-3b-ada-v057.log"]
    rest = 44.11 * 0.2 - 6.13  # 2.692 GiB; SGLang printed K + V = 1.34 + 1.34 GB
    assert row["kv_gib_predicted"] == pytest.approx(rest, abs=1e-6)
    assert row["tokens_predicted"] == int(rest * 2**30 // (28 * 8 * 128 * 2 * 2)) == 25_203
    assert row["tokens_logged"] == 25_169 and abs(row["tokens_error"]) < 0.002
