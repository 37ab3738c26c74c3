"""What every command shares: opening the registry, turning errors into one line, printing rows."""

from __future__ import annotations

import functools

import click

from kvreg.export.text import FORMATS, KEY_COLUMNS, cell as _cell, normalise, render  # noqa: F401  (re-exported)
from kvreg.figures.inputs import DEPLOYMENT_DEFAULTS as _D, INPUTS
from kvreg.units import format_tokens


def _remember(ctx, param, value):
    """--columns and --wide reach `emit` through the context, not through every command's arguments."""
    ctx.meta[f"kvreg.{param.name}"] = value
    return value


def format_option(default: str = "table"):
    """--format, and the table's --columns and --wide."""
    fmt = click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default=default,
        show_default=True,
        help="Output: an aligned table for people, json (a list of objects) or csv for programs.",
    )
    columns = click.option(
        "--columns", metavar="A,B,...", expose_value=False, callback=_remember,
        help="Only these columns, in this order (names as in the csv header), in every format.")
    wide = click.option(
        "--wide", is_flag=True, expose_value=False, callback=_remember,
        help="Table: every column. By default a table fits the terminal (COLUMNS, else its width), the "
        "columns naming each row first; piped, it keeps every column.")

    def decorate(f):
        return fmt(columns(wide(f)))

    return decorate


def table_width() -> int | None:
    """How wide a table may be: COLUMNS when set, else the terminal's width; None (every column)
    when the output is not a terminal, so a pipe or a file gets the whole table."""
    import os
    import shutil
    import sys

    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def _chosen_columns(rows: list[dict], columns: list[str] | None) -> list[str] | None:
    """The columns --columns names (checked against the rows'), or `columns` as given."""
    ctx = click.get_current_context(silent=True)
    asked = ctx.meta.get("kvreg.columns") if ctx else None
    if not asked:
        return columns
    have = list(columns or [])
    have += [k for k in (rows[0] if rows else {}) if k not in have]  # any column of the rows
    picked = [c.strip() for c in asked.split(",") if c.strip()]
    unknown = [c for c in picked if c not in have]
    if unknown or not picked:
        raise click.ClickException(
            f"--columns: no column {', '.join(repr(c) for c in unknown) or 'given'}; the columns are "
            f"{', '.join(have)}")
    return picked


def engine_options(defaults: bool) -> list:
    """--rule and the engine's own settings (docs/engine-rules.md), for `kvreg capacity` and the plan
    commands; parse them with kvreg.rules.parse_engine_options. Without defaults (plan set) an option
    left out keeps the stored value."""
    clears = "" if defaults else "; none clears it"
    return [
        click.option("--rule", default=_D["rule"] if defaults else None, show_default=defaults,
                     help=f"Allocation rule: theoretical (a share of memory held back, --reserve, {_D['reserve']:.0%} by"
                     " default; see docs/methodology.md), vllm or sglang (what the engine allocates)."),
        click.option("--engine-version", help="vLLM/SGLang: the release to follow (0.10.1); its defaults and memory "
                     f"accounting differ by release (default: the latest kvreg knows){clears}."),
        click.option("--gpu-memory-utilization", help="vLLM: share of GPU memory it may use, in (0, 1] (default "
                     f"0.92 from v0.20, 0.9 before){clears}."),
        click.option("--max-num-batched-tokens", help="vLLM: tokens per scheduler step (default 8192; 2048 from v0.8 on GPUs under 70 GiB)"
                     f"{clears}."),
        click.option("--max-concurrent-batches", help="vLLM: batches in flight (default 2 at PP 1, else PP)"
                     f"{clears}."),
        click.option("--max-num-seqs", "--max-running-requests", "max_num_seqs",
                     help="vLLM --max-num-seqs, SGLang --max-running-requests: the most requests the engine runs at "
                     "once (default: vLLM 1024 from v0.8 on GPUs of 70 GiB or more, else 256; SGLang from its pool and "
                     f"context, 2048 to 4096){clears}."),
        click.option("--activation-memory", help="vLLM: measured peak activation memory per GPU (1.2GiB), instead "
                     f"of kvreg's estimate{clears}."),
        click.option("--cuda-graph-memory", help="vLLM: CUDA graph memory per GPU to take from the KV pool (0.5GiB); "
                     "releases before v0.21 take none, from v0.21 vLLM takes what it profiled (its log's 'CUDAGraph "
                     f"memory'), which kvreg does not estimate (default 0){clears}."),
        click.option("--non-torch-memory", help="vLLM: measured non-torch memory per GPU (0.2GiB), instead of kvreg's "
                     "estimate; SGLang: memory in use before the weights load (default 0)" f"{clears}."),
        click.option("--weights-memory", help="vLLM/SGLang: measured weight memory per GPU (14.99GiB), instead of "
                     f"params x bytes / (TP x PP){clears}."),
        click.option("--mem-fraction-static", help="SGLang: --mem-fraction-static, in (0, 1] (default: from the GPU memory and TP x PP, as SGLang's"
                     f" server derives it){clears}."),
    ]


