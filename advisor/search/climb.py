"""The batch each setting is measured at. After a spec of a setting is settled, its setting
climbs to the largest batch of the space predicted to fit (and back down on an overshoot); where
memory binds, the nuisance axes come in as rescues: expandable segments for a near miss,
checkpointing where no batch of the setting fits. A setting's rate counts for the throughput
model once its climb has ended."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import optuna

from advisor.estimation.memory_line import family_key
from advisor.result import Status, TrialResult
from advisor.search import throughput_model
from advisor.search.design import Design
from advisor.search.feasibility import Feasibility
from advisor.search.space import Choice, Space, as_int
from advisor.search.steps import Step
from advisor.spec import Checkpointing, TrialSpec
from advisor.target import Target

NEAR_MISS = 0.10  # over the budget by at most this: expandable segments may make it fit


class Climb:
    """The climb of every setting of one sweep, over what the sweep has settled (`told`, by
    spec hash) and is measuring (`in_flight`): both the sweep's own, read here."""

    def __init__(
        self,
        space: Space,
        target: Target,
        study: optuna.Study,
        feasibility: Feasibility,
        design: Design,
        told: dict[str, Step],
        in_flight: dict[str, TrialSpec],
    ) -> None:
        self.space, self.target, self.study = space, target, study
        self.feasibility, self.design = feasibility, design
        self.told, self.in_flight = told, in_flight
        self.rescues: list[TrialSpec] = []  # specs outside Optuna's axes to measure next
        self.later: list[dict[str, Choice]] = []  # climbs queued once the design is done

    def next_rescue(self) -> TrialSpec | None:
        """The next spec to measure outside Optuna's axes (a retry, a climb's nuisance value)."""
        return self.rescues.pop(0) if self.rescues else None

    def take_later(self) -> list[dict[str, Choice]]:
        """The climbs held back while the design changed the anchor, to queue now it is done."""
        later, self.later = self.later, []
        return later

    def after(self, spec: TrialSpec) -> bool:
        """After a step of a setting, queue the next batch of it worth measuring (see
        Feasibility.next_batch); True if that is smaller than the spec's."""
        pick = self.feasibility.next_batch(spec, self.tried(spec), self.space.batch_sizes)
        if pick is None:
            return False
        candidate = dataclasses.replace(spec, batch_size=pick)
        params = self.space.params(candidate)
        if params is None or candidate.hash in self.told or candidate.hash in self.in_flight:
            return False
        if self.space.spec(params).hash != candidate.hash:  # a retry's (a nuisance value)
            self.rescues.append(candidate)  # outside Optuna's axes
        elif pick < spec.batch_size and self.design.changing:
            # a change of the anchor that does not fit climbs down after the combination: on
            # the H200, resnet50's b1024 of torch's default took the trial that fp16 + compile
            # (the combination) needed before the answer was due
            self.later.append(params)
        else:
            self.study.enqueue_trial(params, skip_if_exists=True)
        return pick < spec.batch_size

    def rescue(self, step: Step, smaller: bool) -> None:
        """The nuisance axes enter where memory binds, on a spec measured not to fit: expandable
        segments (less fragmentation, the same speed) when it ran and missed by NEAR_MISS at
        most; checkpointing (slower, but it fits) when no batch of its setting fits and none
        smaller is predicted to (`smaller`: the climb queued one). A retry is not retried."""
        spec, base, nuisance = step.spec, self.space.base, self.space.nuisance
        if (spec.expandable_segments, spec.checkpointing) != (
            base.expandable_segments,
            base.checkpointing,
        ):
            return
        memory = step.result.memory if step.result is not None else None
        near = memory is not None and self.target.excess(memory.device_peak_bytes) <= NEAR_MISS
        if "expandable_segments" in nuisance and not spec.expandable_segments and near:
            self.rescues.append(dataclasses.replace(spec, expandable_segments=True))
        family = family_key(spec)
        fits = any(s.feasible for s in self.told.values() if family_key(s.spec) == family)
        blocks = "checkpointing" in nuisance and spec.checkpointing is Checkpointing.none
        if blocks and not fits and not smaller:
            self.rescues.append(dataclasses.replace(spec, checkpointing=Checkpointing.blocks))

    def ended(self, spec: TrialSpec) -> bool:
        """Whether this spec's batch is where its setting's climb ended."""
        family = family_key(spec)
        if any(family_key(s) == family for s in self.in_flight.values()):
            return False
        return self.feasibility.climb_ended(spec, self.tried(spec), self.space.batch_sizes)

    def tried(self, spec: TrialSpec) -> list[tuple[int, bool]]:
        """The batches of the spec's setting settled so far, and whether each fit."""
        family = family_key(spec)
        return [
            (step.spec.batch_size, step.feasible)
            for step in self.told.values()
            if family_key(step.spec) == family
        ]

    def batch_for(self, point: dict[str, Choice]) -> int:
        """The largest batch of the space predicted to fit for the point's setting."""
        largest = self.feasibility.largest_batch(self.space.spec(point))
        if largest is None:
            return as_int(point["batch_size"])
        fitting = [b for b in self.space.batch_sizes if b <= largest]
        return max(fitting) if fitting else min(self.space.batch_sizes)

    def setting_rates(
        self, results: Iterable[TrialResult], by_batch: bool
    ) -> dict[object, tuple[dict[str, Choice], float]]:
        """Each setting's fastest fitting rate, where its climb has ended (by_batch); else each
        point's rate."""
        rates: dict[object, tuple[dict[str, Choice], float]] = {}
        for r in results:
            params = self.space.params(r.spec)
            if params is None or r.status is not Status.ok or not self.target.fits(r):
                continue
            if by_batch and not self.ended(r.spec):
                continue
            setting = {k: v for k, v in params.items() if k != "batch_size" or not by_batch}
            key = tuple(sorted(setting.items(), key=lambda item: item[0]))
            if key not in rates or r.samples_per_s > rates[key][1]:
                rates[key] = (setting, r.samples_per_s)
        return rates

    def most_promising(
        self, best: TrialResult | None, results: Iterable[TrialResult]
    ) -> dict[str, Choice] | bool:
        """The untried setting the main-effects model predicts clearly faster than the best
        (throughput_model.most_promising); over settings, each at its climb's end."""
        by_batch = "batch_size" in self.space.axes
        if best is None:
            return True
        tried = {family_key(step.spec) for step in self.told.values()}
        tried |= {family_key(spec) for spec in self.in_flight.values()}
        rates = list(self.setting_rates(results, by_batch).values())
        return throughput_model.most_promising(
            self.space, rates, best, tried, self.batch_for if by_batch else None
        )
