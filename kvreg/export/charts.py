"""The report's charts as PNG files, drawn on matplotlib's Agg canvas (no pyplot, no display).

Both charts plot figures the report already holds (read from the views); nothing is computed
here. The files are byte-for-byte repeatable: matplotlib's own defaults rather than the
user's matplotlibrc, the DejaVu Sans font matplotlib ships, and no Software or time
metadata in the PNG.
"""

from __future__ import annotations

import math
from pathlib import Path

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
    from kvreg.units import format_tokens

    return format_tokens(int(tokens))


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=_DPI, metadata={"Software": None})


def concurrency_chart(sweep: list[dict], contexts: list[int], path: Path) -> None:
    """Max concurrency against context, one panel per GPU, one line per model, both axes log."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    gpus = sorted({r["gpu"] for r in sweep})
    models = sorted({r["model"] for r in sweep})
    ncols = 1 if len(gpus) == 1 else 2
    nrows = math.ceil(len(gpus) / ncols)
    legend_inches = 0.16 * math.ceil(len(models) / 4) + 0.5
    height = 2.9 * nrows + legend_inches
    fig = Figure(figsize=(11, height))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, gridspec_kw={"hspace": 0.45, "wspace": 0.18})
    fig.subplots_adjust(left=0.07, right=0.98, top=1 - 0.3 / height, bottom=legend_inches / height)
    style = {m: (f"C{i % 10}" if len(models) <= 10 else _tab20(i), _MARKERS[(i // 20) % len(_MARKERS)])
             for i, m in enumerate(models)}
    points: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for r in sweep:
        if r["max_concurrency"] and r["max_concurrency"] > 0:  # zero (weights do not fit) has no place on a log axis
            points.setdefault((r["gpu"], r["model"]), []).append((r["context_tokens"], r["max_concurrency"]))
    handles = {}
    for ax, gpu in zip(axes.flat, gpus):
        ax.axhline(1, color="0.4", lw=0.8, ls="--")
        for m in models:
            xy = points.get((gpu, m))
            if xy:
                color, marker = style[m]
                (line,) = ax.plot([x for x, _ in xy], [y for _, y in xy], color=color, marker=marker, ms=3, lw=1)
                handles.setdefault(m, line)
        ax.set_title(_label(gpu))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(min(contexts) / 1.5, max(contexts) * 1.5)
        ax.xaxis.set_major_locator(FixedLocator(contexts))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _context_label(v)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_locator(LogLocator(base=10))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.grid(True, which="major", alpha=0.3)
    for ax in list(axes.flat)[len(gpus):]:
        ax.set_visible(False)
    fig.text(0.01, 0.5, "max_concurrency (context-length sequences per replica)", rotation=90, va="center")
    names = [m for m in models if m in handles]
    fig.legend([handles[m] for m in names], [_label(m) for m in names], loc="lower center", ncol=4,
               frameon=False, fontsize=7)
    _save(fig, path)


def _tab20(i: int):
    from matplotlib import colormaps

    return colormaps["tab20"](i % 20)


def gpus_needed_chart(by_quarter: list[dict], quarter: str, path: Path) -> None:
    """GPUs needed per quarter, one bar per GPU type, the report's quarter shaded."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    quarters = sorted({r["quarter"] for r in by_quarter})
    gpus = sorted({r["gpu"] for r in by_quarter})
    needed = {(r["quarter"], r["gpu"]): r["gpus_needed"] or 0 for r in by_quarter}
    fig = Figure(figsize=(9, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.08, 0.12, 0.68, 0.8))
    width = 0.8 / len(gpus)
    if quarter in quarters:
        i = quarters.index(quarter)
        ax.axvspan(i - 0.45, i + 0.45, color="0.92", zorder=0)
    for j, gpu in enumerate(gpus):
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(quarters))]
        bars = ax.bar(xs, [needed.get((q, gpu), 0) for q in quarters], width, label=_label(gpu), color=_tab20(j * 2),
                      zorder=2)
        ax.bar_label(bars, fontsize=7)
    ax.set_xticks(range(len(quarters)))
    ax.set_xticklabels(quarters)
    ax.set_ylabel("gpus_needed")
    ax.set_title(f"GPUs needed per quarter (report quarter {quarter} shaded)")
    ax.grid(True, axis="y", alpha=0.3, zorder=1)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    _save(fig, path)


def write_charts(data: dict, folder: Path) -> dict[str, str | None]:
    """Draw the charts for the report `data` into folder/charts; returns each chart's relative path
    (None when there is nothing to plot)."""
    charts: dict[str, str | None] = {"concurrency": None, "gpus_needed": None}
    sweep = data["sweep"]
    by_quarter = [r for r in data["procurement_by_quarter"] if r["gpus_needed"]]
    if not sweep and not by_quarter:
        return charts
    import matplotlib
    import matplotlib.style

    with matplotlib.style.context("default"), matplotlib.rc_context(_RC):
        if sweep:
            concurrency_chart(sweep, data["settings"]["sweep"]["contexts"], folder / CONCURRENCY)
            charts["concurrency"] = CONCURRENCY
        if by_quarter:
            gpus_needed_chart(data["procurement_by_quarter"], data["quarter"], folder / GPUS_NEEDED)
            charts["gpus_needed"] = GPUS_NEEDED
    return charts
