"""The workbook's building blocks: cell styles, number formats, NULL-safe formulas, sheet tables.

Nothing here computes a figure. Figures reach a cell only as a formula compiled from
`kvreg.figures.declarations`; this module decides how the formulas refer to cells, how
NULLs travel through them and how the cells look.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from xlsxwriter.utility import xl_cell_to_rowcol, xl_col_to_name

from kvreg.figures.declarations import CLASS_MEANS, FIGURES, INPUTS
from kvreg.figures.expr import Const, ExcelCompiler, Expr, Func, Input, Op, Ref
from kvreg.figures.labels import label

# Where row numbers go in a formula template; replaced per row (compiling once per column keeps
# building a large sheet fast).
ROW = "\x00"
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


# --------------------------------------------------------------------------- NULLs


def _input_nullability() -> dict[str, bool]:
    """Which inputs may be NULL, read from the table definitions (the schema is the authority)."""
    from kvreg.db.tables import Dtype, Gpu, Model, Plan

    out = {name: False for name in INPUTS}
    for table in (Model, Gpu, Plan):
        for c in table.__table__.columns:
            if c.name in out:
                out[c.name] = bool(c.nullable)
    out["kv_mla_bytes_per_token_per_layer"] = bool(Dtype.__table__.c.mla_bytes_per_token_per_layer.nullable)
    out["kv_scale_bytes_per_token_per_head"] = bool(Dtype.__table__.c.scale_bytes_per_token_per_head.nullable)
    for m in CLASS_MEANS:  # a plan without workload classes has no mix
        out[m.name] = True
    return out


INPUT_NULLABLE = _input_nullability()
# Read in arithmetic only when is_mla (kv_lora_rank set), and CHECK ck_model_mla makes the two NULL
# together: guarding them would add a test to nearly every KV formula for a case that cannot occur.
_GUARD_EXEMPT = {"kv_lora_rank", "qk_rope_head_dim"}
# Inputs the schema's CHECK constraints keep above zero when set (ck_plan_parallel, ck_plan_gpn,
# ck_model_heads, ck_dtype_bytes, ...): dividing by them needs no zero test.
POSITIVE_INPUTS = {
    "tp", "pp", "dp_attention", "gpus_per_node", "context_tokens", "avg_tokens", "kv_cache_memory_bytes",
    "memory_bytes", "memory_bandwidth_bytes_per_s", "attention_heads", "kv_heads", "head_dim", "v_head_dim",
    "params_total", "params_active", "max_position_embeddings", "kv_bytes_per_element", "weight_bytes_per_param",
    "state_bytes_per_element", "linear_state_heads", "kv_lora_rank",
}
# Figures the schema keeps above zero: attention_tp (ck_plan_dp_divides_tp: TP is a multiple of
# dp_attention), replicas_per_node (ck_plan_fits_node: TP x PP <= gpus_per_node), and a sequence's
# bytes (every layer holds KV or a positive state: ck_model_layer_sum, ck_model_heads, ck_model_linear_state).
POSITIVE_FIGURES = {"attention_tp", "replicas_per_node", "kv_bytes_per_sequence_per_gpu", "kv_bytes_per_request_per_gpu"}
_ARITH = {"+", "-", "*", "/"}
_COMPARE = {"<", "<=", ">", ">=", "=", "<>"}
_STRICT_FUNCS = {"floor", "ceil", "mod", "fmt", "concat"}
_FLAG_FUNCS = {"and", "or", "not"}


@dataclass(frozen=True)
class Facts:
    """What a branch of an if_ knows about names from its condition (``if_(isnull(x), a, b)``:
    in b, x is not NULL; ``if_(x > 0, a, b)``: in a, x is positive)."""

    not_null: frozenset = frozenset()
    positive: frozenset = frozenset()

    def __or__(self, other: "Facts") -> "Facts":
        return Facts(self.not_null | other.not_null, self.positive | other.positive)


NO_FACTS = Facts()


def branch_facts(cond: Expr) -> tuple[Facts, Facts]:
    """(facts in the then-branch, facts in the else-branch) of a condition."""
    if isinstance(cond, Func) and cond.name == "isnull" and isinstance(cond.args[0], (Input, Ref)):
        return NO_FACTS, Facts(not_null=frozenset({cond.args[0].name}))
    if isinstance(cond, Func) and cond.name == "not":
        then, other = branch_facts(cond.args[0])
        return other, then
    if isinstance(cond, Func) and cond.name == "and":
        out = NO_FACTS
        for c in cond.args:
            out = out | branch_facts(c)[0]
        return out, NO_FACTS
    if (isinstance(cond, Op) and cond.op == ">" and isinstance(cond.a, (Input, Ref))
            and isinstance(cond.b, Const) and cond.b.value == 0):
        name = frozenset({cond.a.name})
        return Facts(not_null=name, positive=name), NO_FACTS
    return NO_FACTS, NO_FACTS


def may_be_null(e: Expr, facts: Facts = NO_FACTS) -> bool:
    """Whether the SQL views can give NULL for this expression (its inputs as the schema allows).

    A zero divisor also gives NULL in SQL, and the workbook blanks it too, but it is not counted
    here: only final figures (headroom_fraction, cost_per_user_per_month) divide by something that
    can be zero in practice, so nothing downstream has to test for it."""
    if isinstance(e, Const):
        return e.value is None
    if isinstance(e, (Input, Ref)):
        return e.name not in facts.not_null and name_may_be_null(e.name)
    if isinstance(e, Op):
        return e.op in _ARITH and (may_be_null(e.a, facts) or may_be_null(e.b, facts))
    if isinstance(e, Func):
        if e.name == "if":
            then, other = branch_facts(e.args[0])
            return may_be_null(e.args[1], facts | then) or may_be_null(e.args[2], facts | other)
        if e.name in ("coalesce", "min", "max"):  # the SQL targets' MIN/MAX skip a NULL, like Excel's
            return may_be_null(e.args[0], facts) and may_be_null(e.args[1], facts)
        if e.name in _STRICT_FUNCS:
            return any(may_be_null(a, facts) for a in e.args)
        return False
    raise TypeError(f"not an expression: {e!r}")


_NULLABLE_MEMO: dict[str, bool] = {}


def name_may_be_null(name: str) -> bool:
    """An input or a figure that can be NULL in the views (and so blank in the workbook)."""
    if name in INPUTS:
        return INPUT_NULLABLE[name] and name not in _GUARD_EXEMPT
    if name not in _NULLABLE_MEMO:
        _NULLABLE_MEMO[name] = may_be_null(FIGURES[name].expr)
    return _NULLABLE_MEMO[name]


def is_positive(e: Expr, facts: Facts = NO_FACTS) -> bool:
    """Whether the schema keeps this expression above zero (so it can divide without a zero test)."""
    if isinstance(e, Const):
        return isinstance(e.value, (int, float)) and e.value > 0
    if isinstance(e, Input):
        return e.name in POSITIVE_INPUTS or e.name in facts.positive
    if isinstance(e, Ref):
        return e.name in facts.positive or e.name in POSITIVE_FIGURES or is_positive(FIGURES[e.name].expr)
    if isinstance(e, Op):
        return e.op in ("+", "*", "/") and is_positive(e.a, facts) and is_positive(e.b, facts)
    if isinstance(e, Func):
        args = [is_positive(a, facts) for a in e.args]
        if e.name in ("ceil", "min", "coalesce"):
            return all(args)
        if e.name == "max":
            return any(args)
        if e.name == "if":
            then, other = branch_facts(e.args[0])
            return is_positive(e.args[1], facts | then) and is_positive(e.args[2], facts | other)
    return False


def _is_strict(e: Expr) -> bool:
    return (isinstance(e, Op) and e.op in _ARITH) or (isinstance(e, Func) and e.name in _STRICT_FUNCS)


def _any_blank(terms: list[str]) -> str:
    tests = [f'{t}=""' for t in terms]
    return tests[0] if len(tests) == 1 else "OR(" + ",".join(tests) + ")"


class NullSafeExcelCompiler(ExcelCompiler):
    """ExcelCompiler with SQL's NULL semantics, where NULL is an empty cell or "".

    SQL gives NULL for arithmetic on a NULL, 0 for a comparison or a condition on NULL, and
    NULL for a zero divisor; Excel would give #VALUE! (``"" * 2``), TRUE (``"" > 0``) and
    #DIV/0!. Each maximal run of strict operations (+ - * /, INT, MOD, FIXED, &) gets one
    guard listing the cells in it that may be blank, so the formula stays readable:
    ``IF(OR(B3="",C3=""),"",B3*C3*730)``; a divisor the schema does not keep positive gets a
    zero test. What cannot be NULL compiles exactly as ExcelCompiler compiles it. The branches
    of an IF know what its condition tested (`Facts`), so ``IF(ISBLANK(M3), ..., M3)`` needs no
    guard on M3.
    """

    def __init__(self, inputs, refs):
        super().__init__(inputs, refs)
        self.facts = NO_FACTS

    def compile(self, e: Expr) -> str:
        if _is_strict(e):
            terms = self._null_terms(e)
            if terms is None:
                return '""'
            body = self._raw(e)
            return f'IF({_any_blank(terms)},"",{body})' if terms else body
        if isinstance(e, Op) and e.op in _COMPARE:
            a, b = self.compile(e.a), self.compile(e.b)
            terms = [x for x, sub in ((a, e.a), (b, e.b)) if may_be_null(sub, self.facts)]
            if terms:
                return f"IF({_any_blank(terms)},0,IF({a}{e.op}{b},1,0))"
            return self.compare(e.op, a, b)
        if isinstance(e, Func) and e.name == "if":
            c, t, o = e.args
            then, other = branch_facts(c)
            return f"IF({self._cond(c)},{self._under(then, t)},{self._under(other, o)})"
        if isinstance(e, Func) and e.name in _FLAG_FUNCS:
            return getattr(self, "f_" + e.name)(*[self._flag(x) for x in e.args])
        if isinstance(e, Func) and e.name in ("min", "max"):
            return self._min_max(e)
        return super().compile(e)

    # Shorter than ExcelCompiler's spelling, same values: a blank cell and a formula's "" both
    # equal "" (ISBLANK adds nothing), and a condition is written as one (a>b) rather than as a
    # flag tested against 0 (IF(a>b,1,0)<>0). Formula length is most of the workbook's write time
    # (XlsxWriter runs its regular expressions over every formula).
    def f_isnull(self, x):
        return f'IF({x}="",1,0)'

    def f_coalesce(self, a, b):
        return f'IF({a}="",{b},{a})'

    def _cond(self, e: Expr) -> str:
        """A condition as an Excel boolean: NULL counts as false, as in SQL's CASE WHEN."""
        if isinstance(e, Op) and e.op in _COMPARE and not (may_be_null(e.a, self.facts)
                                                           or may_be_null(e.b, self.facts)):
            return f"{self.compile(e.a)}{e.op}{self.compile(e.b)}"
        if isinstance(e, Func) and e.name == "isnull":
            return f'{self.compile(e.args[0])}=""'
        if isinstance(e, Func) and e.name in ("and", "or"):
            return f"{e.name.upper()}(" + ",".join(self._cond(x) for x in e.args) + ")"
        if (isinstance(e, Func) and e.name == "not" and isinstance(e.args[0], (Input, Ref))
                and not may_be_null(e.args[0], self.facts)):
            return f"{self.compile(e.args[0])}=0"
        return f"{self._flag(e)}<>0"

    def _min_max(self, e: Func) -> str:
        """MIN/MAX skipping a blank side (Excel's MIN would give #VALUE! on a "" result)."""
        a, b = (self.compile(x) for x in e.args)
        out = getattr(self, "f_" + e.name)(a, b)
        if may_be_null(e.args[1], self.facts):
            out = f'IF({b}="",{a},{out})'
        if may_be_null(e.args[0], self.facts):
            out = f'IF({a}="",{b},{out})'
        return out

    def _under(self, facts: Facts, e: Expr) -> str:
        saved = self.facts
        self.facts = saved | facts
        try:
            return self.compile(e)
        finally:
            self.facts = saved

    def _flag(self, e: Expr) -> str:
        """A condition: NULL counts as false, as in SQL's CASE WHEN."""
        x = self.compile(e)
        return f'IF({x}="",0,{x})' if may_be_null(e, self.facts) else x

    def _null_terms(self, e: Expr) -> list[str] | None:
        """Compiled sub-expressions of a strict run that may be blank; None when one is always NULL."""
        if _is_strict(e):
            out: list[str] = []
            for child in e.children():
                terms = self._null_terms(child)
                if terms is None:
                    return None
                out += [t for t in terms if t not in out]
            return out
        if isinstance(e, Const) and e.value is None:
            return None
        return [self.compile(e)] if may_be_null(e, self.facts) else []

    def _raw(self, e: Expr) -> str:
        """A strict run without NULL guards (its caller guards it once)."""
        if not _is_strict(e):
            return self.compile(e)
        if isinstance(e, Op):
            a, b = self._raw(e.a), self._raw(e.b)
            if e.op == "/":
                return self.divide(a, b) if is_positive(e.b, self.facts) else f'IF({b}=0,"",{a}/{b})'
            return f"({a}{e.op}{b})"
        return getattr(self, "f_" + e.name)(*[self._raw(x) for x in e.args])


