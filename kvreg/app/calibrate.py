"""Set a vLLM or SGLang startup log against kvreg's figures: `kvreg calibrate --log` and
`kvreg plan calibrate NAME --log`.

The run's model and GPU are read from the log where it names them (resolve_model: its model path or Hugging Face
id against the registry's names and config repo ids; resolve_gpu: its device name, else its total memory), and asked
for only where it does not.

Two predictions are read from the capacity view (kvreg.app.capacity.ask), never computed here:
- from the GPU alone: the log's settings (model, GPU, TP/PP, utilization or mem fraction, context,
  batched tokens, release) with every memory term estimated by the figure declarations;
- with the log's terms: the same, with the weights, activation peak and non-torch memory the log
  measured given as inputs (--weights-memory, --activation-memory, --non-torch-memory). A log cut
  before its KV-cache line still has these, so this predicts the line it would have printed.

`kvreg plan calibrate NAME` stores what the engine printed as the plan's calibration (calibrate_plan: the
numbers as given; calibrate_plan_from_log: a startup log's memory terms become the plan's inputs, its KV-cache
lines its measured figures where they belong to the plan's settings).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from sqlalchemy import update

from kvreg.app.capacity import Question, ask, runner
from kvreg.app.plans import CALIBRATION_FIELDS, MEASURED_TERMS, plan_spec, validate_plan
from kvreg.app.registry import check_input, check_int, check_name, hf_repo_id
from kvreg.core.enginelog import GIB, EngineLog
from kvreg.core.errors import KvregError, suggest
from kvreg.core.rules import release_number
from kvreg.db.read import get_plan, plan_capacity
from kvreg.db.tables import Plan
from kvreg.figures.engine_defaults import VLLM_CUDA_GRAPH_IN_BUDGET_RELEASE

# The release a log's format implies when it names none (kvreg.core.enginelog's formats).
FORMAT_RELEASE = {"vllm-v0.6.4": "0.6.4", "vllm-v0.6.5": "0.6.5", "vllm-v0": "0.7.0"}
# vLLM V0 without chunked prefill profiles one sequence of the whole context, at least 2,048 tokens
# (vllm/config.py SchedulerConfig: max_num_batched_tokens = max(max_model_len, 2048)).
V0_MIN_BATCHED_TOKENS = 2048
# A log's total memory names a registry GPU when it is this close to the GPU's reported memory (logs print
# two decimals, and drivers differ by a few hundredths: 79.19 and 79.22 GiB on H100s).
GPU_MATCH_GIB = 0.05
# Two GPUs that near the log's total tie when their distances differ by less than its printed precision.
GPU_TIE_GIB = 0.01
# KV cache dtypes as logs name them -> registry dtypes.
_KV_DTYPES = {"auto": None, "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "fp8": "fp8", "fp8_e4m3": "fp8_e4m3",
              "fp8_e5m2": "fp8_e5m2", "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}

TERMS = [  # (name, what the log calls it, logged field, predicted figure: bytes or a count)
    ("total_gpu_memory", "total_gpu_memory", "total_gpu_memory_gib", "engine_memory_bytes"),
    ("requested_memory", "total x gpu_memory_utilization", "requested_gib", "requested_bytes_per_gpu"),
    ("weights", "model weights / Model loading took / mem usage", "weights_gib", "weights_bytes_per_gpu"),
    ("activation_peak", "PyTorch activation peak memory", "activation_gib", "activation_peak_bytes_per_gpu"),
    ("non_torch", "non_torch_memory", "non_torch_gib", "non_torch_bytes_per_gpu"),
    ("cuda_graph", "Estimated CUDA graph memory / CUDAGraph memory / Graph capturing took", "budget_cuda_graph_gib",
     "cuda_graph_bytes_per_gpu"),
    ("kv_cache_memory", "Available KV cache memory / K size + V size / KV size", "kv_cache_gib",
     "kv_cells_bytes_per_gpu"),
    ("kv_cache_tokens", "GPU KV cache size / #tokens / max_total_num_tokens", "kv_cache_tokens", "kv_cache_tokens"),
    ("max_concurrency", "Maximum concurrency for N tokens per request", "max_concurrency", "sequences_per_rank"),
    ("max_running_requests", "max_running_requests (SGLang's summary line)", "max_running_requests",
     "max_running_requests"),
    ("state_slots", "max_mamba_cache_size (SGLang, hybrid models)", "state_slots", "sglang_state_slots"),
]
_GIB_TERMS = {"total_gpu_memory", "requested_memory", "weights", "activation_peak", "non_torch", "cuda_graph",
              "kv_cache_memory"}


# Suffixes of a checkpoint's name that name a variant of the same architecture (its instruction tuning, its
# quantization), taken off, longest first, to find the registry model a log's checkpoint is.
_VARIANT = re.compile(r"[-_.](?:instruct|chat|hf|base|it|fp8|fp8[-_]dynamic|awq|gptq|int4|int8|w4a16|w8a8|bf16|"
                      r"thinking|\d{4})$", re.IGNORECASE)
# A Hugging Face cache folder: .../models--<org>--<name>/snapshots/<sha> (huggingface_hub's repo_folder_name)
_HF_CACHE = re.compile(r"models--([\w.-]+?)--([\w.-]+?)(?:/|$)")
_HF_ID = re.compile(r"^([\w.-]+)/([\w.-]+)$")


def _key(name: str) -> str:
    """A model name compared without case or separators: Llama-3.1-8B, llama-3-1-8b and llama_3.1_8b alike."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _variants(name: str) -> list[str]:
    """The name, then with its variant suffixes taken off one by one (Llama-3.1-8B-Instruct-FP8 -> ...-Instruct ->
    Llama-3.1-8B), and each without a leading Meta- (meta-llama/Meta-Llama-3-8B is the registry's Llama-3-8B)."""
    out = [name]
    while (shorter := _VARIANT.sub("", out[-1])) != out[-1] and shorter:
        out.append(shorter)
    return out + [re.sub(r"^Meta-", "", n, flags=re.IGNORECASE) for n in out if re.match(r"^Meta-", n, re.I)]


