"""The registry tables: what a user enters. Nothing here is derived; the figures live in views.

Constraints sit in the schema (NOT NULL, CHECK, UNIQUE, foreign keys) so that a row that
breaks them cannot be written by any client, not only by the CLI.
"""

from __future__ import annotations

from typing import Optional

from sqlalchemy import BigInteger, CheckConstraint, Column, Float, ForeignKey, Integer, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from kvreg.core.rules import RULES
from kvreg.figures.inputs import DEPLOYMENT_DEFAULTS as _D
from kvreg.figures.inputs import KV_GROUPS


def engine_check_sql(table: str) -> list[tuple[str, str]]:
    """(name, condition) of the CHECK constraints on a deployment's rule and engine knobs (the 0002
    migration creates the same ones, each beside its column)."""
    return [
        (f"ck_{table}_rule", "rule IN (" + ", ".join(f"'{r}'" for r in RULES) + ")"),
        (f"ck_{table}_gmu", "gpu_memory_utilization IS NULL OR (gpu_memory_utilization > 0"
                            " AND gpu_memory_utilization <= 1)"),
        (f"ck_{table}_batched_tokens", "max_num_batched_tokens IS NULL OR max_num_batched_tokens > 0"),
        (f"ck_{table}_concurrent_batches", "max_concurrent_batches IS NULL OR max_concurrent_batches > 0"),
        (f"ck_{table}_activation", "activation_bytes IS NULL OR activation_bytes >= 0"),
        (f"ck_{table}_cuda_graph", "cuda_graph_bytes IS NULL OR cuda_graph_bytes >= 0"),
        (f"ck_{table}_mfs", "mem_fraction_static IS NULL OR (mem_fraction_static > 0 AND mem_fraction_static <= 1)"),
        # 0006: the engine release and the measured non-torch and weight memory (docs/engine-rules.md)
        (f"ck_{table}_non_torch", "non_torch_bytes IS NULL OR non_torch_bytes >= 0"),
        (f"ck_{table}_weights_measured", "weights_measured_bytes IS NULL OR weights_measured_bytes >= 0"),
        (f"ck_{table}_engine_release", "engine_release IS NULL OR engine_release >= 0"),
        # 0007: the engines' limit on running requests
        (f"ck_{table}_max_num_seqs", "max_num_seqs IS NULL OR max_num_seqs > 0"),
        # vLLM pages every cache: a block of 0 tokens (kvreg's "no rounding") means nothing to it.
        (f"ck_{table}_vllm_block", "rule <> 'vllm' OR block_size > 0"),
    ]


def _engine_checks(table: str) -> list[CheckConstraint]:
    return [CheckConstraint(cond, name=name) for name, cond in engine_check_sql(table)]


class Dtype(SQLModel, table=True):
    """A number format for KV cache elements and/or weights. A new format is a row, not code."""

    __tablename__ = "dtype"
    __table_args__ = (
        CheckConstraint("bytes_per_element > 0 AND bytes_per_element <= 8", name="ck_dtype_bytes"),
        CheckConstraint("kind IN ('kv', 'weight', 'both')", name="ck_dtype_kind"),
        CheckConstraint(
            "mla_bytes_per_token_per_layer IS NULL OR mla_bytes_per_token_per_layer > 0",
            name="ck_dtype_mla_bytes",
        ),
        CheckConstraint(
            "scale_bytes_per_token_per_head IS NULL OR scale_bytes_per_token_per_head >= 0",
            name="ck_dtype_scale_bytes",
        ),
    )

    name: str = Field(primary_key=True)
    # Exact in binary floating point for every format we know (0.5, 0.25, 0.5625 for nvfp4).
    bytes_per_element: float = Field(sa_column=Column(Float, nullable=False))
    kind: str = Field(sa_column=Column(String, nullable=False))
    # Formats with their own per-token layout for MLA latents (vLLM fp8_ds_mla: 656 B).
    mla_bytes_per_token_per_layer: Optional[int] = Field(default=None, sa_column=Column(Integer, nullable=True))
    # Per-token-head quantized formats keep scales beside the values (vLLM int8_per_token_head and
    # fp8_per_token_head: one fp32 scale for K and one for V per token per KV head = 8 B).
    scale_bytes_per_token_per_head: Optional[int] = Field(default=None, sa_column=Column(Integer, nullable=True))
    notes: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))


