"""The sweep: an Optuna study (ask/tell) over training settings, cheap by construction.

Objective: throughput (samples/s). Constraint: the device peak (reserved + context) within the
target less a margin, via `trial.set_constraint`; an OOM is a complete, infeasible trial. Before
any GPU time is spent, a spec is settled without running where it can be: measured before in
this environment (reused); at or above a batch that did not fit; a setting that crashed; or
clearly over budget by its family's memory line, else by the fake-tensor estimate (compiled:
times the compiled/eager ratio measured). Designed trials come first (design.py); after a spec
fits, its setting climbs to the largest batch predicted to fit (and back down on an overshoot).
The nuisance axes (expandable segments, checkpointing) change what fits, not what is fastest:
they enter only where memory binds (climb.py); accumulation is an axis only with a fixed
effective batch. Then a main-effects model over the settings measured (throughput_model) names
the one left it predicts fastest. The sweep stops when none is predicted 2% faster than the
best, after `patience` specs without a faster one, or when no trial would end before the
answer is due (`minutes`).

Several workers (one per GPU) take specs from the one study, one at a time each, every decision
under one lock; a spec being measured is reserved, from other processes of the sweep too
(`Others`), whose results are taken in before each decision: none is measured twice.
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from collections.abc import Callable

import optuna
from optuna.trial import TrialState

from advisor.estimation.memory_line import family_key
from advisor.result import Status, TrialResult
from advisor.search import throughput_model
from advisor.search.backend import Backend
from advisor.search.climb import Climb
from advisor.search.design import Design
from advisor.search.feasibility import Feasibility, MemoryEstimate
from advisor.search.space import Choice, Space
from advisor.search.steps import Settled, Step, SweepProgress
from advisor.search.study import OWNER, add_settled, tell_settled
from advisor.spec import TrialSpec
from advisor.store.sharing import Alone, Others
from advisor.target import Target

MAX_IDLE_ASKS = 200  # asks in a row that measure nothing: the space is used up
POLL_S = 2.0  # how often a worker waiting on other processes looks again


@dataclasses.dataclass(frozen=True)
class _Job:
    """A spec reserved for a worker to measure, and its Optuna trial (None for a rescue)."""

    spec: TrialSpec
    trial: optuna.trial.Trial | None


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
        on_measuring: Callable[[int, TrialSpec], None] = lambda slot, spec: None,
        others: Others | None = None,
    ) -> None:
        self.space, self.target, self.backend, self.study = space, target, backend, study
        self.others = others or Alone()
        self.on_step, self.on_result, self.on_measuring = on_step, on_result, on_measuring
        self.estimate = estimate
        self.progress = SweepProgress()
        self.results: dict[str, TrialResult] = {}  # by spec hash: what this sweep knows
        self._told: dict[str, Step] = {}
        self._in_flight: dict[str, TrialSpec] = {}  # being measured, by spec hash
        self._resumed: set[int | None] = set()  # trial ids resume() took back
        self.feasibility = Feasibility(target, estimate, self.results)
        self._design = Design(space, target)
        self.climb = Climb(
            space, target, study, self.feasibility, self._design, self._told, self._in_flight
        )
        self._lock = threading.Condition()
        self._idle = 0  # asks in a row that measured nothing
        self._failure: BaseException | None = None  # what stopped a worker thread
        self._budget: tuple[int, float | None, int] = (0, None, 0)  # trials, minutes, patience

    def largest_batches(self, answer: TrialResult | None) -> dict[str, tuple[TrialSpec, int, str]]:
        """The largest micro batch predicted to fit, by family: (spec, batch, by what); the
        answer's family among them, though the search never climbed it (the baseline's)."""
        if answer is not None and family_key(answer.spec) not in self.feasibility.largest_batches:
            self.feasibility.largest_batch(answer.spec)
        return dict(self.feasibility.largest_batches)

    def resume(self, earlier: list[tuple[TrialResult, bool]]) -> None:
        """Take back what earlier runs of this sweep used (nothing is run again; what they
        measured counts against `trials`), and fail the trial an interruption left open."""
        for result, reused in earlier:
            self._resumed.add(result.id)
            self._take_in(result)
            fits = self.target.fits(result)
            self._told[result.spec.hash] = Step(
                result.spec, Settled.history, result, fits, "earlier"
            )
            self.progress.measured += not reused
        for trial in self.study.get_trials(states=(TrialState.RUNNING,)):
            if self.others.abandoned(str(trial.user_attrs.get(OWNER, "")), trial.datetime_start):
                self.study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)

    def warm_start(self, history: list[TrialResult]) -> None:
        """Give Optuna what history measured inside this space, before its first ask."""
        if self.study.trials:
            return
        for result in history:
            params = self.space.params(result.spec)
            if params is None or result.status not in (Status.ok, Status.oom):
                continue
            self._add_trial(params, result)

    def first(self, spec: TrialSpec) -> Step:
        """Settle this spec before any other: the user's own settings, which the recommendation
        is held against. Measured now, or taken from what this sweep or history already has;
        inside the space, Optuna is told of it as a trial, unless the study has one there."""
        step = self._settled_without_running(spec)
        while step is None and not self._reserve(spec):  # another process measures it
            time.sleep(POLL_S)
            self._take_news()
            step = self._settled_without_running(spec)
        if step is None:
            self.on_measuring(0, spec)
            step = self._measured(spec, self.backend.measure(spec))
        if step.settled is Settled.repeat:  # settled by an earlier run of this sweep
            return self._told[spec.hash]
        if step.result is not None and step.settled in (Settled.measured, Settled.history):
            self.on_result(step.result, step.settled is Settled.history)
        params = self.space.params(spec)
        crashed = step.result is not None and step.result.status not in (Status.ok, Status.oom)
        told = any(t.params == params for t in self.study.trials)
        if params is not None and not crashed and not told:
            self._add_trial(params, step.result)
        self.others.drop(spec.hash)  # (measured here, or never claimed)
        self._record(step)
        return step

    def _add_trial(self, params: dict[str, Choice], result: TrialResult | None) -> None:
        add_settled(self.study, self.space, params, result, self._excess(result))

    def run(self, trials: int, minutes: float | None, patience: int, workers: int = 1) -> str:
        """Search until a budget is spent or nothing improves; the reason it stopped. With
        several workers, each measures one spec at a time (worker i on the backend's slot i)."""
        self._budget = (trials, minutes, patience)
        reasons: list[str] = []
        if workers == 1:
            self._work(0, reasons)
            if self._failure is not None:
                raise self._failure
            return reasons[-1]
        threads = [
            threading.Thread(target=self._work, args=(slot, reasons), daemon=True)
            for slot in range(workers)
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(timeout=0.5)
        except KeyboardInterrupt:  # Ctrl-C reaches this thread only: stop the others' trials
            with self._lock:
                self._failure = self._failure or KeyboardInterrupt()
                self._lock.notify_all()
            self.backend.stop()
            for thread in threads:
                thread.join()
            raise
        if self._failure is not None:
            raise self._failure
        return reasons[-1]

    def _work(self, slot: int, reasons: list[str]) -> None:
        """One worker: take the next spec to measure, measure it, tell; until told to stop.
        What goes wrong (Ctrl-C, a database that fails) is kept for run() to raise."""
        job: _Job | str | None = None
        try:
            while True:
                with self._lock:
                    job = self._next_job()
                    while job is None:
                        self._lock.wait(POLL_S)  # another worker's result, or another process's
                        job = self._next_job()
                    if isinstance(job, str):
                        reasons.append(job)
                        self._lock.notify_all()
                        return
                    # timing is cut once a spec cannot beat the best; a job's best is a
                    # modelled rate, which a rank's measured one is not held to
                    rate = self.progress.best.samples_per_s if self.progress.best else None
                    rate = None if self.space.base.gpus > 1 else rate
                    self.on_measuring(slot, job.spec)
                result = self.backend.measure(job.spec, slot, rate)
                with self._lock:
                    self._tell(job, self._measured(job.spec, result))
                    self.others.drop(job.spec.hash)  # once Optuna knows: its trial is done
                    self._lock.notify_all()
        except BaseException as error:
            with self._lock:
                self._failure = self._failure or error
                if isinstance(job, _Job):
                    self._in_flight.pop(job.spec.hash, None)
                    self.others.drop(job.spec.hash)
                    if job.trial is not None:
                        self.study.tell(job.trial, state=TrialState.FAIL, skip_if_finished=True)
                self._lock.notify_all()

    def _next_job(self) -> _Job | str | None:
        """Under the lock: the next spec to measure (reserved), the reason to stop, or None to
        wait for a spec being measured. Specs settled without measuring are told on the way."""
        trials, minutes, patience = self._budget
        self._take_news()
        while True:
            if self._failure is not None:
                return "stopped: a worker failed"
            if self.progress.measured >= trials:
                n = self.progress.measured  # (more than trials= where resumed with fewer)
                more = " already" if n > trials else ""
                return self._unless_busy(f"{n} specs measured{more} (trials={trials})")
            if minutes is not None and self._past_due(60 * minutes):
                return self._unless_busy(
                    f"the answer is due at {minutes:g} minutes (minutes={minutes:g}): a trial "
                    "started now would end after it, with the answer's repeat still to run"
                )
            while (spec := self.climb.next_rescue()) is not None:
                step = self._settled_without_running(spec)
                if step is None and self._reserve(spec):
                    return _Job(spec, None)
                if step is not None:  # (else another process measures it)
                    self._tell(_Job(spec, None), step)
            waiting = self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
            if not waiting and not self._in_flight:  # what is measured decides what comes next
                self._queue_designed()
                waiting = self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
            if not waiting and self._in_flight and not self._design.done:
                return None  # what is measured decides what the design tries next
            if self.progress.best is not None and self._design.done and not waiting:
                if self.progress.since_better >= patience:
                    return self._unless_busy(
                        f"{patience} measured specs without a faster one that fits (patience)"
                    )
                promising = self.climb.most_promising(self.progress.best, self.results.values())
                if promising is False:
                    return self._unless_busy(
                        f"no setting left is predicted to be {throughput_model.PROMISING:.0%} "
                        "faster than the best (a main-effects model of the throughput measured)"
                    )
                if isinstance(promising, dict):  # measure it next
                    self.study.enqueue_trial(promising, skip_if_exists=True)
            if self._idle >= MAX_IDLE_ASKS or self._points_settled() >= self.space.size():
                return self._unless_busy("every spec of the space was measured or ruled out")
            trial = self.study.ask(self.space.distributions)
            trial.set_user_attr(OWNER, self.others.owner)  # whose it is, for a resume to tell
            spec = self.space.spec(trial.params)
            step = None if spec.hash in self._in_flight else self._settled_without_running(spec)
            if step is None and spec.hash not in self._in_flight and self._reserve(spec):
                return _Job(spec, trial)
            if step is None:  # another worker, or another process, is measuring it
                self.study.tell(trial, state=TrialState.FAIL)
                self._idle += 1
                continue
            self._tell(_Job(spec, trial), step)

    def _past_due(self, deadline_s: float) -> bool:
        """Whether a trial started now is expected to end past the deadline with the answer's
        repeat still to run: the trial as long as this sweep's median so far, the repeat, on
        purpose an upper bound, as long as the best's own first measurement."""
        walls = [
            s.result.wall_s
            for s in self.progress.steps
            if s.settled is Settled.measured and s.result
        ]
        typical = statistics.median_high(walls) if walls else 0.0
        repeat = self.progress.best.wall_s if self.progress.best is not None else 0.0
        return self.progress.elapsed_s + typical + repeat >= deadline_s

    def _unless_busy(self, reason: str) -> str | None:
        """The reason to stop, or None (wait) while another worker or process still measures."""
        measuring = [key for key in self.others.busy() if not key.startswith("answer-")]
        return None if self._in_flight or measuring else reason

    def _points_settled(self) -> int:
        """Points of the space settled or being measured (retries and a baseline outside the
        space are no points of their own)."""
        specs = [step.spec for step in self._told.values()] + list(self._in_flight.values())
        params = (self.space.params(spec) for spec in specs)
        return len({tuple(sorted(p.items())) for p in params if p is not None})

    def _queue_designed(self) -> None:
        tried = {step.spec.hash for step in self._told.values()}
        points = self._design.next_points(self.progress.best, tried, self.results.values())
        if self._design.done:
            points = points + self.climb.take_later()
        for point in points:
            self.study.enqueue_trial(point, skip_if_exists=True)

    def _reserve(self, spec: TrialSpec) -> bool:
        """Reserve a spec to measure; False if another process measures it, or just did."""
        if not self.others.take(spec.hash):
            return False
        self._take_news()  # what another process stored as this one claimed, crashes too
        if spec.hash in self._told:
            self.others.drop(spec.hash)
            return False
        self._in_flight[spec.hash] = spec
        self.progress.measured += 1
        return True

    def _take_news(self) -> None:
        """Take in what other processes of this sweep measured (or reused) since last asked;
        one settled here from history as the other stored it counts as theirs, measured."""
        for result, reused in self.others.news():
            spec, told = result.spec, self._told.get(result.spec.hash)
            if result.id in self._resumed or spec.hash in self._in_flight:
                continue  # counted by resume(), or this process's own, being told
            if told is not None and told.settled in (Settled.measured, Settled.elsewhere):
                continue
            self.progress.since_better += not reused
            self._take_in(result)
            if not reused:
                self.progress.measured += 1
                self._told[spec.hash] = Step(
                    spec, Settled.elsewhere, result, self.target.fits(result)
                )
                self._record(self._told[spec.hash])
            self._idle = 0

    def _measured(self, spec: TrialSpec, result: TrialResult) -> Step:
        self._in_flight.pop(spec.hash, None)
        self.progress.since_better += 1
        self._take_in(result)
        step = Step(spec, Settled.measured, result, self.target.fits(result))
        self._told[spec.hash] = step
        self._idle = 0
        return step

    def _tell(self, job: _Job, step: Step) -> None:
        """Tell Optuna, the listeners and the climb what a step settled."""
        if step.result is not None and step.settled in (Settled.measured, Settled.history):
            self.on_result(step.result, step.settled is Settled.history)
        failed = step.result is not None and step.result.status not in (Status.ok, Status.oom)
        if job.trial is not None:
            tell_settled(self.study, job.trial, step.result, failed, self._excess(step.result))
        if step.settled is not Settled.measured:
            self._idle += 1
        if step.settled is not Settled.repeat:
            self._record(step)
        crashed = step.settled is Settled.crash_family or failed
        smaller = step.settled is not Settled.repeat and not crashed and self.climb.after(step.spec)
        if step.settled is Settled.measured and not step.feasible and not crashed:
            self.climb.rescue(step, smaller)

    def _record(self, step: Step) -> None:
        step = dataclasses.replace(step, at_s=self.progress.elapsed_s)
        self.progress.steps.append(step)
        self.on_step(self.progress, step)

    def _settled_without_running(self, spec: TrialSpec) -> Step | None:
        """Settle a spec without running it, where that can be done: told before (a repeat),
        measured before (this sweep or history), or judged not to fit or not to run. None: it
        must be measured."""
        if spec.hash in self._told:
            return dataclasses.replace(self._told[spec.hash], settled=Settled.repeat)
        known = self.results.get(spec.hash) or self.backend.measured_before(spec)
        if known is not None:
            self._take_in(known)
            step = Step(spec, Settled.history, known, self.target.fits(known), "measured before")
        elif (verdict := self.feasibility.verdict(spec)) is not None:
            step = Step(spec, verdict.settled, None, False, verdict.reason)
        else:
            return None
        self._told[spec.hash] = step
        return step

    def _take_in(self, result: TrialResult) -> None:
        # a setting's first measurement stands for it (later ones, its repeats, are reported)
        self.results.setdefault(result.spec.hash, result)
        if self.target.fits(result) and (
            self.progress.best is None or result.samples_per_s > self.progress.best.samples_per_s
        ):
            self.progress.best = result
            self.progress.since_better = 0
            self.progress.best_at_s = self.progress.elapsed_s

    def _excess(self, result: TrialResult | None) -> float:
        if result is not None and result.status is Status.ok and result.memory is not None:
            return self.target.excess(result.memory.device_peak_bytes)
        return 1.0  # an OOM, or judged over without running: by an unknown amount
