"""A sweep as the store keeps it: its record (what identifies it, its target, why it stopped)
and the trials it used, linked in the order it settled them."""

from __future__ import annotations

import dataclasses

from sqlalchemy import func, select
from sqlalchemy.orm import Session

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
    )


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
