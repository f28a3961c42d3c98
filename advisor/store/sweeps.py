"""A sweep as the store keeps it: its record (what identifies it, its target, why it stopped)
and the trials it used, linked in the order it settled them."""

from __future__ import annotations

import dataclasses
import datetime
import json

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from advisor.store.rows import utc
from advisor.store.tables import SweepRow, SweepTrialRow


@dataclasses.dataclass(frozen=True)
class Sweep:
    key: str  # identifies the sweep (model, target, space, environment): the same command, resumed
    model: str
    target: str
    target_memory_bytes: int
    margin: float
    effective_batch_size: int | None
    stop_reason: str | None = None
    id: int | None = None
    # the settings it was begun with (KEY=VALUE, sorted); None for sweeps stored before 0009
    arguments: tuple[str, ...] | None = None
    created_at: str | None = None  # ISO 8601, UTC; set by the store


def sweep_of(row: SweepRow) -> Sweep:
    return Sweep(
        key=row.key,
        model=row.model,
        target=row.target,
        target_memory_bytes=row.target_memory_bytes,
        margin=row.margin,
        effective_batch_size=row.effective_batch_size,
        stop_reason=row.stop_reason,
        id=row.id,
        arguments=None if row.arguments is None else tuple(json.loads(row.arguments)),
        created_at=utc(row.created_at).isoformat(),
    )


def sweep_row(sweep: Sweep, created_at: datetime.datetime) -> SweepRow:
    """A new sweep's row."""
    values = dataclasses.asdict(sweep)
    del values["id"], values["created_at"]
    arguments = None if sweep.arguments is None else json.dumps(list(sweep.arguments))
    return SweepRow(**{**values, "arguments": arguments, "created_at": created_at})


def link_trial(
    session: Session, sweep_id: int, trial_id: int, reused: bool, repeat: bool = False
) -> None:
    if session.get(SweepTrialRow, (sweep_id, trial_id)) is not None:
        return
    position = session.scalar(select(func.count()).where(SweepTrialRow.sweep_id == sweep_id))
    session.add(
        SweepTrialRow(
            sweep_id=sweep_id, trial_id=trial_id, position=position or 0, reused=reused,
            repeat=repeat,
        )
    )  # fmt: skip
