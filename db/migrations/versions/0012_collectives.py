"""a job on several GPUs: the bytes each kind of collective carried in rank 0's step, how many
ran and the largest, from which the job's communication is modelled (advisor/communication.py)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05 01:00:00

Trials stored before this have none (NULL): their job's step is not modelled.
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

COLUMNS = (
    "all_reduce_bytes",
    "all_gather_bytes",
    "reduce_scatter_bytes",
    "collectives",
    "largest_collective_bytes",
)


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        for name in COLUMNS:
            kind = sa.Integer() if name == "collectives" else sa.BigInteger()
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
