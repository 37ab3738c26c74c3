"""The deployment's columns outside kvreg/figures are read from the input declarations.

kvreg.app.capacity answers `kvreg capacity` on the fast path and kvreg.app.plans sits under every plan
command; both read their lists of a deployment's columns and defaults from kvreg.figures.inputs (stdlib
only), not from kvreg.figures.declarations (tens of milliseconds at start-up). The dataclass of a capacity
question and the tables' classes are generated; these tests hold them to the declarations (InputDecl.table,
InputDecl.default), so an input added to a deployment shows up here if one is missed.
"""

from __future__ import annotations

import dataclasses

from sqlalchemy import BigInteger, Float, Integer, String

from kvreg.app.capacity import Question
from kvreg.app.plans import CALIBRATION_FIELDS, MEASURED_BY, MEASURED_TERMS, SPEC_DEFAULTS
from kvreg.db.tables import Demand, Plan, Scenario, WorkloadClass
from kvreg.figures.declarations import inputs_of
from kvreg.figures.inputs import DEPLOYMENT_DEFAULTS, INPUTS, WHATIF_COLUMNS

DEPLOYMENT = set(inputs_of("deployment"))
# The workload a deployment's latency is asked for: on the same rows, apart from the deployment inputs.
WORKLOAD = set(inputs_of("workload"))
# What a deployment row holds besides its inputs: the model, GPU and dtypes it joins to.
REFERENCES = {"model_id", "gpu_id", "kv_dtype", "weight_dtype"}
# A capacity question's fields that are not one deployment's inputs: lists of what it asks about (every
# model x GPU x context x KV dtype is one scenario) and the weight dtype it names.
QUESTION_LISTS = {"models", "gpus", "contexts", "kv_dtypes", "weight_dtype"}


def test_a_scenario_row_is_the_deployment_inputs_and_references():
    names = [c for c, _kind in WHATIF_COLUMNS["scenario"]]
    assert len(names) == len(set(names))
    assert set(names) == DEPLOYMENT | WORKLOAD | REFERENCES | {"id"}


# A what-if binds a table's rows as JSON (kvreg.db.read.bound_rows) and gives each value as the column keeps it.
KINDS = {Integer: "int", BigInteger: "int", Float: "real", String: "text"}


def test_the_what_if_columns_are_the_tables_columns_with_their_kinds():
    """Every column a what-if binds is a column of the table it stands in for, of the kind the table stores
    (a whole number in a Float column is bound as a float, as SQLite's REAL affinity would keep it)."""
    for table, model in (("scenario", Scenario), ("plan", Plan), ("workload_class", WorkloadClass),
                         ("demand", Demand)):
        columns = {c.name: c for c in model.__table__.columns}
        for name, kind in WHATIF_COLUMNS[table]:
            assert KINDS[type(columns[name].type)] == kind, (table, name)


def test_a_plan_spec_defaults_every_deployment_input():
    assert set(SPEC_DEFAULTS) == DEPLOYMENT | {"kv_dtype", "weight_dtype", "notes"}


def test_calibration_fields_are_the_calibration_inputs_but_their_source():
    assert set(CALIBRATION_FIELDS) == set(inputs_of("calibration")) - {"calibration_source"}


def test_measured_terms_and_what_they_depend_on_are_deployment_columns():
    assert set(MEASURED_TERMS) <= DEPLOYMENT
    assert set(MEASURED_BY) <= DEPLOYMENT | {"weight_dtype"}


def test_the_tables_share_the_deployment_columns_with_the_declared_defaults():
    for table in (Plan, Scenario):
        columns = {c.name: c for c in table.__table__.columns}
        assert DEPLOYMENT | REFERENCES <= set(columns), table
        for name in DEPLOYMENT:
            assert columns[name].nullable == INPUTS[name].nullable, (table, name)
        assert {n: table.model_fields[n].default for n in DEPLOYMENT} == DEPLOYMENT_DEFAULTS


