"""The workbook's building blocks: cell styles, number formats, cell references, sheet tables.

Nothing here computes a figure. Figures reach a cell only as a formula compiled from
`kvreg.figures.declarations` (by kvreg.figures.excel, which also decides how NULLs travel
through it); this module decides how the formulas refer to cells and how the cells look.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from xlsxwriter.utility import xl_cell_to_rowcol, xl_col_to_name

from kvreg.figures.declarations import FIGURES, INPUTS
from kvreg.figures.excel import ExcelCompiler
from kvreg.figures.expr import names as read_names
from kvreg.figures.labels import label

# Where row numbers go in a formula template; replaced per row (compiling once per column keeps
# building a large sheet fast).
ROW = "\x00"
ROTATED_HEADER_HEIGHT = 140  # points: a rotated header of up to about 25 characters a line
HEADER_ROW = 2  # row 1 holds the units, row 2 the names (the filter row), data from row 3
FIRST_ROW = 3
# Lookup ranges reach this far so rows finance adds below a table are still found.
LOOKUP_LAST_ROW = 1000

INPUT_FILL = "FFF2CC"  # light yellow: a value you may change
LOOKUP_FILL = "DDEBF7"  # light blue: a formula that fetches an input from another sheet
FIGURE_FILL = None  # no fill: a figure, a formula compiled from the declarations
NOT_FIT_FILL = "FFC7CE"  # light red: a plan that does not fit

ROLES = {"input": INPUT_FILL, "lookup": LOOKUP_FILL, "helper": LOOKUP_FILL, "figure": FIGURE_FILL}
BORDER_COLOR = "#BFBFBF"


def get_column_letter(index: int) -> str:
    """1 -> A, 27 -> AA."""
    return xl_col_to_name(index - 1)


# --------------------------------------------------------------------------- units -> formats


def number_format(unit: str, kind: str = "int", name: str = "") -> str:
    """A number format that shows the unit (the cell keeps the plain number)."""
    if kind == "text" or unit in ("text", "name"):
        return "@"
    if kind == "flag" or unit == "flag":
        return "0"
    if unit == "bytes":
        # A dtype's size has fractions (nvfp4: 0.5625 B); byte totals show whole bytes.
        return '0.0### "B"' if name.endswith(("_per_element", "_per_param")) else '#,##0 "B"'
    if unit == "bytes/s":
        return '#,##0 "B/s"'
    if unit == "GiB":
        return '0.00 "GiB"'
    if unit == "GB":
        return '0.00 "GB"'
    if unit == "USD":
        return '$#,##0'
    if unit == "USD/h":
        return '$#,##0.00'
    if unit == "fraction":
        return "0.0%"
    if unit == "tokens/s":
        return "#,##0.0"
    if kind == "real":
        return "#,##0.00"
    return "#,##0"


# --------------------------------------------------------------------------- formulas


def figure_template(name: str, cell_of: Callable[[str], str]) -> str:
    """A figure's formula for one row, with ROW where the row number goes.

    `cell_of(name)` gives the column letter holding an input or figure in the same row."""
    resolve = lambda n: f"{cell_of(n)}{ROW}"  # noqa: E731 - every name is a cell in the same row
    return "=" + ExcelCompiler(resolve, resolve, null_safe=True).compile(FIGURES[name].expr)


def figure_references(names: Iterable[str]) -> list[str]:
    """Input and figure names these figures refer to directly, in first-seen order."""
    out: list[str] = []
    for name in names:
        out += [n for n in read_names(FIGURES[name].expr) if n not in out]
    return out


# --------------------------------------------------------------------------- references


def sheet_ref(sheet: str) -> str:
    return f"'{sheet}'" if re.search(r"[^A-Za-z0-9_]", sheet) else sheet


def column_range(sheet: str, letter: str, last: int) -> str:
    """An absolute range over a table column's data rows (row 3 to `last`)."""
    return f"{sheet_ref(sheet)}!${letter}${FIRST_ROW}:${letter}${last}"


def literal_key(ref: str) -> str:
    """A cell's text made literal for MATCH and SUMIFS: *, ? and ~ are wildcards in both
    Excel and LibreOffice, so a model named ``Llama*`` would otherwise match another model."""
    return f'SUBSTITUTE(SUBSTITUTE(SUBSTITUTE({ref},"~","~~"),"*","~*"),"?","~?")'


def match_formula(key_ref: str, table: "Table", name: str) -> str:
    """The row (within the data range) of the exact name in another table's key column."""
    return f"MATCH({literal_key(key_ref)},{table.range(name)},0)"


