"""Parameter counts from the config's shapes: embeddings, attention, linear layers and MLP (MoE: every expert in
params_total, the routed top-k and shared experts in params_active), and the expert layout the row keeps."""

from __future__ import annotations

from .attention import head_width
from .config import (
    HEAD_KEYS, HIDDEN_KEYS, PLAIN_MLP_FAMILIES, Config, ConfigError, Findings, alternatives, show_value, whole_number,
)
from .layers import Block, attention_kinds, hybrid_pattern, kda_config
from .state import state_kind


_EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_topk", "top_k_experts", "num_experts_per_token")
_SHARED_COUNT_KEYS = ("n_shared_experts", "num_shared_expert", "num_shared_experts")


def moe_shape(cfg: Config) -> tuple[int, int]:
    """(routed experts, experts per token) of the widest MoE layer; (0, 0) for a dense model.

    Per-layer lists (Hunyuan's moe_topk) are read whole by _mlp_params; this is the summary."""
    key, value = cfg.raw(*_EXPERT_KEYS)
    values = value if isinstance(value, list) else [value]
    experts = max((whole_number(v, key, cfg.source, minimum=0) for v in values), default=0) if key else 0
    if experts <= 1:
        return 0, 0
    key, value = cfg.raw(*_TOP_K_KEYS)
    if key is None:
        raise ConfigError(f"{cfg.source}: no experts per token ({alternatives(_TOP_K_KEYS)}); add it to the config")
    values = value if isinstance(value, list) else [value]
    return experts, max(whole_number(v, key, cfg.source) for v in values)


def _moe_layer_flags(cfg: Config, layers: int) -> list[bool]:
    """Which decoder layers carry experts (DeepSeek/GLM first_k_dense_replace, Qwen mlp_only_layers...)."""
    _, kinds = cfg.raw("mlp_layer_types")
    if isinstance(kinds, list) and len(kinds) == layers and set(kinds) <= {"dense", "sparse"}:
        return [k == "sparse" for k in kinds]  # GLM-5.2: "dense" or "sparse" (MoE) per layer
    _, mlp_only = cfg.raw("mlp_only_layers")
    if not isinstance(mlp_only, (list, type(None))):
        raise ConfigError(f"{cfg.source}: mlp_only_layers is {show_value(mlp_only)}, not a list of layer numbers; fix the config")
    dense = set(i for i in mlp_only or [] if isinstance(i, int))
    first_moe = cfg.count(("first_k_dense_replace",), "first MoE layer", required=False, minimum=0) or 0
    step = cfg.count(("decoder_sparse_step", "interleave_moe_layer_step"), "MoE layer step", required=False) or 1
    _, freq_value = cfg.raw("moe_layer_freq")
    if isinstance(freq_value, list):  # MiMo-V2-Flash: a 0/1 flag per layer
        if len(freq_value) != layers or any(f not in (0, 1) for f in freq_value):
            raise ConfigError(f"{cfg.source}: moe_layer_freq lists {len(freq_value)} values but the model has "
                              f"{layers} layers, or values other than 0 and 1; fix the config")
        return [f == 1 and i not in dense for i, f in enumerate(freq_value)]
    freq = cfg.count(("moe_layer_freq",), "MoE layer frequency", required=False) or 1
    return [i not in dense and i >= first_moe and (i + 1) % step == 0 and i % freq == 0 for i in range(layers)]


