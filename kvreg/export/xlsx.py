"""The live workbook for finance: registry inputs as values, every figure as a formula that
carries its value.

Sheets: Read me, Summary, Plans (key figures), Plan detail, Workload, Demand, Models, GPUs,
Dtypes, Context sweep, Assumptions. Inputs (the registry's rows and the plans' settings) are
plain values in the input style; lookups fetch them across sheets with INDEX/MATCH; every
figure is the formula compiled from its declaration in `kvreg.figures.declarations`, the same
declaration the SQL views compile, stored with the value the views computed (so a reader that
does not recalculate shows the same numbers). Nothing here computes a figure or reads the
registry: kvreg.report.gather.workbook_data reads its inputs from the tables and the stored results from
the views, and edits recompute in Excel or LibreOffice. See
docs/workbook.md. `kvreg apply` reads the inputs back (kvreg.interchange.workbook, driven by its
EDITABLE).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import kvreg
from kvreg.export.excel_layout import (
    BORDER_COLOR,
    FIRST_ROW,
    HEADER_ROW,
    LOOKUP_LAST_ROW,
    NOT_FIT_FILL,
    ROTATED_HEADER_HEIGHT,
    ROW,
    Book,
    Column,
    Grid,
    Table,
    column_range,
    figure_column,
    figure_references,
    get_column_letter,
    index_formula,
    input_column,
    leave_out_of_print,
    literal_key,
    match_formula,
    number_format,
)
from kvreg.export.text import BLANK_TEXT
from kvreg.figures.aggregates import (
    AGGREGATE_COLUMNS,
    QUARTER_TEXTS,
    aggregate_excel,
    aggregate_excel_at,
    horizon_start_excel,
    in_force_excel,
    index_of_quarter,
    quarter_index_excel,
    quarter_of_index_excel,
    running_excel,
)
from kvreg.figures.declarations import (
    AGGREGATES,
    CLASS_MEANS,
    CLASS_WEIGHT,
    FIGURES,
    GIB,
    HOURS_PER_MONTH,
    INPUTS,
    dependencies,
    inputs_of,
)
from kvreg.figures.expr import names
from kvreg.figures.facts import INPUT_NULLABLE, name_may_be_null
from kvreg.figures.inputs import DEPLOYMENT_DEFAULTS
from kvreg.figures.labels import label
from kvreg.figures.quarters import previous_index_excel, previous_quarter, previous_quarter_excel
from kvreg.figures.views import GRAIN, figure_order

SHEETS = ["Read me", "Summary", "Plans", "Plan cards", "Plan detail", "Workload", "Demand", "Fleet", "Models", "GPUs", "Dtypes",
          "Context sweep", "Assumptions"]
DEFAULT_RESERVE_CELL = "Assumptions!$B$3"
# Sheets too wide to read on paper: left out of the print area (each plan prints as a card on Plan
# cards instead of Plan detail's row). The Read me sheet lists them.
NOT_PRINTED = ("Plan detail", "Models", "GPUs", "Dtypes", "Context sweep")
FUNCTIONS_USED = ("INDEX", "MATCH", "IF", "AND", "OR", "ISBLANK", "MIN", "MAX", "INT", "MOD", "FIXED",
                  "SUBSTITUTE", "SUMIFS", "COUNTIFS", "SUM", "LEFT", "RIGHT", "ROUND", "SEARCH", "ISNUMBER",
                  "SUMPRODUCT", "MINIFS")  # MINIFS: LibreOffice 5.2, Excel 2019 (a mix's strictest target)
# Custom document properties naming the registry and quarter a workbook was written from: `kvreg apply`
# refuses a workbook from another registry or quarter.
PROP_REGISTRY, PROP_QUARTER, PROP_FORMAT = "kvreg_registry_id", "kvreg_quarter", "kvreg_workbook"
# 3: the workbook records the registry state it was made from (STATE_SHEET).
WORKBOOK_FORMAT = "3"
# A very hidden sheet (Excel and LibreOffice offer no way to unhide it) holding, for each sheet
# `kvreg apply` reads back, its input columns and every row's input values as written: `apply`
# applies only the cells finance changed since, and names a cell changed in the registry too.
STATE_SHEET = "kvreg state"
STATE_SHEETS = ("Plan detail", "Workload", "Demand", "Fleet", "GPUs")

# The model inputs in the Models sheet's order: their declarations'.
_MODEL_INPUTS = inputs_of("model")
# (gpu_name is the GPU type itself, a row's key: not a column of its own)
_GPU_INPUTS = tuple(n for n in inputs_of("gpu") if n != "gpu_name")
# dtype inputs: (Dtypes column, the row helper that finds the dtype, may be blank). Each dtype relation's
# helper is named after it (kv_dtype_row); the KV dtype's name is the key the helper matches, not a lookup.
_DTYPE_LOOKUPS = {
    n: (INPUTS[n].column, f"{t}_row", INPUTS[n].nullable)
    for t in ("kv_dtype", "weight_dtype", "state_dtype") for n in inputs_of(t) if n not in ("kv_dtype", "weight_dtype_name")
}
_KV_DTYPE_LOOKUPS = tuple(n for n in _DTYPE_LOOKUPS if INPUTS[n].table == "kv_dtype")
_KV_INPUTS = set(inputs_of("kv_dtype"))
# A deployment's settings, in sheet order: the deployment inputs in their declarations' order, with the
# dtypes a deployment names after its layout (TP, PP, DP-attention, GPUs per node).
_DEPLOYMENT = inputs_of("deployment")
_WORKLOAD = set(inputs_of("workload"))
# A plan's latency workload as Plan detail's input columns: its request lengths and targets. Not the concurrency,
# which a plan's figures solve for (users_per_replica): the figures at a given concurrency (tpot_ms, ...) stay out.
_PLAN_WORKLOAD = [n for n in inputs_of("workload") if n != "concurrency"]
_AFTER_LAYOUT = _DEPLOYMENT.index("gpus_per_node") + 1
_SETTINGS = [*_DEPLOYMENT[:_AFTER_LAYOUT], "kv_dtype", "weight_dtype", *_DEPLOYMENT[_AFTER_LAYOUT:]]
# What an engine printed for a plan (plans only), in sheet order: compared with the figures by the
# calibration figures.
_MEASURED = inputs_of("calibration")


# --------------------------------------------------------------------------- inputs in people's units


@dataclass(frozen=True)
class Converted:
    """An input typed in the unit people use (GiB, GB/s) and converted to the registry's unit by a
    formula in the column beside it (`<name>` = `<shown>` x factor)."""

    name: str  # the registry's input (memory_bytes)
    shown: str  # the column finance edits (memory_gib_input)
    unit: str  # GiB
    factor: int  # 2^30
    meaning: str

    def to_shown(self, value):
        return None if value is None else value / self.factor

    def to_registry(self, value):
        if value is None:
            return None
        v = value * self.factor
        return round(v) if math.isfinite(v) else v  # inf (1e300 GiB) is left for the validator to refuse


CONVERTED = {c.name: c for c in (
    Converted("memory_bytes", "memory_gib_input", "GiB", GIB, "GPU memory in GiB (2^30 bytes), as vendors quote it"),
    Converted("memory_bandwidth_bytes_per_s", "memory_bandwidth_gb_per_s_input", "GB/s", 10**9,
              "memory bandwidth in GB/s (10^9 bytes per second)"),
    Converted("kv_cache_memory_bytes", "kv_cache_memory_gib_input", "GiB", GIB,
              "a fixed KV pool per GPU in GiB (blank: computed from memory)"),
    Converted("activation_bytes", "activation_gib_input", "GiB", GIB,
              "measured activation peak per GPU in GiB (blank: estimated)"),
    Converted("cuda_graph_bytes", "cuda_graph_gib_input", "GiB", GIB,
              "measured CUDA graph memory per GPU in GiB (blank: estimated)"),
)}
_SHOWN_LABELS = {"memory_gib_input": "Memory (GiB)", "memory_bandwidth_gb_per_s_input": "Memory bandwidth (GB/s)",
                 "kv_cache_memory_gib_input": "Fixed KV pool (GiB)", "activation_gib_input": "Activation peak (GiB)",
                 "cuda_graph_gib_input": "CUDA graphs (GiB)"}


def _choices(name: str) -> tuple[str, str] | None:
    """An input's declared choices (its CHECK's IN list: the rule's theoretical, vllm, sglang) as a list validation."""
    decl = INPUTS.get(name)
    if decl is None or not decl.choices:
        return None
    return '"' + ",".join(str(c) for c in decl.choices) + '"', name


def _converted_columns(t: Table, name: str, *, validation=None) -> str:
    """The shown input and its conversion; returns the converted column's letter."""
    conv = CONVERTED[name]
    shown = t.add(Column(conv.shown, "input", conv.unit, "real", conv.meaning,
                         value=lambda row, c=conv: c.to_shown(row.get(c.name)), label=_SHOWN_LABELS[conv.shown],
                         number_format='#,##0.00 "GiB"' if conv.unit == "GiB" else '#,##0.0 "GB/s"'))
    decl = INPUTS[name]
    nullable = INPUT_NULLABLE[name]
    formula = (f'=IF({shown}{ROW}="","",ROUND({shown}{ROW}*{conv.factor},0))' if nullable
               else f"=ROUND({shown}{ROW}*{conv.factor},0)")
    return t.add(Column(name, "lookup", decl.unit, decl.kind, f"{decl.meaning} (from the {conv.unit} column)",
                        formula=formula))


