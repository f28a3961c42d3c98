"""the user's training runs beside advisor's measurements: each trial's kind (measured or
training) and, for a training run, the measured trial whose setting it followed

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04 22:00:00

Trials stored before this are advisor's measurements.
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(
            sa.Column("kind", sa.String(20), nullable=False, server_default="measured")
        )
        batch.add_column(sa.Column("follows_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("follows_id")
        batch.drop_column("kind")
