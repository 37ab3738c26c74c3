"""Multimodal towers: their parameters counted from the config, the weights every GPU holds under the engine rules,
and SGLang's multimodal scaling of mem_fraction_static by release.

Configs: tests/data/hf-configs/ (sources and sha256 in its MANIFEST.md): Qwen__Qwen2.5-VL-7B-Instruct.json,
Qwen__Qwen3-VL-8B-Instruct.json, Qwen__Qwen3-VL-30B-A3B-Instruct.json, google__gemma-3-4b-it.json.

Published parameter counts the towers are checked against (each the checkpoint's safetensors total):
- Qwen/Qwen2.5-VL-7B-Instruct 8,292,166,656, of which `visual` 676,550,144 and the language model 7,615,616,512 (a
  fine-tuning script's printout of model.visual's parameters, public on GitHub; Qwen/Qwen2.5-7B-Instruct's own
  total is 7,615,616,512);
- Qwen/Qwen3-VL-8B-Instruct 8,767,123,696 (the Hugging Face API's `"safetensors":{"parameters":{"BF16":8767123696}}`
  quoted in a public verification table), Qwen/Qwen3-8B 8,190,735,360 (`"safetensors":{"total":8190735360}`);
- Qwen/Qwen3-VL-30B-A3B-Instruct 31,070,754,032 (a serving catalog's `paramCount`), Qwen/Qwen3-30B-A3B
  30,532,122,624 (GGUF `general.parameter_count` of its conversions);
- google/gemma-3-4b-it 4,300,079,472 (`sum(p.numel() for p in model.parameters())` of
  Gemma3ForConditionalGeneration at revision 093f9f38, and model cards' "safetensors metadata");
- Qwen/Qwen2-VL-7B-Instruct 8,291,375,616, Qwen2-VL-2B-Instruct 2,208,985,600 and their Qwen2.5 text twins
  7,615,616,512 and 1,543,714,304 (HfApi.get_safetensors_metadata, listed in a public benchmark's model table).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvreg.interchange.hf.config import ConfigError
from kvreg.interchange.hf.row import import_path, model_from_config

DATA = Path(__file__).parent / "data" / "hf-configs"
GiB = 2**30


def real(name: str) -> Path:
    return DATA / name


# --------------------------------------------------------------------------- the count, family by family


def test_qwen2_5_vl_7b_tower_is_its_published_visual_count():
    row, _ = import_path(real("Qwen__Qwen2.5-VL-7B-Instruct.json"))
    hidden, inter, depth, merged, out = 1280, 3420, 32, 1280 * 4, 3584
    patch = 3 * 2 * 14 * 14 * hidden  # Conv3d, no bias: 1,505,280
    block = (2 * hidden  # two RMSNorms
             + hidden * 3 * hidden + 3 * hidden + hidden * hidden + hidden  # qkv, proj with biases
             + 2 * (hidden * inter + inter) + inter * hidden + hidden)  # gate, up, down with biases
    merger = hidden + merged * merged + merged + merged * out + out  # RMSNorm ln_q, two linears
    assert block == 19_702_200
    assert patch + depth * block + merger == 676_550_144
    assert row["tower_params"] == 676_550_144
    assert 676_550_144 + 7_615_616_512 == 8_292_166_656  # the published language model + tower = the checkpoint
    assert (row["vision_num_hidden_layers"], row["vision_hidden_size"]) == (None, 1280)  # "depth", not num_hidden_layers


def test_qwen3_vl_8b_tower_with_its_three_deepstack_mergers():
    row, _ = import_path(real("Qwen__Qwen3-VL-8B-Instruct.json"))
    hidden, inter, merged, out = 1152, 4304, 1152 * 4, 4096
    patch = 3 * 2 * 16 * 16 * hidden + hidden  # Conv3d with bias: 1,770,624
    positions = 2304 * hidden  # num_position_embeddings: 2,654,208
    block = 4 * hidden + hidden * 3 * hidden + 3 * hidden + hidden * hidden + hidden \
        + hidden * inter + inter + inter * hidden + hidden
    mergers = merged * merged + merged + merged * out + out
    tower = patch + positions + 27 * block + (2 * hidden + mergers) + 3 * (2 * merged + mergers)
    assert block == 15_239_504
    assert tower == 576_388_336
    assert row["tower_params"] == tower
    assert tower + 8_190_735_360 == 8_767_123_696  # Qwen3-8B's published total + the tower = Qwen3-VL-8B's


def test_qwen3_vl_30b_a3b_tower_differs_only_in_its_mergers_output():
    row, _ = import_path(real("Qwen__Qwen3-VL-30B-A3B-Instruct.json"))
    merged = 1152 * 4
    # the 8B's tower with the four mergers' last linear out to 2,048 instead of 4,096
    assert row["tower_params"] == 576_388_336 - 4 * merged * (4096 - 2048) - 4 * (4096 - 2048) == 538_631_408
    assert 538_631_408 + 30_532_122_624 == 31_070_754_032  # Qwen3-30B-A3B + the tower = Qwen3-VL-30B-A3B


def test_gemma_3_4b_siglip_tower_and_projector():
    row, _ = import_path(real("google__gemma-3-4b-it.json"))
    hidden, inter, text_hidden = 1152, 4304, 2560
    embeddings = 3 * 14 * 14 * hidden + hidden + (896 // 14) ** 2 * hidden  # Conv2d with bias, 4,096 positions
    layer = 4 * hidden + 4 * (hidden * hidden + hidden) + hidden * inter + inter + inter * hidden + hidden
    siglip = embeddings + 27 * layer + 2 * hidden  # post_layernorm; vision_use_head false: no pooling head
    projector = hidden * text_hidden + hidden  # mm_input_projection_weight, mm_soft_emb_norm
    assert siglip == 416_866_032
    assert row["tower_params"] == siglip + projector == 419_816_304
    # the language model worked by hand, norms included: embeddings (tied) + 34 layers + final norm
    text_layer = 2560 * 2048 * 2 + 2560 * 1024 * 2 + 2 * 256 + 3 * 2560 * 10240 + 4 * 2560
    assert 262_208 * 2560 + 34 * text_layer + 2560 + 419_816_304 == 4_300_079_472
    assert (row["vision_num_hidden_layers"], row["vision_hidden_size"]) == (27, 1152)


@pytest.mark.parametrize("text_hidden, published_total, text_total", [
    (3584, 8_291_375_616, 7_615_616_512),  # Qwen2-VL-7B-Instruct over Qwen2.5-7B-Instruct's shape
    (1536, 2_208_985_600, 1_543_714_304),  # Qwen2-VL-2B-Instruct over Qwen2.5-1.5B-Instruct's
])
def test_qwen2_vl_tower_from_its_published_vision_config(text_hidden, published_total, text_total):
    """Qwen2-VL's vision_config as its published config.json writes it (no copy of the file is vendored): embed_dim
    1,280, depth 32, mlp_ratio 4, the merger out to hidden_size, the language model's width."""
    vision = {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3,
              "hidden_size": text_hidden, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
              "temporal_patch_size": 2}
    config = {"architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl",
              "hidden_size": text_hidden, "intermediate_size": 8960, "num_hidden_layers": 28,
              "num_attention_heads": 12, "num_key_value_heads": 2, "head_dim": 128, "max_position_embeddings": 32768,
              "vocab_size": 151936, "torch_dtype": "bfloat16", "vision_config": vision}
    row, _ = model_from_config(config, name="q2vl", accept_unknown=True)
    block = 4 * 1280 + 1280 * 3840 + 3840 + 1280 * 1280 + 1280 + 1280 * 5120 + 5120 + 5120 * 1280 + 1280
    tower = 3 * 2 * 14 * 14 * 1280 + 32 * block + 2 * 1280 + 5120 * 5120 + 5120 + 5120 * text_hidden + text_hidden
    assert row["tower_params"] == tower == published_total - text_total


