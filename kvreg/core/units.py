"""Parsing and printing of sizes, token counts and quarters.

Conventions (SPEC "Units and sizes"):
- sizes: ``80GiB`` is 80 * 2**30 bytes, ``53GB`` is 53 * 10**9 bytes, ``512B`` is 512 bytes. Text
  without a unit is refused: ``--memory 80`` would otherwise be an 80-byte GPU.
- token counts follow vLLM's ``--max-model-len``: lower-case suffixes are decimal
  (``128k`` = 128,000, ``1m`` = 1,000,000), upper-case are binary (``128K`` = 131,072,
  ``1M`` = 1,048,576).
- quarters are ``2026Q4`` (also accepted: ``2026-Q4``, ``2026q4``).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from decimal import ROUND_HALF_UP, Decimal

from kvreg.core.errors import UserError


class UnitError(UserError, ValueError):
    """A value the user typed could not be read; the message says what to type instead."""


_SIZE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}

_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int | float) -> int:
    """Parse ``80GiB``, ``141 GiB``, ``24GB``, ``53e9B`` into a whole number of bytes. Text must
    carry a unit; a Python int or float (a value already in bytes, from the registry) needs none."""
    if isinstance(text, bool):
        raise UnitError(f"size {text!r} is not a number of bytes")
    if isinstance(text, int):
        value, unit = text, ""
    elif isinstance(text, float):
        value, unit = text, ""
    else:
        m = _SIZE_RE.match(str(text))
        if not m:
            raise UnitError(
                f"size {text!r} is not understood: use a number with a unit such as 80GiB, 141GiB or 24GB"
            )
        value, unit = float(m.group(1)), m.group(2).lower()
        if not unit:
            number = m.group(1)
            if float(number) >= 2**20:  # a byte count typed without its B
                raise UnitError(f"size {text!r} has no unit: write {number}B if you mean bytes, "
                                "or give GiB or GB (80GiB, 80GB)")
            raise UnitError(
                f"size {text!r} has no unit: write {number}GiB ({number} x 2^30 bytes) or {number}GB "
                f"({number} x 10^9 bytes), or {number}B if you mean bytes"
            )
    if unit and unit not in _SIZE_UNITS:
        raise UnitError(
            f"size {text!r} has an unknown unit {unit!r}: use B, KB, MB, GB, TB (10^n) or KiB, MiB, GiB, TiB (2^n)"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise UnitError(f"size {text!r} is not a finite number")
    nbytes = value * _SIZE_UNITS[unit] if unit else value
    if nbytes <= 0:
        raise UnitError(f"size {text!r} must be greater than zero")
    if nbytes >= 2**63:
        raise UnitError(f"size {text!r} is too large (at most 2^63 - 1 bytes)")
    if isinstance(nbytes, float):
        rounded = round(nbytes)
        if abs(nbytes - rounded) > 1e-6 * max(1.0, abs(nbytes)) and nbytes < 2**53:
            raise UnitError(f"size {text!r} is not a whole number of bytes")
        return int(rounded)
    return int(nbytes)


_FLOPS_UNITS = {"flops": 1, "gflops": 10**9, "tflops": 10**12, "pflops": 10**15}
_FLOPS_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)(?:/s)?\s*$")


def parse_flops(text: str | int | float, what: str = "FLOP/s") -> int:
    """Parse ``989.4TFLOPS``, ``1979 TFLOPS``, ``2.25PFLOPS`` (also ``989.4TFLOP/s``) into whole FLOP per
    second: TFLOPS is 10^12, PFLOPS 10^15, GFLOPS 10^9 (decimal, as vendors quote them). Text must carry a
    unit; a Python int (a value already in FLOP/s, from the registry) needs none."""
    if isinstance(text, bool):
        raise UnitError(f"{what} {text!r} is not a number of FLOP/s")
    if isinstance(text, (int, float)):
        value, unit, scale = text, "", 1
    else:
        m = _FLOPS_RE.match(str(text))
        if not m:
            raise UnitError(f"{what} {text!r} is not understood: use a number with a unit such as 989.4TFLOPS "
                            "or 2.25PFLOPS")
        unit = m.group(2).lower().removesuffix("/s")
        unit = {"t": "tflops", "p": "pflops", "g": "gflops", "tflop": "tflops", "pflop": "pflops",
                "gflop": "gflops", "flop": "flops"}.get(unit, unit)
        if not unit:
            raise UnitError(f"{what} {text!r} has no unit: write {m.group(1)}TFLOPS (10^12 per second)")
        if unit not in _FLOPS_UNITS:
            raise UnitError(f"{what} {text!r} has an unknown unit {m.group(2)!r}: use GFLOPS, TFLOPS or PFLOPS")
        value, scale = Decimal(m.group(1)), _FLOPS_UNITS[unit]
    if isinstance(value, float) and not math.isfinite(value):
        raise UnitError(f"{what} {text!r} is not a finite number")
    flops = value * scale
    if flops <= 0:
        raise UnitError(f"{what} {text!r} must be greater than zero")
    if flops >= 2**63:
        raise UnitError(f"{what} {text!r} is too large (at most 2^63 - 1 FLOP/s)")
    if flops != int(flops):
        raise UnitError(f"{what} {text!r} is not a whole number of FLOP/s")
    return int(flops)


_TOKEN_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgG]?)\s*$")
_TOKEN_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_tokens(text: str | int) -> int:
    """Parse a token count the way vLLM's ``--max-model-len`` does (``128K`` = 131,072, ``1m`` = 10^6)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value, unit = text, ""
    else:
        m = _TOKEN_RE.match(str(text))
        if not m:
            raise UnitError(
                f"token count {text!r} is not understood: use a whole number or a suffix "
                "k/m (decimal, 128k = 128,000) or K/M (binary, 128K = 131,072)"
            )
        if len(m.group(1)) > _MAX_TOKEN_DIGITS:  # 400 digits would be infinity as a float
            raise UnitError(f"token count {_clip(text)} is too large (at most 2^40)")
        value, unit = float(m.group(1)), m.group(2)
    if value > 2**40:  # before any arithmetic: an int of 400 digits has no float
        raise UnitError(f"token count {_clip(text)} is too large (at most 2^40)")
    tokens = value * _TOKEN_UNITS[unit]
    if tokens != int(tokens):
        raise UnitError(f"token count {text!r} is not a whole number of tokens")
    if tokens < 1:
        raise UnitError(f"token count {text!r} must be at least 1")
    if tokens > 2**40:
        raise UnitError(f"token count {_clip(text)} is too large (at most 2^40)")
    return int(tokens)


