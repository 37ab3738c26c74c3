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
                 kv_cache_memory, block_size, fmt, input_tokens, output_tokens, concurrency, tpot_ms, ttft_ms,
                 **engine):
    """How many context-length sequences fit: KV per token and per sequence per GPU, weights, KV pool,
    max concurrency (a real number) and node concurrency. Nothing is saved. With --rule vllm or sglang,
    what that engine allocates and prints at startup (docs/engine-rules.md). With --input-tokens and
    --output-tokens, the latency a replica gives such requests at --concurrency (the context defaults to
    their sum); with --tpot-ms or --ttft-ms, the requests it serves within those targets and whether memory
    or latency binds (docs/methodology.md, "Users served within a latency target").

    Example: kvreg capacity --model Llama-3.1-8B --gpu H100-SXM --context 128K --format json

    Example: kvreg capacity --model Llama-3.1-70B --gpu H100-SXM --tp 4 --input-tokens 1024 --output-tokens 1024
    --concurrency 32 --tpot-ms 50 --ttft-ms 2000
    """
    from kvreg.app.capacity import ask, question_columns, question_from_options

    given = ctx.get_parameter_source("context") is not click.core.ParameterSource.DEFAULT
    q = question_from_options(models=models, gpus=gpus, context=context if given or input_tokens is None else None,
                              kv_dtype=kv_dtype, weight_dtype=weight_dtype, tp=tp, pp=pp, dp_attention=dp_attention,
                              gpus_per_node=gpus_per_node, reserve=reserve, kv_cache_memory=kv_cache_memory,
                              block_size=block_size, input_tokens=input_tokens, output_tokens=output_tokens,
                              concurrency=concurrency, tpot_ms=tpot_ms, ttft_ms=ttft_ms, **engine)
    rows = read(ctx, lambda conn: ask(conn, q))
    emit(rows, fmt, question_columns(q, table=fmt == "table"))
