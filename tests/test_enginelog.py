"""The startup-log parser (kvreg.core.enginelog) on real public logs, vendored under tests/data/logs with
their sources in MANIFEST.toml. Every expected value is read off the log line it comes from."""

from __future__ import annotations

import pathlib
import tomllib

import pytest

from kvreg.core.enginelog import parse_log, read_log
from kvreg.core.errors import KvregError

LOGS = pathlib.Path(__file__).parent / "data" / "logs"


def log(name: str):
    return read_log(LOGS / name)[0]


def test_every_vendored_log_has_a_public_source_and_parses():
    manifest = tomllib.loads((LOGS / "MANIFEST.toml").read_text())
    files = {e["file"] for e in manifest["log"]}
    assert files == {p.name for p in LOGS.glob("*.log")}
    for entry in manifest["log"]:
        assert entry["source"].startswith("https://github.com/"), entry
        assert log(entry["file"]).engine == entry["engine"], entry["file"]


def test_vllm_v065_profile_table():
    """vllm#10511: the table v0.6.5 printed, one term a line."""
    r = log("vllm-pr10511-llama3-8b-tp1.log")
    assert (r.engine, r.format, r.model) == ("vllm", "vllm-v0.6.5", "meta-llama/Meta-Llama-3-8B")
    assert (r.total_gpu_memory_gib, r.gpu_memory_utilization, r.requested_gib) == (79.22, 0.9, 71.29)
    assert (r.weights_gib, r.non_torch_gib, r.activation_gib, r.kv_cache_gib) == (14.96, 1.79, 1.26, 53.29)
    assert r.kv_cache_tokens is None and r.max_concurrency is None and r.tp is None


def test_a_log_cut_before_its_kv_line_keeps_its_terms():
    r = log("vllm-pr10511-llama3-8b-tp2-cut.log")
    assert r.tp == 2 and not r.has_kv_line()
    assert (r.weights_gib, r.non_torch_gib, r.activation_gib) == (7.48, 3.58, 1.26)


def test_vllm_v064_one_line_profile_and_gpu_blocks():
    """vllm#10517: peak_torch_memory includes the weights; activation = 17.06 - 14.9888 (to 2 places)."""
    r = log("vllm-issue10517-llama31-8b-3090-20k.log")
    assert r.format == "vllm-v0.6.4"
    assert (r.total_gpu_memory_gib, r.weights_gib, r.non_torch_gib, r.kv_cache_gib) == (23.58, 14.9888, 0.35, 3.81)
    assert r.activation_gib == round(17.06 - 14.9888, 2) == 2.07
    assert (r.num_blocks, r.kv_cache_tokens) == (1952, 1952 * 16)
    assert (r.concurrency_tokens, r.max_concurrency) == (20000, 1.56)
    r29 = log("vllm-issue10517-llama31-8b-3090-29k.log")
    assert (r29.num_blocks, r29.kv_cache_tokens, r29.activation_gib) == (1478, 23_648, round(17.98 - 14.9888, 2))


def test_vllm_v0_one_line_terms_and_cuda_blocks():
    r = log("vllm-mellea-pr416-h100-v0.log")
    assert (r.format, r.total_gpu_memory_gib, r.gpu_memory_utilization, r.requested_gib) == ("vllm-v0", 79.19, 0.8,
                                                                                              63.35)
    assert (r.weights_gib, r.non_torch_gib, r.activation_gib, r.kv_cache_gib) == (1.12, 0.16, 0.23, 61.84)
    assert (r.num_blocks, r.kv_cache_tokens, r.max_concurrency, r.concurrency_tokens) == (36184, 578_944, 70.67, 8192)
    assert r.cuda_graph_gib == 0.13  # "Graph capturing finished in 2 secs, took 0.13 GiB"
    q = log("vllm-issue12529-qwen-1.5b-v0.log")  # "Model loading took 3.3414 GB" (V0's GB are GiB)
    assert (q.weights_gib, q.kv_cache_gib, q.num_blocks, q.max_concurrency) == (3.3414, 2.20, 5148, 41.18)


