"""kvreg.core.units read and print what SPEC "Units and sizes" says: a table of (typed, value) rows per
function, each value's arithmetic written out, and the refusals with the words the user sees."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from kvreg.core.units import (UnitError, current_quarter, format_size, format_tokens, gib, parse_flops, parse_fraction,
                         parse_quarter,
                         parse_size, parse_token_list, parse_tokens, quarter_folder)


def _exactly(message: str) -> str:
    """A `match` pattern for the whole message, read literally (messages carry parentheses and ^)."""
    return "^" + re.escape(message) + "$"


# --------------------------------------------------------------------------- sizes


@pytest.mark.parametrize("typed, nbytes", [
    ("80GiB", 80 * 2**30),  # 85,899,345,920: binary units are powers of 2
    ("3350GB", 3350 * 10**9),  # 3,350,000,000,000: decimal units are powers of 10
    ("141 GiB", 141 * 2**30),  # a space before the unit
    ("  24gb ", 24 * 10**9),  # units in any case, spaces around
    ("512B", 512),
    ("53e9B", 53 * 10**9),  # a number in e-notation
    ("1.5KiB", 3 * 2**9),  # 1.5 x 1024 = 1536, a whole number of bytes
    ("0.25GiB", 2**28),  # 0.25 x 2^30
    ("2TiB", 2 * 2**40),
    ("7TB", 7 * 10**12),
    ("3MiB", 3 * 2**20),
    ("3MB", 3 * 10**6),
    ("9KB", 9 * 10**3),
    (1024, 2**10),  # a Python int is already bytes (a registry value): no unit needed
    (1024.0, 2**10),  # so is a float
])
def test_parse_size(typed, nbytes):
    assert parse_size(typed) == nbytes


@pytest.mark.parametrize("typed, message", [
    ("80", "size '80' has no unit: write 80GiB (80 x 2^30 bytes) or 80GB (80 x 10^9 bytes), or 80B if you mean bytes"),
    # 2,000,000 >= 2^20: a byte count that lost its B, so bytes are offered first
    ("2000000", "size '2000000' has no unit: write 2000000B if you mean bytes, or give GiB or GB (80GiB, 80GB)"),
    ("80XB", "size '80XB' has an unknown unit 'xb': use B, KB, MB, GB, TB (10^n) or KiB, MiB, GiB, TiB (2^n)"),
    ("eighty GiB", "size 'eighty GiB' is not understood: use a number with a unit such as 80GiB, 141GiB or 24GB"),
    ("-80GiB", "size '-80GiB' is not understood: use a number with a unit such as 80GiB, 141GiB or 24GB"),
    ("0GiB", "size '0GiB' must be greater than zero"),
    (-5, "size -5 must be greater than zero"),
    ("0.5B", "size '0.5B' is not a whole number of bytes"),
    ("9000000TiB", "size '9000000TiB' is too large (at most 2^63 - 1 bytes)"),  # 9e6 x 2^40 ~ 9.9e18 > 2^63
    (float("inf"), "size inf is not a finite number"),
    (True, "size True is not a number of bytes"),  # a bool is an int to Python, never a size
])
def test_parse_size_refuses(typed, message):
    with pytest.raises(UnitError, match=_exactly(message)):
        parse_size(typed)


@pytest.mark.parametrize("nbytes, text", [
    (80 * 2**30, "80GiB"),
    (3350 * 10**9, "3350GB"),
    (656, "656B"),  # no unit divides it
    (2**40, "1TiB"),  # the largest unit that divides it exactly
    (10**12, "1TB"),
    (5 * 2**20, "5MiB"),
    (2 * 10**6, "2MB"),
    (2 * 2**10, "2KiB"),
    (10**3, "1KB"),
    (1536, "1536B"),  # 1.5 KiB: not a whole number of any unit
])
def test_format_size(nbytes, text):
    assert format_size(nbytes) == text
    assert parse_size(text) == nbytes  # what it prints reads back exactly


def test_gib():
    assert gib(80 * 2**30) == 80.0
    assert gib(2**29) == 0.5  # 2^29 / 2^30


# --------------------------------------------------------------------------- token counts


@pytest.mark.parametrize("typed, tokens", [
    ("128K", 128 * 2**10),  # 131,072: upper case is binary, as vLLM's --max-model-len
    ("128k", 128 * 10**3),  # 128,000: lower case is decimal
    ("1M", 2**20),  # 1,048,576
    ("1m", 10**6),
    ("1G", 2**30),
    ("1g", 10**9),
    ("4096", 4096),
    (" 8K ", 8 * 2**10),
    ("1.5K", 3 * 2**9),  # 1.5 x 1024 = 1536
    ("1.5k", 1500),  # 1.5 x 1000
    (32768, 32768),  # a Python int is a count already
    ("1024G", 2**40),  # the largest count: 1024 x 2^30
])
def test_parse_tokens(typed, tokens):
    assert parse_tokens(typed) == tokens


_NOT_UNDERSTOOD = ("token count {!r} is not understood: use a whole number or a suffix "
                   "k/m (decimal, 128k = 128,000) or K/M (binary, 128K = 131,072)")


@pytest.mark.parametrize("typed, message", [
    ("128KB", _NOT_UNDERSTOOD.format("128KB")),  # tokens have no B
    ("lots", _NOT_UNDERSTOOD.format("lots")),
    ("-8K", _NOT_UNDERSTOOD.format("-8K")),
    (True, _NOT_UNDERSTOOD.format(True)),  # a bool is read as its text, not as 1
    ("1.0001k", "token count '1.0001k' is not a whole number of tokens"),  # 1000.1
    ("0", "token count '0' must be at least 1"),
    (0, "token count 0 must be at least 1"),
    ("2048G", "token count '2048G' is too large (at most 2^40)"),  # 2048 x 2^30 = 2^41
])
def test_parse_tokens_refuses(typed, message):
    with pytest.raises(UnitError, match=_exactly(message)):
        parse_tokens(typed)


@pytest.mark.parametrize("typed, tokens", [
    ("128K,1m", [128 * 2**10, 10**6]),
    ("8K", [8 * 2**10]),
    ("8K,,32K", [8 * 2**10, 32 * 2**10]),  # empty items are skipped
    (" 2K , 4k ", [2 * 2**10, 4 * 10**3]),
])
def test_parse_token_list(typed, tokens):
    assert parse_token_list(typed) == tokens


@pytest.mark.parametrize("typed, message", [
    ("", "no token count given: use for example --context 128K,1m"),
    (" , ", "no token count given: use for example --context 128K,1m"),
    ("8K,x", _NOT_UNDERSTOOD.format("x")),  # one bad item refuses the list
])
def test_parse_token_list_refuses(typed, message):
    with pytest.raises(UnitError, match=_exactly(message)):
        parse_token_list(typed)


@pytest.mark.parametrize("tokens, text", [
    (128 * 2**10, "128K"),
    (10**6, "1m"),
    (13 * 10**3, "13k"),
    (2**20, "1M"),  # binary first: 1M, not 1048.576k
    (4 * 2**10, "4K"),
    (1500, "1500"),  # neither 1024 nor 1000 divides it
    (1, "1"),
])
def test_format_tokens(tokens, text):
    assert format_tokens(tokens) == text
    assert parse_tokens(text) == tokens  # the label reads back exactly


# --------------------------------------------------------------------------- quarters


@pytest.mark.parametrize("typed, quarter", [
    ("2026Q4", "2026Q4"),
    ("2026-Q4", "2026Q4"),
    ("2026q4", "2026Q4"),
    (" 2026 - q 1 ", "2026Q1"),
    ("1970Q1", "1970Q1"),  # the earliest year accepted
    ("2999Q4", "2999Q4"),  # the latest: a 40-quarter horizon from it keeps four-digit years
])
def test_parse_quarter(typed, quarter):
    assert parse_quarter(typed) == quarter


@pytest.mark.parametrize("typed, message", [
    ("2026Q5", "quarter '2026Q5' has no quarter 5: quarters run Q1 to Q4"),
    ("2026Q0", "quarter '2026Q0' has no quarter 0: quarters run Q1 to Q4"),
    ("2026-13", "quarter '2026-13' is not understood: write it as YEARQn, for example 2026Q4"),  # a month
    ("Q4 2026", "quarter 'Q4 2026' is not understood: write it as YEARQn, for example 2026Q4"),
    ("26Q4", "quarter '26Q4' is not understood: write it as YEARQn, for example 2026Q4"),
    ("1969Q4", "quarter '1969Q4' has an implausible year 1969"),
    ("9999Q4", "quarter '9999Q4' has an implausible year 9999"),  # its horizon ran into 10000Q1
])
def test_parse_quarter_refuses(typed, message):
    with pytest.raises(UnitError, match=_exactly(message)):
        parse_quarter(typed)


@pytest.mark.parametrize("today, quarter", [
    (dt.date(2026, 1, 1), "2026Q1"),  # (1 - 1) // 3 + 1 = 1
    (dt.date(2026, 3, 31), "2026Q1"),  # (3 - 1) // 3 + 1 = 1
    (dt.date(2026, 4, 1), "2026Q2"),  # (4 - 1) // 3 + 1 = 2
    (dt.date(2026, 9, 30), "2026Q3"),  # (9 - 1) // 3 + 1 = 3
    (dt.date(2026, 12, 2), "2026Q4"),  # (12 - 1) // 3 + 1 = 4
])
def test_current_quarter(today, quarter):
    assert current_quarter(today) == quarter


@pytest.mark.parametrize("quarter, folder", [("2026Q4", "2026-Q4"), ("2027Q1", "2027-Q1")])
def test_quarter_folder(quarter, folder):
    assert quarter_folder(quarter) == folder


# --------------------------------------------------------------------------- fractions


@pytest.mark.parametrize("typed, value", [
    ("0.12", 0.12),
    ("0", 0.0),  # no reserve at all is allowed
    (0.5, 0.5),
    ("0.999", 0.999),
    (" 0.1 ", 0.1),  # float() strips spaces
])
def test_parse_fraction(typed, value):
    assert parse_fraction(typed) == value


@pytest.mark.parametrize("typed, what, message", [
    ("1", "reserve", "reserve '1' must be at least 0 and below 1 (for example 0.12)"),  # [0, 1): 1 is out
    ("-0.1", "reserve", "reserve '-0.1' must be at least 0 and below 1 (for example 0.12)"),
    ("nan", "reserve", "reserve 'nan' must be at least 0 and below 1 (for example 0.12)"),
    ("12%", "reserve", "reserve '12%' is not a number: give a fraction such as 0.12"),
    (None, "reserve", "reserve None is not a number: give a fraction such as 0.12"),
    ("high", "--gpu-memory-utilization", "--gpu-memory-utilization 'high' is not a number: give a fraction such as 0.12"),
])
def test_parse_fraction_refuses(typed, what, message):
    with pytest.raises(UnitError, match=_exactly(message)):
        parse_fraction(typed, what)


@pytest.mark.parametrize("typed, flops", [
    ("989.4TFLOPS", 989_400_000_000_000),  # an H100 SXM's dense BF16: 989.4 x 10^12, exact (decimal arithmetic)
    ("989.4 TFLOP/s", 989_400_000_000_000),
    ("1978.9T", 1_978_900_000_000_000),
    ("2.25PFLOPS", 2_250_000_000_000_000),  # a B200's dense BF16: 2.25 x 10^15
    ("9PFLOPS", 9 * 10**15),
    ("362.05tflops", 362_050_000_000_000),  # units are read in any case
    ("500GFLOPS", 5 * 10**11),
    ("1e15FLOPS", 10**15),
    (312_000_000_000_000, 312 * 10**12),  # a Python int is already FLOP/s (a registry value)
])
def test_parse_flops(typed, flops):
    assert parse_flops(typed) == flops


@pytest.mark.parametrize("typed, message", [
    ("989", "FLOP/s '989' has no unit: write 989TFLOPS (10^12 per second)"),
    ("989TB", "FLOP/s '989TB' has an unknown unit 'TB': use GFLOPS, TFLOPS or PFLOPS"),
    ("-1TFLOPS", "FLOP/s '-1TFLOPS' is not understood: use a number with a unit such as 989.4TFLOPS or 2.25PFLOPS"),
    ("0TFLOPS", "FLOP/s '0TFLOPS' must be greater than zero"),
    ("0.5FLOPS", "FLOP/s '0.5FLOPS' is not a whole number of FLOP/s"),
    ("10000PFLOPS", "FLOP/s '10000PFLOPS' is too large (at most 2^63 - 1 FLOP/s)"),  # 10^19 > 2^63 ~ 9.2 x 10^18
    (True, "FLOP/s True is not a number of FLOP/s"),
])
def test_parse_flops_refuses(typed, message):
    with pytest.raises(UnitError, match=_exactly(message)):
        parse_flops(typed)


@pytest.mark.parametrize("typed", ["0", "0GiB", "0.0 GB", "+0B", ".0 MiB"])
def test_a_zero_size_reads_with_or_without_its_unit(typed):
    """--activation-memory 0GiB is 0 bytes, as 0 is (parse_size refuses a zero size, which every other size option
    means as a mistake: a 0 GiB GPU)."""
    from kvreg.app.values import read_option
    from kvreg.figures.inputs import INPUTS

    assert read_option(INPUTS["activation_bytes"], typed, "--activation-memory") == 0


@pytest.mark.parametrize("typed, message", [
    ("0xyz", "--activation-memory: size '0xyz' has an unknown unit 'xyz'"),
    ("GiB", "--activation-memory: size 'GiB' is not understood"),
    ("-0GiB", "--activation-memory '-0GiB' is negative: give a size such as 2GiB (or 0)"),
])
def test_a_size_option_that_is_not_a_size_is_refused(typed, message):
    from kvreg.app.values import read_option
    from kvreg.core.errors import KvregError
    from kvreg.figures.inputs import INPUTS

    with pytest.raises(KvregError, match=re.escape(message)):
        read_option(INPUTS["activation_bytes"], typed, "--activation-memory")
