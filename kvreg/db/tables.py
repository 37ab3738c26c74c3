"""The registry tables: what a user enters. Nothing here is derived; the figures live in views.

Constraints sit in the schema (NOT NULL, CHECK, UNIQUE, foreign keys) so that a row that
breaks them cannot be written by any client, not only by the CLI.
"""

from __future__ import annotations

from typing import Any, Optional

from sqlalchemy import BigInteger, CheckConstraint, Column, Float, ForeignKey, Integer, String, UniqueConstraint
from sqlmodel import AutoString, Field, SQLModel

from kvreg.db.columns import columns_of, stored_inputs
from kvreg.figures.inputs import KV_GROUPS


def _declared_column(decl) -> tuple[Any, Any]:
    """An input's annotation and field, generated from its declaration (kvreg.figures.inputs.InputDecl):
    type, NULL, its default and SQL DEFAULT. A fresh Column each time: plan and scenario hold the same inputs."""
    sa_type = {"text": String, "real": Float}.get(decl.kind) or (BigInteger if decl.big else Integer)
    python = {"text": str, "real": float, "int": int}[decl.kind]
    server = {"server_default": str(decl.default)} if decl.server_default else {}
    client = {"default": decl.default} if decl.default is not None else {}
    column = Column(decl.column, sa_type, nullable=decl.nullable, **server, **client)
    if decl.default is not None:
        field = Field(default=decl.default, sa_column=column)
    elif decl.nullable:
        field = Field(default=None, sa_column=column)
    else:
        field = Field(sa_column=column)
    return (Optional[python] if decl.nullable else python), field


def declared_checks(table: str) -> list[tuple[str, str]]:
    """(name, condition) of the CHECKs the input declarations give a registry table, each input's own
    (InputDecl.bounds_sql) named ck_<table>_<check>: the migrations create the same ones."""
    return [(f"ck_{table}_{d.check}", d.bounds_sql()) for d in stored_inputs(table)
            if table in d.check_tables and d.bounds_sql() is not None]


def _table(name: str, doc: str, tablename: str, own: dict[str, tuple[Any, Any]], rules: tuple = ()):
    """A registry table: its own columns (keys, names, references, texts: `own`, annotation and field
    each) and a column for every input declared in it, in columns_of's order; its CHECKs the inputs'
    own and the table's `rules` over several columns."""
    generated = {d.column: _declared_column(d) for d in stored_inputs(tablename) if d.column not in own}
    fields = {c: own[c] if c in own else generated[c] for c in columns_of(tablename)}
    assert set(fields) == set(own) | set(generated), (tablename, set(own) - set(fields))
    checks = tuple(CheckConstraint(cond, name=ck) for ck, cond in declared_checks(tablename))
    namespace = {"__module__": __name__, "__qualname__": name, "__doc__": doc, "__tablename__": tablename,
                 "__table_args__": (*rules, *checks), "__annotations__": {c: a for c, (a, _) in fields.items()},
                 **{c: f for c, (_, f) in fields.items()}}
    return type(SQLModel)(name, (SQLModel,), namespace, table=True)


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


def _text(default: str = ""):
    """A NOT NULL text column, '' when not given."""
    return str, Field(default=default, sa_column=Column(String, nullable=False, server_default=default))


def _dtype_ref(nullable: bool = False, cascade: bool = True):
    fk = ForeignKey("dtype.name", onupdate="CASCADE") if cascade else ForeignKey("dtype.name")
    column = Column(String, fk, nullable=nullable)
    return (Optional[str], Field(default=None, sa_column=column)) if nullable else (str, Field(sa_column=column))


def _id():
    return Optional[int], Field(default=None, primary_key=True)


def _unique_name():
    return str, Field(sa_column=Column(String, nullable=False, unique=True))


def _ref(target: str, ondelete: str):
    return int, Field(sa_column=Column(Integer, ForeignKey(target, ondelete=ondelete), nullable=False))


def _optional(sa_type=String):
    return Optional[str], Field(default=None, sa_column=Column(sa_type, nullable=True))


# One model's architecture, as far as memory is concerned: its inputs (kvreg.figures.inputs, table "model"),
# and beside them its name, family, weight and state dtypes, where it was imported from and notes.
Model = _table("Model", "One model's architecture, as far as memory is concerned.", "model", {
    "id": _id(),
    "name": _unique_name(),
    "family": _text(),
    # State is kept in this dtype (default: the model's native weight dtype), never the KV dtype.
    "linear_state_dtype": _dtype_ref(nullable=True),
    "weight_dtype": _dtype_ref(),
    "source": _text("manual"),
    "source_sha256": _optional(AutoString),
    "imported_at": _optional(AutoString),
    "notes": _text(),
    # Full layers whose K and V are one tensor (Gemma 4 attention_k_eq_v). Engines still cache both.
    "k_eq_v_layers": (int, Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))),
    # Which recurrent layer the linear layers are (0013), as `model show --layers` names them: mamba2,
    # gated_deltanet, kda, lightning or short_conv. NULL: not named (the state shape is what counts).
    "linear_state_kind": _optional(AutoString),
}, rules=(
    # The rules over several columns; each input's own bounds are generated from its declaration.
    CheckConstraint("length(name) > 0", name="ck_model_name"),
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
    CheckConstraint("(hidden_size IS NULL OR hidden_size > 0) AND (intermediate_size IS NULL OR"
                    " intermediate_size > 0) AND (vocab_size IS NULL OR vocab_size > 0)", name="ck_model_widths"),
    CheckConstraint("k_eq_v_layers >= 0", name="ck_model_k_eq_v_layers"),
    CheckConstraint("linear_state_kind IS NULL OR linear_state_kind IN ('mamba2', 'gated_deltanet', 'kda',"
                    " 'lightning', 'short_conv')", name="ck_model_linear_state_kind"),
    *[CheckConstraint(f"(kv_heads_{n} IS NULL AND kv_layers_{n} IS NULL) OR (kv_heads_{n} > 0 AND kv_layers_{n} > 0)",
                      name=f"ck_model_kv_group_{n}") for n in KV_GROUPS],
    CheckConstraint(" + ".join(f"COALESCE(kv_layers_{n}, 0)" for n in KV_GROUPS) + " < full_layers",
                    name="ck_model_kv_groups_layers"),
))

