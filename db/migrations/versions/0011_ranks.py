"""a job on several GPUs: a trial's GPUs (it measured one rank of them) and how they share the
model (ddp, fsdp), as columns that history and the verbs that predict filter by

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04 23:00:00

Trials stored before this ran on one GPU.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("gpus", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("strategy", sa.String(20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("strategy")
        batch.drop_column("gpus")
