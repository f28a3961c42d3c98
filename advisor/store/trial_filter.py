"""What `advisor history` can ask of stored trials beyond the model and status, as the
conditions of a query of the trials table."""

from __future__ import annotations

import dataclasses
import datetime

from sqlalchemy import Select

from advisor.result import Kind
from advisor.store.tables import EnvironmentRow, SweepTrialRow, TrialRow


@dataclasses.dataclass(frozen=True)
class TrialFilter:
    """What `advisor history` can ask of stored trials, beyond the model and status."""

    workload: str | None = None  # the end of the workload's source: examples/own_model.py:workload
    gpu: str | None = None  # part of the device's name, any case: h200, "A100"
    torch: str | None = None  # torch's version or its first parts: 2.11 (2.11.0, 2.11.0+cu130)
    since: datetime.datetime | None = None  # stored at or after (UTC)
    until: datetime.datetime | None = None  # stored before (UTC)
    sweep_id: int | None = None  # used by this sweep
    # advisor's measurements unless asked (None: every kind): what the verbs that predict read
    kind: Kind | None = Kind.measured
    # one GPU's trials unless asked (None: any): a rank of a job on several is no GPU's own
    gpus: int | None = 1

    def apply(self, query: Select[TrialRow]) -> Select[TrialRow]:
        if self.kind is not None:
            query = query.where(TrialRow.kind == self.kind.value)
        if self.gpus is not None:
            query = query.where(TrialRow.gpus == self.gpus)
        if self.workload is not None:  # the source's end
            query = query.where(TrialRow.source.endswith(self.workload, autoescape=True))
        if self.gpu is not None or self.torch is not None:
            query = query.join(EnvironmentRow, TrialRow.environment_id == EnvironmentRow.id)
        if self.gpu is not None:
            query = query.where(EnvironmentRow.device_name.icontains(self.gpu, autoescape=True))
        if self.torch is not None:
            version = EnvironmentRow.torch
            query = query.where(
                (version == self.torch)
                | version.startswith(f"{self.torch}.", autoescape=True)
                | version.startswith(f"{self.torch}+", autoescape=True)
            )
        if self.since is not None:
            query = query.where(TrialRow.created_at >= self.since)
        if self.until is not None:
            query = query.where(TrialRow.created_at < self.until)
        if self.sweep_id is not None:
            query = query.join(SweepTrialRow, SweepTrialRow.trial_id == TrialRow.id).where(
                SweepTrialRow.sweep_id == self.sweep_id
            )
        return query
