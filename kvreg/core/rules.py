"""The allocation rules and the engine settings each one reads, checked before anything is written.

A deployment (a plan, or a `kvreg capacity` question) follows one rule: `theoretical` (SPEC's
"Pool and concurrency"), `vllm` (what vLLM prints at startup) or `sglang` (SGLang's
max_total_num_tokens). The engine settings are stored as given; NULL means the engine's default,
which the figure declarations resolve (kvreg.figures.declarations, docs/engine-rules.md). Nothing
here computes a figure.

Stdlib only: `kvreg capacity` imports this on its fast path.
"""

from __future__ import annotations

import math
import re

from kvreg.core.errors import KvregError
from kvreg.core.units import UnitError, parse_size, parse_tokens

RULES = ("theoretical", "vllm", "sglang")
# The rules of a serving engine: an engine setting of ENGINE_SETTINGS's rule "engine" is read by either.
ENGINE_RULES = ("vllm", "sglang")
# vLLM's top-k/top-p sampler backends (the deployment input `sampler`): PyTorch's own (the sort path, from v0.17 a
# Triton kernel) and FlashInfer's kernel (docs/engine-rules.md, "The sampler's backend").
SAMPLERS = ("torch", "flashinfer")
# Each engine setting: the rule that reads it ("engine": vllm or sglang), its CLI flags (space-separated, the first
# names its option and its messages) and how its option's text reads (parse_engine_options: text as typed, a size with
# its unit, a token count). The one list: the settings' declarations (kvreg.figures.inputs) take their flags here.
ENGINE_SETTINGS = {
    "engine_version": ("engine", "--engine-version", "text"),
    "weights_measured_bytes": ("engine", "--weights-memory", "size"),
    "non_torch_bytes": ("engine", "--non-torch-memory", "size"),
    "gpu_memory_utilization": ("vllm", "--gpu-memory-utilization", "text"),
    "max_num_batched_tokens": ("vllm", "--max-num-batched-tokens", "tokens"),
    "max_concurrent_batches": ("vllm", "--max-concurrent-batches", "text"),
    "max_num_seqs": ("engine", "--max-num-seqs --max-running-requests", "text"),
    "activation_bytes": ("vllm", "--activation-memory", "size"),
    "cuda_graph_bytes": ("vllm", "--cuda-graph-memory", "size"),
    "mem_fraction_static": ("sglang", "--mem-fraction-static", "text"),
    "sampler": ("vllm", "--sampler", "text"),
}
# engine_release is derived from engine_version (release_number) and stored beside it: the figures
# compare release numbers, never version text.
ENGINE_FIELDS = ("rule", *ENGINE_SETTINGS, "engine_release")


def engine_flag(setting: str) -> str:
    """The setting's CLI option as messages name it: --activation-memory for activation_bytes."""
    return ENGINE_SETTINGS[setting][1].split()[0]


_INT_LIMIT = 2**62
_COUNT_LIMIT = 2**31  # token and batch counts are INTEGER columns on PostgreSQL


def check_rule(rule) -> str:
    """theoretical, vllm or sglang; anything else is a one-line error."""
    if rule not in RULES:
        raise KvregError(f"rule {rule!r} is not known: use {', '.join(RULES)} (see docs/engine-rules.md)")
    return rule


def check_sampler(sampler: str | None) -> str | None:
    """torch, flashinfer or None (the release's default); anything else is a one-line error."""
    if sampler is None:
        return None
    if sampler not in SAMPLERS:
        raise KvregError(f"--sampler {sampler!r} is not a vLLM sampler backend: use {' or '.join(SAMPLERS)}, or leave"
                         " it out for the release's default (see docs/engine-rules.md)")
    return sampler


def check_engine_settings(settings: dict, block_size: int | None = None, dp_attention: int = 1) -> dict:
    """The rule and engine settings of a deployment, checked and normalised (a new dict with every
    ENGINE_FIELDS key). A setting that another rule reads is an error: it would silently do nothing."""
    out = {"rule": check_rule(settings.get("rule") or "theoretical")}
    for name in ENGINE_SETTINGS:
        out[name] = settings.get(name)
    for name in ("gpu_memory_utilization", "mem_fraction_static"):
        out[name] = _fraction(out[name], engine_flag(name))
    for name in ("max_num_batched_tokens", "max_concurrent_batches", "max_num_seqs"):
        out[name] = _whole(out[name], engine_flag(name), minimum=1, limit=_COUNT_LIMIT)
    for name in ("activation_bytes", "cuda_graph_bytes", "non_torch_bytes", "weights_measured_bytes"):
        out[name] = _whole(out[name], engine_flag(name), minimum=0)
    out["engine_version"], out["engine_release"] = _version(out["engine_version"])
    out["sampler"] = check_sampler(out["sampler"])
    for name, (rule, _flags, _kind) in ENGINE_SETTINGS.items():
        flag = engine_flag(name)
        if out[name] is not None and out["rule"] != rule and not (rule == "engine" and out["rule"] in _ENGINE):
            wanted = "vllm or --rule sglang" if rule == "engine" else rule
            raise KvregError(f"{flag} is a {_ENGINE.get(rule, 'serving engine')} setting but the rule is "
                             f"{out['rule']}: add --rule {wanted}, or leave {flag} out")
    if out["rule"] == "sglang" and out["max_num_seqs"] is not None and out["max_num_seqs"] < dp_attention:
        raise KvregError(f"--max-running-requests {out['max_num_seqs']} is shared by {dp_attention} DP-attention ranks, "
                         f"none each: give at least {dp_attention} (SGLang divides it among the ranks)")
    if out["rule"] == "vllm" and block_size is not None and block_size < 1:
        raise KvregError("--block-size 0 (no rounding) means nothing to vLLM, which pages every cache: "
                         "give its block size (16 by default)")
    return out


