"""`kvreg apply` and `kvreg export`: keep a registry's models, GPUs and dtypes in a reviewed TOML file."""

from __future__ import annotations

import click

from kvreg.cli.common import open_db, user_errors


@click.command("apply")
@click.argument("file", metavar="FILE")
@click.option("--dry-run", is_flag=True, help="Print the diff and write nothing.")
@click.option("--prune", is_flag=True,
              help="Also delete rows the file does not declare (only kinds the file has tables for; models and GPUs "
                   "a plan or a fleet entry uses are kept; a pruned plan takes its demand with it).")
@click.pass_context
@user_errors
def apply_cmd(ctx, file, dry_run, prune):
    """Sync the [[dtype]], [[gpu]], [[model]], [[plan]], [[demand]] and [[fleet]] tables of a TOML FILE
    (- for stdin) into the registry.

    Rows are matched by name (demand by plan and quarter, fleet by GPU and quarter): new ones are
    added, changed ones updated, nothing is deleted unless --prune. A [[plan]] names its model and
    GPU and gives its workload mix inline (workload = [{ name = "chat", avg_tokens = 1500, share = 0.8 }]). Keys are the registry's column names (see `kvreg export`); memory_bytes may be "80GiB",
    max_position_embeddings "128K", and params_b / active_params_b stand for parameter counts in
    billions. Everything is written in one transaction: a bad row names itself and nothing is written.
    """
    from kvreg.sync import describe, read_file, sync

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
    from kvreg.sync import export_text

    with open_db(ctx).connect() as conn:
        text = export_text(conn)
    if out is None:
        click.echo(text, nl=False)
        return
    _write_atomically(out, text)
    click.echo(f"wrote {out}")


def _write_atomically(path: str, text: str) -> None:
    """Replace the file in one step, so a failed export never leaves half a file behind."""
    import os
    import tempfile

    from kvreg.errors import KvregError

    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".kvreg-export-", suffix=".toml", dir=folder)
    except OSError as exc:
        raise KvregError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        raise KvregError(f"cannot write {path}: {exc.strerror or exc}") from None
