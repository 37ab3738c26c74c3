"""Reading and writing registry rows: models, GPUs, dtypes. Validation happens here, before the
database's own constraints, so that a user sees what is wrong in words and nothing is written."""

from __future__ import annotations

import functools
import math
from typing import Any

from sqlalchemy import BigInteger, Integer, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from kvreg.app.options import GPU_FIXED
from kvreg.app.values import INT32_MAX, INT_LIMIT, check_real, declared_value, whole_number
from kvreg.catalog.defaults import DERIVED, TEXT_DEFAULTS, ZERO_COUNTS, model_default
from kvreg.core.errors import AlreadyExists, KvregError
from kvreg.core.text import invisible_characters
from kvreg.core.units import UnitError, parse_flops, parse_size
from kvreg.db.read import (  # noqa: F401  (the read queries live in the db layer; re-exported here)
    get_gpu, get_model, gpu_names, list_dtypes, list_gpus, list_models, model_names,
)
from kvreg.db.columns import stored_inputs
from kvreg.db.tables import GPU_FIELDS, MODEL_FIELDS, Dtype, Fleet, Gpu, Model, Plan, SQLModel
from kvreg.figures.inputs import INPUTS, KV_GROUPS, MAX_GPUS_PER_NODE, MAXIMUMS

MAX_NAME = 200
# A sane bound where the column's would let a typo ask for billions of rows (kvreg.figures.inputs).
_FIELD_LIMITS = {"gpus_per_node": MAX_GPUS_PER_NODE}


def check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise KvregError(f"{what} name must not be empty")
    if name != name.strip():  # CSV and TOML readers strip a field: such a name would not come back
        raise KvregError(f"{what} name {name!r} begins or ends with a space: give it as {name.strip()!r}")
    if len(name) > MAX_NAME:
        raise KvregError(f"{what} name is {len(name):,} characters long: at most {MAX_NAME} are allowed")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise KvregError(f"{what} name {name!r} contains control characters: use printable text only")
    if not _is_utf8(name):
        raise KvregError(f"{what} name {_shown(name)} is not valid UTF-8 (it came from a file or folder name): "
                         "give the name with --name")
    hidden = invisible_characters(name)
    if hidden:  # a name must read as what it is: not reversed, not a look-alike of another
        raise KvregError(f"{what} name {name!r} contains invisible or direction-changing characters "
                         f"({', '.join(hidden)}): use visible text only")
    return name


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")  # bytes of a file name that are not UTF-8 arrive as lone surrogates
    except UnicodeEncodeError:
        return False
    return True


def _shown(text: str) -> str:
    return repr(text.encode("utf-8", "surrogateescape"))[1:]


# A number format's size: from 1 bit (0.125 B) to 8 B (fp64). Anything smaller makes every
# figure built on it meaningless (1e-320 B per element: a billion users on 0 GPUs).
BYTES_PER_ELEMENT_RANGE = (0.125, 8)


def check_bytes_per_element(value: Any, field: str = "bytes_per_element") -> float:
    low, high = BYTES_PER_ELEMENT_RANGE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise KvregError(f"{field} must be a number from {low} (1 bit) to {high} bytes (int4: 0.5), not {value!r}")
    return float(value)


def check_text(value: Any, field: str) -> str:
    """Free text (notes, vendor, family) may hold anything PostgreSQL can store: all but NUL.
    (SQLite would store NUL, so without this check the two engines would disagree.)"""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise KvregError(f"{field} must be text, not {value!r}")
    if not _is_utf8(value):
        raise KvregError(f"{field} {_shown(value)} is not valid UTF-8 (it came from a file or folder name): "
                         "rename the file")
    if "\x00" in value:
        raise KvregError(f"{field} contains a NUL character (\\x00), which a registry cannot store: remove it")
    return value


def _check_texts(row: dict, fields: tuple[str, ...]) -> None:
    for f in fields:
        if row.get(f) is not None:
            check_text(row[f], f)


def check_int(value: Any, field: str, *, minimum: int = 1, allow_none: bool = False) -> int | None:
    """A whole number >= minimum (kvreg.app.values.whole_number) up to what the field's column holds on
    PostgreSQL (or a sane bound, see _FIELD_LIMITS)."""
    return whole_number(value, field, minimum=minimum, allow_none=allow_none, limit=_limit(field))