def _mlp_params(cfg: Config, hidden: int, moe_flags: list[bool]) -> tuple[int, int]:
    """(all MLP parameters, those used per token) over MLP blocks flagged MoE or dense.

    Expert counts, experts per token, expert widths and shared experts may each be one number or a
    list with one entry per layer (Hunyuan). A shared_expert_intermediate_size of 0 means no shared
    expert (Qwen3-Coder). Gemma 4's enable_moe_block runs a dense MLP beside the experts in every layer."""
    layers = len(moe_flags)
    _, act = cfg.raw("mlp_hidden_act", "hidden_act")
    # Up/down only: the GPT-2 / Falcon families, and Nemotron-H's squared-ReLU MLP; else gated (3 matrices).
    matrices = 2 if cfg.model_type in PLAIN_MLP_FAMILIES or act == "relu2" else 3
    # Llama 4 names its dense layers' width intermediate_size_mlp (intermediate_size is the expert's)
    dense_width = cfg.count(("intermediate_size_mlp", "intermediate_size", "ffn_hidden_size", "n_inner"), "MLP width",
                            required=False)
    dense = matrices * hidden * (dense_width or 4 * hidden)  # 4 x hidden: GPT-2 / Falcon default
    if not moe_shape(cfg)[0]:
        return dense * layers, dense * layers
    experts = cfg.per_layer(_EXPERT_KEYS, "expert count", layers, minimum=0)
    top_k = cfg.per_layer(_TOP_K_KEYS, "experts per token", layers)
    width = cfg.per_layer(("moe_intermediate_size", "expert_intermediate_size", "intermediate_size"),
                          "expert MLP width", layers)
    n_shared = cfg.per_layer(_SHARED_COUNT_KEYS, "shared experts", layers, required=False, minimum=0)
    if n_shared is None and cfg.model_type == "llama4_text":
        n_shared = [1] * layers  # Llama4TextMoe: one shared expert of the expert width in every MoE layer, unnamed
    shared_width = cfg.count(("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"),
                             "shared expert width", required=False, minimum=0)
    # The shared experts' width in each MoE layer: Qwen's shared_expert_intermediate_size is one shared expert;
    # Nemotron-H's moe_shared_expert_intermediate_size x n_shared_experts (vLLM nemotron_h.py NemotronHMoE); else
    # n_shared_experts experts of the routed experts' width (DeepSeek, Kimi, GLM, Llama 4).
    if shared_width is not None:
        shared_widths = [shared_width * n for n in n_shared or [1] * layers]
    else:
        shared_widths = [w * n for w, n in zip(width, n_shared or [0] * layers)]
    beside = dense if cfg.flag("enable_moe_block") else 0
    # The routed experts work in a smaller latent width, projected down and up once per layer: Nemotron 3 Super /
    # Ultra (moe_latent_size) and Kimi-K3 (routed_expert_hidden_size; Kimi-Linear leaves it 0 or out). The router
    # and the shared experts keep the full hidden width.
    latent = _moe_latent(cfg)
    expert_in, beside = (latent, beside + 2 * hidden * latent) if latent else (hidden, beside)
    total = active = 0
    for i, is_moe in enumerate(moe_flags):
        if not is_moe or experts[i] <= 1:
            total, active = total + dense, active + dense
            continue
        expert = matrices * expert_in * width[i]
        shared = matrices * hidden * shared_widths[i]
        router = hidden * experts[i]
        total += experts[i] * expert + shared + router + beside
        active += min(top_k[i], experts[i]) * expert + shared + router + beside
    return total, active


def _moe_latent(cfg: Config) -> int | None:
    """The routed experts' latent width where they work in one (Nemotron 3 moe_latent_size, Kimi-K3
    routed_expert_hidden_size; Kimi-Linear leaves it 0 or out): None without one."""
    return cfg.count(("moe_latent_size", "routed_expert_hidden_size"), "MoE latent width", required=False,
                     minimum=0) or None


def _attention_params(cfg: Config, att: dict, hidden: int, kind: str = "full") -> int:
    """Projection weights of one attention layer of a kind (biases and norms are noise at this precision)."""
    heads = att["attention_heads"]
    if att["kv_lora_rank"] is None:
        kv_heads = att.get(f"{kind}_kv_heads") or att["kv_heads"]
        dim = att.get(f"{kind}_head_dim") or att["head_dim"]
        v_dim = att.get(f"{kind}_head_dim") or att["v_head_dim"]
        v_heads = 0 if kind == "full" and att.get("k_eq_v_layers") else kv_heads  # K=V: no v_proj
        # q and k at the key width, v and o at the value width (MiMo-V2-Flash: 192 and 128)
        return hidden * (dim * (heads + kv_heads) + v_dim * (v_heads + heads))
    rope, qk_dim, v_dim = att["qk_rope_head_dim"], att["head_dim"], att["v_head_dim"]
    q_rank = cfg.count(("q_lora_rank",), "query rank", required=False)
    query = hidden * q_rank + q_rank * heads * qk_dim if q_rank else hidden * heads * qk_dim
    kv = hidden * (att["kv_lora_rank"] + rope) + att["kv_lora_rank"] * heads * (qk_dim - rope + v_dim)
    return query + kv + heads * v_dim * hidden


