"""The text a PDF prints and the size it prints it at, page by page, for tests.

Enough of a PDF reader for what LibreOffice writes when it exports a spreadsheet: objects in
plain `N 0 obj ... endobj` form (no object streams), page content streams Flate-compressed, text
shown with Tj/TJ in fonts carrying a ToUnicode map. The printed size of a run of text is its font
size (Tf) scaled by the text matrix (Tm) and the current transformation (cm), so a sheet
LibreOffice shrinks to fit a page shows the size a reader sees on paper, in points.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

_OBJ = re.compile(rb"(\d+) 0 obj\s*(.*?)endobj", re.S)
_TOKEN = re.compile(rb"""
    (?P<hex><[0-9A-Fa-f\s]*>)
  | (?P<str>\((?:\\.|[^\\()]|\((?:\\.|[^\\()])*\))*\))
  | (?P<open>\[) | (?P<close>\])
  | (?P<dict><<.*?>>)
  | (?P<num>[+-]?(?:\d+\.?\d*|\.\d+))
  | (?P<name>/[^\s/\[\]()<>{}%]*)
  | (?P<op>[A-Za-z'"*]+)
""", re.S | re.X)


@dataclass
class Run:
    """A run of text as printed: its characters and size in points."""

    text: str
    size: float


@dataclass
class Page:
    width: float
    height: float
    runs: list[Run] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(r.text for r in self.runs)

    @property
    def smallest(self) -> float:
        """The smallest size any visible character on the page is printed at (inf: no text)."""
        return min((r.size for r in self.runs if r.text.strip()), default=math.inf)


def read_pages(path: Path) -> list[Page]:
    """Each page of the PDF at `path`, in order, with the text runs it prints."""
    pdf = Path(path).read_bytes()
    objs = {int(m.group(1)): m.group(2) for m in _OBJ.finditer(pdf)}
    catalog = next(b for b in objs.values() if re.search(rb"/Type\s*/Catalog", b))
    return list(_walk(objs, _ref(catalog, b"Pages"), {}))


def _ref(body: bytes, key: bytes) -> int:
    return int(re.search(rb"/" + key + rb"\s*(\d+) 0 R", body).group(1))


def _stream(body: bytes) -> bytes:
    raw = re.search(rb"stream\r?\n(.*)\r?\nendstream", body, re.S).group(1)
    return zlib.decompress(raw) if b"FlateDecode" in body.split(b"stream", 1)[0] else raw


def _walk(objs: dict, num: int, inherited: dict):
    body = objs[num]
    kids = re.search(rb"/Kids\s*\[([^\]]*)\]", body)
    if kids:
        for kid in re.findall(rb"(\d+) 0 R", kids.group(1)):
            yield from _walk(objs, int(kid), inherited)
        return
    box = [float(x) for x in re.search(rb"/MediaBox\s*\[([^\]]*)\]", body).group(1).split()]
    page = Page(box[2] - box[0], box[3] - box[1])
    res = objs[_ref(body, b"Resources")] if re.search(rb"/Resources\s*\d+ 0 R", body) else body
    fonts = {}
    fdict = re.search(rb"/Font\s*(\d+) 0 R", res)
    fbody = objs[int(fdict.group(1))] if fdict else (re.search(rb"/Font\s*<<(.*?)>>", res, re.S) or [b"", b""])[1]
    for name, ref in re.findall(rb"/([^\s/]+)\s*(\d+) 0 R", fbody):
        fonts[name.decode()] = _cmap(objs, objs[int(ref)])
    contents = re.search(rb"/Contents\s*(?:\[([^\]]*)\]|(\d+) 0 R)", body)
    refs = re.findall(rb"(\d+) 0 R", contents.group(1)) if contents.group(1) else [contents.group(2)]
    _run(b"\n".join(_stream(objs[int(r)]) for r in refs), fonts, page)
    yield page


def _cmap(objs: dict, font: bytes) -> tuple[int, dict[int, str]]:
    """A font's (code width in bytes, code -> text) from its ToUnicode map (empty: none)."""
    m = re.search(rb"/ToUnicode\s*(\d+) 0 R", font)
    if not m:
        return 1, {}
    cmap = _stream(objs[int(m.group(1))])
    out: dict[int, str] = {}
    width = 1
    for block in re.findall(rb"beginbfchar(.*?)endbfchar", cmap, re.S):
        for src, dst in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block):
            width = max(width, len(src) // 2)
            out[int(src, 16)] = bytes.fromhex(dst.decode()).decode("utf-16-be", "replace")
    for block in re.findall(rb"beginbfrange(.*?)endbfrange", cmap, re.S):
        for lo, hi, dst in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block):
            width = max(width, len(lo) // 2)
            start = int(dst, 16)
            for i, code in enumerate(range(int(lo, 16), int(hi, 16) + 1)):
                out[code] = chr(start + i)
    return width, out


def _decode(raw: bytes, font: tuple[int, dict[int, str]]) -> str:
    width, table = font
    codes = [int.from_bytes(raw[i:i + width], "big") for i in range(0, len(raw) - width + 1, width)]
    return "".join(table.get(c, chr(c) if not table else "?") for c in codes)


def _string(tok: re.Match) -> bytes:
    if tok.group("hex"):
        return bytes.fromhex(re.sub(rb"\s", b"", tok.group("hex")[1:-1]).decode() + "")
    s = tok.group("str")[1:-1]
    return re.sub(rb"\\([nrtbf()\\]|[0-7]{1,3})", lambda m: _escape(m.group(1)), s)


def _escape(e: bytes) -> bytes:
    if e[:1].isdigit():
        return bytes([int(e, 8) & 255])
    return {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}.get(e, e)


def _scale(m: list[float]) -> float:
    """How much a matrix [a b c d e f] scales a glyph's height."""
    return math.sqrt(abs(m[0] * m[3] - m[1] * m[2]))


def _run(content: bytes, fonts: dict, page: Page) -> None:
    ctm, stack = 1.0, []
    font, size, tm = None, 0.0, 1.0
    operands: list = []
    array: list | None = None
    for tok in _TOKEN.finditer(content):
        kind = tok.lastgroup
        if kind == "open":
            array = []
        elif kind == "close":
            operands.append(array)
            array = None
        elif kind in ("hex", "str"):
            (array if array is not None else operands).append(_string(tok))
        elif kind == "num":
            (array if array is not None else operands).append(float(tok.group()))
        elif kind == "name":
            operands.append(tok.group()[1:].decode())
        elif kind == "dict":
            continue
        else:
            op = tok.group().decode()
            if op == "q":
                stack.append(ctm)
            elif op == "Q":
                ctm = stack.pop() if stack else 1.0
            elif op == "cm" and len(operands) >= 6:
                ctm *= _scale(operands[-6:])
            elif op == "BT":
                tm = 1.0
            elif op == "Tm" and len(operands) >= 6:
                tm = _scale(operands[-6:])
            elif op == "Tf" and len(operands) >= 2:
                font, size = operands[-2], operands[-1]
            elif op in ("Tj", "'", '"', "TJ") and operands:
                last = operands[-1]
                parts = last if isinstance(last, list) else [last]
                text = "".join(_decode(p, fonts.get(font, (1, {}))) for p in parts if isinstance(p, bytes))
                page.runs.append(Run(text, size * tm * ctm))
            operands = []
