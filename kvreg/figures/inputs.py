"""The inputs of the figures, declared once: name, unit, meaning, the relation and column each is read
from, what the schema keeps true of it, and what a new deployment takes when it is not given.

Standard library only: the capacity question, the plan commands and the tables read their lists of
columns and their defaults here without importing the figure declarations (kvreg.figures.declarations
builds every expression tree, tens of milliseconds at start-up).
"""

from __future__ import annotations

from dataclasses import dataclass

from .engine_defaults import (
    VLLM_ASYNC_CONCURRENT_BATCHES,
    VLLM_GPU_MEMORY_UTILIZATION,
    VLLM_GPU_MEMORY_UTILIZATION_BEFORE,
    VLLM_MAX_NUM_BATCHED_TOKENS,
    VLLM_SMALL_GPU_MAX_NUM_BATCHED_TOKENS,
)


# Prices: a GPU-hour costs a few USD and a GPU tens of thousands; these bounds leave a thousandfold
# headroom and keep every cost figure (price x 730 hours x GPUs x quarters) far below overflow.
MAX_PRICE_PER_HOUR = 1e6
# Per-layer kv heads: besides kv_heads, up to three groups of full layers with kv heads of their own (kv_heads_N of
# kv_layers_N), so four head counts in all; a config with more is refused, naming the key.
KV_GROUPS = (2, 3, 4)
MAX_UNIT_PRICE = 1e9


@dataclass(frozen=True)
class InputDecl:
    """An input of the figures. What the schema (kvreg/db/tables.py) says about its column, for the
    compilers that cannot read the schema: `nullable`, it may be NULL; `positive`, a CHECK keeps it
    above zero when set, so it divides without a zero test. tests/test_excel_compiler.py holds the
    two against the tables. `table` is the relation it is read from (a key of INPUT_TABLES) and
    `column` its column there, when not named like the input. `default`: what a new deployment takes
    when the input is not given (a plan, a `kvreg capacity` question, the tables' column defaults);
    None, NULL, for a nullable input (an engine setting's NULL is the engine's own default).
    `maximum`: the largest value a real input may take, so that no figure built on it overflows to
    infinity (a price of 1e308 times 730 hours is inf, which JSON cannot hold and PostgreSQL
    refuses); kvreg.registry.check_input enforces it on every path a value enters by."""

    name: str
    unit: str
    meaning: str
    kind: str = "int"
    nullable: bool = False
    positive: bool = False
    table: str = ""
    column: str = ""
    default: int | float | str | None = None
    maximum: float | None = None

    def __post_init__(self):
        assert self.table in INPUT_TABLES, (self.name, self.table)
        if not self.column:
            object.__setattr__(self, "column", self.name)


# The relations an input is read from (InputDecl.table), each with the registry tables behind it
# (kvreg/db/tables.py). A deployment is a saved plan or a scratch scenario; what an engine printed for
# a plan (kvreg plan calibrate) is kept on the plan; the three dtypes are rows of dtype, found by the
# deployment's kv_dtype and weight_dtype and the model's linear-state dtype; a plan's mix is computed
# over its workload classes (CLASS_MEANS) and has no table. The workload a deployment's latency is asked
# for (request lengths, concurrency, targets) sits on the same rows as its deployment inputs but apart from
# them: what the latency figures read, not how the deployment allocates memory.
INPUT_TABLES = {
    "model": ("model",),
    "gpu": ("gpu",),
    "deployment": ("plan", "scenario"),
    "calibration": ("plan",),
    "kv_dtype": ("dtype",),
    "weight_dtype": ("dtype",),
    "state_dtype": ("dtype",),
    "class": ("workload_class",),
    "workload": ("plan", "scenario"),
    "mix": (),
    "demand": ("demand",),
}


def inputs_of(table: str) -> list[str]:
    """The inputs read from one relation of INPUT_TABLES, in declaration order."""
    assert table in INPUT_TABLES, table
    return [i.name for i in _INPUTS if i.table == table]


