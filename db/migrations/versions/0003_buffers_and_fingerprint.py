"""buffers apart from parameters; the workload's fingerprint

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 06:00:00

Trials stored before this keep their buffers inside params_bytes (buffers_bytes is NULL) and
have no fingerprint: they were measured before workloads had one.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("buffers_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("fingerprint", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("fingerprint")
        batch.drop_column("buffers_bytes")