def check_input(field: str, value: Any) -> int | float | None:
    """The one validator of a value entering the registry for the input or column `field`: the
    CLI, declaration (TOML) and CSV files, the web forms, `kvreg db copy` and the workbook importer
    all call it. What it checks is the input's declaration (kvreg.app.values.declared_value, which
    `kvreg capacity` calls too), with the column's limit. A column no input is read from: a whole number
    from 0, or a real one up to its MAXIMUMS. None passes for a nullable input. Each failure is one line
    naming the field."""
    decl = _INPUT_BY_COLUMN.get(field)
    if decl is None:
        if field in MAXIMUMS:
            return check_real(value, field)
        return check_int(value, field, minimum=0, allow_none=True)
    return declared_value(decl, value, field, limit=_limit(field))


_INPUT_BY_COLUMN = {i.column: i for i in INPUTS.values() if i.kind != "text" and i.table not in ("mix",)}


def check_at_most(row: dict, table: str) -> None:
    """The one check of each bound an input of `table` is declared to keep against another column of the same row
    (InputDecl.at_most naming a column, which generates the CHECK too: moe_layers <= layers, reported_memory_bytes
    <= memory_bytes), in one wording naming both, with their values and the input's meaning (its "NULL:" read as
    what leaving it out means). A bound whose column the row leaves empty is refused too (the CHECK would let it
    through): the input is a part of that column's."""
    for d in _COLUMN_BOUNDS[table]:
        value = row.get(d.column)
        if value is None:
            continue
        bound, unit, meaning = row.get(d.at_most), f" {d.unit}", d.meaning.replace("NULL:", "left out:")
        if bound is None:
            other = _INPUT_BY_COLUMN.get(d.at_most)
            give = other.flag.split()[0] if other is not None else d.at_most
            raise KvregError(f"{table} {row['name']!r}: {d.column} ({value:,}{unit}) must be at most {d.at_most}, "
                             f"which is not given: give {give} too, or leave {d.flag.split()[0]} out; "
                             f"{d.column}: {meaning}")
        if value > bound:
            raise KvregError(f"{table} {row['name']!r}: {d.column} ({value:,}{unit}) must be at most {d.at_most} "
                             f"({bound:,}{unit}); {d.column}: {meaning}")


# Each registry table's inputs declared at most another column (check_at_most).
_COLUMN_BOUNDS = {t: [d for d in stored_inputs(t) if isinstance(d.at_most, str)] for t in ("model", "gpu")}


def _limit(field: str) -> int:
    """The largest whole number `field` may be: a sane bound, else what its column holds on every engine, or its
    input's declared maximum when lower."""
    if field in _FIELD_LIMITS:
        return _FIELD_LIMITS[field]
    most = _column_limits().get(field, INT_LIMIT - 1)
    decl = _INPUT_BY_COLUMN.get(field)
    return most if decl is None or decl.maximum is None else min(most, int(decl.maximum))


@functools.cache
def _column_limits() -> dict[str, int]:
    """Column name -> INT32_MAX for every INTEGER (not BIGINT) column of the registry tables."""
    out = {}
    for table in SQLModel.metadata.tables.values():
        for column in table.columns:
            if isinstance(column.type, Integer) and not isinstance(column.type, BigInteger):
                out[column.name] = INT32_MAX
    return out


def _integrity(exc: IntegrityError, what: str, name: str) -> KvregError:
    msg = str(exc.orig).lower()
    if "unique" in msg or "duplicate" in msg:
        return AlreadyExists(
            f"{what} {name!r} already exists: choose another name, or change it with `kvreg apply`"
        )
    if "foreign key" in msg:
        return KvregError(f"{what} {name!r} refers to something that does not exist (an unknown dtype, model or GPU)")
    for ck, text in _CHECK_TEXT.items():
        if ck in msg:
            return KvregError(f"{what} {name!r}: {text}")
    return KvregError(f"{what} {name!r} breaks a registry rule: {str(exc.orig).splitlines()[0]}")