def log_model_ids(path: str) -> tuple[str | None, str]:
    """What a log's model path says: (the Hugging Face repo id, or None for a local path that carries none, and the
    checkpoint's own name). `org/name` is a repo id; a cache folder `.../models--org--name/snapshots/<sha>` names
    one; any other path names its checkpoint by its last part."""
    path = path.strip().rstrip("/")
    cached = _HF_CACHE.search(path)
    if cached:
        return f"{cached.group(1)}/{cached.group(2)}", cached.group(2)
    if _HF_ID.match(path) and not path.startswith("."):
        return path, path.split("/")[1]
    return None, path.split("/")[-1]


def resolve_model(conn, log: EngineLog, model: str | None) -> str:
    """--model, else the registry model the log's model path names: its Hugging Face repo id (a cache folder's
    included) against the repo id of the config each registry model was read from (kvreg.app.registry.hf_repo_id), then
    the checkpoint's name against the registry's names and repo names, each without variant suffixes such as
    -Instruct or -FP8, ignoring case and separators."""
    db = runner(conn)
    rows = db.rows("SELECT name, source FROM model ORDER BY name")
    names = [r["name"] for r in rows]
    if model:
        if model not in names:
            raise suggest(model, names, "model")
        return model
    if not log.model:
        raise KvregError("the log does not name its model: give --model NAME (a registry model, see kvreg model list)")
    repo, checkpoint = log_model_ids(log.model)
    by_repo: dict[str, set[str]] = {}
    by_name: dict[str, set[str]] = {}
    for r in rows:
        by_name.setdefault(_key(r["name"]), set()).add(r["name"])
        if (rid := hf_repo_id(r["source"])) is not None:
            by_repo.setdefault(rid.lower(), set()).add(r["name"])
            by_name.setdefault(_key(rid.split("/")[1]), set()).add(r["name"])
    steps = []
    if repo:
        org = repo.split("/")[0]
        steps += [by_repo.get(f"{org}/{v}".lower(), set()) for v in _variants(repo.split("/")[1])]
    steps += [by_name.get(_key(v), set()) for v in _variants(checkpoint)]
    for found in steps:
        if len(found) == 1:
            return next(iter(found))
        if found:
            raise KvregError(f"the log's model {log.model!r} matches several registry models ({', '.join(sorted(found))}):"
                             " give --model NAME")
    raise KvregError(f"the log's model {log.model!r} is not a registry model: give --model NAME (kvreg model list), "
                     "or import its config with kvreg model import")


def _device_key(name: str) -> str:
    return " ".join(name.replace("_", " ").lower().split())