def test_several_workers_print_the_first_profile():
    r = log("vllm-issue16570-a100-40gb-tp4.log")
    assert (r.total_gpu_memory_gib, r.weights_gib, r.non_torch_gib, r.kv_cache_gib) == (39.38, 34.43, 0.34, 0.13)
    w = log("vllm-pr14447-tp8-workers.log")
    assert (w.gpu_memory_utilization, w.weights_gib, w.kv_cache_gib) == (0.99, 21.21, 1.57)


def test_vllm_v1_lines():
    r = log("vllm-issue17469-qwen3-v085-tp4.log")
    assert (r.format, r.weights_gib, r.kv_cache_tokens, r.concurrency_tokens, r.max_concurrency) == (
        "vllm-v1", 14.2474, 198_784, 8192, 24.27)
    assert r.kv_cache_tokens / 8192 == pytest.approx(24.27, abs=0.005)  # the two lines agree
    c = log("vllm-club3090-612-qwen36-35b-5090.log")
    assert (c.kv_cache_gib, c.kv_cache_tokens, c.max_concurrency, c.concurrency_tokens) == (5.98, 567_978, 4.33, 131072)
    assert (c.max_model_len, c.max_num_batched_tokens, c.kv_cache_dtype) == (131072, 8192, "fp8")
    assert c.max_num_seqs == 1  # its non-default args: 'max_num_seqs': 1
    g = log("vllm-issue23278-gpt-oss-120b-h100.log")
    assert (g.weights_gib, g.kv_cache_gib) == (65.9651, -2.14)


def test_sglang_lines():
    r = log("sglang-pr18263-qwen3-30b-a3b-mi.log")
    assert (r.engine, r.architecture, r.mem_fraction_static) == ("sglang", "Qwen3MoeForCausalLM", 0.911)
    assert (r.avail_after_weights_gib, r.weights_gib) == (230.20, 56.98)
    assert (r.kv_cache_tokens, r.kv_cache_gib) == (1_669_816, 76.44 + 76.44)  # K size + V size
    # K size = tokens x 48 layers x 4 KV heads x 128 x 2 B, SGLang's "GB" being GiB
    assert 1_669_816 * 48 * 4 * 128 * 2 / 2**30 == pytest.approx(76.44, abs=0.005)
    s = log("sglang-issue21348-qwen3-235b-fp8-h100-tp4.log")
    assert (s.kv_cache_tokens, s.kv_cache_gib) == (367_404, 16.46)
    t = log("sglang-issue29575-max-total-num-tokens.log")
    assert (t.kv_cache_tokens, t.max_model_len) == (2_086_558, 256000)
    # the summary line's max_running_requests=33 is what SGLang resolved, not a setting it was given
    assert (t.max_running_requests, t.max_num_seqs) == (33, None)


def test_sglang_mla_one_latent_pool():
    """ktransformers#1804: an MLA model's pool is one latent tensor, and SGLang prints one "KV size"."""
    r = log("sglang-kt1804-deepseek-v3-mla-tp2.log")
    assert (r.engine, r.architecture, r.tp) == ("sglang", "DeepseekV3ForCausalLM", 2)
    assert r.model == "/home/models/DeepSeekV3"
    assert (r.mem_fraction_static, r.avail_after_weights_gib, r.weights_gib) == (0.9, 33.80, 13.06)
    assert (r.kv_cache_tokens, r.kv_cache_gib) == (10000, 0.65)
    assert (r.max_num_seqs, r.max_running_requests) == (10, None)  # launched with --max-running-requests 10
    # KV size = tokens x 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B, in SGLang's GiB "GB"
    assert 10000 * 61 * (512 + 64) * 2 / 2**30 == pytest.approx(0.65, abs=0.005)


