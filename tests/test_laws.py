"""The laws every capacity figure must obey, for any architecture (hypothesis property tests).

1. Concurrency halves when a full-attention context doubles (no block rounding, or contexts
   that are whole blocks).
2. An fp8 KV cache doubles concurrency against bf16 (when nothing else shares the pool: a
   linear-attention state stays in the model dtype, so it gives less than double).
3. Replication: however large the TP, a GPU holds at least one whole KV head, and the heads of
   a TP group cover every KV head at least once.
4. An MLA latent is not sharded by TP: its bytes per token per GPU are the same at every TP.

Most examples run on the PythonEvaluator over the figure declarations (fast; test_expr.py
proves the evaluator and the views agree). The last test asks the capacity view itself, with
generated models added through kvreg.app.registry.add_model and rolled back.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kvreg.figures.declarations import FIGURES
from kvreg.figures.python import PythonEvaluator

GiB = 2**30
FAST = settings(max_examples=60, deadline=None, database=None)


def figures(**inputs) -> dict:
    """Every figure of one deployment, from its inputs (defaults: one H100 at reserve 0.12, bf16)."""
    row = dict(
        layers=32, full_layers=32, sliding_layers=0, sliding_window=None, chunked_layers=0, attention_chunk_size=None,
        linear_layers=0, linear_state_elements_per_layer=None, linear_state_heads=None, attention_heads=32,
        kv_heads=8, head_dim=128, v_head_dim=128, kv_lora_rank=None, qk_rope_head_dim=None,
        params_total=8_000_000_000, params_active=8_000_000_000, max_position_embeddings=131072,
        kv_dtype="bf16", kv_bytes_per_element=2.0, kv_mla_bytes_per_token_per_layer=None,
        weight_bytes_per_param=2.0, state_bytes_per_element=2.0,
        memory_bytes=80 * GiB, memory_bandwidth_bytes_per_s=3.35e12, price_per_hour=2.5, unit_price=30000.0,
        gpus_per_node=8, tp=1, pp=1, dp_attention=1, context_tokens=131072, avg_tokens=None, reserve=0.12,
        kv_cache_memory_bytes=None, block_size=16, users=None,
        # engine rules (tests/test_engine_rules.py): the theoretical rule, engine knobs unset
        rule="theoretical", indexer_bytes_per_token_per_layer=None, indexer_layers=None,
        kv_scale_bytes_per_token_per_head=None,
        gpu_memory_utilization=None, max_num_batched_tokens=None, max_concurrent_batches=None, activation_bytes=None,
        cuda_graph_bytes=None, mem_fraction_static=None, max_num_seqs=None,
        # engine memory (0006): nothing measured, no reported memory, the latest release
        reported_memory_bytes=None, compute_capability=None, fabric=None, engine_version=None, engine_release=None,
        non_torch_bytes=None,
        weights_measured_bytes=None, hidden_size=None, intermediate_size=None, vocab_size=None,
        # per-kind layouts (Gemma 4, Nemotron-Super): none here
        no_cache_layers=0, sliding_kv_heads=None, sliding_head_dim=None, chunked_kv_heads=None, chunked_head_dim=None,
        # the weights' dtype by name, and no MoE expert layout (0010)
        weight_dtype_name="bf16", experts=None, expert_intermediate_size=None, moe_layers=None,
        # no per-layer kv heads (0017)
        kv_heads_2=None, kv_layers_2=None, kv_heads_3=None, kv_layers_3=None, kv_heads_4=None, kv_layers_4=None,
        expert_hidden_size=None,
    )
    row.update(inputs)
    memo: dict = {}

    def ref(name):
        if name not in memo:
            memo[name] = PythonEvaluator(row.__getitem__, ref).eval(FIGURES[name].expr)
        return memo[name]

    return _Lazy(ref)


class _Lazy(dict):
    """Figures computed on first access."""

    def __init__(self, ref):
        super().__init__()
        self._ref = ref

    def __missing__(self, name):
        return self._ref(name)


# --------------------------------------------------------------------------- strategies

POW2 = [1, 2, 4, 8, 16, 32, 64]


@st.composite
def standard_models(draw) -> dict:
    """A full-attention GQA/MQA/MHA model: KV heads divide the query heads."""
    kv_heads = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    group = draw(st.sampled_from([1, 2, 4, 8]))
    layers = draw(st.integers(1, 128))
    params = draw(st.integers(10**8, 4 * 10**11))
    return dict(layers=layers, full_layers=layers, kv_heads=kv_heads, attention_heads=kv_heads * group,
                head_dim=draw(st.sampled_from([64, 96, 128, 256])), v_head_dim=None,
                params_total=params, params_active=params)


@st.composite
def mla_models(draw) -> dict:
    """A DeepSeek-style MLA model: one latent per layer, kv_heads = attention heads in the config."""
    heads = draw(st.sampled_from([16, 32, 64, 128]))
    layers = draw(st.integers(1, 96))
    params = draw(st.integers(10**9, 10**12))
    return dict(layers=layers, full_layers=layers, kv_heads=heads, attention_heads=heads, head_dim=192,
                v_head_dim=128, kv_lora_rank=draw(st.sampled_from([256, 512])),
                qk_rope_head_dim=draw(st.sampled_from([32, 64])), params_total=params, params_active=params)


def _fill(model: dict) -> dict:
    if model.get("v_head_dim") is None:
        model = {**model, "v_head_dim": model["head_dim"]}
    return model


def valid_tps(model: dict, gpus_per_node: int = 8) -> list[int]:
    """Every TP in the node the tp_valid figure accepts for this model."""
    return [tp for tp in range(1, gpus_per_node + 1) if figures(**model, tp=tp)["tp_valid"]]


tokens_and_blocks = st.one_of(
    # No block rounding: any context.
    st.tuples(st.integers(1, 2**21), st.just(0)),
    # Paged KV: contexts that are whole blocks of 16.
    st.tuples(st.integers(1, 2**17).map(lambda n: 16 * n), st.just(16)),
)
gpus = st.sampled_from([(80 * GiB, "H100"), (141 * GiB, "H200"), (192 * GiB, "MI300X"), (24 * GiB, "RTX-4090")])
reserves = st.sampled_from([0.0, 0.05, 0.12, 0.3])


# --------------------------------------------------------------------------- 1. context doubles


@FAST
@given(model=standard_models(), ctx=tokens_and_blocks, gpu=gpus, reserve=reserves, data=st.data())
def test_concurrency_halves_when_context_doubles(model, ctx, gpu, reserve, data):
    model = _fill(model)
    tp = data.draw(st.sampled_from(valid_tps(model)))
    tokens, block = ctx
    common = dict(model, tp=tp, memory_bytes=gpu[0], reserve=reserve, block_size=block)
    once = figures(**common, context_tokens=tokens)
    twice = figures(**common, context_tokens=2 * tokens)
    assert twice["kv_bytes_per_sequence_per_gpu"] == 2 * once["kv_bytes_per_sequence_per_gpu"]
    assert math.isclose(twice["max_concurrency"] * 2, once["max_concurrency"], rel_tol=1e-12, abs_tol=0.0)
    if once["fits"] and twice["fits"]:
        assert math.isclose(twice["node_concurrency"] * 2, once["node_concurrency"], rel_tol=1e-12, abs_tol=0.0)
    for r in (once, twice):  # a replica that cannot hold one whole sequence serves nothing
        assert r["fits"] or r["node_concurrency"] == 0


@FAST
@given(model=standard_models(), window=st.integers(1, 2**16), sliding=st.integers(0, 64),
       tokens=st.integers(1, 2**20), block=st.sampled_from([0, 16]))
def test_more_context_never_raises_concurrency(model, window, sliding, tokens, block):
    """With sliding-window layers the halving law stops at the window, but concurrency still never grows."""
    model = _fill(model)
    full = model["layers"]
    model.update(layers=full + sliding, sliding_layers=sliding, sliding_window=window)
    once = figures(**model, context_tokens=tokens, block_size=block)
    more = figures(**model, context_tokens=tokens + 1 + tokens // 3, block_size=block)
    assert more["kv_bytes_per_sequence_per_gpu"] >= once["kv_bytes_per_sequence_per_gpu"]
    assert more["max_concurrency"] <= once["max_concurrency"]


# --------------------------------------------------------------------------- 2. fp8 doubles


@FAST
@given(model=st.one_of(standard_models(), mla_models()), ctx=tokens_and_blocks, gpu=gpus, reserve=reserves,
       data=st.data())
def test_fp8_doubles_concurrency(model, ctx, gpu, reserve, data):
    model = _fill(model)
    tp = data.draw(st.sampled_from(valid_tps(model)))
    tokens, block = ctx
    common = dict(model, tp=tp, memory_bytes=gpu[0], reserve=reserve, block_size=block, context_tokens=tokens)
    bf16 = figures(**common, kv_dtype="bf16", kv_bytes_per_element=2.0)
    fp8 = figures(**common, kv_dtype="fp8", kv_bytes_per_element=1.0)
    assert fp8["kv_bytes_per_token_per_gpu"] * 2 == bf16["kv_bytes_per_token_per_gpu"]
    assert math.isclose(fp8["max_concurrency"], 2 * bf16["max_concurrency"], rel_tol=1e-12, abs_tol=0.0)
    assert fp8["kv_pool_tokens"] >= 2 * bf16["kv_pool_tokens"]


@FAST
@given(tokens=st.integers(1, 2**20), linear=st.integers(1, 48), state=st.integers(1, 2**20))
def test_fp8_less_than_doubles_with_a_linear_state(tokens, linear, state):
    """A Gated DeltaNet / Mamba state is kept in the model dtype: an fp8 KV cache does not halve it."""
    hybrid = dict(layers=12 + linear, full_layers=12, linear_layers=linear, kv_heads=2, attention_heads=16,
                  head_dim=256, v_head_dim=256, linear_state_elements_per_layer=state, linear_state_heads=16,
                  context_tokens=tokens, params_total=3 * 10**9, params_active=3 * 10**9)
    bf16 = figures(**hybrid, kv_bytes_per_element=2.0)
    fp8 = figures(**hybrid, kv_dtype="fp8", kv_bytes_per_element=1.0)
    assert fp8["state_bytes_per_sequence_per_gpu"] == bf16["state_bytes_per_sequence_per_gpu"] == linear * state * 2
    assert bf16["max_concurrency"] < fp8["max_concurrency"] < 2 * bf16["max_concurrency"]


# --------------------------------------------------------------------------- 3. replication


@FAST
@given(model=standard_models(), gpus_per_node=st.sampled_from([1, 2, 4, 8, 16, 64]))
def test_a_gpu_never_holds_less_than_one_kv_head(model, gpus_per_node):
    model = _fill(model)
    tps = valid_tps(model, gpus_per_node)
    assert 1 in tps
    total = figures(**model)["kv_bytes_per_token"]
    for tp in tps:
        f = figures(**model, tp=tp, gpus_per_node=gpus_per_node)
        assert f["kv_heads_per_gpu"] >= 1
        assert f["kv_heads_per_gpu"] * tp >= model["kv_heads"]  # every head is held somewhere
        if tp <= model["kv_heads"]:
            assert f["kv_heads_per_gpu"] == model["kv_heads"] // tp  # sharded exactly
        else:
            assert f["kv_heads_per_gpu"] == 1  # replicated, not split further
        # A GPU's share of the cache is never below an even split of the whole.
        assert f["kv_bytes_per_token_per_gpu"] * tp >= total
        assert f["kv_bytes_per_token_per_gpu"] == model["layers"] * f["kv_heads_per_gpu"] * 2 * model["head_dim"] * 2


# --------------------------------------------------------------------------- 4. MLA under TP


@FAST
@given(model=mla_models(), kv=st.sampled_from([(2.0, None), (1.0, None), (0.5, None), (1.0, 656)]))
def test_mla_bytes_per_gpu_do_not_change_with_tp(model, kv):
    per_element, format_bytes = kv
    dtype = dict(kv_bytes_per_element=per_element, kv_mla_bytes_per_token_per_layer=format_bytes)
    per_layer = format_bytes or (model["kv_lora_rank"] + model["qk_rope_head_dim"]) * per_element
    at_tp1 = figures(**model, **dtype)["kv_bytes_per_token"]
    assert at_tp1 == model["layers"] * per_layer
    for tp in valid_tps(model):
        f = figures(**model, **dtype, tp=tp)
        assert f["kv_bytes_per_token_per_gpu"] == at_tp1
        assert f["kv_bytes_per_sequence_per_gpu"] == figures(**model, **dtype)["kv_bytes_per_sequence_per_gpu"]


# --------------------------------------------------------------------------- the same laws, through the view


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    from kvreg.app.access import open_registry

    engine = open_registry(f"sqlite:///{tmp_path_factory.mktemp('laws') / 'registry.db'}")
    yield engine
    engine.dispose()


@settings(max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.one_of(standard_models(), mla_models()), ctx=tokens_and_blocks, data=st.data())
def test_laws_hold_in_the_capacity_view(registry, model, ctx, data):
    """A generated model added with kvreg.app.registry.add_model and asked about with
    kvreg.app.capacity.ask (the capacity view), inside a transaction that is rolled back."""
    from kvreg.app.capacity import Question, ask, valid_tps as view_valid_tps
    from kvreg.app.registry import add_model

    model = _fill(model)
    tokens, block = ctx
    assume(tokens <= 2**20)
    with registry.connect() as conn, conn.begin() as trans:
        add_model(conn, dict(model, name="law-model", weight_dtype="bf16", max_position_embeddings=2 * tokens))
        tps = view_valid_tps(conn, "law-model")
        assert tps == valid_tps(model)
        tp = data.draw(st.sampled_from(tps))
        rows = ask(conn, Question(models=["law-model"], gpus=["H200"], contexts=[tokens, 2 * tokens],
                                  kv_dtypes=["bf16", "fp8"], weight_dtype="bf16", tp=tp, block_size=block))
        trans.rollback()
    got = {(r["context_tokens"], r["kv_dtype"]): r for r in rows}
    one, two = got[(tokens, "bf16")], got[(2 * tokens, "bf16")]
    assert math.isclose(2 * two["max_concurrency"], one["max_concurrency"], rel_tol=1e-12)
    assert math.isclose(got[(tokens, "fp8")]["max_concurrency"], 2 * one["max_concurrency"], rel_tol=1e-12)
    for r in rows:
        assert r["kv_heads_per_gpu"] >= 1
        if model.get("kv_lora_rank"):
            assert r["kv_bytes_per_token_per_gpu"] == r["kv_bytes_per_token"]
