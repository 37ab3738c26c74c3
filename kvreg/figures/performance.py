"""The constants of the latency model (kvreg.figures.declarations, "latency"), each named once with its source.

Two kinds: physical facts of the hardware (link bandwidths, all-reduce latency), taken from datasheets or
stated as assumptions; and efficiency factors, the share of the datasheet's bandwidth and FLOP/s an engine
reaches and its fixed cost per step, fitted on the public measurements in tests/data/latency/ by
bench/latency_accuracy.py (docs/latency-accuracy.md lists which rows were fitted and which held out).
Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---- GPU-to-GPU links, bytes per second one way per GPU (the TP all-reduce's bandwidth)
# NVLink per GPU, one direction: A100 NVLink 3 600 GB/s both ways, H100/H200 NVLink 4 900 GB/s, B200 NVLink 5
# 1.8 TB/s (NVIDIA datasheets); MI300X: 7 Infinity Fabric links x 64 GB/s one way (AMD MI300X datasheet, 896 GB/s
# aggregate both ways). The first entry whose needle the GPU's name holds (lower case) applies; "gh200" comes
# before "h200" so a GH200 is not read as an H200.
FABRIC_LINK_BYTES_PER_S = (
    ("gb200", 900 * 10**9),
    ("b200", 900 * 10**9),
    ("gh200", 450 * 10**9),
    ("h200", 450 * 10**9),
    ("h100", 450 * 10**9),
    ("a100", 300 * 10**9),
    ("mi300x", 448 * 10**9),
)
FABRIC_LINK_DEFAULT_BYTES_PER_S = 450 * 10**9  # a fabric kvreg has no entry for: NVLink 4's
# Over PCIe only (fabric 0): PCIe 4.0 x16, 32 GB/s one way (PCI-SIG), the slowest slot such cards sit in.
PCIE_LINK_BYTES_PER_S = 32 * 10**9
# The all-reduce's fixed cost (seconds one all-reduce of a decode step's small activations takes whatever its
# bytes) is an efficiency factor, `allreduce_latency_s` below. NCCL's small-message latency within one NVLink node
# is 5-10 us (this, where no run at TP > 1 was fitted), but the TP runs at 8 GPUs show each layer costing far more
# than its reads and that: the fitted latency, shared by every NVIDIA entry, with the experts' bandwidth share
# fitted on the same runs (bench/latency_accuracy.py --fit, its second stage). The experts' share comes out at the
# top of its grid, the datasheet's bandwidth, as the dense layers' 0.96-0.99.
NCCL_ALLREDUCE_LATENCY_S = 8e-6
TP8_ALLREDUCE_LATENCY_S = 43e-6
TP8_EXPERT_BANDWIDTH = 1.0
# What each running request adds to an engine step beyond its reads, FLOPs and all-reduce bytes: the scheduler's and
# the sampler's work per request (its batch entry, its logits, its token sent back), which no run at one request
# shows. Fitted with the two terms above on every fitted NVIDIA run, at every concurrency and TP
# (bench/latency_accuracy.py --fit, its second stage), and taken by the MI300X entry too.
SEQUENCE_OVERHEAD_S = 115e-6
# A prompt's forward pass under SGLang before v0.5.10 (engine_defaults.SGLANG_PREFILL_GRAPHS_FROM, the release whose
# piecewise CUDA graphs for prompts are on by default) runs without a CUDA graph: ForwardMode.is_cuda_graph() holds
# DECODE, TARGET_VERIFY and IDLE, never EXTEND or MIXED (python/sglang/srt/model_executor/forward_batch_info.py), and
# model_runner.forward replays a graph only for those. Every kernel of such a pass is launched from each TP rank's own
# Python process, and each of the pass's all-reduces waits for the slowest rank to have launched the kernels before
# it: at TP 8 a rank's share of a short prompt's FLOPs no longer hides those launches. At one request the SGLang
# cookbook's TP-8 runs on B200s take 61-115 ms more to their first token than the request overhead fitted at TP 1 (19
# ms) and the prompt's FLOPs give, whatever the prompt's length (Qwen3-235B-A22B: 99-111 ms at 610 tokens, 140 at
# 4,194; DeepSeek-R1: 126-153 and 166), Llama-3.1-70B on 8 A100s 25 ms more at 610 tokens; vLLM (V1 runs a batch of up
# to 512 tokens in its piecewise CUDA graphs, cuda_graph_sizes) gives no such gap at TP 8 (deepseek-r1/h200.md and
# glm-4.x/h200.md at 4 requests: -32% and +25%). What one all-reduce costs such a pass, in place of
# allreduce_latency_s, charged to the request's time to first token (prefill_eager_s); nothing at TP 1, where a pass
# makes no all-reduce (the request overhead fitted there holds its launches). Fitted on the time to first token of the
# fitted SGLang runs at TP 8 and one request, where no prompt queues ahead (bench/latency_accuracy.py --fit:
# Qwen3-235B-A22B on 8 B200s, three runs, and Llama-3.1-70B on 8 A100s, two, SGLang 0.5.6; rms log error 0.24). The
# launches follow the model's kernels, which this one figure does not know: gpt-oss-120b's (36 layers on Blackwell's
# fused paths) take about 9 ms in all where it gives 24. Not in the time per output token: with it in every prompt's
# pass the fitted runs' time per token at 16 to 100 requests errs 13.5% at the median where it errs 5.3% without
# (Qwen3-235B at 100 requests: 45.0 ms against the measured 32.9), and refitting the shared terms above with it there
# moves the held-out vLLM runs' time per token from 21.5% to 28.5% (SEQUENCE_OVERHEAD_S to 45 us).
EAGER_ALLREDUCE_LATENCY_S = 370e-6
# All-reduces per transformer layer under TP: after attention's output projection and after the MLP's
# down projection (Megatron-style TP, as vLLM and SGLang shard Llama-style layers).
ALLREDUCES_PER_LAYER = 2
# Bytes of one activation element on the wire (bf16/fp16 hidden states).
ACTIVATION_WIRE_BYTES = 2
# Prefill chunk when no engine setting names one: vLLM's max_num_batched_tokens on large GPUs.
DEFAULT_PREFILL_CHUNK_TOKENS = 8192


@dataclass(frozen=True)
class Efficiency:
    """What one engine reaches on one GPU family, fitted on measurements.

    `needle`: lower-case letters and digits the GPU's name holds ("" matches every GPU: the engine's
    fallback); `engine`: vllm or sglang (the theoretical rule reads vllm's); `bandwidth`: share of the
    datasheet memory bandwidth a decode step's reads reach; `compute`: share of the datasheet dense
    FLOP/s the matrix multiplications reach; `step_overhead_s`: seconds each engine step costs beyond
    its reads and FLOPs (scheduling, kernel launches, sampling); `request_overhead_s`: seconds a request's
    first token waits beyond prefill (the HTTP round trip, tokenization, the first scheduling step);
    `allreduce_latency_s`: seconds one TP all-reduce costs a decode step beyond its bytes (its launch, the GPUs'
    synchronisation, the kernels TP adds around it), fitted on runs at TP 8; `expert_bandwidth`: share of the
    datasheet bandwidth the routed experts' reads reach (grouped MoE kernels over a few tokens an expert reach less
    than a dense layer's), fitted on the same runs; `sequence_overhead_s`: seconds each running request adds to a
    decode step beyond its reads, FLOPs and all-reduce bytes (SEQUENCE_OVERHEAD_S); `source`: the measurements
    fitted."""

    needle: str
    engine: str
    bandwidth: float
    compute: float
    step_overhead_s: float
    request_overhead_s: float
    allreduce_latency_s: float
    expert_bandwidth: float
    sequence_overhead_s: float
    source: str


# First match wins: a family's own entry before the engine's fallback (""). Fitted by `python
# bench/latency_accuracy.py --fit` on the runs tests/data/latency/measurements.toml marks "fit"; compute stays
# at 0.5 where no fitted run is bound by FLOPs (short prompts, small batches: the fit cannot tell prefill FLOPs
# from the request overhead there). The fallbacks are fitted on the NVIDIA runs only (ROCm's kernels differ).
_GPUSTACK = "gpustack performance lab, Qwen3-8B on one H100 SXM (docs/performance-lab/qwen3-8b/h100-latency.md)"
_OCI = "Oracle OCI blog, Llama 3.1 405B FP8 on 8x MI300X, vLLM benchmark_latency batches 1-256"
_TP8 = ("sgl-cookbook, Qwen3-235B-A22B on 8x B200 and Llama-3.1-70B on 8x A100, SGLang 0.5.6"
        " (docs/autoregressive/Qwen/Qwen3.md, Llama/Llama3.1.md), with the Qwen3-8B H100 runs: the all-reduce latency,"
        " the experts' bandwidth and what each running request adds to a step")
EFFICIENCIES = (
    Efficiency("h100", "vllm", 0.99, 0.5, 0.002, 0.057, TP8_ALLREDUCE_LATENCY_S, TP8_EXPERT_BANDWIDTH,
               SEQUENCE_OVERHEAD_S, _GPUSTACK + ", vLLM 0.11.0, concurrency 1 and 8; " + _TP8),
    Efficiency("h100", "sglang", 0.96, 0.5, 0.0016, 0.019, TP8_ALLREDUCE_LATENCY_S, TP8_EXPERT_BANDWIDTH,
               SEQUENCE_OVERHEAD_S, _GPUSTACK + ", SGLang 0.5.3, two runs at concurrency 4; " + _TP8),
    Efficiency("mi300x", "vllm", 0.4, 0.29, 0.0018, 0.03, NCCL_ALLREDUCE_LATENCY_S, 0.4, SEQUENCE_OVERHEAD_S,
               _OCI + " (batches 1, 4, 16, 64, 256; request overhead not measured, kept at 0.03; one model at one TP"
               " cannot tell the all-reduce from the step: its latency stays NCCL's, and the experts read at the"
               " bandwidth's share; what each running request adds to a step is the NVIDIA runs' SEQUENCE_OVERHEAD_S,"
               " fitted without these batches)"),
    Efficiency("", "vllm", 0.99, 0.5, 0.002, 0.057, TP8_ALLREDUCE_LATENCY_S, TP8_EXPERT_BANDWIDTH,
               SEQUENCE_OVERHEAD_S, "the vLLM H100 runs (no other NVIDIA GPU has fitted runs at TP 1); " + _TP8),
    Efficiency("", "sglang", 0.96, 0.5, 0.0016, 0.019, TP8_ALLREDUCE_LATENCY_S, TP8_EXPERT_BANDWIDTH,
               SEQUENCE_OVERHEAD_S, "the SGLang H100 runs; " + _TP8),
)
