"""Importing Hugging Face config.json files (kvreg.interchange.hf).

The real configs in tests/data/hf-configs (public files; sources in its MANIFEST.md) are imported one by one and every architecture field
is checked against the table below; KV bytes per token are recomputed here, with the arithmetic
written out, and compared with SPEC's golden figures. Bad inputs must fail with one-line messages
that name the file, the problem and the fix.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import Session, SQLModel, create_engine

from kvreg.db.tables import MODEL_FIELDS, Dtype, Model
from kvreg.interchange.hf.config import ConfigError
from kvreg.interchange.hf.read import read_config
from kvreg.interchange.hf.row import import_path, import_text, model_from_config

from conftest import HF_CONFIGS as CONFIG_DIR  # tests/data/hf-configs, vendored with MANIFEST.md


# file: (layers, full, sliding, window, linear, linear state elements, heads, kv_heads, head_dim,
#        v_head_dim, kv_lora_rank, qk_rope_head_dim, weight_dtype, max_position_embeddings)
EXPECTED = {
    "meta-llama__Llama-3.1-8B.json": (32, 32, 0, None, 0, None, 32, 8, 128, 128, None, None, "bf16", 131072),
    "meta-llama__Llama-3.1-70B.json": (80, 80, 0, None, 0, None, 64, 8, 128, 128, None, None, "bf16", 131072),
    "meta-llama__Llama-3.1-405B.json": (126, 126, 0, None, 0, None, 128, 8, 128, 128, None, None, "bf16", 131072),
    "meta-llama__Meta-Llama-3-8B.json": (32, 32, 0, None, 0, None, 32, 8, 128, 128, None, None, "bf16", 8192),
    "meta-llama__Llama-2-7b-hf.json": (32, 32, 0, None, 0, None, 32, 32, 128, 128, None, None, "fp16", 4096),
    # Qwen2.5 carries sliding_window 131072 with use_sliding_window false: no sliding layers.
    "Qwen__Qwen2.5-7B.json": (28, 28, 0, None, 0, None, 28, 4, 128, 128, None, None, "bf16", 131072),
    "Qwen__Qwen2.5-72B.json": (80, 80, 0, None, 0, None, 64, 8, 128, 128, None, None, "bf16", 131072),
    "Qwen__Qwen3-8B.json": (36, 36, 0, None, 0, None, 32, 8, 128, 128, None, None, "bf16", 40960),
    "Qwen__Qwen3-235B-A22B.json": (94, 94, 0, None, 0, None, 64, 4, 128, 128, None, None, "bf16", 40960),
    # full_attention_interval 4: 12 full + 36 Gated DeltaNet layers;
    # state (2*16*128 + 32*128) * (4-1) conv + 32*128*128 recurrent = 548,864 elements.
    "Qwen__Qwen3-Next-80B-A3B-Thinking.json": (48, 12, 0, None, 36, 548_864, 16, 2, 256, 256, None, None, "bf16", 262144),
    # MLA: head_dim = qk_nope 128 + qk_rope 64; kv_heads as the config says (irrelevant to the cache).
    "deepseek-ai__DeepSeek-V3.json": (61, 61, 0, None, 0, None, 128, 128, 192, 128, 512, 64, "fp8_e4m3", 163840),
    "moonshotai__Kimi-K2-Instruct.json": (61, 61, 0, None, 0, None, 64, 64, 192, 128, 512, 64, "fp8_e4m3", 131072),
    # layer_types alternates sliding/full; mxfp4 weights are recorded as fp4.
    "openai__gpt-oss-120b.json": (36, 18, 18, 128, 0, None, 64, 8, 64, 64, None, None, "fp4", 131072),
    "zai-org__GLM-4.5.json": (92, 92, 0, None, 0, None, 96, 8, 128, 128, None, None, "bf16", 131072),
    # multi_query_group_num 2, kv_channels 128, seq_length 131072.
    "THUDM__chatglm3-6b-128k.json": (28, 28, 0, None, 0, None, 32, 2, 128, 128, None, None, "fp16", 131072),
    # n_layer 60, n_head 128, n_head_kv 8, hidden 8192 / 128 = 64; no context in the config: 2048.
    "tiiuae__falcon-40b.json": (60, 60, 0, None, 0, None, 128, 8, 64, 64, None, None, "bf16", 2048),
    # Gemma-2 without layer_types: even layers slide (window 4096), odd layers are global.
    "google__gemma-2-9b-it.json": (42, 21, 21, 4096, 0, None, 16, 8, 256, 256, None, None, "bf16", 8192),
    # Qwen2.5-VL: the text model at the top level (no text_config), use_sliding_window false; its vision tower is
    # counted apart (tests/test_import_towers.py).
    "Qwen__Qwen2.5-VL-7B-Instruct.json": (28, 28, 0, None, 0, None, 28, 4, 128, 128, None, None, "bf16", 128000),
}
COLUMNS = (
    "layers", "full_layers", "sliding_layers", "sliding_window", "linear_layers",
    "linear_state_elements_per_layer", "attention_heads", "kv_heads", "head_dim", "v_head_dim",
    "kv_lora_rank", "qk_rope_head_dim", "weight_dtype", "max_position_embeddings",
)

# Published parameter counts (billions): total, active. The estimate must land within 10% of the
# total; checked so a broken estimator is caught, not to pin its exact output.
PUBLISHED_PARAMS_B = {
    "meta-llama__Llama-3.1-8B.json": (8.03, 8.03),
    "meta-llama__Llama-3.1-70B.json": (70.6, 70.6),
    "meta-llama__Llama-3.1-405B.json": (405.9, 405.9),
    "meta-llama__Meta-Llama-3-8B.json": (8.03, 8.03),
    "meta-llama__Llama-2-7b-hf.json": (6.74, 6.74),
    "Qwen__Qwen2.5-7B.json": (7.62, 7.62),
    "Qwen__Qwen2.5-72B.json": (72.7, 72.7),
    "Qwen__Qwen3-8B.json": (8.19, 8.19),
    "Qwen__Qwen3-235B-A22B.json": (235, 22),
    "Qwen__Qwen3-Next-80B-A3B-Thinking.json": (80, 3),
    "deepseek-ai__DeepSeek-V3.json": (671, 37),
    "moonshotai__Kimi-K2-Instruct.json": (1040, 32),
    "openai__gpt-oss-120b.json": (116.8, 5.1),
    "zai-org__GLM-4.5.json": (355, 32),
    "THUDM__chatglm3-6b-128k.json": (6.24, 6.24),
    "tiiuae__falcon-40b.json": (41.8, 41.8),
    "google__gemma-2-9b-it.json": (9.24, 9.24),
    "Qwen__Qwen2.5-VL-7B-Instruct.json": (7.62, 7.62),  # the language model: 8,292,166,656 less the tower's 676,550,144
}


# ------------------------------------------------------------------------------ real configs


def test_every_config_in_the_folder_has_expectations():
    """Each vendored config is checked here or, for the 2025-2026 layouts, in test_import_layouts.py,
    test_import_hybrids.py or test_layer_heads.py."""
    names = {p.name for p in CONFIG_DIR.glob("*.json")}
    layouts = "".join((Path(__file__).parent / f).read_text(encoding="utf-8")
                      for f in ("test_import_layouts.py", "test_import_hybrids.py", "test_layer_heads.py"))
    assert sorted(n for n in names if n not in EXPECTED and n not in layouts) == []
    assert set(EXPECTED) <= names


@pytest.mark.parametrize("file", sorted(EXPECTED))
def test_architecture_fields(file):
    path = CONFIG_DIR / file
    row, _ = import_path(path)
    assert tuple(row[c] for c in COLUMNS) == EXPECTED[file]
    assert row["full_layers"] + row["sliding_layers"] + row["chunked_layers"] + row["linear_layers"] == row["layers"]
    assert row["chunked_layers"] == 0 and row["attention_chunk_size"] is None
    assert row["source"] == file
    assert row["source_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert row["name"] == file.split("__", 1)[1].removesuffix(".json")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row["imported_at"])
    assert set(row) <= set(MODEL_FIELDS)


def test_linear_state_details_of_qwen3_next():
    row, _ = import_path(CONFIG_DIR / "Qwen__Qwen3-Next-80B-A3B-Thinking.json")
    assert row["linear_state_heads"] == 16  # linear_num_key_heads
    assert row["linear_state_dtype"] is None  # no mamba_ssm_cache_dtype: the model's dtype


@pytest.mark.parametrize(
    "file, golden",
    [
        ("meta-llama__Llama-3.1-8B.json", 32 * 8 * (128 + 128) * 2),  # 131,072
        ("meta-llama__Llama-3.1-70B.json", 80 * 8 * (128 + 128) * 2),  # 327,680
        ("meta-llama__Llama-3.1-405B.json", 126 * 8 * (128 + 128) * 2),  # 516,096
        ("Qwen__Qwen2.5-7B.json", 28 * 4 * (128 + 128) * 2),  # 57,344
        ("Qwen__Qwen3-8B.json", 36 * 8 * (128 + 128) * 2),  # 147,456
        ("Qwen__Qwen3-235B-A22B.json", 94 * 4 * (128 + 128) * 2),  # 192,512
        ("Qwen__Qwen3-Next-80B-A3B-Thinking.json", 12 * 2 * (256 + 256) * 2),  # 24,576
        ("zai-org__GLM-4.5.json", 92 * 8 * (128 + 128) * 2),  # 376,832
        ("THUDM__chatglm3-6b-128k.json", 28 * 2 * (128 + 128) * 2),  # 28,672
        ("deepseek-ai__DeepSeek-V3.json", 61 * (512 + 64) * 2),  # MLA latent: 70,272
    ],
)
def test_kv_bytes_per_token_bf16_matches_spec(file, golden):
    row, _ = import_path(CONFIG_DIR / file)
    if row["kv_lora_rank"] is None:
        kv_bytes = row["full_layers"] * row["kv_heads"] * (row["head_dim"] + row["v_head_dim"]) * 2
    else:
        kv_bytes = row["layers"] * (row["kv_lora_rank"] + row["qk_rope_head_dim"]) * 2
    assert kv_bytes == golden
    spec = {131_072, 327_680, 516_096, 57_344, 147_456, 192_512, 24_576, 376_832, 28_672, 70_272}
    assert golden in spec  # the arithmetic above reproduces SPEC's figure, not a new one


@pytest.mark.parametrize("file", sorted(PUBLISHED_PARAMS_B))
def test_parameter_estimate_is_close_and_says_so(file):
    row, warnings = import_path(CONFIG_DIR / file)
    total_b, active_b = PUBLISHED_PARAMS_B[file]
    assert row["params_total"] == pytest.approx(total_b * 1e9, rel=0.10)
    assert any("ESTIMATE" in w and "--params-b" in w for w in warnings)
    assert "ESTIMATE" in row["notes"]
    if total_b == active_b:
        assert row["params_active"] == row["params_total"]
    else:
        assert row["params_active"] < row["params_total"]
        assert row["params_active"] == pytest.approx(active_b * 1e9, rel=0.30)  # conventions differ (embeddings)


def test_every_row_satisfies_the_schema_constraints():
    engine = create_engine("sqlite://")
    SQLModel.metadata.create_all(engine, tables=[Dtype.__table__, Model.__table__])
    with Session(engine) as session:
        for name, size in [("bf16", 2.0), ("fp16", 2.0), ("fp8_e4m3", 1.0), ("fp4", 0.5)]:
            session.add(Dtype(name=name, bytes_per_element=size, kind="both"))
        for file in sorted(EXPECTED):
            row, _ = import_path(CONFIG_DIR / file)
            session.add(Model(**row))
        session.commit()  # CHECK constraints (layer sum, windows, MLA, params) would raise here


def test_falcon_context_default_is_noted():
    row, warnings = import_path(CONFIG_DIR / "tiiuae__falcon-40b.json")
    assert any("2048" in w and "max_position_embeddings" in w for w in warnings)
    assert "2048" in row["notes"]


def test_gpt_oss_mxfp4_is_fp4_with_a_note():
    row, _ = import_path(CONFIG_DIR / "openai__gpt-oss-120b.json")
    assert row["weight_dtype"] == "fp4"
    assert "MXFP4" in row["notes"]


# ------------------------------------------------------------------------- paths and names


def test_model_folder_uses_folder_name_and_safetensors_index(tmp_path):
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    raw = (CONFIG_DIR / "meta-llama__Llama-3.1-8B.json").read_bytes()
    (folder / "config.json").write_bytes(raw)
    index = {"metadata": {"total_size": 16_060_522_496}, "weight_map": {}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))

    for path in (folder, folder / "config.json"):
        row, warnings = import_path(path)
        assert row["name"] == "Llama-3.1-8B"
        assert row["source"] == "config.json"
        assert row["source_sha256"] == hashlib.sha256(raw).hexdigest()
        assert row["params_total"] == 16_060_522_496 // 2 == 8_030_261_248  # bf16: 2 bytes per param
        assert row["params_active"] == row["params_total"]
        assert not any("ESTIMATE" in w for w in warnings)
        assert "model.safetensors.index.json" in row["notes"]


def test_safetensors_index_of_an_fp8_moe_gives_bytes_over_one(tmp_path):
    (tmp_path / "config.json").write_bytes((CONFIG_DIR / "deepseek-ai__DeepSeek-V3.json").read_bytes())
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 688_586_727_753}}))
    row, warnings = import_path(tmp_path)
    assert row["params_total"] == 688_586_727_753  # fp8_e4m3: 1 byte per param
    assert row["embedding_matrices"] is None  # the index's bytes hold the bf16 embeddings and lm_head already
    assert row["params_active"] < row["params_total"]
    assert any("params_active" in w and "ESTIMATE" in w for w in warnings)


def test_params_b_wins_over_the_safetensors_index(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(llama()))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 2_000}}))
    row, _ = import_path(tmp_path, params_b=3)
    assert row["params_total"] == 3_000_000_000 and "index" not in row["notes"]
    assert row["embedding_matrices"] == 1  # a count: the engine rules price the (tied) vocabulary at 16 bits


def test_safetensors_index_without_total_size_fails(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(llama()))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {}}))
    with pytest.raises(ConfigError, match=r"model.safetensors.index.json: no metadata.total_size"):
        import_path(tmp_path)


def test_params_b_is_billions_and_wins(tmp_path):
    path = tmp_path / "org__My-Model.json"
    path.write_text(json.dumps(llama()))
    row, warnings = import_path(path, params_b=8.03)
    assert row["name"] == "My-Model"
    assert row["params_total"] == row["params_active"] == 8_030_000_000
    assert warnings == []
    row, _ = import_path(path, name="custom", params_b=0.5)
    assert row["name"] == "custom" and row["params_total"] == 500_000_000


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "8"])
def test_params_b_must_be_a_positive_number(tmp_path, bad):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(llama()))
    with pytest.raises(ConfigError, match=r"^config.json: params_b .* billions"):
        import_path(path, params_b=bad)


def test_folder_without_config_json(tmp_path):
    with pytest.raises(ConfigError, match=r"folder has no config.json"):
        import_path(tmp_path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"no such file"):
        import_path(tmp_path / "nope.json")


def test_import_text_from_stdin_str_and_bytes():
    text = json.dumps(llama())
    for payload in (text, text.encode()):
        row, _ = import_text(payload, name="piped", params_b=1)
        assert row["name"] == "piped" and row["source"] == "stdin"
        assert row["source_sha256"] == hashlib.sha256(text.encode()).hexdigest()


def test_read_config_takes_text_bytes_or_path(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"a": 1}')
    assert read_config(path) == ({"a": 1}, "x.json", hashlib.sha256(b'{"a": 1}').hexdigest())
    assert read_config(str(path))[1] == "x.json"
    assert read_config('  {"a": 1}')[:2] == ({"a": 1}, "stdin")
    assert read_config(b'{"a": 1}', source_name="pipe")[1] == "pipe"


# ----------------------------------------------------------------------- family rules


def llama(**changes) -> dict:
    """A small Llama-style config; a value of None removes the key."""
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024,
        "intermediate_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 8,
        "num_key_value_heads": 2, "max_position_embeddings": 8192, "vocab_size": 32000,
        "torch_dtype": "bfloat16",
    }
    config.update(changes)
    return {k: v for k, v in config.items() if v is not None}


def build(config: dict, **kwargs) -> tuple[dict, list[str]]:
    return model_from_config(config, name="m", source="config.json", **kwargs)


def test_embedding_matrices_follow_tie_word_embeddings():
    """2 (input embeddings and lm_head) when the config says false; 1 when it ties them or leaves the key out
    (transformers' default); the parameter estimate counts the same matrices."""
    untied, tied, unsaid = (build(llama(tie_word_embeddings=value))[0] for value in (False, True, None))
    assert (untied["embedding_matrices"], tied["embedding_matrices"], unsaid["embedding_matrices"]) == (2, 1, 1)
    assert untied["params_total"] - tied["params_total"] == 32_000 * 1024  # one more vocab x hidden matrix


def test_the_expert_layout_comes_from_the_config():
    """experts, one expert's width and the layers that carry experts, from real configs: gpt-oss-120b names its
    expert width intermediate_size (36 layers of 128); DeepSeek-V3 keeps its first_k_dense_replace 3 layers
    dense (61 - 3 = 58 of 256 experts of 2,048); Llama 4 Maverick interleaves (interleave_moe_layer_step 2: 24 of
    its 48 layers, 128 experts of 8,192); a dense model has none."""
    def layout(file):
        row = import_path(CONFIG_DIR / file)[0]
        return row["experts"], row["expert_intermediate_size"], row["moe_layers"]
    assert layout("openai__gpt-oss-120b.json") == (128, 2_880, 36)
    assert layout("deepseek-ai__DeepSeek-V3.json") == (256, 2_048, 58)
    assert layout("meta-llama__Llama-4-Maverick-17B-128E-Instruct.json") == (128, 8_192, 24)
    assert layout("meta-llama__Llama-3.1-8B.json") == (None, None, None)


def test_falcon_multi_query_means_one_kv_head():
    falcon_7b = {
        "architectures": ["RWForCausalLM"], "model_type": "RefinedWebModel", "multi_query": True,
        "n_head": 71, "n_layer": 32, "hidden_size": 4544, "vocab_size": 65024, "torch_dtype": "bfloat16",
    }
    row, warnings = build(falcon_7b)
    assert (row["kv_heads"], row["head_dim"], row["layers"]) == (1, 64, 32)
    assert row["max_position_embeddings"] == 2048
    assert any("2048" in w for w in warnings)


def test_falcon_new_decoder_architecture_reads_num_kv_heads():
    falcon_40b_hf = {
        "model_type": "falcon", "new_decoder_architecture": True, "multi_query": True,
        "num_attention_heads": 128, "num_kv_heads": 8, "num_hidden_layers": 60, "hidden_size": 8192,
        "vocab_size": 65024, "torch_dtype": "bfloat16",
    }
    row, _ = build(falcon_40b_hf)
    assert (row["kv_heads"], row["head_dim"]) == (8, 64)


def test_chatglm_group_num_only_with_multi_query_attention():
    glm = llama(num_key_value_heads=None, num_hidden_layers=None, num_layers=28, multi_query_group_num=2,
                kv_channels=128, max_position_embeddings=None, seq_length=131072)
    row, _ = build({**glm, "multi_query_attention": True})
    assert (row["kv_heads"], row["head_dim"], row["layers"], row["max_position_embeddings"]) == (2, 128, 28, 131072)
    row, warnings = build({**glm, "multi_query_attention": False})
    assert row["kv_heads"] == 8
    assert any("multi_query_group_num ignored" in w for w in warnings)


def test_text_config_is_read_first_with_top_level_fallback():
    multimodal = {
        "architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "torch_dtype": "float16",
        "text_config": llama(torch_dtype=None, num_hidden_layers=6, architectures=None, model_type="llama"),
        "vision_config": {"num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16},
        "num_hidden_layers": 99,  # the text config wins over a top-level value
    }
    row, _ = build(multimodal)
    assert row["layers"] == 6 and row["kv_heads"] == 2 and row["head_dim"] == 128
    assert row["architecture"] == "LlavaForConditionalGeneration" and row["family"] == "llava"
    assert row["weight_dtype"] == "fp16"  # only at the top level


def test_text_config_must_be_an_object():
    with pytest.raises(ConfigError, match=r"^config.json: text_config is a list, not an object"):
        build({"text_config": [1]})


def test_explicit_head_dim_wins_over_hidden_over_heads():
    row, _ = build(llama(head_dim=256))  # Qwen3 / Gemma style: 1024 / 8 = 128 but head_dim 256
    assert row["head_dim"] == row["v_head_dim"] == 256


def test_missing_kv_heads_means_multi_head_attention():
    row, warnings = build(llama(num_key_value_heads=None))
    assert row["kv_heads"] == row["attention_heads"] == 8
    assert any(w.startswith("no kv head count (num_key_value_heads, n_head_kv or num_kv_heads): multi-head "
                            "attention assumed, 8 kv heads") for w in warnings)  # never silently


def test_qwen2_sliding_window_follows_max_window_layers():
    row, _ = build(llama(num_hidden_layers=10, sliding_window=4096, use_sliding_window=True, max_window_layers=6))
    assert (row["full_layers"], row["sliding_layers"], row["sliding_window"]) == (6, 4, 4096)
    row, _ = build(llama(sliding_window=4096, use_sliding_window=False))
    assert (row["sliding_layers"], row["sliding_window"]) == (0, None)


def test_mistral_window_without_flags_covers_every_layer():
    row, _ = build(llama(model_type="mistral", sliding_window=4096))
    assert (row["full_layers"], row["sliding_layers"], row["sliding_window"]) == (0, 4, 4096)
    row, _ = build(llama(model_type="mistral", sliding_window=None))
    assert row["sliding_layers"] == 0 and row["sliding_window"] is None


def test_sliding_window_pattern_gemma3_style():
    row, _ = build(llama(num_hidden_layers=12, sliding_window=1024, sliding_window_pattern=6))
    assert (row["full_layers"], row["sliding_layers"]) == (2, 10)


def test_llama4_chunked_layers_default_every_fourth_is_full():
    row, _ = build(llama(num_hidden_layers=48, attention_chunk_size=8192))
    assert (row["full_layers"], row["chunked_layers"], row["attention_chunk_size"]) == (12, 36, 8192)
    explicit = [1, 1, 0, 0]
    row, _ = build(llama(attention_chunk_size=8192, no_rope_layers=explicit))
    assert (row["full_layers"], row["chunked_layers"]) == (2, 2)


def test_layer_types_with_chunked_and_linear_kinds():
    types = ["chunked_attention", "full_attention", "linear_attention", "sliding_attention"]
    config = llama(layer_types=types, attention_chunk_size=512, sliding_window=256,
                   linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                   linear_value_head_dim=16, linear_conv_kernel_dim=4)
    row, _ = build(config)
    assert [row[k] for k in ("full_layers", "sliding_layers", "chunked_layers", "linear_layers")] == [1, 1, 1, 1]
    # (2*2*8 + 4*16) * (4-1) conv + 4*8*16 recurrent
    assert row["linear_state_elements_per_layer"] == (2 * 2 * 8 + 4 * 16) * 3 + 4 * 8 * 16 == 800
    assert row["linear_recurrent_elements_per_layer"] == 4 * 8 * 16 == 512


def test_nemotron_h_mamba2_state_and_pattern():
    config = llama(num_hidden_layers=6, hybrid_override_pattern="M-M*-E", mamba_num_heads=128,
                   mamba_head_dim=64, ssm_state_size=128, n_groups=8, conv_kernel=4,
                   mamba_ssm_cache_dtype="float32", n_routed_experts=8, num_experts_per_tok=2,
                   moe_intermediate_size=512)
    row, _ = build(config)
    assert (row["layers"], row["full_layers"], row["linear_layers"], row["no_cache_layers"]) == (3, 1, 2, 3)
    # (4-1) * (128*64 + 2*8*128) = 30,720 conv elements, kept in the model dtype (bf16, 2 B), count as
    # 15,360 fp32 elements beside 128*64*128 = 1,048,576 SSM elements in fp32 (vLLM's mamba2 state dtypes).
    assert row["linear_state_elements_per_layer"] == 3 * (128 * 64 + 2 * 8 * 128) // 2 + 128 * 64 * 128 == 1_063_936
    assert (row["linear_state_heads"], row["linear_state_dtype"]) == (128, "fp32")
    assert row["linear_recurrent_elements_per_layer"] == 128 * 64 * 128 == 1_048_576
    assert "hold no cache" in row["notes"]


def test_linear_layers_without_a_known_state_shape_fail():
    with pytest.raises(ConfigError, match=r"^config.json: has linear/state layers but no state shape"):
        build(llama(full_attention_interval=2))


@pytest.mark.parametrize(
    "quant, dtype",
    [
        ({"quant_method": "fp8", "fmt": "e4m3"}, "fp8_e4m3"),
        ({"quant_method": "fp8"}, "fp8_e4m3"),
        ({"quant_method": "fp8", "fmt": "e5m2"}, "fp8_e5m2"),
        ({"quant_method": "mxfp4"}, "fp4"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
        ({"quant_method": "awq", "bits": 4}, "int4"),
        ({"quant_method": "gptq", "bits": 8}, "int8"),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "int4"),
    ],
)
def test_quantization_config_sets_weight_dtype(quant, dtype):
    row, _ = build(llama(quantization_config=quant))
    assert row["weight_dtype"] == dtype


def test_unknown_quantization_falls_back_to_torch_dtype_loudly():
    row, warnings = build(llama(quantization_config={"quant_method": "mystery"}))
    assert row["weight_dtype"] == "bf16"
    assert any('"mystery" not understood' in w for w in warnings)


@pytest.mark.parametrize("torch_dtype, dtype", [("bfloat16", "bf16"), ("float16", "fp16"), ("float32", "fp32")])
def test_torch_dtype_names(torch_dtype, dtype):
    assert build(llama(torch_dtype=torch_dtype))[0]["weight_dtype"] == dtype


def test_moe_counts_all_experts_in_total_and_top_k_in_active():
    dense, _ = build(llama())
    moe, warnings = build(llama(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=4096))
    mlp = 3 * 1024 * 4096  # one gated expert
    router = 1024 * 8
    assert moe["params_total"] - dense["params_total"] == 4 * (7 * mlp + router)
    assert moe["params_active"] - dense["params_active"] == 4 * (1 * mlp + router)
    assert any("params_active" in w for w in warnings)


def test_given_params_are_kept():
    row, warnings = build(llama(), params_total=10**9, params_active=10**8)
    assert (row["params_total"], row["params_active"], warnings) == (10**9, 10**8, [])
    with pytest.raises(ConfigError, match=r"params_active .* exceeds params_total"):
        build(llama(), params_total=10**8, params_active=10**9)


def test_integral_floats_are_accepted():
    assert build(llama(num_hidden_layers=4.0))[0]["layers"] == 4


# ---------------------------------------------------------------------------- bad inputs


def test_not_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("layers: 32\n")
    with pytest.raises(ConfigError, match=r"^config.json: not valid JSON \(.*line 1 column 1\); pass the model's config.json$"):
        import_path(path)


def test_json_list_is_not_a_config():
    with pytest.raises(ConfigError, match=r"^stdin: JSON is a list, not an object"):
        import_text("[1, 2]", name="x")


def test_not_utf8():
    with pytest.raises(ConfigError, match=r"^stdin: not UTF-8"):
        import_text(b'{"a": "\xff"}', name="x")


def test_missing_layers_names_the_aliases():
    with pytest.raises(ConfigError) as err:
        build(llama(num_hidden_layers=None))
    assert str(err.value).startswith("config.json: no layer count (num_hidden_layers, num_layers or n_layer);")


def test_missing_heads():
    with pytest.raises(ConfigError, match=r"no attention head count \(num_attention_heads, n_head, n_heads or num_heads\)"):
        build(llama(num_attention_heads=None))


@pytest.mark.parametrize(
    "value, problem",
    [
        (0, "is 0, it must be positive"),
        (-4, "is -4, it must be positive"),
        (4.5, "is 4.5, not a whole number"),
        (True, "is true, not a whole number"),
        ("32", 'is "32", not a whole number'),
        (float("nan"), "is nan, not a whole number"),
        (float("inf"), "is inf, not a whole number"),
        (10**7, "is 10000000, more than 1,000,000"),
        ([32], "is [32], not a whole number"),
    ],
)
def test_bad_layer_counts(value, problem):
    with pytest.raises(ConfigError) as err:
        build(llama(num_hidden_layers=value))
    assert str(err.value).startswith(f"config.json: num_hidden_layers {problem}")
    assert str(err.value).endswith("fix the config")


def test_bad_head_count():
    with pytest.raises(ConfigError, match=r"^config.json: num_attention_heads is 0, it must be positive"):
        build(llama(num_attention_heads=0))


def test_kv_heads_must_divide_attention_heads():
    with pytest.raises(ConfigError, match=r"^config.json: num_key_value_heads = 3 does not divide the 8 attention heads"):
        build(llama(num_key_value_heads=3))


def test_mla_is_exempt_from_kv_head_division():
    row, _ = build(llama(num_key_value_heads=3, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
                         v_head_dim=128))
    assert (row["kv_heads"], row["head_dim"], row["v_head_dim"], row["kv_lora_rank"]) == (3, 192, 128, 512)


def test_hidden_size_not_divisible_by_heads_without_head_dim():
    with pytest.raises(ConfigError, match=r"^config.json: hidden_size 1020 is not divisible by 8 attention heads .*add head_dim"):
        build(llama(hidden_size=1020))
    assert build(llama(hidden_size=1020, head_dim=128))[0]["head_dim"] == 128  # explicit head_dim: fine


def test_layer_types_length_must_match_layers():
    with pytest.raises(ConfigError, match=r"layer_types has 2 entries but the model has 4 layers"):
        build(llama(layer_types=["full_attention"] * 2))


def test_unknown_layer_type():
    with pytest.raises(ConfigError, match=r'layer_types entry "cross_attention" is not a layer kind'):
        build(llama(layer_types=["cross_attention"] * 4))


def test_sliding_layers_need_a_window():
    with pytest.raises(ConfigError, match=r"no sliding window size for the sliding layers"):
        build(llama(layer_types=["sliding_attention"] * 4))


def test_missing_context_outside_falcon_is_an_error():
    with pytest.raises(ConfigError, match=r"no context length \(max_position_embeddings, seq_length, n_positions or model_max_length\)"):
        build(llama(max_position_embeddings=None))


def test_deeply_nested_json():
    with pytest.raises(ConfigError, match=r"^stdin: JSON nested"):
        import_text("[" * 100_000 + "]" * 100_000, name="x")
    # kvreg.core.limits.MAX_DEPTH, the one nesting limit of every file kvreg reads (real configs nest 3 to 4 levels)
    with pytest.raises(ConfigError, match=r"^stdin: JSON nested more than 32 levels"):
        import_text('{"a": ' * 33 + "1" + "}" * 33, name="x")
    with pytest.raises(ConfigError) as at_the_limit:  # 32 levels pass the depth check; the missing keys stop it
        import_text('{"a": ' * 32 + "1" + "}" * 32, name="x")
    assert "nested" not in str(at_the_limit.value)


def test_huge_input(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"pad": "' + b"x" * 10_000_000 + b'"}')
    with pytest.raises(ConfigError, match=r"^config.json: larger than 10 MB"):
        import_path(path)


def test_name_is_required():
    with pytest.raises(ConfigError, match=r"needs a name"):
        model_from_config(llama(), name=" ")


# ------------------------------------------------------------------------------- fuzzing

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10**7) | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_KEYS = sorted({
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
    "max_position_embeddings", "sliding_window", "use_sliding_window", "layer_types", "torch_dtype",
    "quantization_config", "text_config", "multi_query", "kv_lora_rank", "qk_rope_head_dim",
    "full_attention_interval", "attention_chunk_size", "no_rope_layers", "mlp_only_layers",
    "num_experts", "num_experts_per_tok", "vocab_size", "tie_word_embeddings", "architectures",
    "hybrid_override_pattern", "sliding_window_pattern", "max_window_layers", "mamba_ssm_cache_dtype",
})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(_KEYS), _json, max_size=4))
def test_any_config_either_imports_or_fails_with_one_line(changes):
    config = copy.deepcopy(llama())
    config.update(changes)
    try:
        row, _ = build(config)
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("config.json: ")
    else:
        assert row["full_layers"] + row["sliding_layers"] + row["chunked_layers"] + row["linear_layers"] == row["layers"]
        assert 0 < row["params_active"] <= row["params_total"]
