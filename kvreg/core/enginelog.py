"""Read a vLLM or SGLang startup log: the memory terms, the KV cache lines and the settings it shows.

The formats, each seen in public logs vendored under tests/data/logs (MANIFEST.toml says where):

- vLLM V0 up to v0.6.4: ``Memory profiling results: total_gpu_memory=23.58GiB ... peak_torch_memory=
  ... non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90`` beside ``Loading model
  weights took 14.9888 GB`` and ``# GPU blocks: 1952``;
- vLLM v0.6.5 and v0.6.6 (vllm/worker/worker.py after PR 10511): a ``Memory profiling results:`` table of
  ``total_gpu_memory``, ``model weights take``, ``non_torch_memory``, ``PyTorch activation peak memory``,
  ``available_kv_cache_memory``;
- vLLM V0 v0.7 to v0.10: ``the current vLLM instance can use total_gpu_memory (79.19GiB) x
  gpu_memory_utilization (0.80) = 63.35GiB`` and ``model weights take ...; non_torch_memory takes ...;
  PyTorch activation peak memory takes ...; the rest of the memory reserved for KV Cache is ...``, then
  ``# cuda blocks: N`` and ``Maximum concurrency for N tokens per request: Xx``;
- vLLM V1 (v0.8 on, vllm/v1/worker/gpu_worker.py and vllm/v1/core/kv_cache_utils.py): ``Model loading took
  X GiB``, ``Available KV cache memory: X GiB``, ``GPU KV cache size: N tokens``, ``Maximum concurrency for
  N tokens per request: Xx``; from v0.9.2 to v0.10.1, at DEBUG level, ``requested GPU memory: R GiB`` and
  ``torch peak memory increase: A GiB; non-torch forward increase memory: N GiB; weights memory: W GiB``;
  from v0.10.2 also ``Free memory on device (F/T GiB) on startup. Desired GPU memory
  utilization is (U, R GiB). Actual usage is W GiB for weight, A GiB for peak activation, N GiB for non-torch
  memory, and C GiB for CUDAGraph memory. ... Current kv cache memory in use is K GiB.`` (some releases print
  ``W GiB for consumed memory (weights + non-torch)`` instead); from v0.19 ``Estimated CUDA graph memory: X GiB
  total`` where the V1 model runner profiled its graphs, and from v0.21 ``CUDA graph memory profiling is
  enabled``: those releases take that estimate out of the KV budget (a log that shows the KV line and the
  ``Graph capturing finished`` line but neither of these profiled none: the V2 model runner, from v0.22);
- SGLang: ``Load weight begin. avail mem=X GB``, ``Load weight end. ... avail mem=X GB, mem usage=X GB``,
  ``KV Cache is allocated. #tokens: N, K size: X GB, V size: X GB`` (or, for an MLA model's one latent pool,
  ``#tokens: N, KV size: X GB``), ``max_total_num_tokens=N, ..., max_running_requests=N`` (the limit it
  resolved), and for hybrid models ``Mamba Cache is allocated. max_mamba_cache_size: N``. SGLang's "GB"
  are GiB: it divides bytes by 1 << 30.

The GPU's device name as torch prints it ("NVIDIA H100 80GB HBM3") is read where a log shows it: the fused-MoE or FP8
kernel config file the engines look for (``device_name=NVIDIA_H100_80GB_HBM3.json``), collect_env.py's and
``nvidia-smi -L``'s ``GPU 0: ...``, nvidia-smi's table, vLLM V0's ``Your Tesla T4 GPU has compute capability``;
kvreg.app.calibrate maps it to a registry GPU (kvreg/catalog/device_names.toml).

Where several workers print the same line, the first is kept (they print the same figures for the same
shard), except vLLM's KV cache lines (V1's, and V0's per-worker profile), where the smallest is kept: vLLM sizes
every worker to the smallest. Nothing here computes a figure: kvreg.app.calibrate sets what was logged against the figure
declarations' views. Stdlib only.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
from dataclasses import asdict, dataclass, field

from kvreg.core.errors import KvregError
from kvreg.core.limits import read_input

GIB = 2**30
MAX_LOG_BYTES = 64 * 10**6  # a startup log is kilobytes; refuse anything absurd before reading it whole

_NUM = r"(-?[\d,]*\.?\d+)"


@dataclass
class EngineLog:
    """What a startup log shows; None: not in the log. Memory in GiB as printed."""

    engine: str | None = None  # vllm | sglang
    format: str | None = None
    engine_version: str | None = None
    model: str | None = None
    device_name: str | None = None  # the GPU as torch names it ("NVIDIA H100 80GB HBM3"), spaces restored
    architecture: str | None = None
    tp: int | None = None
    pp: int | None = None
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None  # the setting: vLLM --max-num-seqs, SGLang --max-running-requests
    kv_cache_dtype: str | None = None
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None
    total_gpu_memory_gib: float | None = None
    requested_gib: float | None = None
    weights_gib: float | None = None
    activation_gib: float | None = None
    non_torch_gib: float | None = None
    cuda_graph_gib: float | None = None
    consumed_gib: float | None = None  # vLLM's "consumed memory (weights + non-torch)", where it prints them together
    cuda_graph_in_budget: bool | None = None  # the log says vLLM profiled its CUDA graphs into the KV budget (v0.21 on)
    # vLLM's estimate of its CUDA graphs before sizing the KV cache, which a release that profiles them into the
    # budget takes (the captured figure, cuda_graph_gib, comes after and differs by a few percent)
    cuda_graph_estimate_gib: float | None = None
    graphs_captured: bool | None = None  # the log shows vLLM's "Graph capturing finished" line
    sampler: str | None = None  # vLLM's top-k/top-p sampler backend as the log names it: torch or flashinfer
    avail_before_load_gib: float | None = None
    avail_after_weights_gib: float | None = None
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = None
    num_blocks: int | None = None
    max_concurrency: float | None = None
    concurrency_tokens: int | None = None
    max_running_requests: int | None = None  # what SGLang resolved it to (its summary line)
    state_slots: int | None = None  # SGLang's max_mamba_cache_size, hybrid models
    # vLLM V1 at PP > 1: each pipeline stage's "Available KV cache memory" (the smallest of its TP workers'), by stage
    kv_cache_gib_by_stage: dict | None = None
    lines: list[str] = field(default_factory=list)  # the lines each field came from
    # Set when the text holds several startups: which one was read (the last complete one)
    startup_note: str | None = None

    def as_dict(self) -> dict:
        out = asdict(self)
        out.pop("lines")
        out.pop("startup_note")
        return out

    @property
    def budget_cuda_graph_gib(self) -> float | None:
        """The CUDA graph memory a release that profiles them takes from the KV budget: its estimate, else what the
        capture took."""
        return self.cuda_graph_estimate_gib if self.cuda_graph_estimate_gib is not None else self.cuda_graph_gib

    def has_kv_line(self) -> bool:
        return self.kv_cache_gib is not None or self.kv_cache_tokens is not None


def _f(text: str) -> float:
    return float(text.replace(",", ""))


def _i(text: str) -> int:
    return int(float(text.replace(",", "")))


def _device_name(text: str) -> str:
    """A device name as torch prints it: a config file name's underscores back to spaces."""
    return " ".join(text.replace("_", " ").split())


