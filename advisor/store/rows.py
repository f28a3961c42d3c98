"""A trial as a row of the trials table and back (the store's own detail: the rest of the code
sees TrialResults). A trial is read from plain rows of TRIAL_COLUMNS, not ORM objects, which
took twice as long for thousands of trials."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import json
import types
from collections.abc import Mapping

from sqlalchemy import RowMapping, select
from sqlalchemy.orm import Session

from advisor.result import (
    Environment,
    Kind,
    Memory,
    Status,
    Throughput,
    TrialResult,
    failure_from_dict,
    memory_from_dict,
    throughput_from_dict,
)
from advisor.spec import TrialSpec
from advisor.store.tables import EnvironmentRow, TrialRow

MEMORY_FIELDS = [f.name for f in dataclasses.fields(Memory)]
THROUGHPUT_FIELDS = [f.name for f in dataclasses.fields(Throughput)]
ENVIRONMENT_FIELDS = [f.name for f in dataclasses.fields(Environment)]
TRIAL_COLUMNS = list(TrialRow.__table__.columns)  # what a trial is read from


def environment_row(session: Session, env: Environment) -> EnvironmentRow:
    values = dataclasses.asdict(env)
    fingerprint = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()
    row = session.scalar(select(EnvironmentRow).where(EnvironmentRow.fingerprint == fingerprint))
    return row or EnvironmentRow(fingerprint=fingerprint, **values)


def trial_row(result: TrialResult, now: datetime.datetime) -> TrialRow:
    return TrialRow(**trial_columns(result, now))


def trial_columns(result: TrialResult, now: datetime.datetime) -> dict[str, object]:
    """A trial's columns of the trials table, all but its id and environment's (an import
    inserts thousands of these at once: ORM rows took twice as long)."""
    failure = result.failure
    columns = {
        **spec_columns(result.spec),
        "created_at": now,
        "status": result.status.value,
        "wall_s": result.wall_s,
        "memory_snapshot": result.memory_snapshot,
        "failure_phase": failure.phase.value if failure and failure.phase else None,
        "failure_requested_bytes": failure.requested_bytes if failure else None,
        "failure_message": failure.message if failure else None,
        "kind": result.kind.value,
        "follows_id": result.follows,
    }
    parts = ((result.memory, MEMORY_FIELDS), (result.throughput, THROUGHPUT_FIELDS))
    for part, names in parts:
        for name in names:
            value = None if part is None else getattr(part, name)
            columns[name] = getattr(value, "value", value)  # (an Enum's value)
    return columns


@functools.lru_cache(maxsize=16384)
def spec_columns(spec: TrialSpec) -> Mapping[str, object]:
    """A spec's columns of the trials table, worked out once for each spec (specs are frozen,
    and an import of 20,000 trials of a few specs spent a quarter of its time in to_json);
    read-only, as every caller shares them."""
    columns = {
        "spec_hash": spec.hash,
        "spec_json": spec.to_json(),
        "model": spec.model.name,
        "family": spec.model.family,
        "device": spec.device.value,
        "batch_size": spec.batch_size,
        "grad_accum": spec.grad_accum,
        "precision": spec.precision.value,
        "checkpointing": spec.checkpointing.value,
        "optimizer": spec.optimizer.name,
        "channels_last": spec.channels_last,
        "compile": spec.compile,
        "expandable_segments": spec.expandable_segments,
        "memory_cap_bytes": spec.memory_cap_bytes,
        "gpus": spec.gpus,
        "strategy": spec.strategy.value if spec.strategy else None,
        "fingerprint": spec.model.fingerprint,
        "source": spec.model.source,
    }
    return types.MappingProxyType(columns)


def trial_of(row: RowMapping, environment: Environment | None) -> TrialResult:
    """A trial from a row of TRIAL_COLUMNS."""
    memory = throughput = failure = None
    if row["peak_allocated_bytes"] is not None:
        memory = memory_from_dict({name: row[name] for name in MEMORY_FIELDS})
    if row["step_s_median"] is not None:
        throughput = throughput_from_dict({name: row[name] for name in THROUGHPUT_FIELDS})
    if row["failure_message"] is not None:
        failure = failure_from_dict({"phase": row["failure_phase"],
                                     "requested_bytes": row["failure_requested_bytes"],
                                     "message": row["failure_message"]})  # fmt: skip
    return TrialResult(
        spec=TrialSpec.from_json(row["spec_json"]),
        status=Status(row["status"]),
        environment=environment,
        memory=memory,
        throughput=throughput,
        failure=failure,
        wall_s=row["wall_s"],
        id=row["id"],
        created_at=utc(row["created_at"]).isoformat(),
        memory_snapshot=row["memory_snapshot"],
        kind=Kind(row["kind"]),
        follows=row["follows_id"],
    )


def utc(when: datetime.datetime) -> datetime.datetime:
    """SQLite hands back naive datetimes; they were stored as UTC."""
    return when if when.tzinfo is not None else when.replace(tzinfo=datetime.UTC)


def moment(created_at: str) -> datetime.datetime:
    """When a trial was measured, from its ISO text, in UTC: a time that names no zone is UTC
    (as history's since= reads one). SQLite keeps a time's clock reading without its zone, so
    12:00+02:00 was stored as 12:00, two hours late, and not found again by the next import.
    ValueError for text that is no such time, or one past the calendar in UTC."""
    try:
        return utc(datetime.datetime.fromisoformat(created_at)).astimezone(datetime.UTC)
    except OverflowError:
        raise ValueError(f"{created_at!r} is past the calendar in UTC") from None