def device_gpu(device_name: str) -> dict | None:
    """The catalog GPU (kvreg/catalog/device_names.toml: name, memory, device_names) a device name as torch prints
    it stands for; None: a name the table does not list."""
    from kvreg.catalog import load_device_names  # only a log that names its GPU reads the table

    key = _device_key(device_name)
    return next((g for g in load_device_names() if key in {_device_key(d) for d in g["device_names"]}), None)


def _reported_gib(row) -> float:
    """A GPU row's reported memory (else its memory) in GiB, as logs print the total they see."""
    return (row["reported_memory_bytes"] or row["memory_bytes"]) / GIB


def resolve_gpu(conn, log: EngineLog, gpu: str | None) -> str:
    """--gpu, else the GPU the log names (its device name, kvreg/catalog/device_names.toml), else the registry GPU
    whose reported memory matches the log's total_gpu_memory."""
    db = runner(conn)
    rows = db.rows("SELECT name, memory_bytes, reported_memory_bytes FROM gpu ORDER BY id")
    names = [r["name"] for r in rows]
    if gpu:
        if gpu not in names:
            raise suggest(gpu, names, "gpu")
        return gpu
    named = device_gpu(log.device_name) if log.device_name else None
    if named is not None:
        if named["name"] in names:
            return named["name"]
        reported = f" --reported-memory {log.total_gpu_memory_gib}GiB" if log.total_gpu_memory_gib else ""
        raise KvregError(f"the log's GPU, {log.device_name}, is not in the registry: add it with kvreg gpu add "
                         f"{named['name']} --memory {named['memory']}{reported} (or give --gpu NAME)")
    unknown = f" (its GPU, {log.device_name}, is not in kvreg/catalog/device_names.toml)" if log.device_name else ""
    if log.total_gpu_memory_gib is None:
        raise KvregError(f"the log does not show the GPU's memory (total_gpu_memory){unknown}: give --gpu NAME "
                         "(kvreg gpu list)")
    near = sorted((abs(_reported_gib(r) - log.total_gpu_memory_gib), r["name"]) for r in rows)
    near = [(d, name) for d, name in near if d <= GPU_MATCH_GIB]
    # the nearest, unless another is as near as the log's two decimals can tell (an H100's 79.22 GiB lies between
    # the H100's 79.19 and the A100 80GB's 79.25)
    matches = [name for d, name in near if d - near[0][0] < GPU_TIE_GIB] if near else []
    if len(matches) != 1:
        what = "no registry GPU" if not matches else f"several GPUs ({', '.join(sorted(matches))})"
        raise KvregError(f"the log's total_gpu_memory {log.total_gpu_memory_gib} GiB matches {what}{unknown}: give --gpu "
                         "NAME, or a GPU row with that --reported-memory")
    return matches[0]


# A vLLM installed from a git checkout without its tags calls itself 0.1.devN+g<commit>: a build, not a release.
_UNTAGGED_BUILD = re.compile(r"^v?0\.1\.dev\d+")


def logged_release(log: EngineLog) -> str | None:
    """The release the log names, None for an untagged build (0.1.devN+g<commit>), which names none: its rules
    are the release it was built near, which only the user knows (--engine-version)."""
    v = log.engine_version
    return None if v is None or _UNTAGGED_BUILD.match(v) else v


def untagged_note(log: EngineLog, advice: str = "give --engine-version (the release it was built near) for that "
                                                  "release's rules") -> str | None:
    """What to say when the log's engine is an untagged build (None when it names a release), with `advice`."""
    if log.engine_version and logged_release(log) is None:
        return f"the log's {log.engine} {log.engine_version} is an untagged build, not a release: {advice}"
    return None


