"""What a sweep did, step by step: each spec it settled and how, and its progress so far (what
the progress bar, the report and the time to the answer are drawn from)."""

from __future__ import annotations

import dataclasses
import enum
import time

from advisor.result import TrialResult
from advisor.spec import TrialSpec


class Settled(enum.StrEnum):
    """How the sweep settled a spec: by measuring it, or without running it."""

    measured = "measured"  # run here
    history = "history"  # measured before (by this sweep, an earlier run of it, or another)
    oom_monotone = "oom-monotone"  # a smaller batch of the same setting did not fit
    memory_model = "memory-model"  # over the budget by its family's memory line
    estimate = "estimate"  # over the budget by the fake-tensor estimate
    crash_family = "crash-family"  # the same setting crashed
    repeat = "repeat"  # settled already by this sweep
    elsewhere = "elsewhere"  # another process of the sweep measured it


@dataclasses.dataclass(frozen=True)
class Step:
    """One spec the sweep considered and how it was settled."""

    spec: TrialSpec
    settled: Settled
    result: TrialResult | None  # None when judged infeasible without running
    feasible: bool
    reason: str = ""
    at_s: float = 0.0  # when it was settled, in seconds since the sweep's start


@dataclasses.dataclass
class SweepProgress:
    """What the sweep has done so far; passed to the progress callback after each step."""

    steps: list[Step] = dataclasses.field(default_factory=list)
    measured: int = 0  # specs measured or being measured
    started: float = dataclasses.field(default_factory=time.perf_counter)
    best: TrialResult | None = None
    since_better: int = 0  # measured specs since the best last improved
    # when the best last improved, in seconds since the start (the time to the answer)
    best_at_s: float | None = None

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started