def test_a_tower_kvreg_does_not_count_is_left_out_with_a_note():
    row, _ = import_path(real("moonshotai__Kimi-K2.5.json"))
    assert row["tower_params"] is None
    assert "multimodal tower (vision_config) that kvreg does not count" in row["notes"]
    text_only, _ = import_path(real("Qwen__Qwen3-8B.json"))
    assert (text_only["tower_params"], text_only["vision_hidden_size"]) == (None, None)


def test_a_checkpoints_count_has_the_tower_taken_out(tmp_path):
    """model.safetensors.index.json's total_size is the whole checkpoint: Qwen2.5-VL-7B's 8,292,166,656 bf16 params
    are 16,584,333,312 B, of which the tower's 676,550,144 x 2 B are kept apart."""
    folder = tmp_path / "Qwen2.5-VL-7B-Instruct"
    folder.mkdir()
    (folder / "config.json").write_bytes(real("Qwen__Qwen2.5-VL-7B-Instruct.json").read_bytes())
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 16_584_333_312}, "weight_map": {}}))
    row, _ = import_path(folder)
    assert row["tower_params"] == 676_550_144
    assert row["params_total"] == row["params_active"] == 16_584_333_312 // 2 - 676_550_144 == 7_615_616_512
    assert "less the multimodal tower's 676,550,144 params" in row["notes"]


