"""`kvreg calibrate --log` and `kvreg plan calibrate NAME --log` on real public logs
(tests/data/logs, sources in MANIFEST.toml). Expected figures are worked by hand here from the
logged terms and docs/engine-rules.md."""

from __future__ import annotations

import json
import math
import pathlib

import pytest

GIB = 2**30
LOGS = pathlib.Path(__file__).parent / "data" / "logs"
H100_REPORTED = 85_029_615_043  # 79.19 GiB
CUT = str(LOGS / "vllm-pr10511-llama3-8b-tp2-cut.log")
TP1 = str(LOGS / "vllm-pr10511-llama3-8b-tp1.log")


def calibrate(kv, *args) -> dict:
    return json.loads(kv("calibrate", "--log", *args, "--format", "json").stdout)


def test_a_cut_log_still_predicts_its_kv_line(kv):
    """vllm#10511 at TP 2, cut before available_kv_cache_memory: the logged terms give the KV line."""
    # 79.22 GiB lies as near the A100 80GB's 79.25 as the H100's 79.19: the log cannot say which, so --gpu does
    tie = kv("calibrate", "--log", CUT, ok=False)
    assert tie.exit_code == 1 and "79.22 GiB matches several GPUs (A100-80GB, H100-SXM): give --gpu NAME" in tie.stderr
    r = calibrate(kv, CUT, "--gpu", "H100-SXM")
    assert (r["model"], r["gpu"], r["tp"], r["engine_version"], r["has_kv_line"]) == (
        "Llama-3-8B", "H100-SXM", 2, "0.6.5", False)  # model from meta-llama/Meta-Llama-3-8B
    pool = H100_REPORTED * 0.9 - round(7.48 * GIB) - round(1.26 * GIB) - round(3.58 * GIB)
    assert r["kv_cache_gib"] == pytest.approx(pool / GIB, rel=1e-12)  # 58.95 GiB
    per_token = 32 * (8 // 2) * (128 + 128) * 2  # 65,536 B at TP 2
    blocks = math.floor(pool / (16 * per_token))
    assert r["kv_cache_tokens"] == blocks * 16 == 965_840
    assert r["max_concurrency"] == pytest.approx(blocks / (8192 // 16))  # 8,192-token requests (the model's)
    terms = {t["term"]: t for t in r["terms"]}
    # from the GPU alone, v0.6.5 at TP 2: 1.79 GiB of context + 1.79 GiB of NCCL, as the log shows
    assert terms["non_torch"]["predicted"] == pytest.approx(2 * round(1.79 * GIB) / GIB)
    assert terms["non_torch"]["logged"] == 3.58
    rope = 8_192 * 128 * 2  # RoPE's cos/sin table, whole on every GPU (vLLM: the model's dtype): 2,097,152 B
    # 8 KV heads split evenly over TP 2: no head replicated
    assert terms["weights"]["predicted"] == pytest.approx((8.03e9 * 2 / 2 + rope) / GIB)  # 7.48 GiB
    assert terms["kv_cache_memory"]["logged"] is None


def test_a_whole_log_sets_predicted_against_logged(kv):
    r = calibrate(kv, TP1, "--gpu", "H100-SXM")
    kv_term = next(t for t in r["terms"] if t["term"] == "kv_cache_memory")
    # from the GPU alone: 79.19 GiB x 0.9 - 8.03e9 x 2 - RoPE's table - activations - 1.79 GiB (v0.6.5 at TP 1); the
    # activations are V0's sampler warm-up through the sort path (256 rows of 38 B beside 8,192 hidden states), which
    # outweighs the forward pass of 8,192 x (3 x 14,336 + 3 x 4,096) x 2 B: 1.22 GiB for the 1.26 logged
    activations = max(8192 * (3 * 14_336 + 3 * 4_096) * 2, 8192 * 4_096 * 2 + 256 * 128_256 * 38)
    rope = 8_192 * 128 * 2  # RoPE's cos/sin table, whole on every GPU (vLLM: the model's dtype)
    predicted = H100_REPORTED * 0.9 - 8.03e9 * 2 - rope - activations - round(1.79 * GIB)
    assert kv_term["predicted"] == pytest.approx(predicted / GIB, rel=1e-12)  # 53.30 GiB
    assert kv_term["logged"] == 53.29
    assert kv_term["error_fraction"] == pytest.approx((predicted / GIB - 53.29) / 53.29)  # +0.01%
    assert r["logged"]["kv_cache_gib"] == 53.29


def test_table_and_csv_outputs(kv):
    out = kv("calibrate", "--log", CUT, "--gpu", "H100-SXM").stdout
    assert "predicts: 58.95 GiB of KV cache, 965,840 tokens" in out
    csv_out = kv("calibrate", "--log", CUT, "--gpu", "H100-SXM", "--format", "csv").stdout.splitlines()
    assert csv_out[0] == "term,logged,predicted,error_fraction,with_logged_terms,logged_as"


def test_settings_the_log_lacks_are_options(kv, state):
    log = str(LOGS / "sglang-issue21348-qwen3-235b-fp8-h100-tp4.log")
    kv("gpu", "list")  # the registry exists before the state is taken
    before = state()
    result = kv("calibrate", "--log", log, ok=False)
    assert result.exit_code == 1 and "does not name its model" in result.stderr
    r = calibrate(kv, log, "--model", "Qwen3-235B-A22B", "--gpu", "H100-SXM", "--tp", "4",
                  "--mem-fraction-static", "0.93", "--weight-dtype", "fp8_e4m3")
    cell = 94 * 1 * 256 * 2  # 4 KV heads over TP 4
    # fp8 weights, and the bf16 embeddings and lm_head one byte a weight more: 2 x 151,936 x 4,096 x 1 B, and the
    # bf16 routers whole on every GPU: 94 x 128 x 4,096 x (2 - 1 / 4) B, and RoPE's cos/sin table, whole on every
    # GPU (SGLang: float32); 4 KV heads over TP 4, none replicated. The log has no "avail mem" lines, so the memory
    # in use before the load is kvreg's TP > 1 estimate, 1.85 GiB
    rope = 40_960 * 128 * 4  # 20,971,520 B
    weights = (235e9 * 1 + 2 * 151_936 * 4_096 * 1) / 4 + 94 * 128 * 4_096 * (2 - 1 / 4) + rope
    pool = (H100_REPORTED - round(1.85 * GIB)) * 0.93 - weights
    assert r["kv_cache_tokens"] == math.floor(pool / cell) == 375_286  # page 1; the log: 367,404
    bad = kv("calibrate", "--log", CUT, "--tp", "4", ok=False)
    assert bad.exit_code == 1 and "--tp 4 disagrees with the log, which shows 2" in bad.stderr
    assert state() == before


def test_plan_calibrate_from_a_log_keeps_the_measured_terms(kv, state):
    kv("plan", "add", "l3", "--model", "Llama-3-8B", "--gpu", "H100-SXM", "--gpus-per-node", "2", "--rule", "vllm",
       "--context", "8192", "--gpu-memory-utilization", "0.9")
    before = state()
    bad = kv("plan", "calibrate", "l3", "--log", CUT, ok=False)  # the log ran at TP 2
    assert bad.exit_code == 1 and "the log ran at TP 2 but plan 'l3' is at TP 1" in bad.stderr
    assert state() == before

    [row] = json.loads(kv("plan", "calibrate", "l3", "--log", TP1, "--format", "json").stdout)
    assert row["calibration_source"].startswith("vllm-pr10511-llama3-8b-tp1.log sha256:")
    assert (row["weights_measured_bytes"], row["activation_bytes"], row["non_torch_bytes"]) == (
        round(14.96 * GIB), round(1.26 * GIB), round(1.79 * GIB))
    assert row["measured_kv_cache_bytes"] == round(53.29 * GIB) and row["engine_version"] == "0.6.5"
    pool = H100_REPORTED * 0.9 - round(14.96 * GIB) - round(1.26 * GIB) - round(1.79 * GIB)
    assert row["kv_pool_gib_per_gpu"] == pytest.approx(pool / GIB, rel=1e-12)  # 53.26 GiB
    assert row["kv_cache_memory_error_fraction"] == pytest.approx((pool - round(53.29 * GIB)) / round(53.29 * GIB))

    # another utilization: the measured terms stay, the logged KV line (of 0.9) goes
    kv("plan", "set", "l3", "--gpu-memory-utilization", "0.95")
    [shown] = kv.json("plan", "show", "l3")
    assert shown["calibration_source"] is not None and shown["measured_kv_cache_bytes"] is None
    pool95 = H100_REPORTED * 0.95 - round(14.96 * GIB) - round(1.26 * GIB) - round(1.79 * GIB)
    assert shown["kv_pool_gib_per_gpu"] == pytest.approx(pool95 / GIB, rel=1e-12)
    report = kv("report", "--quarter", "2026Q4", "--out", str(pathlib.Path(kv.url.split("///")[-1]).parent / "rep")
                ) if kv.url.startswith("sqlite") else None
    if report is not None:
        text = next((pathlib.Path(kv.url.split("///")[-1]).parent / "rep").rglob("*.md")).read_text()
        assert "**Calibrated from a startup log:** vllm-pr10511-llama3-8b-tp1.log sha256:" in text

    # another layout: the log measured another deployment, its terms go
    kv("plan", "set", "l3", "--tp", "2")
    [shown] = kv.json("plan", "show", "l3")
    assert (shown["calibration_source"], shown["activation_bytes"], shown["weights_measured_bytes"]) == (None,) * 3


def test_a_pipeline_log_is_set_against_the_limiting_stage_and_an_untagged_build_names_no_release(kv):
    """vllm#20665: DeepSeek-V2-Lite at TP 2 x PP 2 on L4s, a vLLM checkout without tags (0.1.dev7548+gbaba038). Its
    stage 0 logged 12.13 GiB and stage 1 11.33; kvreg's limiting stage is stage 0 (14 layers against 13, the sampler
    on stage 1), so the 12.13 GiB line is the one recorded. The build is no release: a plan keeps its own. The L4 is
    the catalog's: 24 GiB reporting 22.03, compute capability 8.9, PCIe only."""
    l4 = kv.json("gpu", "show", "L4")[0]
    assert (l4["memory_bytes"], l4["reported_memory_bytes"], l4["compute_capability"], l4["fabric"]) == (
        24 * 2**30, round(22.03 * 2**30), 8.9, 0)
    kv("model", "add", "DeepSeek-V2-Lite", "--layers", "27", "--attention-heads", "16", "--kv-heads", "16",
       "--head-dim", "192", "--v-head-dim", "128", "--kv-lora-rank", "512", "--qk-rope-head-dim", "64", "--params-b",
       "15.7", "--active-params-b", "2.4", "--hidden-size", "2048", "--intermediate-size", "10944", "--vocab-size",
       "102400", "--untied-embeddings", "--experts", "64", "--expert-intermediate-size", "1408", "--moe-layers", "26",
       "--max-context", "163840")
    pp_log = str(LOGS / "vllm-pr20665-deepseek-v2-lite-l4-tp2-pp2.log")
    adhoc = kv("calibrate", "--log", pp_log, "--gpu", "L4", "--format", "json")
    assert "0.1.dev7548+gbaba038 is an untagged build, not a release: give --engine-version" in adhoc.stderr
    r = calibrate(kv, pp_log, "--gpu", "L4", "--engine-version", "0.9.2")
    terms = {t["term"]: t for t in r["terms"]}
    assert terms["kv_cache_memory"]["logged"] == 12.13  # stage 0's line, not the smallest (stage 1's 11.33)
    # predicted from the GPU alone, stage 0: the embeddings and 14 layers (the dense one and 13 with experts) of
    # 16-bit weights, the routers whole on both TP ranks, and RoPE's cos/sin table, whole on every GPU (vLLM: the
    # model's dtype) over the 64-element rope part of a head; MLA: no KV head replicated
    vocab = 102_400 * 2_048 * 2  # one vocabulary matrix
    layers = 15.7e9 * 2 - 2 * vocab  # the replica's decoder layers
    experts = layers * (26 * 64 * 3 * 2_048 * 1_408) / (15.7e9 - 2 * 102_400 * 2_048)  # their experts' share
    routers = 26 * 64 * 2_048 * (2 - 2 / 2) / 2
    rope = 163_840 * 64 * 2  # 20,971,520 B
    stage0 = (14 * (layers - experts) / 27 + 13 * experts / 26 + vocab) / 2 + routers + rope  # 7.35 GiB
    forward = 2_048 * (3 * 10_944 + 3 * 2_048) * 2  # the L4's 2,048 batched tokens through the dense MLP
    pool0 = round(22.03 * GIB) * 0.9 - forward - round(0.25 * GIB) - stage0  # 12.08 GiB; PCIe only: no NCCL
    cell = 14 * 576 * 2  # 14 layers of one 576-element bf16 latent, not divided by TP
    assert terms["kv_cache_tokens"]["logged"] == 807_792
    assert terms["kv_cache_tokens"]["predicted"] == int(pool0 // (16 * cell)) * 16 == 804_304
    kv("plan", "add", "lite", "--model", "DeepSeek-V2-Lite", "--gpu", "L4", "--tp", "2", "--pp", "2",
       "--gpus-per-node", "4", "--rule", "vllm", "--engine-version", "0.9.2", "--context", "1024")
    done = kv("plan", "calibrate", "lite", "--log", pp_log)
    assert "is an untagged build, not a release: the plan keeps its engine version" in done.stderr
    [row] = kv.json("plan", "show", "lite")
    assert (row["engine_version"], row["pp_limiting_stage"]) == ("0.9.2", 0)
    assert row["measured_kv_cache_bytes"] == round(12.13 * GIB) and row["measured_kv_cache_tokens"] == 807_792


def test_plan_calibrate_refuses_another_engine_or_model(kv, state):
    kv("plan", "add", "t", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM")
    kv("plan", "add", "v", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--rule", "vllm")
    before = state()
    r = kv("plan", "calibrate", "t", "--log", TP1, ok=False)
    assert "plan 't' follows the theoretical rule but the log is vllm's" in r.stderr
    r = kv("plan", "calibrate", "v", "--log", TP1, ok=False)
    assert "the log served Llama-3-8B but plan 'v' is for Llama-3.1-8B" in r.stderr
    r = kv("plan", "calibrate", "v", "--log", TP1, "--kv-cache-tokens", "5", ok=False)
    assert "give --log or the numbers" in r.stderr
    assert state() == before


def test_max_num_seqs_sizes_the_sampler_warm_up_and_the_running_request_term(kv):
    """vllm#10511's log shows no max_num_seqs: --max-num-seqs 128 says what the run had. v0.6.5 warms its sampler up
    with max_num_seqs rows x 128,256 vocabulary x 38 B beside the hidden states; at 128 rows that warm-up,
    67,108,864 + 623,837,184 B, falls under the forward pass, 8,192 x (3 x 14,336 + 3 x 4,096) x 2 = 905,969,664 B,
    which is then the peak; and the engine runs at most 128 requests."""
    r = calibrate(kv, TP1, "--gpu", "H100-SXM", "--max-num-seqs", "128")
    terms = {t["term"]: t for t in r["terms"]}
    activations = max(8192 * (3 * 14_336 + 3 * 4_096) * 2, 8192 * 4_096 * 2 + 128 * 128_256 * 38)
    assert activations == 905_969_664
    assert terms["activation_peak"]["predicted"] == pytest.approx(activations / GIB, rel=1e-12)
    rope = 8_192 * 128 * 2  # RoPE's cos/sin table, whole on every GPU (vLLM: the model's dtype)
    predicted = H100_REPORTED * 0.9 - 8.03e9 * 2 - rope - activations - round(1.79 * GIB)
    assert terms["kv_cache_memory"]["predicted"] == pytest.approx(predicted / GIB, rel=1e-12)  # 53.68 GiB
    assert (terms["max_running_requests"]["predicted"], terms["max_running_requests"]["logged"]) == (128, None)
    assert calibrate(kv, TP1, "--gpu", "H100-SXM")["terms"][-1] == {  # the default: 256 rows (before v0.8)
        "term": "max_running_requests", "logged_as": "max_running_requests (SGLang's summary line)", "logged": None,
        "predicted": 256, "with_logged_terms": 256, "error_fraction": None}


def test_plan_calibrate_keeps_the_logs_max_running_requests(kv):
    """ktransformers#1804 launched SGLang with --max-running-requests 10: the plan takes it, and runs at most 10
    requests per rank though its pool (sized with the log's 13.06 GiB of weights) holds more."""
    kv("plan", "add", "ds", "--model", "DeepSeek-V3", "--gpu", "H200", "--tp", "2", "--gpus-per-node", "8",
       "--rule", "sglang", "--context", "8192")
    kv("plan", "calibrate", "ds", "--log", str(LOGS / "sglang-kt1804-deepseek-v3-mla-tp2.log"))
    [row] = kv.json("plan", "show", "ds")
    assert (row["max_num_seqs"], row["weights_measured_bytes"]) == (10, round(13.06 * GIB))
    # and, as for any SGLang log, the memory in use before the load: the 139.81 GiB an H200 reports - (33.80 GiB
    # available after the weights + their 13.06 GiB)
    assert row["non_torch_bytes"] == round(150_119_844_413 - (33.80 + 13.06) * GIB)
    assert row["sequences_per_rank"] > 10
    assert row["max_running_requests"] == row["max_concurrency"] == 10


def test_cuda_graphs_come_off_the_budget_where_the_release_took_them(kv, state):
    """vllm#50722 (v0.21 on): its KV in use is the budget less weights, activation, non-torch memory and the CUDA
    graphs as vLLM estimated them before sizing it (1.32 GiB; the capture took 1.34). club-3090#1087: the budget less 'consumed memory' and activation, the graphs left out. kvreg's KV with
    the logged terms follows each, and plan calibrate keeps the graphs as the plan's --cuda-graph-memory."""
    kv("gpu", "add", "H100-79.33", "--memory", "80GiB", "--reported-memory", "79.33GiB")
    kv("gpu", "add", "5090-31.4", "--memory", "32GiB", "--reported-memory", "31.4GiB")
    new = calibrate(kv, str(LOGS / "vllm-issue50722-qwen35-35b-v021-tp4.log"), "--model", "Qwen3-Next-80B-A3B",
                    "--tp", "4")
    assert new["gpu"] == "H100-79.33"  # from the logged 79.33 GiB
    budget = round(79.33 * GIB) * 0.85
    taken = round(16.92 * GIB) + round(5.66 * GIB) + round(0.13 * GIB) + round(1.32 * GIB)
    assert new["kv_cache_gib"] == pytest.approx((budget - taken) / GIB, rel=1e-12)  # 43.40 GiB; in use 43.4
    terms = {t["term"]: t for t in new["terms"]}
    assert (terms["cuda_graph"]["logged"], terms["cuda_graph"]["predicted"]) == (1.32, 0)  # kvreg estimates none
    old = calibrate(kv, str(LOGS / "vllm-club3090-1087-qwen38-27b-fp8-5090-tp2.log"), "--model", "Qwen3-8B",
                    "--tp", "2")
    assert old["gpu"] == "5090-31.4"
    budget = round(31.4 * GIB) * 0.92
    taken = round(15.03 * GIB) + round(1.59 * GIB)  # consumed memory (weights + non-torch) and activation
    assert old["kv_cache_gib"] == pytest.approx((budget - taken) / GIB, rel=1e-12)  # 12.27 GiB; in use 12.26

    kv("plan", "add", "q", "--model", "Qwen3-Next-80B-A3B", "--gpu", "H100-79.33", "--tp", "4", "--rule", "vllm",
       "--gpu-memory-utilization", "0.85", "--context", "8192")
    [row] = json.loads(kv("plan", "calibrate", "q", "--log", str(LOGS / "vllm-issue50722-qwen35-35b-v021-tp4.log"),
                          "--format", "json").stdout)
    assert (row["cuda_graph_bytes"], row["activation_bytes"]) == (round(1.32 * GIB), round(5.66 * GIB))
    assert row["kv_pool_gib_per_gpu"] == pytest.approx(new["kv_cache_gib"], rel=1e-12)


def test_the_logs_sampler_backend_sizes_the_sampler_warm_up(kv):
    """dennislee22's vLLM 0.10.1.1 runs name their sampler: 'Using FlashInfer for top-p & top-k sampling' (FlashInfer
    installed) or 'FlashInfer is not available. Falling back to the PyTorch-native implementation'. The warm-up's 256
    rows (the A100's small defaults) of Qwen2's 152,064 logits hold 14 B each on FlashInfer's path (the model's
    logits 2, their fp32 copy 4, the top-k-masked logits 4 and their softmax 4) and 38 on the sort path, beside the
    2,048 x 3,584 x 2 B hidden states. Qwen2.5-7B stands in for Qwen2-7B-Instruct: the same layers, heads, widths and
    vocabulary (tests/data/hf-configs/Qwen__Qwen2.5-7B.json; Qwen/Qwen2-7B-Instruct's config.json)."""
    hidden = 2_048 * 3_584 * 2  # 14,680,064 B
    flashinfer = calibrate(kv, str(LOGS / "vllm-dennislee-qwen2-7b-a100-80gb-gmu025-v01011.log"), "--model",
                           "Qwen2.5-7B", "--gpu", "A100-80GB")
    assert flashinfer["logged"]["sampler"] == "flashinfer"
    terms = {t["term"]: t for t in flashinfer["terms"]}
    assert 256 * 152_064 * 14 == 544_997_376
    assert terms["activation_peak"]["predicted"] * GIB == hidden + 544_997_376 == 559_677_440  # 0.52 GiB
    torch = calibrate(kv, str(LOGS / "vllm-dennislee-qwen2-7b-a100-40gb-tp2-two-nodes-v01011.log"), "--model",
                      "Qwen2.5-7B", "--gpu", "A100-40GB")
    assert torch["logged"]["sampler"] == "torch"
    terms = {t["term"]: t for t in torch["terms"]}
    assert 256 * 152_064 * 38 == 1_479_278_592
    assert terms["activation_peak"]["predicted"] * GIB == hidden + 1_479_278_592 == 1_493_958_656  # 1.39 GiB

    kv("plan", "add", "q", "--model", "Qwen2.5-7B", "--gpu", "A100-80GB", "--rule", "vllm", "--context", "16384",
       "--gpus-per-node", "1")
    [row] = kv.json("plan", "calibrate", "q", "--log", str(LOGS / "vllm-dennislee-qwen2-7b-a100-80gb-gmu025-v01011.log"))
    [row] = kv.json("plan", "show", "q")
    assert (row["sampler"], row["sampler_bytes_per_logit"]) == ("flashinfer", 14)
    assert row["activation_peak_bytes_per_gpu"] == 559_677_440


# ---- the model and the GPU from the log itself (no --model, no --gpu)

H200_LOG = str(LOGS / "vllm-sungwonchae-qwen3-next-80b-h200-tp2.log")


def test_a_log_naming_its_model_path_and_device_needs_no_flags(kv):
    """The H200 log names its checkpoint (/data/models/Qwen3-Next-80B-A3B-Instruct: the catalog's Qwen3-Next-80B-A3B
    without -Instruct) and its GPU (the fused-MoE config it loads: device_name=NVIDIA_H200)."""
    r = calibrate(kv, H200_LOG)
    assert (r["model"], r["gpu"], r["tp"], r["engine_version"]) == ("Qwen3-Next-80B-A3B", "H200", 2, "0.10.2")
    assert r["logged"]["device_name"] == "NVIDIA H200"


def test_the_device_name_settles_a_reported_memory_two_gpus_share(kv, tmp_path):
    """79.22 GiB lies as near the A100 80GB's 79.25 as the H100's 79.19; a device-name line settles it. The cut
    log is vllm#10511's, with the `nvidia-smi -L` line an H100 SXM prints added (device_names.toml cites the string:
    vLLM's tuned configs for it are named device_name=NVIDIA_H100_80GB_HBM3)."""
    for device, gpu in (("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA A100-SXM4-80GB", "A100-80GB")):
        log = tmp_path / f"{gpu}.log"
        log.write_text(f"GPU 0: {device} (UUID: GPU-0)\n" + pathlib.Path(CUT).read_text())
        assert calibrate(kv, str(log))["gpu"] == gpu


def test_a_gpu_the_registry_lacks_names_the_command_that_adds_it(kv, tmp_path):
    """vllm#20665's L4 log names its GPU (device_name=NVIDIA_L4); the catalog has no L4: one line says what to add."""
    log = LOGS / "vllm-pr20665-deepseek-v2-lite-l4-tp2-pp2.log"
    if "L4" in {g["name"] for g in kv.json("gpu", "list")}:  # a catalog that lists it: a registry without it
        kv("gpu", "remove", "L4")
    result = kv("calibrate", "--log", str(log), "--model", "Llama-3.1-8B", ok=False)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: the log's GPU, NVIDIA L4, is not in the registry: add it with kvreg gpu add L4 --memory 24GiB "
        "(or give --gpu NAME)")
    kv("gpu", "add", "L4", "--memory", "24GiB", "--reported-memory", "22.03GiB")
    assert calibrate(kv, str(log), "--model", "Llama-3.1-8B")["gpu"] == "L4"


def test_a_name_the_table_does_not_list_falls_back_to_the_memory(kv, tmp_path):
    log = tmp_path / "other.log"
    log.write_text("GPU 0: NVIDIA GeForce RTX 2080 Ti\n" + pathlib.Path(CUT).read_text())
    result = kv("calibrate", "--log", str(log), ok=False)
    assert ("79.22 GiB matches several GPUs (A100-80GB, H100-SXM) (its GPU, NVIDIA GeForce RTX 2080 Ti, is not in "
            "kvreg/catalog/device_names.toml): give --gpu NAME") in result.stderr


@pytest.mark.parametrize("path, repo, checkpoint", [
    # vllm#10517's model path, a Hugging Face cache folder
    ("/mnt/models/models--meta-llama--llama-3-1-70b-instruct", "meta-llama/llama-3-1-70b-instruct",
     "llama-3-1-70b-instruct"),
    ("/root/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B-Instruct/snapshots/0e9e39f249a16976918f6564b8830bc894c89659",
     "meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B-Instruct"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
     "Qwen3-235B-A22B-Instruct-2507-FP8"),  # vllm-roethig's --model
    ("/models/Meta-Llama-3.1-405B-Instruct-FP8", None, "Meta-Llama-3.1-405B-Instruct-FP8"),  # vllm#6746's path
])
def test_what_a_model_path_says(path, repo, checkpoint):
    from kvreg.app.calibrate import log_model_ids

    assert log_model_ids(path) == (repo, checkpoint)


@pytest.mark.parametrize("path, model", [
    ("/mnt/models/models--meta-llama--llama-3-1-70b-instruct", "Llama-3.1-70B"),  # repo id, case and dots aside
    ("meta-llama/Meta-Llama-3-8B", "Llama-3-8B"),  # the repo id of the catalog row's config, meta-llama__Meta-...
    ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen3-235B-A22B"),  # -FP8, -2507, -Instruct taken off
    ("/models/Meta-Llama-3.1-405B-Instruct-FP8", "Llama-3.1-405B"),  # a local path: its last part, Meta- off
])
def test_the_registry_model_a_model_path_names(kv, path, model):
    from kvreg.app.access import open_registry
    from kvreg.app.calibrate import resolve_model
    from kvreg.core.enginelog import EngineLog

    kv("gpu", "list")
    with open_registry(kv.url).connect() as conn:
        assert resolve_model(conn, EngineLog(model=path), None) == model


def test_from_v021_the_kv_token_line_is_concurrency_times_context(kv):
    """vLLM's 'GPU KV cache size' line: num_blocks // kv_groups x the block's tokens up to v0.20, int(max_concurrency
    x max_model_len) from v0.21 (kvreg/figures/engine_defaults.py cites the code and the logs that date it).
    Qwen3-Next-80B-A3B (hybrid: 12 full-attention layers beside 36 linear ones) on H200s at TP 2, 32,768-token
    requests."""
    def row(version):
        return json.loads(kv("capacity", "--model", "Qwen3-Next-80B-A3B", "--gpu", "H200", "--rule", "vllm", "--tp",
                             "2", "--context", "32768", "--engine-version", version, "--format", "json").stdout)[0]

    old, new = row("0.20.0"), row("0.21.0")  # v0.21's other terms (its sampler, its non-torch memory) leave 25 blocks fewer
    assert (old["num_blocks"], old["kv_block_tokens"], old["blocks_per_request"]) == (8_121, 544, 64)
    assert old["kv_cache_tokens"] == 8_121 // 4 * 544 == 1_104_320  # four KV groups share the pool
    assert old["sequences_per_rank"] == 8_121 / 64 == 126.890625  # its concurrency line: 3.7 x the token line's
    assert (new["num_blocks"], new["blocks_per_request"]) == (8_096, 64)
    assert new["kv_cache_tokens"] == math.floor(8_096 / 64 * 32_768) == 4_145_152  # 126.5 sequences in token units
    assert new["sequences_per_rank"] == 126.5  # the line now agrees with the concurrency


def test_every_catalog_gpu_that_serves_on_cuda_or_rocm_has_its_device_names():
    """Each NVIDIA and AMD GPU of the catalog is listed in kvreg/catalog/device_names.toml (a GPU added to the
    catalog without its names would be told apart by its memory only), each name once, each entry with a source."""
    from kvreg.catalog import load_catalog, load_device_names

    table = load_device_names()
    listed = {g["name"] for g in table}
    catalog = {g["name"] for g in load_catalog()["gpus"] if g.get("vendor") in ("NVIDIA", "AMD")}
    assert catalog <= listed, catalog - listed
    names = [d.lower() for g in table for d in g["device_names"]]
    assert len(names) == len(set(names))
    assert all(g["source"] and g["memory"].endswith("GiB") for g in table)
    assert len(table) >= 35


def test_a_log_whose_gpu_reports_other_memory_than_the_row_says_so(kv, tmp_path):
    """vllm#10511's H100 logged 79.22 GiB; the catalog's H100-SXM reports 79.19: within 0.05 GiB, no note. The same
    log read as an A100 80GB (79.25) is within it too; an H200 (139.81) is not, and the note says what to do."""
    ok = kv("calibrate", "--log", CUT, "--gpu", "H100-SXM")
    assert "note:" not in ok.stderr
    far = kv("calibrate", "--log", CUT, "--gpu", "H200")
    assert ("note: the log's GPU reports 79.22 GiB where H200 reports 139.81 GiB: kvreg sizes from H200's (to follow "
            "the log, add a GPU with --reported-memory 79.22GiB and give --gpu)") in far.stderr


def test_plan_calibrate_notes_a_log_from_another_gpu(kv):
    """The H200 log (device_name=NVIDIA_H200) stored as an H100 plan's calibration: allowed, and said."""
    kv("plan", "add", "q", "--model", "Qwen3-Next-80B-A3B", "--gpu", "H100-SXM", "--tp", "2", "--rule", "vllm",
       "--gpus-per-node", "8")
    r = kv("plan", "calibrate", "q", "--log", H200_LOG)
    assert ("note: the log ran on NVIDIA H200 (H200) but plan 'q' is on H100-SXM: its measured terms are that GPU's"
            in r.stderr)
    kv("plan", "add", "h", "--model", "Qwen3-Next-80B-A3B", "--gpu", "H200", "--tp", "2", "--rule", "vllm",
       "--gpus-per-node", "8")
    assert "ran on" not in kv("plan", "calibrate", "h", "--log", H200_LOG).stderr


def test_a_log_naming_neither_model_nor_gpu_asks_for_both_in_one_line(kv):
    """vllm#21348's SGLang quote shows its KV line and nothing of the run: both flags are asked for at once."""
    r = kv("calibrate", "--log", str(LOGS / "sglang-issue21348-qwen3-235b-fp8-h100-tp4.log"), ok=False)
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines()[-1] == (
        "Error: the log does not name its model: give --model NAME (a registry model, see kvreg model list); the log "
        "does not show the GPU's memory (total_gpu_memory): give --gpu NAME (kvreg gpu list)")


def test_a_log_line_out_of_its_bounds_is_refused_and_nothing_is_written(kv, state, tmp_path):
    """The faradawn H200 log with its "GPU KV cache size: 868,080 tokens" edited to -868,080: plan calibrate checks
    the logged figures as declared (measured_kv_cache_tokens at least 0), in one line naming the log, and writes
    nothing, where the registry's CHECK used to end the command in a traceback."""
    text = (LOGS / "vllm-faradawn-llama3-8b-h200-v0112.log").read_text()
    assert "GPU KV cache size: 868,080 tokens" in text
    bad = tmp_path / "negative.log"
    bad.write_text(text.replace("GPU KV cache size: 868,080 tokens", "GPU KV cache size: -868,080 tokens"))
    kv("plan", "add", "cal", "--model", "Llama-3-8B", "--gpu", "H200", "--gpus-per-node", "1", "--rule", "vllm",
       "--context", "1K")
    before = state()
    r = kv("plan", "calibrate", "cal", "--log", bad, ok=False)
    assert r.exit_code == 1 and r.stderr.startswith("Error: negative.log sha256:")
    assert r.stderr.rstrip().endswith("the log's measured_kv_cache_tokens must be at least 0, not -868080")
    assert len(r.stderr.strip().splitlines()) == 1 and state() == before