def index_formula(table: "Table", name: str, row_ref: str, nullable: bool) -> str:
    """Fetch a value by row; a blank source stays blank (INDEX alone would turn it into 0)."""
    idx = f"INDEX({table.range(name)},{row_ref})"
    return f'IF({idx}="","",{idx})' if nullable else idx


# --------------------------------------------------------------------------- tables


@dataclass
class Column:
    """One column of a sheet table.

    role: input (a plain value finance may edit), lookup (a formula fetching an input from
    another sheet), helper (a row number for lookups), figure (a compiled declaration).
    For inputs `value(row)` gives the cell's value; for the others `formula` is a template and
    `value(row)` the result stored with it (read from the views), so a reader that does not
    recalculate still shows the figure. `value` defaults to the row's entry of the same name."""

    name: str
    role: str
    unit: str = ""
    kind: str = "int"
    meaning: str = ""
    value: Callable[[dict], Any] | None = None
    formula: str | None = None
    validation: tuple[str, str] | None = None  # (list range, what it lists) for data validation
    # stop: only listed values; warning: a value not listed is asked about, then kept (a new quarter)
    validation_style: str = "stop"
    width: float | None = None
    letter: str = ""
    label: str | None = None  # the header in words; default: kvreg.figures.labels.label(name, unit)
    hidden: bool = False
    number_format: str | None = None  # default: number_format(unit, kind, name)
    wrap: bool | None = None  # long text wraps in the column; default: text columns 30 or more wide

    @property
    def header(self) -> str:
        return self.label or label(self.name, self.unit)

    @property
    def is_text(self) -> bool:
        return self.kind == "text"


def input_column(name: str, key: str | None = None, **kw) -> Column:
    """An input column described by its declaration (or given unit/kind for non-figure inputs)."""
    decl = INPUTS.get(name)
    key = key or name
    kw.setdefault("unit", decl.unit if decl else "text")
    kw.setdefault("kind", decl.kind if decl else "text")
    kw.setdefault("meaning", decl.meaning if decl else "")
    return Column(name, "input", value=lambda r, k=key: r.get(k), **kw)


def figure_column(name: str, cell_of: Callable[[str], str]) -> Column:
    f = FIGURES[name]
    return Column(name, "figure", f.unit, f.kind, f.meaning, formula=figure_template(name, cell_of))




def text_value(value: Any) -> str | None:
    """User text as it will be stored: control characters XML cannot hold become '?' (and a cell
    holds at most 32,767 characters)."""
    if value is None or value == "":
        return None
    return _ILLEGAL.sub("?", str(value))[:_MAX_TEXT]


_ILLEGAL = re.compile(r"[\000-\010\013\014\016-\037]")
_MAX_TEXT = 32767


