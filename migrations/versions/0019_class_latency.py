"""workload classes carry request lengths and latency targets

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06 03:30:00

Four columns on workload_class: input_tokens and output_tokens (a request of the class: its prompt and
generated tokens) and tpot_target_ms, ttft_target_ms (the latency it must meet). All NULL by default: a
class without them holds the plan's lengths and adds no target, so every figure is what it was. The
constraint texts are copied from kvreg.db.tables as they were when this revision was written.

Downgrading drops the four columns.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0019'
down_revision: Union[str, None] = '0018'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

_TYPES = (('input_tokens', sa.BigInteger()), ('output_tokens', sa.BigInteger()),
          ('tpot_target_ms', sa.Float()), ('ttft_target_ms', sa.Float()))


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {'workload_class': [(sa.Column(name, kind, nullable=True),
                                [(f"ck_workload_class_{name}", f"{name} IS NULL OR {name} > 0")])
                               for name, kind in _TYPES]}


def upgrade() -> None:
    add_columns(op, _columns())


def downgrade() -> None:
    drop_columns(op, _columns())