class Model(SQLModel, table=True):
    """One model's architecture, as far as memory is concerned."""

    __tablename__ = "model"
    __table_args__ = (
        CheckConstraint("length(name) > 0", name="ck_model_name"),
        CheckConstraint("layers > 0", name="ck_model_layers"),
        CheckConstraint(
            "full_layers >= 0 AND sliding_layers >= 0 AND chunked_layers >= 0 AND linear_layers >= 0",
            name="ck_model_layer_kinds",
        ),
        CheckConstraint(
            "full_layers + sliding_layers + chunked_layers + linear_layers = layers",
            name="ck_model_layer_sum",
        ),
        CheckConstraint("sliding_layers = 0 OR sliding_window > 0", name="ck_model_sliding_window"),
        CheckConstraint("chunked_layers = 0 OR attention_chunk_size > 0", name="ck_model_chunk"),
        CheckConstraint("attention_heads > 0 AND kv_heads > 0", name="ck_model_heads"),
        CheckConstraint("head_dim > 0 AND v_head_dim > 0", name="ck_model_head_dim"),
        CheckConstraint(
            "(kv_lora_rank IS NULL AND qk_rope_head_dim IS NULL) OR (kv_lora_rank > 0 AND qk_rope_head_dim >= 0)",
            name="ck_model_mla",
        ),
        CheckConstraint(
            "linear_layers = 0 OR linear_state_elements_per_layer > 0", name="ck_model_linear_state"
        ),
        CheckConstraint("linear_state_elements_per_layer IS NULL OR linear_state_heads > 0", name="ck_model_linear_heads"),
        CheckConstraint("params_total > 0 AND params_active > 0 AND params_active <= params_total", name="ck_model_params"),
        CheckConstraint("max_position_embeddings > 0", name="ck_model_max_pos"),
        CheckConstraint(
            "indexer_bytes_per_token_per_layer IS NULL OR indexer_bytes_per_token_per_layer > 0",
            name="ck_model_indexer",
        ),
        CheckConstraint("(hidden_size IS NULL OR hidden_size > 0) AND (intermediate_size IS NULL OR"
                        " intermediate_size > 0) AND (vocab_size IS NULL OR vocab_size > 0)", name="ck_model_widths"),
        CheckConstraint("no_cache_layers >= 0", name="ck_model_no_cache_layers"),
        CheckConstraint("sliding_kv_heads IS NULL OR sliding_kv_heads > 0", name="ck_model_sliding_kv_heads"),
        CheckConstraint("sliding_head_dim IS NULL OR sliding_head_dim > 0", name="ck_model_sliding_head_dim"),
        CheckConstraint("chunked_kv_heads IS NULL OR chunked_kv_heads > 0", name="ck_model_chunked_kv_heads"),
        CheckConstraint("chunked_head_dim IS NULL OR chunked_head_dim > 0", name="ck_model_chunked_head_dim"),
        CheckConstraint("k_eq_v_layers >= 0", name="ck_model_k_eq_v_layers"),
        CheckConstraint("linear_recurrent_elements_per_layer IS NULL OR (linear_recurrent_elements_per_layer > 0 AND"
                        " linear_recurrent_elements_per_layer <= linear_state_elements_per_layer)",
                        name="ck_model_linear_recurrent"),
        CheckConstraint("embedding_matrices IS NULL OR (embedding_matrices > 0 AND embedding_matrices <= 2)", name="ck_model_embedding_matrices"),
        CheckConstraint("experts IS NULL OR experts > 0", name="ck_model_experts"),
        CheckConstraint("expert_intermediate_size IS NULL OR expert_intermediate_size > 0",
                        name="ck_model_expert_intermediate_size"),
        CheckConstraint("moe_layers IS NULL OR (moe_layers > 0 AND moe_layers <= layers)", name="ck_model_moe_layers"),
        CheckConstraint("rotary_dim IS NULL OR rotary_dim > 0", name="ck_model_rotary_dim"),
        CheckConstraint("indexer_layers IS NULL OR (indexer_layers > 0 AND indexer_layers <= full_layers)",
                        name="ck_model_indexer_layers"),
        CheckConstraint("linear_state_kind IS NULL OR linear_state_kind IN ('mamba2', 'gated_deltanet', 'kda',"
                        " 'lightning', 'short_conv')", name="ck_model_linear_state_kind"),
        *[CheckConstraint(f"(kv_heads_{n} IS NULL AND kv_layers_{n} IS NULL) OR (kv_heads_{n} > 0 AND kv_layers_{n} > 0)",
                          name=f"ck_model_kv_group_{n}") for n in KV_GROUPS],
        CheckConstraint(" + ".join(f"COALESCE(kv_layers_{n}, 0)" for n in KV_GROUPS) + " < full_layers",
                        name="ck_model_kv_groups_layers"),
        CheckConstraint("expert_hidden_size IS NULL OR expert_hidden_size > 0", name="ck_model_expert_hidden_size"),
        CheckConstraint("tower_params IS NULL OR tower_params > 0", name="ck_model_tower_params"),
        CheckConstraint("vision_num_hidden_layers IS NULL OR vision_num_hidden_layers > 0",
                        name="ck_model_vision_num_hidden_layers"),
        CheckConstraint("vision_hidden_size IS NULL OR vision_hidden_size > 0", name="ck_model_vision_hidden_size"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(String, nullable=False, unique=True))
    architecture: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))
    family: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))
    layers: int
    full_layers: int
    sliding_layers: int = 0
    sliding_window: Optional[int] = None
    chunked_layers: int = 0
    attention_chunk_size: Optional[int] = None
    linear_layers: int = 0
    # Fixed state per sequence per linear layer at TP1, in elements (conv + recurrent).
    linear_state_elements_per_layer: Optional[int] = Field(default=None, sa_type=BigInteger)
    # The head count the state shards by under TP (Gated DeltaNet: linear key heads).
    linear_state_heads: Optional[int] = None
    # State is kept in this dtype (default: the model's native weight dtype), never the KV dtype.
    linear_state_dtype: Optional[str] = Field(
        default=None, sa_column=Column(String, ForeignKey("dtype.name", onupdate="CASCADE"), nullable=True)
    )
    attention_heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    kv_lora_rank: Optional[int] = None
    qk_rope_head_dim: Optional[int] = None
    # DeepSeek-V3.2's sparse-attention indexer keeps its own per-token key cache beside the MLA latent,
    # whatever the KV dtype: index_head_dim 128 fp8 bytes + one fp32 scale per 128 = 132 B per layer.
    indexer_bytes_per_token_per_layer: Optional[int] = None
    # The widths vLLM's profile run holds activations at (0006): the residual stream, the MLP a token
    # passes through (MoE: an expert's width x experts per token) and the vocabulary. NULL: unknown.
    hidden_size: Optional[int] = None
    intermediate_size: Optional[int] = None
    vocab_size: Optional[int] = None
    params_total: int = Field(sa_column=Column(BigInteger, nullable=False))
    params_active: int = Field(sa_column=Column(BigInteger, nullable=False))
    weight_dtype: str = Field(
        sa_column=Column(String, ForeignKey("dtype.name", onupdate="CASCADE"), nullable=False)
    )
    max_position_embeddings: int
    source: str = Field(default="manual", sa_column=Column(String, nullable=False, server_default="manual"))
    source_sha256: Optional[str] = None
    imported_at: Optional[str] = None
    notes: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))
    # Decoder layers that hold no KV cache and no state (not counted in `layers`, which counts the
    # cache-holding ones): Nemotron-Super's no-op attention, Gemma 4's KV-shared layers, Nemotron-H MLP blocks.
    no_cache_layers: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    # Sliding / chunked layers' own kv heads and head width (K and V alike), where they differ from the
    # full layers' kv_heads / head_dim (Gemma 4); NULL: the same as the full layers.
    sliding_kv_heads: Optional[int] = None
    sliding_head_dim: Optional[int] = None
    chunked_kv_heads: Optional[int] = None
    chunked_head_dim: Optional[int] = None
    # Full layers whose K and V are one tensor (Gemma 4 attention_k_eq_v). Engines still cache both.
    k_eq_v_layers: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    # Of linear_state_elements_per_layer, the recurrent (SSM) state's elements, the rest being the conv
    # state (0008): SGLang keeps the recurrent state in float32 (docs/engine-rules.md); NULL: not split.
    linear_recurrent_elements_per_layer: Optional[int] = Field(default=None, sa_type=BigInteger)
    # The vocab_size x hidden_size matrices the checkpoint holds (0009): 2, the input embeddings and the
    # lm_head; 1 when tied (tie_word_embeddings). Engines keep them at 16 bits in a quantized checkpoint.
    # NULL: unknown, or params_total is the checkpoint's size (safetensors), which holds them at their bytes.
    embedding_matrices: Optional[int] = None
    # The routed experts of a mixture-of-experts layer, one expert's MLP width (moe_intermediate_size) and the
    # layers that carry experts (0010): the engine rules lay an MXFP4 checkpoint's experts out as vLLM's MoE
    # kernels do (docs/engine-rules.md). NULL: a dense model, or not known.
    experts: Optional[int] = None
    expert_intermediate_size: Optional[int] = None
    moe_layers: Optional[int] = None
    # The elements of a head RoPE rotates, where that is not the whole head (0012): partial_rotary_factor x
    # head_dim (Qwen3-Next 64 of 256, GLM-4.5 64 of 128). The engines keep a max_position_embeddings x
    # rotary_dim cos/sin table on every GPU. NULL: the whole head (MLA: qk_rope_head_dim).
    rotary_dim: Optional[int] = None
    # Of the MLA layers, those that keep a sparse-attention indexer cache of their own (0013): GLM-5.2's
    # indexer_types "full" (21 of 78); its "shared" layers reuse the last full layer's top-k and keep none.
    # NULL: every MLA layer (DeepSeek-V3.2, GLM-5).
    indexer_layers: Optional[int] = None
    # Which recurrent layer the linear layers are (0013), as `model show --layers` names them: mamba2,
    # gated_deltanet, kda, lightning or short_conv. NULL: not named (the state shape is what counts).
    linear_state_kind: Optional[str] = None
    # Per-layer kv heads (0017): of the full layers, kv_layers_N hold kv_heads_N kv heads each (DeciLM block_configs
    # whose n_heads_in_group differ, a num_key_value_heads list); the other full layers, at least one, hold kv_heads.
    # NULL: no such group (every full layer holds kv_heads).
    kv_heads_2: Optional[int] = None
    kv_layers_2: Optional[int] = None
    kv_heads_3: Optional[int] = None
    kv_layers_3: Optional[int] = None
    kv_heads_4: Optional[int] = None
    kv_layers_4: Optional[int] = None
    # The routed experts' input and output width where they work in a latent (0017): Kimi-K3's
    # routed_expert_hidden_size 3,584 of hidden 7,168, Nemotron 3's moe_latent_size. NULL: hidden_size.
    expert_hidden_size: Optional[int] = None
    # A multimodal model's vision/audio towers and their projectors into the language model (0020), counted apart
    # from params_total (the language model): vLLM and SGLang load them on every GPU, split over TP, at 16 bits.
    # NULL: no tower, or not known. vision_num_hidden_layers and vision_hidden_size are the config's
    # vision_config keys of those names (NULL where it names none), which SGLang's multimodal memory
    # adjustment reads.
    tower_params: Optional[int] = Field(default=None, sa_type=BigInteger)
    vision_num_hidden_layers: Optional[int] = None
    vision_hidden_size: Optional[int] = None

