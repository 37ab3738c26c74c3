"""Reading and writing registry rows: models, GPUs, dtypes. Validation happens here, before the
database's own constraints, so that a user sees what is wrong in words and nothing is written."""

from __future__ import annotations

import functools
import math
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from kvreg.db.tables import GPU_FIELDS, MODEL_FIELDS, Dtype, Gpu, Model, Plan
from kvreg.capacity import MAX_GPUS_PER_NODE
from kvreg.errors import AlreadyExists, KvregError, suggest

MAX_NAME = 200
_INT_LIMIT = 2**62
# PostgreSQL's INTEGER stops at 2**31 - 1 where SQLite would store more: values for INTEGER
# columns stop there on both engines, so both refuse them alike, in words.
INT32_MAX = 2**31 - 1
# kvreg tries every TP up to the GPUs per node (kvreg.capacity.valid_tps), so a typo here must
# not ask for billions of rows; the largest NVLink domains today hold 72 GPUs.
_FIELD_LIMITS = {"gpus_per_node": MAX_GPUS_PER_NODE}


def check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise KvregError(f"{what} name must not be empty")
    if len(name) > MAX_NAME:
        raise KvregError(f"{what} name is {len(name):,} characters long: at most {MAX_NAME} are allowed")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise KvregError(f"{what} name {name!r} contains control characters: use printable text only")
    return name


def check_text(value: Any, field: str) -> str:
    """Free text (notes, vendor, family) may hold anything PostgreSQL can store: all but NUL.
    (SQLite would store NUL, so without this check the two engines would disagree.)"""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise KvregError(f"{field} must be text, not {value!r}")
    if "\x00" in value:
        raise KvregError(f"{field} contains a NUL character (\\x00), which a registry cannot store: remove it")
    return value


def _check_texts(row: dict, fields: tuple[str, ...]) -> None:
    for f in fields:
        if row.get(f) is not None:
            check_text(row[f], f)


def check_int(value: Any, field: str, *, minimum: int = 1, allow_none: bool = False) -> int | None:
    """A whole number >= minimum; rejects booleans, fractions, NaN, infinity and sizes beyond what
    the field's column holds on PostgreSQL (or a sane bound, see _FIELD_LIMITS)."""
    if value is None:
        if allow_none:
            return None
        raise KvregError(f"{field} is required")
    if isinstance(value, bool):
        raise KvregError(f"{field} must be a whole number, not {value!r}")
    limit = _limit(field)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise KvregError(f"{field} must be a whole number, not {value!r}")
        if value > limit:  # 1e308 is a whole number too: say so without its 309 digits
            raise KvregError(f"{field} {value!r} is too large: at most {limit:,}")
        value = int(value)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise KvregError(f"{field} must be a whole number, not {value!r}") from None
    if not isinstance(value, int):
        raise KvregError(f"{field} must be a whole number, not {value!r}")
    if value < minimum:
        raise KvregError(f"{field} must be at least {minimum}, not {value}")
    if value > limit:
        raise KvregError(f"{field} {value:,} is too large: at most {limit:,}")
    return value


def _limit(field: str) -> int:
    """The largest whole number `field` may be: a sane bound, else what its column holds on every engine."""
    if field in _FIELD_LIMITS:
        return _FIELD_LIMITS[field]
    return _column_limits().get(field, _INT_LIMIT - 1)


@functools.cache
def _column_limits() -> dict[str, int]:
    """Column name -> INT32_MAX for every INTEGER (not BIGINT) column of the registry tables."""
    from sqlalchemy import BigInteger, Integer

    from kvreg.db.tables import SQLModel

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


def list_dtypes(conn) -> list[dict]:
    return [dict(r) for r in conn.execute(select(Dtype).order_by(Dtype.bytes_per_element.desc(), Dtype.name)).mappings()]


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

_MODEL_INTS = ["layers", "attention_heads", "kv_heads", "head_dim", "v_head_dim", "max_position_embeddings"]
_MODEL_OPTIONAL_INTS = ["sliding_window", "attention_chunk_size", "kv_lora_rank", "linear_state_elements_per_layer",
                        "linear_state_heads", "indexer_bytes_per_token_per_layer"]


