"""A value as entered, checked: a whole number, a finite real number, an input as declared. Each refusal
is one line naming the field or option.

Standard library only: `kvreg capacity` checks an input declared since (kvreg.app.capacity) on its fast
path, without the registry's SQLAlchemy; kvreg.app.registry checks every value entering the registry here,
with its columns' limits.
"""

from __future__ import annotations

import math
import re
from typing import Any

from kvreg.core.errors import KvregError
from kvreg.core.units import UnitError, parse_size, parse_tokens
from kvreg.figures.inputs import MAXIMUMS, InputDecl

INT_LIMIT = 2**62
_ASCII_INT = re.compile(r"-?[0-9]+")
_ZERO_SIZE = re.compile(r"\+?(?:0+(?:\.0*)?|\.0+)\s*([A-Za-z]*)")
# PostgreSQL's INTEGER stops at 2**31 - 1 where SQLite would store more: values for INTEGER
# columns stop there on both engines, so both refuse them alike, in words.
INT32_MAX = 2**31 - 1


def whole_number(value: Any, field: str, *, minimum: int = 1, allow_none: bool = False,
                 limit: int = INT_LIMIT - 1) -> int | None:
    """A whole number from `minimum` to `limit`; rejects booleans, fractions, NaN, infinity and text other
    than the digits 0-9. `field` names it in the one-line error (a column, or an option: --draft-tokens)."""
    if value is None:
        if allow_none:
            return None
        raise KvregError(f"{field} is required")
    if isinstance(value, bool):
        raise KvregError(f"{field} must be a whole number, not {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise KvregError(f"{field} must be a whole number, not {value!r}")
        if value > limit:  # 1e308 is a whole number too: say so without its 309 digits
            raise KvregError(f"{field} {value!r} is too large: at most {limit:,}")
        value = int(value)
    if isinstance(value, str):
        # Strict: Python's int() would also read 1_000 and other scripts' digits (Arabic-Indic
        # ١٠٠), which no other tool reading the same file takes for a number.
        digits = value.strip()
        if not _ASCII_INT.fullmatch(digits):
            shown = repr(value) if len(value) <= 40 else f"{value[:20]!r}... ({len(value):,} characters)"
            raise KvregError(f"{field} must be a whole number, not {shown}{_digits_hint(digits)}")
        if len(digits.lstrip("-0")) > len(str(limit)):
            raise KvregError(f"{field} ({len(digits):,} digits) is too large: at most {limit:,}")
        value = int(digits)
    if not isinstance(value, int):
        raise KvregError(f"{field} must be a whole number, not {value!r}")
    if value < minimum:
        raise KvregError(f"{field} must be at least {minimum}, not {value}")
    if value > limit:
        shown = f"{value:,}" if value < 10**40 else f"({len(str(value)):,} digits)"
        raise KvregError(f"{field} {shown} is too large: at most {limit:,}")
    return value


_ASCII_REAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _digits_hint(text: str) -> str:
    """What to change in a number that Python would read but kvreg does not: 1_000, 1,000, ١٠٠."""
    if "_" in text or "," in text or any(ch.isdigit() and not ch.isascii() for ch in text):
        return " (write the digits 0-9 only, with no _ or , separators)"
    return ""


def check_real(value: Any, field: str, *, positive: bool = False, allow_none: bool = True,
               maximum: float | None = None, below: float | None = None) -> float | None:
    """A finite number from 0 (above 0 when `positive`) up to `maximum` (default: the field's declared
    maximum, kvreg.figures.inputs.MAXIMUMS), and under `below` when given. Text must be a plain decimal number (0-9, a point, an
    exponent): 1_000, 1,5 and other scripts' digits are refused rather than read as Python would."""
    if value is None or (isinstance(value, str) and not value.strip()):
        if allow_none:
            return None
        raise KvregError(f"{field} is required")
    shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:20]}... ({len(str(value)):,} characters)"
    if isinstance(value, str):
        if not _ASCII_REAL.fullmatch(value.strip()):
            raise KvregError(f"{field} must be a number, not {shown}{_digits_hint(value)}")
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KvregError(f"{field} must be a number, not {shown}")
    try:
        number = float(value)
    except OverflowError:  # an int of 400 digits
        number = math.inf
    low = "more than 0" if positive else "at least 0"
    maximum = MAXIMUMS.get(field) if maximum is None else maximum
    if not math.isfinite(number) or number < 0 or (positive and number == 0) \
            or (maximum is not None and number > maximum) or (below is not None and number >= below):
        upto = f" and at most {maximum:,.0f}" if maximum is not None else ""
        upto += f" and below {below:g}" if below is not None else ""
        raise KvregError(f"{field} must be a finite number of {low}{upto}, not {shown}")
    return number