# (field, pattern, converter, format): the first match of a field wins. A converter may return a dict of
# several fields. Order matters only within a field.
_RULES: list[tuple[str, re.Pattern, object, str | None]] = []
# Rules whose repeats keep the smallest value: each vLLM V1 worker prints its own KV cache lines, and the engine
# sizes every worker to the smallest (an 8-GPU run printed 10.64 to 10.68 GiB, then 237,344 to 238,256 tokens).
_KEEP_SMALLEST: set[re.Pattern] = set()


def _rule(name: str, pattern: str, conv=_f, fmt: str | None = None, flags=re.IGNORECASE,
          smallest: bool = False) -> None:
    compiled = re.compile(_linear(pattern), flags)
    _RULES.append((name, compiled, conv, fmt))
    if smallest:
        _KEEP_SMALLEST.add(compiled)


def _linear(pattern: str) -> str:
    """`HEAD.*?REST` searched from the first HEAD of a line only. re.search tries every position: on
    a line holding HEAD thousands of times and no REST, each try scans to the end of the line (a
    176 KB line took 28 s). The first HEAD followed by REST finds the same match, so the pattern is
    anchored there: the prefix before it cannot hold HEAD."""
    head, sep, rest = pattern.partition(".*?")
    if not sep:
        return pattern
    assert "(" not in head.replace("\\(", ""), pattern  # a literal head: no group, no alternation
    return f"^(?:(?!{head}).)*{head}.*?{rest}"


