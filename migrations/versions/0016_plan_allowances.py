"""what `kvreg plan optimize` may change in a plan: the GPU types and KV dtypes it allows

Revision ID: 0016
Revises: 0014
Create Date: 2026-12-06 00:10:00

Two plan columns, comma-separated names (NULL: none beyond the plan's own). allow_gpus: GPU types
the optimizer may move the plan to (`kvreg plan set NAME --allow-gpus H100-SXM,H200`); allow_kv_dtypes:
KV dtypes it may use (`--allow-kv-dtypes bf16,fp8`). The plan's own GPU and KV dtype are always
allowed; TP is free within the model's valid layouts; PP is held at the plan's value.

Downgrading drops both columns.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0016'
down_revision: Union[str, None] = '0015'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {'plan': [
        (sa.Column('allow_gpus', sa.String(), nullable=True), []),
        (sa.Column('allow_kv_dtypes', sa.String(), nullable=True), []),
    ]}


def upgrade() -> None:
    add_columns(op, _columns())


def downgrade() -> None:
    drop_columns(op, _columns())
