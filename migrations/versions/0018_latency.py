"""the workload a deployment's latency is asked for

Revision ID: 0018
Revises: 0015
Create Date: 2026-12-06 00:30:00

Five columns on plan and on scenario (the scratch rows of `kvreg capacity`): input_tokens and
output_tokens (a request's prompt and generated tokens), concurrency (requests one replica serves at
once) and tpot_target_ms, ttft_target_ms (the latency targets). All NULL by default: no latency asked,
and every figure that does not read them is what it was. The constraint texts are copied from
kvreg.db.tables as they were when this revision was written.

Downgrading drops the ten columns.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0018'
down_revision: Union[str, None] = '0017'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

_TYPES = (('input_tokens', sa.BigInteger()), ('output_tokens', sa.BigInteger()), ('concurrency', sa.BigInteger()),
          ('tpot_target_ms', sa.Float()), ('ttft_target_ms', sa.Float()))


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {table: [(sa.Column(name, kind, nullable=True), [(f"ck_{table}_{name}", f"{name} IS NULL OR {name} > 0")])
                    for name, kind in _TYPES]
            for table in ('plan', 'scenario')}


def upgrade() -> None:
    add_columns(op, _columns())


def downgrade() -> None:
    drop_columns(op, _columns())
