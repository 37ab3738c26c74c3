"""the MLA layers that keep a sparse-attention indexer cache of their own, and the kind of a model's linear layers

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05 17:00:00

One nullable model column, indexer_layers: of an MLA model's layers, those that keep a DeepSeek-style
sparse-attention indexer key cache (indexer_bytes_per_token_per_layer each). GLM-5.2's config.json marks each
layer "full" (its own indexer) or "shared" (it reuses the last full layer's top-k and keeps no indexer cache):
21 of its 78 layers keep one. NULL means every MLA layer, which is what every existing row meant, so no row
changes and every figure of an existing model stays the same. The constraint text is copied from
kvreg.db.tables as it was when this revision was written.

A second nullable column, linear_state_kind, names which recurrent layer a model's linear layers are
(mamba2, gated_deltanet, kda, lightning or short_conv), for `kvreg model show --layers`; no figure reads it,
and existing rows keep NULL (shown as "linear").

Downgrading drops the columns: such models then count an indexer cache in every MLA layer.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0013'
down_revision: Union[str, None] = '0012'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {'model': [
        (sa.Column('indexer_layers', sa.Integer(), nullable=True), [
            ("ck_model_indexer_layers", "indexer_layers IS NULL OR (indexer_layers > 0 AND indexer_layers <= full_layers)")]),
        (sa.Column('linear_state_kind', sa.String(), nullable=True), [
            ("ck_model_linear_state_kind", "linear_state_kind IS NULL OR linear_state_kind IN ('mamba2', 'gated_deltanet',"
                                           " 'kda', 'lightning', 'short_conv')")]),
    ]}


def upgrade() -> None:
    add_columns(op, _columns())


def downgrade() -> None:
    drop_columns(op, _columns())
