"""workload classes: a plan's workload as a mix of request classes with shares

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 09:00:00

A new table only, so existing plans come through unchanged: a plan without classes keeps its
avg_tokens (or its context) as its workload. Downgrading drops the classes: a mixed plan falls
back to its avg_tokens, which kvreg clears when classes are set, so it then holds whole contexts.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0003'
down_revision: Union[str, None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        'workload_class',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('plan_id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(), nullable=False),
        sa.Column('avg_tokens', sa.BigInteger(), nullable=False),
        sa.Column('share', sa.Float(), nullable=False),
        sa.CheckConstraint('length(name) > 0', name='ck_workload_class_name'),
        sa.CheckConstraint('avg_tokens > 0', name='ck_workload_class_tokens'),
        sa.CheckConstraint('share > 0 AND share <= 1000000', name='ck_workload_class_share'),
        sa.ForeignKeyConstraint(['plan_id'], ['plan.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('plan_id', 'name', name='uq_workload_class_plan_name'),
    )


def downgrade() -> None:
    op.drop_table('workload_class')
