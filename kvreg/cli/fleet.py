"""`kvreg fleet ...`: GPUs installed per GPU type per quarter, and the CSV import/export shared with
`kvreg demand import|export`."""

from __future__ import annotations

from pathlib import Path

import click

from kvreg.cli.common import emit, format_option, open_db, read, user_errors

FLEET_TABLE_COLUMNS = ["gpu", "quarter", "gpus_owned", "gpus_reserved", "reserved_price_per_hour", "carried_from"]


@click.group("fleet")
def fleet_group():
    """GPUs installed per GPU type from a quarter on: owned, and reserved cloud capacity. An entry
    holds in later quarters until the GPU type's next entry. `kvreg plan rollup` sets them against
    what the plans need: GPUs to buy and spare."""


@fleet_group.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("gpu")
@click.argument("quarter")
@click.argument("owned")
@click.option("--reserved", help="Committed or reserved cloud GPUs, counted apart from the owned ones (default 0).")
@click.option("--reserved-price", help="Price per reserved GPU-hour in USD (for reserved_cost_per_month).")
@click.pass_context
@user_errors
def fleet_set(ctx, gpu, quarter, owned, reserved, reserved_price):
    """Set the GPUs of one type installed from QUARTER on (added, or changed if already set).

    Example: kvreg fleet set H100-SXM 2026Q4 64 --reserved 16 --reserved-price 2.1
    """
    from kvreg.app.fleet import set_fleet

    with open_db(ctx).begin() as conn:
        r = set_fleet(conn, gpu, quarter, owned, reserved, reserved_price)
    extra = f" + {r['gpus_reserved']} reserved" if r["gpus_reserved"] else ""
    click.echo(f"{r['action']} fleet of {r['gpu']} from {r['quarter']}: {r['gpus_owned']} owned{extra}")


@fleet_group.command("list")
@click.option("--gpu", help="Only this GPU type.")
@click.option("--quarter", help="The fleet in force in this quarter (2026Q4): carried entries name the quarter "
              "they were set in. Default: every entry.")
@format_option()
@click.pass_context
@user_errors
def fleet_list(ctx, gpu, quarter, fmt):
    """Fleet entries per GPU type and quarter (the fleet_quarter view).

    Example: kvreg fleet list --quarter 2027Q2
    """
    from kvreg.db.read import list_fleet

    rows = read(ctx, lambda conn: list_fleet(conn, gpu, quarter))
    emit(rows, fmt, FLEET_TABLE_COLUMNS if fmt == "table" else None)


@fleet_group.command("remove")
@click.argument("gpu")
@click.argument("quarter")
@click.pass_context
@user_errors
def fleet_remove(ctx, gpu, quarter):
    """Remove one fleet entry; the GPU type's entry before it then holds on."""
    from kvreg.app.fleet import remove_fleet

    with open_db(ctx).begin() as conn:
        remove_fleet(conn, gpu, quarter)
    click.echo(f"removed fleet of {gpu} in {quarter}")


def import_command(group: click.Group, kind: str, header: str, example: str):
    """`kvreg <kind> import FILE [--dry-run]` for demand and fleet."""
    help_text = (
        f"Set {kind} from a CSV file with the header {header}: every row or none. A bad row is named by its "
        f"line and nothing is written; --dry-run shows the diff first. `kvreg {kind} export` writes the same "
        f"format.\n\nExample: kvreg {kind} import {example} --dry-run"
    )

    @group.command("import", help=help_text)
    @click.argument("path", metavar="FILE", type=click.Path(dir_okay=False, allow_dash=True))
    @click.option("--dry-run", is_flag=True, help="Print what would change (added, changed, unchanged) and write nothing.")
    @format_option()
    @click.pass_context
    @user_errors
    def import_cmd(ctx, path, dry_run, fmt):
        from kvreg.interchange import bulk

        data = _read(path)
        name = "-" if path == "-" else Path(path).name
        with open_db(ctx).begin() as conn:
            diff = getattr(bulk, f"import_{kind}")(conn, data, name, dry_run=dry_run)
        changed = [d for d in diff if d["action"] != "unchanged"]
        if fmt != "table":
            emit(diff, fmt)
            return
        if changed:
            emit(changed, fmt)
        counts = {a: sum(d["action"] == a for d in diff) for a in ("added", "changed", "unchanged")}
        verb = "would set" if dry_run else "set"
        click.echo(f"{verb} {len(diff)} rows of {name}: {counts['added']} added, {counts['changed']} changed, "
                   f"{counts['unchanged']} unchanged" + (" (dry run: nothing written)" if dry_run else ""))

    return import_cmd


def export_command(group: click.Group, kind: str):
    @group.command("export", help=f"Write every {kind} entry as CSV, the format `kvreg {kind} import` reads.")
    @click.option("--output", "-o", "path", type=click.Path(dir_okay=False), help="Write to this file (default: stdout).")
    @click.pass_context
    @user_errors
    def export_cmd(ctx, path):
        from kvreg.interchange import bulk

        with open_db(ctx).connect() as conn:
            data = getattr(bulk, f"export_{kind}")(conn)
        if path:
            try:
                Path(path).write_text(data, encoding="utf-8")
            except OSError as exc:  # no such folder, a full disk, no permission: one line, as every error
                from kvreg.core.errors import KvregError

                raise KvregError(f"cannot write {path}: {exc.strerror or exc}") from None
            click.echo(f"wrote {len(data.splitlines()) - 1} rows to {path}")
        else:
            click.echo(data, nl=False)

    return export_cmd


def _read(path: str) -> str:
    """A CSV file or stdin through kvreg.core.limits (regular files only, at most MAX_CSV_BYTES), as UTF-8."""
    from kvreg.core.errors import KvregError
    from kvreg.core.limits import MAX_CSV_BYTES, read_input, show_path

    raw = read_input(path, MAX_CSV_BYTES, "CSV")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        where = "stdin" if path == "-" else show_path(path)
        raise KvregError(f"{where} is not UTF-8 text: save it as CSV UTF-8") from None


import_command(fleet_group, "fleet", "gpu,quarter,gpus_owned[,gpus_reserved,reserved_price_per_hour]", "fleet.csv")
export_command(fleet_group, "fleet")