def _linear_layer_params(cfg: Config, hidden: int) -> int:
    """Projection weights of one Gated DeltaNet, Mamba2, KDA, lightning-attention or short-convolution layer."""
    def get(key: str) -> int:  # shapes were validated by _linear_state already
        return cfg.count((key,), key)

    kind = state_kind(cfg)
    if kind == "kda":
        # q, k, v and o projections of num_heads x head_dim; the forget and output gates' low-rank pairs
        # (hidden -> head_dim -> heads x head_dim); b_proj (one beta per head); three depthwise convolutions
        kda = kda_config(cfg)
        heads, dim, kernel = kda["num_heads"], kda["head_dim"], kda["short_conv_kernel_size"]
        return 4 * hidden * heads * dim + 2 * (hidden * dim + dim * heads * dim) + hidden * heads + 3 * heads * dim * kernel
    if kind == "lightning":
        # MiniMax: qkv_proj (3 x heads x head_dim), output_gate and out_proj
        heads = cfg.count(HEAD_KEYS, "attention head count")
        return 5 * hidden * heads * head_width(cfg, heads)
    if kind == "short_conv":
        # LFM2 ShortConv: in_proj (B, C, x gates), out_proj, and a depthwise convolution of conv_L_cache taps
        _, depth = cfg.raw("conv_L_cache")
        return 4 * hidden * hidden + hidden * (depth or 3)
    if kind == "gdn":
        keys = get("linear_num_key_heads") * get("linear_key_head_dim")
        values = get("linear_num_value_heads") * get("linear_value_head_dim")
        # in_proj_qkvz + in_proj_ba (two gates per value head) + out_proj
        return hidden * (2 * keys + 2 * values + 2 * get("linear_num_value_heads")) + values * hidden
    inner = get("mamba_num_heads") * get("mamba_head_dim")
    # in_proj (x, z, B, C, dt) + out_proj
    return hidden * (2 * inner + 2 * get("n_groups") * get("ssm_state_size") + get("mamba_num_heads")) + inner * hidden


def _decilm_params(att: dict, hidden: int, blocks: list[Block]) -> int:
    """DeciLM layers: each its own attention (GQA, a hidden x hidden linear, or nothing) and MLP width."""
    total = 0
    for block in blocks:
        if block.attention == "gqa":
            total += hidden * att["head_dim"] * (2 * att["attention_heads"] + 2 * block.kv_heads)
        elif block.attention == "linear":
            total += hidden * hidden
        total += 3 * hidden * block.ffn_width if block.ffn == "mlp" else hidden * hidden if block.ffn == "linear" else 0
    return total


def embedding_matrices(cfg: Config) -> int:
    """The vocab x hidden matrices the checkpoint holds: 1 when tie_word_embeddings is true or left out
    (transformers ties by default; ARCH_DEFAULTS holds the classes that do not), else 2."""
    tied = cfg.flag("tie_word_embeddings")
    return 1 if tied or tied is None else 2


def rotary_dim(cfg: Config, att: dict) -> int | None:
    """The elements of a head RoPE rotates where that is not the whole head: rotary_dim (GPT-J, CodeGen), else
    head_dim x partial_rotary_factor (top level, or in rope_parameters); ChatGLM's model file rotates half the
    head (vLLM chatglm.py: rotary_dim // 2). None for the whole head, and for MLA (its qk_rope_head_dim)."""
    head = att["head_dim"]
    if att.get("kv_lora_rank") is not None:
        return None
    _, dim = cfg.raw("rotary_dim")
    if isinstance(dim, int) and not isinstance(dim, bool) and 0 < dim < head:
        return dim
    _, factor = cfg.raw("partial_rotary_factor")
    if factor is None:
        _, rope = cfg.raw("rope_parameters")
        factor = rope.get("partial_rotary_factor") if isinstance(rope, dict) else None
    if isinstance(factor, (int, float)) and not isinstance(factor, bool) and 0 < factor < 1:
        return int(head * factor)
    return head // 2 if cfg.model_type == "chatglm" else None


def expert_layout(cfg: Config, layout: dict, blocks: list[Block] | None) -> dict:
    """experts, expert_intermediate_size and moe_layers: the routed experts of a layer, one expert's width and
    the layers that carry them, when every MoE layer has the same shape (else, and for a dense model, None)."""
    none = {"experts": None, "expert_intermediate_size": None, "moe_layers": None, "expert_hidden_size": None}
    if blocks is not None or not moe_shape(cfg)[0]:
        return none
    pattern = hybrid_pattern(cfg)
    all_layers = layout["layers"] + layout["no_cache_layers"]
    flags = [c == "E" for c in pattern if c in "-E"] if isinstance(pattern, str) else _moe_layer_flags(cfg, all_layers)
    _, experts = cfg.raw(*_EXPERT_KEYS)
    _, width = cfg.raw("moe_intermediate_size", "expert_intermediate_size", "intermediate_size")
    if not sum(flags) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (experts, width)):
        return none  # per-layer lists (Hunyuan) have no one shape
    return {"experts": experts, "expert_intermediate_size": width, "moe_layers": sum(flags),
            "expert_hidden_size": _moe_latent(cfg)}