# --------------------------------------------------------------------------- the engine rules


@pytest.fixture()
def twins(kv, tmp_path):
    """Qwen2.5-VL-7B as imported, and the same config without its vision_config (no tower)."""
    config = json.loads(real("Qwen__Qwen2.5-VL-7B-Instruct.json").read_text())
    config.pop("vision_config")
    text_only = tmp_path / "text.json"
    text_only.write_text(json.dumps(config))
    kv("model", "import", str(real("Qwen__Qwen2.5-VL-7B-Instruct.json")), "--name", "QVL")
    kv("model", "import", str(text_only), "--name", "QVL-text", "--accept-unknown")

    def ask(model, *args):
        [row] = kv.json("capacity", "--model", model, "--gpu", "H100-SXM", "--gpus-per-node", "8", *args)
        return row

    return ask


@pytest.mark.parametrize("rule, tp", [("vllm", 1), ("vllm", 2), ("sglang", 1), ("sglang", 2)])
def test_the_kv_pool_shrinks_by_exactly_the_towers_bytes(twins, rule, tp):
    """Every GPU holds the tower split over TP at 2 B a parameter: 676,550,144 x 2 / TP B less KV pool. Under SGLang
    the fraction is given, so that its multimodal scaling of the default does not enter."""
    fraction = ("--mem-fraction-static", "0.85") if rule == "sglang" else ()
    args = ("--rule", rule, "--tp", str(tp), *fraction)
    vl, text = twins("QVL", *args), twins("QVL-text", *args)
    tower = 676_550_144 * 2 / tp  # 1.26 GiB at TP 1
    assert (vl["weights_gib_per_gpu"] - text["weights_gib_per_gpu"]) * GiB == pytest.approx(tower, abs=1e-3)
    assert (text["kv_pool_gib_per_gpu"] - vl["kv_pool_gib_per_gpu"]) * GiB == pytest.approx(tower, abs=1e-3)


def test_the_theoretical_rule_counts_the_language_model_alone(twins):
    vl, text = twins("QVL"), twins("QVL-text")
    assert vl["weights_gib_per_gpu"] == text["weights_gib_per_gpu"] == pytest.approx(7_615_283_200 * 2 / GiB)


# --------------------------------------------------------------------------- SGLang's multimodal scaling by release

H100_MIB = 85_029_615_043 / 2**20  # the catalog H100's reported memory, 81,090.56 MiB


def sglang_fraction(kv, model: str, version: str, *args) -> float:
    """The mem_fraction_static an SGLang plan of the model on one H100 uses (plan show's mem_fraction_static_used)."""
    name = f"s-{model}-{version}"
    kv("plan", "add", name, "--model", model, "--gpu", "H100-SXM", "--gpus-per-node", "1", "--rule", "sglang",
       "--engine-version", version, *args)
    [row] = kv.json("plan", "show", name)
    return row["mem_fraction_static_used"]


@pytest.mark.parametrize("version, given, fraction", [
    # up to v0.4.4 the model runner scales any fraction by 0.95 (model_runner.py 0.4.3 lines 137-138)
    ("0.4.3", None, 0.88 * 0.95),
    ("0.4.3", "0.8", 0.8 * 0.95),
    # v0.4.5 to v0.4.8: by 0.90, any fraction (0.4.5 lines 273-274)
    ("0.4.5", None, 0.88 * 0.90),
    ("0.4.8", "0.8", 0.8 * 0.90),
    # v0.4.9: the server scales its default only (server_args.py 0.4.9 lines 328-329); reserve (9.5 + 1/2) GiB
    ("0.4.9", None, round((H100_MIB - 10 * 1024) / H100_MIB, 3) * 0.90),
    ("0.4.9", "0.8", 0.8),
    # from v0.4.10: 0.95 x clamp(1 - 0.1 x (24 x 1,280^2 / (24 x 1,024^2) - 1), 0.8, 1.05) = 0.95 x 0.94375: the
    # vision_config names "depth", not num_hidden_layers, so SGLang takes 24
    ("0.4.10", None, round((H100_MIB - 10 * 1024) / H100_MIB, 3) * 0.95 * (1 - 0.1 * (1280**2 / 1024**2 - 1))),
    ("0.5.6", None, round((H100_MIB - (512 + 8192 * 1.5 + 256 * 2 + 128)) / H100_MIB, 3) * 0.95 * 0.94375),
    ("0.5.6", "0.8", 0.8),
])
def test_sglang_scales_a_multimodal_models_fraction_by_release(kv, version, given, fraction):
    kv("model", "import", str(real("Qwen__Qwen2.5-VL-7B-Instruct.json")), "--name", "QVL")
    args = ("--mem-fraction-static", given) if given else ()
    assert sglang_fraction(kv, "QVL", version, *args) == pytest.approx(fraction, abs=1e-12)


