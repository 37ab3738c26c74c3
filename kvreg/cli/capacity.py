"""`kvreg capacity`: ad-hoc questions answered straight from the capacity view.

Read through the one read path (kvreg.db.read): a SQLite registry that is already current is read
with the stdlib alone, so a what-if answers without loading SQLAlchemy; the answer is the same
either way.
"""

from __future__ import annotations

import click

from kvreg.app.options import capacity_options
from kvreg.cli.common import emit, format_option, read, user_errors


@click.command("capacity")
@capacity_options
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