def test_sglang_mla_and_hybrid_state_logs():
    """An MLA model's one KV size at TP 8, and a hybrid model's state slots beside its cells."""
    k = log("sglang-amd-kimi-k25-mla-mi355x-tp8.log")
    assert (k.engine, k.architecture) == ("sglang", "KimiK25ForConditionalGeneration")
    assert (k.avail_before_load_gib, k.avail_after_weights_gib, k.weights_gib) == (283.56, 209.98, 73.58)
    assert (k.kv_cache_tokens, k.kv_cache_gib) == (2_454_421, 160.63)
    # KV size = tokens x 61 layers x (512 + 64) x 2 B, in SGLang's GiB "GB"
    assert 2_454_421 * 61 * 576 * 2 / 2**30 == pytest.approx(160.63, abs=0.005)
    q = log("sglang-kt1870-qwen35-397b-hybrid-4090-tp2.log")
    assert (q.engine, q.architecture) == ("sglang", "Qwen3_5MoeForConditionalGeneration")
    assert (q.avail_before_load_gib, q.avail_after_weights_gib, q.weights_gib) == (None, 19.08, 3.76)
    assert (q.state_slots, q.kv_cache_tokens, q.kv_cache_gib) == (82, 580_364, 4.15 + 4.15)
    assert (q.max_running_requests, q.max_model_len) == (1, 8192)
    # ssm_state 7.29 GB = (82 + 1 padding) slots x 45 layers x 64 value heads x 128 x 128 x 4 B / TP 2
    assert 83 * 45 * 64 * 128 * 128 * 4 / 2 / 2**30 == pytest.approx(7.29, abs=0.01)


def test_vllm_v1s_summary_line_with_and_without_cuda_graphs_in_the_budget():
    """From v0.11 vLLM sums its profile up in one line ("Free memory on device ... Actual usage is ..."); some
    releases print weights and non-torch memory as one "consumed memory"."""
    a = log("vllm-issue50722-qwen35-35b-v021-tp4.log")
    assert (a.engine, a.format, a.total_gpu_memory_gib, a.gpu_memory_utilization, a.requested_gib) == (
        "vllm", "vllm-v1", 79.33, 0.85, 67.43)
    assert (a.weights_gib, a.activation_gib, a.non_torch_gib, a.cuda_graph_gib, a.consumed_gib) == (
        16.92, 5.66, 0.13, 1.34, None)
    assert a.kv_cache_gib == 43.4  # "Current kv cache memory in use is 43.4 GiB"
    c = log("vllm-club3090-1087-qwen38-27b-fp8-5090-tp2.log")
    assert (c.total_gpu_memory_gib, c.gpu_memory_utilization, c.requested_gib) == (31.4, 0.92, 28.88)
    assert (c.consumed_gib, c.weights_gib, c.non_torch_gib, c.activation_gib, c.cuda_graph_gib) == (
        15.03, None, None, 1.59, 0.09)
    assert c.kv_cache_gib == 12.26
    assert parse_log("CUDA graph memory profiling is enabled (default since v0.21.0).\n"
                     "Model loading took 16.92 GiB").cuda_graph_in_budget is True