def write_workbook(data: dict, path) -> None:
    """Write the finance workbook that `data` describes to `path`.

    `data` is what kvreg.report.gather.workbook_data gathered from the registry (its inputs, the
    views' values, the Context sweep, the quarter, generated_at and the provenance); nothing
    here reads the registry. The file is written to a temporary name and moved into place, so a
    failure leaves any previous file as it was. The same data gives the same bytes.

    The sheets are streamed (XlsxWriter's constant_memory mode): each is written once, whole, in
    the order below (a sheet's lookups need the tables they refer to written first), while the
    file keeps the order of SHEETS."""
    quarter, generated_at = data["quarter"], data["generated_at"]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".xlsx", dir=path.parent)
    os.close(fd)
    try:
        book = Book(tmp, quarter)
        ws = {title: book.sheet(title, tab_color=_TAB.get(title)) for title in SHEETS}
        dtypes = _dtypes_sheet(book, ws["Dtypes"], data["dtypes"])
        gpus = _gpus_sheet(book, ws["GPUs"], data["gpus"])
        models = _models_sheet(book, ws["Models"], data, dtypes, data["kv_blocks"])
        refs = _References(models, gpus, dtypes, data)
        refs.plans = _deployment_sheet(book, ws["Plan detail"], "plan_capacity", data["plans"], refs, key="plan",
                                       overrides=_mix_overrides(len(data["classes"])))
        workload = _workload_sheet(book, ws["Workload"], data["classes"], refs)
        demand = _demand_sheet(book, ws["Demand"], data["demand"], refs, data["block_quarters"])
        fleet = _fleet_sheet(book, ws["Fleet"], data["fleet"], refs, data["block_quarters"])
        sweep = _sweep_sheet(book, ws["Context sweep"], data["sweep"], refs)
        overview = _plans_sheet(book, ws["Plans"], data, refs.plans, demand, quarter)
        _plan_cards_sheet(book, ws["Plan cards"], data["plans"], refs.plans, overview)
        _summary_sheet(book, ws["Summary"], quarter, data, demand, fleet, gpus, sweep, refs.plans)
        _assumptions_sheet(book, ws["Assumptions"])
        _readme_sheet(book, ws["Read me"], quarter, generated_at, data)
        _print_areas(ws, {"Workload": workload, "Demand": demand, "Fleet": fleet, "GPUs": gpus, "Models": models,
                          "Dtypes": dtypes, "Plan detail": refs.plans, "Context sweep": sweep})
        _state_sheet(book, {"Plan detail": refs.plans, "Workload": workload, "Demand": demand, "Fleet": fleet,
                            "GPUs": gpus})
        ws["Read me"].activate()
        stamp = _dt.datetime.fromisoformat(generated_at.replace("Z", "+00:00")).replace(tzinfo=None)
        book.wb.set_properties({"title": f"Capacity workbook {quarter}", "author": "kvreg", "created": stamp})
        book.wb.set_custom_property(PROP_REGISTRY, data["registry_id"])
        book.wb.set_custom_property(PROP_QUARTER, quarter)
        book.wb.set_custom_property(PROP_FORMAT, WORKBOOK_FORMAT)
        book.wb.close()
        os.chmod(tmp, 0o644)  # mkstemp made it private; a report is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _state_sheet(book: Book, tables: dict) -> None:
    """STATE_SHEET: per sheet of STATE_SHEETS a row (sheet, "inputs", [column, ...]) and per data row
    (sheet, "row", {column: value}), both JSON text."""
    assert tuple(tables) == STATE_SHEETS
    ws = book.wb.add_worksheet(STATE_SHEET)
    ws.very_hidden()
    ws.write_string(0, 0, "sheet")
    ws.write_string(0, 1, "kind")
    ws.write_string(0, 2, "value (JSON)")
    r = 1
    for sheet, t in tables.items():
        columns, rows = t.input_state()
        for kind, value in [("inputs", columns), *(("row", row) for row in rows)]:
            ws.write_string(r, 0, sheet)
            ws.write_string(r, 1, kind)
            ws.write_string(r, 2, json.dumps(value, sort_keys=True, ensure_ascii=False))
            r += 1


_TAB = {"Read me": "#4472C4", "Summary": "#4472C4", "Plans": "#4472C4", "Plan cards": "#4472C4"}


# --------------------------------------------------------------------------- input sheets


def _dtypes_sheet(book: Book, ws, rows: list[dict]) -> Table:
    t = Table("Dtypes", [
        input_column("dtype", key="name", meaning="number format name"),
        input_column("bytes_per_element", unit="bytes", kind="real", meaning="bytes per element (KV or weight)"),
        input_column("kind", meaning="kv, weight or both"),
        input_column("mla_bytes_per_token_per_layer", unit="bytes", kind="int",
                     meaning="the format's own MLA bytes per token per layer (blank: use bytes_per_element)"),
        input_column("scale_bytes_per_token_per_head", unit="bytes", kind="int",
                     meaning="scale bytes per token per KV head per layer, K and V together (blank: none)"),
        input_column("notes", meaning="notes", width=48),
    ])
    t.columns[2].validation = ('"kv,weight,both"', "dtype kind")
    t.write(book, ws, rows, print_titles=False)
    return t


def _gpus_sheet(book: Book, ws, rows: list[dict]) -> Table:
    """GPU types. Memory is typed in GiB and bandwidth in GB/s; the byte columns the figures read
    are converted from them (blue)."""
    t = Table("GPUs", [input_column("gpu", key="name", meaning="GPU type", width=14),
                       input_column("vendor", meaning="vendor")])
    for name in _GPU_INPUTS:
        if name in CONVERTED:
            _converted_columns(t, name)
        else:
            t.add(input_column(name))
    t.add(input_column("interconnect", meaning="interconnect", width=30))
    t.add(input_column("notes", meaning="notes", width=48))
    t.write(book, ws, rows, print_titles=False)
    return t


def _models_sheet(book: Book, ws, data: dict, dtypes: Table, blocks: list[str]) -> Table:
    """Model inputs, their dtype lookups, then the model_kv figures: the ones that do not depend on
    the KV dtype once, the rest once per KV dtype block (bf16, fp8; each block's dtype is an input)."""
    rows = data["models"]
    kv = data["model_kv"]
    dtype_pos = _positions(data["dtypes"], "name")
    t = Table("Models", [input_column("model", key="name", meaning="model name", width=22),
                         input_column("architecture", meaning="architecture"),
                         input_column("family", meaning="family")])
    for name in _MODEL_INPUTS:
        if name != "architecture":  # a column already, read by the figures too
            t.add(input_column(name))
    dtype_list = (dtypes.list_range("dtype"), "dtype")
    t.add(input_column("weight_dtype", meaning="the model's native weight dtype", validation=dtype_list))
    t.add(input_column("linear_state_dtype", meaning="dtype of the linear-attention state (blank: weight_dtype)",
                       validation=dtype_list))
    cells = {c.name: c.letter for c in t.columns}
    r = ROW
    lsd, wd = cells["linear_state_dtype"], cells["weight_dtype"]
    state = lambda row: row["linear_state_dtype"] or row["weight_dtype"]  # noqa: E731 - the lookup below
    _lookup(t, cells, "state_dtype", f'=IF({lsd}{r}="",{wd}{r},{lsd}{r})', "text",
            "dtype the state is kept in: linear_state_dtype, else weight_dtype", value=state)
    _helper(t, cells, "weight_dtype_row", "=" + match_formula(f"{wd}{r}", dtypes, "dtype"),
            lambda row: dtype_pos.get(row["weight_dtype"]))
    _helper(t, cells, "state_dtype_row",
            "=" + match_formula(f"{cells['state_dtype']}{r}", dtypes, "dtype"), lambda row: dtype_pos.get(state(row)))
    first = blocks[0] if blocks else None
    for name in ("weight_bytes_per_param", "state_bytes_per_element"):
        _dtype_lookup(t, cells, name, dtypes, lambda row, n=name: kv.get((row["name"], first), {}).get(n))

    order = figure_order(GRAIN["model_kv"])
    per_model = [n for n in order if not dependencies(n) & _KV_INPUTS]
    per_kv = [n for n in order if n not in per_model]
    for name in per_model:
        cells[name] = t.add(_with_value(figure_column(name, cells.__getitem__),
                                        lambda row, n=name: kv.get((row["name"], first), {}).get(n)))
    for dtype in blocks:
        block = dict(cells)
        in_block = lambda row, n, d=dtype: kv.get((row["name"], d), {}).get(n)  # noqa: E731
        block["kv_dtype"] = t.add(Column("kv_dtype", "input", "text", "text", INPUTS["kv_dtype"].meaning,
                                         value=lambda _row, d=dtype: d, validation=dtype_list,
                                         label=f"KV dtype of this block ({dtype} figures)"))
        _helper(t, block, "kv_dtype_row",
                "=" + match_formula(f"{block['kv_dtype']}{r}", dtypes, "dtype"), lambda _row, d=dtype: dtype_pos.get(d))
        for name in _KV_DTYPE_LOOKUPS:
            _dtype_lookup(t, block, name, dtypes, lambda row, n=name, f=in_block: f(row, n))
        for name in per_kv:
            block[name] = t.add(_with_value(figure_column(name, block.__getitem__),
                                            lambda row, n=name, f=in_block: f(row, n)))
            t.columns[-1].label = f"{label(name)} [{dtype}]"
    t.add(input_column("source", meaning="where the row came from"))
    t.add(input_column("notes", meaning="notes", width=48))
    t.write(book, ws, rows, print_titles=False)
    return t


