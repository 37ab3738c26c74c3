"""`kvreg report`: write the quarterly capacity report folder (Markdown, charts, workbook, data.json)."""

from __future__ import annotations

import click

from kvreg.cli.common import open_db, user_errors


@click.command("report")
@click.option("--quarter", metavar="YYYYQn", help="Quarter to report, such as 2026Q4. Default: the current quarter.")
@click.option("--out", default="reports", show_default=True, metavar="FOLDER",
              help="Folder that holds one report folder per quarter (reports/2026-Q4/).")
@click.option("--format", "formats", default="md,xlsx", show_default=True, metavar="md,xlsx",
              help="What to write, comma-separated: md (Markdown and PNG charts), xlsx (live workbook). "
              "data.json is always written.")
@click.option("--compare", metavar="YYYYQn",
              help="Compare against this quarter's report under --out. Default: the previous quarter's, if present.")
@click.pass_context
@user_errors
def report_cmd(ctx, quarter, out, formats, compare):
    """Write the capacity report for a quarter: GPUs to buy, plan by plan capacity, the model
    catalog, a context sweep, charts, and what changed since the last report.

    The folder is written beside the target and swapped into place: a failed run leaves the
    previous report as it was. Example: kvreg report --quarter 2026Q4 --format md
    """
    from kvreg.core.units import parse_quarter
    from kvreg.report import parse_formats, write_report

    # Check every option before the registry is opened (or created).
    quarter = parse_quarter(quarter) if quarter else None
    compare = parse_quarter(compare) if compare else None
    chosen = parse_formats(formats)
    engine = open_db(ctx)
    try:
        report = write_report(engine, quarter, out, chosen, compare, registry_url=ctx.find_root().obj.get("db_url"))
    finally:
        engine.dispose()
    click.echo(f"wrote {report.folder}/: {', '.join(report.files)}")
