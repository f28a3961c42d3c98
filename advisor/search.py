"""The sweep: an Optuna study (ask/tell) over training settings, cheap by construction.

Objective: throughput (samples/s). Constraint: the device peak (reserved + context) within the
target's memory less a margin, given to Optuna with `trial.set_constraint`; an OOM is a complete,
infeasible trial, so the sampler learns where the wall is. Before any GPU time is spent on a spec:
- a spec measured before in this environment is reused;
- a batch at or above one that did not fit (same other knobs) is infeasible without running;
- a setting that crashed at one batch is not run at another;
- a family's fitted memory line (memory_model) that clearly puts a spec over budget skips it;
- without a line yet, so does the fake-tensor estimate (advisor estimate), by a wider margin,
  for an eager spec (the estimate runs the eager model: compiled, memory is often far less).
Before the sampler's own trials come designed ones (see Sweeper._design_next), and after a spec
fits, the same family at the largest batch predicted to fit (by the estimate calibrated on what
was measured, else the line; with neither, the next batch up) is queued next: throughput
usually grows with batch. After the designed trials, a main-effects model of the throughput
measured (throughput_model) names the point left it predicts fastest, which is measured next;
the sweep stops when none is predicted 3% faster than the best, or after `patience` measured
specs without a faster one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import optuna
from optuna.trial import TrialState

from advisor import throughput_model
from advisor.config import MeasureConfig
from advisor.memory_model import AffineFit, Target, family_key, fit
from advisor.result import Status, TrialResult
from advisor.runner import run_trial
from advisor.space import Choice, Space, as_int
from advisor.spec import (
    TrialSpec,
)
from advisor.store.store import Store

CONSTRAINT = "device_memory"  # the constraint's name in Optuna: (peak - allowed) / allowed
CLEARLY_OVER = 0.03  # skip a spec when the memory line puts it this far over, beyond its error
CLEARLY_OVER_ONE_POINT = 0.10  # ... or this far, when one measured batch drew the line
CLEARLY_OVER_ESTIMATE = 0.15  # ... or this far by the fake-tensor estimate, when no line exists
# yet (on the H200 it over-states the steady device peak by 10.1% at worst uncalibrated, 14.6%
# calibrated: experiments/2026-11-30-estimate)
PROMISING = 0.03  # keep measuring while a point left is predicted this much faster than the best
MAX_IDLE_ASKS = 200  # asks in a row that measure nothing: the space is used up


class Backend(Protocol):
    """Where measurements come from: worker processes on the local device, or (in tests) a
    recorded table."""

    def measure(self, spec: TrialSpec) -> TrialResult: ...  # measured now, and stored

    def measured_before(self, spec: TrialSpec) -> TrialResult | None: ...


class MemoryEstimate(Protocol):
    """What a spec needs of the device without running it (advisor estimate), calibrated on what
    has been measured."""

    def device_peak(self, spec: TrialSpec, measured: Sequence[TrialResult]) -> int: ...

    def largest_batch(
        self, spec: TrialSpec, target: Target, measured: Sequence[TrialResult]
    ) -> int | None: ...


class WorkerBackend:
    """Each spec in a worker process of its own; every result stored."""

    def __init__(
        self,
        store: Store,
        settings: MeasureConfig,
        timeout_s: float,
        device_name: str,
        torch_version: str,
    ) -> None:
        self.store, self.settings, self.timeout_s = store, settings, timeout_s
        self.device_name, self.torch_version = device_name, torch_version

    def measure(self, spec: TrialSpec) -> TrialResult:
        return self.store.add(run_trial(spec, self.settings, self.timeout_s))

    def measured_before(self, spec: TrialSpec) -> TrialResult | None:
        return self.store.measured_before(spec, self.device_name, self.torch_version)


@dataclasses.dataclass(frozen=True)
class Step:
    """One spec the sweep considered and how it was settled."""

    spec: TrialSpec
    how: str  # measured | history | oom-monotone | memory-model | estimate | crash-family | repeat
    result: TrialResult | None  # None when judged infeasible without running
    feasible: bool
    reason: str = ""


@dataclasses.dataclass
class SweepProgress:
    """What the sweep has done so far; passed to the progress callback after each step."""

    steps: list[Step] = dataclasses.field(default_factory=list)
    measured: int = 0
    started: float = dataclasses.field(default_factory=time.perf_counter)
    best: TrialResult | None = None
    since_better: int = 0  # measured specs since the best last improved

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started


class Sweeper:
    def __init__(
        self,
        space: Space,
        target: Target,
        backend: Backend,
        study: optuna.Study,
        on_step: Callable[[SweepProgress, Step], None] = lambda progress, step: None,
        on_result: Callable[[TrialResult, bool], None] = lambda result, reused: None,
        estimate: MemoryEstimate | None = None,
    ) -> None:
        self.space, self.target, self.backend, self.study = space, target, backend, study
        self.on_step, self.on_result = on_step, on_result
        self.estimate = estimate
        self.progress = SweepProgress()
        self.results: dict[str, TrialResult] = {}  # by spec hash: what this sweep knows
        # the largest micro batch predicted to fit, by family: the estimate calibrated on what
        # was measured, else the family's memory line
        self.largest_batches: dict[str, tuple[TrialSpec, int, str]] = {}
        self._told: dict[str, Step] = {}
        self._design = "start"  # start -> changes -> combination -> done: see _design_next

    def resume(self, earlier: list[tuple[TrialResult, bool]]) -> None:
        """Take back what earlier runs of this sweep used (nothing is run again; what they
        measured counts against `trials`), and fail the trial an interruption left open."""
        for result, reused in earlier:
            self._know(result)
            self._told[result.spec.hash] = Step(
                result.spec, "history", result, self.target.fits(result), "measured before"
            )
            self.progress.measured += not reused
        for trial in self.study.get_trials(states=(TrialState.RUNNING,)):
            self.study.tell(trial.number, state=TrialState.FAIL)

    def warm_start(self, history: list[TrialResult]) -> None:
        """Give Optuna what history measured inside this space, before its first ask."""
        if self.study.trials:
            return
        for result in history:
            params = self.space.params(result.spec)
            if params is None or result.status not in (Status.ok, Status.oom):
                continue
            self.study.add_trial(
                optuna.trial.create_trial(
                    params=params,
                    distributions=self.space.distributions,
                    value=_throughput(result),
                    system_attrs={f"constraints:{CONSTRAINT}": self._excess(result)},
                )
            )

    def first(self, spec: TrialSpec) -> Step:
        """Settle this spec before any other: the user's own settings, which the recommendation
        is held against. Measured now, or taken from what this sweep or history already has;
        inside the space, Optuna is told of it as a trial, unless the study has one there."""
        step = self._settle(spec)
        if step.how == "repeat":  # settled by an earlier run of this sweep
            return self._told[spec.hash]
        if step.result is not None and step.how in ("measured", "history"):
            self.on_result(step.result, step.how == "history")
        params = self.space.params(spec)
        crashed = step.result is not None and step.result.status not in (Status.ok, Status.oom)
        told = any(t.params == params for t in self.study.trials)
        if params is not None and not crashed and not told:
            value = _throughput(step.result) if step.result is not None else 0.0
            self.study.add_trial(
                optuna.trial.create_trial(
                    params=params,
                    distributions=self.space.distributions,
                    value=value,
                    system_attrs={f"constraints:{CONSTRAINT}": self._step_excess(step)},
                )
            )
        self.progress.steps.append(step)
        self.on_step(self.progress, step)
        return step

    def run(self, trials: int, minutes: float | None, patience: int) -> str:
        """Search until a budget is spent or nothing improves; the reason it stopped."""
        idle = 0
        while True:
            waiting = self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
            if not waiting:
                self._design_next()
                waiting = self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
            if self.progress.measured >= trials:
                return f"measured {trials} specs (trials={trials})"
            if minutes is not None and self.progress.elapsed_s >= 60 * minutes:
                return f"ran {minutes:g} minutes (minutes={minutes:g})"
            if self.progress.best is not None and self._design == "done" and not waiting:
                if self.progress.since_better >= patience:
                    return f"{patience} measured specs without a faster one that fits (patience)"
                promising = self._most_promising()
                if promising is False:
                    return (
                        f"no setting left is predicted to be {PROMISING:.0%} faster than the best "
                        "(a main-effects model of the throughput measured)"
                    )
                if isinstance(promising, dict):  # measure it next
                    self.study.enqueue_trial(promising, skip_if_exists=True)
            if idle >= MAX_IDLE_ASKS or len(self._told) >= self.space.size():
                return "every spec of the space was measured or ruled out"
            trial = self.study.ask(self.space.distributions)
            spec = self.space.spec(trial.params)
            step = self._settle(spec)
            if step.result is not None and step.how in ("measured", "history"):
                self.on_result(step.result, step.how == "history")
            value = _throughput(step.result) if step.result is not None else 0.0
            if step.result is not None and step.result.status not in (Status.ok, Status.oom):
                self.study.tell(trial, state=TrialState.FAIL)  # a crash says nothing of memory
            else:
                trial.set_constraint(CONSTRAINT, self._step_excess(step))
                self.study.tell(trial, value)
            idle = 0 if step.how == "measured" else idle + 1
            if step.how != "repeat":
                self.progress.steps.append(step)
                self.on_step(self.progress, step)
            if step.feasible and step.how in ("measured", "history"):
                self._queue_larger(spec)

    def _design_next(self) -> None:
        """Queue the designed trials that come before the sampler's own: the start (preferred
        values at a moderate batch, smaller while it does not fit), then each single change of
        the best so far, then the best value of every axis together. With the climb, these find
        the usual winner in a handful of trials; the sampler then looks for what they missed."""
        best = self.progress.best
        if self._design == "start":
            if best is None:
                start = self._smaller_start()
                if start is not None:
                    self.study.enqueue_trial(start, skip_if_exists=True)
                    return
            self._design = "changes"
        if self._design == "changes":
            self._design = "combination"
            point = self.space.params(best.spec) if best is not None else None
            if point is not None:
                for axis, choices in self.space.axes.items():
                    for value in choices:
                        if axis != "batch_size" and value != point[axis]:
                            self.study.enqueue_trial({**point, axis: value}, skip_if_exists=True)
                return
        if self._design == "combination":
            self._design = "done"
            combined = self._best_values()
            if combined is not None:
                self.study.enqueue_trial(combined, skip_if_exists=True)

    def _smaller_start(self) -> dict[str, Choice] | None:
        """The start point, or the next smaller micro batch of it while bigger ones did not fit
        (with a fixed effective batch: the next larger accumulation)."""
        start = self.space.start()
        tried = {step.spec.hash for step in self._told.values()}
        if "batch_size" in self.space.axes:
            axis = "batch_size"
            order = sorted((as_int(b) for b in self.space.axes[axis]), reverse=True)
            order = [b for b in order if b <= as_int(start[axis])]
        elif "grad_accum" in self.space.axes:
            axis = "grad_accum"
            order = sorted(as_int(a) for a in self.space.axes[axis])
            order = [a for a in order if a >= as_int(start[axis])]
        else:
            axis, order = "", []
        for candidate in [{**start, axis: value} for value in order] if axis else [start]:
            if self.space.spec(candidate).hash not in tried:
                return candidate
        return None

    def _best_values(self) -> dict[str, Choice] | None:
        """Every axis at the value of its fastest fitting trial, at the best trial's batch."""
        best = self.progress.best
        point = self.space.params(best.spec) if best is not None else None
        if point is None:
            return None
        fitting = [r for r in self.results.values() if self.target.fits(r)]
        combined: dict[str, Choice] = dict(point)
        for axis in point:
            if axis in ("batch_size", "grad_accum"):
                continue
            by_value: dict[Choice, float] = {}
            for r in fitting:
                p = self.space.params(r.spec)
                if p is not None:
                    by_value[p[axis]] = max(by_value.get(p[axis], 0.0), _throughput(r))
            combined[axis] = max(by_value, key=by_value.__getitem__, default=point[axis])
        return combined

    def _settle(self, spec: TrialSpec) -> Step:
        if spec.hash in self._told:
            return dataclasses.replace(self._told[spec.hash], how="repeat")
        step = self._judge(spec)
        if step is None:
            result = self.backend.measure(spec)
            self.progress.measured += 1
            self.progress.since_better += 1
            self._know(result)
            step = Step(spec, "measured", result, self.target.fits(result))
        self._told[spec.hash] = step
        return step

    def _judge(self, spec: TrialSpec) -> Step | None:
        """Settle a spec without running it, if that can be done; None: it must be measured."""
        known = self.results.get(spec.hash) or self.backend.measured_before(spec)
        if known is not None:
            self._know(known)
            return Step(spec, "history", known, self.target.fits(known), "measured before")
        ruled_out = self._ruled_out(spec)
        if ruled_out is not None:
            return ruled_out
        crashed = self._crashed(spec)
        if crashed is not None:
            return crashed
        if self._fit(family_key(spec)) is None and self.estimate is not None and not spec.compile:
            # no line for this family yet: ask the estimate. Not for a compiled spec: the fake
            # step runs the eager model, and inductor keeps far fewer activations (gpt2 at batch
            # 32 on the H200: 30.1 GiB compiled, 55 eager; experiments/2026-11-30-h200-sweep-capped)
            estimated = self.estimate.device_peak(spec, list(self.results.values()))
            if self.target.excess(estimated) > CLEARLY_OVER_ESTIMATE:
                reason = f"estimated at {estimated / 2**30:.1f} GiB without running"
                return Step(spec, "estimate", None, False, reason)
        return None

    def _ruled_out(self, spec: TrialSpec) -> Step | None:
        """Infeasible by what was measured: a smaller batch that did not fit, or the line."""
        family = family_key(spec)
        for other in self.results.values():
            if (
                family_key(other.spec) == family
                and other.spec.batch_size <= spec.batch_size
                and self._over(other)
            ):
                reason = f"batch {other.spec.batch_size} of the same setting did not fit"
                return Step(spec, "oom-monotone", None, False, reason)
        line = self._fit(family)
        if line is not None:
            predicted = line.peak(spec.batch_size) + line.max_residual_bytes
            clearly = CLEARLY_OVER if line.points > 1 else CLEARLY_OVER_ONE_POINT
            if self.target.excess(predicted) > clearly:
                reason = f"memory line predicts {predicted / 2**30:.1f} GiB"
                return Step(spec, "memory-model", None, False, reason)
        return None

    def _crashed(self, spec: TrialSpec) -> Step | None:
        """A setting that crashed at one batch crashes at the others: what fails is the code
        path, not the memory (on the H200, gpt2 compiled with checkpointing crashed at every
        batch; experiments/2026-11-30-h200-sweep-capped). Not a timeout, which can be the
        batch's."""
        family = family_key(spec)
        for other in self.results.values():
            if family_key(other.spec) == family and other.status is Status.crashed:
                reason = f"crashed at batch {other.spec.batch_size} with the same other knobs"
                return Step(spec, "crash-family", None, False, reason)
        return None

    def _most_promising(self) -> dict[str, Choice] | bool:
        """The point not yet settled that the main-effects model of what was measured predicts
        fastest, if that is clearly faster than the best; among points not ruled out by memory.
        True: none predicted so, but some cannot be predicted (a value nothing measured had, or
        no model yet); False: nothing left may be clearly faster."""
        best = self.progress.best
        measured = [
            (params, _throughput(r))
            for r in self.results.values()
            if r.status is Status.ok and (params := self.space.params(r.spec)) is not None
        ]
        model = throughput_model.fit(measured)
        if best is None or model is None:
            return True
        told = {step.spec.hash for step in self._told.values()}
        # throughput does not fall as the micro batch grows: a batch below every measured one
        # is predicted at most as fast as the smallest measured
        smallest = min(
            (as_int(p["batch_size"]) for p, _ in measured if "batch_size" in p), default=0
        )
        unknown, top, top_rate = False, None, _throughput(best) * (1 + PROMISING)
        for point in self.space.points():
            seen = point
            if "batch_size" in point and as_int(point["batch_size"]) < smallest:
                seen = {**point, "batch_size": smallest}
            predicted = model.predict(seen)
            if predicted is not None and predicted <= top_rate:
                continue  # (the cheap test first: spaces run to thousands of points)
            spec = self.space.spec(point)
            if spec.hash in told or self._ruled_out(spec) is not None:
                continue
            if predicted is None:
                unknown = True
            else:
                top, top_rate = point, predicted
        return top if top is not None else unknown

    def _queue_larger(self, spec: TrialSpec) -> None:
        """Climb: the same setting at the largest batch predicted to fit, or the next one up."""
        if not any(b > spec.batch_size for b in self.space.batch_sizes):
            return  # nowhere to climb: spare the estimate's seconds
        largest = self._largest_batch(spec)
        if largest is not None:
            candidates = [b for b in self.space.batch_sizes if spec.batch_size < b <= largest]
        else:  # one point fixes no line: take the next batch up
            candidates = [
                min((b for b in self.space.batch_sizes if b > spec.batch_size), default=0)
            ]
        candidates = [b for b in candidates if b > 0]
        if not candidates:
            return
        bigger = dataclasses.replace(spec, batch_size=max(candidates))
        params = self.space.params(bigger)
        if params is not None and bigger.hash not in self._told:
            self.study.enqueue_trial(params, skip_if_exists=True)

    def _largest_batch(self, spec: TrialSpec) -> int | None:
        """The family's largest micro batch predicted to fit: by the estimate, calibrated on the
        measured points (the allocator's model under the target's limit: it gives its cache back
        near the limit, which a line through uncapped peaks cannot know), else by the line."""
        family = family_key(spec)
        if self.estimate is not None:
            measured = list(self.results.values())
            largest = self.estimate.largest_batch(spec, self.target, measured)
            if largest is not None:
                self.largest_batches[family] = (spec, largest, "estimate")
                return largest
        line = self._fit(family)
        if line is None:
            return None
        self.largest_batches[family] = (spec, line.largest_batch(self.target.allowed_bytes), "line")
        return self.largest_batches[family][1]

    def _fit(self, family: str) -> AffineFit | None:
        measured = [
            r
            for r in self.results.values()
            if family_key(r.spec) == family and r.status is Status.ok and r.memory is not None
        ]
        points, fixed = [], None
        for r in measured:
            assert r.memory is not None
            points.append((r.spec.batch_size, r.memory.device_peak_bytes))
            m = r.memory
            fixed = m.context_bytes + m.params_bytes + m.buffers_bytes + m.grads_bytes
            fixed += m.optimizer_state_bytes
        return fit(points, fixed)

    def fits(self) -> dict[str, AffineFit]:
        """The memory line of every family with two measured batches."""
        families = {family_key(r.spec) for r in self.results.values()}
        lines = {f: self._fit(f) for f in families}
        return {f: line for f, line in lines.items() if line is not None}

    def _know(self, result: TrialResult) -> None:
        self.results[result.spec.hash] = result
        if self.target.fits(result) and (
            self.progress.best is None or _throughput(result) > _throughput(self.progress.best)
        ):
            self.progress.best = result
            self.progress.since_better = 0

    def _over(self, result: TrialResult) -> bool:
        return result.status is Status.oom or (
            result.status is Status.ok and not self.target.fits(result)
        )

    def _excess(self, result: TrialResult) -> float:
        if result.status is Status.ok and result.memory is not None:
            return self.target.excess(result.memory.device_peak_bytes)
        return 1.0  # an OOM: over by an unknown amount

    def _step_excess(self, step: Step) -> float:
        if step.result is not None:
            return self._excess(step.result)
        return 1.0


def _throughput(result: TrialResult | None) -> float:
    if result is None or result.throughput is None:
        return 0.0
    return result.throughput.samples_per_s


def confirm_under_cap(backend: Backend, result: TrialResult, cap: int) -> TrialResult:
    """Run a setting measured without the cap (history) again under it: does it really fit the
    smaller GPU?"""
    return backend.measure(dataclasses.replace(result.spec, memory_cap_bytes=cap))