def deployment_options(*, defaults: bool, many: bool = False, notes: bool = True, context: bool = True,
                       workload: bool = True, tp: str = str(_D["tp"]),
                       tp_auto: str = "the TP that serves the plan's peak demand, one user without demand, with the "
                                      "fewest GPUs: what `plan solve gpus` answers"):
    """The options of one deployment, declared once for `kvreg capacity` and the plan commands (the web
    page reads them from those commands). many: `kvreg capacity`'s lists (several models, GPUs,
    contexts and KV dtypes in one question). Without defaults (plan set) an option left out keeps
    the stored value."""

    def d(value):
        return value if defaults else None

    if many:
        model = click.option("--model", "models", multiple=True,
                             help="Model name; repeat or comma-separate. Default: every model.")
        gpu = click.option("--gpu", "gpus", multiple=True, help="GPU name; repeat or comma-separate. Default: H100-SXM.")
        context_help = "Context tokens, comma-separated; 128K = 131,072, 128k = 128,000, 1m = 1,000,000."
        kv_dtype_help = "KV cache dtypes, comma-separated: bf16,fp8."
        reserve = click.option("--reserve", default=str(_D["reserve"]), show_default=True,
                               help="Share of GPU memory held back, in [0, 1).")
        kv_cache_memory_help = "KV pool per GPU given directly (53GB, 40GiB); overrides --reserve."
    else:
        model = click.option("--model", help="Model name (see `kvreg model list`).")
        gpu = click.option("--gpu", help="GPU name (see `kvreg gpu list`).")
        context_help = "Max context per sequence (max_model_len): 128K = 131,072, 128k = 128,000."
        kv_dtype_help = "KV cache dtype: bf16, fp8, ..."
        reserve = click.option("--reserve", help=f"Share of GPU memory held back, in [0, 1) (default {_D['reserve']})"
                               + ("." if defaults else "; switches the plan from --kv-cache-memory back to the reserve."))
        kv_cache_memory_help = ("KV pool per GPU given directly (53GB, 40GiB), as vLLM's kv_cache_memory_bytes; not "
                                "with --reserve" + ("." if defaults else "; none clears it."))
    opts = [
        model,
        gpu,
        click.option("--gpus-per-node", type=int, default=d(_D["gpus_per_node"]), show_default=defaults),
        click.option("--tp", default=d(tp), show_default=defaults,
                     help=f"Tensor-parallel size, or auto ({tp_auto})."),
        click.option("--pp", type=int, default=d(_D["pp"]), show_default=defaults, help="Pipeline-parallel size."),
        click.option("--dp-attention", type=int, default=d(_D["dp_attention"]), show_default=defaults,
                     help="Attention data-parallel size in a TP group; must divide TP."),
        click.option("--kv-dtype", default=d(INPUTS["kv_dtype"].default), show_default=defaults, help=kv_dtype_help),
        click.option("--weight-dtype", default=d("native"), show_default=defaults,
                     help="Weight dtype, or native (the model's own)."),
    ]
    if context:
        opts.append(click.option("--context", default=d(format_tokens(_D["context_tokens"])), show_default=defaults, help=context_help))
    if workload:
        opts += [
            click.option("--avg-tokens", help="Average tokens a request holds (prompt + output); default: the context"
                         + ("." if defaults else "; none clears it.")),
            click.option("--workload", multiple=True, metavar="CLASS=TOKENS:SHARE",
                         help="A request class of a workload mix, repeatable: --workload chat=1500:0.8 --workload "
                         "docs=13000:0.2 (or both comma-separated in one). Shares are relative weights (80% works); "
                         "replaces --avg-tokens" + ("." if defaults else "; none clears the mix.")),
        ]
    opts += [
        reserve,
        click.option("--kv-cache-memory", help=kv_cache_memory_help),
        click.option("--block-size", type=int, default=d(_D["block_size"]), show_default=defaults,
                     help="Paged-KV block in tokens (SGLang: its page size); 0: no rounding."),
        *engine_options(defaults),
    ]
    if notes:
        opts.append(click.option("--notes", help="Free text."))

    def decorate(fn):
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return decorate


