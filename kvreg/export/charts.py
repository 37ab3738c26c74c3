"""The report's charts as PNG files, drawn on matplotlib's Agg canvas (no pyplot, no display).

Both charts plot figures the report already holds (read from the views); nothing is computed
here. The files are byte-for-byte repeatable: matplotlib's own defaults rather than the
user's matplotlibrc, the DejaVu Sans font matplotlib ships, and no Software or time
metadata in the PNG.
"""

from __future__ import annotations

import math
from pathlib import Path

from kvreg.core.units import format_tokens

CONCURRENCY = "charts/concurrency.png"
GPUS_NEEDED = "charts/gpus-needed.png"

_RC = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "text.parse_math": False,  # a name containing $ is text, not mathtext
    "axes.titley": 1.0,  # a fixed title position: placing it automatically costs a third of the drawing
    "svg.hashsalt": "kvreg",
}
_DPI = 90
_MARKERS = "os^Dv"


def _label(name: object, limit: int = 40) -> str:
    """A registry name as chart text: one line, not too long, never hidden from the legend."""
    text = " ".join(str(name).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    # matplotlib leaves labels starting with an underscore out of legends.
    return " " + text if text.startswith("_") else text


def _context_label(tokens: int) -> str:
    return format_tokens(int(tokens))


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=_DPI, metadata={"Software": None})


MAX_LINES = 8  # lines per panel: more cannot be told apart
MAX_PANELS = 4  # GPUs shown beyond the plans' own: more panels make a chart nobody reads (and a slow one to draw)
_STYLES = ("-", "--", "-.", ":")


def concurrency_lines(sweep: list[dict], plans: list[dict] | None = None) -> list[dict]:
    """The panels of the concurrency chart, as drawn: every GPU a plan uses (by name), then the others
    by name while there are fewer than MAX_PANELS. Each panel: `gpu`; `lines`, at most MAX_LINES,
    each {"models", "tp", "points", "plan"}: a model drawn on the GPU (a point per context where its
    max concurrency is above 0), the plans' models first, then the others by name; models whose
    points are all the same (the same KV layout) share one line, named after all of them;
    `not_drawn`: models with no point (the weights do not fit at any context); `more`: models left
    out for room."""
    plans = plans or []
    plan_models = {p["model"] for p in plans}
    plan_gpus = sorted({p["gpu"] for p in plans} & {r["gpu"] for r in sweep})
    others = sorted({r["gpu"] for r in sweep} - set(plan_gpus))
    gpus = plan_gpus + others[:max(0, MAX_PANELS - len(plan_gpus))]
    points: dict[tuple[str, str], list[tuple[int, float]]] = {}
    tps: dict[tuple[str, str], set] = {}
    for r in sweep:
        tps.setdefault((r["gpu"], r["model"]), set()).add(r["tp"])
        if r["max_concurrency"] and r["max_concurrency"] > 0:  # zero (weights do not fit) has no place on a log axis
            points.setdefault((r["gpu"], r["model"]), []).append((r["context_tokens"], r["max_concurrency"]))
    panels = []
    for gpu in gpus:
        models = sorted({r["model"] for r in sweep if r["gpu"] == gpu})
        ordered = [m for m in models if m in plan_models] + [m for m in models if m not in plan_models]
        lines: dict[tuple, dict] = {}
        for m in ordered:
            xy = tuple(sorted(points.get((gpu, m), [])))
            if not xy:
                continue
            tp = "/".join(str(t) for t in sorted(tps[(gpu, m)]))
            line = lines.setdefault((xy, tp), {"models": [], "tp": tp, "points": list(xy), "plan": False})
            line["models"].append(m)
            line["plan"] = line["plan"] or m in plan_models
        drawn = list(lines.values())
        panels.append({"gpu": gpu, "lines": drawn[:MAX_LINES],
                       "not_drawn": [m for m in ordered if not points.get((gpu, m))],
                       "more": [m for line in drawn[MAX_LINES:] for m in line["models"]]})
    return panels


def _line_label(line: dict, starred: bool) -> str:
    names = " = ".join(_label(m, 28 if len(line["models"]) == 1 else 18) for m in line["models"])
    return f"{names} (TP {line['tp']})" + (" *" if starred and line["plan"] else "")


