"""fleet: GPUs installed per GPU type from a quarter on (owned, and reserved cloud capacity)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 07:00:00

A new table only: existing registries come through unchanged and start with no fleet, so every
GPU they need is still to buy. Downgrading drops the fleet (the counts are lost; `kvreg fleet
export` keeps them as CSV first).
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0004'
down_revision: Union[str, None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

QUARTER_CHECK = "length(quarter) = 6 AND substr(quarter, 5, 1) = 'Q' AND substr(quarter, 6, 1) IN ('1','2','3','4')"


def upgrade() -> None:
    op.create_table(
        'fleet',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('gpu_id', sa.Integer(), nullable=False),
        sa.Column('quarter', sa.String(), nullable=False),
        sa.Column('gpus_owned', sa.BigInteger(), nullable=False),
        sa.Column('gpus_reserved', sa.BigInteger(), server_default='0', nullable=False),
        sa.Column('reserved_price_per_hour', sa.Float(), nullable=True),
        sa.CheckConstraint('gpus_owned >= 0', name='ck_fleet_owned'),
        sa.CheckConstraint('gpus_reserved >= 0', name='ck_fleet_reserved'),
        sa.CheckConstraint('reserved_price_per_hour IS NULL OR reserved_price_per_hour >= 0', name='ck_fleet_price'),
        sa.CheckConstraint(QUARTER_CHECK, name='ck_fleet_quarter'),
        sa.ForeignKeyConstraint(['gpu_id'], ['gpu.id'], ondelete='RESTRICT'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('gpu_id', 'quarter', name='uq_fleet_gpu_quarter'),
    )


def downgrade() -> None:
    op.drop_table('fleet')