def result_value(value: Any) -> Any:
    """A view's value as a formula's stored result: NULL is an empty text, a flag a number."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        return text_value(value) or ""
    return float(value)  # Decimal from PostgreSQL


# --------------------------------------------------------------------------- the book
#
# The workbook is written with XlsxWriter in constant_memory mode: each sheet streams its rows to
# a temporary file as they are written, so memory does not grow with the registry, and a formula
# takes its stored result along (openpyxl's public API cannot store one; docs/workbook.md).
# Rows of a sheet must be written in order; sheets may be filled in any order.


# Functions XlsxWriter never renames: it runs 29 regular expressions over every formula to prefix
# Excel 365's dynamic-array functions with _xlfn., a third of a workbook's writing time; a formula
# that calls only these (and holds no "INGLE(", which one of them matches loosely) skips them.
_PLAIN_FUNCTIONS = frozenset({
    "AND", "COUNTIFS", "FIXED", "IF", "INDEX", "INT", "ISNUMBER", "LEFT", "MATCH", "MAX", "MIN", "MOD",
    "OR", "RIGHT", "ROUND", "SEARCH", "SUBSTITUTE", "SUM", "SUMIFS", "SUMPRODUCT",
})
_CALLED = re.compile(r"([A-Z][A-Z0-9._]*)\(")
_worksheet_class_made = None


def _worksheet_class():
    """XlsxWriter's Worksheet, skipping the renaming pass for formulas of _PLAIN_FUNCTIONS only
    (what the pass would leave unchanged)."""
    global _worksheet_class_made
    if _worksheet_class_made is None:
        from xlsxwriter.worksheet import Worksheet  # lazy: as Book imports xlsxwriter (only when a workbook is written)

        class PlainFormulaWorksheet(Worksheet):
            def _prepare_formula(self, formula, expand_future_functions=False):
                if (not formula.startswith("{") and not formula.endswith("}") and not self.use_future_functions
                        and "INGLE(" not in formula and _PLAIN_FUNCTIONS.issuperset(_CALLED.findall(formula))):
                    return formula[1:] if formula.startswith("=") else formula
                return super()._prepare_formula(formula, expand_future_functions)

        _worksheet_class_made = PlainFormulaWorksheet
    return _worksheet_class_made


class Book:
    """An XlsxWriter workbook with kvreg's cell formats and page setup."""

    def __init__(self, path: str, quarter: str):
        # lazy: XlsxWriter loads only when a workbook is written (kvreg apply reads this module's layout without it)
        import xlsxwriter

        self.wb = xlsxwriter.Workbook(path, {
            "constant_memory": True,
            # User text is text: never turned into a formula, a number or a link.
            "strings_to_formulas": False, "strings_to_numbers": False, "strings_to_urls": False,
        })
        self.quarter = quarter
        self._formats: dict[tuple, Any] = {}

    def fmt(self, **props):
        key = tuple(sorted(props.items()))
        f = self._formats.get(key)
        if f is None:
            f = self._formats[key] = self.wb.add_format(props)
        return f

    def cell(self, role: str | None, num_format: str = "General", **extra):
        """The format of a cell in a role (input, lookup, helper, figure): fill and border."""
        props = {"num_format": num_format, **extra}
        if role:
            props.update(border=1, border_color=BORDER_COLOR)
            if ROLES[role]:
                props["bg_color"] = "#" + ROLES[role]
        return self.fmt(**props)

    def header(self, role: str | None, rotated: bool = False):
        """A header cell's format; `rotated`: read bottom to top, so narrow columns of numbers keep
        whole words in their headers."""
        props = {"bold": True, "text_wrap": True, "valign": "top", "bottom": 1}
        if rotated:
            props.update(rotation=90, valign="bottom", align="center")
        if role and ROLES[role]:
            props["bg_color"] = "#" + ROLES[role]
        return self.fmt(**props)

    def sheet(self, title: str, *, tab_color: str | None = None):
        ws = self.wb.add_worksheet(title, worksheet_class=_worksheet_class())
        ws.set_landscape()
        ws.set_paper(9)  # A4
        ws.fit_to_pages(1, 0)  # one page wide, as many long as it takes
        ws.set_margins(left=0.25, right=0.25, top=0.6, bottom=0.6)
        q = self.quarter
        # 11 pt, as the cells: a printed sheet is shrunk to fit its page width by at most 0.73, so no
        # printed text is smaller than 8 pt (docs/workbook.md, Printing).
        ws.set_header(f"&L&11kvreg capacity workbook, quarter {q}&C&11&A&R&11Quarter {q}")
        ws.set_footer("&L&11&F&R&11Page &P of &N")
        if tab_color:
            ws.set_tab_color(tab_color)
        return ws


def leave_out_of_print(ws, row: int, col: int) -> None:
    """Print nothing of this sheet: its print area is one cell left empty (row, col; 0-based), and no
    rows or columns repeat. LibreOffice and Excel skip a page with nothing on it; the Read me sheet
    says which sheets are not printed and why."""
    ws.print_area(row, col, row, col)
    ws.set_header("")
    ws.set_footer("")


class Grid:
    """The cells of a small free-form sheet, put in any order (`put(row, col, ...)`, 1-based) and
    written in row order by `flush` (constant_memory needs rows in order)."""

    def __init__(self, book: Book, ws):
        self.book, self.ws = book, ws
        self.cells: dict[tuple[int, int], tuple] = {}
        self.merges: dict[tuple[int, int], int] = {}

    def put(self, row: int, col: int, value: Any = None, fmt=None, *, result: Any = None,
            merge_to: int | None = None) -> None:
        """A value (text is stored as text), or a formula (a str starting with '=' given with
        `result`, its stored value); `merge_to`: the cell spans the row's columns up to that one."""
        self.cells[(row, col)] = (value, fmt, result)
        if merge_to:
            self.merges[(row, col)] = merge_to

    def text(self, row: int, col: int, value: Any, fmt=None) -> None:
        self.cells[(row, col)] = (text_value(value) or "", fmt, _TEXT)

    def flush(self) -> None:
        ws = self.ws
        for (r, c) in sorted(self.cells):
            value, fmt, result = self.cells[(r, c)]
            if (r, c) in self.merges:
                ws.merge_range(r - 1, c - 1, r - 1, self.merges[(r, c)] - 1, "", fmt)
            if result is _TEXT:
                if value:
                    ws.write_string(r - 1, c - 1, value, fmt)
                else:
                    ws.write_blank(r - 1, c - 1, None, fmt)
            elif isinstance(value, str) and value.startswith("="):
                ws.write_formula(r - 1, c - 1, value, fmt, result_value(result))
            elif isinstance(value, str):
                ws.write_string(r - 1, c - 1, text_value(value) or "", fmt)
            elif value is None:
                ws.write_blank(r - 1, c - 1, None, fmt)
            else:
                ws.write_number(r - 1, c - 1, value, fmt)
        self.cells, self.merges = {}, {}


