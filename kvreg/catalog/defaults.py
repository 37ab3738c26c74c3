"""What a model row may leave out, and what it then holds.

One rule for every way a model comes in: the built-in catalog (kvreg.catalog.load), `kvreg model
add`, a sync file and an import (all through kvreg.app.registry.validate_model, which checks each field
before it derives another from it).
"""

from __future__ import annotations

from typing import Any

# The layer kinds that take layers from full attention (layers = full + these; no-cache layers are not in layers).
KIND_LAYERS = ("sliding_layers", "chunked_layers", "linear_layers")
# Counts that are 0 unless given.
ZERO_COUNTS = (*KIND_LAYERS, "no_cache_layers", "k_eq_v_layers")
TEXT_DEFAULTS = {"source": "manual", "notes": "", "architecture": "", "family": ""}
# Filled from other fields of the row, in this order (full_layers reads the zero counts).
DERIVED = ("v_head_dim", "params_active", "full_layers")


def model_default(field: str, row: dict) -> Any:
    """The value `field` takes when a model row leaves it out: the layer-kind counts, no-cache and
    K=V layers 0; v_head_dim the key head width (head_dim); params_active every parameter (a dense
    model: params_total); full_layers the layers no other kind takes (layers - sliding - chunked -
    linear); source "manual"; notes, architecture and family "". A derived default reads the row's
    other fields, which must hold numbers by then."""
    if field in ZERO_COUNTS:
        return 0
    if field in TEXT_DEFAULTS:
        return TEXT_DEFAULTS[field]
    if field == "v_head_dim":
        return row.get("head_dim")
    if field == "params_active":
        return row.get("params_total")
    if field == "full_layers":
        return row["layers"] - sum(row[k] for k in KIND_LAYERS)
    raise KeyError(f"model field {field!r} has no default")


def model_defaults(row: dict) -> dict:
    """The row with every field it leaves out (absent) filled by model_default."""
    out = dict(row)
    for field in (*ZERO_COUNTS, *TEXT_DEFAULTS, *DERIVED):
        if field not in out:
            out[field] = model_default(field, out)
    return out