_CHECK_TEXT = {
    "ck_model_layer_sum": "full + sliding + chunked + linear layers must add up to layers",
    "ck_model_sliding_window": "sliding layers need a sliding window (--sliding-window)",
    "ck_model_chunk": "chunked layers need a chunk size (--attention-chunk-size)",
    "ck_model_params": "params must be positive and active params at most total params",
    "ck_model_linear_state": "linear layers need a state size (--linear-state-elements)",
    "ck_model_mla": "MLA needs both kv_lora_rank and qk_rope_head_dim",
    "ck_gpu_memory": "memory must be positive",
    "ck_plan_fits_node": "TP x PP must not exceed the GPUs per node",
    "ck_plan_reserve": "reserve must be at least 0 and below 1",
    "ck_demand_users": "users must not be negative",
}


# --------------------------------------------------------------------------- dtypes


def dtype_names(conn, kind: str | None = None) -> list[str]:
    q = select(Dtype.name).order_by(Dtype.name)
    if kind:
        q = q.where(Dtype.kind.in_([kind, "both"]))
    return list(conn.execute(q).scalars())


def check_dtype(conn, name: str, kind: str, field: str = "dtype") -> str:
    known = dtype_names(conn, kind)
    if name not in known:
        raise KvregError(f"unknown {field} {name!r}: use one of {', '.join(known)} (or add it with `kvreg dtype add`)")
    return name


def add_dtype(conn, row: dict) -> None:
    check_name(row.get("name"), "dtype")
    _check_texts(row, ("notes",))
    row = dict(row)
    for f, minimum in (("mla_bytes_per_token_per_layer", 1), ("scale_bytes_per_token_per_head", 0)):
        if f in row:
            row[f] = check_int(row[f], f, minimum=minimum, allow_none=True)
    try:
        conn.execute(insert(Dtype).values(**row))
    except IntegrityError as exc:
        raise _integrity(exc, "dtype", row["name"]) from None


# --------------------------------------------------------------------------- models

# The model's whole-number inputs (kvreg.figures.inputs), each checked as declared: the required ones first,
# then (once the zero counts are filled) the optional ones; the derived ones (DERIVED: v_head_dim has its
# default before, params_active and full_layers theirs after) once the fields they read are checked.
_MODEL_DECLS = [d for d in stored_inputs("model") if d.kind == "int"]
_MODEL_INTS = [d.column for d in _MODEL_DECLS if not d.nullable and d.default is None
               and d.column not in DERIVED[1:] and d.column != "params_total"]
_MODEL_OPTIONAL_INTS = [d.column for d in _MODEL_DECLS if d.nullable]


# What a model input's one-line error adds to its declaration's words (check_input), where a bound wants a reason.
_MODEL_HINTS = {"embedding_matrices": ": a checkpoint holds 2 vocabulary matrices (input embeddings and lm_head) or 1"
                                      " when tied; give 1 or 2"}


def _check_declared(row: dict, field: str, value: Any = None) -> int | None:
    """A model input checked as declared (check_input: its least value, its numeric at_most, its choices)."""
    try:
        return check_input(field, row.get(field) if value is None else value)
    except KvregError as exc:
        if field not in _MODEL_HINTS:
            raise
        raise KvregError(f"model {row['name']!r}: {exc}{_MODEL_HINTS[field]}") from None