def question(log: EngineLog, model: str, gpu: str, *, context: int | None = None, weight_dtype: str | None = None,
             kv_dtype: str | None = None, engine_version: str | None = None, measured: bool = False,
             overrides: dict | None = None) -> Question:
    """The capacity question a log asks: its settings; with `measured`, its memory terms as inputs."""
    rule = log.engine
    version = engine_version or logged_release(log) or FORMAT_RELEASE.get(log.format or "")
    ctx = context or log.concurrency_tokens or log.max_model_len
    q = Question(models=[model], gpus=[gpu], contexts=[ctx] if ctx else [], kv_dtypes=[kv_dtype or "bf16"],
                 weight_dtype=weight_dtype, tp=log.tp or 1, pp=log.pp or 1, gpus_per_node=max(8, (log.tp or 1) *
                                                                                                (log.pp or 1)),
                 block_size=log.block_size or (16 if rule == "vllm" else 1), rule=rule, engine_version=version,
                 max_num_seqs=log.max_num_seqs)
    if rule == "vllm":
        q.gpu_memory_utilization = log.gpu_memory_utilization
        q.sampler = log.sampler  # the backend the log names (None: the release's default)
        batched = log.max_num_batched_tokens
        if batched is None and (log.format or "").startswith("vllm-v0") and ctx:
            batched = max(ctx, V0_MIN_BATCHED_TOKENS)
        q.max_num_batched_tokens = batched
    else:
        q.mem_fraction_static = log.mem_fraction_static
    if measured:
        for k, v in measured_terms(log, version).items():
            setattr(q, k, v)
        # SGLang's memory in use before the load (what CUDA reports - available before the load) is set by the
        # caller, which knows the GPU's reported memory
    for k, v in (overrides or {}).items():
        setattr(q, k, v)
    return q


def cuda_graph_in_budget(log: EngineLog, version: str | None) -> bool:
    """Whether the run took its CUDA graphs out of the KV budget: vLLM from v0.21 profiles them first (unless
    VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0, or on its V2 model runner, which profiles none), before it captured
    them after sizing the KV cache. The log's own arithmetic decides where it has every term (its KV memory is the
    budget less the terms, graphs or not), then its profiling line ("enabled" or "disabled"), then a log that shows
    the KV line and the capture line with no estimate between them (nothing profiled), then its release."""
    spent = log.consumed_gib if log.consumed_gib is not None else (
        None if log.weights_gib is None or log.non_torch_gib is None else log.weights_gib + log.non_torch_gib)
    graphs = log.budget_cuda_graph_gib
    terms = (log.requested_gib, spent, log.activation_gib, graphs, log.kv_cache_gib)
    if all(t is not None for t in terms):
        without = log.requested_gib - spent - log.activation_gib - log.kv_cache_gib
        return abs(without - graphs) < abs(without)
    if log.cuda_graph_in_budget is not None:
        return log.cuda_graph_in_budget
    if log.has_kv_line() and log.graphs_captured and log.cuda_graph_estimate_gib is None:
        return False
    return version is not None and release_number(version) >= VLLM_CUDA_GRAPH_IN_BUDGET_RELEASE


def measured_terms(log: EngineLog, version: str | None) -> dict:
    """The memory terms a log measured, as the deployment inputs they stand for (bytes): the weights, and for
    vLLM the activation peak, the non-torch memory and, in releases that take them from the KV budget, the CUDA
    graphs. A release that prints weights and non-torch memory as one "consumed memory" without a "Model loading
    took" line gives that sum as the weights (the budget takes both off alike)."""
    out: dict = {}
    weights, non_torch = log.weights_gib, log.non_torch_gib
    if log.engine == "vllm" and log.consumed_gib is not None and non_torch is None:
        weights, non_torch = (log.consumed_gib, 0.0) if weights is None else (weights, log.consumed_gib - weights)
    if weights is not None:
        out["weights_measured_bytes"] = round(weights * GIB)
    if log.engine == "vllm":
        if log.activation_gib is not None:
            out["activation_bytes"] = round(max(log.activation_gib, 0) * GIB)
        if non_torch is not None:
            out["non_torch_bytes"] = round(max(non_torch, 0) * GIB)
        if log.budget_cuda_graph_gib is not None and cuda_graph_in_budget(log, version):
            out["cuda_graph_bytes"] = round(max(log.budget_cuda_graph_gib, 0) * GIB)
    return out


def sglang_in_use(conn, gpu: str, log: EngineLog) -> int | None:
    """SGLang: memory in use before the weights load, from the log: reported - (avail after + weights)."""
    if log.avail_before_load_gib is None and (log.avail_after_weights_gib is None or log.weights_gib is None):
        return None
    before = log.avail_before_load_gib
    if before is None:
        before = log.avail_after_weights_gib + log.weights_gib
    row = runner(conn).rows("SELECT memory_bytes, reported_memory_bytes FROM gpu WHERE name = :n", {"n": gpu})[0]
    return max(0, round((row["reported_memory_bytes"] or row["memory_bytes"]) - before * GIB))