def declared_value(decl: InputDecl, value: Any, field: str, *, limit: int | None = None) -> int | float | None:
    """`value` checked as the input `decl` is declared (kvreg.figures.inputs.InputDecl), the same
    declaration that generates its column and CHECK: a real input (kind "real", or a bounded column of
    MAXIMUMS) goes through check_real, any other through whole_number with the column's limit (`limit`;
    default column_limit) or its declared `maximum` when lower, from its least value (1 where it is positive,
    its minimum, else 0); then the CHECK's numeric upper bound and its choices. None passes for a nullable input. `field` names it in the
    one-line error: the column (kvreg.app.registry.check_input) or the option (`kvreg capacity`)."""
    if decl.kind == "real" or (decl.kind != "int" and decl.column in MAXIMUMS):
        number = check_real(value, field, positive=decl.positive, allow_none=decl.nullable,
                            maximum=_numeric(decl.at_most, decl.maximum, MAXIMUMS.get(decl.column)), below=decl.below)
    else:  # a whole number up to its column's limit, or its declared maximum below that
        most = column_limit(decl) if limit is None else limit
        number = whole_number(value, field, minimum=decl.lowest or 0, allow_none=decl.nullable,
                              limit=most if decl.maximum is None else min(most, int(decl.maximum)))
        most = _numeric(decl.at_most)
        if number is not None and most is not None and number > most:
            raise KvregError(f"{field} must be at most {most:,}, not {number:,}")
    if number is not None and decl.choices and number not in decl.choices:
        raise KvregError(f"{field} must be {' or '.join(str(c) for c in decl.choices)}, not {number!r}")
    return number


def column_limit(decl: InputDecl) -> int:
    """The largest whole number the input's column holds on every engine: INT32_MAX in an INTEGER column, else
    BIGINT's (kvreg/db/tables.py makes the column BIGINT where the input is declared `big`)."""
    return INT_LIMIT - 1 if decl.big else INT32_MAX


def _numeric(*bounds) -> int | float | None:
    """The first bound that is a number (a CHECK's at_most may name another column instead)."""
    return next((b for b in bounds if isinstance(b, (int, float)) and not isinstance(b, bool)), None)


def read_option(decl: InputDecl, value: Any, flag: str) -> Any:
    """An option's text read by its input's declared unit: bytes, a size with its unit (2GiB, 1.5e9B; 0 needs
    none); tokens, a token count (1024, 8k = 8,000, 8K = 8,192); any other, as given, for declared_value to check.
    A value that is not text (a file's number) is returned as it is; so is None."""
    if not isinstance(value, str) or decl.unit not in ("bytes", "tokens"):
        return value
    text = value.strip()
    if decl.unit == "bytes":
        if text.startswith("-"):
            raise KvregError(f"{flag} {text!r} is negative: give a size such as 2GiB (or 0)")
        zero = _ZERO_SIZE.fullmatch(text)
        if zero and (not zero.group(1) or _is_size_unit(zero.group(1))):  # 0, 0GiB, 0.0 GB: none of any unit
            return 0
    try:
        return parse_size(text) if decl.unit == "bytes" else parse_tokens(text)
    except UnitError as exc:
        raise KvregError(f"{flag}: {exc}") from None


def _is_size_unit(unit: str) -> bool:
    try:
        parse_size("1" + unit)
    except UnitError:
        return False
    return True


def option_value(decl: InputDecl, value: Any, flag: str) -> int | float | None:
    """An option as typed, read by its declared unit (read_option) and checked as declared (declared_value), its
    one-line error naming `flag`."""
    return declared_value(decl, read_option(decl, value, flag), flag)

