"""What a model row leaves out is filled by one rule (kvreg.catalog.defaults), whichever way the
model comes in: the catalog's seeding and validate_model (model add, sync, imports) agree."""

from __future__ import annotations

import pytest

from kvreg.app.registry import validate_model
from kvreg.catalog import load_catalog
from kvreg.catalog.defaults import DERIVED, TEXT_DEFAULTS, ZERO_COUNTS, model_default, model_defaults

FILLED = (*ZERO_COUNTS, *TEXT_DEFAULTS, *DERIVED)
BARE = dict(name="bare", layers=32, attention_heads=32, kv_heads=8, head_dim=128, params_total=8_000_000_000,
            max_position_embeddings=131072, weight_dtype="bf16")


def test_a_bare_row_gets_every_default():
    row = model_defaults(BARE)
    assert {f: row[f] for f in FILLED} == {
        "sliding_layers": 0, "chunked_layers": 0, "linear_layers": 0, "no_cache_layers": 0, "k_eq_v_layers": 0,
        "source": "manual", "notes": "", "architecture": "", "family": "",
        "v_head_dim": 128, "params_active": 8_000_000_000, "full_layers": 32,
    }


def test_full_layers_are_those_no_other_kind_takes():
    row = model_defaults({**BARE, "sliding_layers": 20, "chunked_layers": 4, "linear_layers": 2, "no_cache_layers": 6})
    assert row["full_layers"] == 32 - 20 - 4 - 2


def test_a_field_without_a_default_says_so():
    with pytest.raises(KeyError, match="head_dim"):
        model_default("head_dim", BARE)


def test_seeding_and_validation_fill_the_same(engine):
    """Every catalog model, and the bare row, with what it leaves out filled by the seeding
    (model_defaults) and by validate_model."""
    rows = [*load_catalog()["models"], BARE]
    with engine.connect() as conn:
        for row in rows:
            seeded, validated = model_defaults(row), validate_model(conn, dict(row))
            assert {f: seeded[f] for f in FILLED} == {f: validated[f] for f in FILLED}, row["name"]
