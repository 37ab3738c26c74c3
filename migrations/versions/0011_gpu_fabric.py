"""two GPU facts the engine rules size from: the CUDA compute capability and whether a node's GPUs share a fabric

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04 19:00:00

Two nullable gpu columns. compute_capability (9.0 for an H100): below 8.9 a GPU has no FP8 units, and vLLM
runs an FP8 checkpoint through its Marlin kernels, which keep 16-bit group scales beside the weights.
fabric: 1 when a node's GPUs share a GPU fabric (NVLink and NVSwitch, AMD Infinity Fabric), 0 when they
talk over PCIe only; the communication buffers the engines count before sizing the KV cache at TP > 1 are
large on a fabric and small over PCIe (an 8 x L40S vLLM run logged 0.21 GiB of non-torch memory where H100s
lose 1.79 GiB more). NULL means not known: no Marlin scales, and a fabric, which is what the engine rules
assumed for every GPU before this revision. The upgrade fills the catalog's GPUs where a row still has the
catalog's nominal memory. The constraint texts are copied from kvreg.db.tables as they were when this
revision was written.

Downgrading drops the columns: every GPU is then priced as on a fabric with FP8 units again.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0011'
down_revision: Union[str, None] = '0010'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

GIB = 2**30
# name -> (nominal memory_bytes the catalog gives it, compute capability, fabric)
FACTS = {
    'H100-SXM': (80 * GIB, 9.0, 1), 'H200': (141 * GIB, 9.0, 1), 'A100-40GB': (40 * GIB, 8.0, 1),
    'A100-80GB': (80 * GIB, 8.0, 1), 'L40S': (48 * GIB, 8.9, 0), 'RTX-4090': (24 * GIB, 8.9, 0),
    'RTX-5090': (32 * GIB, 12.0, 0), 'MI300X': (192 * GIB, None, 1), 'B200': (192 * GIB, 10.0, 1),
    'M3-Ultra': (192 * GIB, None, 0),
}


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {'gpu': [
        (sa.Column('compute_capability', sa.Float(), nullable=True), [
            ("ck_gpu_compute_capability", "compute_capability IS NULL OR compute_capability > 0")]),
        (sa.Column('fabric', sa.Integer(), nullable=True), [
            ("ck_gpu_fabric", "fabric IS NULL OR fabric IN (0, 1)")]),
    ]}


def upgrade() -> None:
    add_columns(op, _columns())
    bind = op.get_bind()
    for name, (memory, capability, fabric) in FACTS.items():
        bind.execute(sa.text("UPDATE gpu SET compute_capability = :cc, fabric = :fabric"
                             " WHERE name = :name AND memory_bytes = :memory"),
                     {"cc": capability, "fabric": fabric, "name": name, "memory": memory})


def downgrade() -> None:
    drop_columns(op, _columns())