def validate_model(conn, row: dict) -> dict:
    """Check a model row and fill what it leaves out (kvreg.catalog.defaults: full layers, v_head_dim,
    active params, zero counts, texts), each default once the fields it reads are checked."""
    row = {k: v for k, v in row.items() if k in MODEL_FIELDS}
    check_name(row.get("name"), "model")
    _check_texts(row, ("architecture", "family", "notes", "source"))
    row.setdefault("v_head_dim", model_default("v_head_dim", row))
    for f in _MODEL_INTS:
        row[f] = _check_declared(row, f)
    for f in ZERO_COUNTS:
        row[f] = check_int(row.get(f) or model_default(f, row), f, minimum=0)
    for f in _MODEL_OPTIONAL_INTS:
        row[f] = _check_declared(row, f)
    kinds = row["sliding_layers"] + row["chunked_layers"] + row["linear_layers"]
    if row.get("full_layers") is None:
        if kinds > row["layers"]:  # say so in the fields given, not in full_layers (derived: -8)
            raise KvregError(
                f"model {row['name']!r}: sliding ({row['sliding_layers']}) + chunked ({row['chunked_layers']}) + "
                f"linear ({row['linear_layers']}) layers add up to {kinds}, more than layers ({row['layers']})")
        row["full_layers"] = model_default("full_layers", row)
    row["full_layers"] = _check_declared(row, "full_layers")
    if row["full_layers"] + kinds != row["layers"]:
        raise KvregError(
            f"model {row['name']!r}: full ({row['full_layers']}) + sliding ({row['sliding_layers']}) + chunked "
            f"({row['chunked_layers']}) + linear ({row['linear_layers']}) layers must add up to layers ({row['layers']})"
        )
    if row["sliding_layers"] and not row.get("sliding_window"):
        raise KvregError(f"model {row['name']!r} has sliding layers but no --sliding-window")
    if row["chunked_layers"] and not row.get("attention_chunk_size"):
        raise KvregError(f"model {row['name']!r} has chunked layers but no --attention-chunk-size")
    if row["linear_layers"] and not row.get("linear_state_elements_per_layer"):
        raise KvregError(f"model {row['name']!r} has linear layers but no --linear-state-elements")
    if row.get("linear_state_elements_per_layer") and not row.get("linear_state_heads"):
        row["linear_state_heads"] = 1
    mla = row.get("kv_lora_rank") is not None
    if mla != (row.get("qk_rope_head_dim") is not None):
        raise KvregError(f"model {row['name']!r}: MLA needs both --kv-lora-rank and --qk-rope-head-dim")
    if not mla and row.get("indexer_bytes_per_token_per_layer") is not None:
        raise KvregError(f"model {row['name']!r}: an indexer cache (--indexer-bytes-per-token-per-layer) belongs to "
                         "MLA models (DeepSeek-V3.2); give --kv-lora-rank and --qk-rope-head-dim too, or drop it")
    if row.get("indexer_layers") is not None and row.get("indexer_bytes_per_token_per_layer") is None:
        raise KvregError(f"model {row['name']!r}: indexer_layers counts the layers keeping an indexer cache; give "
                         "--indexer-bytes-per-token-per-layer too, or drop it")
    for f in ("kv_heads", "sliding_kv_heads", "chunked_kv_heads"):
        if not mla and row.get(f) and row["attention_heads"] % row[f]:
            raise KvregError(
                f"model {row['name']!r}: {f} ({row[f]}) must divide attention_heads ({row['attention_heads']})"
            )
    for kind in ("sliding", "chunked"):
        if not row[f"{kind}_layers"] and (row.get(f"{kind}_kv_heads") or row.get(f"{kind}_head_dim")):
            raise KvregError(f"model {row['name']!r}: {kind}_kv_heads / {kind}_head_dim describe {kind} layers, "
                             f"but the model has none; drop them or give --{kind}-layers")
    check_at_most(row, "model")  # linear_recurrent_elements_per_layer, moe_layers, indexer_layers
    expert_shape = [row.get(k) for k in ("experts", "expert_intermediate_size", "moe_layers")]
    if any(v is not None for v in expert_shape) and None in expert_shape:
        raise KvregError(f"model {row['name']!r}: experts, expert_intermediate_size and moe_layers go together (a"
                         " mixture-of-experts layout); give all three, or none for a dense model")
    if row.get("expert_hidden_size") is not None and row.get("experts") is None:
        raise KvregError(f"model {row['name']!r}: expert_hidden_size is the routed experts' latent width; give the "
                         "expert layout too (experts, expert_intermediate_size, moe_layers), or drop it")
    if row.get("rotary_dim") is not None and row["rotary_dim"] > row["head_dim"]:
        raise KvregError(f"model {row['name']!r}: rotary_dim ({row['rotary_dim']}) cannot exceed head_dim "
                         f"({row['head_dim']}); give the elements of a head RoPE rotates (partial_rotary_factor x head_dim)")
    if row["k_eq_v_layers"] > row["full_layers"]:
        raise KvregError(f"model {row['name']!r}: k_eq_v_layers ({row['k_eq_v_layers']}) cannot exceed the "
                         f"full layers ({row['full_layers']})")
    row["params_total"] = _check_declared(row, "params_total")
    row["params_active"] = _check_declared(row, "params_active", row.get("params_active") or model_default("params_active", row))
    if row["params_active"] > row["params_total"]:
        raise KvregError(f"model {row['name']!r}: active params exceed total params")
    row["weight_dtype"] = check_dtype(conn, row.get("weight_dtype") or "bf16", "weight", "weight dtype")
    if row.get("linear_state_dtype"):
        check_dtype(conn, row["linear_state_dtype"], "weight", "state dtype")
    _check_kv_groups(row, mla)
    kinds = ("mamba2", "gated_deltanet", "kda", "lightning", "short_conv")
    if row.get("linear_state_kind") is not None and row["linear_state_kind"] not in kinds:
        raise KvregError(f"model {row['name']!r}: linear_state_kind {row['linear_state_kind']!r} is not one of "
                         f"{', '.join(kinds)}; name one of those or leave it out")
    for f in TEXT_DEFAULTS:
        row.setdefault(f, model_default(f, row))
    return row