def compare(conn, log: EngineLog, *, model: str | None = None, gpu: str | None = None, context: int | None = None,
            weight_dtype: str | None = None, kv_dtype: str | None = None, engine_version: str | None = None) -> dict:
    """Predicted (from the GPU alone, and with the log's terms) against logged, term by term."""
    # both asked for in one line when the log names neither
    found, missing = {}, []
    for key, resolve, given in (("model", resolve_model, model), ("gpu", resolve_gpu, gpu)):
        try:
            found[key] = resolve(conn, log, given)
        except KvregError as exc:
            missing.append(str(exc))
    if missing:
        raise KvregError("; ".join(missing))
    model, gpu = found["model"], found["gpu"]
    if kv_dtype is None and log.kv_cache_dtype:
        kv_dtype = _KV_DTYPES.get(log.kv_cache_dtype.lower(), log.kv_cache_dtype)
    common = dict(context=context, weight_dtype=weight_dtype, kv_dtype=kv_dtype, engine_version=engine_version)
    if not (context or log.concurrency_tokens or log.max_model_len):
        m = runner(conn).rows("SELECT max_position_embeddings FROM model WHERE name = :n", {"n": model})[0]
        common["context"] = m["max_position_embeddings"]
    alone = ask(conn, question(log, model, gpu, **common))[0]
    q = question(log, model, gpu, measured=True, **common)
    if log.engine == "sglang":
        q.non_torch_bytes = sglang_in_use(conn, gpu, log)
    measured = ask(conn, q)[0]
    log = at_limiting_stage(log, q.pp, alone.get("pp_limiting_stage"))
    terms = []
    for name, label, logged_field, figure in TERMS:
        logged = getattr(log, logged_field)
        scale = GIB if name in _GIB_TERMS else 1
        pred = alone.get(figure)
        with_terms = measured.get(figure)
        if name in _GIB_TERMS:
            pred = None if pred is None else pred / scale
            with_terms = None if with_terms is None else with_terms / scale
        if logged is None and pred is None:
            continue
        terms.append({
            "term": name, "logged_as": label, "logged": logged, "predicted": pred, "with_logged_terms": with_terms,
            "error_fraction": _error(pred, logged),
        })
    return {
        "engine": log.engine, "format": log.format, "engine_version": q.engine_version, "model": model, "gpu": gpu,
        "tp": q.tp, "pp": q.pp, "context_tokens": q.contexts[0], "rule": q.rule,
        "gpu_memory_utilization": alone.get("gpu_memory_utilization_used"),
        "mem_fraction_static": alone.get("mem_fraction_static_used"),
        "kv_cache_gib": measured["kv_cells_gib_per_gpu"],
        "kv_cache_tokens": measured["kv_cache_tokens"],
        "max_concurrency": measured["sequences_per_rank"],
        "predicted_kv_cache_gib": alone["kv_cells_gib_per_gpu"],
        "predicted_kv_cache_tokens": alone["kv_cache_tokens"],
        "predicted_max_concurrency": alone["sequences_per_rank"],
        "logged": {k: v for k, v in log.as_dict().items() if v is not None},
        "notes": ([log.startup_note] if log.startup_note else [])
        + ([note] if (note := None if engine_version else untagged_note(log)) else [])
        + ([note] if (note := memory_note(conn, log, gpu)) else []),
        "has_kv_line": log.has_kv_line(),
        "terms": terms,
        "question": q,
    }


def memory_note(conn, log: EngineLog, gpu: str) -> str | None:
    """What to say when the log's total_gpu_memory is not the GPU row's reported memory (within GPU_MATCH_GIB): a
    variant of the card, a MIG slice or a driver that reports otherwise; kvreg sizes from the row."""
    if log.total_gpu_memory_gib is None:
        return None
    row = runner(conn).rows("SELECT memory_bytes, reported_memory_bytes FROM gpu WHERE name = :n", {"n": gpu})[0]
    reported = _reported_gib(row)
    if abs(reported - log.total_gpu_memory_gib) <= GPU_MATCH_GIB:
        return None
    return (f"the log's GPU reports {log.total_gpu_memory_gib} GiB where {gpu} reports {reported:.2f} GiB: kvreg "
            f"sizes from {gpu}'s (to follow the log, add a GPU with --reported-memory {log.total_gpu_memory_gib}GiB "
            "and give --gpu)")


