"""The lists of input columns kept outside kvreg/figures name the declared inputs.

kvreg.capacity answers `kvreg capacity` on the fast path and kvreg.plans sits under every plan
command; neither imports kvreg.figures.declarations (tens of milliseconds at start-up), so their lists of
a deployment's columns are written out. These tests hold them to the declarations (InputDecl.table),
so an input added to a deployment without its scenario column or plan default shows up here.
"""

from __future__ import annotations

from kvreg.capacity import SCENARIO_COLUMNS
from kvreg.figures.declarations import inputs_of
from kvreg.plans import CALIBRATION_FIELDS, MEASURED_BY, MEASURED_TERMS, SPEC_DEFAULTS

DEPLOYMENT = set(inputs_of("deployment"))
# What a deployment row holds besides its inputs: the model, GPU and dtypes it joins to.
REFERENCES = {"model_id", "gpu_id", "kv_dtype", "weight_dtype"}


def test_a_scenario_row_is_the_deployment_inputs_and_references():
    assert len(SCENARIO_COLUMNS) == len(set(SCENARIO_COLUMNS))
    assert set(SCENARIO_COLUMNS) == DEPLOYMENT | REFERENCES


def test_a_plan_spec_defaults_every_deployment_input():
    assert set(SPEC_DEFAULTS) == DEPLOYMENT | {"kv_dtype", "weight_dtype", "notes"}


def test_calibration_fields_are_the_calibration_inputs_but_their_source():
    assert set(CALIBRATION_FIELDS) == set(inputs_of("calibration")) - {"calibration_source"}


def test_measured_terms_and_what_they_depend_on_are_deployment_columns():
    assert set(MEASURED_TERMS) <= DEPLOYMENT
    assert set(MEASURED_BY) <= DEPLOYMENT | {"weight_dtype"}
