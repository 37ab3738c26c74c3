"""a mixture-of-experts model's expert layout, which the engine rules lay an MXFP4 checkpoint out by

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 19:00:00

Three nullable model columns: experts (the routed experts of a MoE layer), expert_intermediate_size
(one expert's MLP width, config.json's moe_intermediate_size) and moe_layers (the layers that carry
experts). NULL, as dense models and rows of unknown layout get, means no expert layout: the engine rules
then price the weights at params x bytes as before. The upgrade fills the catalog's MoE rows from their
config.json files where a row still has the catalog's layer count. The constraint text is copied from
kvreg.db.tables as it was when this revision was written.

Downgrading drops the columns: the engine rules then price an MXFP4 checkpoint at params x 0.5 B again.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0010'
down_revision: Union[str, None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# name -> (layers the catalog gives it, then from its config.json: routed experts, moe_intermediate_size
# (gpt-oss: intermediate_size), layers with experts: all but DeepSeek's and GLM's first_k_dense_replace)
EXPERTS = {
    'Qwen3-235B-A22B': (94, 128, 1536, 94), 'Qwen3-Next-80B-A3B': (48, 512, 512, 48),
    'GLM-4.5': (92, 160, 1536, 89), 'DeepSeek-V3': (61, 256, 2048, 58), 'Kimi-K2': (61, 384, 2048, 60),
    'gpt-oss-120b': (36, 128, 2880, 36),
}


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {'model': [
        (sa.Column('experts', sa.Integer(), nullable=True), [
            ("ck_model_experts", "experts IS NULL OR experts > 0")]),
        (sa.Column('expert_intermediate_size', sa.Integer(), nullable=True), [
            ("ck_model_expert_intermediate_size", "expert_intermediate_size IS NULL OR expert_intermediate_size > 0")]),
        (sa.Column('moe_layers', sa.Integer(), nullable=True), [
            ("ck_model_moe_layers", "moe_layers IS NULL OR (moe_layers > 0 AND moe_layers <= layers)")]),
    ]}


def upgrade() -> None:
    add_columns(op, _columns())
    bind = op.get_bind()
    for name, (layers, experts, width, moe_layers) in EXPERTS.items():
        bind.execute(sa.text("UPDATE model SET experts = :experts, expert_intermediate_size = :width,"
                             " moe_layers = :moe_layers WHERE name = :name AND layers = :layers"),
                     {"experts": experts, "width": width, "moe_layers": moe_layers, "name": name, "layers": layers})


def downgrade() -> None:
    drop_columns(op, _columns())