def _with_value(col: Column, value: Callable[[dict], Any]) -> Column:
    col.value = value
    return col


def _positions(rows: list[dict], key: str) -> dict:
    """A table's row number within its data range (what MATCH gives) by key."""
    return {r[key]: i for i, r in enumerate(rows, start=1)}


def _lookup(t: Table, cells: dict, name: str, formula: str, kind: str | None = None, meaning: str = "",
            value: Callable[[dict], Any] | None = None) -> None:
    decl = INPUTS.get(name)
    cells[name] = t.add(Column(
        name, "lookup", unit=decl.unit if decl else "text", kind=kind or (decl.kind if decl else "text"),
        meaning=meaning or (decl.meaning if decl else name), formula=formula, value=value,
    ))


def _dtype_lookup(t: Table, cells: dict, name: str, dtypes: Table,
                  value: Callable[[dict], Any] | None = None) -> None:
    column, row_helper, nullable = _DTYPE_LOOKUPS[name]
    _lookup(t, cells, name, "=" + index_formula(dtypes, column, f"{cells[row_helper]}{ROW}", nullable), value=value)


def _helper(t: Table, cells: dict, name: str, formula: str, value: Callable[[dict], Any]) -> None:
    cells[name] = t.add(Column(name, "helper", "row", "int", f"row of {name[:-4]} in its table (for the lookups)",
                               formula=formula, value=value))


# --------------------------------------------------------------------------- deployments


class _References:
    """The input tables (written), for lookups and drop-down lists in Plans, Demand and the sweep,
    and the registry rows behind them (the values lookups store)."""

    def __init__(self, models: Table, gpus: Table, dtypes: Table, data: dict):
        self.models, self.gpus, self.dtypes = models, gpus, dtypes
        self.plans: Table | None = None
        self.model_list = (models.list_range("model"), "model")
        self.gpu_list = (gpus.list_range("gpu"), "GPU")
        self.dtype_list = (dtypes.list_range("dtype"), "dtype")
        self.model = {m["name"]: m for m in data["models"]}
        self.gpu = {g["name"]: g for g in data["gpus"]}
        self.dtype = {d["name"]: d for d in data["dtypes"]}
        self.model_pos = _positions(data["models"], "name")
        self.gpu_pos = _positions(data["gpus"], "name")
        self.dtype_pos = _positions(data["dtypes"], "name")
        self.plan_pos = _positions(data["plans"], "plan")
        self.quarters = data["quarters"]

    def state_dtype(self, model: str) -> str:
        m = self.model[model]
        return m["linear_state_dtype"] or m["weight_dtype"]

    def dtype_value(self, name: str, row: dict):
        """A dtype input of a deployment row, as its lookup fetches it."""
        column, _helper_name, _nullable = _DTYPE_LOOKUPS[name]
        dtype = {"kv_dtype_row": row.get("kv_dtype"), "weight_dtype_row": row.get("weight_dtype"),
                 "state_dtype_row": self.state_dtype(row["model"])}[_helper_name]
        return self.dtype.get(dtype, {}).get(column)


def _without_workload(order: list[str], inputs: set[str] = _WORKLOAD) -> list[str]:
    """The figures of `order` (each after those it refers to) that read none of `inputs` (the workload's),
    directly or through another figure: one pass, each figure's direct names only."""
    reads: set[str] = set(inputs)
    for name in order:
        if any(n in reads for n in names(FIGURES[name].expr)):  # the inputs and figures it refers to
            reads.add(name)
    return [n for n in order if n not in reads]


def _deployment_sheet(book: Book, ws, grain_name: str, rows: list[dict], refs: _References, key: str | None,
                      overrides: dict[str, str] | None = None) -> Table:
    """A deployment per row (a plan, or a sweep point): its settings as inputs, lookups of the model,
    GPU and dtype inputs its figures need, then one column per figure of the grain.

    `overrides` turns a setting into a lookup: {name: formula template}."""
    overrides = overrides or {}
    grain = GRAIN[grain_name]
    t = Table(ws.name)
    if key:
        t.add(input_column(key, meaning=f"{key} name", width=24))
    t.add(input_column("model", meaning="model (from the Models sheet)", validation=refs.model_list, width=22))
    t.add(input_column("gpu", meaning="GPU type (from the GPUs sheet)", validation=refs.gpu_list, width=14))
    settings = _SETTINGS + [m for m in _MEASURED if m in grain.columns]
    if key:  # a plan: its latency workload, which finance may edit (the users a replica serves follow)
        settings += _PLAN_WORKLOAD
    if not key:  # the sweep leads with its axes
        settings = ["context_tokens"] + [s for s in settings if s != "context_tokens"]
    cells: dict[str, str] = {}
    for name in settings:
        if name in overrides:
            continue
        if name in CONVERTED:
            cells[name] = _converted_columns(t, name)
            continue
        validation = refs.dtype_list if name in ("kv_dtype", "weight_dtype") else _choices(name)
        t.add(input_column(name, validation=validation))
    cells.update({c.name: c.letter for c in t.columns if c.name not in cells})

    # The sweep has no workload columns: its latency figures stay out. A plan has its lengths and targets but no
    # concurrency: the figures at a concurrency stay out, those it is solved for (users_per_replica) are in.
    figures = _without_workload(figure_order(grain), {"concurrency"} if key else _WORKLOAD)
    needed = set(figure_references(figures)) | set(overrides)
    r = ROW
    m, g, d = refs.models, refs.gpus, refs.dtypes
    _helper(t, cells, "model_row", "=" + match_formula(f"{cells['model']}{r}", m, "model"),
            lambda row: refs.model_pos.get(row["model"]))
    _helper(t, cells, "gpu_row", "=" + match_formula(f"{cells['gpu']}{r}", g, "gpu"),
            lambda row: refs.gpu_pos.get(row["gpu"]))
    for name, formula in overrides.items():  # settings that come from elsewhere (before their row helpers)
        formula = formula.replace("{model_row}", f"{cells['model_row']}{r}")
        _lookup(t, cells, name, formula.replace("{key}", f"{cells[key]}{r}") if key else formula)
    cells["weight_dtype_name"] = cells["weight_dtype"]  # the weight dtype's name is the setting itself
    cells["gpu_name"] = cells["gpu"]  # and the GPU's name the row's GPU type
    model_row, gpu_row = f"{cells['model_row']}{r}", f"{cells['gpu_row']}{r}"
    if needed & set(_KV_DTYPE_LOOKUPS):
        _helper(t, cells, "kv_dtype_row", "=" + match_formula(f"{cells['kv_dtype']}{r}", d, "dtype"),
                lambda row: refs.dtype_pos.get(row["kv_dtype"]))
    if "weight_bytes_per_param" in needed:
        _helper(t, cells, "weight_dtype_row", "=" + match_formula(f"{cells['weight_dtype']}{r}", d, "dtype"),
                lambda row: refs.dtype_pos.get(row["weight_dtype"]))
    if "state_bytes_per_element" in needed:
        state = index_formula(m, "state_dtype", model_row, False)
        _helper(t, cells, "state_dtype_row", "=" + match_formula(state, d, "dtype"),
                lambda row: refs.dtype_pos.get(refs.state_dtype(row["model"])))
    for name in grain.columns:
        if name not in needed or name in cells:
            continue
        if name in _MODEL_INPUTS:
            src = index_formula(m, name, model_row, INPUT_NULLABLE[name])
            value = lambda row, n=name: refs.model[row["model"]][n]  # noqa: E731
        elif name in _GPU_INPUTS:
            src = index_formula(g, name, gpu_row, INPUT_NULLABLE[name])
            value = lambda row, n=name: refs.gpu[row["gpu"]][n]  # noqa: E731
        elif name in _DTYPE_LOOKUPS:
            _dtype_lookup(t, cells, name, d, lambda row, n=name: refs.dtype_value(n, row))
            continue
        else:
            raise ValueError(f"no lookup for input {name} in {ws.name}")
        _lookup(t, cells, name, "=" + src, value=value)
    for name in figures:
        cells[name] = t.add(figure_column(name, cells.__getitem__))
    last = t.write(book, ws, rows, freeze_after=t.columns[0].letter, print_titles=ws.name not in NOT_PRINTED)
    _not_fit_format(book, ws, t, last)
    return t


def _sweep_sheet(book: Book, ws, rows: list[dict], refs: _References) -> Table:
    """The context sweep: inputs written per row (one TP per model and GPU); the weight dtype is the
    model's own (looked up) and the reserve is the Assumptions sheet's default."""
    weight_dtype = "=" + index_formula(refs.models, "weight_dtype", "{model_row}", False)
    no_mix = {m.name: '=""' for m in CLASS_MEANS}  # a sweep point has no workload classes
    return _deployment_sheet(book, ws, "capacity", rows, refs, key=None,
                             overrides={"weight_dtype": weight_dtype, "reserve": "=" + DEFAULT_RESERVE_CELL, **no_mix})


# --------------------------------------------------------------------------- workload classes

