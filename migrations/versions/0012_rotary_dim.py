"""the width a model's rotary position embedding turns, which sizes the cos/sin cache the engines keep

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05 00:10:00

One nullable model column, rotary_dim: the elements of a head that RoPE rotates, where that is not the
whole head (config.json's partial_rotary_factor x head_dim; ChatGLM and GLM-4's model files rotate half
the head). Both engines build one cos/sin table of max_position_embeddings x rotary_dim on every GPU while
the model loads (vLLM in the model's dtype, SGLang in float32 on CUDA), which their logged weights
include. NULL means the whole head (an MLA model's qk_rope_head_dim). The upgrade fills the catalog's
partial-rotary rows where a row still has the catalog's head_dim. The constraint text is copied from
kvreg.db.tables as it was when this revision was written.

Downgrading drops the column: the engine rules then take the whole head for those rows.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0012'
down_revision: Union[str, None] = '0011'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# name -> (head_dim the catalog gives it, rotary_dim): Qwen3-Next's partial_rotary_factor 0.25 of 256,
# GLM-4.5's 0.5 of 128, ChatGLM3 and GLM-4 (vLLM's chatglm.py: rotary_dim // 2)
ROTARY = {
    'Qwen3-Next-80B-A3B': (256, 64), 'GLM-4.5': (128, 64), 'ChatGLM3-6B-128K': (128, 64),
    'GLM-4-9B-chat-1M': (128, 64),
}


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {'model': [
        (sa.Column('rotary_dim', sa.Integer(), nullable=True), [
            ("ck_model_rotary_dim", "rotary_dim IS NULL OR rotary_dim > 0")]),
    ]}


def upgrade() -> None:
    add_columns(op, _columns())
    bind = op.get_bind()
    for name, (head_dim, rotary_dim) in ROTARY.items():
        bind.execute(sa.text("UPDATE model SET rotary_dim = :rotary WHERE name = :name AND head_dim = :head_dim"),
                     {"rotary": rotary_dim, "name": name, "head_dim": head_dim})


def downgrade() -> None:
    drop_columns(op, _columns())
