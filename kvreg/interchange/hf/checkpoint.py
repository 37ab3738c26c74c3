"""Exact parameter counts from the checkpoint beside config.json: the tensor headers of its safetensors files (no
weights read), else its index's total size."""

from __future__ import annotations

import math
import pathlib
import re
from dataclasses import dataclass

from .config import Config, ConfigError, Findings, whole_number
from .dtypes import WEIGHT_BYTES, weight_dtype
from .params import moe_shape
from kvreg.core.limits import MAX_INDEX_BYTES, MAX_SAFETENSORS_HEADER_BYTES

from .read import INDEX_FILE, parse_json_object, read_file


# Bytes per element of each safetensors dtype (the format's names).
SAFETENSORS_BYTES = {
    "F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2,
    "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
}




# Routed experts' tensors (per-expert or fused), not the shared expert(s).
_EXPERT_TENSOR = re.compile(r"\.experts\.(\d+\.|gate_up_proj|down_proj|w1|w2|w3|gate_proj|up_proj)")


@dataclass
class Checkpoint:
    """What the tensor headers of a checkpoint's safetensors files say (no weights are read)."""

    files: int
    bytes_by_dtype: dict[str, int]
    elements: int
    expert_bytes: int

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_by_dtype.values())


def read_safetensors_header(path: pathlib.Path) -> dict[str, dict]:
    """The tensors of one .safetensors file: {name: {"dtype", "shape", "data_offsets"}}, read from the
    8-byte little-endian header length and the JSON header that follows it."""
    with path.open("rb") as fh:
        size = fh.read(8)
        if len(size) < 8:
            raise ConfigError(f"{path.name}: shorter than a safetensors header; remove the file or pass --params-b")
        length = int.from_bytes(size, "little")
        if length > MAX_SAFETENSORS_HEADER_BYTES:
            raise ConfigError(f"{path.name}: header of {length:,} bytes is larger than safetensors allows; "
                              "remove the file or pass --params-b")
        raw = fh.read(length)
    if len(raw) < length:
        raise ConfigError(f"{path.name}: truncated safetensors header; remove the file or pass --params-b")
    header = parse_json_object(raw.rstrip(b" "), path.name, MAX_SAFETENSORS_HEADER_BYTES)
    header.pop("__metadata__", None)
    return header


def read_checkpoint(folder: pathlib.Path) -> Checkpoint | None:
    """Sum the tensor headers of the checkpoint in `folder`: the shards its index lists (all must be
    present), else every *.safetensors file; None when there is nothing to read."""
    index = folder / INDEX_FILE
    if index.is_file():
        parsed = parse_json_object(read_file(index, index.name, MAX_INDEX_BYTES), index.name, MAX_INDEX_BYTES)
        weight_map = parsed.get("weight_map")
        if not isinstance(weight_map, dict):
            return None
        files = sorted({folder / f for f in weight_map.values() if isinstance(f, str) and "/" not in f})
        if not files or not all(f.is_file() for f in files):
            return None  # the index alone: its metadata.total_size is read instead
    else:
        files = sorted(folder.glob("*.safetensors"))
        if not files:
            return None
    by_dtype: dict[str, int] = {}
    elements = experts = 0
    for file in files:
        for name, tensor in read_safetensors_header(file).items():
            where = f"{file.name}: tensor {name}"
            if not isinstance(tensor, dict):
                raise ConfigError(f"{where} is not described by an object; the file is damaged")
            dtype, shape, offsets = tensor.get("dtype"), tensor.get("shape"), tensor.get("data_offsets")
            if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                    or not isinstance(offsets, list) or len(offsets) != 2
                    or not all(isinstance(o, int) and o >= 0 for o in offsets) or offsets[1] < offsets[0]):
                raise ConfigError(f"{where} has no valid shape and data_offsets; the file is damaged")
            nbytes, count = offsets[1] - offsets[0], math.prod(shape)
            if dtype in SAFETENSORS_BYTES and nbytes != count * SAFETENSORS_BYTES[dtype]:
                raise ConfigError(f"{where}: {count:,} {dtype} elements cannot take {nbytes:,} bytes; the file is damaged")
            by_dtype[str(dtype)] = by_dtype.get(str(dtype), 0) + nbytes
            elements += count
            experts += nbytes if _EXPERT_TENSOR.search(name) else 0
    return Checkpoint(len(files), by_dtype, elements, experts)


def params_from_tensors(weights: Checkpoint, config: dict, source: str) -> tuple[int, int, str]:
    """params_total / params_active so that params x the weight dtype's bytes is the checkpoint's exact size:
    the tensor element count itself when every tensor is stored in the weight dtype; for a MoE, the
    routed experts' bytes count top-k / experts towards the active parameters."""
    cfg = Config(config, source)
    dtype = weight_dtype(cfg, Findings())
    per = WEIGHT_BYTES[dtype]
    total_bytes = weights.total_bytes
    if total_bytes <= 0:
        raise ConfigError(f"{source}: the safetensors files hold no tensors; remove them or pass --params-b")
    experts, top_k = moe_shape(cfg)
    active_bytes = total_bytes - (weights.expert_bytes * (experts - top_k) / experts if experts else 0)
    total, active = round(total_bytes / per), max(1, round(active_bytes / per))
    shown = ", ".join(f"{d} {b:,} B" for d, b in sorted(weights.bytes_by_dtype.items()))
    how = (f"params_total from the tensor headers of {weights.files} safetensors file(s): {total_bytes:,} B "
           f"({shown}) / {per:g} B per {dtype} param; {weights.elements:,} tensor elements")
    if experts:
        how += (f"; params_active counts {top_k} of {experts} routed experts' {weights.expert_bytes:,} B")
    return total, active, how


def params_from_index(index_file: pathlib.Path, config: dict, source: str) -> tuple[int | None, str | None]:
    """params_total from a safetensors index's byte total, with the note saying how; (None, None) if absent."""
    if not index_file.is_file():
        return None, None
    index = parse_json_object(read_file(index_file, index_file.name, MAX_INDEX_BYTES), index_file.name, MAX_INDEX_BYTES)
    metadata = index.get("metadata")
    total_bytes = metadata.get("total_size") if isinstance(metadata, dict) else None
    if total_bytes is None:
        raise ConfigError(f"{index_file.name}: no metadata.total_size; remove the file or pass --params-b")
    total_bytes = whole_number(total_bytes, "metadata.total_size", index_file.name, maximum=10**16)
    dtype = weight_dtype(Config(config, source), Findings())
    total = round(total_bytes / WEIGHT_BYTES[dtype])
    return total, f"params_total from {INDEX_FILE}: {total_bytes:,} B / {WEIGHT_BYTES[dtype]:g} B per {dtype} param"