def _estimate_params(cfg: Config, att: dict, layout: dict, blocks: list[Block] | None = None) -> tuple[int, int]:
    """(params_total, params_active) from the config's shapes: embeddings + attention + MLP.

    Multi-token-prediction layers (num_nextn_predict_layers) are left out: engines load them only
    for speculative decoding.
    """
    hidden = cfg.count(HIDDEN_KEYS, "hidden size, needed to estimate the parameter count (or pass --params-b)")
    vocab = cfg.count(("vocab_size", "padded_vocab_size"), "vocabulary size, needed to estimate the "
                      "parameter count (or pass --params-b)", maximum=100_000_000)
    embeddings = vocab * hidden * embedding_matrices(cfg)
    if blocks is not None:
        total = embeddings + _decilm_params(att, hidden, blocks)
        return total, total
    linear = layout["linear_layers"]
    attention = sum(layout[f"{kind}_layers"] * _attention_params(cfg, att, hidden, kind)
                    for kind in ("full", "sliding", "chunked"))
    if cfg.heads_per_layer is not None or cfg.kv_heads_per_layer is not None:  # each layer's own query / kv heads
        all_layers = layout["layers"] + layout["no_cache_layers"]
        kinds = attention_kinds(cfg, all_layers, Findings(), None)
        query = cfg.heads_per_layer or [att["attention_heads"]] * all_layers
        kv = cfg.kv_heads_per_layer or [att["kv_heads"]] * all_layers
        attention = sum(_attention_params(cfg, {**att, "attention_heads": heads, "kv_heads": kv_heads}, hidden, kind)
                        for heads, kv_heads, kind in zip(query, kv, kinds) if kind in ("full", "sliding", "chunked"))
    all_layers = layout["layers"] + layout["no_cache_layers"]
    # Layers that only read another layer's cache (num_kv_shared_layers, Gemma 3n / 4) keep their own
    # attention weights, each of its own kind (Gemma 4 E2B: 16 sliding of 256 and 4 full of 512).
    shared = cfg.count(("num_kv_shared_layers",), "KV-shared layers", required=False, minimum=0) or 0
    if shared:
        shared_kinds = attention_kinds(cfg, all_layers, Findings(), None)[-shared:]
        attention += sum(_attention_params(cfg, att, hidden, kind) for kind in shared_kinds)
    attention += linear * _linear_layer_params(cfg, hidden) if linear else 0
    pattern = hybrid_pattern(cfg)
    if isinstance(pattern, str):
        moe_flags = [c == "E" for c in pattern if c in "-E"]
    else:
        moe_flags = _moe_layer_flags(cfg, all_layers)
    mlp_total, mlp_active = _mlp_params(cfg, hidden, moe_flags)
    if shared and cfg.flag("use_double_wide_mlp"):
        # vLLM's Gemma4DecoderLayer: intermediate_size x 2 on the KV-shared layers (a gated MLP, 3 matrices)
        wide = shared * 3 * hidden * cfg.count(("intermediate_size",), "MLP width")
        mlp_total, mlp_active = mlp_total + wide, mlp_active + wide
    extra = _per_layer_embedding_params(cfg, hidden, all_layers)
    return embeddings + attention + mlp_total + extra, embeddings + attention + mlp_active + extra


def _per_layer_embedding_params(cfg: Config, hidden: int, layers: int) -> int:
    """Gemma 3n / 4 per-layer embeddings (hidden_size_per_layer_input > 0): a second embedding table of
    vocab_size_per_layer_input x (layers x width), its projection from the hidden state (hidden x layers x
    width), and in every layer a gate (hidden x width) and a projection back (width x hidden). The engine
    loads the table onto the GPU with the rest; Google's "effective" parameter count leaves it out."""
    width = cfg.count(("hidden_size_per_layer_input",), "per-layer input width", required=False, minimum=0)
    if not width:
        return 0
    vocab = cfg.count(("vocab_size_per_layer_input", "vocab_size"), "per-layer embedding vocabulary",
                      maximum=100_000_000)
    return vocab * layers * width + hidden * layers * width + layers * 2 * hidden * width


def param_counts(cfg: Config, att: dict, layout: dict, total: int | None, active: int | None,
                 findings: Findings, blocks: list[Block] | None = None) -> tuple[int, int]:
    """Given counts win; whatever is missing is estimated from the config, with a warning."""
    if total is not None:
        total = whole_number(total, "params_total", cfg.source, maximum=10**15)
    if active is not None:
        active = whole_number(active, "params_active", cfg.source, maximum=10**15)
    is_moe = moe_shape(cfg)[0] > 0
    if total is not None and active is None and not is_moe:
        return total, total
    if total is None or active is None:
        est_total, est_active = _estimate_params(cfg, att, layout, blocks)
        if total is None:
            total = est_total
            findings.warn(
                f"params_total {est_total / 1e9:.2f}B is an ESTIMATE from the config (embeddings + attention + MLP); "
                "pass --params-b, or put model.safetensors.index.json next to config.json"
            )
        if active is None:
            active = min(est_active, total)
            if is_moe:
                findings.warn(f"params_active {active / 1e9:.2f}B is an ESTIMATE from the config (routed top-k + shared experts)")
    if active > total:
        raise ConfigError(f"{cfg.source}: params_active {active:,} exceeds params_total {total:,}; fix the counts")
    return total, active
