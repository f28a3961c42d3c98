"""history at 100k trials: each trial's workload source as a column of its own (history's
workload= scanned spec_json, 130 ms at 100k trials), and an index for reading trials newest
first that holds the source too (a page of 100k trials was a scan and a sort, 600 ms; a
workload= that matches none is now 18 ms)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 17:50:00

The source of trials stored before this is read from their spec ("" before workloads, 0003).
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

CHUNK = 5000  # rows read and written at a time


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("source", sa.Text(), nullable=False, server_default=""))
    trials = sa.table("trials", sa.column("id"), sa.column("spec_json"), sa.column("source"))
    connection = op.get_bind()
    last = 0
    while rows := connection.execute(
        sa.select(trials.c.id, trials.c.spec_json)
        .where(trials.c.id > last)
        .order_by(trials.c.id)
        .limit(CHUNK)
    ).all():
        connection.execute(
            trials.update().where(trials.c.id == sa.bindparam("row")),
            [{"row": i, "source": json.loads(text)["model"].get("source", "")} for i, text in rows],
        )
        last = rows[-1][0]
    # (a development build's 0007 made this index without the source)
    op.execute("DROP INDEX IF EXISTS ix_trials_created")
    op.create_index("ix_trials_created", "trials", ["created_at", "id", "source"])


def downgrade() -> None:
    op.drop_index("ix_trials_created", table_name="trials")
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("source")
