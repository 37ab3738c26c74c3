"""A multimodal model's towers: the vision encoder and its projector into the language model, counted from the
config's vision_config as transformers builds them, apart from the language model's parameters.

vLLM and SGLang build the tower on every GPU (docs/engine-rules.md, "A multimodal model's towers are on every GPU"),
so its weights come out of every GPU's KV pool; the importer keeps the count in the model's ``tower_params``. Each
family's count below is the sum of its modules' parameters (weights and biases), in the order transformers' modeling
file declares them, and is checked in tests/test_import_towers.py against the checkpoint's published total. A config
whose tower kvreg does not know leaves ``tower_params`` unset, with a note: measure the weights
(``--weights-memory``) or set it by hand.
"""

from __future__ import annotations

from .config import Config, ConfigError, Findings, json_type, show_value, text_of, whole_number


def _linear(inputs: int, outputs: int, bias: bool = True) -> int:
    return inputs * outputs + (outputs if bias else 0)


def _layer_norm(width: int) -> int:
    return 2 * width  # weight and bias


def _rms_norm(width: int) -> int:
    return width


class _Unknown(Exception):
    """A tower kvreg cannot count from the config (the import goes on without it, with a note)."""


class _Vision:
    """Whole numbers from a vision_config: a key missing leaves the tower uncounted (_Unknown), a malformed value is
    a one-line ConfigError."""

    def __init__(self, vision: dict, source: str):
        self.vision, self.source = vision, source

    def get(self, key: str, default: int | None = None, minimum: int = 1) -> int:
        value = self.vision.get(key, default)
        if value is None:
            raise _Unknown(f"a vision_config without {key}")
        return whole_number(value, f"vision_config.{key}", self.source, minimum=minimum)


def _qwen2_vl(v: _Vision, text_hidden: int) -> int:
    """Qwen2-VL (transformers modeling_qwen2_vl.py Qwen2VisionTransformerPretrainedModel): a Conv3d patch embedding
    without bias; depth blocks of two LayerNorms, qkv and proj with biases and a fc1/fc2 MLP of embed_dim x
    mlp_ratio; the PatchMerger's LayerNorm and two linears over spatial_merge_size**2 merged patches, out to the
    vision_config's hidden_size (the language model's width)."""
    embed, merge = v.get("embed_dim"), v.get("spatial_merge_size", 2)
    mlp = embed * v.get("mlp_ratio", 4)
    patch = v.get("in_chans", 3) * v.get("temporal_patch_size", 2) * v.get("patch_size", 14) ** 2 * embed
    block = (2 * _layer_norm(embed) + _linear(embed, 3 * embed) + _linear(embed, embed)
             + _linear(embed, mlp) + _linear(mlp, embed))
    merged = embed * merge**2
    merger = _layer_norm(embed) + _linear(merged, merged) + _linear(merged, v.get("hidden_size", text_hidden))
    return patch + v.get("depth") * block + merger


def _qwen2_5_vl(v: _Vision, text_hidden: int) -> int:
    """Qwen2.5-VL (modeling_qwen2_5_vl.py): Qwen2-VL's layout with RMSNorms, a gated MLP with biases (gate, up, down
    of intermediate_size) and the merger out to out_hidden_size."""
    hidden, merge, inter = v.get("hidden_size"), v.get("spatial_merge_size", 2), v.get("intermediate_size")
    patch = v.get("in_chans", v.vision.get("in_channels", 3)) * v.get("temporal_patch_size", 2) \
        * v.get("patch_size", 14) ** 2 * hidden
    block = (2 * _rms_norm(hidden) + _linear(hidden, 3 * hidden) + _linear(hidden, hidden)
             + 2 * _linear(hidden, inter) + _linear(inter, hidden))
    merged = hidden * merge**2
    merger = _rms_norm(hidden) + _linear(merged, merged) + _linear(merged, v.get("out_hidden_size", text_hidden))
    return patch + v.get("depth") * block + merger


def _qwen3_vl(v: _Vision, text_hidden: int) -> int:
    """Qwen3-VL and Qwen3.5 (modeling_qwen3_vl.py Qwen3VLVisionModel; Qwen3.5 reuses it): a Conv3d patch embedding
    with bias, a learned position embedding of num_position_embeddings, depth blocks of two LayerNorms, qkv and proj
    with biases and a fc1/fc2 MLP of intermediate_size; the merger (LayerNorm of hidden_size, two linears) and one
    more merger per deepstack_visual_indexes entry, whose LayerNorm is over the merged width (use_postshuffle_norm)."""
    hidden, merge, inter = v.get("hidden_size"), v.get("spatial_merge_size", 2), v.get("intermediate_size")
    patch = _linear(v.get("in_channels", 3) * v.get("temporal_patch_size", 2) * v.get("patch_size", 16) ** 2, hidden)
    positions = v.get("num_position_embeddings") * hidden
    block = (2 * _layer_norm(hidden) + _linear(hidden, 3 * hidden) + _linear(hidden, hidden)
             + _linear(hidden, inter) + _linear(inter, hidden))
    merged, out = hidden * merge**2, v.get("out_hidden_size", text_hidden)
    mergers = _linear(merged, merged) + _linear(merged, out)
    deepstack = v.vision.get("deepstack_visual_indexes") or []
    if not isinstance(deepstack, list):
        raise ConfigError(f"{v.source}: vision_config.deepstack_visual_indexes is {json_type(deepstack)}, not a list; "
                          "fix the config")
    return (patch + positions + v.get("depth") * block + _layer_norm(hidden) + mergers
            + len(deepstack) * (_layer_norm(merged) + mergers))