def figure_template(name: str, cell_of: Callable[[str], str]) -> str:
    """A figure's formula for one row, with ROW where the row number goes.

    `cell_of(name)` gives the column letter holding an input or figure in the same row."""
    resolve = lambda n: f"{cell_of(n)}{ROW}"  # noqa: E731 - every name is a cell in the same row
    return "=" + NullSafeExcelCompiler(resolve, resolve).compile(FIGURES[name].expr)


def figure_references(names: Iterable[str]) -> list[str]:
    """Input and figure names these figures refer to directly, in first-seen order."""
    out: list[str] = []
    for name in names:
        stack = [FIGURES[name].expr]
        while stack:
            e = stack.pop()
            if isinstance(e, (Input, Ref)) and e.name not in out:
                out.append(e.name)
            stack.extend(reversed(list(e.children())))
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


class Book:
    """An XlsxWriter workbook with kvreg's cell formats and page setup."""

    def __init__(self, path: str, quarter: str):
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

    def header(self, role: str | None):
        props = {"bold": True, "text_wrap": True, "valign": "top", "bottom": 1}
        if role and ROLES[role]:
            props["bg_color"] = "#" + ROLES[role]
        return self.fmt(**props)

    def sheet(self, title: str, *, tab_color: str | None = None):
        ws = self.wb.add_worksheet(title)
        ws.set_landscape()
        ws.set_paper(9)  # A4
        ws.fit_to_pages(1, 0)  # one page wide, as many long as it takes
        ws.set_margins(left=0.4, right=0.4, top=0.6, bottom=0.6)
        q = self.quarter
        ws.set_header(f"&L&8kvreg capacity workbook, quarter {q}&C&8&A&R&8Quarter {q}")
        ws.set_footer("&L&8&F&R&8Page &P of &N")
        if tab_color:
            ws.set_tab_color(tab_color)
        return ws


