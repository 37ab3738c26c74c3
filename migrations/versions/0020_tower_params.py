"""multimodal towers: the vision/audio encoders' parameters, and the vision_config widths SGLang reads

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 03:30:00

Three nullable model columns. tower_params: a multimodal model's vision/audio towers and their projectors
into the language model, counted apart from params_total (the language model); the engine rules add them to
the weights every GPU holds (docs/engine-rules.md). vision_num_hidden_layers and vision_hidden_size: the
config's vision_config keys of those names, which SGLang's multimodal mem_fraction_static adjustment reads.
NULL means no tower, which is what every existing row meant, so no row changes and every figure of an
existing model stays the same. The constraint texts are copied from kvreg.db.tables as they were when this
revision was written.

Downgrading drops the columns: such models then hold the language model's weights alone.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0020'
down_revision: Union[str, None] = '0019'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {'model': [
        (sa.Column('tower_params', sa.BigInteger(), nullable=True),
         [("ck_model_tower_params", "tower_params IS NULL OR tower_params > 0")]),
        (sa.Column('vision_num_hidden_layers', sa.Integer(), nullable=True),
         [("ck_model_vision_num_hidden_layers", "vision_num_hidden_layers IS NULL OR vision_num_hidden_layers > 0")]),
        (sa.Column('vision_hidden_size', sa.Integer(), nullable=True),
         [("ck_model_vision_hidden_size", "vision_hidden_size IS NULL OR vision_hidden_size > 0")]),
    ]}


def upgrade() -> None:
    add_columns(op, _columns())


def downgrade() -> None:
    drop_columns(op, _columns())