# --- the engine and its version
_rule("engine_version", r"LLM engine \(v(\d+\.\d+[\w.+-]*)\)", str)
_rule("engine_version", r"vLLM API server version (\d+\.\d+[\w.+-]*)", str)
_rule("engine_version", r"█\s+version\s+(\d+\.\d+[\w.+-]*)", str)
_rule("engine_version", r"sglang(?:==|\s+version:?\s*v?)(\d+\.\d+[\w.+-]*)", str)
# --- the model
_rule("model", r"(?:vllm serve|--model(?:-path)?)[ =]+(\S+)", str)
_rule("model", r"'model': '([^']+)'", str)
_rule("model", r"model_path='([^']+)'", str)
_rule("model", r"\bmodel='([^']+)'", str)
_rule("model", r"Starting to load model (\S+?)\.\.\.", str)
# --- the GPU, as torch.cuda.get_device_name() prints it: in the fused-MoE / FP8 kernel config file the engines look
# for ("device_name=NVIDIA_H100_80GB_HBM3.json", spaces as underscores), in collect_env.py's and `nvidia-smi -L`'s
# "GPU 0: NVIDIA A100-SXM4-80GB", in vLLM's "Your Tesla T4 GPU has compute capability 7.5", in nvidia-smi's table
_rule("device_name", r"device_name=((?:NVIDIA|Tesla|AMD|Quadro)[\w\-/]*?)(?:,|\.json|_down\b)", _device_name)
_rule("device_name", r"\bGPU \d+: ((?:NVIDIA|Tesla|AMD|Quadro) [^\n(]*?)\s*(?:\(UUID|$)", _device_name)
_rule("device_name", r"GPU models and configuration\s*:\s*((?:NVIDIA|Tesla|AMD|Quadro) [^\n(]*?)\s*(?:\(|$)", _device_name)
_rule("device_name", r"\bYour ((?:NVIDIA|Tesla|AMD|Quadro) [^\n]*?) GPU has compute capability", _device_name)
_rule("device_name", r"^\|\s+\d+\s+((?:NVIDIA|Tesla|AMD|Quadro) \S+(?: \S+)*?)\s{2,}(?:On|Off)\s+\|", _device_name)
_rule("architecture", r"Load weight end\..*?type=(\w+)", str)
_rule("architecture", r"Resolved architecture:\s*(\w+)", str)
# --- parallelism and settings
_rule("tp", r"(?:\s-tp|--tensor-parallel-size|--tp-size|--tp)[ =]+(\d+)", _i)
_rule("tp", r"tensor_parallel_size['\"]?[=:]\s*(\d+)", _i)
_rule("tp", r"\btp_size=(\d+)", _i)
_rule("pp", r"(?:\s-pp|--pipeline-parallel-size|--pp-size|--pp)[ =]+(\d+)", _i)
_rule("pp", r"pipeline_parallel_size['\"]?[=:]\s*(\d+)", _i)
_rule("pp", r"\bpp_size=(\d+)", _i)
_rule("max_model_len", r"max_(?:model|seq)_len['\"]?[=:]\s*(\d+)", _i)
_rule("max_model_len", r"--max-model-len[ =]+(\d+)", _i)
_rule("max_model_len", r"\bcontext_len=(\d+)", _i)
_rule("max_model_len", r"Using max model len (\d+)", _i)
_rule("max_num_batched_tokens", r"max_num_batched_tokens['\"]?[=:]\s*(\d+)", _i)
_rule("max_num_batched_tokens", r"--max-num-batched-tokens[ =]+(\d+)", _i)
_rule("max_num_seqs", r"max_num_seqs['\"]?[=:]\s*(\d+)", _i)
_rule("max_num_seqs", r"--max-num-seqs[ =]+(\d+)", _i)
_rule("max_num_seqs", r"--max-running-requests[ =]+(\d+)", _i)
_rule("max_num_seqs", r"ServerArgs\(.*?\bmax_running_requests=(\d+)", _i)  # not the summary line's resolved value
_rule("kv_cache_dtype", r"kv_cache_dtype['\"]?[=:]\s*'?([\w]+)", str)
_rule("kv_cache_dtype", r"KV Cache is allocated\. dtype: torch\.(\w+)", str)
_rule("block_size", r"\bblock_size['\"]?[=:]\s*(\d+)", _i)
_rule("block_size", r"--block-size[ =]+(\d+)", _i)
_rule("gpu_memory_utilization", r"gpu_memory_utilization['\"]?\s*[=(:]?\s*(\d*\.\d+)", _f)
_rule("gpu_memory_utilization", r"--gpu-memory-utilization[ =]+(\d*\.\d+)", _f)
_rule("mem_fraction_static", r"mem_fraction_static[ =:]+(\d*\.\d+)", _f)
_rule("mem_fraction_static", r"--mem-fraction-static[ =]+(\d*\.\d+)", _f)
# --- vLLM memory profile
_rule("total_gpu_memory_gib", r"total_gpu_memory\s*[=(]?\s*" + _NUM + r"\s*GiB", _f)
_rule("requested_gib", r"the current vLLM instance can use.*?=\s*" + _NUM + r"\s*GiB", _f, "vllm-v0")
_rule("requested_gib", r"the current vLLM instance can use\s+" + _NUM + r"\s*GiB", _f, "vllm-v0.6.5")
_rule("weights_gib", r"model weights take\s+" + _NUM + r"\s*GiB", _f)
_rule("weights_gib", r"Model loading took\s+" + _NUM + r"\s*Gi?B", _f)
_rule("weights_gib", r"Loading model weights took\s+" + _NUM + r"\s*Gi?B", _f)
_rule("non_torch_gib", r"non_torch_memory(?:\s+takes|=|\s+)\s*" + _NUM + r"\s*GiB", _f)
_rule("activation_gib", r"PyTorch activation peak memory(?:\s+takes)?\s+" + _NUM + r"\s*GiB", _f)
_rule("_peak_torch_gib", r"peak_torch_memory=" + _NUM + r"GiB", _f, "vllm-v0.6.4")
# V0 sizes every worker to the smallest too (vllm/executor/distributed_gpu_executor.py determine_num_available_blocks:
# num_gpu_blocks = min(b[0] for b in num_blocks)); the driver, which samples, prints the smaller pool
_rule("kv_cache_gib", r"the rest of the memory reserved for KV Cache is\s+" + _NUM + r"\s*GiB", _f, smallest=True)
_rule("kv_cache_gib", r"available_kv_cache_memory\s+" + _NUM + r"\s*GiB", _f, smallest=True)
_rule("kv_cache_gib", r"kv_cache_size=" + _NUM + r"GiB", _f, smallest=True)
_rule("kv_cache_gib", r"Available KV cache memory:\s*" + _NUM + r"\s*GiB", _f, "vllm-v1", smallest=True)
_rule("cuda_graph_gib", r"Graph capturing finished in .*?took\s+" + _NUM + r"\s*GiB", _f)
_rule("graphs_captured", r"(Graph capturing finished)", lambda _: True)
# vLLM's sampler backend (vllm/v1/sample/ops/topk_topp_sampler.py, logged as the sampler is built, before the profile
# run): FlashInfer's kernel, or PyTorch's own when FlashInfer is missing, disabled or unsupported
_rule("sampler", r"(Using FlashInfer for top-p & top-k sampling)", lambda _: "flashinfer")
_rule("sampler", r"(FlashInfer is not available\.|FlashInfer is available, but it is not enabled"
      r"|FlashInfer top-p/top-k sampling (?:disabled|unavailable|is available but disabled))", lambda _: "torch")
