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
import math
import os
import re
import stat
import sys
import tomllib

from kvreg.core.errors import KvregError

MB = 1_000_000
MAX_TOML_BYTES = 16 * MB  # `kvreg apply` files: a 10,024-model export is 7.5 MB
MAX_CSV_BYTES = 64 * MB  # demand and fleet CSV: a row is ~40 bytes, so a 1,000,000-row file (bulk.MAX_ROWS) fits
MAX_DATA_JSON_BYTES = 256 * MB  # a previous report's data.json: 10,012 plans write 48.5 MB
MAX_CONFIG_BYTES = 10 * MB  # a model's config.json (and a JSON beside it): real ones are a few KB
# A safetensors index lists every tensor: ~9 MB for a 1T-param MoE. A 20 MB one (261,052 tensors)
# imports with a 155 MB peak (a 97 MB one took 1.4 GB).
MAX_INDEX_BYTES = 20 * MB
MAX_SAFETENSORS_HEADER_BYTES = 100 * MB  # the safetensors format's own limit on its JSON header
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


def regular_file(path, limit: int, noun: str, not_regular: str, too_big: str) -> str:
    """The path as messages show it, once it is a regular file of at most `limit` bytes: a folder,
    pipe, device or socket is refused before it is opened (nothing can block on it or stream without
    end), as is a file too big for `noun`; `not_regular` and `too_big` say what to do instead."""
    where = show_path(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot read {where}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a pipe, device or socket)"
        raise InputError(f"cannot read {where}: it is {kind}; {not_regular}")
    if st.st_size > limit:
        raise InputError(f"{where} is {st.st_size / MB:,.1f} MB: larger than {limit // MB} MB, too big for {noun}; "
                         f"{too_big}")
    return where


def read_input(path: str, limit: int, what: str) -> bytes:
    """The bytes of `path` (`-`: stdin), at most `limit`; anything else is a one-line InputError.

    A path that is not a regular file (a FIFO, a device, a folder) is refused before it is
    opened, so nothing can block on it or stream from it without end."""
    if path == "-":
        data = sys.stdin.buffer.read(limit + 1)
        where = "stdin"
    else:
        where = regular_file(path, limit, f"a {what}", f"give a {what} file, or - and pipe it to stdin", "split it")
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
    except tomllib.TOMLDecodeError:
        raise
    except ValueError:  # an integer of more than 4,300 digits, which Python will not convert
        raise InputError(f"{where}: holds a number thousands of digits long, not a {what}") from None
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


# --------------------------------------------------------------------------- workbooks (kvreg apply WORKBOOK.xlsx)
#
# A workbook is a zip of XML parts that openpyxl inflates and parses. Before it does, and before
# the registry is opened, `check_workbook` reads the zip's directory and streams every XML part
# once: a part declaring a DOCTYPE or an ENTITY (billion laughs, external entities) is refused,
# and so is anything past the limits below. Measured on a 1,006-plan registry's workbook (bench/synth.py):
# 9.0 MB on disk, 60.6 MB inflated, 431,000 cells, its longest sheet 3,536 rows (kvreg state), its widest
# 221 columns (Plan detail); a 10,006-plan one has about ten times the rows and cells.