# 2^40 has 13 digits; a longer number (decimals included) is refused before it becomes a float.
_MAX_TOKEN_DIGITS = 40


def _clip(text) -> str:
    """A value for a message, at most 40 characters: a 400-digit count is shown by its length."""
    shown = repr(str(text)) if not isinstance(text, int) else str(text)
    return shown if len(shown) <= 40 else f"{shown[:20]}... ({len(str(text)):,} characters)"


def parse_token_list(text: str) -> list[int]:
    """Parse ``128K,1m`` into ``[131072, 1000000]``."""
    parts = [p for p in str(text).split(",") if p.strip()]
    if not parts:
        raise UnitError("no token count given: use for example --context 128K,1m")
    return [parse_tokens(p) for p in parts]


def format_size(nbytes: int) -> str:
    """The exact size as text parse_size reads back: 85899345920 -> 80GiB, 3350000000000 -> 3350GB, 656 -> 656B."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("TB", 10**12), ("GB", 10**9), ("MiB", 2**20),
                        ("MB", 10**6), ("KiB", 2**10), ("KB", 10**3)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


def format_tokens(tokens: int) -> str:
    """The shortest exact label for a token count: 131072 -> 128K, 1000000 -> 1m, 13000 -> 13k."""
    for unit, scale in (("M", 2**20), ("m", 10**6), ("K", 2**10), ("k", 10**3)):
        if tokens >= scale and tokens % scale == 0:
            return f"{tokens // scale}{unit}"
    return str(tokens)


_QUARTER_RE = re.compile(r"^\s*([0-9]{4})\s*-?\s*[qQ]\s*([0-9]+)\s*$")


def parse_quarter(text: str) -> str:
    """Normalise ``2026Q4`` / ``2026-Q4`` / ``2026q4`` to ``2026Q4``; reject ``2026Q5`` and ``2026-13``."""
    m = _QUARTER_RE.match(str(text))
    if not m:
        raise UnitError(f"quarter {text!r} is not understood: write it as YEARQn, for example 2026Q4")
    year, q = int(m.group(1)), int(m.group(2))
    if not 1 <= q <= 4:
        raise UnitError(f"quarter {text!r} has no quarter {q}: quarters run Q1 to Q4")
    # at most 2999: a horizon's later quarters (40 of them) and the workbook's formulas keep a four-digit year
    if not 1970 <= year <= 2999:
        raise UnitError(f"quarter {text!r} has an implausible year {year}")
    return f"{year}Q{q}"


def current_quarter(today: _dt.date | None = None) -> str:
    today = today or _dt.date.today()
    return f"{today.year}Q{(today.month - 1) // 3 + 1}"


def quarter_folder(quarter: str) -> str:
    """``2026Q4`` -> ``2026-Q4`` (the report folder name)."""
    return f"{quarter[:4]}-{quarter[4:]}"


def gib(nbytes: float) -> float:
    return nbytes / 2**30


def parse_fraction(text: str | float, what: str = "reserve") -> float:
    """A fraction in [0, 1), such as the memory reserve."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UnitError(f"{what} {text!r} is not a number: give a fraction such as 0.12") from None
    if not math.isfinite(value) or not 0 <= value < 1:
        raise UnitError(f"{what} {text!r} must be at least 0 and below 1 (for example 0.12)")
    return value


def fixed(x, decimals: int, *, grouped: bool = False) -> str:
    """`x` with `decimals` decimals, halves rounded away from zero on the shortest decimal form of x:
    what SQLite's printf, PostgreSQL's TO_CHAR and Excel's FIXED print (2.675 -> 2.68, 0.25 -> 0.3),
    where Python's own format rounds the exact binary value (2.675 -> 2.67, 0.25 -> 0.2). `grouped`: with
    thousands separators (1,234.57), as the CLI's tables and the report print a number; the same rounding, so
    a table's cell and a sentence's figure agree (0.125 -> 0.13 in both)."""
    if not math.isfinite(x):  # nan, inf: as Python prints them (no figure gives one; a guard for the printer)
        return f"{x:,.{int(decimals)}f}" if grouped else f"{x:.{int(decimals)}f}"
    q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-int(decimals)), rounding=ROUND_HALF_UP)
    return f"{q:,f}" if grouped else f"{q:f}"
