"""the file a trial's memory snapshot was written to (advisor run memory_snapshot=FILE.pickle)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 17:10:00

Trials stored before this have none (NULL).
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("memory_snapshot", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("memory_snapshot")