def test_v1s_debug_profile_of_v092_to_v0101_and_v0102s_summary_line():
    """vLLM v0.9.2 to v0.10.1 print the V1 profile at DEBUG (VLLM_LOGGING_LEVEL=DEBUG), as vllm#21429's 'Before'
    log does; v0.10.2 already prints the one-line summary at INFO."""
    a = log("vllm-pr21429-qwen3-235b-fp8-141gb-tp4.log")
    assert (a.engine, a.format, a.requested_gib) == ("vllm", "vllm-v1", 69.86)  # "requested GPU memory: 69.86 GiB"
    assert (a.weights_gib, a.activation_gib, a.non_torch_gib, a.kv_cache_gib) == (55.13, 5.62, 2.04, 7.07)
    assert a.gpu_memory_utilization is None and a.total_gpu_memory_gib is None  # the log names neither
    after = parse_log("DEBUG 09-28 21:12:43 [v1/worker/gpu_worker.py:284] Initial free memory: 23.08 GiB; Requested "
                      "memory: 0.80 (util), 18.82 GiB")  # PR 21429's own wording
    assert (after.gpu_memory_utilization, after.requested_gib) == (0.8, 18.82)
    b = log("vllm-sungwonchae-qwen3-next-80b-h200-tp2.log")
    assert (b.engine_version, b.tp, b.max_model_len, b.max_num_batched_tokens) == ("0.10.2", 2, 262_144, 8_192)
    assert (b.total_gpu_memory_gib, b.gpu_memory_utilization, b.requested_gib) == (139.81, 0.9, 125.83)
    # the weights from "Model loading took 74.2812 GiB", the rest from the summary line
    assert (b.weights_gib, b.activation_gib, b.non_torch_gib, b.cuda_graph_gib) == (74.2812, 5.58, 1.38, 2.37)
    assert (b.kv_cache_gib, b.kv_cache_tokens, b.max_concurrency) == (44.59, 973_760, 14.77)


def test_each_pipeline_stage_logs_its_own_pool():
    """At PP > 1 every stage sizes its own KV cache: vllm#20665's TP 2 x PP 2 workers 0-1 (stage 0) logged 12.13 GiB
    and 2-3 (stage 1) 11.33 GiB; the engine printed the tokens of the fewer blocks."""
    a = log("vllm-pr20665-deepseek-v2-lite-l4-tp2-pp2.log")
    assert (a.tp, a.pp, a.max_model_len, a.engine_version) == (2, 2, 1024, "0.1.dev7548+gbaba038")
    assert a.kv_cache_gib_by_stage == {0: 12.13, 1: 11.33}
    assert (a.kv_cache_gib, a.kv_cache_tokens, a.max_concurrency) == (11.33, 807_792, 788.86)
    named = parse_log("--pipeline-parallel-size 2 --tensor-parallel-size 4\n"
                      "(Worker_PP1_TP3 pid=7) INFO [gpu_worker.py:298] Available KV cache memory: 70.58 GiB\n"
                      "(Worker_PP0_TP0 pid=5) INFO [gpu_worker.py:298] Available KV cache memory: 76.15 GiB\n")
    assert named.kv_cache_gib_by_stage == {0: 76.15, 1: 70.58}
    assert log("vllm-roethig-qwen3-235b-fp8-l40s-tp8.log").kv_cache_gib_by_stage is None  # PP 1


def test_not_a_startup_log_is_one_error(tmp_path):
    with pytest.raises(KvregError, match="does not look like a vLLM or SGLang startup log"):
        parse_log("hello\nworld\n")
    with pytest.raises(KvregError, match="cannot read .*missing.log: No such file"):
        read_log(tmp_path / "missing.log")


def test_the_running_request_settings_and_sglangs_resolved_value():
    """vLLM's --max-num-seqs (flag or config dict), SGLang's --max-running-requests (flag or its ServerArgs dump,
    where None is no setting), and the value SGLang resolved on its summary line, kept apart."""
    assert parse_log("vllm serve m --max-num-seqs 64\nModel loading took 14.99 GiB").max_num_seqs == 64
    args = ("server_args=ServerArgs(model_path='m', tp_size=1, max_running_requests=None, max_total_tokens=None)\n"
            "max_total_num_tokens=434176, chunked_prefill_size=8192, max_prefill_tokens=16384,"
            " max_running_requests=4096, context_len=131072")
    r = parse_log(args)
    assert (r.engine, r.max_num_seqs, r.max_running_requests, r.kv_cache_tokens) == ("sglang", None, 4096, 434_176)
    given = parse_log(args.replace("max_running_requests=None", "max_running_requests=256")
                      .replace("max_running_requests=4096", "max_running_requests=256"))
    assert (given.max_num_seqs, given.max_running_requests) == (256, 256)
    # a hybrid model's state slots, as SGLang's kv_cache_configurator prints them
    mamba = parse_log("Mamba Cache is allocated. max_mamba_cache_size: 788, conv_state size: 0.05GB, ssm_state size:"
                      " 14.14GB\nKV Cache is allocated. #tokens: 1381132, K size: 7.90 GB, V size: 7.90 GB")
    assert (mamba.engine, mamba.state_slots, mamba.kv_cache_tokens) == ("sglang", 788, 1_381_132)