# What-ifs (kvreg.figures.views.whatif_with): each view a question about unsaved deployments is asked
# of, with the registry tables whose rows the question binds in place of the saved ones.
WHATIF_TABLES = {
    "capacity": ("scenario",),
    "plan_capacity": ("plan", "workload_class"),
    "plan_quarter": ("plan", "workload_class", "demand"),
}


def _whatif_columns() -> dict[str, tuple[tuple[str, str], ...]]:
    """Each bound table's columns the views read, with their kind (int, real, text): the keys that join
    a deployment to its model, GPU and dtypes, then the inputs read from it."""
    def read(*tables):
        return tuple((i.column, i.kind) for t in tables for i in _INPUTS if i.table == t)
    keyed = (("model_id", "int"), ("gpu_id", "int"), ("kv_dtype", "text"), ("weight_dtype", "text"))
    return {
        "scenario": (("id", "int"), *keyed, *read("deployment", "workload")),
        "plan": (("id", "int"), ("name", "text"), *keyed, *read("deployment", "calibration", "workload")),
        "workload_class": (("id", "int"), ("plan_id", "int"), ("name", "text"), *read("class")),
        "demand": (("id", "int"), ("plan_id", "int"), ("quarter", "text"), *read("demand")),
    }


# --------------------------------------------------------------------------- inputs

