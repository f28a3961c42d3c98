"""The designed trials a sweep measures before its sampler's own: the start (the values most
often fastest, at a moderate batch; the climb takes it up, or down where it does not fit), each
single change of the best so far (the anchor), then every axis at its best value, judged by
those changes alone. With the climb, these find the usual winner in a handful of trials; the
sampler and the throughput model then look for what they missed."""

from __future__ import annotations

import enum
from collections.abc import Iterable

from advisor.result import TrialResult
from advisor.search.space import Choice, Space
from advisor.target import Target


class Stage(enum.Enum):
    start = "start"
    changes = "changes"
    combination = "combination"
    done = "done"


class Design:
    def __init__(self, space: Space, target: Target) -> None:
        self.space, self.target = space, target
        self.stage = Stage.start
        self.anchor: dict[str, Choice] | None = None  # the point the changes are made to

    @property
    def done(self) -> bool:
        return self.stage is Stage.done

    @property
    def changing(self) -> bool:
        """The single changes are queued, the combination of their best values not yet."""
        return self.stage is Stage.combination

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
            self.anchor = point
            if point is not None:
                return self._changes(point)
        if self.stage is Stage.combination:
            self.stage = Stage.done
            combined = self._best_values(self.anchor, list(results))
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
        """Every axis at the value of its fastest fitting trial among the anchor and the
        anchor changed in that axis alone, at the anchor's batch. Judged over every trial, an
        axis was confounded by the others: on the H200, bf16's fastest was its compiled trial,
        so the combination kept bf16 where fp16 had beaten it by 32% at the same settings."""
        if point is None:
            return None
        by_point: dict[tuple[tuple[str, Choice], ...], float] = {}  # fastest rate by point
        for r in results:
            p = self.space.params(r.spec)
            if p is not None and self.target.fits(r):
                key = tuple(sorted(p.items()))
                by_point[key] = max(by_point.get(key, 0.0), r.samples_per_s)
        combined: dict[str, Choice] = dict(point)
        for axis in point:
            if axis in ("batch_size", "grad_accum"):
                continue
            by_value = {
                value: rate
                for value in self.space.axes.get(axis, [point[axis]])
                if (rate := by_point.get(tuple(sorted({**point, axis: value}.items())), 0.0))
            }
            combined[axis] = max(by_value, key=by_value.__getitem__, default=point[axis])
        return combined
