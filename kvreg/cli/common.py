"""What every command shares: opening the registry, turning errors into one line, printing rows."""

from __future__ import annotations

import functools

import click

# The text itself is made by kvreg.export.text, which the web page's API shares.
from kvreg.export.text import FORMATS, cell as _cell, normalise, render  # noqa: F401


def format_option(default: str = "table"):
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default=default,
        show_default=True,
        help="Output: an aligned table for people, json (a list of objects) or csv for programs.",
    )


def engine_options(defaults: bool) -> list:
    """--rule and the engine's own settings (docs/engine-rules.md), for `kvreg capacity` and the plan
    commands; parse them with kvreg.rules.parse_engine_options. Without defaults (plan set) an option
    left out keeps the stored value."""
    clears = "" if defaults else "; none clears it"
    return [
        click.option("--rule", default="theoretical" if defaults else None, show_default=defaults,
                     help="Allocation rule: theoretical (SPEC's reserve), vllm or sglang (what the engine allocates)."),
        click.option("--gpu-memory-utilization", help=f"vLLM: share of GPU memory it may use, in (0, 1] (default 0.92)"
                     f"{clears}."),
        click.option("--max-num-batched-tokens", help=f"vLLM: tokens per scheduler step (default 8192){clears}."),
        click.option("--max-concurrent-batches", help="vLLM: batches in flight (default 2 at PP 1, else PP)"
                     f"{clears}."),
        click.option("--activation-memory", help="vLLM: measured peak activation memory per GPU (1.2GiB), instead "
                     f"of kvreg's estimate{clears}."),
        click.option("--cuda-graph-memory", help="vLLM: measured CUDA graph memory per GPU (0.5GiB), instead of "
                     f"kvreg's estimate{clears}."),
        click.option("--mem-fraction-static", help=f"SGLang: --mem-fraction-static, in (0, 1] (default 0.88){clears}."),
    ]


def user_errors(fn):
    """Run a command; any error a user can fix becomes one line on stderr and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from kvreg.errors import user_error_types

        try:
            return fn(*args, **kwargs)
        except user_error_types() as exc:
            raise click.ClickException(one_line(str(exc))) from None

    return wrapper


def one_line(text: str) -> str:
    return " ".join(text.split())


def open_db(ctx: click.Context):
    from kvreg.db.engine import open_registry

    return open_registry(ctx.find_root().obj.get("db_url"))


def emit(rows: list[dict], fmt: str, columns: list[str] | None = None) -> None:
    """Print rows as a table, json or csv; columns picks and orders keys (all keys by default)."""
    click.echo(render(rows, fmt, columns), nl=False)


def emit_record(record: dict, fmt: str) -> None:
    """One object: json as an object in a one-element list, table as key/value lines."""
    if fmt in ("json", "csv"):
        emit([record], fmt)
        return
    rec = normalise([record])[0]
    width = max(len(k) for k in rec)
    for k, v in rec.items():
        click.echo(f"{k.ljust(width)}  {_cell(v, k)}")
