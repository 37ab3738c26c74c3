"""engine rules: the allocation rule and engine knobs of plans and scenarios, calibration against
an engine's startup log, the DeepSeek-V3.2 indexer cache and per-token-head KV scales

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 09:00:00

Every new column is nullable or has a server default, so existing rows come through unchanged:
a plan made before this revision follows the theoretical rule, as it did.

Columns are added and dropped in place (ALTER TABLE ... ADD/DROP COLUMN, with each CHECK
constraint on its column), not with Alembic's batch mode. On SQLite batch mode copies a table
into a new one and drops the old; with foreign keys enforced, dropping `plan` cascades into
`demand` (ON DELETE CASCADE: every demand row would vanish) and dropping a referenced `dtype`
or `model` fails outright. SQLite has added columns with CHECK constraints since 3.x and drops
them since 3.35. The constraint texts are copied from kvreg.db.tables.engine_check_sql as it
was when this revision was written, so the revision stays what it was if the tables change.

Downgrading is lossy by nature: a plan's rule, engine knobs and calibration, a model's indexer
bytes and a dtype's scale bytes are dropped (a vLLM plan becomes a theoretical one). Every other
value stays.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0002'
down_revision: Union[str, None] = '0001'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _deployment(table: str) -> list[tuple[sa.Column, list[tuple[str, str]]]]:
    """(column, [(check name, condition), ...]) added to plan and scenario."""
    return [
        (sa.Column('rule', sa.String(), server_default='theoretical', nullable=False), [
            (f"ck_{table}_rule", "rule IN ('theoretical', 'vllm', 'sglang')"),
            # vLLM pages every cache: a block of 0 tokens (kvreg's "no rounding") means nothing to it.
            (f"ck_{table}_vllm_block", "rule <> 'vllm' OR block_size > 0"),
        ]),
        (sa.Column('gpu_memory_utilization', sa.Float(), nullable=True), [
            (f"ck_{table}_gmu",
             "gpu_memory_utilization IS NULL OR (gpu_memory_utilization > 0 AND gpu_memory_utilization <= 1)"),
        ]),
        (sa.Column('max_num_batched_tokens', sa.BigInteger(), nullable=True), [
            (f"ck_{table}_batched_tokens", "max_num_batched_tokens IS NULL OR max_num_batched_tokens > 0"),
        ]),
        (sa.Column('max_concurrent_batches', sa.Integer(), nullable=True), [
            (f"ck_{table}_concurrent_batches", "max_concurrent_batches IS NULL OR max_concurrent_batches > 0"),
        ]),
        (sa.Column('activation_bytes', sa.BigInteger(), nullable=True), [
            (f"ck_{table}_activation", "activation_bytes IS NULL OR activation_bytes >= 0"),
        ]),
        (sa.Column('cuda_graph_bytes', sa.BigInteger(), nullable=True), [
            (f"ck_{table}_cuda_graph", "cuda_graph_bytes IS NULL OR cuda_graph_bytes >= 0"),
        ]),
        (sa.Column('mem_fraction_static', sa.Float(), nullable=True), [
            (f"ck_{table}_mfs",
             "mem_fraction_static IS NULL OR (mem_fraction_static > 0 AND mem_fraction_static <= 1)"),
        ]),
    ]


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    """Every column this revision adds, per table, in order."""
    return {
        'plan': _deployment('plan') + [
            (sa.Column('measured_kv_cache_tokens', sa.BigInteger(), nullable=True), [
                ("ck_plan_measured_tokens", "measured_kv_cache_tokens IS NULL OR measured_kv_cache_tokens >= 0"),
            ]),
            (sa.Column('measured_max_concurrency', sa.Float(), nullable=True), [
                ("ck_plan_measured_concurrency",
                 "measured_max_concurrency IS NULL OR measured_max_concurrency >= 0"),
            ]),
            (sa.Column('measured_engine_version', sa.String(), nullable=True), []),
        ],
        'scenario': _deployment('scenario'),
        'model': [
            (sa.Column('indexer_bytes_per_token_per_layer', sa.Integer(), nullable=True), [
                ("ck_model_indexer",
                 "indexer_bytes_per_token_per_layer IS NULL OR indexer_bytes_per_token_per_layer > 0"),
            ]),
        ],
        'dtype': [
            (sa.Column('scale_bytes_per_token_per_head', sa.Integer(), nullable=True), [
                ("ck_dtype_scale_bytes",
                 "scale_bytes_per_token_per_head IS NULL OR scale_bytes_per_token_per_head >= 0"),
            ]),
        ],
    }


def upgrade() -> None:
    add_columns(op, _columns())


def downgrade() -> None:
    drop_columns(op, _columns())
