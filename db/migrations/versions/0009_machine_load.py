"""a busy machine: each trial's load while it was timed (others' share of the CPUs), and the
arguments a sweep was begun with, so a resume under other arguments can say so

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 23:00:00

Trials and sweeps stored before this have neither (NULL): their rates are compared with any.
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("machine_load", sa.Float(), nullable=True))
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("arguments", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("arguments")
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("machine_load")