_INPUTS = [
    # model
    InputDecl("architecture", "name", "the model's architecture (config.json's architectures: vLLM's model file)",
              "text", table="model"),
    InputDecl("layers", "layers", "transformer layers", positive=True, table="model"),
    InputDecl("full_layers", "layers", "layers with full (global) attention", table="model"),
    InputDecl("sliding_layers", "layers", "layers with sliding-window attention", table="model"),
    InputDecl("sliding_window", "tokens", "sliding window length", nullable=True, table="model"),
    InputDecl("chunked_layers", "layers", "layers with chunked local attention", table="model"),
    InputDecl("attention_chunk_size", "tokens", "attention chunk length", nullable=True, table="model"),
    InputDecl("linear_layers", "layers", "linear-attention / state-space layers", table="model"),
    InputDecl("linear_state_elements_per_layer", "elements", "fixed state per sequence per linear layer at TP1",
              nullable=True, table="model"),
    InputDecl("linear_recurrent_elements_per_layer", "elements", "of linear_state_elements_per_layer, the recurrent"
              " (SSM) state's, the rest being the conv state (NULL: not split)", nullable=True, positive=True,
              table="model"),
    # positive: ck_model_linear_heads keeps it above zero only while linear_state_elements_per_layer is set.
    InputDecl("linear_state_heads", "heads", "heads the linear state shards by under TP", nullable=True, positive=True,
              table="model"),
    InputDecl("no_cache_layers", "layers", "decoder layers holding no KV cache and no state (not in layers)",
              table="model"),
    InputDecl("attention_heads", "heads", "query heads", positive=True, table="model"),
    InputDecl("kv_heads", "heads", "key/value heads of the full-attention layers (of every layer unless a kind has its own)",
              positive=True, table="model"),
    InputDecl("head_dim", "elements", "key head dimension of the full-attention layers", positive=True, table="model"),
    InputDecl("v_head_dim", "elements", "value head dimension of the full-attention layers", positive=True,
              table="model"),
    InputDecl("sliding_kv_heads", "heads", "key/value heads of the sliding layers (NULL: kv_heads)",
              nullable=True, positive=True, table="model"),
    InputDecl("sliding_head_dim", "elements", "key and value head dimension of the sliding layers (NULL: head_dim, v_head_dim)",
              nullable=True, positive=True, table="model"),
    InputDecl("chunked_kv_heads", "heads", "key/value heads of the chunked layers (NULL: kv_heads)",
              nullable=True, positive=True, table="model"),
    InputDecl("chunked_head_dim", "elements", "key and value head dimension of the chunked layers (NULL: head_dim, v_head_dim)",
              nullable=True, positive=True, table="model"),
    InputDecl("kv_lora_rank", "elements", "MLA latent rank (NULL when not MLA)", nullable=True, positive=True,
              table="model"),
    InputDecl("qk_rope_head_dim", "elements", "MLA decoupled RoPE key dimension", nullable=True, table="model"),
    InputDecl("hidden_size", "elements", "residual stream width (NULL: unknown)", nullable=True, positive=True,
              table="model"),
    InputDecl("intermediate_size", "elements", "MLP width a token passes through; MoE: an expert's width x experts"
              " per token (NULL: unknown)", nullable=True, positive=True, table="model"),
    InputDecl("vocab_size", "tokens", "vocabulary size (NULL: unknown)", nullable=True, positive=True, table="model"),
    InputDecl("embedding_matrices", "matrices", "vocab_size x hidden_size matrices the checkpoint holds: 2 (input"
              " embeddings and lm_head), 1 when tied (NULL: unknown, or params_total is the checkpoint's size in bytes)", nullable=True, positive=True, table="model"),
    InputDecl("experts", "experts", "routed experts in each mixture-of-experts layer (NULL: dense, or unknown)",
              nullable=True, positive=True, table="model"),
    InputDecl("expert_intermediate_size", "elements", "one expert's MLP width, moe_intermediate_size (NULL: dense, or"
              " unknown)", nullable=True, positive=True, table="model"),
    InputDecl("moe_layers", "layers", "layers that carry experts (NULL: dense, or unknown)", nullable=True,
              positive=True, table="model"),
    InputDecl("expert_hidden_size", "elements", "the routed experts' input and output width where they work in a"
              " latent projected from hidden_size (Kimi-K3 routed_expert_hidden_size, Nemotron 3 moe_latent_size; NULL:"
              " hidden_size)", nullable=True, positive=True, table="model"),
    InputDecl("rotary_dim", "elements", "the elements of a head RoPE rotates, where not the whole head"
              " (partial_rotary_factor x head_dim; NULL: the whole head, MLA: qk_rope_head_dim)", nullable=True,
              positive=True, table="model"),
    InputDecl("params_total", "params", "all parameters (all experts)", positive=True, table="model"),
    InputDecl("params_active", "params", "parameters read per token", positive=True, table="model"),
    InputDecl("max_position_embeddings", "tokens", "claimed context length", positive=True, table="model"),
    InputDecl("indexer_bytes_per_token_per_layer", "bytes",
              "DeepSeek-V3.2 indexer cache per token per layer, whatever the KV dtype (NULL: no indexer)",
              nullable=True, positive=True, table="model"),
    InputDecl("indexer_layers", "layers", "MLA layers keeping an indexer cache of their own (GLM-5.2 indexer_types"
              " \"full\"; NULL: every MLA layer)", nullable=True, positive=True, table="model"),
    *[decl for n in KV_GROUPS for decl in (
        InputDecl(f"kv_heads_{n}", "heads", f"per-layer kv heads: the kv heads of each of kv_layers_{n} full layers"
                  " (NULL: no such group)", nullable=True, positive=True, table="model"),
        InputDecl(f"kv_layers_{n}", "layers", f"per-layer kv heads: full layers holding kv_heads_{n} kv heads, not"
                  " kv_heads (NULL: none)", nullable=True, positive=True, table="model"))],
    # dtypes
    InputDecl("kv_dtype", "name", "KV cache dtype", "text", table="kv_dtype", column="name", default="bf16"),
    InputDecl("kv_bytes_per_element", "bytes", "bytes per KV element", "real", positive=True,
              table="kv_dtype", column="bytes_per_element"),
    InputDecl("kv_mla_bytes_per_token_per_layer", "bytes", "a format's own MLA bytes per token per layer",
              nullable=True, positive=True, table="kv_dtype", column="mla_bytes_per_token_per_layer"),
    InputDecl("kv_scale_bytes_per_token_per_head", "bytes",
              "a per-token-head format's scale bytes per token per KV head per layer, K and V together", nullable=True,
              table="kv_dtype", column="scale_bytes_per_token_per_head"),
    InputDecl("weight_dtype_name", "name", "the weight dtype's name (fp4: an MXFP4 checkpoint, its experts 4-bit)", "text",
              table="weight_dtype", column="name"),
    InputDecl("weight_bytes_per_param", "bytes", "bytes per weight", "real", positive=True,
              table="weight_dtype", column="bytes_per_element"),
    InputDecl("state_bytes_per_element", "bytes", "bytes per linear-state element (model dtype)", "real",
              positive=True, table="state_dtype", column="bytes_per_element"),
    # gpu
    InputDecl("gpu_name", "name", "the GPU type's name (vLLM reads its device name: an A100 keeps the small batch"
              " defaults)", "text", table="gpu", column="name"),
    InputDecl("memory_bytes", "bytes", "GPU memory (nominal)", positive=True, table="gpu"),
    InputDecl("reported_memory_bytes", "bytes",
              "GPU memory as CUDA reports it (an H100 80GB: 79.19 GiB); NULL: not known, memory_bytes is used",
              nullable=True, positive=True, table="gpu"),
    InputDecl("memory_bandwidth_bytes_per_s", "bytes/s", "GPU memory bandwidth", nullable=True, positive=True,
              table="gpu"),
    InputDecl("compute_capability", "version", "CUDA compute capability (9.0 for an H100; below 8.9 no FP8 units);"
              " NULL: not an NVIDIA GPU, or not known", "real", nullable=True, positive=True, table="gpu", maximum=100),
    InputDecl("fabric", "flag", "1 when a node's GPUs share NVLink or another GPU fabric, 0 over PCIe only; NULL: not"
              " known, taken as a fabric", nullable=True, table="gpu"),
    InputDecl("price_per_hour", "USD/h", "price per GPU-hour", "real", nullable=True, table="gpu",
              maximum=MAX_PRICE_PER_HOUR),
    InputDecl("unit_price", "USD", "price to buy one GPU", "real", nullable=True, table="gpu", maximum=MAX_UNIT_PRICE),
    InputDecl("lead_time_quarters", "quarters", "quarters from placing an order for this GPU type to the GPUs"
              " serving", table="gpu"),
    InputDecl("node_gpus", "GPUs", "GPUs in one node of this type as it is bought (purchases by whole nodes)",
              positive=True, table="gpu"),
    InputDecl("flops_bf16_per_s", "FLOP/s", "dense BF16/FP16 tensor FLOP per second, without sparsity (an H100 SXM:"
              " 989.4 TFLOPS); NULL: not known", nullable=True, positive=True, table="gpu"),
    InputDecl("flops_fp8_per_s", "FLOP/s", "dense FP8 tensor FLOP per second, without sparsity (an H100 SXM: 1,978.9"
              " TFLOPS); NULL: no FP8 units, or not known", nullable=True, positive=True, table="gpu"),
    InputDecl("flops_fp4_per_s", "FLOP/s", "dense FP4 (NVFP4, MXFP4) tensor FLOP per second, without sparsity (a"
              " B200: 9 PFLOPS); NULL: no FP4 units, or not known", nullable=True, positive=True, table="gpu"),
    # deployment
    InputDecl("tp", "GPUs", "tensor-parallel size", positive=True, table="deployment", default=1),
    InputDecl("pp", "GPUs", "pipeline-parallel size", positive=True, table="deployment", default=1),
    InputDecl("dp_attention", "ranks", "attention data-parallel size inside a TP group", positive=True,
              table="deployment", default=1),
    InputDecl("gpus_per_node", "GPUs", "GPUs in a node", positive=True, table="deployment", default=8),
    InputDecl("context_tokens", "tokens", "context length a sequence may reach (max_model_len)", positive=True,
              table="deployment", default=131072),
    InputDecl("avg_tokens", "tokens", "average tokens a request holds (prompt + output)", nullable=True, positive=True,
              table="deployment"),
    # workload classes (a plan's mix of request classes, table workload_class)
    InputDecl("class_tokens", "tokens", "average tokens a request of this class holds (prompt + output)",
              positive=True, table="class", column="avg_tokens"),
    InputDecl("share", "weight", "the class's share of requests, a relative weight (shares are divided by"
              " their sum: 0.8 and 0.2, or 4 and 1)", "real", positive=True, table="class", maximum=1e6),
    InputDecl("class_input_tokens", "tokens", "prompt tokens of a request of this class (NULL: the plan's)",
              nullable=True, positive=True, table="class", column="input_tokens"),
    InputDecl("class_output_tokens", "tokens", "tokens a request of this class generates (NULL: the plan's)",
              nullable=True, positive=True, table="class", column="output_tokens"),
    InputDecl("class_tpot_target_ms", "ms", "the time per output token a request of this class may take at most"
              " (NULL: no target of its own)", "real", nullable=True, positive=True, table="class",
              column="tpot_target_ms", maximum=1e9),
    InputDecl("class_ttft_target_ms", "ms", "the time to first token a request of this class may take at most"
              " (NULL: no target of its own)", "real", nullable=True, positive=True, table="class",
              column="ttft_target_ms", maximum=1e9),
    InputDecl("mix_avg_tokens", "tokens", "share-weighted mean of the plan's class tokens (NULL: no classes)",
              "real", nullable=True, table="mix"),
    InputDecl("mix_input_tokens", "tokens", "share-weighted mean of the plan's class prompt tokens (NULL: no classes,"
              " or classes without lengths)", "real", nullable=True, table="mix"),
    InputDecl("mix_output_tokens", "tokens", "share-weighted mean of the plan's class output tokens (NULL: no"
              " classes, or classes without lengths)", "real", nullable=True, table="mix"),
    InputDecl("mix_tpot_target_ms", "ms", "the strictest tpot target of the plan's classes (NULL: none)", "real",
              nullable=True, table="mix"),
    InputDecl("mix_ttft_target_ms", "ms", "the strictest ttft target of the plan's classes (NULL: none)", "real",
              nullable=True, table="mix"),
    InputDecl("mix_kv_bytes_per_request_per_gpu", "bytes",
              "share-weighted mean of the plan's class_kv_bytes_per_request_per_gpu (NULL: no classes)", "real",
              nullable=True, table="mix"),
    InputDecl("reserve", "fraction", "share of GPU memory held back for activations and overheads", "real",
              table="deployment", default=0.12),
    InputDecl("kv_cache_memory_bytes", "bytes", "KV pool per GPU given directly (overrides the reserve)",
              nullable=True, positive=True, table="deployment"),
    InputDecl("block_size", "tokens", "paged-KV block size (0: no rounding); SGLang's page size", table="deployment",
              default=16),
    InputDecl("rule", "name", "allocation rule the figures follow: theoretical, vllm or sglang", "text",
              table="deployment", default="theoretical"),
    InputDecl("gpu_memory_utilization", "fraction",
              f"vLLM --gpu-memory-utilization (NULL: the release's default, {VLLM_GPU_MEMORY_UTILIZATION} from v0.20,"
              f" {VLLM_GPU_MEMORY_UTILIZATION_BEFORE} before)", "real", nullable=True, positive=True,
              table="deployment"),
    InputDecl("max_num_batched_tokens", "tokens", f"vLLM --max-num-batched-tokens (NULL: {VLLM_MAX_NUM_BATCHED_TOKENS:,},"
              f" {VLLM_SMALL_GPU_MAX_NUM_BATCHED_TOKENS:,} from v0.8 on GPUs under 70 GiB)",
              nullable=True, positive=True, table="deployment"),
    InputDecl("max_concurrent_batches", "batches",
              f"batches vLLM keeps in flight (NULL: {VLLM_ASYNC_CONCURRENT_BATCHES} at PP 1, else PP)",
              nullable=True, positive=True, table="deployment"),
    InputDecl("max_num_seqs", "sequences", "requests the engine runs at once: vLLM --max-num-seqs (per engine),"
              " SGLang --max-running-requests (shared by its DP-attention ranks) (NULL: the engine's default)",
              nullable=True, positive=True, table="deployment"),
    InputDecl("activation_bytes", "bytes", "measured peak activation memory per GPU (vLLM's profile run)",
              nullable=True, table="deployment"),
    InputDecl("cuda_graph_bytes", "bytes", "CUDA graph memory per GPU to take from the KV pool: vLLM takes its profiled graphs"
              " from v0.21, none before (NULL: 0)",
              nullable=True, table="deployment"),
    InputDecl("mem_fraction_static", "fraction", "SGLang --mem-fraction-static (NULL: derived from the GPU's memory and"
              " TP x PP as SGLang's server does)",
              "real", nullable=True, positive=True, table="deployment"),
    InputDecl("engine_version", "name", "the engine release the engine rule follows, as given (NULL: the latest"
              " kvreg knows)", "text", nullable=True, table="deployment"),
    InputDecl("engine_release", "release",
              "engine_version as a number: major x 1,000,000 + minor x 1,000 + patch (0.10.1 -> 10,001)",
              nullable=True, table="deployment"),
    InputDecl("non_torch_bytes", "bytes", "measured non-torch memory per GPU (vLLM's non_torch_memory)", nullable=True,
              table="deployment"),
    InputDecl("weights_measured_bytes", "bytes", "measured weight memory per GPU (vLLM 'Model loading took',"
              " SGLang 'mem usage')", nullable=True, table="deployment"),
    # calibration: what the engine printed at startup
    InputDecl("measured_kv_cache_tokens", "tokens",
              "KV cache tokens the engine printed (vLLM 'GPU KV cache size', SGLang max_total_num_tokens)",
              nullable=True, table="calibration"),
    InputDecl("measured_max_concurrency", "sequences",
              "vLLM's printed 'Maximum concurrency for N tokens per request' (per engine)", "real", nullable=True,
              table="calibration", maximum=1e9),
    InputDecl("measured_engine_version", "name", "the engine and version that printed them", "text", nullable=True,
              table="calibration"),
    InputDecl("measured_kv_cache_bytes", "bytes", "KV memory per GPU the engine logged (vLLM 'Available KV cache"
              " memory', SGLang K size + V size)", nullable=True, table="calibration"),
    InputDecl("calibration_source", "name", "the startup log a plan's measured terms came from (NULL: none)", "text",
              nullable=True, table="calibration"),
    # workload: the requests a deployment's latency is asked for (kvreg capacity --input-tokens ...)
    InputDecl("input_tokens", "tokens", "prompt tokens of a request (NULL: no latency asked)", nullable=True,
              positive=True, table="workload"),
    InputDecl("output_tokens", "tokens", "tokens a request generates (NULL: no latency asked)", nullable=True,
              positive=True, table="workload"),
    InputDecl("concurrency", "requests", "requests one replica serves at once, each sent when the last ended (a"
              " closed loop, as benchmark_serving's --max-concurrency; NULL: 1)", nullable=True, positive=True,
              table="workload"),
    InputDecl("tpot_target_ms", "ms", "the time per output token a request may take at most (NULL: no target)",
              "real", nullable=True, positive=True, table="workload", maximum=1e9),
    InputDecl("ttft_target_ms", "ms", "the time to first token a request may take at most (NULL: no target)",
              "real", nullable=True, positive=True, table="workload", maximum=1e9),
    # demand
    InputDecl("users", "users", "target concurrent users in a quarter", table="demand"),
]
INPUTS = {i.name: i for i in _INPUTS}
# The largest value of each bounded real column, by column name, for the validator
# (kvreg.registry.check_input). A fleet entry's reserved price is not a figure input but enters the
# procurement rollup's cost as a price per GPU-hour does.
MAXIMUMS = {i.column: i.maximum for i in _INPUTS if i.maximum is not None} | {
    "reserved_price_per_hour": MAX_PRICE_PER_HOUR}
# A new deployment's inputs, each its declared default; it also names a KV dtype (kv_dtype's default) and
# a weight dtype (None: the model's own).
DEPLOYMENT_DEFAULTS = {n: INPUTS[n].default for n in inputs_of("deployment")}
assert all(INPUTS[n].nullable or v is not None for n, v in DEPLOYMENT_DEFAULTS.items()), "a NOT NULL input has a default"


WHATIF_COLUMNS = _whatif_columns()