def _check_kv_groups(row: dict, mla: bool) -> None:
    """Per-layer kv heads: each group (kv_heads_N of kv_layers_N full layers) whole, its heads dividing the query
    heads, in a model of full attention layers alone (a standard cache, not MLA) that keeps at least one full layer
    at kv_heads."""
    groups = [(n, row.get(f"kv_heads_{n}"), row.get(f"kv_layers_{n}")) for n in KV_GROUPS]
    groups = [(n, heads, layers) for n, heads, layers in groups if heads is not None or layers is not None]
    if not groups:
        return
    name = row["name"]
    for n, heads, layers in groups:
        if heads is None or layers is None:
            raise KvregError(f"model {name!r}: kv_heads_{n} and kv_layers_{n} go together (that many full layers with "
                             "that many kv heads each); give both, or neither")
        if row["attention_heads"] % heads:
            raise KvregError(f"model {name!r}: kv_heads_{n} ({heads}) must divide attention_heads "
                             f"({row['attention_heads']})")
    if mla or row["sliding_layers"] or row["chunked_layers"] or row["linear_layers"]:
        raise KvregError(f"model {name!r}: per-layer kv heads (kv_heads_N / kv_layers_N) are for models whose cache "
                         "layers are all standard full attention; drop them, or enter the layers as one kind")
    grouped = sum(layers for _, _, layers in groups)
    if grouped >= row["full_layers"]:
        raise KvregError(f"model {name!r}: the per-layer kv head groups hold {grouped} layers, but at least one of the "
                         f"{row['full_layers']} full layers must hold kv_heads; make the largest group kv_heads")


def add_model(conn, row: dict, *, replace: bool = False) -> dict:
    row = validate_model(conn, row)
    try:
        exists = conn.execute(select(Model.id).where(Model.name == row["name"])).scalar()
        if exists is not None and replace:
            conn.execute(update(Model).where(Model.id == exists).values(**row))
        else:
            conn.execute(insert(Model).values(**row))
    except IntegrityError as exc:
        raise _integrity(exc, "model", row["name"]) from None
    return row


# What an import keeps of a registry model it updates: curated facts, not re-read from a config.
CURATED_FIELDS = ("name", "family", "notes")


def hf_repo_id(source: str | None) -> str | None:
    """The Hugging Face repo id a config's file name carries: ``meta-llama__Llama-3.1-8B.json`` ->
    ``meta-llama/Llama-3.1-8B`` (the ``org__Model.json`` naming of downloaded configs); else None."""
    if not source or not source.endswith(".json") or "__" not in source:
        return None
    org, model = source.removesuffix(".json").split("__", 1)
    return f"{org}/{model}" if org and model else None