_rule("cuda_graph_estimate_gib", r"Estimated CUDA graph memory:\s*" + _NUM + r"\s*GiB total", _f, "vllm-v1")
_rule("_pool", r"CUDA graph pool memory:\s*" + _NUM + r"\s*GiB \(actual\),\s*" + _NUM + r"\s*GiB \(estimated\)",
      lambda actual, estimate: {"cuda_graph_gib": _f(actual), "cuda_graph_estimate_gib": _f(estimate)}, "vllm-v1")
# V1 from v0.11 sums its profile up in one line (vllm/v1/worker/gpu_worker.py): "Free memory on device (F/T GiB) on
# startup. Desired GPU memory utilization is (U, R GiB). Actual usage is W GiB for weight, A GiB for peak activation,
# N GiB for non-torch memory, and C GiB for CUDAGraph memory. ... Current kv cache memory in use is K GiB."
# Some releases print W + N together as "consumed memory (weights + non-torch)".
_rule("_free_on_startup", r"Free memory on device \(" + _NUM + r"/" + _NUM + r" GiB\) on startup",
      lambda free, total: {"total_gpu_memory_gib": _f(total)}, "vllm-v1")
_rule("_desired", r"Desired GPU memory utilization is \(" + _NUM + r",\s*" + _NUM + r"\s*GiB\)",
      lambda share, requested: {"gpu_memory_utilization": _f(share), "requested_gib": _f(requested)}, "vllm-v1")