Gpu = _table("Gpu", "An accelerator SKU.", "gpu", {
    "id": _id(),
    "name": _unique_name(),
    "vendor": _text(),
    "interconnect": _text(),
    "notes": _text(),
    # 1 when reported_memory_bytes was estimated from the nominal memory by kvreg's rule (0015; `kvreg gpu add`
    # without --reported-memory, docs/engine-rules.md) rather than read from a log; 0 when given or unknown.
    "reported_memory_estimated": (int, Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))),
}, rules=(
    CheckConstraint("length(name) > 0", name="ck_gpu_name"),
    CheckConstraint("reported_memory_estimated IN (0, 1)", name="ck_gpu_reported_memory_estimated"),
))


def _deployment_rules(table: str) -> tuple:
    """The rule over a deployment's columns both plan and scenario keep: vLLM pages every cache, so a block of
    0 tokens (kvreg's "no rounding") means nothing to it."""
    return (CheckConstraint("rule <> 'vllm' OR block_size > 0", name=f"ck_{table}_vllm_block"),)


# A named deployment: one model served on one GPU type with one parallelism layout; its inputs (tables
# "deployment", "workload" and "calibration" of kvreg.figures.inputs) with their declared defaults.
Plan = _table("Plan", "A named deployment: one model served on one GPU type with one parallelism layout.", "plan", {
    "id": _id(),
    "name": _unique_name(),
    "model_id": _ref("model.id", "RESTRICT"),
    "gpu_id": _ref("gpu.id", "RESTRICT"),
    "kv_dtype": _dtype_ref(),
    "weight_dtype": _dtype_ref(),
    "notes": _text(),
    # 0016: what `kvreg plan optimize` may change (kvreg plan set --allow-gpus / --allow-kv-dtypes):
    # comma-separated names beyond the plan's own GPU type and KV dtype (NULL: none).
    "allow_gpus": _optional(),
    "allow_kv_dtypes": _optional(),
}, rules=(
    CheckConstraint("length(name) > 0", name="ck_plan_name"),
    CheckConstraint("tp > 0 AND pp > 0 AND dp_attention > 0", name="ck_plan_parallel"),
    CheckConstraint("tp * pp <= gpus_per_node", name="ck_plan_fits_node"),
    CheckConstraint("tp % dp_attention = 0", name="ck_plan_dp_divides_tp"),
    *_deployment_rules("plan"),
))

# Target concurrent users of a plan in a quarter.
Demand = _table("Demand", "Target concurrent users of a plan in a quarter.", "demand", {
    "id": _id(),
    "plan_id": _ref("plan.id", "CASCADE"),
    "quarter": (str, Field(sa_column=Column(String, nullable=False))),
}, rules=(
    UniqueConstraint("plan_id", "quarter", name="uq_demand_plan_quarter"),
    CheckConstraint("length(quarter) = 6 AND substr(quarter, 5, 1) = 'Q' AND substr(quarter, 6, 1) IN ('1','2','3','4')",
                    name="ck_demand_quarter"),
))


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


# One request class of a plan's workload mix (seed 002: chat at 1,500 tokens, documents at 13,000). A plan with
# classes holds the share-weighted mean of its classes' KV per request; its own avg_tokens is then unused.
# Shares are relative weights: the views divide by their sum.
WorkloadClass = _table("WorkloadClass", "One request class of a plan's workload mix.", "workload_class", {
    "id": _id(),
    "plan_id": _ref("plan.id", "CASCADE"),
    "name": (str, Field(sa_column=Column(String, nullable=False))),
}, rules=(
    UniqueConstraint("plan_id", "name", name="uq_workload_class_plan_name"),
    CheckConstraint("length(name) > 0", name="ck_workload_class_name"),
))


def _scenario_ref(target: str):
    return int, Field(sa_column=Column(Integer, ForeignKey(target, ondelete="CASCADE"), nullable=False))


# The source of the `capacity` view (kvreg.figures.views: one deployment per scenario row), which answers ad-hoc
# questions (`kvreg capacity`, the web what-if, a log's calibration, the report's and workbook's context sweep).
# Nothing writes it: a question binds its scenarios as parameters in place of its rows and reads the view's own
# SQL (kvreg.db.read.whatif), so the table stays empty. It is kept for the view's definition (PostgreSQL creates
# no view over a missing table), and its columns and CHECKs are the shape of the rows a question binds
# (kvreg.figures.inputs.WHATIF_COLUMNS; tests/test_input_lists.py holds the two in step).
Scenario = _table("Scenario", "The capacity view's source: always empty, its rows bound by each question (what-if).",
                  "scenario", {
    "id": _id(),
    "model_id": _scenario_ref("model.id"),
    "gpu_id": _scenario_ref("gpu.id"),
    "kv_dtype": _dtype_ref(cascade=False),
    "weight_dtype": _dtype_ref(cascade=False),
}, rules=_deployment_rules("scenario"))


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
