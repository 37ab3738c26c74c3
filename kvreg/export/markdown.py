"""Render the capacity report as Markdown (Jinja), escaping every string the registry supplies.

The template never sees a raw registry string: every ``{{ }}`` passes through the
environment's ``finalize`` hook, which escapes plain strings; only values this module
produced itself (``Md``: formatted numbers, whole tables, trusted column names) pass
unchanged. So a model named ``a|b`` or ``<script>`` stays one inert table cell.

Nothing here computes a figure: numbers arrive from the views (through ``data.json``'s
dict) and are only formatted for display (thousands separators, decimals, GiB, percent).
"""

from __future__ import annotations

import functools
from pathlib import Path

import jinja2

import kvreg
from kvreg.core.units import fixed, format_tokens
from kvreg.figures.declarations import AGGREGATES, FIGURES, INPUTS
from kvreg.figures.labels import LABELS, SERVES_NO_USER, label, serves_no_user
from kvreg.figures.python import with_gpu_figures


class Md(str):
    """Markdown this module produced (safe to emit unescaped)."""


# Characters with inline meaning in GitHub-flavoured Markdown; backslash first so the
# escapes added for the others are not themselves escaped.
_BACKSLASHED = "\\`*_[]|#~"
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def escape(text: object) -> str:
    """Make a registry string inert in Markdown: one line, no table breaks, no HTML, no markup.

    Newlines and other whitespace runs become one space; ``\\ ` * _ [ ] | # ~`` are
    backslash-escaped; ``& < >`` become entities.
    """
    out = []
    for ch in " ".join(str(text).split()):
        if ch in _BACKSLASHED:
            out.append("\\" + ch)
        else:
            out.append(_ENTITIES.get(ch, ch))
    return "".join(out)


def trusted(name: str) -> Md:
    """A string from kvreg's own code (a column name, a file name), emitted as it is."""
    return Md(name)


def _unit(name: str) -> tuple[str, str]:
    """(unit, kind) of a view column, from its declaration (`last_report_x`, `x_since_last_report`,
    `previous_x` and `x_change` are x's)."""
    if name in AGGREGATES:
        return AGGREGATES[name].unit, AGGREGATES[name].kind
    name = name.removeprefix("last_report_").removesuffix("_since_last_report")
    name = name.removeprefix("previous_").removesuffix("_change")
    if name in AGGREGATES:
        return AGGREGATES[name].unit, AGGREGATES[name].kind
    if name in FIGURES:
        return FIGURES[name].unit, FIGURES[name].kind
    if name in INPUTS:
        return INPUTS[name].unit, INPUTS[name].kind
    return "", ""


def _int(value: float) -> str:
    return f"{int(round(value)):,}"


def display(value: object, name: str = "") -> Md:
    """One value for a Markdown cell, formatted by the unit its column name declares."""
    if isinstance(value, Md):
        return value
    if value is None:
        return Md("—")
    if isinstance(value, str):
        return Md(escape(value))
    if isinstance(value, bool):
        return Md("yes" if value else "no")
    if not isinstance(value, (int, float)):
        return Md(escape(value))
    if name.endswith(("_change", "_since_last_report")):
        magnitude = display(abs(value), name.removesuffix("_change").removesuffix("_since_last_report"))
        return magnitude if value == 0 else Md(("+" if value > 0 else "-") + magnitude)
    unit, kind = _unit(name)
    if unit == "flag":
        return Md("yes" if value else "no")
    if unit == "fraction":
        return Md(f"{fixed(value * 100, 1)}%")
    if unit in ("GiB", "GB", "USD", "USD/h"):
        return Md(fixed(value, 2, grouped=True))
    if unit == "bytes/s":
        return Md(f"{fixed(value / 1e12, 2, grouped=True)} TB/s")
    if unit == "tokens" and float(value).is_integer():
        return Md(_int(value))  # a number (131,072), never a label (128K), so a column reads as one kind
    if kind == "int" or (isinstance(value, int) and not kind) or unit in ("bytes", "params", "layers", "heads"):
        if float(value).is_integer():
            return Md(_int(value))
    return Md(fixed(value, 2, grouped=True))


def cells(values: list) -> Md:
    """One table row from already formatted cells."""
    return Md("| " + " | ".join(v if isinstance(v, Md) else escape(v) for v in values) + " |")