def test_each_worker_prints_its_own_kv_lines_and_the_smallest_is_kept():
    """An 8 x L40S run of v0.10.2: the workers printed 10.64 to 10.68 GiB of KV memory, then 237,344 to 238,256 tokens
    (7.24x to 7.27x); vLLM sized every worker to the smallest, 14,834 blocks of 16 = 237,344 tokens."""
    r = log("vllm-roethig-qwen3-235b-fp8-l40s-tp8.log")
    assert (r.engine_version, r.tp, r.max_model_len, r.max_num_batched_tokens) == ("0.10.2", 8, 32768, 2048)
    assert (r.kv_cache_gib, r.kv_cache_tokens, r.max_concurrency) == (10.64, 14_834 * 16, 7.24)
    # "Model loading took 27.7183 GiB" comes before the summary line's 27.72
    assert (r.weights_gib, r.activation_gib, r.non_torch_gib, r.cuda_graph_gib) == (27.7183, 1.4, 0.21, 3.45)
    assert (r.total_gpu_memory_gib, r.gpu_memory_utilization, r.requested_gib) == (44.42, 0.9, 39.98)


def test_the_utilization_a_pre_v021_log_names_in_its_cuda_graph_hint():
    """vLLM 0.19.1 on an A100 40GB prints no utilization line of its own; its hint does ("increase
    --gpu-memory-utilization from 0.9000 to 0.9306")."""
    r = log("vllm-durango-qwen3-coder-30b-fp8-a100-40gb.log")
    assert (r.engine_version, r.gpu_memory_utilization) == ("0.19.1", 0.9)
    assert r.model == "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8"
    assert (r.weights_gib, r.kv_cache_gib, r.kv_cache_tokens, r.max_concurrency) == (29.54, 5.03, 54_912, 1.68)
    assert r.cuda_graph_in_budget is None  # profiled, not taken from the budget before v0.21


def test_a_v0_mla_log_and_sglangs_memory_before_the_load():
    r = log("vllm-flowasbrook-deepseek-r1-h200-tp8-v073.log")
    assert (r.format, r.tp, r.total_gpu_memory_gib, r.requested_gib) == ("vllm-v0", 8, 139.81, 118.84)
    assert (r.weights_gib, r.non_torch_gib, r.activation_gib, r.kv_cache_gib) == (83.88, 7.16, 6.37, 21.43)
    assert (r.num_blocks, r.kv_cache_tokens, r.max_concurrency) == (18_418, 18_418 * 16, 2.3)
    s = log("sglang-mystous-qwen3-30b-fp8-h100-tp1.log")
    assert (s.avail_before_load_gib, s.avail_after_weights_gib, s.weights_gib) == (78.48, 49.33, 29.15)
    assert (s.kv_cache_tokens, s.kv_cache_gib, s.kv_cache_dtype, s.max_running_requests) == (392_920, 35.98, "bfloat16",
                                                                                             4096)
    tp8 = log("sglang-mystous-deepseek-r1-kt-h100-tp8.log")
    assert tp8.avail_before_load_gib == 77.38  # TP0's line; six of the eight ranks printed 77.33