_rule("_actual", r"Actual usage is\s+" + _NUM + r"\s*GiB for weight,\s*" + _NUM + r"\s*GiB for peak activation,\s*"
      + _NUM + r"\s*GiB for non-torch memory,\s*and\s+" + _NUM + r"\s*GiB for CUDAGraph memory",
      lambda w, a, n, c: {"weights_gib": _f(w), "activation_gib": _f(a), "non_torch_gib": _f(n),
                          "cuda_graph_gib": _f(c)}, "vllm-v1")
_rule("_actual", r"Actual usage is\s+" + _NUM + r"\s*GiB for consumed memory \(weights \+ non-torch\),\s*" + _NUM
      + r"\s*GiB for peak activation,\s*and\s+" + _NUM + r"\s*GiB for CUDAGraph memory",
      lambda w_n, a, c: {"consumed_gib": _f(w_n), "activation_gib": _f(a), "cuda_graph_gib": _f(c)}, "vllm-v1")
_rule("kv_cache_gib", r"Current kv cache memory in use is\s+" + _NUM + r"\s*GiB", _f, "vllm-v1")
# V1 from v0.9.2 to v0.10.1 prints its profile at DEBUG (VLLM_LOGGING_LEVEL=DEBUG; PR 19312, reworded by PR 21429):
# "Initial free memory: F GiB, free memory: G GiB, requested GPU memory: R GiB" (after PR 21429: "Initial free
# memory: F GiB; Requested memory: U (util), R GiB") and "Memory profiling takes S seconds. Total non KV cache memory:
# T GiB; torch peak memory increase: A GiB; non-torch forward increase memory: N GiB; weights memory: W GiB."
_rule("requested_gib", r"requested GPU memory:\s*" + _NUM + r"\s*GiB", _f, "vllm-v1")
_rule("_requested", r"Requested memory:\s*" + _NUM + r"\s*\(util\),\s*" + _NUM + r"\s*GiB",
      lambda share, requested: {"gpu_memory_utilization": _f(share), "requested_gib": _f(requested)}, "vllm-v1")
_rule("_profile", r"torch peak memory increase:\s*" + _NUM + r"\s*GiB;\s*non-torch forward increase memory:\s*"
      + _NUM + r"\s*GiB;\s*weights memory:\s*" + _NUM + r"\s*GiB",
      lambda a, n, w: {"activation_gib": _f(a), "non_torch_gib": _f(n), "weights_gib": _f(w)}, "vllm-v1")
_rule("cuda_graph_in_budget", r"(CUDA graph memory profiling is enabled)", lambda _: True, "vllm-v1")
_rule("cuda_graph_in_budget", r"(CUDA graph memory profiling is disabled)", lambda _: False, "vllm-v1")
# Releases before v0.21 that profiled the graphs without taking them from the budget say so, with the run's
# utilization: "To try it now, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 and increase --gpu-memory-utilization
# from 0.9000 to 0.9306 to maintain the same effective KV cache size."
_rule("gpu_memory_utilization", r"increase --gpu-memory-utilization from\s+" + _NUM + r"\s+to\s", _f, "vllm-v1")
_rule("kv_cache_tokens", r"GPU KV cache size:\s*" + _NUM + r"\s*tokens", _i, smallest=True)
_rule("num_blocks", r"(?:GPU|cuda) blocks:\s*" + _NUM, _i)  # no leading \s*: quadratic on a line of blanks
_rule("_concurrency", r"Maximum concurrency for\s+" + _NUM + r"\s+tokens per request:\s*" + _NUM + r"x",
      lambda a, b: {"concurrency_tokens": _i(a), "max_concurrency": _f(b)}, smallest=True)