# The Workload sheet's first columns, in order: the Plan detail sheet's SUMIFS read the weighted columns by letter.
_WORKLOAD_LEAD = (["plan", "workload_class", *inputs_of("class")]
                  + [m.weighted for m in CLASS_MEANS if m.weighted not in inputs_of("class")])
assert _WORKLOAD_LEAD[:4] == ["plan", "workload_class", "class_tokens", CLASS_WEIGHT], _WORKLOAD_LEAD


def _workload_range(name: str, rows: int) -> str:
    """A Workload column as Table.range gives it once the sheet is written (Plans is written first)."""
    last = max(LOOKUP_LAST_ROW, FIRST_ROW + 2 * rows)
    return column_range("Workload", get_column_letter(_WORKLOAD_LEAD.index(name) + 1), last)


def _mix_overrides(rows: int) -> dict[str, str]:
    """A plan's mix inputs (CLASS_MEANS, whose declaration spells the rule) over its rows of the
    Workload sheet; {key} is the plan's name cell."""
    return {m.name: m.excel(lambda name: _workload_range(name, rows), literal_key("{key}")) for m in CLASS_MEANS}


# A class's latency inputs and the weighted lengths the plan's mix sums.
_WORKLOAD_WIDTH = {"plan": 19, "workload_class": 14, "class_weighted_kv_bytes": 14,
                   "class_kv_bytes_per_request_per_gpu": 14}
_CLASS_LATENCY_COLUMNS = {"class_input_tokens", "class_output_tokens", "class_tpot_target_ms", "class_ttft_target_ms",
                          "class_weighted_input_tokens", "class_weighted_output_tokens"}


def _workload_sheet(book: Book, ws, rows: list[dict], refs: _References) -> Table:
    """One row per plan and workload class: its tokens and share (inputs), the plan's figures its
    figures read (looked up from Plan detail), and the plan_class figures. Plan detail sums the
    weighted columns."""
    plans = refs.plans
    figures = GRAIN["plan_class"].outputs()
    lead = [c for c in _WORKLOAD_LEAD if c not in figures]
    lookups = [n for n in figure_references(figures) if n not in lead and n not in figures]
    order = lead + [n for n in _WORKLOAD_LEAD if n in figures] + [n for n in figures if n not in _WORKLOAD_LEAD]
    order += ["plan_row"] + lookups
    assert order[:len(_WORKLOAD_LEAD)] == _WORKLOAD_LEAD, order
    # Letters first: a weighted column (E, F) reads the class bytes to its right.
    cells = {n: get_column_letter(i + 1) for i, n in enumerate(order)}
    r = ROW
    plan_row = f"{cells['plan_row']}{r}"
    t = Table("Workload")
    for name in order:
        if name == "plan":
            col = input_column("plan", meaning="plan (from the Plan detail sheet)",
                               validation=(plans.list_range("plan"), "plan"))
        elif name == "workload_class":
            col = input_column("workload_class", meaning="request class of the plan's workload mix")
        elif name in lead:
            col = input_column(name)
        elif name in figures:
            col = figure_column(name, cells.__getitem__)
        elif name == "plan_row":
            col = Column(name, "helper", "row", "int", "row of plan in its table (for the lookups)",
                         formula="=" + match_formula(f"{cells['plan']}{r}", plans, "plan"),
                         value=lambda row: refs.plan_pos.get(row["plan"]))
        else:  # a figure or setting of the plan
            decl = FIGURES.get(name) or INPUTS[name]
            col = Column(name, "lookup", decl.unit, decl.kind, decl.meaning + " (the plan's)",
                         formula="=" + index_formula(plans, name, plan_row, name_may_be_null(name)))
        # Under turned headers a column is as wide as its values: the sheet still prints at 8 pt.
        col.width = _WORKLOAD_WIDTH.get(name, 6.5 if name in _CLASS_LATENCY_COLUMNS else col.width)
        assert t.add(col) == cells[name], name
    t.rotated_headers = True
    t.write(book, ws, rows, freeze_after="B")
    return t


def _not_fit_format(book: Book, ws, t: Table, last: int) -> None:
    """Rows whose `fits` figure is 0 turn red."""
    if "fits" not in {c.name for c in t.columns}:
        return
    fits = t.letter("fits")
    ws.conditional_format(f"A{FIRST_ROW}:{t.columns[-1].letter}{max(last, FIRST_ROW)}", {
        "type": "formula", "criteria": f'=AND(${fits}{FIRST_ROW}<>"",${fits}{FIRST_ROW}=0)',
        "format": book.fmt(bg_color="#" + NOT_FIT_FILL, font_color="#9C0006")})


def _demand_sheet(book: Book, ws, rows: list[dict], refs: _References, block_quarters: list[str]) -> Table:
    """A plan's users in a quarter, and the plan_quarter figures over the plan's figures."""
    grain = GRAIN["plan_quarter"]
    plans, g = refs.plans, refs.gpus
    plan_list = (plans.list_range("plan"), "plan")
    t = Table("Demand", [
        input_column("plan", meaning="plan (from the Plan detail sheet)", validation=plan_list, width=24),
        input_column("quarter", meaning="quarter, written YEARQn (2026Q4)", label="Quarter",
                     validation=('"' + ",".join(refs.quarters) + '"', "quarter"), validation_style="warning"),
        input_column("users"),
    ])
    cells = {c.name: c.letter for c in t.columns}
    r = ROW
    figures = figure_order(grain)
    _helper(t, cells, "plan_row", "=" + match_formula(f"{cells['plan']}{r}", plans, "plan"),
            lambda row: refs.plan_pos.get(row["plan"]))
    plan_row = f"{cells['plan_row']}{r}"
    _lookup(t, cells, "gpu", "=" + index_formula(plans, "gpu", plan_row, False), "text",
            "GPU type of the plan")
    t.columns[-1].label = "GPU type"
    _helper(t, cells, "gpu_row", "=" + match_formula(f"{cells['gpu']}{r}", g, "gpu"),
            lambda row: refs.gpu_pos.get(row["gpu"]))
    for name in figure_references(figures):
        if name in cells or name in figures:
            continue
        if name in _GPU_INPUTS:
            src = index_formula(g, name, f"{cells['gpu_row']}{r}", INPUT_NULLABLE[name])
            _lookup(t, cells, name, "=" + src)
        else:  # a plan figure
            f = FIGURES[name]
            src = index_formula(plans, name, plan_row, name_may_be_null(name))
            cells[name] = t.add(Column(name, "lookup", f.unit, f.kind, f.meaning + " (the plan's figure)",
                                       formula="=" + src))
    for name in figures:
        cells[name] = t.add(figure_column(name, cells.__getitem__))
    _in_force_columns(t, cells, "plan", len(rows), block_quarters)
    t.columns[0].width = 22
    t.rotated_headers = True  # 19 printed columns on a landscape page at 73% or more: 8 pt text
    for c in t.columns[1:]:
        c.width = c.width or {"USD": 8, "text": 9}.get(c.unit, 5.4)
    last = t.write(book, ws, rows, freeze_after="B")
    _not_fit_format(book, ws, t, last)
    return t


# The Summary's quarter as an index (2026Q4 -> 8107): the quarter the Demand and Fleet sheets'
# in_force columns answer for.
# It sits right of the Summary's table (and its print area): a helper, not something to read.
_QUARTER_INDEX_COL = len(AGGREGATE_COLUMNS) + 3  # 1-based; its label one column left
SUMMARY_QUARTER_INDEX = f"Summary!${get_column_letter(_QUARTER_INDEX_COL)}$1"


def _in_force_columns(t: Table, cells: dict, key: str, n_rows: int, block_quarters: list[str] = ()) -> None:
    """quarter_index, and whether each entry holds in the Summary's quarter and the one before
    (the carry-forward rule, compiled by kvreg.figures.aggregates); on Demand also one flag per
    quarter of the Summary's GPUs-per-quarter block (in_force_2026Q3, ...)."""
    last = max(LOOKUP_LAST_ROW, FIRST_ROW + 2 * n_rows)  # Table.range's rows, known before writing
    cells["quarter_index"] = t.add(Column("quarter_index", "helper", "index", "int",
                                          "the quarter as a number (year x 4 + quarter - 1)",
                                          formula="=" + quarter_index_excel(f"{cells['quarter']}{ROW}"),
                                          label="Quarter index"))
    key_rng, qi_rng = column_range(t.sheet, cells[key], last), column_range(t.sheet, cells["quarter_index"], last)
    asked = [("in_force", SUMMARY_QUARTER_INDEX, "the Summary's quarter", "In force this quarter (0/1)"),
             ("previous_quarter_in_force", previous_index_excel(SUMMARY_QUARTER_INDEX), "the quarter before it",
              "In force the quarter before (0/1)")]
    asked += [(f"in_force_{q}", str(index_of_quarter(q)), q, f"In force in {q} (0/1)") for q in block_quarters]
    for name, q, when, text_label in asked:
        f = in_force_excel(key_rng, literal_key(f"{cells[key]}{ROW}"), qi_rng, f"{cells['quarter_index']}{ROW}", q)
        cells[name] = t.add(Column(name, "helper", "flag", "flag", f"1 when this entry holds in {when}: the latest"
                                   f" entry of its {key} at or before it", formula="=" + f, label=text_label))