def header(name: str) -> str:
    """A column's header in words with its unit ("KV per token per GPU (bytes)"); the comparison's
    previous_x and x_change read "Previous ..." and "Change in ..."."""
    if name not in LABELS and name not in FIGURES and name not in INPUTS:
        if name.startswith("previous_"):
            return "Previous report: " + _lower_first(header(name.removeprefix("previous_")))
        if name.endswith("_change"):
            return "Change in " + _lower_first(header(name.removesuffix("_change")))
    if _unit(name)[0] == "bytes/s":  # its cells read in TB/s (display), and so does its header
        return label(name).replace("(bytes per second)", "(TB/s)")
    return label(name)


def _lower_first(text: str) -> str:
    """ "Max concurrency" -> "max concurrency"; "GPUs needed", "KV per token" stay as they are."""
    return text if text[1:2].isupper() else text[:1].lower() + text[1:]


def table(rows: list[dict], columns: list[str], headers: list[str] | None = None) -> Md:
    """A GitHub table of `rows`, one column per name in `columns` (headers default to each name's
    words with its unit)."""
    head = [trusted(h) for h in (headers or [header(c) for c in columns])]
    lines = [cells(head), cells([Md("---")] * len(columns))]
    lines += [cells([display(r.get(c), c) for c in columns]) for r in rows]
    return Md("\n".join(lines))


def figures_table(record: dict, columns: list[str]) -> Md:
    """A two-column table of one record's figures: the figure in words with its unit, its value."""
    return table([{"figure": trusted(header(c)), "value": display(record.get(c), c)} for c in columns],
                 ["figure", "value"], ["Figure", "Value"])


def catalog_table(models: list[dict], kv_dtypes: list[str]) -> Md:
    """The model catalog: one row per model, the KV figures once per KV dtype."""
    kv_cols = ["kv_bytes_per_token", "kv_bytes_per_token_full", "kv_gib_per_128k_sequence"]
    head = ["model", "weight_dtype", "weights_gb", "max_position_embeddings"]
    lines = [cells([trusted(header(h)) for h in head]
                   + [trusted(f"{header(c)}, {d} KV") for d in kv_dtypes for c in kv_cols])]
    lines.append(cells([Md("---")] * (len(head) + len(kv_cols) * len(kv_dtypes))))
    for m in models:
        row = [display(m.get(c), c) for c in head]
        row += [display((m["kv"].get(d) or {}).get(c), c) for d in kv_dtypes for c in kv_cols]
        lines.append(cells(row))
    return Md("\n".join(lines))


def gpu_table(gpus: list[dict]) -> Md:
    """The GPU types with their memory (shown in GiB), bandwidth and prices."""
    rows = [with_gpu_figures(g) for g in gpus]
    return table(rows, ["gpu", "vendor", "memory_gib", "memory_bandwidth_bytes_per_s", "price_per_hour", "unit_price"])


def gpus_by_quarter(rows: list[dict], quarters: list[str]) -> Md:
    """`gpus_needed` per quarter (rows) and GPU type (columns): the numbers behind the chart. Every
    quarter of `quarters` has its row: one where no GPU type needs a GPU says so ("none needed"), and a
    GPU type without a row in a quarter needs 0 then."""
    gpus = sorted({r["gpu"] for r in rows if r["gpus_needed"]})
    needed = {(r["quarter"], r["gpu"]): r["gpus_needed"] for r in rows}
    lines = [cells([trusted("Quarter")] + [display(g) for g in gpus]), cells([Md("---")] * (len(gpus) + 1))]
    for q in quarters:
        empty = not any(needed.get((q, g)) for g in gpus)
        lines.append(cells([Md(display(q) + (" (none needed)" if empty else ""))]
                           + [display(needed.get((q, g)) or 0, "gpus_needed") for g in gpus]))
    return Md("\n".join(lines))


def procurement_table(rows: list[dict], total: dict, columns: list[str]) -> Md:
    """The procurement table with its grand total across GPU types as the last row (`total` as
    kvreg.report.procurement_total gave it; a column whose blanks it left out is marked *)."""
    unknown = total.get("unknown") or {}
    last = {c: (Md(f"**{display(total[c], c)}**" + ("\\*" if c in unknown else "")) if c in total else Md(""))
            for c in columns}
    last[columns[0]] = trusted("**Total**")
    out = table(rows + [last], columns)
    notes = [f"\\* leaves out {', '.join(escape(g) for g in gpus)} (blank: {escape(header(c))} unknown)"
             for c, gpus in unknown.items() if c in columns]
    return Md(out + ("\n\n" + "; ".join(notes) if notes else ""))