# --- SGLang
_rule("avail_before_load_gib", r"Load weight begin\..*?avail mem=" + _NUM + r"\s*GB", _f, "sglang")
_rule("avail_after_weights_gib", r"Load weight end\..*?avail mem=" + _NUM + r"\s*GB", _f, "sglang")
_rule("weights_gib", r"Load weight end\..*?mem usage=" + _NUM + r"\s*GB", _f, "sglang")
_rule("_sglang_kv", r"KV Cache is allocated\..*?#tokens:\s*" + _NUM + r",\s*K size:\s*" + _NUM
      + r"\s*GB,\s*V size:\s*" + _NUM + r"\s*GB",
      lambda n, k, v: {"kv_cache_tokens": _i(n), "kv_cache_gib": round(_f(k) + _f(v), 2)}, "sglang")
# MLA (DeepSeek lineage): one latent pool, so SGLang prints one size (MLATokenToKVPool)
_rule("_sglang_kv", r"KV Cache is allocated\..*?#tokens:\s*" + _NUM + r",\s*KV size:\s*" + _NUM + r"\s*GB",
      lambda n, kv: {"kv_cache_tokens": _i(n), "kv_cache_gib": _f(kv)}, "sglang")
_rule("kv_cache_tokens", r"max_total_num_tokens=" + _NUM, _i, "sglang")
_rule("max_running_requests", r"max_total_num_tokens=.*?\bmax_running_requests=(\d+)", _i, "sglang")
_rule("state_slots", r"Mamba Cache is allocated\. max_mamba_cache_size:\s*" + _NUM, _i, "sglang")


def _smaller(value, than) -> bool:
    """A repeated KV line's value against the kept one (a combined rule's dict by its last field)."""
    if isinstance(value, dict):
        value, than = list(value.values())[-1], list(than.values())[-1]
    return value < than


# A V1 worker's KV line names the worker: "(VllmWorker rank=3 pid=...)" (rank = PP stage x TP + TP rank) or, from
# v0.10.2, "(Worker_PP1_TP0 pid=...)"; at PP > 1 each stage sizes its own pool.
_WORKER_KV = re.compile(r"(?:\brank=(\d+)|Worker_PP(\d+)_TP\d+)\b.*?Available KV cache memory:\s*" + _NUM + r"\s*GiB")


_MAX_WORKER_LINE = 4096


def _kv_by_stage(text: str, tp: int | None, pp: int | None) -> dict | None:
    """Each pipeline stage's smallest "Available KV cache memory", when the log ran at PP > 1 and names its workers."""
    if not pp or pp < 2:
        return None
    out: dict[int, float] = {}
    # A worker's KV line is under 200 characters; longer lines are not searched (HEAD.*?REST with a
    # head repeated along a long line is quadratic, see _linear).
    lines = [ln for ln in text.splitlines() if len(ln) <= _MAX_WORKER_LINE and "Available KV cache memory" in ln]
    for m in (m for ln in lines for m in _WORKER_KV.finditer(ln)):
        rank, stage, gib = m.groups()
        if stage is None:
            if not tp:
                return None
            stage = int(rank) // tp
        stage, gib = int(stage), _f(gib)
        out[stage] = min(gib, out.get(stage, gib))
    return out or None


# The line each startup prints once, before its memory profile: where a log that holds several startups
# (a server restarted, two runs appended to one file) is cut, so that no run's figures are mixed with
# another's (version and weights from one, KV from the other).
_STARTUP = re.compile(r"vLLM API server version \d|Initializing an? (?:V1 )?LLM engine \(v\d|server_args=ServerArgs\(",
                      re.IGNORECASE)


# A line of a startup's memory profile: after one, a startup marker begins the next startup (before one,
# it is the same startup's second banner: vLLM prints its API server version, then its engine's).
_PROFILE_LINE = re.compile(r"Model loading took|Loading model weights took|Load weight end|KV cache|mem usage=",
                           re.IGNORECASE)


