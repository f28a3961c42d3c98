"""The user's training runs (result.Kind.training), kept as trials: a run's row is stored at its
first record and rewritten at each one after, so that a run that dies keeps what it had
measured. They never go through the spool: a record the database refuses is the next one's."""

from __future__ import annotations

import dataclasses
import datetime

from sqlalchemy.exc import SQLAlchemyError

from advisor.errors import StoreError
from advisor.result import Kind, TrialResult
from advisor.store import rows, schema
from advisor.store.store import Store
from advisor.store.tables import TrialRow


def keep_training(store: Store, result: TrialResult) -> TrialResult:
    """Store a training run (without an id) or rewrite the stored one (its id); the run as
    stored. StoreError in one line, whatever the database refuses."""
    assert result.kind is Kind.training, "only a training run's row is rewritten"
    now = datetime.datetime.now(datetime.UTC)
    result = dataclasses.replace(result, created_at=result.created_at or now.isoformat())
    assert result.created_at is not None
    columns = rows.trial_columns(result, rows.moment(result.created_at))

    def write() -> TrialResult:
        with store.reading_then_writing.begin() as session:
            row = TrialRow(**columns) if result.id is None else session.get(TrialRow, result.id)
            if row is None:  # (deleted by hand meanwhile)
                raise StoreError(f"training run {result.id} is no longer stored in "
                                 f"{schema.shown(store.url)}")  # fmt: skip
            for name, value in columns.items():
                setattr(row, name, value)
            if result.environment is not None:
                row.environment = rows.environment_row(session, result.environment)
            session.add(row)
            session.flush()
            return dataclasses.replace(result, id=row.id)

    try:
        return store.retried(write)
    except SQLAlchemyError as error:  # (another than a lock: retried says those)
        raise StoreError(
            f"the training run was not stored: {schema.said_by_database(error)}"
        ) from None
