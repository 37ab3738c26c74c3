"""Limits on what kvreg reads, so no input can exhaust memory, time or the stack.

Every file kvreg reads goes through `read_input`: regular files only (a FIFO with no writer would
hang, /dev/zero never ends), at most a stated number of bytes (stdin included). Structured
text is checked for depth before it is trusted: TOML through `parse_toml`, JSON through
`parse_json`. The numbers are in docs/reliability.md; tests/test_battery.py feeds each one
something past it.

Stdlib only: the fast path and the CLI import this at start-up.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import tomllib

from kvreg.errors import KvregError

MB = 1_000_000
MAX_TOML_BYTES = 16 * MB  # `kvreg apply` files: a 10,024-model export is 7.5 MB
MAX_DATA_JSON_BYTES = 256 * MB  # a previous report's data.json: 10,012 plans write 48.5 MB
MAX_DEPTH = 32  # nesting of arrays and tables in TOML and JSON; kvreg's own files use at most 6
MAX_KEY_PARTS = 16  # parts of a dotted TOML key (a.b.c is 3); kvreg's files use 1


class InputError(KvregError):
    """Input past a limit, or a file that is not a file; the message says which and what to do."""


def show_path(path) -> str:
    """A path for a message: bytes that are not UTF-8 shown as escapes, never a crash on printing."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return repr(os.fsencode(text))[2:-1]


def read_input(path: str, limit: int, what: str) -> bytes:
    """The bytes of `path` (`-`: stdin), at most `limit`; anything else is a one-line InputError.

    A path that is not a regular file (a FIFO, a device, a folder) is refused before it is
    opened, so nothing can block on it or stream from it without end."""
    if path == "-":
        data = sys.stdin.buffer.read(limit + 1)
        where = "stdin"
    else:
        where = show_path(path)
        try:
            st = os.stat(path)
        except OSError as exc:
            raise InputError(f"cannot read {where}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a pipe, device or socket)"
            raise InputError(f"cannot read {where}: it is {kind}; give a {what} file, or - and pipe it to stdin")
        if st.st_size > limit:
            raise InputError(f"{where} is {st.st_size / MB:,.1f} MB: larger than {limit // MB} MB, too big for a "
                             f"{what}; split it")
        try:
            with open(path, "rb") as fh:
                data = fh.read(limit + 1)
        except OSError as exc:
            raise InputError(f"cannot read {where}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{where}: larger than {limit // MB} MB, too big for a {what}; split it")
    return data


def depth(value, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of lists and dicts (a scalar is 0, [] is 1), counted no further than limit + 1."""
    level, frontier = 0, [value]
    while level <= limit:
        containers = [v for v in frontier if isinstance(v, (list, dict))]
        if not containers:
            break
        level += 1
        frontier = [c for v in containers for c in (v.values() if isinstance(v, dict) else v)]
    return level


def _too_deep(where: str, what: str) -> InputError:
    return InputError(f"{where}: nested more than {MAX_DEPTH} levels deep, not a {what}")


# A key of more than MAX_KEY_PARTS dotted parts: bare or quoted parts joined by dots. tomllib
# takes time and memory that grow with the square of the parts (50,000 parts: over 4 GB).
# Linear in the text: possessive quantifiers never give back what they took (nothing a part gives
# back could be a dot), and a key starts no bare part in the middle of another (a key found from
# there is also found from the run's start). Plain + and no look-behind took time growing with the
# square of a long run of key characters: a 50,000-character note in a file took a minute to check.
_BARE = "[A-Za-z0-9_-]"
_PART = rf"""(?:{_BARE}++|"[^"\n]*+"|'[^'\n]*+')"""
_FIRST_PART = rf"""(?:(?<!{_BARE}){_BARE}++|"[^"\n]*+"|'[^'\n]*+')"""
_LONG_KEY = re.compile(rf"{_FIRST_PART}(?:[ \t]*+\.[ \t]*+{_PART}){{{MAX_KEY_PARTS},}}")


def parse_toml(text: str, where: str, what: str = "kvreg declaration file") -> dict:
    """tomllib.loads with limits on dotted keys and nesting; TOMLDecodeError passes through."""
    if _LONG_KEY.search(text):
        raise InputError(f"{where}: a dotted key has more than {MAX_KEY_PARTS} parts, not a {what}")
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise _too_deep(where, what) from None
    if depth(data) > MAX_DEPTH:
        raise _too_deep(where, what)
    return data


def parse_json(raw: bytes, where: str, what: str):
    """json.loads of UTF-8 bytes with the nesting limit; errors as one-line InputErrors."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{where}: not UTF-8 text, not a {what}") from None
    except RecursionError:
        raise _too_deep(where, what) from None
    except ValueError as exc:
        raise InputError(f"{where}: not valid JSON ({' '.join(str(exc).split())}), not a {what}") from None
    if depth(data) > MAX_DEPTH:
        raise _too_deep(where, what)
    return data
