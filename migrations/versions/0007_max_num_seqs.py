"""the engines' limit on running requests: vLLM --max-num-seqs, SGLang --max-running-requests

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 12:00:00

One nullable column on plan and scenario, max_num_seqs: NULL, as every existing row gets, is the
engine's own default (docs/engine-rules.md "The cap on running requests"), so existing plans keep
their figures. Added and dropped in place, as 0002 and 0006 do; the constraint text is copied from
kvreg.db.tables as it was when this revision was written.

Downgrading drops the column: a plan loses the limit it was given and takes the engine's default.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0007'
down_revision: Union[str, None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {table: [(sa.Column('max_num_seqs', sa.Integer(), nullable=True), [
        (f"ck_{table}_max_num_seqs", "max_num_seqs IS NULL OR max_num_seqs > 0"),
    ])] for table in ('plan', 'scenario')}


def upgrade() -> None:
    add_columns(op, _columns())


def downgrade() -> None:
    drop_columns(op, _columns())