class Gpu(SQLModel, table=True):
    """An accelerator SKU."""

    __tablename__ = "gpu"
    __table_args__ = (
        CheckConstraint("length(name) > 0", name="ck_gpu_name"),
        CheckConstraint("memory_bytes > 0", name="ck_gpu_memory"),
        CheckConstraint("memory_bandwidth_bytes_per_s IS NULL OR memory_bandwidth_bytes_per_s > 0", name="ck_gpu_bw"),
        CheckConstraint("price_per_hour IS NULL OR price_per_hour >= 0", name="ck_gpu_price_hour"),
        CheckConstraint("unit_price IS NULL OR unit_price >= 0", name="ck_gpu_unit_price"),
        CheckConstraint("reported_memory_bytes IS NULL OR (reported_memory_bytes > 0 AND"
                        " reported_memory_bytes <= memory_bytes)", name="ck_gpu_reported_memory"),
        CheckConstraint("compute_capability IS NULL OR compute_capability > 0", name="ck_gpu_compute_capability"),
        CheckConstraint("fabric IS NULL OR fabric IN (0, 1)", name="ck_gpu_fabric"),
        CheckConstraint("lead_time_quarters >= 0", name="ck_gpu_lead_time"),
        CheckConstraint("node_gpus > 0", name="ck_gpu_node_gpus"),
        CheckConstraint("flops_bf16_per_s IS NULL OR flops_bf16_per_s > 0", name="ck_gpu_flops_bf16"),
        CheckConstraint("flops_fp8_per_s IS NULL OR flops_fp8_per_s > 0", name="ck_gpu_flops_fp8"),
        CheckConstraint("flops_fp4_per_s IS NULL OR flops_fp4_per_s > 0", name="ck_gpu_flops_fp4"),
        CheckConstraint("reported_memory_estimated IN (0, 1)", name="ck_gpu_reported_memory_estimated"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(String, nullable=False, unique=True))
    vendor: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))
    memory_bytes: int = Field(sa_column=Column(BigInteger, nullable=False))
    memory_bandwidth_bytes_per_s: Optional[int] = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    interconnect: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))
    price_per_hour: Optional[float] = Field(default=None, sa_column=Column(Float, nullable=True))
    unit_price: Optional[float] = Field(default=None, sa_column=Column(Float, nullable=True))
    notes: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))
    # What CUDA reports as the device's total memory (torch.cuda.mem_get_info), which the engines size
    # from: an H100 80GB reports 79.19 GiB. NULL: not known, the engine rules use memory_bytes.
    reported_memory_bytes: Optional[int] = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    # CUDA compute capability (9.0 for an H100, 8.0 for an A100; 0011): below 8.9 a GPU has no FP8 units, and vLLM
    # runs an FP8 checkpoint through its Marlin kernels with 16-bit group scales. NULL: not an NVIDIA GPU, or not known.
    compute_capability: Optional[float] = Field(default=None, sa_column=Column(Float, nullable=True))
    # 1 when a node's GPUs share a GPU fabric (NVLink and NVSwitch, AMD Infinity Fabric), 0 when they talk over PCIe
    # only (0011): NCCL's and the custom all-reduce's buffers, which the engines count before sizing the KV cache, are
    # large on a fabric and small over PCIe. NULL: not known, taken as a fabric.
    fabric: Optional[int] = Field(default=None, sa_column=Column(Integer, nullable=True))
    # Quarters from placing an order to the GPUs serving (0014): the purchase schedule's order_by is the
    # quarter a purchase lands in less this many. 0: bought in the quarter it is needed.
    lead_time_quarters: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    # GPUs in one node of this type as it is bought (0014): `plan rollup --whole-nodes` rounds purchases up to it.
    node_gpus: int = Field(default=8, sa_column=Column(Integer, nullable=False, server_default="8"))
    # Dense tensor throughput per dtype, FLOP per second without 2:4 sparsity (0015), the vendor's datasheet
    # figure: BF16/FP16, FP8, and FP4 (NVFP4/MXFP4). NULL: the GPU has no such units, or not known.
    flops_bf16_per_s: Optional[int] = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    flops_fp8_per_s: Optional[int] = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    flops_fp4_per_s: Optional[int] = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    # 1 when reported_memory_bytes was estimated from the nominal memory by kvreg's rule (0015; `kvreg gpu add`
    # without --reported-memory, docs/engine-rules.md) rather than read from a log; 0 when given or unknown.
    reported_memory_estimated: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))


