"""claims on the specs being measured, so several processes can run one sweep

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 14:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sweep_claims",
        sa.Column("sweep_id", sa.Integer(), sa.ForeignKey("sweeps.id"), primary_key=True),
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("sweep_claims")