def horizon_table(rows: list[dict], quarters: list[str] | None = None) -> Md:
    """The purchase schedule side by side: a row per GPU type and figure, a column per quarter of
    `quarters` (default: those of the rows). A GPU type without a row in a quarter has neither demand
    nor fleet then: its figures are 0; a quarter where no GPU is needed or installed says "(none)"; an
    order-by quarter already past is marked late."""
    quarters = quarters if quarters is not None else sorted({r["quarter"] for r in rows})
    gpus = sorted({r["gpu"] for r in rows})
    by = {(r["gpu"], r["quarter"]): dict(r) for r in rows}
    for r in by.values():
        if r.get("order_by") and r.get("order_late"):
            r["order_by"] = Md(escape(r["order_by"]) + " **late**")
    empty = {q for q in quarters if not any((by.get((g, q)) or {}).get(n) for g in gpus
                                            for n in ("gpus_needed", "gpus_installed"))}
    names = ["gpus_needed", "gpus_installed", "gpus_bought", "gpus_to_buy", "capex_to_buy", "order_by", "gpus_spare",
             "driving_plans"]

    lines = [cells([trusted(label("gpu")), trusted("Figure")]
                   + [Md(display(q) + (" (none)" if q in empty else "")) for q in quarters]),
             cells([Md("---")] * (len(quarters) + 2))]
    for g in gpus:
        for n in names:
            lines.append(cells([display(g), trusted(label(n))] + [
                display(by[(g, q)].get(n) if (g, q) in by else (None if n in ("order_by", "driving_plans") else 0), n)
                for q in quarters]))
    return Md("\n".join(lines))


def sweep_by_gpu(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """The sweep's rows grouped by GPU, in GPU name order."""
    out: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["gpu"], r["model"], r["context_tokens"])):
        out.setdefault(r["gpu"], []).append(r)
    return list(out.items())


def _sweep_cell(r: dict | None) -> Md:
    if r is None:
        return Md("—")
    cell = f"{display(r['max_concurrency'], 'max_concurrency')}"
    return Md(cell if r["fits"] else cell + " no fit")


def sweep_table(rows: list[dict], contexts: list[int]) -> Md:
    """One GPU's sweep: a row per model at one TP (named), a column per context, max concurrency."""
    by = {(r["model"], r["context_tokens"]): r for r in rows}
    models = sorted({r["model"] for r in rows})
    tps = {m: "/".join(str(t) for t in sorted({r["tp"] for r in rows if r["model"] == m})) for m in models}
    lines = [cells([trusted("Model"), trusted("TP")] + [trusted(f"{format_tokens(c)} context") for c in contexts]),
             cells([Md("---")] * (len(contexts) + 2))]
    lines += [cells([display(m), Md(tps[m])] + [_sweep_cell(by.get((m, c))) for c in contexts]) for m in models]
    return Md("\n".join(lines))


def changes(diff: dict) -> Md:
    """`added: a, b; removed: c; changed: d (field, field)` with every name escaped."""
    parts = []
    if diff["added"]:
        parts.append("added " + ", ".join(escape(n) for n in diff["added"]))
    if diff["removed"]:
        parts.append("removed " + ", ".join(escape(n) for n in diff["removed"]))
    if diff["changed"]:
        items = [f"{escape(c['name'])} ({', '.join(escape(f) for f in c['fields'])})" for c in diff["changed"]]
        parts.append("changed " + ", ".join(items))
    return Md("; ".join(parts))


def _finalize(value: object) -> object:
    if isinstance(value, Md):
        return value
    return display(value)


@functools.lru_cache(maxsize=1)
def environment():
    """The Jinja environment: templates from the kvreg.templates package, Markdown escaping."""
    folder = Path(kvreg.resource_dir("templates"))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        autoescape=False,  # HTML autoescaping is wrong for Markdown; _finalize escapes instead
        finalize=_finalize,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals.update(
        table=table, display=display, cells=cells, trusted=trusted, figures_table=figures_table,
        catalog_table=catalog_table, gpu_table=gpu_table, gpus_by_quarter=gpus_by_quarter, horizon_table=horizon_table,
        procurement_table=procurement_table, sweep_by_gpu=sweep_by_gpu,
        sweep_table=sweep_table, changes=changes, SERVES_NO_USER=SERVES_NO_USER, serves_no_user=serves_no_user,
    )
    env.filters.update(tokens=lambda n: Md(format_tokens(int(n))), trusted=trusted)
    return env


def render(context: dict, template: str = "capacity.md.j2") -> str:
    """Render the report template with `context` (the report data plus chart paths)."""
    return environment().get_template(template).render(**context)