class Deployment(SQLModel):
    """The deployment inputs (kvreg.figures.inputs, table "deployment"), the columns a saved plan and a
    scratch scenario share, with the inputs' declared defaults. tests/test_input_lists.py holds them to
    the declarations. Which allocation rule the figures follow, and the engines' own knobs (NULL: the
    engine's default, see kvreg.figures.declarations and docs/engine-rules.md)."""

    gpus_per_node: int = _D["gpus_per_node"]
    tp: int = _D["tp"]
    pp: int = _D["pp"]
    dp_attention: int = _D["dp_attention"]
    context_tokens: int = Field(default=_D["context_tokens"], sa_type=BigInteger)
    avg_tokens: Optional[int] = Field(default=None, sa_type=BigInteger)
    reserve: float = Field(default=_D["reserve"], sa_type=Float, nullable=False)
    kv_cache_memory_bytes: Optional[int] = Field(default=None, sa_type=BigInteger, nullable=True)
    block_size: int = _D["block_size"]
    rule: str = Field(default=_D["rule"], sa_type=String, nullable=False,
                      sa_column_kwargs={"server_default": _D["rule"]})
    gpu_memory_utilization: Optional[float] = Field(default=None, sa_type=Float, nullable=True)
    max_num_batched_tokens: Optional[int] = Field(default=None, sa_type=BigInteger, nullable=True)
    max_concurrent_batches: Optional[int] = Field(default=None, sa_type=Integer, nullable=True)
    activation_bytes: Optional[int] = Field(default=None, sa_type=BigInteger, nullable=True)
    cuda_graph_bytes: Optional[int] = Field(default=None, sa_type=BigInteger, nullable=True)
    mem_fraction_static: Optional[float] = Field(default=None, sa_type=Float, nullable=True)
    engine_version: Optional[str] = Field(default=None, sa_type=String, nullable=True)
    engine_release: Optional[int] = Field(default=None, sa_type=Integer, nullable=True)
    non_torch_bytes: Optional[int] = Field(default=None, sa_type=BigInteger, nullable=True)
    weights_measured_bytes: Optional[int] = Field(default=None, sa_type=BigInteger, nullable=True)
    max_num_seqs: Optional[int] = Field(default=None, sa_type=Integer, nullable=True)