def _fleet_sheet(book: Book, ws, rows: list[dict], refs: _References, block_quarters: list[str]) -> Table:
    """GPUs installed per GPU type from a quarter on (owned, reserved and its price): finance edits
    these; an entry holds until the GPU type's next one."""
    t = Table("Fleet", [
        input_column("gpu", meaning="GPU type (from the GPUs sheet)", validation=refs.gpu_list, width=18,
                     label="GPU type"),
        input_column("quarter", meaning="from this quarter on, written YEARQn (2026Q4)", label="Quarter",
                     validation=('"' + ",".join(refs.quarters) + '"', "quarter"), validation_style="warning"),
        *[input_column(n, unit=AGGREGATES[n].unit, kind=AGGREGATES[n].kind, meaning=AGGREGATES[n].meaning)
          for n in ("gpus_owned", "gpus_reserved", "reserved_price_per_hour")],
    ])
    cells = {c.name: c.letter for c in t.columns}
    # Per block quarter too: the Summary's GPUs-short block sums the fleet in force in each quarter.
    _in_force_columns(t, cells, "gpu", len(rows), block_quarters)
    t.write(book, ws, rows, freeze_after="B")
    return t


# --------------------------------------------------------------------------- Plans: the key figures


def _in_words(ref: str, name: str) -> str:
    """A formula reading the cell `ref` as people read the figure `name`: its empty value in words (BLANK_TEXT)."""
    return f'=IF({ref}="","{BLANK_TEXT[name]}",{ref})'


def _words(value, name: str):
    """The value _in_words's formula stores: BLANK_TEXT's words for an empty value."""
    return BLANK_TEXT[name] if value in (None, "") else value


# The Plans sheet: (column on Plan detail, or a Demand sum for the Summary quarter)
_PLAN_KEYS = ["plan", "model", "gpu", "tp", "pp", "context_tokens", "kv_dtype", "fits", "max_concurrency",
              "workload_concurrency", "users_per_replica", "users_binding_constraint", "gpus_per_replica"]
_PLAN_QUARTER = ["users", "gpus_needed"]
# Widths (characters) that print the sheet on a landscape page at 73% or more: 8 pt text.
_PLANS_WIDTH = {"plan": 15, "model": 15, "gpu": 8, "tp": 6, "pp": 6, "kv_dtype": 7, "fits": 6, "users_per_replica": 7,
                "users_binding_constraint": 9, "gpus_per_replica": 7}


def _plans_sheet(book: Book, ws, data: dict, plans: Table, demand: Table, quarter: str) -> Table:
    """A plan per row with the figures people look for first, read from Plan detail (every figure
    and setting is there), and its users and GPUs in the Summary's quarter: its Demand entry in force
    then (the latest at or before it; carried forward)."""
    by_quarter = {d["plan"]: d for d in data["demand"] if d["in_force"]}
    t = Table("Plans")
    detail = "'Plan detail'"
    for name in _PLAN_KEYS:
        decl = FIGURES.get(name) or INPUTS.get(name)
        unit, kind = (decl.unit, decl.kind) if decl else ("text", "text")
        role = "figure" if name in FIGURES else "lookup"
        ref = f"{detail}!{plans.letter(name)}{ROW}"
        if name in BLANK_TEXT:  # an empty binding limit read in words, as the CLI's tables and the web pages do
            t.add(Column(name, role, unit, kind, f"{decl.meaning} (from Plan detail; {BLANK_TEXT[name]} when empty)",
                         formula=_in_words(ref, name), value=lambda row, n=name: _words(row.get(n), n),
                         width=_PLANS_WIDTH.get(name, 9)))
            continue
        t.add(Column(name, role, unit, kind, (decl.meaning if decl else f"{name} name") + " (from Plan detail)",
                     formula=f"={ref}", width=_PLANS_WIDTH.get(name, 9)))
    plan_cell = f"A{ROW}"
    for name in _PLAN_QUARTER:
        decl = FIGURES.get(name) or INPUTS.get(name)
        crit = (f'{demand.range("plan")},"="&{literal_key(plan_cell)},'
                f'{demand.range("in_force")},1')
        t.add(Column(name, "figure", decl.unit, decl.kind, f"{decl.meaning}, in the quarter on Summary (B1)",
                     formula=f"=SUMIFS({demand.range(name)},{crit})",
                     value=lambda row, n=name: (by_quarter.get(row["plan"]) or {}).get(n) or 0,
                     label=label(name).replace(" (", " this quarter (", 1), width=9))
    t.add(Column("reason", "figure", "text", "text", FIGURES["reason"].meaning + " (from Plan detail)",
                 formula=f"={detail}!{plans.letter('reason')}{ROW}", width=13, wrap=True))
    last = t.write(book, ws, data["plans"], freeze_after="A")
    _not_fit_format(book, ws, t, last)
    return t


# --------------------------------------------------------------------------- Plan cards: a plan per printed card

# A card's rows: a section heading (str starting with "# "), a Plan detail column, or "plans:<name>", a
# column of the Plans sheet (the Summary quarter's users and GPUs).
_CARD = ["# Deployment", "model", "gpu", "tp", "pp", "context_tokens", "kv_dtype", "weight_dtype", "rule", "reserve",
         "# Memory per GPU", "memory_gib", "weights_gib_per_gpu", "usable_gib_per_gpu", "kv_pool_gib_per_gpu",
         "kv_bytes_per_token_per_gpu", "kv_gib_per_sequence_per_gpu",
         "# Capacity", "max_concurrency", "workload_concurrency", "fits", "users_per_replica",
         "plans:users_binding_constraint", "gpus_per_replica", "node_concurrency",
         "decode_tokens_per_s_per_sequence",
         "# In the Summary's quarter", "plans:users", "plans:gpus_needed", "reason"]
# Under an engine rule the reserve is not used: its card shows the share of memory the engine takes and the memory
# it allocates instead, in the same rows (the report's plan section says the same).
_CARD_UNDER = {"vllm": {"reserve": "gpu_memory_utilization_used", "usable_gib_per_gpu": "allocatable_gib_per_gpu"},
               "sglang": {"reserve": "mem_fraction_static_used", "usable_gib_per_gpu": "allocatable_gib_per_gpu"}}
CARDS_ACROSS = 3
_CARD_WIDTHS = (30, 17, 3)  # label, value, gap
_CARD_ROWS = 1 + len(_CARD)  # the plan's name, then the rows above
_REASON_HEIGHT = 45  # three wrapped lines
YES_NO = '[=1]"yes";[=0]"no";General'


def _plan_cards_sheet(book: Book, ws, rows: list[dict], plans: Table, overview: Table) -> None:
    """Each plan on a card (its name, settings, memory per GPU, capacity, this quarter's users and
    GPUs and why it does not fit), three cards across a landscape page, for printing: Plan detail is
    a row of some 200 columns. Every value is a reference to the plan's cell on Plan detail (or
    Plans), so a card follows an edit; it stores the same value."""
    g = Grid(book, ws)
    title = book.fmt(bold=True, font_size=12, bottom=2)
    section = book.fmt(bold=True, italic=True, font_color="#404040", bottom=1, bottom_color=BORDER_COLOR)
    label_fmt = book.fmt(indent=1)
    reason_fmt = book.fmt(text_wrap=True, valign="top", font_color="#9C0006")
    by_name = {c.name: c for c in plans.columns}
    overview_cols = {c.name: c for c in overview.columns}
    breaks = []
    for k, row in enumerate(rows):
        band, across = divmod(k, CARDS_ACROSS)
        top = 1 + band * (_CARD_ROWS + 1)
        col = 1 + across * len(_CARD_WIDTHS)
        src_row = FIRST_ROW + k
        if across == 0 and band:
            breaks.append(top - 1)
        g.put(top, col, f"='Plan detail'!{plans.letter('plan')}{src_row}", title, result=row["plan"])
        swap = _CARD_UNDER.get(row.get("rule"), {})
        for i, name in enumerate(_CARD, start=1):
            r = top + i
            name = swap.get(name, name) if swap.get(name) in by_name else name
            if name.startswith("# "):
                g.put(r, col, name[2:], section)
                g.put(r, col + 1, None, section)
                continue
            if name == "reason":
                ref = f"='Plan detail'!{plans.letter('reason')}{src_row}"
                g.put(r, col, ref, reason_fmt, result=row.get("reason"), merge_to=col + 1)
                ws.set_row(r - 1, _REASON_HEIGHT)
                continue
            sheet, source = ("Plans", overview_cols[name[6:]]) if name.startswith("plans:") else (
                "'Plan detail'", by_name[name])
            g.text(r, col, source.header, label_fmt)
            ref = f"{sheet}!{source.letter}{src_row}"
            formula = f'=IF({ref}="","",{ref})' if source.role == "input" else f"={ref}"
            if source.name == "fits":
                num = YES_NO
            elif source.is_text:
                num = "General"
            else:
                num = source.number_format or number_format(source.unit, source.kind, source.name)
            value = source.value(row) if source.value else row.get(source.name)
            g.put(r, col + 1, formula, book.fmt(num_format=num, align="right"), result=value)
    last_band = (len(rows) - 1) // CARDS_ACROSS if rows else -1
    fits_offset = 1 + _CARD.index("fits")
    users_offset = 1 + _CARD.index("users_per_replica")
    served = (users_offset, 1 + _CARD.index("plans:users_binding_constraint"))
    no_user = book.fmt(bg_color="#" + NOT_FIT_FILL, font_color="#9C0006")
    for band in range(last_band + 1):
        top = 1 + band * (_CARD_ROWS + 1)
        # A plan that serves no user (users_per_replica 0: it does not fit, or one request misses its latency
        # target) has its users per replica and binding limit red: the rule reads the card's own cell, which
        # reads Plan detail, so an edited target turns it red or back on recalculation.
        for j in range(CARDS_ACROSS):
            value_col = j * len(_CARD_WIDTHS) + 1
            users_cell = f"${get_column_letter(value_col + 1)}${top + users_offset}"
            ws.conditional_format(top - 1 + served[0], value_col, top - 1 + served[1], value_col, {
                "type": "formula", "criteria": f"=AND(ISNUMBER({users_cell}),{users_cell}=0)",
                "format": no_user})
        # A plan that does not fit has its name in red: the fits value sits fits_offset rows below it,
        # one column right (a gap or label column there holds no number, so the rule skips it).
        ws.conditional_format(top - 1, 0, top - 1, CARDS_ACROSS * len(_CARD_WIDTHS) - 1, {
            "type": "formula", "criteria": f"=AND(ISNUMBER(B{top + fits_offset}),B{top + fits_offset}=0)",
            "format": book.fmt(bg_color="#" + NOT_FIT_FILL, font_color="#9C0006")})
    for j in range(CARDS_ACROSS):
        for i, width in enumerate(_CARD_WIDTHS):
            ws.set_column(j * len(_CARD_WIDTHS) + i, j * len(_CARD_WIDTHS) + i, width)
    ws.set_h_pagebreaks(breaks[:1023])  # Excel keeps at most 1,023 page breaks
    g.flush()


