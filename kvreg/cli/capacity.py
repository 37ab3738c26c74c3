"""`kvreg capacity`: ad-hoc questions answered straight from the capacity view.

Read through the one read path (kvreg.db.read): a SQLite registry that is already current is read
with the stdlib alone, so a what-if answers without loading SQLAlchemy; the answer is the same
either way.
"""

from __future__ import annotations

import click

from kvreg.cli.common import emit, engine_options, format_option, read, user_errors


def _options(options: list):
    """Apply a list of click options as one decorator, in the order listed."""

    def decorate(fn):
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate


@click.command("capacity")
@click.option("--model", "models", multiple=True, help="Model name; repeat or comma-separate. Default: every model.")
@click.option("--gpu", "gpus", multiple=True, help="GPU name; repeat or comma-separate. Default: H100-SXM.")
@click.option("--context", default="128K", show_default=True,
              help="Context tokens, comma-separated; 128K = 131,072, 128k = 128,000, 1m = 1,000,000.")
@click.option("--kv-dtype", default="bf16", show_default=True, help="KV cache dtypes, comma-separated: bf16,fp8.")
@click.option("--weight-dtype", default="native", show_default=True, help="Weight dtype, or native (the model's own).")
@click.option("--tp", default="1", show_default=True, help="Tensor-parallel size, or auto (the smallest valid TP "
              "in the node at which a replica holds one whole sequence: fits = 1).")
@click.option("--pp", type=int, default=1, show_default=True, help="Pipeline-parallel size.")
@click.option("--dp-attention", type=int, default=1, show_default=True, help="Attention data-parallel size in a TP group; must divide TP.")
@click.option("--gpus-per-node", type=int, default=8, show_default=True)
@click.option("--reserve", default="0.12", show_default=True, help="Share of GPU memory held back, in [0, 1).")
@click.option("--kv-cache-memory", help="KV pool per GPU given directly (53GB, 40GiB); overrides --reserve.")
@click.option("--block-size", type=int, default=16, show_default=True,
              help="Paged-KV block in tokens (SGLang: its page size); 0: no rounding.")
@_options(engine_options(defaults=True))
@format_option()
@click.pass_context
@user_errors
def capacity_cmd(ctx, models, gpus, context, kv_dtype, weight_dtype, tp, pp, dp_attention, gpus_per_node, reserve,
                 kv_cache_memory, block_size, fmt, **engine):
    """How many context-length sequences fit: KV per token and per sequence per GPU, weights, KV pool,
    max concurrency (a real number) and node concurrency. Nothing is saved. With --rule vllm or sglang,
    what that engine allocates and prints at startup (docs/engine-rules.md).

    Example: kvreg capacity --model Llama-3.1-8B --gpu H100-SXM --context 128K --format json
    """
    from kvreg.capacity import ask, columns, question_from_options

    q = question_from_options(models=models, gpus=gpus, context=context, kv_dtype=kv_dtype,
                              weight_dtype=weight_dtype, tp=tp, pp=pp, dp_attention=dp_attention,
                              gpus_per_node=gpus_per_node, reserve=reserve, kv_cache_memory=kv_cache_memory,
                              block_size=block_size, **engine)
    rows = read(ctx, lambda conn: ask(conn, q))
    emit(rows, fmt, columns(q.rule, table=fmt == "table"))