def latency_options():
    """The workload a latency is asked for (`kvreg capacity`): request lengths, concurrency, targets."""
    opts = [
        click.option("--input-tokens", help="Prompt tokens of a request (1024, 8k): adds tpot_ms, ttft_ms and tokens/s"
                     " per GPU; the context defaults to input + output tokens."),
        click.option("--output-tokens", help="Tokens a request generates; goes with --input-tokens."),
        click.option("--concurrency", help="Requests one replica serves at once, each sent when the last ends"
                     " (default 1)."),
        click.option("--tpot-ms", help="Target time per output token in ms: adds max_concurrency_within_slo and"
                     " binding_constraint (memory or latency)."),
        click.option("--ttft-ms", help="Target time to first token in ms (as --tpot-ms)."),
    ]

    def decorate(fn):
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return decorate


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
    """The registry, opened the full way (SQLAlchemy): for commands that write."""
    from kvreg.db.engine import open_registry

    return open_registry(ctx.find_root().obj.get("db_url"), on_seeded=say_created)


def say_created(url: str) -> None:
    """One notice on stderr when a command made a new registry: a user who runs kvreg from another
    folder gets another registry.db, and should not be surprised to find it holds only the catalog."""
    from kvreg.catalog import load_catalog
    from kvreg.db.engine import mask_url
    from kvreg.fastpath import sqlite_file

    cat = load_catalog()
    loaded = (f"the built-in catalog ({len(cat['models'])} models, {len(cat['gpus'])} GPUs, "
              f"{len(cat['dtypes'])} dtypes, {len(cat.get('plans', []))} example plans)")
    path = sqlite_file(url)
    if path:
        message = (f"kvreg: created {path} with {loaded}; from another folder, use it with "
                   f"--db sqlite:///{path} or KVREG_DB")
    else:
        message = f"kvreg: loaded {loaded} into the new registry {mask_url(url)}"
    click.echo(message, err=True)


def read(ctx: click.Context, fn, *, prepare: bool = True):
    """fn(conn) on the --db registry by the one read path (kvreg.db.read.read): sqlite3 alone for a
    current SQLite registry, SQLAlchemy otherwise; the same rows either way. Every read-only
    command reads this way, and prints what it gets with emit / emit_record below."""
    from kvreg.db.read import read as read_registry

    return read_registry(ctx.find_root().obj.get("db_url"), fn, prepare=prepare, on_seeded=say_created)


def emit(rows: list[dict], fmt: str, columns: list[str] | None = None, keys: tuple[str, ...] = KEY_COLUMNS) -> None:
    """Print rows as a table, json or csv; columns picks and orders keys (all keys by default), and
    --columns picks among all the rows' columns. A table fits the terminal (table_width), the `keys`
    columns first, unless --wide or --columns."""
    picked = _chosen_columns(rows, columns)
    ctx = click.get_current_context(silent=True)
    everything = picked is not columns or (ctx is not None and ctx.meta.get("kvreg.wide"))
    width = None if fmt != "table" or everything else table_width()
    click.echo(render(rows, fmt, picked, width, keys), nl=False)


def emit_record(record: dict, fmt: str) -> None:
    """One object: json as an object in a one-element list, table as key/value lines."""
    if fmt in ("json", "csv"):
        emit([record], fmt)
        return
    rec = normalise([record])[0]
    keys = _chosen_columns([rec], list(rec))  # --columns picks the lines
    width = max(len(k) for k in keys)
    for k in keys:
        click.echo(f"{k.ljust(width)}  {_cell(rec[k], k)}")
