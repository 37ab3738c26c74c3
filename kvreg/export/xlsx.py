"""The live workbook for finance: registry inputs as values, every figure as a formula.

Sheets: Summary, Plans, Workload, Demand, Models, GPUs, Dtypes, Context sweep, Assumptions, About.
Inputs (the registry's rows and the plans' settings) are plain values in the input style;
lookups fetch them across sheets with INDEX/MATCH; every figure is the formula compiled from
its declaration in `kvreg.figures.declarations`, the same declaration the SQL views compile.
Nothing here computes a figure: edit an input in Excel or LibreOffice and everything that
depends on it recomputes. See docs/workbook.md.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from openpyxl.utils import get_column_letter
from sqlalchemy import text

from kvreg.export.excel_layout import (
    FIRST_ROW,
    HEADER_FONT,
    HEADER_ROW,
    INPUT_FILL,
    INPUT_NULLABLE,
    LOOKUP_FILL,
    LOOKUP_LAST_ROW,
    NOT_FIT_FILL,
    ROW,
    TITLE_FONT,
    UNIT_FONT,
    WRAP,
    Column,
    Grid,
    Table,
    column_range,
    figure_column,
    figure_references,
    index_formula,
    input_column,
    literal_key,
    match_formula,
    name_may_be_null,
    new_workbook,
    number_format,
    set_text,
)
from kvreg.figures.declarations import (
    CLASS_MEANS,
    CLASS_WEIGHT,
    FIGURES,
    GIB,
    HOURS_PER_MONTH,
    INPUTS,
    RULES,
    dependencies,
)

SHEETS = ["Summary", "Plans", "Workload", "Demand", "Fleet", "Models", "GPUs", "Dtypes", "Context sweep", "Assumptions",
          "About"]
SWEEP_CONTEXTS = (8192, 32768, 131072, 1000000)
KV_BLOCKS = ("bf16", "fp8")  # the Models sheet shows the KV figures in these dtypes (each editable per row)
DEFAULT_RESERVE_CELL = "Assumptions!$B$3"
FUNCTIONS_USED = ("INDEX", "MATCH", "IF", "AND", "OR", "ISBLANK", "MIN", "MAX", "INT", "MOD", "FIXED",
                  "SUBSTITUTE", "SUMIFS", "COUNTIFS", "SUM", "LEFT", "RIGHT")

_MODEL_INPUTS = [
    "layers", "full_layers", "sliding_layers", "sliding_window", "chunked_layers", "attention_chunk_size",
    "linear_layers", "linear_state_elements_per_layer", "linear_state_heads", "attention_heads", "kv_heads",
    "head_dim", "v_head_dim", "kv_lora_rank", "qk_rope_head_dim", "params_total", "params_active",
    "max_position_embeddings", "indexer_bytes_per_token_per_layer",
]
_GPU_INPUTS = ["memory_bytes", "memory_bandwidth_bytes_per_s", "price_per_hour", "unit_price"]
# dtype inputs: (Dtypes column, the row helper that finds the dtype, may be blank)
_DTYPE_LOOKUPS = {
    "kv_bytes_per_element": ("bytes_per_element", "kv_dtype_row", False),
    "kv_mla_bytes_per_token_per_layer": ("mla_bytes_per_token_per_layer", "kv_dtype_row", True),
    "kv_scale_bytes_per_token_per_head": ("scale_bytes_per_token_per_head", "kv_dtype_row", True),
    "weight_bytes_per_param": ("bytes_per_element", "weight_dtype_row", False),
    "state_bytes_per_element": ("bytes_per_element", "state_dtype_row", False),
}
_KV_DTYPE_LOOKUPS = ("kv_bytes_per_element", "kv_mla_bytes_per_token_per_layer", "kv_scale_bytes_per_token_per_head")
_KV_INPUTS = {*_KV_DTYPE_LOOKUPS, "kv_dtype"}
# A deployment's settings, in sheet order: the plan/scenario columns the figures read.
_SETTINGS = ["tp", "pp", "dp_attention", "gpus_per_node", "kv_dtype", "weight_dtype", "context_tokens",
             "avg_tokens", "reserve", "kv_cache_memory_bytes", "block_size", "rule", "gpu_memory_utilization",
             "max_num_batched_tokens", "max_concurrent_batches", "activation_bytes", "cuda_graph_bytes",
             "mem_fraction_static"]
# What an engine printed for a plan (plans only): compared with the figures by the calibration figures.
_MEASURED = ["measured_kv_cache_tokens", "measured_max_concurrency", "measured_engine_version"]


def write_workbook(conn, path, quarter: str, *, generated_at: str | None = None, asked: dict | None = None) -> None:
    """Write the finance workbook for `quarter` (``2026Q4``) to `path`.

    `conn` is a connection to an opened registry. The file is written to a temporary name and
    moved into place, so a failure leaves any previous file as it was. The same registry,
    quarter and `generated_at` give the same bytes. `asked`: answers to capacity questions already
    asked on this connection, by repr(question) (kvreg.report passes its context sweep's, often
    the same question as the workbook's); the workbook adds its own.

    The sheets are streamed (openpyxl's write-only mode): each is written once, whole, in the
    order below (a sheet's lookups need the tables they refer to written first), while the
    file keeps the order of SHEETS."""
    from kvreg.units import parse_quarter

    quarter = parse_quarter(quarter)
    generated_at = generated_at or _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    data = _read_registry(conn)

    wb, ws = new_workbook(SHEETS)

    dtypes = _dtypes_sheet(ws["Dtypes"], data["dtypes"])
    gpus = _gpus_sheet(ws["GPUs"], data["gpus"])
    models = _models_sheet(ws["Models"], data["models"], dtypes, _kv_blocks(data["dtypes"]))
    refs = _References(models, gpus, dtypes)
    refs.plans = _deployment_sheet(ws["Plans"], "plan_capacity", data["plans"], refs, key="plan",
                                   overrides=_mix_overrides(len(data["classes"])))
    _workload_sheet(ws["Workload"], data["classes"], refs)
    demand = _demand_sheet(ws["Demand"], data["demand"], refs)
    fleet = _fleet_sheet(ws["Fleet"], data["fleet"], refs)
    _sweep_sheet(ws["Context sweep"], _sweep_rows(conn, data, asked), refs)
    _summary_sheet(ws["Summary"], quarter, data["gpus"], demand, fleet, gpus)
    _assumptions_sheet(ws["Assumptions"])
    _about_sheet(ws["About"], conn, quarter, generated_at)

    wb.calculation.fullCalcOnLoad = True  # no cached values are stored: Excel computes on open
    wb.properties.creator = "kvreg"
    stamp = _dt.datetime.fromisoformat(generated_at.replace("Z", "+00:00")).replace(tzinfo=None)
    wb.properties.created = wb.properties.modified = stamp
    _save(wb, Path(path))


# --------------------------------------------------------------------------- reading the registry


def _read_registry(conn) -> dict:
    """The registry's inputs (tables, not views: the workbook computes the figures itself)."""
    from kvreg.registry import list_dtypes, list_gpus, list_models

    plans = [dict(r) for r in conn.execute(text(
        "SELECT p.name AS plan, m.name AS model, g.name AS gpu, p.* FROM plan p"
        " JOIN model m ON m.id = p.model_id JOIN gpu g ON g.id = p.gpu_id ORDER BY p.name"
    )).mappings()]
    demand = [dict(r) for r in conn.execute(text(
        "SELECT p.name AS plan, d.quarter AS quarter, d.users AS users FROM demand d"
        " JOIN plan p ON p.id = d.plan_id ORDER BY d.quarter, p.name"
    )).mappings()]
    classes = [dict(r) for r in conn.execute(text(
        "SELECT p.name AS plan, wc.name AS workload_class, wc.avg_tokens AS class_tokens, wc.share AS share"
        " FROM workload_class wc JOIN plan p ON p.id = wc.plan_id ORDER BY p.name, wc.id"
    )).mappings()]
    fleet = [dict(r) for r in conn.execute(text(
        "SELECT g.name AS gpu, f.quarter AS quarter, f.gpus_owned AS gpus_owned, f.gpus_reserved AS gpus_reserved,"
        " f.reserved_price_per_hour AS reserved_price_per_hour FROM fleet f JOIN gpu g ON g.id = f.gpu_id"
        " ORDER BY f.quarter, g.name"
    )).mappings()]
    for p in plans:
        p.pop("name", None)
    return {"dtypes": list_dtypes(conn), "gpus": list_gpus(conn), "models": list_models(conn),
            "plans": plans, "classes": classes, "demand": demand, "fleet": fleet}


def _kv_blocks(dtypes: list[dict]) -> list[str]:
    kv = [d["name"] for d in dtypes if d["kind"] in ("kv", "both")]
    return [d for d in KV_BLOCKS if d in kv] or kv[:1]


def _sweep_rows(conn, data: dict, asked: dict | None = None) -> list[dict]:
    """Model x GPU x context for the models and GPUs the plans use, each at the minimum TP the
    capacity view picks (SPEC "Minimum TP"). Without plans: every model on the capacity
    question's default GPU (the first GPU if that one is gone)."""
    from kvreg.capacity import SWEEP_MAX_PAIRS, Question, ask

    q = Question(contexts=list(SWEEP_CONTEXTS), kv_dtypes=["bf16"], tp="auto")
    if data["plans"]:
        q.models = sorted({p["model"] for p in data["plans"]})
        q.gpus = sorted({p["gpu"] for p in data["plans"]})
    else:
        names = [g["name"] for g in data["gpus"]]
        q.models = [m["name"] for m in data["models"]]
        q.gpus = [g for g in q.gpus if g in names] or names[:1]
    q.gpus = q.gpus[:SWEEP_MAX_PAIRS]
    q.models = q.models[:max(1, SWEEP_MAX_PAIRS // max(1, len(q.gpus)))]  # first by name, like the report
    if not q.models or not q.gpus:
        return []
    asked = {} if asked is None else asked
    if repr(q) not in asked:
        asked[repr(q)] = ask(conn, q)
    return [{k: r[k] for k in ("model", "gpu", "context_tokens", "tp", "pp", "dp_attention", "gpus_per_node",
                               "kv_dtype", "block_size", *_SETTINGS) if k in r} for r in asked[repr(q)]]


# --------------------------------------------------------------------------- input sheets


def _dtypes_sheet(ws, rows: list[dict]) -> Table:
    t = Table("Dtypes", [
        input_column("dtype", key="name", meaning="number format name", width=14),
        input_column("bytes_per_element", unit="bytes", kind="real", meaning="bytes per element (KV or weight)"),
        input_column("kind", meaning="kv, weight or both"),
        input_column("mla_bytes_per_token_per_layer", unit="bytes", kind="int",
                     meaning="the format's own MLA bytes per token per layer (blank: use bytes_per_element)"),
        input_column("scale_bytes_per_token_per_head", unit="bytes", kind="int",
                     meaning="scale bytes per token per KV head per layer, K and V together (blank: none)"),
        input_column("notes", meaning="notes", width=60),
    ])
    t.columns[2].validation = ('"kv,weight,both"', "dtype kind")
    t.write(ws, rows)
    return t


def _gpus_sheet(ws, rows: list[dict]) -> Table:
    t = Table("GPUs", [input_column("gpu", key="name", meaning="GPU type", width=14),
                       input_column("vendor", meaning="vendor")])
    for name in _GPU_INPUTS:
        t.add(input_column(name))
    cells = {c.name: c.letter for c in t.columns}
    t.add(figure_column("memory_gib", cells.__getitem__))
    t.add(input_column("interconnect", meaning="interconnect", width=30))
    t.add(input_column("notes", meaning="notes", width=60))
    t.write(ws, rows)
    return t


def _models_sheet(ws, rows: list[dict], dtypes: Table, blocks: list[str]) -> Table:
    """Model inputs, their dtype lookups, then the model_kv figures: the ones that do not depend on
    the KV dtype once, the rest once per KV dtype block (bf16, fp8; each block's dtype is an input)."""
    from kvreg.figures.views import GRAIN, _layers

    t = Table("Models", [input_column("model", key="name", meaning="model name", width=22),
                         input_column("architecture", meaning="architecture"),
                         input_column("family", meaning="family")])
    for name in _MODEL_INPUTS:
        t.add(input_column(name))
    dtype_list = (dtypes.list_range("dtype"), "dtype")
    t.add(input_column("weight_dtype", meaning="the model's native weight dtype", validation=dtype_list))
    t.add(input_column("linear_state_dtype", meaning="dtype of the linear-attention state (blank: weight_dtype)",
                       validation=dtype_list))
    cells = {c.name: c.letter for c in t.columns}
    r = ROW
    lsd, wd = cells["linear_state_dtype"], cells["weight_dtype"]
    _lookup(t, cells, "state_dtype", f'=IF({lsd}{r}="",{wd}{r},{lsd}{r})', "text",
            "dtype the state is kept in: linear_state_dtype, else weight_dtype")
    _helper(t, cells, "weight_dtype_row", "=" + match_formula(f"{wd}{r}", dtypes, "dtype"))
    _helper(t, cells, "state_dtype_row",
            "=" + match_formula(f"{cells['state_dtype']}{r}", dtypes, "dtype"))
    for name in ("weight_bytes_per_param", "state_bytes_per_element"):
        _dtype_lookup(t, cells, name, dtypes)

    order = [n for layer in _layers(GRAIN["model_kv"]) for n in layer]
    per_model = [n for n in order if not dependencies(n) & _KV_INPUTS]
    per_kv = [n for n in order if n not in per_model]
    for name in per_model:
        cells[name] = t.add(figure_column(name, cells.__getitem__))
    for dtype in blocks:
        block = dict(cells)
        block["kv_dtype"] = t.add(Column("kv_dtype", "input", "text", "text", INPUTS["kv_dtype"].meaning,
                                         value=lambda _row, d=dtype: d, validation=dtype_list))
        _helper(t, block, "kv_dtype_row",
                "=" + match_formula(f"{block['kv_dtype']}{r}", dtypes, "dtype"))
        for name in _KV_DTYPE_LOOKUPS:
            _dtype_lookup(t, block, name, dtypes)
        for name in per_kv:
            block[name] = t.add(figure_column(name, block.__getitem__))
    t.add(input_column("source", meaning="where the row came from"))
    t.add(input_column("notes", meaning="notes", width=60))
    t.write(ws, rows)
    return t


def _lookup(t: Table, cells: dict, name: str, formula: str, kind: str | None = None, meaning: str = "") -> None:
    decl = INPUTS.get(name)
    cells[name] = t.add(Column(
        name, "lookup", unit=decl.unit if decl else "text", kind=kind or (decl.kind if decl else "text"),
        meaning=meaning or (decl.meaning if decl else name), formula=formula,
    ))


def _dtype_lookup(t: Table, cells: dict, name: str, dtypes: Table) -> None:
    column, row_helper, nullable = _DTYPE_LOOKUPS[name]
    _lookup(t, cells, name, "=" + index_formula(dtypes, column, f"{cells[row_helper]}{ROW}", nullable))


def _helper(t: Table, cells: dict, name: str, formula: str) -> None:
    cells[name] = t.add(Column(name, "helper", "row", "int", f"row of {name[:-4]} in its table (for the lookups)",
                               formula=formula))


# --------------------------------------------------------------------------- deployments


class _References:
    """The input tables (written), for lookups and drop-down lists in Plans, Demand and the sweep."""

    def __init__(self, models: Table, gpus: Table, dtypes: Table):
        self.models, self.gpus, self.dtypes = models, gpus, dtypes
        self.plans: Table | None = None
        self.model_list = (models.list_range("model"), "model")
        self.gpu_list = (gpus.list_range("gpu"), "GPU")
        self.dtype_list = (dtypes.list_range("dtype"), "dtype")


def _deployment_sheet(ws, grain_name: str, rows: list[dict], refs: _References, key: str | None,
                      overrides: dict[str, str] | None = None) -> Table:
    """A deployment per row (a plan, or a sweep point): its settings as inputs, lookups of the model,
    GPU and dtype inputs its figures need, then one column per figure of the grain.

    `overrides` turns a setting into a lookup: {name: formula template}."""
    from kvreg.figures.views import GRAIN, _layers

    overrides = overrides or {}
    grain = GRAIN[grain_name]
    t = Table(ws.title)
    if key:
        t.add(input_column(key, meaning=f"{key} name", width=24))
    t.add(input_column("model", meaning="model (from the Models sheet)", validation=refs.model_list, width=22))
    t.add(input_column("gpu", meaning="GPU type (from the GPUs sheet)", validation=refs.gpu_list, width=14))
    settings = _SETTINGS + [m for m in _MEASURED if m in grain.columns]
    if not key:  # the sweep leads with its axes
        settings = ["context_tokens"] + [s for s in settings if s != "context_tokens"]
    for name in settings:
        if name in overrides:
            continue
        validation = refs.dtype_list if name in ("kv_dtype", "weight_dtype") else None
        if name == "rule":
            validation = ('"' + ",".join(RULES) + '"', "rule")
        t.add(input_column(name, validation=validation))
    cells = {c.name: c.letter for c in t.columns}

    figures = [n for layer in _layers(grain) for n in layer]
    needed = set(figure_references(figures)) | set(overrides)
    r = ROW
    m, g, d = refs.models, refs.gpus, refs.dtypes
    _helper(t, cells, "model_row", "=" + match_formula(f"{cells['model']}{r}", m, "model"))
    _helper(t, cells, "gpu_row", "=" + match_formula(f"{cells['gpu']}{r}", g, "gpu"))
    for name, formula in overrides.items():  # settings that come from elsewhere (before their row helpers)
        formula = formula.replace("{model_row}", f"{cells['model_row']}{r}")
        _lookup(t, cells, name, formula.replace("{key}", f"{cells[key]}{r}") if key else formula)
    model_row, gpu_row = f"{cells['model_row']}{r}", f"{cells['gpu_row']}{r}"
    if needed & set(_KV_DTYPE_LOOKUPS):
        _helper(t, cells, "kv_dtype_row", "=" + match_formula(f"{cells['kv_dtype']}{r}", d, "dtype"))
    if "weight_bytes_per_param" in needed:
        _helper(t, cells, "weight_dtype_row", "=" + match_formula(f"{cells['weight_dtype']}{r}", d, "dtype"))
    if "state_bytes_per_element" in needed:
        state = index_formula(m, "state_dtype", model_row, False)
        _helper(t, cells, "state_dtype_row", "=" + match_formula(state, d, "dtype"))
    for name in grain.columns:
        if name not in needed or name in cells:
            continue
        if name in _MODEL_INPUTS:
            src = index_formula(m, name, model_row, INPUT_NULLABLE[name])
        elif name in _GPU_INPUTS:
            src = index_formula(g, name, gpu_row, INPUT_NULLABLE[name])
        elif name in _DTYPE_LOOKUPS:
            _dtype_lookup(t, cells, name, d)
            continue
        else:
            raise ValueError(f"no lookup for input {name} in {ws.title}")
        _lookup(t, cells, name, "=" + src)
    for name in figures:
        cells[name] = t.add(figure_column(name, cells.__getitem__))
    last = t.write(ws, rows, freeze_after=t.columns[0].letter)
    _not_fit_format(ws, t, last)
    return t


def _sweep_sheet(ws, rows: list[dict], refs: _References) -> Table:
    """The context sweep: inputs written per row (TP as the view picked it); the weight dtype is the
    model's own (looked up) and the reserve is the Assumptions sheet's default."""
    weight_dtype = "=" + index_formula(refs.models, "weight_dtype", "{model_row}", False)
    no_mix = {m.name: '=""' for m in CLASS_MEANS}  # a sweep point has no workload classes
    return _deployment_sheet(ws, "capacity", rows, refs, key=None,
                             overrides={"weight_dtype": weight_dtype, "reserve": "=" + DEFAULT_RESERVE_CELL, **no_mix})


# --------------------------------------------------------------------------- workload classes

# The Workload sheet's first columns, in order: the Plans sheet's SUMIFS read the weighted columns by letter.
_WORKLOAD_LEAD = ["plan", "workload_class", "class_tokens", CLASS_WEIGHT] + [m.weighted for m in CLASS_MEANS]


def _workload_range(name: str, rows: int) -> str:
    """A Workload column as Table.range gives it once the sheet is written (Plans is written first)."""
    last = max(LOOKUP_LAST_ROW, FIRST_ROW + 2 * rows)
    return column_range("Workload", get_column_letter(_WORKLOAD_LEAD.index(name) + 1), last)


def _mix_overrides(rows: int) -> dict[str, str]:
    """A plan's mix inputs (CLASS_MEANS): sum(weighted) / sum(share) over its rows of the Workload sheet;
    blank when the plan has no classes. {key} is the plan's name cell.

    Only rows whose weighted figure is computed (> 0, as share and bytes always are) count, in the
    shares too: a row finance adds without copying the formulas down is left out of the mean
    rather than diluting it."""
    out = {}
    for m in CLASS_MEANS:
        weighted = _workload_range(m.weighted, rows)
        crit = f'{_workload_range("plan", rows)},"="&{literal_key("{key}")},{weighted},">0"'
        share = f"SUMIFS({_workload_range(CLASS_WEIGHT, rows)},{crit})"
        out[m.name] = f'=IF(COUNTIFS({crit})=0,"",SUMIFS({weighted},{crit})/{share})'
    return out


def _workload_sheet(ws, rows: list[dict], refs: _References) -> Table:
    """One row per plan and workload class: its tokens and share (inputs), the plan's figures its
    figures read (looked up from Plans), and the plan_class figures. Plans sums the weighted columns."""
    from kvreg.figures.views import GRAIN

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
            col = input_column("plan", meaning="plan (from the Plans sheet)", validation=(plans.list_range("plan"),
                               "plan"), width=24)
        elif name == "workload_class":
            col = input_column("workload_class", meaning="request class of the plan's workload mix", width=18)
        elif name in lead:
            col = input_column(name)
        elif name in figures:
            col = figure_column(name, cells.__getitem__)
        elif name == "plan_row":
            col = Column(name, "helper", "row", "int", "row of plan in its table (for the lookups)",
                         formula="=" + match_formula(f"{cells['plan']}{r}", plans, "plan"))
        else:  # a figure or setting of the plan
            decl = FIGURES.get(name) or INPUTS[name]
            col = Column(name, "lookup", decl.unit, decl.kind, decl.meaning + " (the plan's)",
                         formula="=" + index_formula(plans, name, plan_row, name_may_be_null(name)))
        assert t.add(col) == cells[name], name
    t.write(ws, rows, freeze_after="B")
    return t


def _not_fit_format(ws, t: Table, last: int) -> None:
    """Rows whose `fits` figure is 0 turn red."""
    from openpyxl.formatting.rule import FormulaRule
    from openpyxl.styles import Font, PatternFill

    if "fits" not in {c.name for c in t.columns}:
        return
    fits = t.letter("fits")
    rule = FormulaRule(formula=[f'AND(${fits}{FIRST_ROW}<>"",${fits}{FIRST_ROW}=0)'],
                       fill=PatternFill(bgColor=NOT_FIT_FILL), font=Font(color="9C0006"))
    ws.conditional_formatting.add(f"A{FIRST_ROW}:{t.columns[-1].letter}{max(last, FIRST_ROW)}", rule)


def _demand_sheet(ws, rows: list[dict], refs: _References) -> Table:
    """A plan's users in a quarter, and the plan_quarter figures over the plan's figures."""
    from kvreg.figures.views import GRAIN, _layers

    grain = GRAIN["plan_quarter"]
    plans, g = refs.plans, refs.gpus
    plan_list = (plans.list_range("plan"), "plan")
    t = Table("Demand", [
        input_column("plan", meaning="plan (from the Plans sheet)", validation=plan_list, width=24),
        input_column("quarter", meaning="quarter, written YEARQn (2026Q4)"),
        input_column("users"),
    ])
    cells = {c.name: c.letter for c in t.columns}
    r = ROW
    figures = [n for layer in _layers(grain) for n in layer]
    _helper(t, cells, "plan_row", "=" + match_formula(f"{cells['plan']}{r}", plans, "plan"))
    plan_row = f"{cells['plan_row']}{r}"
    _lookup(t, cells, "gpu", "=" + index_formula(plans, "gpu", plan_row, False), "text",
            "GPU type of the plan")
    _helper(t, cells, "gpu_row", "=" + match_formula(f"{cells['gpu']}{r}", g, "gpu"))
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
    _in_force_columns(t, cells, "plan", len(rows))
    last = t.write(ws, rows, freeze_after="B")
    _not_fit_format(ws, t, last)
    return t


# The Summary's quarter as an index (2026Q4 -> 8107): the quarter the Demand and Fleet sheets'
# in_force columns answer for.
SUMMARY_QUARTER_INDEX = "Summary!$B$3"


def _in_force_columns(t: Table, cells: dict, key: str, n_rows: int) -> None:
    """quarter_index, and whether each entry holds in the Summary's quarter and the one before
    (the carry-forward rule, compiled by kvreg.figures.aggregates)."""
    from kvreg.figures.aggregates import in_force_excel, quarter_index_excel

    last = max(LOOKUP_LAST_ROW, FIRST_ROW + 2 * n_rows)  # Table.range's rows, known before writing
    cells["quarter_index"] = t.add(Column("quarter_index", "helper", "index", "int",
                                          "the quarter as a number (year x 4 + quarter - 1)",
                                          formula="=" + quarter_index_excel(f"{cells['quarter']}{ROW}")))
    key_rng, qi_rng = column_range(t.sheet, cells[key], last), column_range(t.sheet, cells["quarter_index"], last)
    for name, q, when in (("in_force", SUMMARY_QUARTER_INDEX, "the Summary's quarter"),
                          ("previous_quarter_in_force", SUMMARY_QUARTER_INDEX + "-1", "the quarter before it")):
        f = in_force_excel(key_rng, literal_key(f"{cells[key]}{ROW}"), qi_rng, f"{cells['quarter_index']}{ROW}", q)
        cells[name] = t.add(Column(name, "helper", "flag", "flag", f"1 when this entry holds in {when}: the latest"
                                   f" entry of its {key} at or before it", formula="=" + f))


def _fleet_sheet(ws, rows: list[dict], refs: _References) -> Table:
    """GPUs installed per GPU type from a quarter on (owned, reserved and its price): finance edits these."""
    from kvreg.figures.declarations import AGGREGATES

    t = Table("Fleet", [
        input_column("gpu", meaning="GPU type (from the GPUs sheet)", validation=refs.gpu_list, width=18),
        input_column("quarter", meaning="from this quarter on, written YEARQn (2026Q4)"),
        *[input_column(n, unit=AGGREGATES[n].unit, kind=AGGREGATES[n].kind, meaning=AGGREGATES[n].meaning)
          for n in ("gpus_owned", "gpus_reserved", "reserved_price_per_hour")],
    ])
    cells = {c.name: c.letter for c in t.columns}
    _in_force_columns(t, cells, "gpu", len(rows))
    t.write(ws, rows, freeze_after="B")
    return t


# --------------------------------------------------------------------------- summary


_SUMMARY_TOP = 4  # units row; names on 5, data from 6
_NO_TOTAL = ("unit_price", "price_per_hour", "reserved_price_per_hour")  # prices: a sum means nothing


def _summary_sheet(ws, quarter: str, gpus: list[dict], demand: Table, fleet: Table, gpu_table: Table) -> None:
    """What to buy per GPU type in the quarter in B1: the declared aggregates (kvreg.figures.declarations,
    compiled by kvreg.figures.aggregates to SUMIFS over the Demand and Fleet sheets' entries in force),
    and a bar chart. Change B1, or a fleet count on the Fleet sheet, and every figure recomputes."""
    from openpyxl.chart import BarChart, Reference
    from openpyxl.chart.data_source import AxDataSource, StrRef
    from openpyxl.comments import Comment
    from openpyxl.formatting.rule import FormulaRule
    from openpyxl.styles import Font, PatternFill

    from kvreg.figures.aggregates import AGGREGATE_COLUMNS, aggregate_excel, quarter_index_excel
    from kvreg.figures.declarations import AGGREGATES

    g = Grid(ws)
    g["A1"] = "quarter"
    g["A1"].font = HEADER_FONT
    set_text(g["B1"], quarter)
    g["B1"].style = "kv_input"
    g["B1"].number_format = "@"
    g["C1"] = "Change the quarter to see another one; every figure below recomputes."
    g["A2"] = "previous_quarter"
    g["A2"].font = HEADER_FONT
    g["B2"] = '=IF(RIGHT(B1,1)="1",(LEFT(B1,4)-1)&"Q4",LEFT(B1,5)&(RIGHT(B1,1)-1))'
    g["B2"].style = "kv_lookup"
    g["A3"] = "quarter_index"
    g["A3"].font = HEADER_FONT
    g["B3"] = "=" + quarter_index_excel("B1")
    g["B3"].style = "kv_lookup"
    g["C3"] = ("Demand and fleet entries hold until the next entry of the same plan or GPU type "
               "(the in_force columns of the Demand and Fleet sheets).")

    head = _SUMMARY_TOP + 1
    first = head + 1
    last = first + len(gpus) - 1
    letters = {"gpu": "A"}
    for i, name in enumerate(AGGREGATE_COLUMNS):
        letters[name] = get_column_letter(2 + i)
    g.cell(head, 1, "gpu").font = HEADER_FONT
    described = {n: (a.unit, a.kind, a.meaning) for n, a in AGGREGATES.items()}
    described.update({n: (INPUTS[n].unit, INPUTS[n].kind, INPUTS[n].meaning) for n in ("unit_price", "price_per_hour")})
    for name in AGGREGATE_COLUMNS:
        unit, _kind, meaning = described[name]
        col = 1 + AGGREGATE_COLUMNS.index(name) + 1
        g.cell(_SUMMARY_TOP, col, unit).font = UNIT_FONT
        h = g.cell(head, col, name)
        h.font = HEADER_FONT
        h.comment = Comment(f"{name}: {meaning}", "kvreg", width=300, height=80)
    for i, gpu in enumerate(gpus):
        row = first + i
        set_text(g.cell(row, 1), gpu["name"])
        g.cell(row, 1).style = "kv_input"
        g.cell(row, 1).number_format = "@"
        key = literal_key(f"$A{row}")
        for name in AGGREGATE_COLUMNS:
            if name in ("unit_price", "price_per_hour"):
                f = "=" + index_formula(gpu_table, name, match_formula(f"$A{row}", gpu_table, "gpu"), True)
            else:
                f = aggregate_excel(name, demand=demand.range, fleet=fleet.range,
                                    gpu_criterion=lambda rng, key=key: f'{rng},"="&{key}',
                                    cell_of=lambda n, row=row: f"{letters[n]}{row}")
            unit, kind, _ = described[name]
            c = g[f"{letters[name]}{row}"]
            c.value = f
            c.style = "kv_figure"
            c.number_format = number_format(unit, kind)
    total = last + 1
    g.cell(total, 1, "total").font = HEADER_FONT
    for name in AGGREGATE_COLUMNS:
        if name in _NO_TOTAL:
            continue
        unit, kind, _ = described[name]
        c = g[f"{letters[name]}{total}"]
        c.value = f"=SUM({letters[name]}{first}:{letters[name]}{max(last, first)})"
        c.style = "kv_figure"
        c.font = HEADER_FONT
        c.number_format = number_format(unit, kind)
    end = letters[AGGREGATE_COLUMNS[-1]]
    ws.freeze_panes = f"B{first}"
    ws.auto_filter.ref = f"A{head}:{end}{max(last, first)}"
    ws.column_dimensions["A"].width = 18
    for name in AGGREGATE_COLUMNS:
        ws.column_dimensions[letters[name]].width = max(14, len(name) + 3)
    nf = letters["plans_not_fitting"]
    ws.conditional_formatting.add(
        f"A{first}:{end}{max(last, first)}",
        FormulaRule(formula=[f"${nf}{first}>0"], fill=PatternFill(bgColor=NOT_FIT_FILL), font=Font(color="9C0006")),
    )

    chart = BarChart()
    chart.type = "col"
    chart.grouping = "clustered"
    chart.title = "GPUs per GPU type: needed, installed and to buy this quarter"
    chart.y_axis.title = "GPUs"
    chart.x_axis.title = "GPU type"
    for name in ("gpus_needed", "gpus_installed", "gpus_to_buy"):
        col = AGGREGATE_COLUMNS.index(name) + 2
        chart.add_data(Reference(ws, min_col=col, min_row=head, max_row=max(last, first)), titles_from_data=True)
    names = f"'Summary'!$A${first}:$A${max(last, first)}"
    for series in chart.series:  # GPU names are text: a string reference, not openpyxl's numeric default
        series.cat = AxDataSource(strRef=StrRef(f=names))
    chart.x_axis.delete = chart.y_axis.delete = False  # recent Excel hides axes left unspecified
    chart.height, chart.width = 9, 18
    ws.add_chart(chart, f"A{total + 3}")
    g.flush()


# --------------------------------------------------------------------------- assumptions, about


def _assumptions_sheet(ws) -> None:
    from kvreg.capacity import Question

    q = Question()
    g = Grid(ws)
    g["A1"] = "Assumptions"
    g["A1"].font = TITLE_FONT
    for col, name in enumerate(("name", "value", "unit", "meaning"), start=1):
        g.cell(HEADER_ROW, col, name).font = HEADER_FONT
    rows = [
        ("default_reserve", q.reserve, "fraction", "kv_input",
         "Share of GPU memory held back for activations and overheads in the Context sweep. Plans carry "
         "their own reserve (Plans sheet). Edit it: the sweep recomputes."),
        ("hours_per_month", HOURS_PER_MONTH, "hours", None,
         "Hours in a month for cost_per_month (8,760 / 12). Fixed in the declarations: the formulas carry 730 "
         "themselves, so editing this cell changes nothing."),
        ("gib_bytes", GIB, "bytes", None, "1 GiB = 2^30 bytes; every _gib figure divides bytes by it (GB = 10^9)."),
        ("sweep_kv_dtype", q.kv_dtypes[0], "text", None, "KV dtype of the Context sweep rows (editable per row there)."),
        ("sweep_block_size", q.block_size, "tokens", None, "paged-KV block of the Context sweep rows (editable there)."),
        ("sweep_gpus_per_node", q.gpus_per_node, "GPUs", None,
         "node size of the Context sweep; its TP is the minimum TP the capacity view picked when the workbook "
         "was written (an input: change it per row)."),
    ]
    for i, (name, value, unit, style, meaning) in enumerate(rows):
        r = FIRST_ROW + i
        g.cell(r, 1, name)
        c = g.cell(r, 2, value)
        if style:
            c.style = style
        c.number_format = number_format(unit, "real" if isinstance(value, float) else "int")
        g.cell(r, 3, unit)
        g.cell(r, 4, meaning).alignment = WRAP
    ws.column_dimensions["A"].width = 22
    ws.column_dimensions["B"].width = 16
    ws.column_dimensions["C"].width = 10
    ws.column_dimensions["D"].width = 90
    g.flush()


def _about_sheet(ws, conn, quarter: str, generated_at: str) -> None:
    from openpyxl.styles import PatternFill

    import kvreg
    from kvreg.db.engine import current_revision
    from kvreg.figures.views import views_hash

    lines: list[tuple[str, str, str | None]] = [
        ("kvreg capacity workbook", "", "title"),
        ("quarter", quarter, None),
        ("generated_at", generated_at, None),
        ("kvreg_version", kvreg.__version__, None),
        ("schema_revision", str(current_revision(conn) or ""), None),
        ("declarations_hash", views_hash(conn.dialect.name)[:16], None),
        ("", "", None),
        ("Legend", "", "bold"),
        ("input", "a value from the registry or a plan setting: edit it", INPUT_FILL),
        ("lookup", "a formula that fetches an input from another sheet (INDEX/MATCH): do not edit", LOOKUP_FILL),
        ("figure", "a formula compiled from kvreg's figure declarations, the same ones the SQL views use", "figure"),
        ("red row", "a plan that does not fit (fits = 0); its reason column says why", NOT_FIT_FILL),
        ("", "", None),
        ("What recomputes", "", "bold"),
        ("", "Every figure: edit a model's layers or heads (Models), a GPU's memory or price (GPUs), a dtype's "
             "bytes (Dtypes), a plan's settings such as reserve or TP (Plans), a quarter's users (Demand), the "
             "default reserve (Assumptions) or the quarter on Summary.", None),
        ("", "Rows added below a table are found by the lookups down to row %d (twice the table's rows in "
             "larger tables); copy the formulas of the row above into a new plan or demand row."
         % LOOKUP_LAST_ROW, None),
        ("", "Blank cells are unknown values (NULL in the registry); figures that need them stay blank.", None),
        ("", "Names are matched exactly (wildcards * ? ~ are taken literally) but without regard to case.", None),
        ("Functions used", ", ".join(FUNCTIONS_USED), None),
        ("Units", "GiB = 2^30 bytes, GB = 10^9 bytes; each column's unit is in row 1 and its number format.", None),
        ("Source", "Figures and their meaning: docs/workbook.md and SPEC.md in the kvreg repository.", None),
    ]
    g = Grid(ws)
    for i, (a, b, style) in enumerate(lines, start=1):
        ca = g.cell(i, 1)
        set_text(ca, a)
        cb = g.cell(i, 2)
        set_text(cb, b)
        cb.alignment = WRAP
        if style == "title":
            ca.font = TITLE_FONT
        elif style == "bold":
            ca.font = HEADER_FONT
        elif style == "figure":
            ca.style = "kv_figure"
        elif style:
            ca.fill = PatternFill("solid", start_color=style, end_color=style)
    ws.column_dimensions["A"].width = 22
    ws.column_dimensions["B"].width = 110
    g.flush()


# --------------------------------------------------------------------------- saving


def _save(wb, path: Path) -> None:
    """Save into a temporary file in the target folder, moved into place only when complete.
    Every zip entry carries the same fixed time (openpyxl's own save stamps the clock's time on
    the entries and on the modified property), so the same inputs give the same bytes."""
    from openpyxl.writer.excel import ExcelWriter

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".xlsx", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as raw:
            ExcelWriter(wb, _FixedTimeZip(raw)).save()  # closes the zip
        os.chmod(tmp, 0o644)  # mkstemp made it private; a report is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# Deflate level 3 compresses a large sheet's XML three times as fast as zlib's default (6), for a
# file about 15% larger (a 10,000-plan workbook: 38 MB instead of 33 MB).
DEFLATE_LEVEL = 3


class _FixedTimeZip(zipfile.ZipFile):
    """A zip for openpyxl's writer whose entries are all dated 1980-01-01 00:00 and deflated at
    DEFLATE_LEVEL. The streamed sheets arrive as files (`write`) and are copied in chunks, not
    read whole."""

    def __init__(self, file):
        super().__init__(file, "w", zipfile.ZIP_DEFLATED, allowZip64=True, compresslevel=DEFLATE_LEVEL)

    @staticmethod
    def _entry(name: str, size: int = 0) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info._compresslevel = DEFLATE_LEVEL  # what ZipFile.open(info, "w") compresses at (no argument for it)
        info.file_size = size
        return info

    def writestr(self, zinfo_or_arcname, data, compress_type=None, compresslevel=None):
        name = getattr(zinfo_or_arcname, "filename", zinfo_or_arcname)
        super().writestr(self._entry(name), data)

    def write(self, filename, arcname=None, compress_type=None, compresslevel=None):
        entry = self._entry(arcname or os.path.basename(filename), os.path.getsize(filename))
        with open(filename, "rb") as src, self.open(entry, "w") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
