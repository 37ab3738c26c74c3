"""the recurrent (SSM) part of a linear layer's state, which SGLang keeps in float32

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 12:40:00

One nullable model column, linear_recurrent_elements_per_layer: of linear_state_elements_per_layer,
the recurrent state's elements (the rest is the conv state). NULL, as existing rows get, means not
split: every rule prices the whole state as before. The upgrade fills the catalog's Qwen3-Next row
(32 value heads x 128 x 128 = 524,288 of its 548,864 elements) where the row still has the catalog's
state size. The constraint text is copied from kvreg.db.tables as it was when this revision was
written.

Downgrading drops the column: SGLang then prices a hybrid model's state in the state dtype.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0008'
down_revision: Union[str, None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# name -> (linear_state_elements_per_layer the catalog gives it, of which recurrent)
RECURRENT = {'Qwen3-Next-80B-A3B': (548864, 524288)}


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {'model': [(sa.Column('linear_recurrent_elements_per_layer', sa.BigInteger(), nullable=True), [
        ("ck_model_linear_recurrent", "linear_recurrent_elements_per_layer IS NULL OR"
                                      " (linear_recurrent_elements_per_layer > 0 AND"
                                      " linear_recurrent_elements_per_layer <= linear_state_elements_per_layer)"),
    ])]}


def upgrade() -> None:
    add_columns(op, _columns())
    bind = op.get_bind()
    for name, (elements, recurrent) in RECURRENT.items():
        bind.execute(sa.text("UPDATE model SET linear_recurrent_elements_per_layer = :recurrent WHERE name = :name"
                             " AND linear_state_elements_per_layer = :elements"),
                     {"recurrent": recurrent, "name": name, "elements": elements})


def downgrade() -> None:
    drop_columns(op, _columns())