class LatencyWorkload(Deployment):
    """A deployment with the workload its latency is asked for (kvreg.figures.inputs, table "workload"; 0018):
    request lengths, the requests a replica serves at once and the latency targets. NULL: not asked."""

    input_tokens: Optional[int] = Field(default=None, sa_type=BigInteger, nullable=True)
    output_tokens: Optional[int] = Field(default=None, sa_type=BigInteger, nullable=True)
    concurrency: Optional[int] = Field(default=None, sa_type=BigInteger, nullable=True)
    tpot_target_ms: Optional[float] = Field(default=None, sa_type=Float, nullable=True)
    ttft_target_ms: Optional[float] = Field(default=None, sa_type=Float, nullable=True)


def _workload_checks(table: str) -> list[CheckConstraint]:
    return [CheckConstraint(f"{c} IS NULL OR {c} > 0", name=f"ck_{table}_{c}") for c in WORKLOAD_COLUMNS]


WORKLOAD_COLUMNS = ("input_tokens", "output_tokens", "concurrency", "tpot_target_ms", "ttft_target_ms")


class Plan(LatencyWorkload, table=True):
    """A named deployment: one model served on one GPU type with one parallelism layout."""

    __tablename__ = "plan"
    __table_args__ = (
        CheckConstraint("length(name) > 0", name="ck_plan_name"),
        CheckConstraint("gpus_per_node > 0", name="ck_plan_gpn"),
        CheckConstraint("tp > 0 AND pp > 0 AND dp_attention > 0", name="ck_plan_parallel"),
        CheckConstraint("tp * pp <= gpus_per_node", name="ck_plan_fits_node"),
        CheckConstraint("tp % dp_attention = 0", name="ck_plan_dp_divides_tp"),
        CheckConstraint("context_tokens > 0", name="ck_plan_context"),
        CheckConstraint("avg_tokens IS NULL OR avg_tokens > 0", name="ck_plan_avg"),
        CheckConstraint("reserve >= 0 AND reserve < 1", name="ck_plan_reserve"),
        CheckConstraint("kv_cache_memory_bytes IS NULL OR kv_cache_memory_bytes > 0", name="ck_plan_kvmem"),
        CheckConstraint("block_size >= 0", name="ck_plan_block"),
        *_engine_checks("plan"),
        *_workload_checks("plan"),
        CheckConstraint("measured_kv_cache_tokens IS NULL OR measured_kv_cache_tokens >= 0",
                        name="ck_plan_measured_tokens"),
        CheckConstraint("measured_max_concurrency IS NULL OR measured_max_concurrency >= 0",
                        name="ck_plan_measured_concurrency"),
        CheckConstraint("measured_kv_cache_bytes IS NULL OR measured_kv_cache_bytes >= 0",
                        name="ck_plan_measured_kv_bytes"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(String, nullable=False, unique=True))
    model_id: int = Field(sa_column=Column(Integer, ForeignKey("model.id", ondelete="RESTRICT"), nullable=False))
    gpu_id: int = Field(sa_column=Column(Integer, ForeignKey("gpu.id", ondelete="RESTRICT"), nullable=False))
    kv_dtype: str = Field(sa_column=Column(String, ForeignKey("dtype.name", onupdate="CASCADE"), nullable=False))
    weight_dtype: str = Field(sa_column=Column(String, ForeignKey("dtype.name", onupdate="CASCADE"), nullable=False))
    notes: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))
    # What the engine printed at startup for this plan (kvreg plan calibrate), to set against the figures.
    measured_kv_cache_tokens: Optional[int] = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    measured_max_concurrency: Optional[float] = Field(default=None, sa_column=Column(Float, nullable=True))
    measured_engine_version: Optional[str] = Field(default=None, sa_column=Column(String, nullable=True))
    # 0006: the KV memory the engine logged, and the log the measured terms came from (kvreg plan
    # calibrate --log); a plan with a source is "calibrated": its measured terms are its inputs.
    measured_kv_cache_bytes: Optional[int] = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    calibration_source: Optional[str] = Field(default=None, sa_column=Column(String, nullable=True))
    # 0016: what `kvreg plan optimize` may change (kvreg plan set --allow-gpus / --allow-kv-dtypes):
    # comma-separated names beyond the plan's own GPU type and KV dtype (NULL: none).
    allow_gpus: Optional[str] = Field(default=None, sa_column=Column(String, nullable=True))
    allow_kv_dtypes: Optional[str] = Field(default=None, sa_column=Column(String, nullable=True))