def test_a_capacity_question_has_every_deployment_setting_with_its_declared_default():
    fields = {f.name: f for f in dataclasses.fields(Question)}
    # avg_tokens and context_tokens are what the question lists (contexts) or leaves to the context.
    assert set(fields) == (DEPLOYMENT - {"avg_tokens", "context_tokens"}) | WORKLOAD | QUESTION_LISTS
    for name in set(fields) & WORKLOAD:
        assert fields[name].default is None, name
    for name in set(fields) & DEPLOYMENT:
        assert fields[name].default == DEPLOYMENT_DEFAULTS[name], name
    q = Question()
    assert q.contexts == [DEPLOYMENT_DEFAULTS["context_tokens"]] == [131072]
    assert q.kv_dtypes == [INPUTS["kv_dtype"].default] == ["bf16"]


def test_the_question_reads_a_declared_setting_by_the_option_capacity_generates_for_it():
    """A setting `kvreg capacity` gives no option of its own shape wears one generated from its declaration, which
    the question reads and checks as declared (kvreg.app.capacity.DECLARED): the two lists are one. None today;
    tests/test_declared_input.py declares one and follows it through."""
    from kvreg.app.capacity import DECLARED
    from kvreg.app.options import CAPACITY, declared_inputs

    assert DECLARED == tuple(declared_inputs(CAPACITY)) == ()


def test_the_declared_defaults_are_the_documented_ones():
    """docs/plans.md and `kvreg plan add --help` name these: 8 GPUs a node, TP 1, 128K context, 12% reserve,
    16-token blocks, the theoretical rule; every engine setting NULL (the engine's own default)."""
    assert {k: v for k, v in DEPLOYMENT_DEFAULTS.items() if v is not None} == {
        "tp": 1, "pp": 1, "dp_attention": 1, "gpus_per_node": 8, "context_tokens": 131072, "reserve": 0.12,
        "block_size": 16, "rule": "theoretical"}


def test_model_add_places_five_model_inputs_by_hand_and_generates_every_other():
    """`kvreg model add` wears an option of its own for the two inputs every model needs (--layers, --head-dim:
    required) and the three it reads (--kv-heads and --attention-heads stand in for each other; --v-head-dim left
    out is the registry's default); every other model input with a flag is generated from its declaration
    (declared_options), in the declarations' order, unless the command gives it by an option of its own shape
    (_MODEL_ADD_HANDLED: --params-b gives params_total). Adding `rotary_dim` once took three edits of
    kvreg/cli/models.py; a model input now takes none."""
    from kvreg.app.options import declared_inputs
    from kvreg.cli.models import _MODEL_ADD_HANDLED, model_add

    by_hand = [p.input for p in model_add.params if hasattr(p, "input") and not getattr(p, "generated", False)]
    assert by_hand == ["layers", "kv_heads", "attention_heads", "head_dim", "v_head_dim"]
    flagged = [n for n, d in INPUTS.items() if d.table == "model" and d.flag]
    assert declared_inputs(model_add) == [n for n in flagged if n not in by_hand and n not in _MODEL_ADD_HANDLED]
    assert "rotary_dim" in declared_inputs(model_add) and len(declared_inputs(model_add)) == 26


def test_gpu_add_and_set_place_only_the_inputs_they_shape_and_generate_every_other():
    """`gpu add` and `gpu set` place by hand only the GPU inputs they give a shape of their own: the order's lead
    time and node size (their help names the default the registry keeps) and the FLOP/s, read with a unit. Every
    other GPU input with a flag (the compute capability and the prices today) is generated from its declaration,
    unless gpu add gives it otherwise (_GPU_ADD_HANDLED: --memory gives memory_bytes) or gpu set may not change it
    (GPU_FIXED)."""
    from kvreg.app.options import GPU_FIXED, declared_inputs
    from kvreg.cli.gpus import _GPU_ADD_HANDLED, GPU_FLOPS, gpu_add, gpu_set

    flagged = [n for n, d in INPUTS.items() if d.table == "gpu" and d.flag]
    for command, kept in ((gpu_add, _GPU_ADD_HANDLED), (gpu_set, GPU_FIXED)):
        by_hand = [p.input for p in command.params if hasattr(p, "input") and not getattr(p, "generated", False)]
        assert by_hand == ["lead_time_quarters", "node_gpus", *GPU_FLOPS]
        assert declared_inputs(command) == [n for n in flagged if n not in by_hand and n not in kept]
    assert declared_inputs(gpu_add) == ["compute_capability", "price_per_hour", "unit_price"]
    assert declared_inputs(gpu_set) == ["price_per_hour", "unit_price"]
