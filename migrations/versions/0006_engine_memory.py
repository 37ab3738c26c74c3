"""engine memory: the memory CUDA reports per GPU, the widths vLLM's profile run holds activations at, the engine release a deployment follows, the
measured non-torch and weight memory, and a plan's calibration from a startup log

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 07:00:00

Every new column is nullable, so existing rows come through unchanged: a GPU without a reported
size is sized from its nominal memory by every rule, as before. The upgrade fills the reported size
of the catalog GPUs whose size a public startup log shows (docs/engine-rules.md "The memory the
engines see"), only where the row still has the catalog's nominal size and no reported size.

Columns are added and dropped in place (as 0002 does, for the same reason: batch mode would copy
`plan` and cascade into `demand`). The constraint texts are copied from kvreg.db.tables as they
were when this revision was written.

Downgrading drops the columns: a GPU loses its reported size, a plan its engine release, measured
non-torch and weight memory and the log it was calibrated from (its other calibration stays).
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0006'
down_revision: Union[str, None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

GIB = 2**30
# name -> (nominal memory_bytes the catalog gives it, the memory CUDA reports as vLLM logs it)
REPORTED = {
    'H100-SXM': (80 * GIB, 85029615043),  # 79.19 GiB: "total_gpu_memory (79.19GiB)"
    'A100-40GB': (40 * GIB, 42283953029),  # 39.38 GiB: "total_gpu_memory (39.38GiB)"
}


def _deployment(table: str) -> list[tuple[sa.Column, list[tuple[str, str]]]]:
    return [
        (sa.Column('engine_version', sa.String(), nullable=True), []),
        (sa.Column('engine_release', sa.Integer(), nullable=True), [
            (f"ck_{table}_engine_release", "engine_release IS NULL OR engine_release >= 0"),
        ]),
        (sa.Column('non_torch_bytes', sa.BigInteger(), nullable=True), [
            (f"ck_{table}_non_torch", "non_torch_bytes IS NULL OR non_torch_bytes >= 0"),
        ]),
        (sa.Column('weights_measured_bytes', sa.BigInteger(), nullable=True), [
            (f"ck_{table}_weights_measured", "weights_measured_bytes IS NULL OR weights_measured_bytes >= 0"),
        ]),
    ]


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {
        'model': [
            (sa.Column('hidden_size', sa.Integer(), nullable=True), []),
            (sa.Column('intermediate_size', sa.Integer(), nullable=True), []),
            (sa.Column('vocab_size', sa.Integer(), nullable=True), [
                ("ck_model_widths", "(hidden_size IS NULL OR hidden_size > 0) AND (intermediate_size IS NULL OR"
                                    " intermediate_size > 0) AND (vocab_size IS NULL OR vocab_size > 0)"),
            ]),
        ],
        'gpu': [
            (sa.Column('reported_memory_bytes', sa.BigInteger(), nullable=True), [
                ("ck_gpu_reported_memory", "reported_memory_bytes IS NULL OR (reported_memory_bytes > 0 AND"
                                           " reported_memory_bytes <= memory_bytes)"),
            ]),
        ],
        'plan': _deployment('plan') + [
            (sa.Column('measured_kv_cache_bytes', sa.BigInteger(), nullable=True), [
                ("ck_plan_measured_kv_bytes", "measured_kv_cache_bytes IS NULL OR measured_kv_cache_bytes >= 0"),
            ]),
            (sa.Column('calibration_source', sa.String(), nullable=True), []),
        ],
        'scenario': _deployment('scenario'),
    }


def upgrade() -> None:
    add_columns(op, _columns())
    bind = op.get_bind()
    for name, (nominal, reported) in REPORTED.items():
        bind.execute(sa.text("UPDATE gpu SET reported_memory_bytes = :reported WHERE name = :name"
                             " AND memory_bytes = :nominal AND reported_memory_bytes IS NULL"),
                     {"reported": reported, "name": name, "nominal": nominal})


def downgrade() -> None:
    drop_columns(op, _columns())
