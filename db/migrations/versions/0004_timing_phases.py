"""how well each rate is known, why timing stopped, and where a trial's seconds went

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 09:00:00

Trials stored before this have none of these figures (NULL).
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

COLUMNS = ("step_s_ci95", "setup_s", "first_step_s", "warmup_s", "timing_s")


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        for name in COLUMNS:
            batch.add_column(sa.Column(name, sa.Float(), nullable=True))
        batch.add_column(sa.Column("stopped", sa.String(length=20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("stopped")
        for name in reversed(COLUMNS):
            batch.drop_column(name)
