"""the vocabulary matrices a checkpoint holds, which engines keep at 16 bits in a quantized checkpoint

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 17:00:00

One nullable model column, embedding_matrices: how many vocab_size x hidden_size matrices the
checkpoint holds, 2 (the input embeddings and the lm_head) or 1 when they are tied
(tie_word_embeddings). NULL, as rows of unknown width get, means unknown: the engine rules then add
nothing for them, as before. The upgrade fills the catalog's rows from their config.json files where
a row still has the catalog's vocabulary and width. The constraint text is copied from kvreg.db.tables
as it was when this revision was written.

Downgrading drops the column: the engine rules then price a quantized checkpoint's embeddings at the
weight dtype again.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from kvreg.db.alter import add_columns, drop_columns


revision: str = '0009'
down_revision: Union[str, None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# name -> (vocab_size, hidden_size the catalog gives it, embedding matrices its config.json implies:
# tie_word_embeddings false -> 2; Falcon's and Gemma 2's configs leave it out and their classes tie -> 1)
MATRICES = {
    'Llama-3.1-8B': (128256, 4096, 2), 'Llama-3.1-70B': (128256, 8192, 2), 'Llama-3.1-405B': (128256, 16384, 2),
    'Qwen2.5-7B': (152064, 3584, 2), 'Qwen2.5-72B': (152064, 8192, 2), 'Qwen3-8B': (151936, 4096, 2),
    'Qwen3-235B-A22B': (151936, 4096, 2), 'Qwen3-Next-80B-A3B': (151936, 2048, 2),
    'ChatGLM3-6B-128K': (65024, 4096, 2), 'GLM-4.5': (151552, 5120, 2), 'DeepSeek-V3': (129280, 7168, 2),
    'Kimi-K2': (163840, 7168, 2), 'Llama-2-7B': (32000, 4096, 2), 'Llama-3-8B': (128256, 4096, 2),
    'gpt-oss-120b': (201088, 2880, 2), 'falcon-40b': (65024, 8192, 1), 'gemma-2-9b-it': (256000, 3584, 1),
}


def _columns() -> dict[str, list[tuple[sa.Column, list[tuple[str, str]]]]]:
    return {'model': [(sa.Column('embedding_matrices', sa.Integer(), nullable=True), [
        ("ck_model_embedding_matrices", "embedding_matrices IS NULL OR (embedding_matrices > 0 AND embedding_matrices <= 2)"),
    ])]}


def upgrade() -> None:
    add_columns(op, _columns())
    bind = op.get_bind()
    for name, (vocab, hidden, matrices) in MATRICES.items():
        bind.execute(sa.text("UPDATE model SET embedding_matrices = :matrices WHERE name = :name"
                             " AND vocab_size = :vocab AND hidden_size = :hidden"),
                     {"matrices": matrices, "name": name, "vocab": vocab, "hidden": hidden})


def downgrade() -> None:
    drop_columns(op, _columns())