def _startups(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each startup in the log: a new one begins at a startup marker that
    follows a memory-profile line; one part when the log holds one startup."""
    lines = text.splitlines()
    starts, profiled = [0], False
    for i, line in enumerate(lines):
        if profiled and _STARTUP.search(line):
            starts.append(i)
            profiled = False
        elif not profiled and _PROFILE_LINE.search(line):
            profiled = True
    if len(starts) == 1:
        return [(1, text)]
    bounds = starts + [len(lines)]
    return [(a + 1, "\n".join(lines[a:b])) for a, b in zip(bounds, bounds[1:])]


def parse_log(text: str) -> EngineLog:
    """Every field a startup log shows (see the module docstring for the formats). A log holding several
    startups is read for the last complete one (one that reached its KV cache line), and says so
    (EngineLog.startup_note); none complete: the last one."""
    parts = _startups(text)
    if len(parts) == 1:
        return _parse_one(text)
    logs = []
    for first, part in parts:
        try:
            logs.append((first, _parse_one(part)))
        except KvregError:
            continue
    if not logs:
        return _parse_one(text)
    complete = [(first, log) for first, log in logs if log.has_kv_line()]
    first, log = (complete or logs)[-1]
    log.startup_note = (f"the log holds {len(parts)} startups; read the last {'complete ' if complete else ''}one, "
                        f"from line {first:,}")
    return log


def _parse_one(text: str) -> EngineLog:
    """The fields of one startup's text."""
    log = EngineLog()
    found: dict[str, object] = {}
    fmt_seen: list[str] = []
    smallest_from: dict[str, re.Pattern] = {}  # field -> the keep-smallest rule that set it
    for line in text.splitlines():
        for name, pattern, conv, fmt in _RULES:
            repeat = smallest_from.get(name) is pattern
            if name in found and not name.startswith("_") and not repeat:
                continue
            m = pattern.search(line)
            if not m or not any(g is not None for g in m.groups()):
                continue
            try:
                value = conv(*[g for g in m.groups() if g is not None])
            except (OverflowError, ValueError):  # 400 digits: no engine prints that
                shown = line.strip() if len(line.strip()) <= 80 else line.strip()[:77] + "..."
                raise KvregError(f"the log's line {shown!r} holds a number too large to be an engine's: give the "
                                 "log as the engine printed it") from None
            if repeat:  # another worker's line: keep the smaller
                if _smaller(value, found[name]):
                    found[name] = value
                continue
            if name in found:  # a combined rule (_concurrency, _sglang_kv) matched already
                continue
            found[name] = value
            if pattern in _KEEP_SMALLEST:
                smallest_from[name] = pattern
            if not log.lines or log.lines[-1] != line.strip():  # one line can set several fields
                log.lines.append(line.strip())
            if fmt:
                fmt_seen.append(fmt)
    for key in [k for k in found if k.startswith("_") and isinstance(found[k], dict)]:  # the combined rules
        for k, v in found.pop(key).items():
            found.setdefault(k, v)
    peak = found.pop("_peak_torch_gib", None)
    if peak is not None and found.get("weights_gib") is not None and "activation_gib" not in found:
        found["activation_gib"] = round(peak - found["weights_gib"], 2)  # v0.6.4: peak torch = weights + activations
    for k, v in found.items():
        setattr(log, k, v)
    log.kv_cache_gib_by_stage = _kv_by_stage(text, log.tp, log.pp)
    sglang = "sglang" in fmt_seen or log.mem_fraction_static is not None
    log.engine = "sglang" if sglang else "vllm" if (fmt_seen or log.weights_gib is not None
                                                     or log.kv_cache_tokens is not None or log.num_blocks) else None
    log.format = ("sglang" if sglang else next((f for f in ("vllm-v1", "vllm-v0.6.5", "vllm-v0.6.4", "vllm-v0")
                                                  if f in fmt_seen), "vllm-v1" if log.engine else None))
    if log.engine == "vllm" and log.format != "vllm-v1" and log.kv_cache_tokens is None and log.num_blocks:
        log.kv_cache_tokens = log.num_blocks * (log.block_size or 16)  # V0: "# GPU blocks" x block_size
    if log.engine is None:
        raise KvregError("this does not look like a vLLM or SGLang startup log: no memory profile, weight loading or "
                         "KV cache line was found")
    return log


def read_log(path) -> tuple[EngineLog, str]:
    """Parse a log file; returns the log and a short source label (file name and sha256 prefix).
    Read through kvreg.core.limits.read_input: a regular file of at most MAX_LOG_BYTES (a FIFO, /dev/zero
    or /dev/urandom is refused before it is opened)."""
    p = pathlib.Path(path)
    data = read_input(os.fspath(path), MAX_LOG_BYTES, "startup log")
    text = data.decode("utf-8", errors="replace")
    return parse_log(text), f"{p.name} sha256:{hashlib.sha256(data).hexdigest()[:12]}"


__all__ = ["EngineLog", "parse_log", "read_log", "GIB"]
