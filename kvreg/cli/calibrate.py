"""`kvreg calibrate --log FILE`: a vLLM or SGLang startup log set against kvreg's figures."""

from __future__ import annotations

import json

import click

from kvreg.app.options import input_option
from kvreg.cli.common import emit, format_option, normalise, open_db, user_errors
from kvreg.figures.inputs import ENGINE_SETTINGS, INPUTS

TERM_COLUMNS = ["term", "logged", "predicted", "error_fraction", "with_logged_terms", "logged_as"]
SUMMARY_KEYS = ["engine", "format", "engine_version", "model", "gpu", "tp", "pp", "context_tokens",
                "gpu_memory_utilization", "mem_fraction_static", "kv_cache_gib", "kv_cache_tokens", "max_concurrency",
                "predicted_kv_cache_gib", "predicted_kv_cache_tokens", "predicted_max_concurrency", "has_kv_line"]


# The engine settings `calibrate` takes where a log does not show them (LogSettings' fields), and who reads each.
_LOG_SETTINGS = ("gpu_memory_utilization", "max_num_batched_tokens", "mem_fraction_static", "max_num_seqs")
_ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "engine": "vLLM --max-num-seqs, SGLang --max-running-requests"}


def log_options(fn):
    """The options that say what a log's run was where the log does not."""
    for option in reversed([
        click.option("--model", help="Registry model the log's run served (default: the one the log's model path or "
                     "Hugging Face id names, cache folders included, matched to the repo id of its config or its name)."),
        click.option("--gpu", help="Registry GPU (default: the one the log's device name is, as "
                     "kvreg/catalog/device_names.toml lists them, else the one whose reported memory is nearest the "
                     "log's total_gpu_memory, within 0.05 GiB; needed when two are as near)."),
        click.option("--context", help="Tokens per request for the concurrency figure (default: the log's "
                     "'Maximum concurrency for N tokens', else its max_model_len, else the model's claimed context)."),
        click.option("--weight-dtype", help="Weight dtype of the checkpoint (default: the model's native dtype)."),
        input_option("kv_dtype", default=None, help="KV cache dtype (default: the log's kv_cache_dtype, else "
                     f"{INPUTS['kv_dtype'].default})"),
        input_option("engine_version", default=None,
                     help="Engine release (default: the log's, else what its format implies)"),
        input_option("tp", default=None, help=f"Tensor-parallel size, when the log does not show it (default "
                     f"{INPUTS['tp'].default})"),
        input_option("pp", default=None, help=f"Pipeline-parallel size, when the log does not show it (default "
                     f"{INPUTS['pp'].default})"),
        # the engine settings a log may leave out, under their declared flags (aliases included)
        *[input_option(name, default=None, help=f"{_ENGINES[ENGINE_SETTINGS[name].engine]}: when the log does not"
                       " show it") for name in _LOG_SETTINGS],
    ]):
        fn = option(fn)
    return fn


def fill_settings(log, settings: dict) -> None:
    """The settings given on the command line where the log shows none (what it shows wins)."""
    from kvreg.core.errors import KvregError

    for name, value in settings.items():
        if value is None:
            continue
        logged = getattr(log, name)
        if logged is not None and logged != value:
            flag = "--" + name.replace("_", "-")
            raise KvregError(f"{flag} {value} disagrees with the log, which shows {logged}: leave {flag} out")
        setattr(log, name, value)


@click.command("calibrate")
@click.option("--log", "log_path", required=True, type=click.Path(dir_okay=False),
              help="A vLLM (V0 or V1) or SGLang startup log; the lines up to weight loading are enough.")
@log_options
@format_option()
@click.pass_context
@user_errors
def calibrate_cmd(ctx, log_path, model, gpu, context, weight_dtype, kv_dtype, engine_version, fmt, **settings):
    """Read a startup log and set it against kvreg's figures, term by term: total memory, requested
    memory, weights, activation peak, non-torch memory, KV memory, KV tokens and concurrency, as logged,
    as kvreg predicts them from the GPU alone (error_fraction = (predicted - logged) / logged) and
    with the log's own measured terms. The last is kvreg's prediction of the KV-cache lines: a log cut
    before them still gets kv_cache_gib, kv_cache_tokens and max_concurrency. Nothing is saved (see
    `kvreg plan calibrate NAME --log` to keep the measured terms for a plan).

    Examples: kvreg calibrate --log server.log --format json;
    kvreg calibrate --log server.log --model Llama-3.1-8B --gpu H100-SXM (for a log that names neither)
    """
    from kvreg.app.calibrate import compare
    from kvreg.core.enginelog import read_log
    from kvreg.core.units import parse_tokens

    log, source = read_log(log_path)
    fill_settings(log, settings)
    with open_db(ctx).connect() as conn:
        result = compare(conn, log, model=model, gpu=gpu, context=parse_tokens(context) if context else None,
                         weight_dtype=weight_dtype, kv_dtype=kv_dtype, engine_version=engine_version)
    result["log"] = source
    for note in result["notes"]:
        click.echo(f"note: {note}", err=True)
    if fmt == "json":
        out = {k: result[k] for k in ["log", *SUMMARY_KEYS]}
        out["logged"] = result["logged"]
        out["terms"] = result["terms"]
        click.echo(json.dumps(normalise([out])[0], ensure_ascii=False, indent=1))
        return
    if fmt == "csv":
        emit(result["terms"], fmt, TERM_COLUMNS)
        return
    r = result
    click.echo(f"{r['log']}: {r['engine']} {r['engine_version'] or '(release not logged)'} ({r['format']}), "
               f"{r['model']} on {r['gpu']}, TP {r['tp']} x PP {r['pp']}, {r['context_tokens']:,}-token requests")
    emit(result["terms"], "table", TERM_COLUMNS)
    line = "predicts" if not r["has_kv_line"] else "with the log's terms"
    click.echo(f"{line}: {r['kv_cache_gib']:.2f} GiB of KV cache, {r['kv_cache_tokens']:,} tokens, "
               f"{r['max_concurrency']:.2f}x concurrency")