_TEXT = object()


# --------------------------------------------------------------------------- tables


class Table:
    """A sheet laid out as a table: headers in words with units in row 1, the names in row 2
    (hidden: formulas, readers and `kvreg apply` find columns by them), data below. Row 1 stays
    in view and prints on every page, with the first column."""

    def __init__(self, sheet: str, columns: list[Column] | None = None, rotated_headers: bool = False):
        self.sheet = sheet
        self.rotated_headers = rotated_headers  # all but the first column's (see Book.header)
        self.rows: list[dict] = []
        self.written = False
        self.columns: list[Column] = []
        for c in columns or []:
            self.add(c)

    def add(self, col: Column) -> str:
        col.letter = get_column_letter(len(self.columns) + 1)
        self.columns.append(col)
        return col.letter

    def letter(self, name: str) -> str:
        """The first column with this name."""
        for c in self.columns:
            if c.name == name:
                return c.letter
        raise KeyError(f"{self.sheet} has no column {name}")

    def range(self, name: str) -> str:
        """A column for lookups and sums: the written rows and room below for rows finance adds
        (down to row 1000, or as many rows again as the table has when that is further)."""
        assert self.written, f"{self.sheet} is referred to before it is written"
        return column_range(self.sheet, self.letter(name), self.lookup_last_row)

    @property
    def lookup_last_row(self) -> int:
        return max(LOOKUP_LAST_ROW, FIRST_ROW + 2 * len(self.rows))

    def list_range(self, name: str) -> str:
        """A column's written rows only: the source of a drop-down list (no blank entries)."""
        assert self.written, f"{self.sheet} is referred to before it is written"
        return column_range(self.sheet, self.letter(name), FIRST_ROW + max(len(self.rows), 1) - 1)

    def write(self, book: Book, ws, rows: list[dict], freeze_after: str = "A", print_titles: bool = True) -> int:
        """Write headers and rows to `ws`; returns the last data row (HEADER_ROW when there are none).

        Per row the work is one call per cell: a column's format is built once, a figure's formula
        is its template with the row number put in, and its stored result is the row's value."""
        self.rows, self.written = rows, True
        last = HEADER_ROW + len(rows)
        self._layout(book, ws, rows, last, freeze_after, print_titles)
        plan, wrapped = [], []
        for j, c in enumerate(self.columns):
            get = c.value or (lambda row, n=c.name: row.get(n))
            if c.is_text:
                num = "@" if c.role == "input" else "General"  # a formula's text result keeps General
            else:
                num = c.number_format or number_format(c.unit, c.kind, c.name)
            # Long text wraps in its column instead of running over the next ones.
            wraps = c.wrap if c.wrap is not None else c.is_text and (c.width or 0) >= 30
            if wraps:
                wrapped.append((get, c.width))
            fmt = book.cell(c.role, num, **({"text_wrap": True, "valign": "top"} if wraps else {}))
            kind = "f" if c.role != "input" else ("s" if c.is_text else "n")
            plan.append((j, kind, fmt, get, c.formula))
        write_formula, write_string = ws.write_formula, ws.write_string
        write_number, write_blank = ws.write_number, ws.write_blank
        for i, row in enumerate(rows, start=FIRST_ROW - 1):
            n = str(i + 1)
            if wrapped:  # a row as tall as its longest wrapped text, so it does not run into the next
                lines = max(_lines(str(get(row) or ""), width) for get, width in wrapped)
                if lines > 1:
                    ws.set_row(i, 15 * min(lines, 10))
            for j, kind, fmt, get, template in plan:
                v = get(row)
                if kind == "f":
                    # The template is compiled from the declarations: no user text in it.
                    write_formula(i, j, template.replace(ROW, n), fmt, result_value(v))
                elif v is None or v == "":
                    write_blank(i, j, None, fmt)
                elif kind == "s" or isinstance(v, str):
                    write_string(i, j, text_value(v), fmt)  # never a formula: user text is text
                else:
                    write_number(i, j, v, fmt)
        return last

    def input_state(self) -> tuple[list[str], list[dict]]:
        """The input columns' names and, per written row, their values as the cells hold them (text as
        written, blank as None): what `kvreg apply` compares finance's edits with."""
        inputs = [c for c in self.columns if c.role == "input"]
        rows = []
        for row in self.rows:
            values = {}
            for c in inputs:
                v = (c.value or (lambda r, n=c.name: r.get(n)))(row)
                if v is None or v == "":
                    v = None
                elif c.is_text or isinstance(v, str):
                    v = text_value(v)
                values[c.name] = v
            rows.append(values)
        return [c.name for c in inputs], rows

    def _layout(self, book: Book, ws, rows: list[dict], last: int, freeze_after: str, print_titles: bool) -> None:
        ws.freeze_panes(f"{get_column_letter(_col_index(freeze_after) + 1)}{FIRST_ROW}")
        ws.autofilter(0, 0, max(last, FIRST_ROW) - 1, len(self.columns) - 1)
        if print_titles:
            ws.repeat_rows(0)
            ws.repeat_columns(0, _col_index(freeze_after) - 1)
        lines = 1
        for j, c in enumerate(self.columns):
            width = c.width or _width(c, rows)
            ws.set_column(j, j, width, None, {"hidden": True} if c.hidden or c.role == "helper" else None)
            lines = max(lines, _lines(c.header, width))
            if c.validation:
                source, what = c.validation
                listed = source.startswith('"')  # a literal list rather than a range
                ws.data_validation(FIRST_ROW - 1, j, self.lookup_last_row - 1, j, {
                    "validate": "list", "source": source[1:-1].split(",") if listed else "=" + source,
                    "ignore_blank": True, "error_type": c.validation_style,
                    "error_title": f"Unknown {what}"[:32],
                    "error_message": (f"Pick a {what} from the list" + ("." if listed else
                                      f" (it comes from the {what} table).")
                                      + (" Keep a new one anyway?" if c.validation_style != "stop" else "")),
                })
        ws.set_row(0, ROTATED_HEADER_HEIGHT if self.rotated_headers else 13 * min(lines, 6) + 4)
        ws.set_row(1, None, None, {"hidden": True})
        head, name_fmt = book.header, book.fmt(font_color="#7F7F7F", font_size=8)
        for j, c in enumerate(self.columns):
            ws.write_string(0, j, c.header, head(c.role, rotated=self.rotated_headers and j > 0))
            if c.meaning:
                ws.write_comment(0, j, _comment_text(c), {"x_scale": 2, "y_scale": 1.6})
        for j, c in enumerate(self.columns):
            ws.write_string(1, j, c.name, name_fmt)