def _siglip(v: _Vision) -> int:
    """SigLIP's vision transformer (modeling_siglip.py SiglipVisionTransformer) without its pooling head: a Conv2d
    patch embedding with bias, (image_size / patch_size)**2 position embeddings, num_hidden_layers layers of two
    LayerNorms, q/k/v/out projections with biases and a fc1/fc2 MLP, and the post LayerNorm."""
    if v.vision.get("vision_use_head", True) is not False:
        raise _Unknown("a SigLIP tower with its pooling head (vision_use_head)")
    hidden, inter, patch = v.get("hidden_size"), v.get("intermediate_size"), v.get("patch_size")
    embeddings = _linear(v.get("num_channels", 3) * patch**2, hidden) + (v.get("image_size") // patch) ** 2 * hidden
    layer = 2 * _layer_norm(hidden) + 4 * _linear(hidden, hidden) + _linear(hidden, inter) + _linear(inter, hidden)
    return embeddings + v.get("num_hidden_layers") * layer + _layer_norm(hidden)


def _gemma3(v: _Vision, text_hidden: int) -> int:
    """Gemma 3 (modeling_gemma3.py Gemma3ForConditionalGeneration): the SigLIP tower, then Gemma3MultiModalProjector's
    mm_input_projection_weight (vision hidden_size x the text model's hidden_size) and its RMSNorm (mm_soft_emb_norm)."""
    hidden = v.get("hidden_size")
    return _siglip(v) + hidden * text_hidden + _rms_norm(hidden)


# model_type of the config (top level) -> the tower's count; each reads the config's vision_config.
_FAMILIES = {
    "qwen2_vl": _qwen2_vl,
    "qwen2_5_vl": _qwen2_5_vl,
    "qwen3_vl": _qwen3_vl,
    "qwen3_vl_moe": _qwen3_vl,
    "qwen3_5": _qwen3_vl,
    "qwen3_5_moe": _qwen3_vl,
    "gemma3": _gemma3,
}
# Keys that name a multimodal tower; a config with one of them and no family above gets a note.
TOWER_KEYS = ("vision_config", "audio_config", "vision_tower", "mm_vision_tower", "visual", "thinker_config")


def tower_fields(cfg: Config, findings: Findings) -> dict:
    """tower_params (the vision tower and its projector, apart from the language model) and the vision_config's
    num_hidden_layers and hidden_size as the config writes them (SGLang's multimodal adjustment reads those two);
    all None for a text-only config or a tower kvreg cannot count (with a note saying so)."""
    none = {"tower_params": None, "vision_num_hidden_layers": None, "vision_hidden_size": None}
    top = cfg.top
    named = [key for key in TOWER_KEYS if top.get(key) is not None]
    if not named:
        return none
    family = text_of(top.get("model_type"))
    vision = top.get("vision_config")
    count = _FAMILIES.get(family)
    if count is None or not isinstance(vision, dict):
        findings.note(f"the config names a multimodal tower ({', '.join(named)}) that kvreg does not count for "
                      f"model_type {show_value(family)}: the engine rules leave its weights out; give --weights-memory "
                      "or set tower_params")
        return none
    text_hidden = cfg.count(("hidden_size",), "hidden size")
    try:
        tower = count(_Vision(vision, cfg.source), text_hidden)
    except _Unknown as unknown:
        findings.note(f"{unknown} is not counted: the engine rules leave the tower out; give --weights-memory or set "
                      "tower_params")
        return none
    layers, hidden = vision.get("num_hidden_layers"), vision.get("hidden_size")
    findings.note(f"multimodal tower ({family} vision_config): {tower:,} params on every GPU under the engine rules, "
                  "apart from params_total")
    return {"tower_params": tower,
            "vision_num_hidden_layers": whole_number(layers, "vision_config.num_hidden_layers", cfg.source)
            if layers is not None else None,
            "vision_hidden_size": whole_number(hidden, "vision_config.hidden_size", cfg.source)
            if hidden is not None else None}
