"""Ad-hoc capacity questions, answered by the `capacity` view.

The question's scenarios are written to the scratch `scenario` table and read back through
the view inside one transaction that is then rolled back: the registry is never changed, and
every figure comes from the same view SQL that plans and reports use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import insert, select, text

from kvreg.db.tables import Scenario
from kvreg.errors import KvregError
from kvreg.registry import check_dtype, get_gpu, get_model, model_names

JSON_COLUMNS = [
    "model", "gpu", "tp", "pp", "dp_attention", "gpus_per_node", "context_tokens", "kv_dtype", "weight_dtype",
    "reserve", "block_size", "kv_bytes_per_token", "kv_bytes_per_token_per_gpu", "kv_heads_per_gpu",
    "kv_bytes_per_sequence_per_gpu", "kv_gib_per_sequence_per_gpu", "state_bytes_per_sequence_per_gpu",
    "weights_gib_per_gpu", "usable_gib_per_gpu", "kv_pool_gib_per_gpu", "kv_pool_tokens", "fits", "reason",
    "max_concurrency", "whole_sequences", "replicas_per_node", "node_concurrency", "decode_tokens_per_s_per_sequence",
    "context_within_claim",
]
TABLE_COLUMNS = ["model", "gpu", "tp", "context_tokens", "kv_dtype", "kv_bytes_per_token_per_gpu",
                 "kv_gib_per_sequence_per_gpu", "weights_gib_per_gpu", "kv_pool_gib_per_gpu", "max_concurrency",
                 "node_concurrency", "reason"]


@dataclass
class Question:
    models: list[str] = field(default_factory=list)  # empty: every model
    gpus: list[str] = field(default_factory=lambda: ["H100-SXM"])
    contexts: list[int] = field(default_factory=lambda: [131072])
    kv_dtypes: list[str] = field(default_factory=lambda: ["bf16"])
    weight_dtype: str | None = None  # None: the model's native weight dtype
    tp: int | str = 1  # or "auto": SPEC's minimum TP
    pp: int = 1
    dp_attention: int = 1
    gpus_per_node: int = 8
    reserve: float = 0.12
    kv_cache_memory_bytes: int | None = None
    block_size: int = 16


def candidate_tps(gpus_per_node: int, pp: int) -> list[int]:
    """TPs SPEC considers within a node: 1, 2, 4, 8, ... up to gpus_per_node // pp."""
    out, tp = [], 1
    while tp * pp <= gpus_per_node:
        out.append(tp)
        tp *= 2
    return out


def ask(conn, q: Question) -> list[dict]:
    """Answer a capacity question; returns view rows in question order."""
    models = [get_model(conn, m) for m in (q.models or model_names(conn))]
    gpus = [get_gpu(conn, g) for g in q.gpus]
    for d in q.kv_dtypes:
        check_dtype(conn, d, "kv", "KV dtype")
    if q.weight_dtype:
        check_dtype(conn, q.weight_dtype, "weight", "weight dtype")
    if q.pp < 1 or q.dp_attention < 1 or q.gpus_per_node < 1:
        raise KvregError("--pp, --dp-attention and --gpus-per-node must be at least 1")
    if q.block_size < 0:
        raise KvregError("--block-size must be 0 (no rounding) or a positive number of tokens")
    auto = q.tp == "auto"
    tps = candidate_tps(q.gpus_per_node, q.pp) if auto else [int(q.tp)]
    if not auto and int(q.tp) * q.pp > q.gpus_per_node:
        raise KvregError(f"TP {q.tp} x PP {q.pp} needs {int(q.tp) * q.pp} GPUs but a node has {q.gpus_per_node} "
                         "(--gpus-per-node)")
    if not tps:
        raise KvregError(f"PP {q.pp} does not fit in a node of {q.gpus_per_node} GPUs")

    rows = []
    order = 0
    for m in models:
        for g in gpus:
            for ctx in q.contexts:
                for kvd in q.kv_dtypes:
                    for tp in tps:
                        rows.append(dict(
                            model_id=m["id"], gpu_id=g["id"], gpus_per_node=q.gpus_per_node, tp=tp, pp=q.pp,
                            dp_attention=q.dp_attention, kv_dtype=kvd, weight_dtype=q.weight_dtype or m["weight_dtype"],
                            context_tokens=ctx, avg_tokens=None, reserve=q.reserve,
                            kv_cache_memory_bytes=q.kv_cache_memory_bytes, block_size=q.block_size,
                        ))
                    order += 1
    trans = conn.begin_nested() if conn.in_transaction() else conn.begin()
    try:
        conn.execute(text("DELETE FROM scenario"))
        conn.execute(insert(Scenario), rows)
        result = [dict(r) for r in conn.execute(text("SELECT * FROM capacity ORDER BY id")).mappings()]
    finally:
        trans.rollback()

    if not auto:
        for r in result:
            if not r["tp_valid"] and int(q.tp) * q.pp <= q.gpus_per_node:
                valid = valid_tps(conn, r["model"], q.gpus_per_node, q.pp)
                raise KvregError(
                    f"TP {q.tp} is not valid for {r['model']} (attention heads must divide by TP, and KV heads by TP "
                    f"or TP by KV heads): valid TPs in a {q.gpus_per_node}-GPU node are {', '.join(map(str, valid))}"
                )
        return result
    # --tp auto: per question, the smallest valid TP that holds one sequence, else the largest valid TP (why not).
    picked = []
    for i in range(0, len(result), len(tps)):
        group = [r for r in result[i:i + len(tps)] if r["tp_valid"]]
        fitting = [r for r in group if r["max_concurrency"] and r["max_concurrency"] >= 1]
        if fitting:
            picked.append(fitting[0])
        elif group:
            picked.append(group[-1])
        else:
            picked.append(result[i])
    return picked


def valid_tps(conn, model: str, gpus_per_node: int = 8, pp: int = 1) -> list[int]:
    """Every TP from 1 to gpus_per_node // pp that the `tp_valid` figure accepts for this model."""
    m = get_model(conn, model)
    g = conn.execute(text("SELECT id FROM gpu ORDER BY id LIMIT 1")).scalar()
    rows = [dict(model_id=m["id"], gpu_id=g, gpus_per_node=gpus_per_node, tp=tp, pp=pp, dp_attention=1,
                 kv_dtype="bf16", weight_dtype=m["weight_dtype"], context_tokens=1, avg_tokens=None, reserve=0.12,
                 kv_cache_memory_bytes=None, block_size=0) for tp in range(1, gpus_per_node // pp + 1)]
    trans = conn.begin_nested() if conn.in_transaction() else conn.begin()
    try:
        conn.execute(text("DELETE FROM scenario"))
        conn.execute(insert(Scenario), rows)
        out = list(conn.execute(text("SELECT tp FROM capacity WHERE tp_valid = 1 ORDER BY tp")).scalars())
    finally:
        trans.rollback()
    return out


def model_context_figures(conn, model: str, gpu: str = "H100-SXM", kv_dtype: str = "bf16") -> list[dict]:
    """`kvreg model show`: the figures at 8K, 32K, 128K, 1m and the model's claimed context."""
    m = get_model(conn, model)
    contexts = sorted({8192, 32768, 131072, 1000000, int(m["max_position_embeddings"])})
    return ask(conn, Question(models=[model], gpus=[gpu], contexts=contexts, kv_dtypes=[kv_dtype], tp="auto"))


__all__ = ["Question", "ask", "valid_tps", "candidate_tps", "JSON_COLUMNS", "TABLE_COLUMNS", "select"]
