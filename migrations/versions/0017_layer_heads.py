"""per-layer kv heads: groups of full layers holding kv heads of their own; the experts' latent width

Revision ID: 0017
Revises: 0014
Create Date: 2026-12-06 00:30:00

Six nullable model columns, kv_heads_N and kv_layers_N for N = 2, 3, 4: of the full-attention layers,
kv_layers_N hold kv_heads_N kv heads each instead of kv_heads (DeciLM block_configs whose n_heads_in_group
differ from layer to layer, a num_key_value_heads list). The other full layers, at least one, hold kv_heads.
NULL means no such group, which is what every existing row meant, so no row changes and every figure of an
existing model stays the same. The constraint texts are copied from kvreg.db.tables as they were when this
revision was written.

A seventh, expert_hidden_size: the routed experts' input and output width where they work in a latent
projected from hidden_size (Kimi-K3's routed_expert_hidden_size, Nemotron 3's moe_latent_size); NULL means
hidden_size, as every existing row meant.

Downgrading drops the columns: such models then count kv_heads in every full layer, and experts at hidden_size.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0017'
down_revision: Union[str, None] = '0016'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

_GROUPS = (2, 3, 4)


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    columns = []
    for n in _GROUPS:
        columns.append((sa.Column(f'kv_heads_{n}', sa.Integer(), nullable=True), []))
        checks = [(f"ck_model_kv_group_{n}",
                   f"(kv_heads_{n} IS NULL AND kv_layers_{n} IS NULL) OR (kv_heads_{n} > 0 AND kv_layers_{n} > 0)")]
        if n == _GROUPS[-1]:
            checks.append(("ck_model_kv_groups_layers",
                           " + ".join(f"COALESCE(kv_layers_{g}, 0)" for g in _GROUPS) + " < full_layers"))
        columns.append((sa.Column(f'kv_layers_{n}', sa.Integer(), nullable=True), checks))
    columns.append((sa.Column('expert_hidden_size', sa.Integer(), nullable=True), [
        ("ck_model_expert_hidden_size", "expert_hidden_size IS NULL OR expert_hidden_size > 0")]))
    return {'model': columns}


def upgrade() -> None:
    add_columns(op, _columns())


def downgrade() -> None:
    drop_columns(op, _columns())
