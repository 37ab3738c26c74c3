"""a GPU type's lead time and node size, for the purchase schedule

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05 16:40:00

Two gpu columns. lead_time_quarters: quarters from placing an order to the GPUs serving; the purchase
schedule's order_by is the quarter a purchase lands in less this many (0, the default: ordered in the
quarter it is needed). node_gpus: GPUs in one node of the type as it is bought (8, the default);
`plan rollup --whole-nodes` rounds purchases up to whole nodes of it. The constraint texts are copied
from kvreg.db.tables as they were when this revision was written.

Downgrading drops both columns.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0014'
down_revision: Union[str, None] = '0013'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {'gpu': [
        (sa.Column('lead_time_quarters', sa.Integer(), nullable=False, server_default='0'), [
            ("ck_gpu_lead_time", "lead_time_quarters >= 0")]),
        (sa.Column('node_gpus', sa.Integer(), nullable=False, server_default='8'), [
            ("ck_gpu_node_gpus", "node_gpus > 0")]),
    ]}


def upgrade() -> None:
    add_columns(op, _columns())


def downgrade() -> None:
    drop_columns(op, _columns())
