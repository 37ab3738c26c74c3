"""The inputs of the figures, declared once: name, unit, meaning, the relation and column each is read
from, what the schema keeps true of it, and what a new deployment takes when it is not given.

Standard library only: the capacity question, the plan commands and the tables read their lists of
columns and their defaults here without importing the figure declarations (kvreg.figures.declarations
builds every expression tree, tens of milliseconds at start-up).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvreg.core.rules import ENGINE_RULES, RULES, SAMPLERS

from .engine_defaults import (
    GIB,
    SGLANG_RUNNING_REQUESTS_CEILING,
    SGLANG_RUNNING_REQUESTS_FLOOR,
    VLLM_FLASHINFER_SAMPLER_FROM,
    VLLM_ASYNC_CONCURRENT_BATCHES,
    VLLM_GPU_MEMORY_UTILIZATION,
    VLLM_GPU_MEMORY_UTILIZATION_BEFORE,
    VLLM_LARGE_GPU_BYTES,
    VLLM_LARGE_GPU_MAX_NUM_SEQS,
    VLLM_MAX_NUM_BATCHED_TOKENS,
    VLLM_SAMPLER_SEQS,
    VLLM_SMALL_GPU_MAX_NUM_BATCHED_TOKENS,
)


# Prices: a GPU-hour costs a few USD and a GPU tens of thousands; these bounds leave a thousandfold
# headroom and keep every cost figure (price x 730 hours x GPUs x quarters) far below overflow.
MAX_PRICE_PER_HOUR = 1e6
# Per-layer kv heads: besides kv_heads, up to three groups of full layers with kv heads of their own (kv_heads_N of
# kv_layers_N), so four head counts in all; a config with more is refused, naming the key.
KV_GROUPS = (2, 3, 4)
MAX_UNIT_PRICE = 1e9
# The largest node kvreg accepts: it tries every TP up to the GPUs per node (kvreg.app.capacity.valid_tps), so a
# typo must not ask for billions of rows; the largest NVLink domains today hold 72 GPUs.
MAX_GPUS_PER_NODE = 1024
# A workload class's share, a relative weight: at most this large, so the shares' sums stay far from overflow.
MAX_SHARE = 1e6


@dataclass(frozen=True)
class InputDecl:
    """An input of the figures, and the registry column it is stored in: kvreg/db/tables.py generates the
    column and its CHECK from this, kvreg.app.registry.check_input validates a value entering by it, the click
    options of `model`, `gpu` and `plan` add/set read their flag, help and default here, and the workbook
    its input columns (tests/test_schema_drift.py holds the generated tables to the migrations).

    `table` is the relation it is read from (a key of INPUT_TABLES) and `column` its column there, when
    not named like the input. `kind`: int, real or text; `big`, an int column that holds more than
    2**31 - 1 (BIGINT). `nullable`, it may be NULL. `default`: what a new row takes when the input is not
    given (a plan, a `kvreg capacity` question, the tables' column defaults); None, NULL, for a nullable
    input (an engine setting's NULL is the engine's own default); `server_default`, the column's SQL
    DEFAULT is it too (a column a migration added to tables holding rows).

    What the schema keeps true of it, as its CHECK: `positive`, above zero when set (so it divides without a
    zero test); `minimum`, at least this; `at_most`, at most this number or this column; `below`, under this
    number; `choices`, one of these values. The CHECK is named ck_<table>_<check> (`check`: the column's
    name by default; None when a rule of the table over several columns keeps the bounds instead, as
    ck_model_heads keeps attention_heads > 0 AND kv_heads > 0), on the tables `check_tables` (default: all
    the input's tables). `maximum`: the largest value the input may take, so that no figure built on
    it overflows (a price of 1e308 times 730 hours is inf, which JSON cannot hold and PostgreSQL refuses; a
    token budget past 2**31 - 1 overflows PostgreSQL's BIGINT in the engine rules' products); not in the schema, kvreg.app.registry.check_input enforces it on every path a value
    enters by, as it does the CHECK's bounds.

    What a person sees: `flag`, the CLI option (--name with dashes by default; space-separated aliases after the
    first, which names it in messages); `help`, its help (the meaning by default); `label`, its web form field's
    heading (the name by default); `hint`, the field's tooltip (none by default); `rules`, the allocation rules
    that read it when not every rule, whose form shows its field only under them (kvreg.app.options.form_field).

    `engine`: an engine setting's rule, the one that reads it: vllm, sglang, or engine (either). Its `rules`
    follow, and kvreg.app.engine.check_engine_settings refuses it under another rule; its option's text reads by
    its unit (bytes: a size with its unit; tokens: a token count such as 8k; else as typed)."""

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
    big: bool = False
    server_default: bool = False
    minimum: int | float | None = None
    at_most: int | float | str | None = None
    below: int | float | None = None
    choices: tuple = ()
    check: str | None = ""
    check_tables: tuple[str, ...] = ()
    flag: str = ""
    help: str = ""
    label: str = ""
    hint: str = ""
    rules: tuple[str, ...] = ()
    engine: str = ""

    def __post_init__(self):
        assert self.table in INPUT_TABLES, (self.name, self.table)
        assert self.kind in ("int", "real", "text"), (self.name, self.kind)
        if not self.column:
            object.__setattr__(self, "column", self.name)
        if self.check == "":
            object.__setattr__(self, "check", self.column)
        if not self.check_tables:
            object.__setattr__(self, "check_tables", INPUT_TABLES[self.table])
        if self.engine:  # an engine setting is read by its rule alone
            assert self.engine in ("engine", *ENGINE_RULES) and not self.rules, (self.name, self.engine)
            object.__setattr__(self, "rules", ENGINE_RULES if self.engine == "engine" else (self.engine,))
        if not self.flag:
            object.__setattr__(self, "flag", "--" + self.name.replace("_", "-"))
        if not self.help:
            object.__setattr__(self, "help", self.meaning)
        if not self.label:
            object.__setattr__(self, "label", self.name)
        assert set(self.rules) <= set(RULES), (self.name, self.rules)

    @property
    def lowest(self) -> int | float | None:
        """The least value the schema takes (positive: above 0, so 1 for a whole number)."""
        if self.positive:
            return 1 if self.kind == "int" else 0
        return self.minimum

    def bounds_sql(self) -> str | None:
        """The condition of the column's own CHECK, or None when it has none (or a table rule keeps it)."""
        c = self.column
        parts = []
        if self.positive:
            parts.append(f"{c} > 0")
        elif self.minimum is not None:
            parts.append(f"{c} >= {_sql_literal(self.minimum)}")
        if self.at_most is not None:
            parts.append(f"{c} <= {self.at_most if isinstance(self.at_most, str) else _sql_literal(self.at_most)}")
        if self.below is not None:
            parts.append(f"{c} < {_sql_literal(self.below)}")
        if self.choices:
            parts.append(f"{c} IN (" + ", ".join(_sql_literal(v) for v in self.choices) + ")")
        if self.check is None or not parts:
            return None
        if not self.nullable:
            return " AND ".join(parts)
        return f"{c} IS NULL OR " + (parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")")


def _sql_literal(value) -> str:
    """A bound as the CHECK spells it: 1000000 for 1e6, 'vllm' for a text."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# The relations an input is read from (InputDecl.table), each with the registry tables behind it
# (kvreg/db/tables.py). A deployment is a saved plan or a question's scenario (bound as parameters, never stored); what an engine printed for
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
              "text", table="model", server_default=True, default="",
              help="e.g. LlamaForCausalLM"),
    InputDecl("layers", "layers", "transformer layers", positive=True, table="model", check="layers",
              help="Layers holding a KV cache or a state (all kinds; layers with neither: --no-cache-layers)"),
    InputDecl("full_layers", "layers", "layers with full (global) attention", table="model", minimum=0, check=None),
    InputDecl("sliding_layers", "layers", "layers with sliding-window attention", table="model", minimum=0, check=None, default=0,
              help="Layers with sliding-window attention"),
    InputDecl("sliding_window", "tokens", "sliding window length", nullable=True, table="model", minimum=1, check=None,
              help="Sliding window in tokens"),
    InputDecl("chunked_layers", "layers", "layers with chunked local attention", table="model", minimum=0, check=None, default=0,
              help="Layers with chunked attention"),
    InputDecl("attention_chunk_size", "tokens", "attention chunk length", nullable=True, table="model", minimum=1, check=None,
              help="Chunk size in tokens"),
    InputDecl("linear_layers", "layers", "linear-attention / state-space layers", table="model", minimum=0, check=None, default=0,
              help="Linear-attention / state-space layers"),
    InputDecl("linear_state_elements_per_layer", "elements", "fixed state per sequence per linear layer at TP1",
              nullable=True, table="model", big=True, minimum=1, check=None,
              flag="--linear-state-elements", help="State elements per sequence per linear layer at TP1"),
    InputDecl("linear_recurrent_elements_per_layer", "elements", "of linear_state_elements_per_layer, the recurrent"
              " (SSM) state's, the rest being the conv state (NULL: not split)", nullable=True, positive=True,
              table="model", big=True, at_most="linear_state_elements_per_layer", check="linear_recurrent",
              flag="--linear-recurrent-elements", help="Of --linear-state-elements, the recurrent (SSM)"
              " state's; the rest is the conv state. SGLang keeps the recurrent state in float32"),
    # positive: ck_model_linear_heads keeps it above zero only while linear_state_elements_per_layer is set.
    InputDecl("linear_state_heads", "heads", "heads the linear state shards by under TP", nullable=True, positive=True,
              table="model", check=None,
              help="Heads the linear state shards by under TP"),
    InputDecl("no_cache_layers", "layers", "decoder layers holding no KV cache and no state (not in layers)",
              table="model", minimum=0, default=0, server_default=True,
              help="Decoder layers with no KV cache and no state (no-op attention, KV-shared), beside --layers"),
    InputDecl("attention_heads", "heads", "query heads", positive=True, table="model", check=None,
              help="Query heads (default: --kv-heads)"),
    InputDecl("kv_heads", "heads", "key/value heads of the full-attention layers (of every layer unless a kind has its own)",
              positive=True, table="model", check=None,
              help="KV heads (default: --attention-heads, i.e. MHA)"),
    InputDecl("head_dim", "elements", "key head dimension of the full-attention layers", positive=True, table="model", check=None,
              help="Key head dimension"),
    InputDecl("v_head_dim", "elements", "value head dimension of the full-attention layers", positive=True,
              table="model", check=None,
              help="Value head dimension (default: --head-dim)"),
    InputDecl("sliding_kv_heads", "heads", "key/value heads of the sliding layers (NULL: kv_heads)",
              nullable=True, positive=True, table="model",
              help="KV heads of the sliding layers, when not --kv-heads (Gemma 4)"),
    InputDecl("sliding_head_dim", "elements", "key and value head dimension of the sliding layers (NULL: head_dim, v_head_dim)",
              nullable=True, positive=True, table="model",
              help="Head dimension (K and V) of the sliding layers, when not --head-dim"),
    InputDecl("chunked_kv_heads", "heads", "key/value heads of the chunked layers (NULL: kv_heads)",
              nullable=True, positive=True, table="model",
              help="KV heads of the chunked layers, when not --kv-heads"),
    InputDecl("chunked_head_dim", "elements", "key and value head dimension of the chunked layers (NULL: head_dim, v_head_dim)",
              nullable=True, positive=True, table="model",
              help="Head dimension (K and V) of the chunked layers, when not --head-dim"),
    InputDecl("kv_lora_rank", "elements", "MLA latent rank (NULL when not MLA)", nullable=True, positive=True,
              table="model", check=None,
              help="MLA latent rank (DeepSeek: 512)"),
    InputDecl("qk_rope_head_dim", "elements", "MLA decoupled RoPE key dimension", nullable=True, table="model", minimum=0, check=None,
              help="MLA RoPE key dimension (DeepSeek: 64)"),
    InputDecl("hidden_size", "elements", "residual stream width (NULL: unknown)", nullable=True, positive=True,
              table="model", check=None,
              help="Residual stream width (hidden_size); vLLM's activation estimate"),
    InputDecl("intermediate_size", "elements", "MLP width a token passes through; MoE: an expert's width x experts"
              " per token (NULL: unknown)", nullable=True, positive=True, table="model", check=None,
              help="MLP width a token passes through (MoE: expert width x experts per token); vLLM's activation"
              " estimate"),
    InputDecl("vocab_size", "tokens", "vocabulary size (NULL: unknown)", nullable=True, positive=True, table="model", check=None,
              help="Vocabulary size; vLLM's sampler warm-up"),
    InputDecl("embedding_matrices", "matrices", "vocab_size x hidden_size matrices the checkpoint holds: 2 (input"
              " embeddings and lm_head), 1 when tied (NULL: unknown, or params_total is the checkpoint's size in bytes)", nullable=True, positive=True, table="model", at_most=2),
    InputDecl("experts", "experts", "routed experts in each mixture-of-experts layer (NULL: dense, or unknown)",
              nullable=True, positive=True, table="model",
              help="Routed experts in each mixture-of-experts layer (config.json num_local_experts, num_experts or"
              " n_routed_experts)"),
    InputDecl("expert_intermediate_size", "elements", "one expert's MLP width, moe_intermediate_size (NULL: dense, or"
              " unknown)", nullable=True, positive=True, table="model",
              help="One expert's MLP width (moe_intermediate_size)"),
    InputDecl("moe_layers", "layers", "layers that carry experts (NULL: dense, or unknown)", nullable=True,
              positive=True, table="model", at_most="layers",
              help="Layers that carry experts (all but DeepSeek's first_k_dense_replace). With --experts and"
              " --expert-intermediate-size, the engine rules lay an MXFP4 (fp4) checkpoint's experts out as vLLM's and"
              " SGLang's MoE kernels pad them"),
    InputDecl("expert_hidden_size", "elements", "the routed experts' input and output width where they work in a"
              " latent projected from hidden_size (Kimi-K3 routed_expert_hidden_size, Nemotron 3 moe_latent_size; NULL:"
              " hidden_size)", nullable=True, positive=True, table="model",
              help="The routed experts' input and output width where they work in a latent projected from"
              " hidden_size (Kimi-K3 routed_expert_hidden_size, Nemotron 3 moe_latent_size; default: --hidden-size)"),
    InputDecl("tower_params", "params", "a multimodal model's vision/audio towers and their projectors, apart from"
              " params_total (the language model); the engine rules load them on every GPU (NULL: no tower, or"
              " unknown)", nullable=True, positive=True, table="model", big=True),
    InputDecl("vision_num_hidden_layers", "layers", "the config's vision_config num_hidden_layers, which SGLang's"
              " multimodal memory adjustment reads (NULL: the config names none)", nullable=True, positive=True,
              table="model"),
    InputDecl("vision_hidden_size", "elements", "the config's vision_config hidden_size, which SGLang's multimodal"
              " memory adjustment reads (NULL: the config names none)", nullable=True, positive=True, table="model"),
    InputDecl("rotary_dim", "elements", "the elements of a head RoPE rotates, where not the whole head"
              " (partial_rotary_factor x head_dim; NULL: the whole head, MLA: qk_rope_head_dim)", nullable=True,
              positive=True, table="model",
              help="Elements of a head RoPE rotates, when not the whole head (config.json partial_rotary_factor x"
              " head_dim): sizes the cos/sin table the engines keep on every GPU"),
    InputDecl("params_total", "params", "all parameters (all experts)", positive=True, table="model", big=True, check=None),
    InputDecl("params_active", "params", "parameters read per token", positive=True, table="model", big=True, check=None),
    InputDecl("max_position_embeddings", "tokens", "claimed context length", positive=True, table="model", check="max_pos"),
    InputDecl("indexer_bytes_per_token_per_layer", "bytes",
              "DeepSeek-V3.2 indexer cache per token per layer, whatever the KV dtype (NULL: no indexer)",
              nullable=True, positive=True, table="model", check="indexer",
              help="MLA models with a sparse-attention indexer cache (DeepSeek-V3.2: 132)"),
    InputDecl("indexer_layers", "layers", "MLA layers keeping an indexer cache of their own (GLM-5.2 indexer_types"
              " \"full\"; NULL: every MLA layer)", nullable=True, positive=True, table="model", at_most="full_layers",
              help="Of the MLA layers, those keeping an indexer cache of their own (GLM-5.2: 21 of 78; default: all)"),
    *[decl for n in KV_GROUPS for decl in (
        InputDecl(f"kv_heads_{n}", "heads", f"per-layer kv heads: the kv heads of each of kv_layers_{n} full layers"
                  " (NULL: no such group)", nullable=True, positive=True, table="model", check=None),
        InputDecl(f"kv_layers_{n}", "layers", f"per-layer kv heads: full layers holding kv_heads_{n} kv heads, not"
                  " kv_heads (NULL: none)", nullable=True, positive=True, table="model", check=None))],
    # dtypes
    InputDecl("kv_dtype", "name", "KV cache dtype", "text", table="kv_dtype", column="name", default="bf16",
              label="KV dtype", help="KV cache dtype: bf16, fp8, ..."),
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
    InputDecl("memory_bytes", "bytes", "GPU memory (nominal)", positive=True, table="gpu", big=True, check="memory"),
    InputDecl("reported_memory_bytes", "bytes",
              "GPU memory as CUDA reports it (an H100 80GB: 79.19 GiB); NULL: not known, memory_bytes is used",
              nullable=True, positive=True, table="gpu", big=True, at_most="memory_bytes", check="reported_memory"),
    InputDecl("memory_bandwidth_bytes_per_s", "bytes/s", "GPU memory bandwidth", nullable=True, positive=True,
              table="gpu", big=True, check="bw"),
    InputDecl("compute_capability", "version", "CUDA compute capability (9.0 for an H100; below 8.9 no FP8 units);"
              " NULL: not an NVIDIA GPU, or not known", "real", nullable=True, positive=True, table="gpu", maximum=100,
              help="CUDA compute capability: 9.0 (H100), 8.0 (A100), 8.9 (L40S). Below 8.9 vLLM runs FP8 checkpoints"
              " through Marlin, which adds 16-bit group scales to the weights. Default: not known (no Marlin)"),
    InputDecl("fabric", "flag", "1 when a node's GPUs share NVLink or another GPU fabric, 0 over PCIe only; NULL: not"
              " known, taken as a fabric", nullable=True, table="gpu", choices=(0, 1)),
    InputDecl("price_per_hour", "USD/h", "price per GPU-hour", "real", nullable=True, table="gpu",
              maximum=MAX_PRICE_PER_HOUR, minimum=0, check="price_hour",
              help="USD per GPU-hour (for monthly cost)"),
    InputDecl("unit_price", "USD", "price to buy one GPU", "real", nullable=True, table="gpu", maximum=MAX_UNIT_PRICE, minimum=0,
              help="USD to buy one GPU (for capex)"),
    InputDecl("lead_time_quarters", "quarters", "quarters from placing an order for this GPU type to the GPUs"
              " serving", table="gpu", minimum=0, default=0, server_default=True, check="lead_time", maximum=40,
              flag="--lead-time", help="Quarters from placing an order to the GPUs serving (plan rollup's order_by)"),
    InputDecl("node_gpus", "GPUs", "GPUs in one node of this type as it is bought (purchases by whole nodes)",
              positive=True, table="gpu", default=8, server_default=True,
              help="GPUs in one node as bought (plan rollup --whole-nodes)"),
    InputDecl("flops_bf16_per_s", "FLOP/s", "dense BF16/FP16 tensor FLOP per second, without sparsity (an H100 SXM:"
              " 989.4 TFLOPS); NULL: not known", nullable=True, positive=True, table="gpu", big=True, check="flops_bf16",
              flag="--flops-bf16", help="Dense BF16/FP16 tensor FLOP per second, without sparsity, with a unit (TFLOPS = 10^12, PFLOPS = 10^15): 989.4TFLOPS (H100 SXM)"),
    InputDecl("flops_fp8_per_s", "FLOP/s", "dense FP8 tensor FLOP per second, without sparsity (an H100 SXM: 1,978.9"
              " TFLOPS); NULL: no FP8 units, or not known", nullable=True, positive=True, table="gpu", big=True, check="flops_fp8",
              flag="--flops-fp8", help="Dense FP8 tensor FLOP per second, without sparsity, with a unit (TFLOPS ="
              " 10^12, PFLOPS = 10^15): 1978.9TFLOPS (H100 SXM); leave it out on a GPU without FP8 units (A100)"),
    InputDecl("flops_fp4_per_s", "FLOP/s", "dense FP4 (NVFP4, MXFP4) tensor FLOP per second, without sparsity (a"
              " B200: 9 PFLOPS); NULL: no FP4 units, or not known", nullable=True, positive=True, table="gpu", big=True, check="flops_fp4",
              flag="--flops-fp4", help="Dense FP4 (NVFP4, MXFP4) tensor FLOP per second, without sparsity, with a"
              " unit (TFLOPS = 10^12, PFLOPS = 10^15): 9PFLOPS (B200); leave it out on a GPU without FP4 units (H100)"),
    # deployment
    InputDecl("tp", "GPUs", "tensor-parallel size", positive=True, table="deployment", default=1, check=None,
              label="TP", hint="a number of GPUs, or auto"),
    InputDecl("pp", "GPUs", "pipeline-parallel size", positive=True, table="deployment", default=1, check=None,
              label="PP", help="Pipeline-parallel size"),
    InputDecl("dp_attention", "ranks", "attention data-parallel size inside a TP group", positive=True,
              table="deployment", default=1, check=None, label="DP attention",
              help="Attention data-parallel size in a TP group; must divide TP"),
    InputDecl("gpus_per_node", "GPUs", "GPUs in a node", positive=True, table="deployment", default=8, check="gpn",
              check_tables=("plan",), label="GPUs per node", help="GPUs in a node"),
    InputDecl("context_tokens", "tokens", "context length a sequence may reach (max_model_len)", positive=True,
              table="deployment", default=131072, big=True, check="context", check_tables=("plan",),
              flag="--context", label="Context", hint="128K = 131,072, 128k = 128,000"),
    InputDecl("avg_tokens", "tokens", "average tokens a request holds (prompt + output)", nullable=True, positive=True,
              table="deployment", big=True, check="avg", check_tables=("plan",), label="Average tokens",
              hint="prompt + output; default: the context",
              help="Average tokens a request holds (prompt + output); default: the context"),
    # workload classes (a plan's mix of request classes, table workload_class)
    InputDecl("class_tokens", "tokens", "average tokens a request of this class holds (prompt + output)",
              positive=True, table="class", column="avg_tokens", big=True, check="tokens"),
    InputDecl("share", "weight", "the class's share of requests, a relative weight (shares are divided by"
              " their sum: 0.8 and 0.2, or 4 and 1)", "real", positive=True, table="class", maximum=MAX_SHARE,
              at_most=MAX_SHARE),
    InputDecl("class_input_tokens", "tokens", "prompt tokens of a request of this class (NULL: the plan's)",
              nullable=True, positive=True, table="class", column="input_tokens", big=True),
    InputDecl("class_output_tokens", "tokens", "tokens a request of this class generates (NULL: the plan's)",
              nullable=True, positive=True, table="class", column="output_tokens", big=True),
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
              table="deployment", default=0.12, minimum=0, below=1, check_tables=("plan",), label="Reserve",
              hint="share of GPU memory held back", rules=("theoretical",)),
    InputDecl("kv_cache_memory_bytes", "bytes", "KV pool per GPU given directly (overrides the reserve)",
              nullable=True, positive=True, table="deployment", big=True, check="kvmem", check_tables=("plan",),
              flag="--kv-cache-memory", label="KV pool per GPU",
              hint="given directly, e.g. 40GiB, in place of the reserve: not both"),
    InputDecl("block_size", "tokens", "paged-KV block size (0: no rounding); SGLang's page size", table="deployment",
              default=16, minimum=0, check="block", check_tables=("plan",), label="Block size",
              hint="paged-KV block in tokens; 0: no rounding",
              help="Paged-KV block in tokens (SGLang: its page size); 0: no rounding"),
    InputDecl("rule", "name", "allocation rule the figures follow: theoretical, vllm or sglang", "text",
              table="deployment", default="theoretical", choices=RULES, server_default=True, label="Rule"),
    InputDecl("gpu_memory_utilization", "fraction",
              f"vLLM --gpu-memory-utilization (NULL: the release's default, {VLLM_GPU_MEMORY_UTILIZATION} from v0.20,"
              f" {VLLM_GPU_MEMORY_UTILIZATION_BEFORE} before)", "real", nullable=True, positive=True,
              table="deployment", engine="vllm", at_most=1, check="gmu", label="GPU memory utilization",
              help=f"vLLM: share of GPU memory it may use, in (0, 1] (default {VLLM_GPU_MEMORY_UTILIZATION} from v0.20,"
              f" {VLLM_GPU_MEMORY_UTILIZATION_BEFORE} before)"),
    InputDecl("max_num_batched_tokens", "tokens", f"vLLM --max-num-batched-tokens (NULL: {VLLM_MAX_NUM_BATCHED_TOKENS:,},"
              f" {VLLM_SMALL_GPU_MAX_NUM_BATCHED_TOKENS:,} from v0.8 on GPUs under 70 GiB)",
              nullable=True, positive=True, table="deployment", engine="vllm", big=True, check="batched_tokens",
              maximum=2**31 - 1,
              label="max num batched tokens",
              help=f"vLLM: tokens per scheduler step (default {VLLM_MAX_NUM_BATCHED_TOKENS};"
              f" {VLLM_SMALL_GPU_MAX_NUM_BATCHED_TOKENS} from v0.8 on GPUs under {VLLM_LARGE_GPU_BYTES // GIB} GiB)"),
    InputDecl("max_concurrent_batches", "batches",
              f"batches vLLM keeps in flight (NULL: {VLLM_ASYNC_CONCURRENT_BATCHES} at PP 1, else PP)",
              nullable=True, positive=True, table="deployment", engine="vllm", check="concurrent_batches",
              label="max concurrent batches",
              help=f"vLLM: batches in flight (default {VLLM_ASYNC_CONCURRENT_BATCHES} at PP 1, else PP)"),
    InputDecl("max_num_seqs", "sequences", "requests the engine runs at once: vLLM --max-num-seqs (per engine),"
              " SGLang --max-running-requests (shared by its DP-attention ranks) (NULL: the engine's default)",
              nullable=True, positive=True, table="deployment", engine="engine",
              flag="--max-num-seqs --max-running-requests", label="max running requests",
              hint="vLLM --max-num-seqs, SGLang --max-running-requests",
              help="vLLM --max-num-seqs, SGLang --max-running-requests: the most requests the engine runs at once"
              f" (default: vLLM {VLLM_LARGE_GPU_MAX_NUM_SEQS} from v0.8 on GPUs of {VLLM_LARGE_GPU_BYTES // GIB} GiB or"
              f" more, else {VLLM_SAMPLER_SEQS}; SGLang from its pool and context, {SGLANG_RUNNING_REQUESTS_FLOOR} to"
              f" {SGLANG_RUNNING_REQUESTS_CEILING})"),
    InputDecl("activation_bytes", "bytes", "measured peak activation memory per GPU (vLLM's profile run)",
              nullable=True, table="deployment", engine="vllm", flag="--activation-memory", big=True, minimum=0,
              check="activation", label="activation memory",
              hint="measured, e.g. 1.2GiB",
              help="vLLM: measured peak activation memory per GPU (1.2GiB), instead of kvreg's estimate"),
    InputDecl("cuda_graph_bytes", "bytes", "CUDA graph memory per GPU to take from the KV pool: vLLM takes its profiled graphs"
              " from v0.21, none before (NULL: 0)",
              nullable=True, table="deployment", engine="vllm", flag="--cuda-graph-memory", big=True, minimum=0,
              check="cuda_graph", label="CUDA graph memory",
              hint="measured, e.g. 0.5GiB",
              help="vLLM: CUDA graph memory per GPU to take from the KV pool (0.5GiB); releases before v0.21 take none,"
              " from v0.21 vLLM takes what it profiled (its log's 'CUDAGraph memory'), which kvreg does not estimate"
              " (default 0)"),
    InputDecl("mem_fraction_static", "fraction", "SGLang --mem-fraction-static (NULL: derived from the GPU's memory and"
              " TP x PP as SGLang's server does)",
              "real", nullable=True, positive=True, table="deployment", engine="sglang", at_most=1, check="mfs",
              label="mem fraction static",
              help="SGLang: --mem-fraction-static, in (0, 1] (default: from the GPU memory and TP x PP, as SGLang's"
              " server derives it)"),
    InputDecl("engine_version", "name", "the engine release the engine rule follows, as given (NULL: the latest"
              " kvreg knows)", "text", nullable=True, table="deployment", engine="engine", label="engine version",
              hint="the release, e.g. 0.10.1",
              help="vLLM/SGLang: the release to follow (0.10.1); its defaults and memory accounting differ by release"
              " (default: the latest kvreg knows)"),
    InputDecl("engine_release", "release",
              "engine_version as a number: major x 1,000,000 + minor x 1,000 + patch (0.10.1 -> 10,001)",
              nullable=True, table="deployment", minimum=0),
    InputDecl("non_torch_bytes", "bytes", "measured non-torch memory per GPU (vLLM's non_torch_memory)", nullable=True,
              table="deployment", engine="engine", flag="--non-torch-memory", big=True, minimum=0, check="non_torch",
              label="non-torch memory", hint="measured, e.g. 0.2GiB",
              help="vLLM: measured non-torch memory per GPU (0.2GiB), instead of kvreg's estimate; SGLang: memory in"
              " use before the weights load (default 0)"),
    InputDecl("weights_measured_bytes", "bytes", "measured weight memory per GPU (vLLM 'Model loading took',"
              " SGLang 'mem usage')", nullable=True, table="deployment", engine="engine", flag="--weights-memory",
              big=True, minimum=0, check="weights_measured", label="weights memory", hint="measured, e.g. 14.99GiB",
              help="vLLM/SGLang: measured weight memory per GPU (14.99GiB), instead of params x bytes / (TP x PP)"),
    InputDecl("sampler", "name", "vLLM's top-k/top-p sampler backend, which sizes its sampler warm-up: torch (PyTorch's"
              " sort path, from v0.17 vLLM's Triton kernel) or flashinfer (FlashInfer's kernel) (NULL: the release's"
              f" default, flashinfer from v0.{VLLM_FLASHINFER_SAMPLER_FROM // 1000}, torch before, where FlashInfer's"
              " sampler ran only when the flashinfer package was installed)", "text", nullable=True, table="deployment",
              engine="vllm", choices=SAMPLERS, label="sampler", hint="torch or flashinfer",
              help="vLLM: the top-k/top-p sampler backend, torch or flashinfer; its log says which ('Using FlashInfer"
              " for top-p & top-k sampling'); v0.8 to v0.10.1 use FlashInfer's whenever the flashinfer package is"
              f" installed (default: flashinfer from v0.{VLLM_FLASHINFER_SAMPLER_FROM // 1000}, torch before)"),
    # calibration: what the engine printed at startup
    InputDecl("measured_kv_cache_tokens", "tokens",
              "KV cache tokens the engine printed (vLLM 'GPU KV cache size', SGLang max_total_num_tokens)",
              nullable=True, table="calibration", big=True, minimum=0, check="measured_tokens"),
    InputDecl("measured_max_concurrency", "sequences",
              "vLLM's printed 'Maximum concurrency for N tokens per request' (per engine)", "real", nullable=True,
              table="calibration", maximum=1e9, minimum=0, check="measured_concurrency"),
    InputDecl("measured_engine_version", "name", "the engine and version that printed them", "text", nullable=True,
              table="calibration"),
    InputDecl("measured_kv_cache_bytes", "bytes", "KV memory per GPU the engine logged (vLLM 'Available KV cache"
              " memory', SGLang K size + V size)", nullable=True, table="calibration", big=True, minimum=0, check="measured_kv_bytes"),
    InputDecl("calibration_source", "name", "the startup log a plan's measured terms came from (NULL: none)", "text",
              nullable=True, table="calibration"),
    # workload: the requests a deployment's latency is asked for (kvreg capacity --input-tokens ...)
    # (help: a plan's option, plan add/set; kvreg capacity words the lengths and the tpot target by what they add
    # to its answer, kvreg.app.options.latency_options)
    InputDecl("input_tokens", "tokens", "prompt tokens of a request (NULL: no latency asked)", nullable=True,
              positive=True, table="workload", big=True, label="Input tokens",
              hint="for a latency target, e.g. 1024 or 8k",
              help="Prompt tokens of the plan's requests (1024, 8k), for its latency targets"),
    InputDecl("output_tokens", "tokens", "tokens a request generates (NULL: no latency asked)", nullable=True,
              positive=True, table="workload", big=True, label="Output tokens", hint="goes with the input tokens",
              help="Tokens each of its requests generates; goes with --input-tokens"),
    InputDecl("concurrency", "requests", "requests one replica serves at once, each sent when the last ended (a"
              " closed loop, as benchmark_serving's --max-concurrency; NULL: 1)", nullable=True, positive=True,
              table="workload", big=True,
              help="Requests one replica serves at once, each sent when the last ends (default 1)"),
    InputDecl("tpot_target_ms", "ms", "the time per output token a request may take at most (NULL: no target)",
              "real", nullable=True, positive=True, table="workload", maximum=1e9, flag="--tpot-ms",
              label="TPOT target (ms)", hint="the most time per output token; empty: no target",
              help="Target time per output token in ms: a replica serves at most the users it runs within it"
              " (users_per_replica; users_binding_constraint says memory or latency)"),
    InputDecl("ttft_target_ms", "ms", "the time to first token a request may take at most (NULL: no target)",
              "real", nullable=True, positive=True, table="workload", maximum=1e9, flag="--ttft-ms",
              label="TTFT target (ms)", hint="the most time to first token; empty: no target",
              help="Target time to first token in ms (as --tpot-ms)"),
    # demand
    # At most a trillion, 125 times the world's population: past about 10^17 the fleet optimizer's integer program
    # (HiGHS, in doubles) can no longer tell a count from its neighbour and finds a feasible quarter infeasible.
    InputDecl("users", "users", "target concurrent users in a quarter", table="demand", big=True, minimum=0,
              maximum=10**12),
]
INPUTS = {i.name: i for i in _INPUTS}
# The engine settings, by name: the inputs a serving engine's rule reads (`engine`), in the order declared.
ENGINE_SETTINGS = {i.name: i for i in _INPUTS if i.engine}
# The largest value of each bounded real column, by column name, for the validator
# (kvreg.app.registry.check_input). A fleet entry's reserved price is not a figure input but enters the
# procurement rollup's cost as a price per GPU-hour does.
MAXIMUMS = {i.column: i.maximum for i in _INPUTS if i.maximum is not None} | {
    "reserved_price_per_hour": MAX_PRICE_PER_HOUR}
# A new deployment's inputs, each its declared default; it also names a KV dtype (kv_dtype's default) and
# a weight dtype (None: the model's own).
DEPLOYMENT_DEFAULTS = {n: INPUTS[n].default for n in inputs_of("deployment")}
# The GPU a question asks about when it names none (kvreg capacity, model show, the what-if page): a catalog name.
DEFAULT_GPU = "H100-SXM"
assert all(INPUTS[n].nullable or v is not None for n, v in DEPLOYMENT_DEFAULTS.items()), "a NOT NULL input has a default"


WHATIF_COLUMNS = _whatif_columns()