MAX_XLSX_BYTES = 128 * MB  # the file as it lies on disk
MAX_XLSX_INFLATED_BYTES = 1024 * MB  # all its parts inflated
MAX_XLSX_PARTS = 10_000  # zip members
# openpyxl streams the sheets but holds the shared strings in memory (a few times their size):
# kvreg writes none (inline strings); LibreOffice's copy of the seeded workbook has 81 KB.
MAX_XLSX_SHARED_STRINGS_BYTES = 64 * MB
MAX_XLSX_ROWS = 200_000  # the last row any sheet reaches
MAX_XLSX_COLUMNS = 1_024  # the last column any sheet reaches
MAX_XLSX_CELLS = 10_000_000  # cells in all sheets together
_XML_DECLS = re.compile(rb"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)
_CELL_REF = re.compile(r"^([A-Za-z]{1,3})([0-9]+)$")
_XLSX_CHUNK = 1 << 20


def _column_number(letters: str) -> int:
    n = 0
    for ch in letters.upper():
        n = n * 26 + ord(ch) - 64
    return n


def _workbook_sheet_names(zf) -> dict[str, str]:
    """Zip member -> sheet name, from xl/workbook.xml and its relationships (already screened)."""
    import xml.etree.ElementTree as ET  # lazy: only a workbook read back needs it

    rel_ns = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
    try:
        targets = {r.get("Id"): r.get("Target", "") for r in ET.fromstring(zf.read("xl/_rels/workbook.xml.rels"))}
        sheets = [(s.get("name"), s.get(rel_ns)) for s in ET.fromstring(zf.read("xl/workbook.xml")).iter()
                  if s.tag.endswith("}sheet")]
    except (KeyError, ET.ParseError):
        return {}
    out = {}
    for name, rid in sheets:
        target = targets.get(rid, "")
        member = target.lstrip("/") if target.startswith("/") else "xl/" + target
        out[member] = name
    return out


def check_workbook(path) -> None:
    """Refuse, in one line, a workbook that could hang kvreg, exhaust its memory or make the XML
    parser fetch or expand entities: not a regular file, larger than MAX_XLSX_BYTES, more than
    MAX_XLSX_INFLATED_BYTES inflated, a DOCTYPE or ENTITY in any XML part, a sheet reaching past
    MAX_XLSX_ROWS rows or MAX_XLSX_COLUMNS columns, more than MAX_XLSX_CELLS cells, or a number cell
    that is not a finite number (NaN, inf: openpyxl would stop with a traceback). A sheet's declared
    dimension (`A1:XFD1048576`) is not trusted: the cells are counted.

    Not a zip at all is left to the caller (openpyxl says so)."""
    import xml.etree.ElementTree as ET  # lazy: only a workbook read back needs it
    import zipfile  # lazy: as above

    fix = "give the capacity.xlsx kvreg report wrote"
    where = regular_file(path, MAX_XLSX_BYTES, "a capacity workbook", fix, fix)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    with zf:
        members = zf.infolist()
        if len(members) > MAX_XLSX_PARTS:
            raise InputError(f"{where} holds {len(members):,} parts: more than {MAX_XLSX_PARTS:,}, not a capacity "
                             "workbook; give the capacity.xlsx kvreg report wrote")
        inflated = sum(m.file_size for m in members)
        if inflated > MAX_XLSX_INFLATED_BYTES:
            raise InputError(f"{where} inflates to {inflated / MB:,.0f} MB: more than {MAX_XLSX_INFLATED_BYTES // MB} MB"
                             ", too big for a capacity workbook; give the capacity.xlsx kvreg report wrote")
        strings = sum(m.file_size for m in members if m.filename.lower() == "xl/sharedstrings.xml")
        if strings > MAX_XLSX_SHARED_STRINGS_BYTES:
            raise InputError(f"{where}: its shared strings inflate to {strings / MB:,.0f} MB: more than "
                             f"{MAX_XLSX_SHARED_STRINGS_BYTES // MB} MB, too big for a capacity workbook; give the "
                             "capacity.xlsx kvreg report wrote")
        xml_parts = [m for m in members if m.filename.endswith((".xml", ".rels", ".vml")) and not m.is_dir()]
        for m in xml_parts:  # every part first: the sheet names come from two of them
            _screen_part(zf, m, where)
        names = _workbook_sheet_names(zf)
        cells = 0
        for m in xml_parts:
            if m.filename.startswith("xl/worksheets/") and m.filename.count("/") == 2:
                cells = _count_sheet(zf, m, names.get(m.filename, m.filename), where, cells, ET)


def _screen_part(zf, member, where: str) -> None:
    import zipfile  # lazy: only a workbook read back needs it

    tail = b""
    try:
        with zf.open(member) as fh:
            first = True
            while chunk := fh.read(_XLSX_CHUNK):
                if first and (chunk[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in chunk[:4]):
                    raise InputError(f"{where}: part {member.filename} is not UTF-8 XML, not a capacity workbook; "
                                     "give the capacity.xlsx kvreg report wrote")
                first = False
                if _XML_DECLS.search(tail + chunk):
                    raise InputError(f"{where}: part {member.filename} declares a DOCTYPE or ENTITY, which no "
                                     "spreadsheet writes (an entity expansion or external-file attack); give the "
                                     "capacity.xlsx kvreg report wrote, saved from Excel or LibreOffice")
                tail = chunk[-16:]
    except InputError:
        raise  # already the one line to print (a KvregError is a ValueError too)
    except (OSError, EOFError, ValueError, NotImplementedError, zipfile.BadZipFile) as exc:
        raise InputError(f"{where} is a damaged zip ({member.filename}: {' '.join(str(exc).split())}): give the "
                         "capacity.xlsx kvreg report wrote") from None


def _count_sheet(zf, member, sheet: str, where: str, cells: int, ET) -> int:
    """Stream one worksheet: the last row and column its cells reach, the cells so far, and every
    number cell's value finite. Returns the running count of cells."""
    parser = ET.XMLPullParser(events=("end",))
    row, col = 0, 0

    def refuse(what: str, fix: str):
        raise InputError(f"{where}: sheet {sheet} {what}; {fix}")

    with zf.open(member) as fh:
        while chunk := fh.read(_XLSX_CHUNK):
            try:
                parser.feed(chunk)
                events = list(parser.read_events())
            except ET.ParseError as exc:
                refuse(f"is not well-formed XML ({exc})", "give the capacity.xlsx kvreg report wrote")
            for _event, el in events:
                tag = el.tag.rpartition("}")[2]
                if tag == "row":
                    r = el.get("r")
                    row = int(r) if r and r.isdigit() else row + 1
                    if row > MAX_XLSX_ROWS:
                        refuse(f"reaches row {row:,}: more than {MAX_XLSX_ROWS:,}",
                               "delete the rows below the data, or give the capacity.xlsx kvreg report wrote")
                    col = 0
                    el.clear()
                elif tag == "c":
                    cells += 1
                    ref = el.get("r") or ""
                    m = _CELL_REF.match(ref)
                    col = _column_number(m.group(1)) if m else col + 1
                    if m and int(m.group(2)) > MAX_XLSX_ROWS:
                        refuse(f"reaches row {int(m.group(2)):,} (cell {ref}): more than {MAX_XLSX_ROWS:,}",
                               "delete the rows below the data, or give the capacity.xlsx kvreg report wrote")
                    if col > MAX_XLSX_COLUMNS:
                        refuse(f"reaches column {col:,} (cell {ref or '?'}): more than {MAX_XLSX_COLUMNS:,}",
                               "delete the columns right of the data")
                    if cells > MAX_XLSX_CELLS:
                        refuse(f"brings the workbook past {MAX_XLSX_CELLS:,} cells",
                               "give the capacity.xlsx kvreg report wrote")
                    if el.get("t", "n") == "n":
                        v = next((x.text for x in el if x.tag.rpartition("}")[2] == "v"), None)
                        if v is not None and v.strip():
                            try:
                                ok = math.isfinite(float(v))
                            except ValueError:
                                ok = False
                            if not ok:
                                refuse(f"cell {ref or '?'} holds {v.strip()[:20]!r}, not a finite number",
                                       f"type a number in {sheet}!{ref or '?'} (or clear it) and save again")
    try:
        parser.close()
    except ET.ParseError as exc:
        refuse(f"is not well-formed XML ({exc})", "give the capacity.xlsx kvreg report wrote")
    return cells