def find_match(conn, row: dict, *, by_repo: bool = True) -> tuple[dict, str] | None:
    """The registry model an imported row is, and how it was recognised: the same name, or (by_repo)
    the same Hugging Face repo id as the config a registry model (a catalog one, say) was read from.
    None: a new model."""
    same = conn.execute(select(Model).where(Model.name == row["name"])).mappings().first()
    if same is not None:
        return dict(same), "name"
    repo = hf_repo_id(row.get("source")) if by_repo else None
    if repo is None:
        return None
    # A source naming this repo is "org__model.json" with "org/model" == repo, so it is exactly
    # len(repo) + 6 characters long ("/" becomes "__", ".json" is added): asking for that length
    # keeps an import of many configs from reading every model for each one (an import of 1,000
    # files read 530,000 rows). The match itself is hf_repo_id's, in Python.
    candidates = select(Model.id, Model.source).where(func.length(Model.source) == len(repo) + 6,
                                                      Model.source.like("%.json"))
    for cand in conn.execute(candidates).mappings():
        if hf_repo_id(cand["source"]) == repo:
            existing = conn.execute(select(Model).where(Model.id == cand["id"])).mappings().one()
            return dict(existing), f"Hugging Face repo {repo}"
    return None


def import_model(conn, row: dict, *, replace: bool = False, exact_params: bool = False,
                 named: bool = False) -> tuple[dict, str | None]:
    """Write an imported model row; returns (the row written, a note for the user or None).

    A row that matches a registry model (find_match) is never added beside it: without `replace` the
    import fails saying which model it is; with it, the match is updated from the config, keeping its
    name, family and notes, and its parameter counts unless the import's are exact (a safetensors
    index or --params-b): an estimate never replaces a published number. A row the user `named`
    (--name) is matched by that name only: naming it is asking for a model of its own.
    """
    row = {**row, "name": check_name(row["name"], "model")}  # before any query: a name must be valid text
    match = find_match(conn, row, by_repo=not named)
    if match is None:
        return add_model(conn, row), None
    existing, how = match
    if not replace:
        if how == "name":
            raise AlreadyExists(f"model {row['name']!r} already exists: pass --replace to update it from the config")
        raise AlreadyExists(f"{row['source']} is the registry's model {existing['name']!r} (same {how}): pass "
                            "--replace to update it from the config, or --name to add it under a new name")
    kept = list(CURATED_FIELDS) + ([] if exact_params else ["params_total", "params_active"])
    merged = {**row, **{f: existing[f] for f in kept}}
    add_model(conn, merged, replace=True)
    changed = [f for f in MODEL_FIELDS if f not in ("imported_at", "source", "source_sha256")
               and merged.get(f) != existing.get(f)]
    note = (f"{row['source']}: updated the registry's model {existing['name']!r} (matched by {how}); kept its "
            f"{', '.join(kept[1:] if how == 'name' else kept)}" + (f"; changed {', '.join(changed)}" if changed else
                                                                   "; no figure changed"))
    return merged, note


def remove_model(conn, name: str) -> None:
    m = get_model(conn, name)
    plans = list(conn.execute(select(Plan.name).where(Plan.model_id == m["id"])).scalars())
    if plans:
        raise KvregError(f"model {name!r} is used by plan(s) {', '.join(plans)}: remove those plans first")
    conn.execute(delete(Model).where(Model.id == m["id"]))


# --------------------------------------------------------------------------- GPUs

# A GPU's dense tensor FLOP per second by dtype (0015), read with parse_flops: 989.4TFLOPS, 2.25PFLOPS.
GPU_FLOPS = ("flops_bf16_per_s", "flops_fp8_per_s", "flops_fp4_per_s")

# The memory CUDA or ROCm reports for a GPU no log shows (0015; docs/engine-rules.md, "GPUs without a log").
# NVIDIA: the usable memory less 400 MiB and 1/200 of it, where usable is the nominal size, or 15/16 of it on
# GDDR memory with ECC on (data-centre GDDR cards: T4, A10, L4, L40S keep 1/16 for the check bits). Least
# squares on seven logged GPUs (A100-40GB, H100-SXM, H200, RTX-4090, L40S, L4, RTX-5090) gives 0.33 GiB and
# 0.61%; rounded to 400 MiB and 0.5%, it is within 0.83% of the twelve held out (tests/test_gpu_facts.py).
# AMD: ROCm reports the whole HBM less 16 MiB (MI300X's 192 GiB as 201,310,208 KiB, a 64 GiB gfx90a device
# as 67,092,480 KiB).
NVIDIA_RESERVE_BYTES = 400 * 2**20
NVIDIA_RESERVE_SHARE = 200  # a further 1/200 of the usable memory
GDDR_ECC_SHARE = 16  # ECC on GDDR keeps 1/16 of it
ROCM_RESERVE_BYTES = 16 * 2**20