def concurrency_chart(sweep: list[dict], contexts: list[int], path: Path, plans: list[dict] | None = None):
    """Max concurrency against context, one panel per GPU (concurrency_lines: every GPU a plan uses),
    each drawn line named in the panel's legend with its TP, lines told apart by colour, marker and
    dash; both axes log. Returns the figure (tests read its lines and labels)."""
    # lazy: matplotlib (about 0.3 s) loads only when a chart is drawn
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    panels = concurrency_lines(sweep, plans)
    starred = bool(plans)
    ncols = 1 if len(panels) == 1 else 2
    nrows = math.ceil(len(panels) / ncols)
    height = 3.4 * nrows + 0.4
    fig = Figure(figsize=(11, height))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, gridspec_kw={"hspace": 0.5, "wspace": 0.18})
    fig.subplots_adjust(left=0.07, right=0.98, top=1 - 0.35 / height, bottom=0.45 / height)
    for ax, panel in zip(axes.flat, panels):
        ax.axhline(1, color="0.4", lw=0.8, ls="--")
        n = len(panel["lines"])
        for i, line in enumerate(panel["lines"]):
            xy = line["points"]
            # Lines that nearly overlap stay visible: each one drawn is thinner, with a smaller marker,
            # than the one before it, which shows around it; colour, marker and dash differ too.
            ax.plot([x for x, _ in xy], [y for _, y in xy], color=f"C{i}", marker=_MARKERS[i % len(_MARKERS)],
                    ls=_STYLES[i % len(_STYLES)], ms=3 + 0.6 * (n - 1 - i), lw=1 + 0.35 * (n - 1 - i),
                    label=_line_label(line, starred))
        title = _label(panel["gpu"])
        if panel["more"]:
            title += f" ({len(panel['more'])} more models not shown)"
        ax.set_title(title)
        if panel["not_drawn"]:
            names = ", ".join(_label(m, 20) for m in panel["not_drawn"][:4])
            extra = len(panel["not_drawn"]) - 4
            ax.text(0.01, 0.02, "Weights do not fit: " + names + (f" and {extra} more" if extra > 0 else ""),
                    transform=ax.transAxes, fontsize=6.5, color="0.3", va="bottom")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(min(contexts) / 1.5, max(contexts) * 1.5)
        ax.xaxis.set_major_locator(FixedLocator(contexts))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _context_label(v)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_locator(LogLocator(base=10))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,g}"))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("Context (tokens)")
        ax.grid(True, which="major", alpha=0.3)
        if panel["lines"]:
            ax.legend(loc="upper right", fontsize=6.5, frameon=True, framealpha=0.85)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.text(0.01, 0.5, "Max concurrency (context-length sequences per replica)", rotation=90, va="center")
    if starred:
        fig.text(0.5, 0.1 / height, "* a model a plan uses; the dashed grey line is one sequence", ha="center",
                 fontsize=7)
    _save(fig, path)
    return fig


def _tab20(i: int):
    # lazy: matplotlib (about 0.3 s) loads only when a chart is drawn
    from matplotlib import colormaps

    return colormaps["tab20"](i % 20)


def gpus_needed_chart(by_quarter: list[dict], quarters: list[str], quarter: str, path: Path):
    """GPUs needed per quarter, one bar per GPU type that needs any, every quarter of `quarters` on
    the axis (one where none is needed is marked so), the report's quarter shaded."""
    # lazy: matplotlib (about 0.3 s) loads only when a chart is drawn
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    chart = gpus_needed_series(by_quarter, quarters)
    fig = Figure(figsize=(9, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.08, 0.12, 0.68, 0.8))
    gpus = list(chart["series"])
    width = 0.8 / max(len(gpus), 1)
    if quarter in quarters:
        i = quarters.index(quarter)
        ax.axvspan(i - 0.45, i + 0.45, color="0.92", zorder=0)
    for j, (gpu, values) in enumerate(chart["series"].items()):
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(quarters))]
        bars = ax.bar(xs, values, width, label=_label(gpu), color=_tab20(j * 2), zorder=2)
        ax.bar_label(bars, labels=[f"{v:,}" if v else "" for v in values], fontsize=7)
    top = max((v for values in chart["series"].values() for v in values), default=0) or 1
    for i in chart["empty"]:
        ax.text(i, top * 0.02, "none\nneeded", ha="center", va="bottom", fontsize=7, color="0.35")
    ax.set_ylim(0, top * 1.12)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))  # 1,200 GPUs, not 1200
    ax.set_xticks(range(len(quarters)))
    ax.set_xticklabels(quarters)
    ax.set_xlim(-0.6, len(quarters) - 0.4)
    ax.set_xlabel(chart["xlabel"])
    ax.set_ylabel(chart["ylabel"])
    ax.set_title(f"GPUs needed per quarter (report quarter {quarter} shaded)")
    ax.grid(True, axis="y", alpha=0.3, zorder=1)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    _save(fig, path)
    return fig


def gpus_needed_series(by_quarter: list[dict], quarters: list[str]) -> dict:
    """What the GPUs-needed chart draws: the axis labels, a series (one value per quarter of
    `quarters`, 0 where the GPU type has no row) per GPU type that needs a GPU in any of them, and
    the positions of the quarters where none is needed."""
    needed = {(r["quarter"], r["gpu"]): r["gpus_needed"] or 0 for r in by_quarter}
    gpus = sorted({g for (q, g), v in needed.items() if v and q in quarters})
    series = {g: [needed.get((q, g), 0) for q in quarters] for g in gpus}
    empty = [i for i in range(len(quarters)) if not any(v[i] for v in series.values())]
    return {"xlabel": "Quarter", "ylabel": "GPUs needed", "series": series, "empty": empty}


def write_charts(data: dict, folder: Path) -> dict[str, str | None]:
    """Draw the charts for the report `data` into folder/charts; returns each chart's relative path
    (None when there is nothing to plot)."""
    charts: dict[str, str | None] = {"concurrency": None, "gpus_needed": None}
    sweep = data["sweep"]
    by_quarter = [r for r in data["procurement_by_quarter"] if r["gpus_needed"]]  # any GPU needed at all
    if not sweep and not by_quarter:
        return charts
    # lazy: matplotlib (about 0.3 s) loads only when a chart is drawn
    import matplotlib
    import matplotlib.style

    with matplotlib.style.context("default"), matplotlib.rc_context(_RC):
        if sweep:
            concurrency_chart(sweep, data["settings"]["sweep"]["contexts"], folder / CONCURRENCY, data.get("plans", []))
            charts["concurrency"] = CONCURRENCY
        if by_quarter:
            gpus_needed_chart(data["procurement_by_quarter"], data["procurement_quarters"], data["quarter"],
                              folder / GPUS_NEEDED)
            charts["gpus_needed"] = GPUS_NEEDED
    return charts
