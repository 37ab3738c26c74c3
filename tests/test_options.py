"""Options read once: `--tp` is parsed by one function for `kvreg capacity`, the plan commands and the
web page, so each says the same thing about the same bad value."""

from __future__ import annotations

import pytest

from kvreg.app.capacity import parse_tp
from kvreg.core.errors import KvregError


@pytest.mark.parametrize("typed, value", [("auto", "auto"), ("1", 1), ("8", 8), (4, 4)])
def test_parse_tp(typed, value):
    assert parse_tp(typed) == value


@pytest.mark.parametrize("typed, message", [("two", "--tp 'two' is not understood: give a whole number or auto"),
                                            ("0", "--tp must be at least 1"), ("1.5", "--tp '1.5' is not understood")])
def test_parse_tp_refuses(typed, message):
    with pytest.raises(KvregError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_tp(typed)


def test_capacity_and_plan_refuse_a_bad_tp_with_one_line(kv, state):
    kv("gpu", "list")  # the registry exists: the refusals below must leave it as it is
    before = state()
    lines = []
    for args in (["capacity", "--model", "Llama-3.1-8B"],
                 ["plan", "add", "p", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM"],
                 ["plan", "solve", "gpus", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--users", "1"]):
        result = kv(*args, "--tp", "two", ok=False)
        assert result.exit_code == 1
        lines.append(result.stderr)
    assert lines == ["Error: --tp 'two' is not understood: give a whole number or auto\n"] * 3
    assert state() == before


def test_capacity_and_plan_add_share_the_deployment_options():
    """One bundle (app/options.deployment_options): the 28 options both commands take say the same,
    except where `kvreg capacity` takes lists or the plan's rule differs (--kv-cache-memory overrides
    --reserve in a what-if; a plan takes one or the other)."""
    from kvreg.cli.capacity import capacity_cmd
    from kvreg.cli.plans import plan_add

    def options(command):
        return {p.opts[0][2:]: p for p in command.params if p.opts[0].startswith("--")}

    cap, plan = options(capacity_cmd), options(plan_add)
    shared = set(cap) & set(plan)
    assert len(shared) == 28  # 27 before --sampler
    # a plan's latency options say what its targets do to its users (plan_latency_options)
    assert sorted(n for n in shared if cap[n].help != plan[n].help) == [
        "context", "gpu", "input-tokens", "kv-cache-memory", "kv-dtype", "model", "output-tokens", "reserve",
        "tp", "tpot-ms"]
    # the output options (format_option), and the concurrency a what-if asks about (a plan's is solved for)
    assert sorted(set(cap) - shared) == ["columns", "concurrency", "format", "wide"]
    # a plan's own: its mix and notes, and what `plan optimize` may change in it (allowance_options)
    assert sorted(set(plan) - shared) == ["allow-gpus", "allow-kv-dtypes", "avg-tokens", "notes", "workload"]
    assert cap["pp"].help == plan["pp"].help == "Pipeline-parallel size."
    # every option one input's own is generated from its declaration (input_option: its flag, type, default, help
    # unless the command words it); by hand only what is no input: the model, GPU and weight dtype named, the mix,
    # the notes, what `plan optimize` may change (allowance_options) and the options that shape the output
    by_hand = sorted(n for n, p in {**cap, **plan}.items() if not getattr(p, "input", None))
    assert by_hand == ["allow-gpus", "allow-kv-dtypes", "columns", "format", "gpu", "model", "notes", "weight-dtype",
                       "wide", "workload"]


def test_a_what_if_field_is_its_inputs_declaration():
    """The what-if page's setting fields take their option, label, tooltip and the rules that read them from the
    declarations (kvreg.figures.inputs): an engine setting's rules follow its declared `engine`,
    under which check_engine_settings takes it ("engine": vLLM or SGLang); each field sets an option of capacity."""
    from kvreg.app.options import CAPACITY, FormField, form_field, option_names

    assert form_field("max_num_seqs") == FormField(
        "max-num-seqs", "max running requests", "vLLM --max-num-seqs, SGLang --max-running-requests", "vllm sglang")
    assert form_field("activation_bytes") == FormField("activation-memory", "activation memory",
                                                       "measured, e.g. 1.2GiB", "vllm")
    assert form_field("mem_fraction_static").rule == "sglang"
    assert form_field("reserve") == FormField("reserve", "Reserve", "share of GPU memory held back", "theoretical")
    assert form_field("kv_cache_memory_bytes")[:2] == ("kv-cache-memory", "KV pool per GPU")
    assert form_field("pp") == FormField("pp", "PP", "", "")  # read under every rule, no tooltip
    known = option_names(CAPACITY)
    for name in ("pp", "gpus_per_node", "dp_attention", "block_size", "reserve", "kv_cache_memory_bytes",
                 "gpu_memory_utilization", "max_num_batched_tokens", "max_concurrent_batches", "max_num_seqs",
                 "activation_bytes", "cuda_graph_bytes", "mem_fraction_static"):
        assert form_field(name).name in known, name