# --------------------------------------------------------------------------- summary


_SUMMARY_TOP = 4  # labels row; names on 5 (hidden), data from 6
# Prices, quarters, flags and GPU facts: a sum means nothing. Running figures (bought so far) neither.
_NO_TOTAL = ("unit_price", "price_per_hour", "reserved_price_per_hour", "order_by", "order_by_whole_nodes",
             "order_by_index", "order_by_index_whole_nodes", "lead_time_quarters", "node_gpus", "gpus_bought",
             "previous_gpus_bought", "gpus_bought_whole_nodes")
# Summary columns kept for the formulas and for a reader who unhides them, not printed: the whole-node
# variants (plan rollup --whole-nodes), the running helpers of the purchase, reserved prices and the GPU
# facts the GPUs sheet shows. With them hidden the table prints on one landscape page at 8 pt or more.
_SUMMARY_HIDDEN = ("gpus_short", "previous_gpus_bought", "order_by_index", "order_by_index_whole_nodes",
                   "gpus_to_buy_whole_nodes", "capex_to_buy_whole_nodes", "order_by_whole_nodes",
                   "order_late_whole_nodes", "gpus_bought_whole_nodes", "reserved_price_per_hour",
                   "reserved_cost_per_month", "lead_time_quarters", "node_gpus")
_GPU_FACTS = ("unit_price", "price_per_hour", "lead_time_quarters", "node_gpus")  # looked up on the GPUs sheet
# The first quarter's index of the per-quarter blocks (horizon_start_index): a helper beside the quarter
# index, outside the print area.
SUMMARY_HORIZON_START = f"Summary!${get_column_letter(_QUARTER_INDEX_COL)}$2"
MAX_LINES_PER_CHART = 8
# Chart text in points: 11 and up, so a page shrunk to 80% to fit still prints it at 8 pt or more.
_CHART_FONT = {"size": 11}
_CHART_TITLE = {"size": 13, "bold": True}
_CHART_AXIS = {"name_font": {"size": 11, "bold": False}, "num_font": _CHART_FONT}
# Summary column widths by unit (characters); others 8.5.
_SUMMARY_WIDTH = {"USD": 9.5, "USD/h": 7, "users": 8}


