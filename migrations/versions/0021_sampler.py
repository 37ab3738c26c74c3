"""vLLM's sampler backend: the deployment input `sampler` on plan and scenario

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06 04:40:00

A nullable text column, 'torch' or 'flashinfer': the top-k/top-p sampler vLLM warms up in its profile run,
which sizes the sampler's share of the activation peak (docs/engine-rules.md). NULL means the release's
default, which is what every existing row meant, so no row changes and every figure stays the same. The
constraint texts are copied from kvreg.db.tables as they were when this revision was written.

Downgrading drops the column: such deployments then take the release's default sampler.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0021'
down_revision: Union[str, None] = '0020'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {table: [
        (sa.Column('sampler', sa.String(), nullable=True),
         [(f"ck_{table}_sampler", "sampler IS NULL OR sampler IN ('torch', 'flashinfer')")]),
    ] for table in ("plan", "scenario")}


def upgrade() -> None:
    add_columns(op, _columns())


def downgrade() -> None:
    drop_columns(op, _columns())
