"""`kvreg apply` and `kvreg export`: keep a registry's models, GPUs and dtypes in a reviewed TOML file."""

from __future__ import annotations

import click

from kvreg.cli.common import open_db, read, user_errors


@click.command("apply")
@click.argument("file", metavar="FILE")
@click.option("--dry-run", is_flag=True, help="Print the diff and write nothing.")
@click.option("--prune", is_flag=True,
              help="TOML only: also delete rows the file does not declare (only kinds the file has tables for; models "
                   "and GPUs a plan or a fleet entry uses are kept; a pruned plan takes its demand with it).")
@click.option("--quarter", metavar="YYYYQn",
              help="Workbook only: the quarter the workbook must have been written for. Default: the current "
                   "quarter.")
@click.option("--take", type=click.Choice(["workbook", "registry"]),
              help="Workbook only: settle the cells changed both in the workbook and in the registry since the "
                   "workbook was written (conflicts) for the workbook's value or the registry's. Without it, a "
                   "conflict writes nothing.")
@click.pass_context
@user_errors
def apply_cmd(ctx, file, dry_run, prune, quarter, take):
    """Sync the [[dtype]], [[gpu]], [[model]], [[plan]], [[demand]] and [[fleet]] tables of a TOML FILE
    (- for stdin) into the registry, or read back the inputs finance changed in a capacity workbook
    (a FILE ending in .xlsx).

    TOML: rows are matched by name (demand by plan and quarter, fleet by GPU and quarter): new ones are
    added, changed ones updated, nothing is deleted unless --prune. A [[plan]] names its model and
    GPU and gives its workload mix inline (workload = [{ name = "chat", avg_tokens = 1500, share = 0.8 }]).
    Keys are the registry's column names (see `kvreg export`); memory_bytes may be "80GiB",
    max_position_embeddings "128K", and params_b / active_params_b stand for parameter counts in
    billions. Everything is written in one transaction: a bad row names itself and nothing is written.

    Workbook (the capacity.xlsx `kvreg report --format xlsx` wrote): users per plan and quarter
    (Demand; a new quarter's row is added), plan reserves, request lengths and latency targets (Plan
    detail), workload shares, tokens, lengths and targets (Workload), GPU prices, memory (GiB),
    bandwidth (GB/s) and whatever else `kvreg gpu set` may change (GPUs), fleet counts and reserved
    prices (Fleet; a new quarter's row is added).
    Only the cells changed since the workbook was
    written are applied: a value changed since in the registry stays. A cell changed in both is a
    conflict (listed with x): nothing is written until --take picks a side. Formulas are never read;
    a formula typed over with a number is reported and not applied. A row typed in without the
    formulas of the rows around it is refused (copy the row above instead). A workbook from another
    registry or written for another quarter is refused. Examples:

      kvreg apply reports/2026-Q4/capacity.xlsx --quarter 2026Q4 --dry-run

      kvreg apply capacity.xlsx --quarter 2026Q4

      kvreg apply capacity.xlsx --quarter 2026Q4 --take registry
    """
    if file.lower().endswith(".xlsx"):
        from kvreg.core.errors import KvregError
        from kvreg.core.units import parse_quarter
        from kvreg.interchange.workbook import apply_workbook, read_workbook

        if prune:
            raise KvregError("--prune is for TOML files: a workbook never deletes rows")
        if quarter:
            parse_quarter(quarter)
        book = read_workbook(file)  # whole, before the registry is opened: a bad file creates and locks nothing
        result = apply_workbook(open_db(ctx), book, quarter=quarter, dry_run=dry_run, take=take)
        lines = result.lines()
        for line in lines[:-1] if result.unresolved and not dry_run else lines:
            click.echo(line)
        if result.unresolved and not dry_run:
            raise KvregError(lines[-1])
        return
    if quarter or take:
        from kvreg.core.errors import KvregError

        raise KvregError(f"{'--quarter' if quarter else '--take'} is for workbooks (.xlsx): a TOML file has no "
                         f"{'quarter' if quarter else 'workbook state to take a side against'}")
    from kvreg.interchange.sync import describe, read_file, sync

    declared = read_file(file)  # before opening the registry: a missing file creates nothing
    result = sync(open_db(ctx), declared, where="stdin" if file == "-" else file, dry_run=dry_run, prune=prune)
    for line in describe(result):
        click.echo(line)


@click.command("export")
@click.option("--out", "out", metavar="FILE", help="Write to FILE instead of stdout.")
@click.pass_context
@user_errors
def export_cmd(ctx, out):
    """Write the registry's dtypes, GPUs, models, plans, demand and fleet as TOML (the format `kvreg apply` reads).

    Export, apply to another registry, export again: the text is identical.
    """
    from kvreg.interchange.toml_text import export_text

    text = read(ctx, export_text)  # the one read path: sqlite3 alone on a current SQLite registry
    if out is None:
        click.echo(text, nl=False)
        return
    _write_atomically(out, text)
    from kvreg.core.limits import show_path

    click.echo(f"wrote {show_path(out)}")


def _write_atomically(path: str, text: str) -> None:
    """Replace the file in one step, so a failed export never leaves half a file behind.

    The new file gets the mode the old one had (a new one: 0666 less the umask, as any program
    creating a file), and a symlink is written through: the file it points to is replaced and
    the link stays."""
    import os
    import stat
    import tempfile

    from kvreg.core.errors import KvregError
    from kvreg.core.limits import show_path

    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise KvregError(f"cannot write {show_path(path)}: {exc.strerror or exc}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):  # a device or pipe would be replaced by a file (/dev/null)
        raise KvregError(f"{show_path(path)} is not a regular file (a device, pipe, socket or folder): give a file"
                         " name, or leave out --out to print to standard output")
    if st is not None:
        mode = st.st_mode & 0o7777
    else:
        mask = os.umask(0)
        os.umask(mask)
        mode = 0o666 & ~mask
    try:
        fd, tmp = tempfile.mkstemp(prefix=".kvreg-export-", suffix=".toml", dir=folder)
    except OSError as exc:
        raise KvregError(f"cannot write {show_path(path)}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except OSError as exc:
        os.unlink(tmp)
        raise KvregError(f"cannot write {show_path(path)}: {exc.strerror or exc}") from None