def _summary_sheet(book: Book, ws, quarter: str, data: dict, demand: Table, fleet: Table, gpu_table: Table,
                   sweep: Table, plans: Table) -> None:
    """What to buy per GPU type in the quarter in B1: the declared aggregates
    (kvreg.figures.declarations.AGGREGATES, compiled by kvreg.figures.aggregates to SUMIFS / COUNTIFS
    over the Demand and Fleet entries in force), gpus_to_buy and capex_to_buy first; GPUs needed per
    quarter and GPU type; native charts over these cells and the Context sweep. Change B1, or a
    fleet count on the Fleet sheet, and every figure recomputes."""
    agg = data["aggregates"]
    gpus = data["summary_gpus"]  # the GPU types a plan or fleet entry names (kvreg.report.gather)
    previous = previous_quarter(quarter)
    g = Grid(book, ws)
    bold = book.fmt(bold=True)
    g.put(1, 1, "Quarter", bold)
    g.text(1, 2, quarter, book.cell("input", "@"))
    ws.data_validation(0, 1, 0, 1, {"validate": "list", "source": data["quarters"], "error_type": "warning",
                                    "error_title": "Unknown quarter",
                                    "error_message": "Pick a quarter from the list (written like 2026Q4)."})
    g.put(1, 3, "Change the quarter (written like 2026Q4) to see another one; every figure below recomputes.")
    g.put(2, 1, "Previous quarter", bold)
    g.put(2, 2, "=" + previous_quarter_excel("B1"), book.cell("lookup"),
          result=previous)
    g.put(1, _QUARTER_INDEX_COL - 1, "Quarter index (helper)", bold)
    g.put(1, _QUARTER_INDEX_COL, "=" + quarter_index_excel("B1"), book.cell("lookup"),
          result=index_of_quarter(quarter))
    g.put(2, 3, "Demand and fleet entries hold until the next entry of the same plan or GPU type "
                "(the in_force columns of the Demand and Fleet sheets).")

    head = _SUMMARY_TOP + 1
    first = head + 1
    last = first + len(gpus) - 1
    quarters = data["block_quarters"]
    # The per-quarter blocks below the rows: GPUs needed, then GPUs short (the running purchase reads it).
    block = last + 1 + 3
    block_last = block + len(quarters)
    short = block_last + 3
    short_last = short + len(quarters)
    short_quarters = f"$A${short + 1}:$A${short_last}"
    g.put(2, _QUARTER_INDEX_COL - 1, "First quarter index (helper)", bold)
    g.put(2, _QUARTER_INDEX_COL, horizon_start_excel(short_quarters), book.cell("lookup"),
          result=min(index_of_quarter(q) for q in quarters))
    letters = {"gpu": "A"}
    for i, name in enumerate(AGGREGATE_COLUMNS):
        letters[name] = get_column_letter(i + 2)
    described = {n: (a.unit, a.kind, a.meaning) for n, a in AGGREGATES.items()}
    described.update({n: (INPUTS[n].unit, INPUTS[n].kind, INPUTS[n].meaning + " (from GPUs)")
                      for n in _GPU_FACTS})
    described.update({t: ("quarter", "text", AGGREGATES[i].meaning.replace("(YEAR x 4 + quarter - 1)",
                                                                             "written YEARQn"))
                      for t, i in QUARTER_TEXTS.items()})
    header = book.header(None)
    g.put(_SUMMARY_TOP, 1, "GPU type", header)
    g.put(head, 1, "gpu", book.fmt(font_color="#7F7F7F", font_size=8))
    for name in AGGREGATE_COLUMNS:
        unit, _kind, meaning = described[name]
        col = _col0(letters[name]) + 1
        g.put(_SUMMARY_TOP, col, label(name, unit), book.header(None, rotated=True))
        g.put(head, col, name, book.fmt(font_color="#7F7F7F", font_size=8))
        ws.write_comment(_SUMMARY_TOP - 1, col - 1, f"{name}: {meaning}")
    totals: dict[str, float] = {}
    for i, gpu in enumerate(gpus):
        row = first + i
        g.text(row, 1, gpu["name"], book.fmt(num_format="@", border=1, border_color="#BFBFBF"))
        # The compiled rollup's row (none: no demand and no fleet on this GPU type, every aggregate 0).
        cur = agg.get((gpu["name"], quarter)) or {}
        key = literal_key(f"$A{row}")
        axis = {"quarter_index": SUMMARY_QUARTER_INDEX.split("!")[1], "horizon_start_index":
                SUMMARY_HORIZON_START.split("!")[1]}
        for name in AGGREGATE_COLUMNS:
            unit, kind, _meaning = described[name]
            if name in _GPU_FACTS:
                f = "=" + index_formula(gpu_table, name, match_formula(f"$A{row}", gpu_table, "gpu"), True)
                value = gpu.get(name)
            elif name in QUARTER_TEXTS:
                f = "=" + quarter_of_index_excel(f"{letters[QUARTER_TEXTS[name]]}{row}")
                value = cur.get(name)
            elif AGGREGATES[name].running:
                col = get_column_letter(i + 2)  # this GPU type's column of the GPUs-short block
                f = running_excel(name, f"{col}${short + 1}:{col}${short_last}", short_quarters,
                                  axis["quarter_index"])
                value = cur.get(name) or 0
            else:
                f = aggregate_excel(name, demand=demand.range, fleet=fleet.range,
                                    gpu_criterion=lambda r_, key=key: f'{r_},"="&{key}',
                                    cell_of=lambda n, row=row: axis.get(n) or f"{letters[n]}{row}")
                value = cur.get(name)  # None: blank (capex_to_buy without a unit_price)
                totals[name] = totals.get(name, 0) + (value or 0)
            g.put(row, _col0(letters[name]) + 1, f, book.cell("figure", number_format(unit, kind)), result=value)
    total = last + 1
    end = letters[AGGREGATE_COLUMNS[-1]]
    g.put(total, 1, "Total", bold)
    for name in AGGREGATE_COLUMNS:
        if name in _NO_TOTAL:
            continue
        unit, kind, _meaning = described[name]
        g.put(total, _col0(letters[name]) + 1, f"=SUM({letters[name]}{first}:{letters[name]}{max(last, first)})",
              book.cell("figure", number_format(unit, kind), bold=True), result=totals.get(name, 0))
    ws.conditional_format(f"A{first}:{end}{max(last, first)}", {
        "type": "formula", "criteria": f"=${letters['plans_not_fitting']}{first}>0",
        "format": book.fmt(bg_color="#" + NOT_FIT_FILL, font_color="#9C0006")})
    # The rows are the GPU types named when the workbook was written; a plan or fleet entry moved to
    # another type in the workbook is counted here, since the rows above (and Total) leave it out.
    listed = f"$A${first}:$A${max(last, first)}"
    unlisted = "+".join(f'SUMPRODUCT(({r}<>"")*(COUNTIFS({listed},{r})=0))'
                        for r in (plans.range("gpu"), fleet.range("gpu")))
    g.put(total + 1, 1, f'=IF({unlisted}>0,{unlisted}&" plan or fleet row(s) name a GPU type not listed above, so '
                        'the table leaves them out: apply the workbook with kvreg and write it again",'
                        '"Every plan and fleet row is on a GPU type listed above")',
          book.fmt(italic=True, font_color="#7F7F7F"), result="Every plan and fleet row is on a GPU type listed above")
    ws.conditional_format(f"A{total + 1}", {"type": "text", "criteria": "not containing", "value": "Every",
                                            "format": book.fmt(bold=True, font_color="#9C0006")})

    # GPUs needed per quarter (rows) and GPU type (columns): the chart's cells.
    assert block == total + 3
    g.put(block - 1, 1, "GPUs needed per quarter and GPU type (sums over the Demand entries in force)", bold)
    g.put(block, 1, "Quarter", header)
    for j, gpu in enumerate(gpus, start=2):
        g.text(block, j, gpu["name"], book.header(None, rotated=True))
    for i, q in enumerate(quarters, start=1):
        g.text(block + i, 1, q, book.fmt(num_format="@", border=1, border_color="#BFBFBF"))
        for j, gpu in enumerate(gpus, start=2):
            key = literal_key(f"{get_column_letter(j)}${block}")
            f = aggregate_excel("gpus_needed", demand=demand.range, fleet=fleet.range, in_force=f"in_force_{q}",
                                gpu_criterion=lambda r_, key=key: f'{r_},"="&{key}', cell_of=None)
            g.put(block + i, j, f, book.cell("figure", "#,##0"),
                  result=(agg.get((gpu["name"], q)) or {}).get("gpus_needed") or 0)
    # GPUs short per quarter: gpus_short over each quarter's entries in force; GPUs bought so far (the
    # Summary's gpus_bought) is the largest of them up to the quarter in B1.
    g.put(short - 1, 1, "GPUs short per quarter and GPU type (needed less installed, never below 0): GPUs "
                        "bought stay bought, so the purchase up to a quarter is the largest shortfall so far", bold)
    g.put(short, 1, "Quarter", header)
    for j, gpu in enumerate(gpus, start=2):
        g.text(short, j, gpu["name"], book.header(None, rotated=True))
    for i, q in enumerate(quarters, start=1):
        g.text(short + i, 1, q, book.fmt(num_format="@", border=1, border_color="#BFBFBF"))
        for j, gpu in enumerate(gpus, start=2):
            key = literal_key(f"{get_column_letter(j)}${short}")
            f = "=" + aggregate_excel_at("gpus_short", demand=demand.range, fleet=fleet.range, in_force=f"in_force_{q}",
                                         gpu_criterion=lambda r_, key=key: f'{r_},"="&{key}')
            g.put(short + i, j, f, book.cell("figure", "#,##0"),
                  result=(agg.get((gpu["name"], q)) or {}).get("gpus_short") or 0)
    # GPU type names, rotated: 60 pt holds about 9 characters a line (A100-80GB), a longer name wraps. Low
    # enough that the rollup and both blocks of a 4-quarter horizon print on page 1 with the first chart.
    ws.set_row(short - 1, 60)
    ws.set_row(block - 1, 60)
    # Narrow enough that the table prints on one landscape page at 80% or more (text 8 pt or more).
    ws.set_column(0, 0, 12)
    for name in AGGREGATE_COLUMNS:
        j = _col0(letters[name])
        ws.set_column(j, j, _SUMMARY_WIDTH.get(described[name][0], 6), None,
                      {"hidden": True} if name in _SUMMARY_HIDDEN else None)
    if len(gpus) > len(AGGREGATE_COLUMNS):
        ws.set_column(len(AGGREGATE_COLUMNS) + 1, len(gpus), 6)
    ws.set_column(_QUARTER_INDEX_COL - 2, _QUARTER_INDEX_COL - 2, 22)
    ws.set_row(_SUMMARY_TOP - 1, ROTATED_HEADER_HEIGHT)
    ws.set_row(head - 1, None, None, {"hidden": True})
    ws.freeze_panes(first - 1, 1)
    ws.repeat_columns(0)
    g.flush()

    charts_row = short_last + 2
    # Each chart starts a page or shares it with one other: none is cut in two when printed.
    chart = book.wb.add_chart({"type": "column"})
    for j, gpu in enumerate(gpus, start=1):
        chart.add_series({
            "name": ["Summary", block - 1, j],
            "categories": ["Summary", block, 0, block_last - 1, 0],
            "values": ["Summary", block, j, block_last - 1, j],
        })
    chart.set_title({"name": "GPUs needed per quarter, per GPU type", "name_font": _CHART_TITLE})
    chart.set_x_axis({"name": "Quarter", **_CHART_AXIS})
    chart.set_y_axis({"name": "GPUs", "major_gridlines": {"visible": True}, **_CHART_AXIS})
    chart.set_legend({"position": "right", "font": _CHART_FONT})
    chart.set_size({"width": 720, "height": 300})
    ws.insert_chart(charts_row, 0, chart)
    # Below it, the purchase: GPUs needed, installed and to buy per GPU type in the Summary's quarter.
    buy = book.wb.add_chart({"type": "column"})
    for name in ("gpus_needed", "gpus_installed", "gpus_to_buy"):
        col = _col0(letters[name])
        buy.add_series({"name": ["Summary", _SUMMARY_TOP - 1, col],
                        "categories": ["Summary", first - 1, 0, max(last, first) - 1, 0],
                        "values": ["Summary", first - 1, col, max(last, first) - 1, col]})
    buy.set_title({"name": "GPUs needed, installed and to buy this quarter", "name_font": _CHART_TITLE})
    buy.set_x_axis({"name": "GPU type", **_CHART_AXIS})
    buy.set_y_axis({"name": "GPUs", "major_gridlines": {"visible": True}, **_CHART_AXIS})
    buy.set_legend({"position": "bottom", "font": _CHART_FONT})
    buy.set_size({"width": 720, "height": 300})
    ws.insert_chart(charts_row + 16, 0, buy)
    sweep_row = charts_row + 32
    n = _concurrency_charts(book, ws, sweep, sweep_row)
    # Printed: the tables on page 1, the two purchase charts on page 2. The concurrency charts (one
    # per GPU type, from the Context sweep, which is not printed) are for the screen; when printed
    # by hand each starts a page or shares it with one other.
    ws.set_h_pagebreaks([charts_row, sweep_row] + [sweep_row + 34 * k for k in range(1, (n + 1) // 2)])
    ws.print_area(0, 0, sweep_row - 1, max(len(AGGREGATE_COLUMNS), len(gpus)))


def _concurrency_charts(book: Book, ws, sweep: Table, row: int) -> int:
    """Max concurrency against context, one chart per GPU type of the sweep, a line per model (at
    its TP), at most MAX_LINES_PER_CHART per chart, over the Context sweep's own cells."""
    groups: dict[str, list[tuple[str, int, int, int]]] = {}
    rows = sweep.rows
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and (rows[j]["model"], rows[j]["gpu"]) == (rows[i]["model"], rows[i]["gpu"]):
            j += 1
        groups.setdefault(rows[i]["gpu"], []).append((rows[i]["model"], rows[i]["tp"], i, j - 1))
        i = j
    count = 0
    conc = _col0(sweep.letter("max_concurrency"))
    ctx = _col0(sweep.letter("context_tokens"))
    for gpu, lines in groups.items():
        for part in range(0, len(lines), MAX_LINES_PER_CHART):
            chunk = lines[part:part + MAX_LINES_PER_CHART]
            chart = book.wb.add_chart({"type": "scatter", "subtype": "straight_with_markers"})
            for model, tp, a, b in chunk:
                chart.add_series({
                    "name": f"{model} (TP {tp})",
                    "categories": ["Context sweep", FIRST_ROW - 1 + a, ctx, FIRST_ROW - 1 + b, ctx],
                    "values": ["Context sweep", FIRST_ROW - 1 + a, conc, FIRST_ROW - 1 + b, conc],
                })
            more = f" ({part // MAX_LINES_PER_CHART + 1})" if len(lines) > MAX_LINES_PER_CHART else ""
            chart.set_title({"name": f"Max concurrency against context on {gpu}{more}", "name_font": _CHART_TITLE})
            chart.set_x_axis({"name": "Context (tokens)", "log_base": 2, "num_format": "#,##0", **_CHART_AXIS})
            chart.set_y_axis({"name": "Sequences per replica", "log_base": 10, "major_gridlines": {"visible": True},
                              **_CHART_AXIS})
            chart.set_legend({"position": "right", "font": _CHART_FONT})
            chart.set_size({"width": 720, "height": 320})
            ws.insert_chart(row, 0, chart)
            row += 17
            count += 1
    return count


def _col0(letter: str) -> int:
    n = 0
    for ch in letter:
        n = n * 26 + ord(ch) - 64
    return n - 1


# --------------------------------------------------------------------------- printing


def _print_areas(ws: dict, tables: dict[str, Table]) -> None:
    """What each table sheet prints: the sheets in NOT_PRINTED nothing; Workload, Demand and Fleet
    their inputs and figures, not the lookups and helpers to the right of them. Each prints one page
    wide (Book.sheet's page setup)."""
    for name in NOT_PRINTED:
        # below and right of everything on the sheet (drop-down lists reach lookup_last_row)
        leave_out_of_print(ws[name], tables[name].lookup_last_row + 1, len(tables[name].columns) + 1)
    last = lambda t, name: _col0(t.letter(name))  # noqa: E731 - a column's 0-based index
    ends = {"Workload": last(tables["Workload"], "plan_row") - 1,
            "Demand": last(tables["Demand"], "quarter_index") - 1,
            "Fleet": last(tables["Fleet"], "quarter_index") - 1}
    for name, end in ends.items():
        t = tables[name]
        ws[name].print_area(0, 0, max(FIRST_ROW + len(t.rows) - 1, HEADER_ROW) - 1, end)


# --------------------------------------------------------------------------- assumptions, read me


def _assumptions_sheet(book: Book, ws) -> None:
    d = DEPLOYMENT_DEFAULTS  # the Context sweep's rows take a new deployment's defaults
    g = Grid(book, ws)
    g.put(1, 1, "Assumptions", book.fmt(bold=True, font_size=14))
    header = book.header(None)
    for col, name in enumerate(("Setting", "Value", "Unit", "Meaning"), start=1):
        g.put(HEADER_ROW, col, name, header)
    wrap = book.fmt(text_wrap=True, valign="top")
    rows = [
        ("default_reserve", d["reserve"], "fraction", "input",
         "Share of GPU memory held back for activations and overheads in the Context sweep. Plans carry "
         "their own reserve (Plan detail sheet). Edit it: the sweep recomputes."),
        ("hours_per_month", HOURS_PER_MONTH, "hours", None,
         "Hours in a month for the cost per month (8,760 / 12). Fixed: the formulas carry 730 "
         "themselves, so editing this cell changes nothing."),
        ("gib_bytes", GIB, "bytes", None, "1 GiB = 2^30 bytes; every GiB figure divides bytes by it (GB = 10^9)."),
        ("sweep_kv_dtype", INPUTS["kv_dtype"].default, "text", None, "KV dtype of the Context sweep rows (editable per row there)."),
        ("sweep_block_size", d["block_size"], "tokens", None, "paged-KV block of the Context sweep rows (editable there)."),
        ("sweep_gpus_per_node", d["gpus_per_node"], "GPUs", None,
         "node size of the Context sweep; its TP is one per model and GPU, the smallest that holds the weights "
         "and a sequence at the shortest context (an input: change it per row)."),
    ]
    for i, (name, value, unit, role, meaning) in enumerate(rows):
        r = FIRST_ROW + i
        g.put(r, 1, name)
        fmt = number_format(unit, "real" if isinstance(value, float) else "int")
        if isinstance(value, str):
            g.text(r, 2, value, book.cell(role, "@") if role else None)
        else:
            g.put(r, 2, value, book.cell(role, fmt) if role else book.fmt(num_format=fmt))
        g.put(r, 3, unit)
        g.put(r, 4, meaning, wrap)
    ws.set_column(0, 0, 22)
    ws.set_column(1, 1, 16)
    ws.set_column(2, 2, 10)
    ws.set_column(3, 3, 80)
    g.flush()


def _readme_sheet(book: Book, ws, quarter: str, generated_at: str, data: dict) -> None:
    plans, gpus = len(data["plans"]), len(data["summary_gpus"])
    lines: list[tuple[str, str, Any]] = [
        (f"Capacity workbook, quarter {quarter}", "", "title"),
        ("What this is", f"GPU capacity and cost for the {plans} LLM serving plans in the kvreg registry: how many "
                         f"concurrent sequences each plan serves, how many GPUs of each of the {gpus} GPU types it "
                         "needs per quarter, and what they cost. Every figure is a live formula: change an input "
                         "and everything that depends on it recomputes (Excel 2010+, LibreOffice 7.4+).", None),
        ("Quarter", quarter, None),
        ("", "", None),
        ("How to use it", "", "bold"),
        ("1. Read", "Summary: GPUs to buy and their cost, GPUs needed and installed, nodes and cost per GPU type for the quarter, and the charts. Plans: a plan per "
                    "row with its key figures. The other sheets hold the detail.", None),
        ("2. Change", "Edit the yellow cells only: users per plan and quarter (Demand), a plan's settings such as "
                      "reserve (Plan detail), workload shares (Workload), GPU prices and memory (GPUs), GPUs owned "
                      "and reserved per quarter (Fleet), model shapes (Models), the quarter on Summary (B1). A "
                      "Demand or Fleet row holds until the next row of its plan or GPU type.", None),
        ("3. Recompute", "Blue and white cells are formulas: they recompute from the yellow ones, across sheets "
                         "(a reserve on Plan detail changes that plan's concurrency, its GPUs on Demand and the "
                         "totals on Summary).", None),
        ("4. Send back", "Return the file: `kvreg apply capacity.xlsx --dry-run` lists what changed (users, "
                         "reserves, shares, prices, memory, fleet counts), and `kvreg apply capacity.xlsx` writes it to the "
                         "registry. Figures are never read back; a figure typed over is reported, not applied.", None),
        ("", "", None),
        ("Colour legend", "", "bold"),
        ("input", "a value from the registry or a plan setting: edit it", "input"),
        ("lookup", "a formula that fetches or converts an input from another cell: leave it", "lookup"),
        ("figure", "a formula compiled from kvreg's figure declarations (the same ones its database uses): "
                   "leave it, read it", "figure"),
        ("red row", "a plan that does not fit (Fits = 0); its column 'Why it does not fit' says why", "red"),
        ("", "", None),
        ("Headers", "Each column's header says what it holds and its unit in brackets; hover a header for its "
                    "meaning. A hidden second row holds the column's name as kvreg writes it (the JSON key). "
                    "Row-number helper columns are hidden.", None),
        ("Units", "GiB = 2^30 bytes, GB = 10^9 bytes. GPU memory is typed in GiB and bandwidth in GB/s; the "
                  "byte columns beside them are converted by formula. Money is USD.", None),
        ("Adding rows", f"Lookups reach down to row {LOOKUP_LAST_ROW} (further in large tables). Copy a row with "
                        "its formulas to add a plan, a quarter of demand or a workload class.", None),
        ("Blank cells", "An unknown value (no hourly price, no fixed KV pool); figures that need it stay blank.",
         None),
        ("Printing", "Printed, each sheet fits its page width. Plan cards prints each plan on a card (Plan detail's "
                     "row of some 200 columns does not print). " + ", ".join(n for n in NOT_PRINTED if n != "Plan detail")
                     + " are reference tables too wide for paper: they do not print (read them on screen). "
                     "Workload, Demand and Fleet print their inputs and figures, not the lookups right of them; "
                     "Summary prints its tables and the purchase charts, not the concurrency charts (the GPU "
                     "prices it prints are the GPUs sheet's).", None),
        ("", "", None),
        ("Provenance", "", "bold"),
        ("generated_at", generated_at, None),
        ("kvreg_version", kvreg.__version__, None),
        ("schema_revision", str(data["schema_revision"] or ""), None),
        ("declarations_hash", data["declarations_hash"][:16], None),
        ("registry_id", data["registry_id"], None),
        ("Functions used", ", ".join(FUNCTIONS_USED), None),
    ]
    g = Grid(book, ws)
    wrap = book.fmt(text_wrap=True, valign="top")
    fills = {"input": book.cell("input"), "lookup": book.cell("lookup"), "figure": book.cell("figure"),
             "red": book.fmt(bg_color="#" + NOT_FIT_FILL, font_color="#9C0006", border=1)}
    for i, (a, b, style) in enumerate(lines, start=1):
        if style == "title":
            g.text(i, 1, a, book.fmt(bold=True, font_size=16))
            continue
        g.text(i, 1, a, book.fmt(bold=True, valign="top") if style == "bold" else fills.get(style, book.fmt(valign="top")))
        g.text(i, 2, b, wrap)
        # Rows are sized for their wrapped text (a row of unknown height would overlap the next one).
        ws.set_row(i - 1, 15 * max(1, -(-len(b) // 100)) + 2)
    ws.set_row(0, 24)
    ws.set_column(0, 0, 16)
    ws.set_column(1, 1, 90)
    ws.fit_to_pages(1, 1)
    ws.set_portrait()
    g.flush()
