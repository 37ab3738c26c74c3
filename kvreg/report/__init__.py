"""The quarterly capacity report (`kvreg report`): read the views, write one folder per quarter.

    reports/2026-Q4/
      capacity.md      the report (templates/capacity.md.j2)
      charts/*.png     the charts capacity.md embeds
      capacity.xlsx    the live workbook (kvreg.export.xlsx)
      data.json        every figure the report printed, plus the registry inputs the next
                       quarter's report compares against

Three steps, one module each: `gather` reads every figure from the views (and the workbook's data),
`compare` sets it against the earlier report's data.json, and `publish` writes the folder into a
temporary folder beside the target and swaps it into place, so a failed or interrupted run leaves
the previous report as it was. `write_report` runs them in turn; the registry is only read.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

from kvreg.core.errors import KvregError
from kvreg.core.units import current_quarter, parse_quarter, quarter_folder
from kvreg.db.read import snapshot
from kvreg.report.compare import compare_reports, load_previous
from kvreg.report.gather import write_workbook
from kvreg.report.gather import gather as gather_report
from kvreg.report.publish import publishing


FORMATS = ("md", "xlsx")


@dataclass
class Report:
    """A written report: its folder and the files in it (relative paths, sorted)."""
    folder: Path
    files: list[str]


# --------------------------------------------------------------------------- inputs


def parse_formats(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`md,xlsx` -> ("md", "xlsx"); anything else is a one-line error."""
    items = value.split(",") if isinstance(value, str) else list(value)
    chosen = []
    for item in items:
        name = item.strip().lower()
        if not name:
            continue
        if name not in FORMATS:
            raise KvregError(f"report format {item.strip()!r} is not supported: choose md, xlsx or md,xlsx")
        if name not in chosen:
            chosen.append(name)
    if not chosen:
        raise KvregError("no report format given: choose md, xlsx or md,xlsx")
    return tuple(f for f in FORMATS if f in chosen)


def _utc(now: dt.datetime | None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.timezone.utc)
    return now.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_files(conn, folder: Path, data: dict, formats: tuple[str, ...], asked: dict | None = None) -> None:
    if "md" in formats:
        # Lazy: matplotlib and Jinja load only when the Markdown report is asked for.
        from kvreg.export.charts import write_charts
        from kvreg.export.markdown import render

        charts = write_charts(data, folder)
        md = render({"data": data, "charts": charts})
        (folder / "capacity.md").write_text(md, encoding="utf-8", newline="\n")
    if "xlsx" in formats:
        # The report's own time, so the workbook is as repeatable as the other files.
        write_workbook(conn, folder / "capacity.xlsx", data["quarter"], generated_at=data["provenance"]["generated_at"],
                       asked=asked)
    body = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
    (folder / "data.json").write_text(body + "\n", encoding="utf-8", newline="\n")


def write_report(engine, quarter: str | None = None, out: str | Path = "reports",
                 formats: str | tuple[str, ...] = FORMATS, compare: str | None = None, *,
                 registry_url: str | None = None, now: dt.datetime | None = None) -> Report:
    """Write the report for `quarter` (default: the current one) to `out`/YYYY-Qn/ and return it.

    `formats`: md (Markdown and charts) and/or xlsx (the workbook); data.json is always written.
    `compare`: the quarter whose report to compare against (default: the previous quarter's, if any).
    `registry_url` is shown masked in the provenance (default: the engine's URL).
    """
    quarter = parse_quarter(quarter) if quarter else current_quarter()
    formats = parse_formats(formats)
    compare = parse_quarter(compare) if compare else None
    out = Path(out)
    target = out / quarter_folder(quarter)
    previous, note = load_previous(out, quarter, compare)
    url = registry_url or engine.url.render_as_string(hide_password=False)
    with publishing(out, target) as tmp, snapshot(engine) as conn:  # one consistent read that blocks no writer
        asked: dict = {}  # the sweep's capacity question, asked once for the report and the workbook
        data = gather_report(conn, quarter, generated_at=_utc(now), registry_url=url, asked=asked)
        data["comparison"] = compare_reports(previous, data, note) if previous else note
        _write_files(conn, tmp, data, formats, asked)
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    return Report(target, files)


__all__ = ["FORMATS", "Report", "parse_formats", "write_report"]