def test_sglang_v0410_scales_by_the_vision_towers_size(kv):
    """Gemma 3's SigLIP names num_hidden_layers 27 and hidden_size 1,152: 27 x 1,152^2 / (24 x 1,024^2) =
    1.423828125, so 0.95 x (1 - 0.1 x 0.423828125) = 0.95 x 0.9576171875; a text model is not scaled."""
    kv("model", "import", str(real("google__gemma-3-4b-it.json")), "--name", "G3")
    default = round((H100_MIB - (512 + 8192 * 1.5 + 256 * 2 + 128)) / H100_MIB, 3)
    assert default == 0.834
    assert sglang_fraction(kv, "G3", "0.5.6") == pytest.approx(0.834 * 0.95 * 0.9576171875, abs=1e-12)
    assert sglang_fraction(kv, "Qwen3-8B", "0.5.6") == 0.834


@pytest.mark.parametrize("version, ratio", [("0.4.9", 1), ("0.4.10", 0.8), ("0.5.6", 0.8)])
def test_sglang_keeps_sliding_layers_in_the_one_pool_before_v0410(kv, version, ratio):
    """Gemma 3 4B: 34 layers, every 6th global (5 full, 29 sliding), 4 KV heads of 256 in bf16 = 4,096 B a layer and
    token. Before v0.4.10 SGLang has one pool, every layer holding every token: 34 x 4,096 = 139,264 B a token; from
    v0.4.10 the sliding layers have a pool of their own at swa_full_tokens_ratio 0.8: 5 x 4,096 + 0.8 x 29 x 4,096 =
    115,507.2 B a token. A 10 GiB pool at page 1 holds floor(10 GiB / cell) tokens."""
    kv("model", "import", str(real("google__gemma-3-4b-it.json")), "--name", "G3")
    [row] = kv.json("capacity", "--model", "G3", "--gpu", "H100-SXM", "--gpus-per-node", "1", "--rule", "sglang",
                    "--engine-version", version, "--kv-cache-memory", "10GiB", "--block-size", "1")
    cell = 5 * 4096 + ratio * 29 * 4096
    assert row["cell_bytes_per_token_per_gpu"] == pytest.approx(cell)
    assert row["kv_cache_tokens"] == int(10 * GiB // cell) == {1: 77_101, 0.8: 92_958}[ratio]


def test_model_check_and_model_show_say_what_the_tower_holds(kv):
    path = str(real("google__gemma-3-4b-it.json"))
    [check] = kv.json("model", "check", path)
    assert (check["tower_params"], check["params_total"]) == (419_816_304, 3_879_895_040)
    kv("model", "import", path, "--name", "G3")
    shown = kv.json("model", "show", "G3")["model"]
    assert (shown["tower_params"], shown["vision_num_hidden_layers"], shown["vision_hidden_size"]) == (419_816_304, 27, 1152)


def test_a_vision_config_missing_a_width_leaves_the_tower_out_and_a_bad_one_is_one_line():
    config = json.loads(real("Qwen__Qwen3-VL-8B-Instruct.json").read_text())
    del config["vision_config"]["num_position_embeddings"]
    row, _ = model_from_config(config, name="q3vl")
    assert row["tower_params"] is None
    assert "a vision_config without num_position_embeddings is not counted" in row["notes"]
    config["vision_config"]["num_position_embeddings"] = "2304"
    with pytest.raises(ConfigError, match=r"^manual: vision_config.num_position_embeddings is \"2304\", not a whole number"):
        model_from_config(config, name="q3vl")