def at_limiting_stage(log: EngineLog, pp: int, limiting: int | None) -> EngineLog:
    """At PP > 1 every stage logs its own KV pool: the log with kvreg's limiting stage's line (pp_limiting_stage 0
    the first, 2 the last, 1 a middle one: the smallest of theirs) as its KV cache memory, to set against kvreg's."""
    stages = log.kv_cache_gib_by_stage
    if not stages or limiting is None:
        return log
    pick = {0: [0], 2: [pp - 1]}.get(limiting, range(1, pp - 1))
    logged = [stages[i] for i in pick if i in stages]
    return replace(log, kv_cache_gib=min(logged)) if logged else log


def _error(predicted, logged):
    if predicted is None or logged is None or logged <= 0:
        return None  # a run that did not fit (negative KV memory) has no error fraction: both numbers show
    return (predicted - logged) / logged


# --------------------------------------------------------------------------- a plan's calibration


def calibrate_plan(conn, name: str, *, kv_cache_tokens=None, max_concurrency=None, engine_version=None) -> dict:
    """Record what the engine printed at startup for a plan (its "GPU KV cache size" tokens, its
    "Maximum concurrency" and its version); the plan_capacity view sets them against the figures.
    A value of None leaves the stored one; "none" clears it. Returns the plan_capacity row."""
    plan = get_plan(conn, name)
    given = {"measured_kv_cache_tokens": kv_cache_tokens, "measured_max_concurrency": max_concurrency,
             "measured_engine_version": engine_version}
    if all(v is None for v in given.values()):
        raise KvregError(f"nothing to record for plan {name!r}: give --kv-cache-tokens, --max-concurrency and/or "
                         "--engine-version, as the engine printed them")
    values = {}
    for field, value in given.items():
        if value is None:
            continue
        if isinstance(value, str) and value.strip().lower() == "none":
            values[field] = None
        elif field == "measured_kv_cache_tokens":
            values[field] = check_int(_number_text(value), "--kv-cache-tokens", minimum=0)
        elif field == "measured_max_concurrency":
            values[field] = check_input(field, _concurrency(value))  # its declared bounds (at most 1e9)
        else:
            values[field] = check_name(str(value).strip(), "engine version")
    conn.execute(update(Plan).where(Plan.id == plan["id"]).values(**values))
    return plan_capacity(conn, name)