def test_a_v025_log_gives_its_cuda_graph_estimate_and_its_model_runner():
    """vLLM 0.25.1 on two RTX 4090s (lyell0710/vllmExperience). On its V1 model runner it estimates its CUDA graphs
    before sizing the KV cache and takes the estimate (1.27 GiB), not what the capture later took (1.21), from the
    budget; on its V2 model runner (Qwen1.5-MoE) it profiles none: the log shows the KV line and the capture line
    with no estimate between them."""
    from kvreg.app.calibrate import cuda_graph_in_budget, measured_terms

    v1 = log("vllm-lyell-qwen3-30b-fp8-4090-tp2-v0251.log")
    assert (v1.engine_version, v1.architecture, v1.tp, v1.gpu_memory_utilization) == (
        "0.25.1", "Qwen3MoeForCausalLM", 2, 0.88)
    assert (v1.cuda_graph_estimate_gib, v1.cuda_graph_gib, v1.budget_cuda_graph_gib) == (1.27, 1.21, 1.27)
    assert (v1.weights_gib, v1.kv_cache_gib, v1.kv_cache_tokens, v1.max_concurrency) == (14.54, 4.09, 89_248, 10.89)
    assert v1.cuda_graph_in_budget is True and cuda_graph_in_budget(v1, "0.25.1")
    assert measured_terms(v1, "0.25.1")["cuda_graph_bytes"] == round(1.27 * 2**30)
    # the non-default args line sets four fields and is listed once among the lines read
    assert len(v1.lines) == len(set(v1.lines))
    v2 = log("vllm-lyell-qwen15-moe-4090-tp2-v0251.log")
    assert (v2.architecture, v2.cuda_graph_estimate_gib, v2.cuda_graph_gib, v2.graphs_captured) == (
        "Qwen2MoeForCausalLM", None, 0.92, True)
    assert v2.cuda_graph_in_budget is None and not cuda_graph_in_budget(v2, "0.25.1")
    assert "cuda_graph_bytes" not in measured_terms(v2, "0.25.1")  # captured after the KV cache was sized
    # cut before the capture line, a v0.21+ log says nothing either way: the release decides
    cut = parse_log("\n".join(line for line in (LOGS / "vllm-lyell-qwen15-moe-4090-tp2-v0251.log").read_text()
                              .splitlines() if "Graph capturing" not in line))
    assert cut.graphs_captured is None and cuda_graph_in_budget(cut, "0.25.1")


def test_two_startups_appended_in_one_log_are_not_mixed():
    """Issue 45 item 8: two runs appended to one file gave version and weights from one run and the KV
    cache from the other. The last complete startup is read, and the log says which. The A100 run
    (v0.19.1, 71 lines: weights 29.54 GiB, 54,912 KV tokens) and the H200 run (v0.10.2: weights
    74.2812 GiB, 973,760 tokens), each as its own log file prints them, appended both ways."""
    a = (LOGS / "vllm-durango-qwen3-coder-30b-fp8-a100-40gb.log").read_text()
    b = (LOGS / "vllm-sungwonchae-qwen3-next-80b-h200-tp2.log").read_text()
    ab, ba = parse_log(a + "\n" + b), parse_log(b + "\n" + a)
    assert (ab.engine_version, ab.weights_gib, ab.kv_cache_tokens) == ("0.10.2", 74.2812, 973_760)
    assert (ba.engine_version, ba.weights_gib, ba.kv_cache_tokens) == ("0.19.1", 29.54, 54_912)
    assert ab.startup_note.startswith("the log holds 2 startups; read the last complete one, from line ")
    # The second run cut before its KV cache line: the first, complete, run is read whole.
    lines = b.splitlines()
    cut = "\n".join(lines[:next(i for i, ln in enumerate(lines) if "KV cache" in ln)])
    first = parse_log(a + "\n" + cut)
    assert (first.engine_version, first.weights_gib, first.kv_cache_tokens) == ("0.19.1", 29.54, 54_912)
    assert first.startup_note == "the log holds 2 startups; read the last complete one, from line 1"
    assert parse_log(a).startup_note is None