class Demand(SQLModel, table=True):
    """Target concurrent users of a plan in a quarter."""

    __tablename__ = "demand"
    __table_args__ = (
        UniqueConstraint("plan_id", "quarter", name="uq_demand_plan_quarter"),
        CheckConstraint("users >= 0", name="ck_demand_users"),
        CheckConstraint("length(quarter) = 6 AND substr(quarter, 5, 1) = 'Q' AND substr(quarter, 6, 1) IN ('1','2','3','4')",
                        name="ck_demand_quarter"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    plan_id: int = Field(sa_column=Column(Integer, ForeignKey("plan.id", ondelete="CASCADE"), nullable=False))
    quarter: str = Field(sa_column=Column(String, nullable=False))
    users: int = Field(sa_column=Column(BigInteger, nullable=False))


_QUARTER_CHECK = ("length(quarter) = 6 AND substr(quarter, 5, 1) = 'Q' AND substr(quarter, 6, 1) IN ('1','2','3','4')")


class Fleet(SQLModel, table=True):
    """GPUs installed of one GPU type from a quarter on: owned, and committed (reserved) cloud
    capacity with its own price. An entry holds until the GPU type's next entry (carry-forward)."""

    __tablename__ = "fleet"
    __table_args__ = (
        UniqueConstraint("gpu_id", "quarter", name="uq_fleet_gpu_quarter"),
        CheckConstraint("gpus_owned >= 0", name="ck_fleet_owned"),
        CheckConstraint("gpus_reserved >= 0", name="ck_fleet_reserved"),
        CheckConstraint("reserved_price_per_hour IS NULL OR reserved_price_per_hour >= 0", name="ck_fleet_price"),
        CheckConstraint(_QUARTER_CHECK, name="ck_fleet_quarter"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    gpu_id: int = Field(sa_column=Column(Integer, ForeignKey("gpu.id", ondelete="RESTRICT"), nullable=False))
    quarter: str = Field(sa_column=Column(String, nullable=False))
    gpus_owned: int = Field(sa_column=Column(BigInteger, nullable=False))
    gpus_reserved: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, server_default="0"))
    reserved_price_per_hour: Optional[float] = Field(default=None, sa_column=Column(Float, nullable=True))


class WorkloadClass(SQLModel, table=True):
    """One request class of a plan's workload mix (seed 002: chat at 1,500 tokens, documents at 13,000).

    A plan with classes holds the share-weighted mean of its classes' KV per request; its own
    avg_tokens is then unused. Shares are relative weights: the views divide by their sum."""

    __tablename__ = "workload_class"
    __table_args__ = (
        UniqueConstraint("plan_id", "name", name="uq_workload_class_plan_name"),
        CheckConstraint("length(name) > 0", name="ck_workload_class_name"),
        CheckConstraint("avg_tokens > 0", name="ck_workload_class_tokens"),
        CheckConstraint("share > 0 AND share <= 1000000", name="ck_workload_class_share"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    plan_id: int = Field(sa_column=Column(Integer, ForeignKey("plan.id", ondelete="CASCADE"), nullable=False))
    name: str = Field(sa_column=Column(String, nullable=False))
    avg_tokens: int = Field(sa_column=Column(BigInteger, nullable=False))
    share: float = Field(sa_column=Column(Float, nullable=False))


class Scenario(LatencyWorkload, table=True):
    """Scratch rows for ad-hoc questions (`kvreg capacity`): written and rolled back in one
    transaction, so the capacity view answers them without saving anything."""

    __tablename__ = "scenario"
    __table_args__ = tuple(_engine_checks("scenario")) + tuple(_workload_checks("scenario"))

    id: Optional[int] = Field(default=None, primary_key=True)
    model_id: int = Field(sa_column=Column(Integer, ForeignKey("model.id", ondelete="CASCADE"), nullable=False))
    gpu_id: int = Field(sa_column=Column(Integer, ForeignKey("gpu.id", ondelete="CASCADE"), nullable=False))
    kv_dtype: str = Field(sa_column=Column(String, ForeignKey("dtype.name"), nullable=False))
    weight_dtype: str = Field(sa_column=Column(String, ForeignKey("dtype.name"), nullable=False))


MODEL_FIELDS = [c.name for c in Model.__table__.columns if c.name != "id"]
GPU_FIELDS = [c.name for c in Gpu.__table__.columns if c.name != "id"]


def server_default_value(column):
    """A column's server default as the value it stands for: a count's '0' is 0, a text's '' is ''."""
    arg = column.server_default.arg
    return int(arg) if isinstance(column.type, Integer) else arg
DTYPE_FIELDS = [c.name for c in Dtype.__table__.columns]


class Meta(SQLModel, table=True):
    """Registry bookkeeping: which declarations the views were compiled from, when it was seeded."""

    __tablename__ = "kvreg_meta"

    key: str = Field(primary_key=True)
    value: str = Field(sa_column=Column(String, nullable=False))
