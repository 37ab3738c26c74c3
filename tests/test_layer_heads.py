"""Per-layer kv heads: layers of one model holding different numbers of kv heads (issue 40).

DeciLM (Llama-Nemotron) block_configs give every layer its own attention, with n_heads_in_group query heads per
kv head; DeciLM-7B lists num_key_value_heads_per_layer. The engines build each layer's attention with its own kv
heads: vLLM's nemotron_nas.py (DeciLMDecoderLayer) passes num_kv_heads = num_attention_heads // n_heads_in_group
to DeciLMAttention, a LlamaAttention, which keeps ``self.num_kv_heads = max(1, self.total_num_kv_heads //
tp_size)`` a GPU (vllm/model_executor/models/llama.py, LlamaAttention.__init__: the kv heads are split over TP,
or replicated when TP exceeds them). Each such layer's KV cache spec has its own size; all being full attention of
one block size, vLLM's get_kv_cache_groups puts them in one UniformTypeKVCacheSpecs group whose page is the sum of
the layers' pages (vllm/v1/kv_cache_interface.py). kvreg keeps kv_heads (the count most full layers hold) and up
to three other counts with the full layers holding them (kv_heads_N, kv_layers_N).

Evidence: nvidia__Llama-3_1-Nemotron-Ultra-253B-v1.json is the real config (tests/data/hf-configs/MANIFEST.md):
162 block_configs, 64 attention layers of n_heads_in_group 16 (8 of its 128 query heads' kv heads) and 98 no-op.
No public copy of a config whose published layers differ in kv heads (Llama-3_1-Nemotron-51B-Instruct, DeciLM-7B)
was found to vendor, so the per-layer cases below are that real file with n_heads_in_group edited in 14 layers,
and a num_key_value_heads_per_layer list built the DeciLM-7B way; each is named as constructed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvreg.app.access import open_registry
from kvreg.app.capacity import Question, ask
from kvreg.app.registry import add_model
from kvreg.cli import cli
from kvreg.core.errors import KvregError
from kvreg.interchange.hf.config import ConfigError
from kvreg.interchange.hf.row import import_path, model_from_config

DATA = Path(__file__).parent / "data" / "hf-configs"
ULTRA = DATA / "nvidia__Llama-3_1-Nemotron-Ultra-253B-v1.json"
TPS = (1, 2, 4, 8)
BYTES_PER_HEAD = 2 * 128 * 2  # K and V of head_dim 128 (16,384 / 128 query heads) in bf16: 512 B a token


def ultra() -> dict:
    return json.loads(ULTRA.read_text())


def ultra_varied() -> dict:
    """Constructed: the real Ultra-253B config with n_heads_in_group 32 (4 kv heads) in its first 10 attention
    layers and 64 (2 kv heads) in the next 4; the other 50 keep 16 (8 kv heads)."""
    config = ultra()
    attention = [b["attention"] for b in config["block_configs"] if not b["attention"]["no_op"]]
    for a in attention[:10]:
        a["n_heads_in_group"] = 32
    for a in attention[10:14]:
        a["n_heads_in_group"] = 64
    return config


# Constructed the DeciLM-7B way (model_type "deci", a Llama with num_key_value_heads_per_layer): 32 layers of 32
# query heads of 128, 16 layers with 4 kv heads, 8 with 2 and 8 with 1.
DECI_PER_LAYER = {
    "architectures": ["DeciLMForCausalLM"], "model_type": "deci", "torch_dtype": "bfloat16", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": None,
    "num_key_value_heads_per_layer": [4] * 16 + [2] * 8 + [1] * 8, "max_position_embeddings": 8192,
    "vocab_size": 32000, "tie_word_embeddings": False,
}


# ------------------------------------------------------------------------------------------ import


def test_ultra_real_config_keeps_eight_kv_heads_in_its_64_attention_layers():
    r, _ = import_path(ULTRA)
    assert (r["layers"], r["full_layers"], r["no_cache_layers"]) == (64, 64, 98)
    assert (r["attention_heads"], r["kv_heads"], r["head_dim"]) == (128, 128 // 16, 16384 // 128) == (128, 8, 128)
    assert all(r[f"kv_{what}_{n}"] is None for n in (2, 3, 4) for what in ("heads", "layers"))


def test_block_configs_with_different_kv_heads_become_layer_groups():
    r, _ = model_from_config(ultra_varied(), name="x", source="constructed")
    assert (r["full_layers"], r["kv_heads"]) == (64, 8)  # 50 layers hold 8: the row's kv_heads
    assert (r["kv_heads_2"], r["kv_layers_2"], r["kv_heads_3"], r["kv_layers_3"]) == (4, 10, 2, 4)
    assert r["kv_heads_4"] is None and r["kv_layers_4"] is None
    assert "8 kv heads in 50 layers, 4 kv heads in 10 layers, 2 kv heads in 4 layers" in r["notes"]
    # each attention layer's K and V projections at its own kv heads: 10 x (8 - 4) + 4 x (8 - 2) = 64 heads fewer
    same, _ = import_path(ULTRA)
    assert same["params_total"] - r["params_total"] == 64 * 2 * 16384 * 128 == 268_435_456


def test_num_key_value_heads_per_layer_becomes_layer_groups():
    r, _ = model_from_config(DECI_PER_LAYER, name="x", source="constructed")
    assert (r["kv_heads"], r["kv_heads_2"], r["kv_layers_2"], r["kv_heads_3"], r["kv_layers_3"]) == (4, 2, 8, 1, 8)
    listed = {**DECI_PER_LAYER, "num_key_value_heads": DECI_PER_LAYER["num_key_value_heads_per_layer"]}
    del listed["num_key_value_heads_per_layer"]
    assert model_from_config(listed, name="x", source="constructed")[0]["kv_layers_3"] == 8  # a list in the usual key


def test_more_kv_head_counts_than_kvreg_keeps_are_refused_naming_the_key():
    config = {**DECI_PER_LAYER, "num_key_value_heads_per_layer": [8] * 8 + [4] * 8 + [2] * 8 + [1] * 4 + [16] * 4}
    with pytest.raises(ConfigError, match=r"^constructed: num_key_value_heads_per_layer gives the attention layers 5 "
                                          r"kv head counts \(16 kv heads in 4 layers, .*\); kvreg keeps at most 4"):
        model_from_config(config, name="x", source="constructed")


def test_per_layer_kv_heads_must_match_the_layers_and_divide_the_query_heads():
    short = {**DECI_PER_LAYER, "num_key_value_heads_per_layer": [4] * 31}
    with pytest.raises(ConfigError, match="num_key_value_heads_per_layer lists 31 values but the model has 32 layers"):
        model_from_config(short, name="x", source="constructed")
    odd = {**DECI_PER_LAYER, "num_key_value_heads_per_layer": [4] * 31 + [3]}
    with pytest.raises(ConfigError, match="3 kv heads do not divide the 32 attention heads"):
        model_from_config(odd, name="x", source="constructed")


def test_per_layer_kv_heads_beside_sliding_layers_are_refused():
    config = ultra_varied()
    for block in config["block_configs"]:
        if not block["attention"]["no_op"]:
            block["attention"]["window_length"] = 4096
            break
    with pytest.raises(ConfigError, match="in a model with sliding, chunked or linear layers; kvreg keeps per-layer "
                                          "kv heads for full attention only"):
        model_from_config(config, name="x", source="constructed")


# ----------------------------------------------------------------------------------- the figures


@pytest.fixture(scope="module")
def registry(module_db_url):
    engine = open_registry(module_db_url)
    with engine.begin() as conn:
        add_model(conn, {**import_path(ULTRA)[0], "name": "Ultra"})
        add_model(conn, {**model_from_config(ultra_varied(), name="Ultra-varied", source="constructed")[0]})
    yield engine
    engine.dispose()


def per_gpu(engine, model: str, tp: int, rule: str = "theoretical") -> dict:
    with engine.connect() as conn:
        rows = ask(conn, Question(models=[model], contexts=[8192, 131072], tp=tp, gpus=["B200"], block_size=16,
                                  rule=rule))
    return {r["context_tokens"]: r for r in rows}


def test_ultra_bytes_per_gpu_at_tp_1_2_4_8(registry):
    for tp in TPS:
        token = 64 * max(1, 8 // tp) * BYTES_PER_HEAD  # 262,144 / 131,072 / 65,536 / 32,768 B
        got = per_gpu(registry, "Ultra", tp)
        assert got[8192]["kv_bytes_per_token_per_gpu"] == got[8192]["kv_bytes_per_token_full_per_gpu"] == token, tp
        assert (got[8192]["kv_bytes_per_sequence_per_gpu"], got[131072]["kv_bytes_per_sequence_per_gpu"]) == (
            token * 8192, token * 131072), tp


@pytest.mark.parametrize("tp, heads", [
    (1, 50 * 8 + 10 * 4 + 4 * 2),  # 448 heads: 229,376 B a token
    (2, 50 * 4 + 10 * 2 + 4 * 1),  # 224: 114,688 B
    (4, 50 * 2 + 10 * 1 + 4 * 1),  # 114: the 2-head layers replicate their heads (max(1, 2 // 4)): 58,368 B
    (8, 50 * 1 + 10 * 1 + 4 * 1),  # 64: every layer holds one whole head: 32,768 B
])
def test_per_layer_kv_heads_bytes_per_gpu(registry, tp, heads):
    # SGLang refuses such a model (configs/model_config.py get_total_num_kv_heads: "Variable GQA (VGQA) is not yet
    # supported for nemotron-nas in sglang"), so only the theoretical and vLLM readings are asked
    for rule in ("theoretical", "vllm"):
        got = per_gpu(registry, "Ultra-varied", tp, rule)
        token = heads * BYTES_PER_HEAD
        assert got[8192]["kv_bytes_per_token_per_gpu"] == got[8192]["kv_bytes_per_token_full_per_gpu"] == token
        assert (got[8192]["kv_bytes_per_sequence_per_gpu"], got[131072]["kv_bytes_per_sequence_per_gpu"]) == (
            token * 8192, token * 131072)
        assert got[8192]["tp_valid"] == 1
    assert per_gpu(registry, "Ultra-varied", 1)[8192]["kv_bytes_per_token"] == 448 * BYTES_PER_HEAD == 229_376


def test_sglang_does_not_serve_per_layer_kv_heads(registry):
    """SGLang refuses variable GQA (python/sglang/srt/configs/model_config.py, get_total_num_kv_heads: "Variable GQA
    (VGQA) is not yet supported for nemotron-nas in sglang"): under its rule the model does not fit, saying why; the
    real Ultra config, one kv head count in every layer, is served."""
    varied = per_gpu(registry, "Ultra-varied", 8, "sglang")[8192]
    assert (varied["fits"], varied["node_concurrency"], varied["reason"]) == (
        0, 0, "SGLang does not serve a model whose layers differ in kv heads (variable GQA)")
    assert per_gpu(registry, "Ultra-varied", 8, "vllm")[8192]["fits"] == 1
    assert per_gpu(registry, "Ultra", 8, "sglang")[8192]["fits"] == 1


def test_vllm_page_sums_each_layers_page(registry):
    """One UniformTypeKVCacheSpecs group: a block is every layer's page at its own kv heads, 16 tokens x 114 heads x
    512 B = 933,888 B at TP4 (a page sized to the 8-head layers would be 16 x 64 x 2 x 512 = 1,048,576 B)."""
    for tp in TPS:
        r = per_gpu(registry, "Ultra-varied", tp, "vllm")[8192]
        assert r["page_bytes_per_gpu"] == r["kv_block_tokens"] * r["kv_bytes_per_token_per_gpu"], tp
    assert per_gpu(registry, "Ultra-varied", 4, "vllm")[8192]["page_bytes_per_gpu"] == 16 * 114 * 512 == 933_888


def test_a_tp_that_splits_a_groups_kv_heads_unevenly_is_not_valid(db_url):
    """Constructed: 48 query heads, 24 layers with 12 kv heads and 8 with 6. TP 4 divides 48 and 12 but would split
    6 kv heads 1.5 a GPU (vLLM asserts total_num_kv_heads % tp_size == 0): not valid; TP 2, 3 and 6 are."""
    config = {**DECI_PER_LAYER, "num_attention_heads": 48, "hidden_size": 6144, "num_hidden_layers": 32,
              "num_key_value_heads_per_layer": [12] * 24 + [6] * 8}
    engine = open_registry(db_url)
    with engine.begin() as conn:
        add_model(conn, model_from_config(config, name="six", source="constructed")[0])
    with engine.connect() as conn:
        for tp in (1, 2, 3, 6):
            (r,) = ask(conn, Question(models=["six"], contexts=[8192], tp=tp, gpus=["B200"]))
            assert r["kv_bytes_per_token_per_gpu"] == (24 * max(1, 12 // tp) + 8 * max(1, 6 // tp)) * 512, tp
        with pytest.raises(KvregError, match="TP 4 is not valid for six .* valid TPs in a 8-GPU node are 1, 2, 3, 6$"):
            ask(conn, Question(models=["six"], contexts=[8192], tp=4, gpus=["B200"]))
    engine.dispose()


def test_model_show_layers_lists_each_kv_head_group(tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", db, "init"]).exit_code == 0
    path = tmp_path / "Ultra-varied.json"
    path.write_text(json.dumps(ultra_varied()))
    out = runner.invoke(cli, ["--db", db, "model", "import", str(path), "--params-b", "253"])
    assert out.exit_code == 0, out.output
    out = runner.invoke(cli, ["--db", db, "model", "show", "Ultra-varied", "--layers", "--tp", "4", "--format", "json"])
    assert out.exit_code == 0, out.output
    groups = [(g["kind"], g["layers"], g["layers_per_gpu"], g["kv_heads_per_gpu"], g["bytes_per_token_per_gpu"])
              for g in json.loads(out.output)]
    assert groups == [("full", 50, 50, 2, 50 * 2 * 512), ("full", 10, 10, 1, 10 * 1 * 512),
                      ("full", 4, 4, 1, 4 * 1 * 512), ("none", 98, None, None, 0)]
    assert sum(g[4] for g in groups) == 114 * 512  # the per-GPU figure of the test above at TP4
    check = runner.invoke(cli, ["model", "check", str(path), "--format", "json"])
    assert json.loads(check.output)[0]["kv_head_groups"] == [{"kv_heads": 4, "layers": 10}, {"kv_heads": 2, "layers": 4}]


# ------------------------------------------------------------------------------------ the registry


def test_the_registry_refuses_half_a_group_and_groups_holding_every_full_layer(db_url):
    engine = open_registry(db_url)
    base = {**import_path(ULTRA)[0], "name": "u"}
    with engine.begin() as conn:
        with pytest.raises(KvregError, match="kv_heads_2 and kv_layers_2 go together"):
            add_model(conn, {**base, "kv_heads_2": 4})
        with pytest.raises(KvregError, match="at least one of the 64 full layers must hold kv_heads"):
            add_model(conn, {**base, "kv_heads_2": 4, "kv_layers_2": 64})
        with pytest.raises(KvregError, match=r"kv_heads_3 \(3\) must divide attention_heads \(128\)"):
            add_model(conn, {**base, "kv_heads_3": 3, "kv_layers_3": 1})
    engine.dispose()


def test_model_add_takes_kv_head_groups(tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", db, "init"]).exit_code == 0
    base = ["--db", db, "model", "add", "V", "--layers", "64", "--kv-heads", "8", "--attention-heads", "128",
            "--head-dim", "128", "--params-b", "253"]
    out = runner.invoke(cli, [*base, "--kv-head-group", "4by10"])
    assert out.exit_code != 0 and "--kv-head-group '4by10' is not HEADSxLAYERS" in out.output
    out = runner.invoke(cli, [*base, "--kv-head-group", "4x10", "--kv-head-group", "2x4"])
    assert out.exit_code == 0, out.output
    out = runner.invoke(cli, ["--db", db, "capacity", "--model", "V", "--gpu", "B200", "--tp", "4", "--context", "8K",
                              "--format", "json"])
    assert json.loads(out.output)[0]["kv_bytes_per_token_per_gpu"] == 114 * BYTES_PER_HEAD  # as Ultra-varied at TP4
