"""a GPU type's dense tensor throughput per dtype, and whether its reported memory is an estimate

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06 00:10:00

Four gpu columns. flops_bf16_per_s, flops_fp8_per_s, flops_fp4_per_s: the vendor's dense tensor FLOP per
second (no 2:4 sparsity) in BF16/FP16, FP8 and FP4 (NVFP4, MXFP4); NULL where the GPU has no such units or
it is not known. reported_memory_estimated: 1 when reported_memory_bytes was estimated from the nominal
memory by kvreg's rule rather than read from an engine log (0, the default). The upgrade fills the FLOP/s
of the catalog's GPUs where a row still has the catalog's nominal memory (the catalog's own values,
kvreg/catalog/gpus.toml, with their datasheets). The constraint texts are copied from kvreg.db.tables as
they were when this revision was written.

Downgrading drops the four columns.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0015'
down_revision: Union[str, None] = '0014'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

GIB = 2**30
T = 10**12
# name -> (nominal memory_bytes the catalog gives it, dense BF16, FP8, FP4 FLOP/s; None: no such units)
FACTS = {
    'H100-SXM': (80 * GIB, 989_400_000_000_000, 1_978_900_000_000_000, None),
    'H200': (141 * GIB, 989_400_000_000_000, 1_978_900_000_000_000, None),
    'A100-40GB': (40 * GIB, 312 * T, None, None),
    'A100-80GB': (80 * GIB, 312 * T, None, None),
    'L40S': (48 * GIB, 362_050_000_000_000, 733 * T, None),
    'RTX-4090': (24 * GIB, 165_200_000_000_000, 330_300_000_000_000, None),
    'RTX-5090': (32 * GIB, 209_500_000_000_000, 419 * T, 1676 * T),
    'MI300X': (192 * GIB, 1_307_400_000_000_000, 2_614_900_000_000_000, None),
    'B200': (192 * GIB, 2250 * T, 4500 * T, 9000 * T),
    'M3-Ultra': (192 * GIB, None, None, None),
}


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {'gpu': [
        (sa.Column('flops_bf16_per_s', sa.BigInteger(), nullable=True), [
            ("ck_gpu_flops_bf16", "flops_bf16_per_s IS NULL OR flops_bf16_per_s > 0")]),
        (sa.Column('flops_fp8_per_s', sa.BigInteger(), nullable=True), [
            ("ck_gpu_flops_fp8", "flops_fp8_per_s IS NULL OR flops_fp8_per_s > 0")]),
        (sa.Column('flops_fp4_per_s', sa.BigInteger(), nullable=True), [
            ("ck_gpu_flops_fp4", "flops_fp4_per_s IS NULL OR flops_fp4_per_s > 0")]),
        (sa.Column('reported_memory_estimated', sa.Integer(), nullable=False, server_default='0'), [
            ("ck_gpu_reported_memory_estimated", "reported_memory_estimated IN (0, 1)")]),
    ]}


def upgrade() -> None:
    add_columns(op, _columns())
    bind = op.get_bind()
    for name, (memory, bf16, fp8, fp4) in FACTS.items():
        bind.execute(sa.text("UPDATE gpu SET flops_bf16_per_s = :bf16, flops_fp8_per_s = :fp8, flops_fp4_per_s = :fp4"
                             " WHERE name = :name AND memory_bytes = :memory"),
                     {"bf16": bf16, "fp8": fp8, "fp4": fp4, "name": name, "memory": memory})


def downgrade() -> None:
    drop_columns(op, _columns())