def estimate_reported_memory(memory_bytes: int, vendor: str, *, gddr_ecc: bool = False) -> int | None:
    """What CUDA (NVIDIA) or ROCm (AMD) reports as the device's total for a GPU of `memory_bytes` nominal
    memory, by the rule above; None for a vendor the rule does not cover (Apple's unified memory)."""
    vendor = vendor.strip().lower()
    if vendor == "amd":
        return memory_bytes - ROCM_RESERVE_BYTES
    if vendor not in ("", "nvidia"):
        return None
    usable = memory_bytes - memory_bytes // GDDR_ECC_SHARE if gddr_ecc else memory_bytes
    return usable - NVIDIA_RESERVE_BYTES - usable // NVIDIA_RESERVE_SHARE


# What validate_gpu reads before the declarations check it: the sizes with their units (80GiB), the FLOP/s with
# theirs (989.4TFLOPS). Every GPU input, these and any declared since, is then checked as declared (check_input).
GPU_SIZES = ("memory_bytes", "memory_bandwidth_bytes_per_s", "reported_memory_bytes")
_GPU_DECLS = stored_inputs("gpu")
_GPU_HINTS = {"compute_capability": " (an H100 is 9.0)"}


def validate_gpu(row: dict) -> dict:
    """Check a GPU row: its name and texts, its sizes and FLOP/s read by their units, its fabric flag, then every
    GPU input through its declaration (check_input: any input declared since too), then the bounds one column
    sets another (check_at_most); each failure one line. A NOT NULL input given as None is left out, for its
    column's default."""
    row = {k: v for k, v in row.items() if k in GPU_FIELDS}
    check_name(row.get("name"), "gpu")
    _check_texts(row, ("vendor", "interconnect", "notes"))
    if row.get("memory_bytes") is None:
        raise KvregError(f"gpu {row['name']!r} needs a memory size (--memory 80GiB)")
    for f in GPU_SIZES:
        if row.get(f) is not None:
            row[f] = parse_size(row[f])
    for f in GPU_FLOPS:
        if row.get(f) is not None:
            try:
                row[f] = parse_flops(row[f], f)
            except UnitError as exc:
                raise KvregError(f"gpu {row['name']!r}: {exc}") from None
    if row.get("fabric") is not None:
        v = row["fabric"]
        if v not in (0, 1, True, False):
            raise KvregError(f"gpu {row['name']!r}: fabric is 1 (NVLink or another GPU fabric) or 0 (PCIe only), "
                             f"not {v!r}")
        row["fabric"] = int(v)
    for d in _GPU_DECLS:
        f = d.column
        if f not in row or f == "name":
            continue
        if row[f] is None and not d.nullable:
            row.pop(f)  # the column's default (lead_time_quarters 0, node_gpus 8)
        elif d.kind == "text":
            row[f] = check_text(row[f], f) if row[f] is not None else None
        else:
            try:
                row[f] = check_input(f, row[f])
            except KvregError as exc:
                if f not in _GPU_HINTS:
                    raise
                raise KvregError(f"gpu {row['name']!r}: {exc}{_GPU_HINTS[f]}") from None
    check_at_most(row, "gpu")
    estimated = row.get("reported_memory_estimated") or 0  # absent: the reported memory, if any, was given
    if estimated not in (0, 1) or isinstance(estimated, (bool, float)):
        raise KvregError(f"gpu {row['name']!r}: reported_memory_estimated is 1 (kvreg estimated the reported memory) or "
                         f"0 (it was given), not {estimated!r}")
    elif estimated and row.get("reported_memory_bytes") is None:
        raise KvregError(f"gpu {row['name']!r}: reported_memory_estimated is 1 but there is no reported memory: give "
                         "reported_memory_bytes, or leave reported_memory_estimated out")
    row["reported_memory_estimated"] = estimated
    for f in ("vendor", "interconnect", "notes"):
        row.setdefault(f, "")
    return row


