"""Reading a config.json (or any JSON the importer reads: a safetensors index or header, hf_quant_config.json) within
kvreg.core.limits (MAX_CONFIG_BYTES, MAX_INDEX_BYTES, MAX_SAFETENSORS_HEADER_BYTES, MAX_DEPTH):
a byte limit, UTF-8, one JSON object, nesting no deeper than limits.MAX_DEPTH."""

from __future__ import annotations

import hashlib
import json
import pathlib

from kvreg.core.limits import MAX_CONFIG_BYTES, MAX_DEPTH, MB, depth

from .config import ConfigError, json_type


INDEX_FILE = "model.safetensors.index.json"


def read_config(path_or_text: str | bytes | pathlib.Path, *, source_name: str | None = None) -> tuple[dict, str, str]:
    """Parse a config and return ``(config, source file name, sha256 hex of the raw bytes)``.

    ``bytes`` are the file's content; a ``pathlib.Path`` is a file; a ``str`` is JSON text when
    it starts with ``{`` or ``[`` (after blanks), else a file path.
    """
    if isinstance(path_or_text, bytes):
        raw, source = path_or_text, source_name or "stdin"
    elif isinstance(path_or_text, str) and path_or_text.lstrip()[:1] in ("{", "["):
        raw, source = path_or_text.encode("utf-8"), source_name or "stdin"
    else:
        path = pathlib.Path(path_or_text)
        source = source_name or path.name
        raw = read_file(path, source)
    return parse_json_object(raw, source), source, hashlib.sha256(raw).hexdigest()


def read_file(path: pathlib.Path, source: str, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The file's bytes, at most ``limit + 1`` of them (so /dev/zero or a weights file cannot exhaust memory)."""
    if not path.exists():
        raise ConfigError(f"{path}: no such file; give the path of a config.json or of the model folder holding it")
    if not path.is_file():
        raise ConfigError(f"{path}: not a regular file; give the path of a config.json")
    with path.open("rb") as fh:
        return fh.read(limit + 1)


def parse_json_object(raw: bytes, source: str, limit: int = MAX_CONFIG_BYTES) -> dict:
    """JSON object from raw bytes, with one-line errors for every way it can go wrong."""
    if len(raw) > limit:
        raise ConfigError(
            f"{source}: larger than {limit // MB} MB, too big for a model's JSON metadata; "
            "pass the model's config.json, not a weights or data file"
        )
    try:
        config = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not UTF-8 text; pass the model's config.json") from None
    except RecursionError:
        raise ConfigError(f"{source}: JSON nested too deeply to be a config; pass the model's config.json") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); pass the model's config.json"
        ) from None
    except ValueError:  # an integer of more than 4,300 digits, which Python will not convert
        raise ConfigError(f"{source}: holds a number too long to be a model's (thousands of digits); pass the model's"
                          " config.json") from None
    if not isinstance(config, dict):
        raise ConfigError(
            f"{source}: JSON is a {json_type(config)}, not an object; a config.json is one JSON object {{...}}"
        )
    if depth(config) > MAX_DEPTH:
        raise ConfigError(
            f"{source}: JSON nested more than {MAX_DEPTH} levels deep, too deep to be a config; "
            "pass the model's config.json"
        )
    return config