def test_a_long_hostile_line_parses_in_linear_time():
    """Issue 45 item 5: a rule `HEAD.*?REST` searched a line holding HEAD thousands of times from each,
    and `#?\\s*(?:GPU|cuda) blocks` from every blank: 176 KB took 28 s. Searched from the first HEAD
    only, each of these 176,000-character lines parses with the real log in well under a second
    (before: a line of 20,000 blanks alone took 8 s); the figures are the log's own."""
    import time

    base = (LOGS / "vllm-durango-qwen3-coder-30b-fp8-a100-40gb.log").read_text()
    for line in (" " * 176_000, "rank=1 " * 25_000 + "Available KV cache memory: x GiB",
                 "Load weight end. " * 10_000, "ServerArgs( " * 14_000):
        started = time.perf_counter()
        parsed = parse_log(base + "\n" + line + "\n")
        assert time.perf_counter() - started < 10  # a bound against a hang, not a benchmark
        assert (parsed.weights_gib, parsed.kv_cache_tokens) == (29.54, 54_912)


def test_the_device_name_as_torch_prints_it():
    """The GPU's name where a log shows it: the fused-MoE config file vLLM looks for (spaces as underscores)."""
    assert log("vllm-pr20665-deepseek-v2-lite-l4-tp2-pp2.log").device_name == "NVIDIA L4"
    assert log("vllm-rwood-qwen3-30b-a3b-gh200-tp4-pp2.log").device_name == "NVIDIA GH200 120GB"
    assert log("vllm-lyell-qwen3-30b-fp8-4090-tp2-v0251.log").device_name == "NVIDIA GeForce RTX 4090"
    assert log("vllm-pr10511-llama3-8b-tp1.log").device_name is None  # no such line
    # collect_env.py / nvidia-smi -L (vllm#12378: "GPU models and configuration: GPU 0: NVIDIA A100-SXM4-40GB"),
    # vLLM V0's bfloat16 refusal, nvidia-smi's table
    for line, name in (("GPU models and configuration: GPU 0: NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB"),
                       ("GPU 1: NVIDIA A100 80GB PCIe (UUID: GPU-1c2d)", "NVIDIA A100 80GB PCIe"),
                       ("Your Tesla T4 GPU has compute capability 7.5.", "Tesla T4"),
                       # vllm#11232's collect_env on ROCm
                       ("GPU models and configuration: AMD Instinct MI250X/MI250 (gfx90a:sramecc+:xnack-)",
                        "AMD Instinct MI250X/MI250"),
                       ("|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |", "NVIDIA H100 80GB HBM3")):
        assert parse_log(line + "\nGPU KV cache size: 16 tokens").device_name == name


def test_from_v021_the_token_line_is_concurrency_times_max_model_len():
    """club-3090#612, vLLM v0.24.0, a hybrid Qwen3.6-35B-A3B: 567,978 tokens is no whole number of blocks; it is
    int(4.3333 x 131,072), the concurrency line's figure in tokens (the pool's own tokens are not printed)."""
    r = log("vllm-club3090-612-qwen36-35b-5090.log")
    assert (r.kv_cache_tokens, r.concurrency_tokens, r.max_concurrency) == (567_978, 131_072, 4.33)
    assert 567_978 % 16 != 0 and round(567_978 / 131_072, 2) == 4.33


def test_the_combined_kv_line_of_recent_releases():
    """Recent vLLM prints tokens and concurrency on one line; N = int(max_concurrency x max_model_len):
    1,553,140 / 1,000,000 = 1.553, printed 1.55x."""
    r = log("vllm-issue54662-hybrid-kv-line.log")
    assert (r.kv_cache_tokens, r.concurrency_tokens, r.max_concurrency) == (1_553_140, 1_000_000, 1.55)
    assert round(r.kv_cache_tokens / r.concurrency_tokens, 2) == r.max_concurrency