def add_gpu(conn, row: dict, *, replace: bool = False, estimate: bool = False, gddr_ecc: bool = False) -> dict:
    """Add (or with `replace`, overwrite) a GPU row. `estimate`: a row without a reported memory gets
    estimate_reported_memory's (`gddr_ecc`: its GDDR runs with ECC on), marked reported_memory_estimated."""
    row = validate_gpu(row)
    if estimate and row.get("reported_memory_bytes") is None:
        guess = estimate_reported_memory(row["memory_bytes"], row["vendor"], gddr_ecc=gddr_ecc)
        if guess is not None and guess > 0:
            row["reported_memory_bytes"], row["reported_memory_estimated"] = guess, 1
    try:
        exists = conn.execute(select(Gpu.id).where(Gpu.name == row["name"])).scalar()
        if exists is not None and replace:
            conn.execute(update(Gpu).where(Gpu.id == exists).values(**row))
        else:
            conn.execute(insert(Gpu).values(**row))
    except IntegrityError as exc:
        raise _integrity(exc, "gpu", row["name"]) from None
    return row


# What `kvreg gpu set` may change: every declared GPU input but the GPU type's own facts (kvreg.app.options.GPU_FIXED):
# the procurement facts, the dense FLOP/s, and any GPU input declared since, with no edit here.
_GPU_SET_FIRST = ("lead_time_quarters", "node_gpus", "unit_price", "price_per_hour")  # the order its messages name them
GPU_SETTABLE = (*_GPU_SET_FIRST, *(n for n, d in INPUTS.items()
                                   if d.table == "gpu" and n not in GPU_FIXED and n not in _GPU_SET_FIRST))


def set_gpu(conn, name: str, changes: dict) -> dict:
    """Change a GPU type's procurement facts (GPU_SETTABLE; None: left as it is): the row as stored."""
    g = get_gpu(conn, name)
    changes = {k: v for k, v in changes.items() if v is not None}
    unknown = sorted(set(changes) - set(GPU_SETTABLE))
    if unknown:
        raise KvregError(f"gpu set cannot change {', '.join(unknown)}: only {', '.join(GPU_SETTABLE)}")
    if not changes:
        flags = [INPUTS[n].flag.split()[0] for n in GPU_SETTABLE]
        raise KvregError(f"gpu set needs something to change: {', '.join(flags[:-1])} or {flags[-1]}")
    row = validate_gpu({**{k: g.get(k) for k in GPU_FIELDS}, **changes})
    values = {k: row[k] for k in changes}
    try:
        conn.execute(update(Gpu).where(Gpu.id == g["id"]).values(**values))
    except IntegrityError as exc:  # validate_gpu checks every rule first: a CHECK still breaking is said in a line
        raise _integrity(exc, "gpu", name) from None
    return {**g, **values}


def remove_gpu(conn, name: str) -> None:
    g = get_gpu(conn, name)
    plans = list(conn.execute(select(Plan.name).where(Plan.gpu_id == g["id"])).scalars())
    if plans:
        raise KvregError(f"gpu {name!r} is used by plan(s) {', '.join(plans)}: remove those plans first")
    fleet = list(conn.execute(select(Fleet.quarter).where(Fleet.gpu_id == g["id"]).order_by(Fleet.quarter)).scalars())
    if fleet:
        raise KvregError(f"gpu {name!r} has fleet entries ({', '.join(fleet)}): remove them first with "
                         f"`kvreg fleet remove {name} QUARTER`")
    conn.execute(delete(Gpu).where(Gpu.id == g["id"]))


def counts(conn) -> dict:
    return {
        "models": conn.execute(select(func.count()).select_from(Model)).scalar_one(),
        "gpus": conn.execute(select(func.count()).select_from(Gpu)).scalar_one(),
        "dtypes": conn.execute(select(func.count()).select_from(Dtype)).scalar_one(),
        "plans": conn.execute(select(func.count()).select_from(Plan)).scalar_one(),
    }