def calibrate_plan_from_log(conn, name: str, log, source: str) -> tuple[dict, list[str]]:
    """Store what a startup log measured as the plan's calibration: its weights, activation peak and
    non-torch memory become the plan's inputs (later predictions for other contexts, utilizations and KV
    dtypes use them), and its KV-cache lines its measured figures where they belong to the plan's settings.
    Returns the plan_capacity row and notes on what was not stored."""
    spec = plan_spec(conn, name)
    notes: list[str] = []
    if spec["rule"] != log.engine:
        raise KvregError(f"plan {name!r} follows the {spec['rule']} rule but the log is {log.engine}'s: first "
                         f"kvreg plan set {name} --rule {log.engine}")
    for field, flag in (("tp", "TP"), ("pp", "PP")):
        logged = getattr(log, field)
        if logged is not None and logged != spec[field]:
            raise KvregError(f"the log ran at {flag} {logged} but plan {name!r} is at {flag} {spec[field]}: calibrate "
                             f"a plan with the log's layout (kvreg plan set {name} --{field} {logged})")
    if log.model:
        try:
            logged_model = resolve_model(conn, log, None)
        except KvregError:
            logged_model = None
        if logged_model is not None and logged_model != spec["model"]:
            raise KvregError(f"the log served {logged_model} but plan {name!r} is for {spec['model']}: calibrate "
                             "a plan of the same model")
    named = device_gpu(log.device_name) if log.device_name else None
    if named is not None and named["name"] != spec["gpu"]:
        notes.append(f"the log ran on {log.device_name} ({named['name']}) but plan {name!r} is on {spec['gpu']}: its "
                     "measured terms are that GPU's")
    version = logged_release(log) or FORMAT_RELEASE.get(log.format or "")
    note = untagged_note(log, f"the plan keeps its engine version (kvreg plan set {name} --engine-version RELEASE to "
                              "change it)")
    if note:
        notes.append(note)
    changes: dict = measured_terms(log, version)
    if log.engine == "vllm":
        if log.max_num_batched_tokens is not None:
            changes["max_num_batched_tokens"] = log.max_num_batched_tokens
        if log.sampler is not None:  # the backend the log names sizes the sampler warm-up
            changes["sampler"] = log.sampler
    else:
        in_use = sglang_in_use(conn, spec["gpu"], log)
        if in_use is not None:
            changes["non_torch_bytes"] = in_use
    if log.max_num_seqs is not None:  # vLLM warms its sampler up with this many rows; SGLang runs at most this many
        changes["max_num_seqs"] = log.max_num_seqs
    if version is not None:
        changes["engine_version"] = version
    if not changes and not log.has_kv_line():
        raise KvregError("the log shows no memory term (weights, activation peak, non-torch memory) and no KV cache "
                         "line: nothing to calibrate with; give a log with its start-up lines")
    row = validate_plan(conn, {**spec, **changes})
    conn.execute(update(Plan).where(Plan.name == name).values(
        **{k: row[k] for k in (*MEASURED_TERMS, "max_num_batched_tokens", "max_num_seqs", "engine_version",
                               "engine_release", "sampler")},
        calibration_source=source, **dict.fromkeys(CALIBRATION_FIELDS)))
    current = plan_capacity(conn, name)
    log = at_limiting_stage(log, spec["pp"], current.get("pp_limiting_stage"))
    line: dict = {"measured_engine_version": f"{log.engine} {version or '(release not logged)'}"}
    setting = "gpu_memory_utilization" if log.engine == "vllm" else "mem_fraction_static"
    logged_share = getattr(log, setting)
    if logged_share is not None and abs(logged_share - current[setting + "_used"]) > 1e-9:
        notes.append(f"the log's {setting} {logged_share} is not the plan's {current[setting + '_used']}: its KV "
                     "cache lines were not recorded, only its memory terms")
    elif log.has_kv_line():
        line["measured_kv_cache_tokens"] = log.kv_cache_tokens
        line["measured_kv_cache_bytes"] = round(log.kv_cache_gib * GIB) if log.kv_cache_gib is not None else None
        if log.max_concurrency is not None:
            if log.concurrency_tokens == spec["context_tokens"]:
                line["measured_max_concurrency"] = log.max_concurrency
            else:
                notes.append(f"the log's concurrency is for {log.concurrency_tokens:,}-token requests, the plan's "
                             f"context is {spec['context_tokens']:,}: not recorded")
    else:
        notes.append("the log stops before its KV cache lines: kvreg's figures with the log's terms predict them")
    if line.get("measured_kv_cache_bytes") is not None and line["measured_kv_cache_bytes"] < 0:
        line["measured_kv_cache_bytes"] = None
        notes.append("the log's KV cache memory is negative (the model did not fit): not recorded")
    for field in ("measured_kv_cache_tokens", "measured_kv_cache_bytes", "measured_max_concurrency"):
        if line.get(field) is not None:  # as declared (a hand-edited log may print -868,080 tokens or 1e29)
            try:
                line[field] = check_input(field, line[field])
            except KvregError as exc:
                raise KvregError(f"{source}: the log's {exc}") from None
    conn.execute(update(Plan).where(Plan.name == name).values(**line))
    return plan_capacity(conn, name), notes


def _number_text(value):
    """'434,176' as the log prints it -> '434176'."""
    return value.replace(",", "").replace("_", "").strip() if isinstance(value, str) else value


def _concurrency(value) -> float:
    """'3.31x' as the log prints it -> 3.31."""
    text_value = _number_text(value)
    if isinstance(text_value, str) and text_value.lower().endswith("x"):
        text_value = text_value[:-1]
    try:
        number = float(text_value)
    except (TypeError, ValueError):
        raise KvregError(f"--max-concurrency {value!r} is not a number: give it as the log prints it, "
                         "such as 3.31x") from None
    if isinstance(value, bool) or not math.isfinite(number) or number < 0:
        raise KvregError(f"--max-concurrency {value!r} must be a number of at least 0, such as 3.31")
    return number


__all__ = ["compare", "question", "resolve_model", "resolve_gpu", "measured_terms", "at_limiting_stage",
           "logged_release", "untagged_note", "TERMS", "device_gpu",
           "log_model_ids", "calibrate_plan", "calibrate_plan_from_log"]
