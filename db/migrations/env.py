"""Alembic environment for the results database. advisor's Store runs the migrations itself on
open, passing its connection; `alembic -c db/alembic.ini ...` works too (ADVISOR_DB_URL or the
default db/advisor.sqlite)."""

from alembic import context
from sqlalchemy import create_engine

from advisor.store.store import default_url
from advisor.store.tables import Base

config = context.config
target_metadata = Base.metadata


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or default_url())
    with engine.begin() as connection:
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()


run_migrations()