def validate_model(conn, row: dict) -> dict:
    """Check a model row and fill what follows from it (full layers, v_head_dim, active params)."""
    row = {k: v for k, v in row.items() if k in MODEL_FIELDS}
    check_name(row.get("name"), "model")
    _check_texts(row, ("architecture", "family", "notes", "source"))
    row.setdefault("v_head_dim", row.get("head_dim"))
    for f in _MODEL_INTS:
        row[f] = check_int(row.get(f), f)
    for f in ("sliding_layers", "chunked_layers", "linear_layers"):
        row[f] = check_int(row.get(f) or 0, f, minimum=0)
    for f in _MODEL_OPTIONAL_INTS:
        row[f] = check_int(row.get(f), f, minimum=1 if f != "qk_rope_head_dim" else 0, allow_none=True)
    row["qk_rope_head_dim"] = check_int(row.get("qk_rope_head_dim"), "qk_rope_head_dim", minimum=0, allow_none=True)
    kinds = row["sliding_layers"] + row["chunked_layers"] + row["linear_layers"]
    if row.get("full_layers") is None:
        row["full_layers"] = row["layers"] - kinds
    row["full_layers"] = check_int(row["full_layers"], "full_layers", minimum=0)
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
    if not mla and row["attention_heads"] % row["kv_heads"]:
        raise KvregError(
            f"model {row['name']!r}: kv_heads ({row['kv_heads']}) must divide attention_heads ({row['attention_heads']})"
        )
    row["params_total"] = check_int(row.get("params_total"), "params_total")
    row["params_active"] = check_int(row.get("params_active") or row["params_total"], "params_active")
    if row["params_active"] > row["params_total"]:
        raise KvregError(f"model {row['name']!r}: active params exceed total params")
    row["weight_dtype"] = check_dtype(conn, row.get("weight_dtype") or "bf16", "weight", "weight dtype")
    if row.get("linear_state_dtype"):
        check_dtype(conn, row["linear_state_dtype"], "weight", "state dtype")
    row.setdefault("source", "manual")
    row.setdefault("notes", "")
    row.setdefault("architecture", "")
    row.setdefault("family", "")
    return row


def model_names(conn) -> list[str]:
    return list(conn.execute(select(Model.name).order_by(Model.name)).scalars())


def get_model(conn, name: str) -> dict:
    row = conn.execute(select(Model).where(Model.name == name)).mappings().first()
    if row is None:
        raise suggest(name, model_names(conn), "model")
    return dict(row)


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


def list_models(conn) -> list[dict]:
    return [dict(r) for r in conn.execute(select(Model).order_by(Model.name)).mappings()]


def remove_model(conn, name: str) -> None:
    m = get_model(conn, name)
    plans = list(conn.execute(select(Plan.name).where(Plan.model_id == m["id"])).scalars())
    if plans:
        raise KvregError(f"model {name!r} is used by plan(s) {', '.join(plans)}: remove those plans first")
    conn.execute(delete(Model).where(Model.id == m["id"]))


# --------------------------------------------------------------------------- GPUs


def gpu_names(conn) -> list[str]:
    return list(conn.execute(select(Gpu.name).order_by(Gpu.name)).scalars())


def get_gpu(conn, name: str) -> dict:
    row = conn.execute(select(Gpu).where(Gpu.name == name)).mappings().first()
    if row is None:
        raise suggest(name, gpu_names(conn), "gpu")
    return dict(row)


def validate_gpu(row: dict) -> dict:
    from kvreg.units import parse_size

    row = {k: v for k, v in row.items() if k in GPU_FIELDS}
    check_name(row.get("name"), "gpu")
    _check_texts(row, ("vendor", "interconnect", "notes"))
    if row.get("memory_bytes") is None:
        raise KvregError(f"gpu {row['name']!r} needs a memory size (--memory 80GiB)")
    row["memory_bytes"] = parse_size(row["memory_bytes"])
    if row.get("memory_bandwidth_bytes_per_s") is not None:
        row["memory_bandwidth_bytes_per_s"] = parse_size(row["memory_bandwidth_bytes_per_s"])
    for f in ("price_per_hour", "unit_price"):
        v = row.get(f)
        if v is not None:
            try:
                v = float(v)
            except (TypeError, ValueError):
                raise KvregError(f"{f} must be a number, not {v!r}") from None
            if not math.isfinite(v) or v < 0:
                raise KvregError(f"{f} must be a finite number of at least 0, not {v!r}")
            row[f] = v
    for f in ("vendor", "interconnect", "notes"):
        row.setdefault(f, "")
    return row


def add_gpu(conn, row: dict, *, replace: bool = False) -> dict:
    row = validate_gpu(row)
    try:
        exists = conn.execute(select(Gpu.id).where(Gpu.name == row["name"])).scalar()
        if exists is not None and replace:
            conn.execute(update(Gpu).where(Gpu.id == exists).values(**row))
        else:
            conn.execute(insert(Gpu).values(**row))
    except IntegrityError as exc:
        raise _integrity(exc, "gpu", row["name"]) from None
    return row


def list_gpus(conn) -> list[dict]:
    return [dict(r) for r in conn.execute(select(Gpu).order_by(Gpu.name)).mappings()]


def remove_gpu(conn, name: str) -> None:
    g = get_gpu(conn, name)
    plans = list(conn.execute(select(Plan.name).where(Plan.gpu_id == g["id"])).scalars())
    if plans:
        raise KvregError(f"gpu {name!r} is used by plan(s) {', '.join(plans)}: remove those plans first")
    from kvreg.db.tables import Fleet

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
