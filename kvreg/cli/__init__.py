"""The `kvreg` command: a thin shell over the library.

Subcommands live in their own modules and are imported only when invoked, so `kvreg --help`
and quick questions stay fast (SQLAlchemy, Alembic, XlsxWriter, openpyxl and matplotlib load on demand).
"""

from __future__ import annotations

import importlib
import sys

import click

from kvreg import __version__

# name -> (module, attribute, one-line help); the help is here so --help imports nothing.
_COMMANDS = {
    "init": ("kvreg.cli.db", "init_cmd", "Create or upgrade the registry and load the built-in catalog."),
    "db": ("kvreg.cli.db", "db_group", "Schema migrations: upgrade, downgrade, current, history; copy."),
    "model": ("kvreg.cli.models", "model_group", "Add, import, list, show and remove models."),
    "gpu": ("kvreg.cli.gpus", "gpu_group", "Add, list, show and remove GPUs."),
    "dtype": ("kvreg.cli.gpus", "dtype_group", "List and add number formats (KV and weight dtypes)."),
    "apply": ("kvreg.cli.sync", "apply_cmd", "Sync models, GPUs, plans, demand and fleet declared in a TOML file into the registry."),
    "export": ("kvreg.cli.sync", "export_cmd", "Write the registry's models, GPUs, plans, demand and fleet as TOML (the apply format)."),
    "capacity": ("kvreg.cli.capacity", "capacity_cmd", "Ad-hoc capacity: KV per sequence, pool, concurrency."),
    "plan": ("kvreg.cli.plans", "plan_group", "Deployment plans: add, set, list, show, remove, solve."),
    "demand": ("kvreg.cli.plans", "demand_group", "Target concurrent users per plan per quarter (carried forward)."),
    "fleet": ("kvreg.cli.fleet", "fleet_group", "GPUs installed per GPU type per quarter (carried forward)."),
    "calibrate": ("kvreg.cli.calibrate", "calibrate_cmd", "Set a vLLM or SGLang startup log against kvreg's figures."),
    "report": ("kvreg.cli.report", "report_cmd", "Write the quarterly capacity report (Markdown and Excel)."),
    "serve": ("kvreg.web.serve", "serve_cmd", "A local web page: what-if, registry tables, plans, procurement."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(_COMMANDS)

    def get_command(self, ctx, name):
        if name not in _COMMANDS:
            return None
        module, attr, _ = _COMMANDS[name]
        return getattr(importlib.import_module(module), attr)

    def invoke(self, ctx):
        # A usage error (bad option value, missing option) becomes one line, like every other error.
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            if exc.ctx is None:
                raise
            raise click.UsageError(f"{exc.format_message()} (see `{exc.ctx.command_path} --help`)") from None

    def format_commands(self, ctx, formatter):
        rows = [(name, help_) for name, (_, _, help_) in _COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--db",
    "db_url",
    envvar="KVREG_DB",
    default=None,
    metavar="URL",
    help="Registry database URL (SQLAlchemy form). Env: KVREG_DB. Default: sqlite:///registry.db "
    "in the current directory, created and seeded on first use. A writer waits up to KVREG_LOCK_TIMEOUT "
    "seconds (default 30) for another's lock.",
)
@click.version_option(__version__, prog_name="kvreg")
@click.pass_context
def cli(ctx, db_url):
    """kvreg: a capacity registry for LLM serving.

    Keeps models, GPUs and deployment plans in a registry and derives every capacity figure
    (KV bytes per token, KV pool, concurrency, GPUs to buy) as SQL views.
    """
    ctx.obj = {"db_url": db_url}


def main(argv=None) -> None:
    """The `kvreg` executable. Click's standalone mode would answer Ctrl-C with "Aborted!" and
    exit 1; kvreg says what happened (every change is one transaction, rolled back) and exits 130."""
    import errno

    try:
        rv = cli.main(args=argv, prog_name="kvreg", standalone_mode=False)
    except (KeyboardInterrupt, click.Abort):
        click.echo("kvreg: interrupted; nothing was written", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.errno != errno.EPIPE:  # a reader that stopped early (kvreg plan list | head) is no error
            raise
        sys.stdout = None  # nothing more can reach it; do not let interpreter shutdown try
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)