class Grid:
    """The cells of a small free-form sheet, put in any order (`put(row, col, ...)`, 1-based) and
    written in row order by `flush` (constant_memory needs rows in order)."""

    def __init__(self, book: Book, ws):
        self.book, self.ws = book, ws
        self.cells: dict[tuple[int, int], tuple] = {}

    def put(self, row: int, col: int, value: Any = None, fmt=None, *, result: Any = None) -> None:
        """A value (text is stored as text), or a formula (a str starting with '=' given with
        `result`, its stored value)."""
        self.cells[(row, col)] = (value, fmt, result)

    def text(self, row: int, col: int, value: Any, fmt=None) -> None:
        self.cells[(row, col)] = (text_value(value) or "", fmt, _TEXT)

    def flush(self) -> None:
        ws = self.ws
        for (r, c) in sorted(self.cells):
            value, fmt, result = self.cells[(r, c)]
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
        self.cells = {}


_TEXT = object()


# --------------------------------------------------------------------------- tables


class Table:
    """A sheet laid out as a table: headers in words with units in row 1, the names in row 2
    (hidden: formulas, readers and `kvreg apply` find columns by them), data below. Row 1 stays
    in view and prints on every page, with the first column."""

    def __init__(self, sheet: str, columns: list[Column] | None = None):
        self.sheet = sheet
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

    def write(self, book: Book, ws, rows: list[dict], freeze_after: str = "A") -> int:
        """Write headers and rows to `ws`; returns the last data row (HEADER_ROW when there are none).

        Per row the work is one call per cell: a column's format is built once, a figure's formula
        is its template with the row number put in, and its stored result is the row's value."""
        self.rows, self.written = rows, True
        last = HEADER_ROW + len(rows)
        self._layout(book, ws, rows, last, freeze_after)
        plan, wrapped = [], []
        for j, c in enumerate(self.columns):
            get = c.value or (lambda row, n=c.name: row.get(n))
            if c.is_text:
                num = "@" if c.role == "input" else "General"  # a formula's text result keeps General
            else:
                num = c.number_format or number_format(c.unit, c.kind, c.name)
            # Long text wraps in its column instead of running over the next ones.
            wraps = c.is_text and (c.width or 0) >= 30
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

    def _layout(self, book: Book, ws, rows: list[dict], last: int, freeze_after: str) -> None:
        ws.freeze_panes(f"{get_column_letter(_col_index(freeze_after) + 1)}{FIRST_ROW}")
        ws.autofilter(0, 0, max(last, FIRST_ROW) - 1, len(self.columns) - 1)
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
        ws.set_row(0, 13 * min(lines, 6) + 4)
        ws.set_row(1, None, None, {"hidden": True})
        head, name_fmt = book.header, book.fmt(font_color="#7F7F7F", font_size=8)
        for j, c in enumerate(self.columns):
            ws.write_string(0, j, c.header, head(c.role))
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
