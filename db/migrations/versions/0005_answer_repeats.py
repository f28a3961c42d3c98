"""which of a sweep's trials measured its answer again, not a spec of the search

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 12:50:00

Links stored before this are taken as the search's (false): earlier sweeps did not say.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sweep_trials") as batch:
        batch.add_column(
            sa.Column("repeat", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("sweep_trials") as batch:
        batch.drop_column("repeat")