_ENGINE = {"vllm": "vLLM", "sglang": "SGLang"}


def release_number(version: str) -> int:
    """An engine version as the number the figures compare: major x 1,000,000 + minor x 1,000 + patch.
    '0.10.1' -> 10,001; 'v0.6.5' -> 6,005; '1.2rc1' -> 1,002,000; 'vllm 0.11.0' -> 11,000."""
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if not found or int(found.group(2)) > 999 or int(found.group(3) or 0) > 999 or int(found.group(1)) > 999:
        raise KvregError(f"--engine-version {version!r} is not a version: give the engine's release, such as 0.10.1")
    return int(found.group(1)) * 1_000_000 + int(found.group(2)) * 1000 + int(found.group(3) or 0)


def _version(value) -> tuple[str | None, int | None]:
    """--engine-version as stored (text) and its release number (None, None: not given)."""
    if value is None:
        return None, None
    text = str(value).strip()
    if not text or len(text) > 64 or any(ord(c) < 32 for c in text):
        raise KvregError(f"--engine-version {value!r} is not a version: give the engine's release, such as 0.10.1")
    return text, release_number(text)


def _fraction(value, flag: str) -> float | None:
    """A share of GPU memory in (0, 1], as vLLM and SGLang take it."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise KvregError(f"{flag} {value!r} is not a number: give a fraction such as 0.9") from None
    if isinstance(value, bool) or not math.isfinite(number) or not 0 < number <= 1:
        raise KvregError(f"{flag} {value!r} must be above 0 and at most 1 (for example 0.9)")
    return number


def _whole(value, flag: str, *, minimum: int, limit: int = _INT_LIMIT) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise KvregError(f"{flag} must be a whole number, not {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        try:
            value = int(value.strip().replace(",", "").replace("_", ""))
        except ValueError:
            raise KvregError(f"{flag} must be a whole number, not {value!r}") from None
    if not isinstance(value, int):
        raise KvregError(f"{flag} must be a whole number, not {value!r}")
    if value < minimum:
        what = "negative" if value < 0 else "zero"
        raise KvregError(f"{flag} must be at least {minimum}, not {value} ({what} makes no sense here)")
    if value >= limit:
        raise KvregError(f"{flag} {value} is too large (at most {limit - 1:,})")
    return value


# Option name as the CLI passes it -> (setting, how to read it).
# The rule and engine options as their command's function receives them (by the first flag's name) -> (setting, kind).
_OPTIONS = {"rule": ("rule", "text"),
            **{engine_flag(name)[2:].replace("-", "_"): (name, kind) for name, (_rule, _flags, kind) in ENGINE_SETTINGS.items()}}


def parse_engine_options(opts: dict) -> dict:
    """The rule and engine options as typed on the command line -> settings, for the options given
    (None: not given). 'none' clears a setting (`plan set`); sizes read like --kv-cache-memory
    (2GiB, 1.5e9B: a unit is required) and may be 0; token counts like --context (8k, 8K)."""
    out = {}
    for option, (setting, kind) in _OPTIONS.items():
        value = opts.get(option)
        if value is None:
            continue
        flag = "--" + option.replace("_", "-")
        text = str(value).strip()
        if option != "rule" and text.lower() == "none":
            out[setting] = None
        elif kind == "size":
            out[setting] = _size(text, flag, parse_size, UnitError)
        elif kind == "tokens":
            try:
                out[setting] = parse_tokens(text)
            except UnitError as exc:
                raise KvregError(f"{flag}: {exc}") from None
        else:
            out[setting] = text if option in ("rule", "engine_version", "sampler") else value
    return out


def _size(text: str, flag: str, parse_size, unit_error) -> int:
    if text.startswith("-"):
        raise KvregError(f"{flag} {text!r} is negative: give a size such as 2GiB (or 0)")
    try:
        if float(text) == 0:
            return 0
    except ValueError:
        pass
    try:
        return parse_size(text)
    except unit_error as exc:
        raise KvregError(f"{flag}: {exc}") from None