def _comment_text(c: Column) -> str:
    role = {"input": "input (you may edit it)", "lookup": "lookup (formula)", "helper": "lookup row (formula)",
            "figure": "figure (formula from the declarations)"}[c.role]
    unit = f"Unit: {c.unit}. " if c.unit and c.unit not in ("text", "name") else ""
    return f"{c.name}: {c.meaning}\n{unit}Role: {role}."


def _col_index(letter: str) -> int:
    return xl_cell_to_rowcol(f"{letter}1")[1] + 1


_DATA_WIDTH = {"bytes": 17, "bytes/s": 19, "USD": 12, "USD/h": 10, "GiB": 11, "GB": 11, "GB/s": 11,
               "params": 16, "fraction": 9}


def _width(c: Column, rows: list[dict]) -> float:
    """Wide enough for the values; the header wraps over up to about four lines."""
    w = float(_DATA_WIDTH.get(c.unit, 10))
    if c.is_text and c.role == "input" and c.value:
        longest = max((len(str(c.value(r) or "")) for r in rows), default=0)
        w = max(w, min(longest + 2, 40))
    header = c.header
    longest_word = max((len(x) for x in header.split()), default=0)
    w = max(w, longest_word + 2, min(len(header) / 4 + 2, 22))
    return min(w, 48.0)


def _lines(text: str, width: float) -> int:
    """Lines a header takes when wrapped at `width` characters."""
    lines, used = 1, 0
    for word in text.split():
        if used and used + 1 + len(word) > width - 1:
            lines, used = lines + 1, len(word)
        else:
            used += (1 if used else 0) + len(word)
    return lines
