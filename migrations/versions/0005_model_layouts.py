"""model layouts: per-kind kv heads and head widths, cache-less layers, K=V layers

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 07:30:00

Real models of 2025-2026 give their sliding (or chunked) layers other kv heads and head widths than
their full layers (Gemma 4), have layers that hold no cache (Nemotron-Super's no-op attention, Gemma
3n/4's KV-shared layers, Nemotron-H's MLP blocks) and full layers whose K and V are one tensor. Every
new column is NULL or 0 on existing rows, which means what the model meant before: every layer kind
uses kv_heads / head_dim and every layer holds a cache. Downgrading drops
the columns: a row that used them falls back to kv_heads / head_dim for every kind.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0005'
down_revision: Union[str, None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _columns() -> list[tuple[sa.Column, list[tuple[str, str]]]]:
    """Every column this revision adds to model, in order, with its CHECK constraints."""
    return [
        (sa.Column('no_cache_layers', sa.Integer(), nullable=False, server_default='0'),
         [("ck_model_no_cache_layers", "no_cache_layers >= 0")]),
        (sa.Column('sliding_kv_heads', sa.Integer(), nullable=True),
         [("ck_model_sliding_kv_heads", "sliding_kv_heads IS NULL OR sliding_kv_heads > 0")]),
        (sa.Column('sliding_head_dim', sa.Integer(), nullable=True),
         [("ck_model_sliding_head_dim", "sliding_head_dim IS NULL OR sliding_head_dim > 0")]),
        (sa.Column('chunked_kv_heads', sa.Integer(), nullable=True),
         [("ck_model_chunked_kv_heads", "chunked_kv_heads IS NULL OR chunked_kv_heads > 0")]),
        (sa.Column('chunked_head_dim', sa.Integer(), nullable=True),
         [("ck_model_chunked_head_dim", "chunked_head_dim IS NULL OR chunked_head_dim > 0")]),
        (sa.Column('k_eq_v_layers', sa.Integer(), nullable=False, server_default='0'),
         [("ck_model_k_eq_v_layers", "k_eq_v_layers >= 0")]),
    ]


def upgrade() -> None:
    add_columns(op, {'model': _columns()})


def downgrade() -> None:
    drop_columns(op, {'model': _columns()})
