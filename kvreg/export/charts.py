"""The report's charts as PNG files, drawn on matplotlib's Agg canvas (no pyplot, no display).

Both charts plot figures the report already holds (read from the views); nothing is computed
here. The files are byte-for-byte repeatable: matplotlib's own defaults rather than the
user's matplotlibrc, the DejaVu Sans font matplotlib ships, and no Software or time
metadata in the PNG.
"""

from __future__ import annotations

import math
from pathlib import Path

from kvreg.units import format_tokens

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
MAX_PANELS = 4  # GPUs shown: the plans' first; more panels make a chart nobody reads (and a slow one to draw)


def concurrency_lines(sweep: list[dict], plan_models: set[str] | None = None) -> list[tuple[str, list[str]]]:
    """The panels of the concurrency chart: at most MAX_PANELS, (GPU, models) with at most MAX_LINES
    models each, the plans' models first (then the others by name, while there is room). GPUs the
    plans use come first, then the others by name."""
    plan_models = plan_models or set()
    gpus = sorted({r["gpu"] for r in sweep})
    used = {r["gpu"] for r in sweep if r["model"] in plan_models}
    gpus = [g for g in gpus if g in used] + [g for g in gpus if g not in used]
    panels = []
    for gpu in gpus[:MAX_PANELS]:
        models = sorted({r["model"] for r in sweep if r["gpu"] == gpu})
        ordered = [m for m in models if m in plan_models] + [m for m in models if m not in plan_models]
        panels.append((gpu, ordered[:MAX_LINES]))
    return panels


def concurrency_chart(sweep: list[dict], contexts: list[int], path: Path, plan_models: set[str] | None = None) -> None:
    """Max concurrency against context, one panel per GPU with at most MAX_LINES models (the plans'
    first), each line named in the panel's legend with its TP; both axes log."""
    # lazy: matplotlib (about 0.3 s) loads only when a chart is drawn
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    panels = concurrency_lines(sweep, plan_models)
    ncols = 1 if len(panels) == 1 else 2
    nrows = math.ceil(len(panels) / ncols)
    height = 3.4 * nrows + 0.4
    fig = Figure(figsize=(11, height))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, gridspec_kw={"hspace": 0.5, "wspace": 0.18})
    fig.subplots_adjust(left=0.07, right=0.98, top=1 - 0.35 / height, bottom=0.45 / height)
    points: dict[tuple[str, str], list[tuple[int, float]]] = {}
    tps: dict[tuple[str, str], set] = {}
    for r in sweep:
        tps.setdefault((r["gpu"], r["model"]), set()).add(r["tp"])
        if r["max_concurrency"] and r["max_concurrency"] > 0:  # zero (weights do not fit) has no place on a log axis
            points.setdefault((r["gpu"], r["model"]), []).append((r["context_tokens"], r["max_concurrency"]))
    for ax, (gpu, models) in zip(axes.flat, panels):
        ax.axhline(1, color="0.4", lw=0.8, ls="--")
        total = len({r["model"] for r in sweep if r["gpu"] == gpu})
        for i, m in enumerate(models):
            xy = sorted(points.get((gpu, m), []))
            tp = "/".join(str(t) for t in sorted(tps.get((gpu, m), ())))
            name = f"{_label(m, 28)} (TP {tp})" + (" *" if plan_models and m in plan_models else "")
            ax.plot([x for x, _ in xy], [y for _, y in xy], color=f"C{i}", marker=_MARKERS[i % len(_MARKERS)],
                    ms=3, lw=1.2, label=name)
        more = f" ({len(models)} of {total} models)" if total > len(models) else ""
        ax.set_title(_label(gpu) + more)
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
        ax.legend(loc="upper right", fontsize=6.5, frameon=True, framealpha=0.85)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.text(0.01, 0.5, "Max concurrency (context-length sequences per replica)", rotation=90, va="center")
    if plan_models:
        fig.text(0.5, 0.1 / height, "* a model a plan uses; the dashed line is one sequence", ha="center",
                 fontsize=7)
    _save(fig, path)


def _tab20(i: int):
    # lazy: matplotlib (about 0.3 s) loads only when a chart is drawn
    from matplotlib import colormaps

    return colormaps["tab20"](i % 20)


def gpus_needed_chart(by_quarter: list[dict], quarter: str, path: Path) -> None:
    """GPUs needed per quarter, one bar per GPU type, the report's quarter shaded."""
    # lazy: matplotlib (about 0.3 s) loads only when a chart is drawn
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
    # lazy: matplotlib (about 0.3 s) loads only when a chart is drawn
    import matplotlib
    import matplotlib.style

    with matplotlib.style.context("default"), matplotlib.rc_context(_RC):
        if sweep:
            plan_models = {p["model"] for p in data.get("plans", [])}
            concurrency_chart(sweep, data["settings"]["sweep"]["contexts"], folder / CONCURRENCY, plan_models)
            charts["concurrency"] = CONCURRENCY
        if by_quarter:
            gpus_needed_chart(data["procurement_by_quarter"], data["quarter"], folder / GPUS_NEEDED)
            charts["gpus_needed"] = GPUS_NEEDED
    return charts
