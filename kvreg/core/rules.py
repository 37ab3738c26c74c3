"""The allocation rules, vLLM's sampler backends and an engine release's number.

A deployment (a plan, or a `kvreg capacity` question) follows one rule: `theoretical` (SPEC's
"Pool and concurrency"), `vllm` (what vLLM prints at startup) or `sglang` (SGLang's
max_total_num_tokens). The engine settings each rule reads are inputs declared with their rule
(kvreg.figures.inputs, `engine`), checked by kvreg.app.engine. Nothing here computes a figure.

Stdlib only: `kvreg capacity` imports this on its fast path.
"""

from __future__ import annotations

import re

from kvreg.core.errors import KvregError

RULES = ("theoretical", "vllm", "sglang")
# The rules of a serving engine: an engine setting declared for the rule "engine" is read by either.
ENGINE_RULES = ("vllm", "sglang")
# vLLM's top-k/top-p sampler backends (the deployment input `sampler`): PyTorch's own (the sort path, from v0.17 a
# Triton kernel) and FlashInfer's kernel (docs/engine-rules.md, "The sampler's backend").
SAMPLERS = ("torch", "flashinfer")


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


def release_number(version: str) -> int:
    """An engine version as the number the figures compare: major x 1,000,000 + minor x 1,000 + patch.
    '0.10.1' -> 10,001; 'v0.6.5' -> 6,005; '1.2rc1' -> 1,002,000; 'vllm 0.11.0' -> 11,000."""
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if not found or int(found.group(2)) > 999 or int(found.group(3) or 0) > 999 or int(found.group(1)) > 999:
        raise KvregError(f"--engine-version {version!r} is not a version: give the engine's release, such as 0.10.1")
    return int(found.group(1)) * 1_000_000 + int(found.group(2)) * 1000 + int(found.group(3) or 0)
