"""What a sweep did, step by step: each spec it settled and how, and its progress so far (what
the progress bar, the report and the time to the answer are drawn from)."""

from __future__ import annotations

import dataclasses
import time

from advisor.result import TrialResult
from advisor.spec import TrialSpec


@dataclasses.dataclass(frozen=True)
class Step:
    """One spec the sweep considered and how it was settled."""

    spec: TrialSpec
    # measured | history | oom-monotone | memory-model | estimate | crash-family | repeat |
    # elsewhere (another process of the sweep measured it)
    how: str
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
