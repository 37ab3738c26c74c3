"""A deployment's rule and engine settings, read from their options and checked before anything is written.

The engine settings are the inputs declared with the rule that reads them (kvreg.figures.inputs, `engine`):
their flags, bounds and the way their option's text reads all come from that declaration. They are stored as
given; NULL means the engine's default, which the figure declarations resolve (docs/engine-rules.md).

Standard library only: `kvreg capacity` checks its engine options here on its fast path.
"""

from __future__ import annotations

from kvreg.app.values import declared_value, read_option
from kvreg.core.errors import KvregError
from kvreg.core.rules import check_rule, check_sampler, release_number
from kvreg.figures.inputs import ENGINE_SETTINGS

# engine_release is derived from engine_version (release_number) and stored beside it: the figures
# compare release numbers, never version text.
ENGINE_FIELDS = ("rule", *ENGINE_SETTINGS, "engine_release")
_ENGINE = {"vllm": "vLLM", "sglang": "SGLang"}
# Checked as text, not as numbers: the release (as given, and its number) and the sampler backend (one of SAMPLERS).
_TEXT = {"engine_version", "sampler"}


def engine_flag(setting: str) -> str:
    """The setting's CLI option as messages name it: --activation-memory for activation_bytes."""
    return ENGINE_SETTINGS[setting].flag.split()[0]


def check_engine_settings(settings: dict, block_size: int | None = None, dp_attention: int = 1) -> dict:
    """The rule and engine settings of a deployment, checked as declared and normalised (a new dict with every
    ENGINE_FIELDS key). A setting that another rule reads is an error: it would silently do nothing."""
    out = {"rule": check_rule(settings.get("rule") or "theoretical")}
    for name, decl in ENGINE_SETTINGS.items():
        value = settings.get(name)
        out[name] = value if name in _TEXT else declared_value(decl, value, engine_flag(name))
    out["engine_version"], out["engine_release"] = _version(out["engine_version"])
    out["sampler"] = check_sampler(out["sampler"])
    for name, decl in ENGINE_SETTINGS.items():
        flag = engine_flag(name)
        if out[name] is not None and out["rule"] not in decl.rules:
            wanted = "vllm or --rule sglang" if decl.engine == "engine" else decl.engine
            raise KvregError(f"{flag} is a {_ENGINE.get(decl.engine, 'serving engine')} setting but the rule is "
                             f"{out['rule']}: add --rule {wanted}, or leave {flag} out")
    if out["rule"] == "sglang" and out["max_num_seqs"] is not None and out["max_num_seqs"] < dp_attention:
        raise KvregError(f"--max-running-requests {out['max_num_seqs']} is shared by {dp_attention} DP-attention ranks, "
                         f"none each: give at least {dp_attention} (SGLang divides it among the ranks)")
    if out["rule"] == "vllm" and block_size is not None and block_size < 1:
        raise KvregError("--block-size 0 (no rounding) means nothing to vLLM, which pages every cache: "
                         "give its block size (16 by default)")
    return out


def check_release_engine(version: str | None, rule: str | None) -> None:
    """A release given as text that names the other engine ('vllm 0.11.0' under SGLang's rule) is an error: its
    number would be read as that engine's release. Checked where the release or the rule is given (a capacity
    question, a new plan, a plan's change of either), not on every stored row: a plan stored before this check keeps
    working until one of them is changed."""
    rule = str(rule or "theoretical").strip().lower()  # as typed on a capacity question
    named = [e for e in _ENGINE if e in (version or "").lower()]
    if named and rule in _ENGINE and named != [rule]:
        raise KvregError(f"--engine-version {version!r} names {' and '.join(_ENGINE[e] for e in named)} but the rule "
                         f"is {rule}: give {_ENGINE[rule]}'s release, or --rule {named[0]}")


def _version(value) -> tuple[str | None, int | None]:
    """--engine-version as stored (text) and its release number (None, None: not given)."""
    if value is None:
        return None, None
    if not isinstance(value, str):  # a file's number: 0.10 would be read as 0.1, another release
        raise KvregError(f"--engine-version {value!r} is a number: write the release as text, \"0.10.1\", so that"
                         " its digits are kept")
    text = value.strip()
    if not text or len(text) > 64 or any(ord(c) < 32 for c in text):
        raise KvregError(f"--engine-version {value!r} is not a version: give the engine's release, such as 0.10.1")
    return text, release_number(text)


# The rule and engine options as their command's function receives them (by the first flag's name) -> setting.
_OPTIONS = {"rule": "rule", **{engine_flag(name)[2:].replace("-", "_"): name for name in ENGINE_SETTINGS}}


def parse_engine_options(opts: dict) -> dict:
    """The rule and engine options as typed on the command line -> settings, for the options given
    (None: not given). 'none' clears a setting (`plan set`); a setting declared in bytes reads like
    --kv-cache-memory (2GiB, 1.5e9B: a unit is required) and may be 0, one in tokens like --context (8k, 8K),
    any other as typed."""
    out = {}
    for option, setting in _OPTIONS.items():
        value = opts.get(option)
        if value is None:
            continue
        flag = "--" + option.replace("_", "-")
        text = str(value).strip()
        if option != "rule" and text.lower() == "none":
            out[setting] = None
        elif setting in ("rule", *_TEXT):
            out[setting] = text
        else:
            out[setting] = read_option(ENGINE_SETTINGS[setting], text, flag)
    return out
