"""The designed trials a sweep measures before its sampler's own: the start (the values most
often fastest, at a moderate batch; the climb takes it up, or down where it does not fit), each
single change of the best so far, then the best value of every axis together. With the climb,
these find the usual winner in a handful of trials; the sampler and the throughput model then
look for what they missed."""

from __future__ import annotations

import enum
from collections.abc import Iterable

from advisor.memory_model import Target
from advisor.result import TrialResult
from advisor.space import Choice, Space


class Stage(enum.Enum):
    start = "start"
    changes = "changes"
    combination = "combination"
    done = "done"


class Design:
    def __init__(self, space: Space, target: Target) -> None:
        self.space, self.target = space, target
        self.stage = Stage.start

    @property
    def done(self) -> bool:
        return self.stage is Stage.done

    def next_points(
        self, best: TrialResult | None, tried: set[str], results: Iterable[TrialResult]
    ) -> list[dict[str, Choice]]:
        """The points to queue once nothing is being measured and nothing is queued (the
        stage moves on at each call; once it is done, none). `tried`: hashes of the specs
        settled. The start comes first,
        whatever the baseline measured: the baseline is the user's, often at a batch where the
        preferred values are slow (resnet50 b32 on the H200: bf16 1,360/s, torch's default
        1,728/s; at b2048 bf16 with channels_last is the faster by far). Its climb is queued as
        it is measured, so the changes come from the best of the climb."""
        if self.stage is Stage.start:
            self.stage = Stage.changes
            start = self.space.start()
            if self.space.spec(start).hash not in tried:
                return [start]
        point = self.space.params(best.spec) if best is not None else None
        if self.stage is Stage.changes:
            self.stage = Stage.combination
            if point is not None:
                return self._changes(point)
        if self.stage is Stage.combination:
            self.stage = Stage.done
            combined = self._best_values(point, list(results))
            if combined is not None:
                return [combined]
        return []

    def _changes(self, point: dict[str, Choice]) -> list[dict[str, Choice]]:
        """Each single change of the point, but for its batch."""
        return [
            {**point, axis: value}
            for axis, choices in self.space.axes.items()
            for value in choices
            if axis != "batch_size" and value != point[axis]
        ]

    def _best_values(
        self, point: dict[str, Choice] | None, results: list[TrialResult]
    ) -> dict[str, Choice] | None:
        """Every axis at the value of its fastest fitting trial, at the best trial's batch."""
        if point is None:
            return None
        fitting = [r for r in results if self.target.fits(r)]
        combined: dict[str, Choice] = dict(point)
        for axis in point:
            if axis in ("batch_size", "grad_accum"):
                continue
            by_value: dict[Choice, float] = {}
            for r in fitting:
                p = self.space.params(r.spec)
                if p is not None:
                    by_value[p[axis]] = max(by_value.get(p[axis], 0.0), r.samples_per_s)
            combined[axis] = max(by_value, key=by_value.__getitem__, default=point[axis])
        return combined
