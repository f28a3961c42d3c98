"""The sweep's answer: the fastest setting that fits, measured again until it is known (its
median measurement counts), and how soon the search first measured it, or one near it. Rates
taken while other work loaded the machine differently are not pooled (a setting counts by its
newest load's, recommendation.one_per_setting), and the settings the answer is held against
(its runners-up, the user's own) are measured again where theirs differs from the answer's."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from advisor.recommendation import (
    DISAGREE,
    Recommendation,
    disagreement,
    newest_load,
    one_per_setting,
    same_load,
    typical,
)
from advisor.recommendation import recommend as recommend_from
from advisor.result import Status, TrialResult
from advisor.search.backend import WorkerBackend
from advisor.search.steps import SweepProgress
from advisor.search.sweeper import POLL_S
from advisor.spec import TrialSpec
from advisor.store.sharing import Others
from advisor.store.store import Store
from advisor.store.trial_filter import TrialFilter
from advisor.target import Target

NEAR = 0.02  # the time to the answer: until a setting within this of its rate was measured
MOST_MEASUREMENTS = 3  # of the answer: the search's and two repeats (a resume adds none)


@dataclasses.dataclass(frozen=True)
class LoadCheck:
    """How the answer's rates were made comparable on a machine that other work loaded."""

    load_now: float  # others' share of the CPUs in the answer's newest measurement
    # settings the answer is held against, whose rate was taken under another load: each
    # (that measurement, the one made again now)
    measured_again: list[tuple[TrialResult, TrialResult]]
    # fitting settings whose figure (the newest load's) was taken under another load than
    # the answer's, measured again or not
    apart: list[TrialResult]

    def to_dict(self) -> dict[str, object]:
        return {
            "now": self.load_now,
            "measured_again": [[old.id, new.id] for old, new in self.measured_again],
            "apart": [r.id for r in self.apart],
        }


class Answer:
    """The recommendation, measured at least twice (under the target's cap, where there is
    one): a setting is recommended by its median measurement, a third is made when two
    disagree by more than DISAGREE, and one that fails again gives way to the next."""

    def __init__(
        self,
        store: Store,
        backend: WorkerBackend,
        on_measuring: Callable[[int, TrialSpec], None],
        cap: int | None,
        device_name: str,
        torch_version: str,
        others: Others,
        on_measured: Callable[[TrialResult, str], None] = lambda result, why: None,
        # what the search sees of a stored trial (a rank's as its whole job: SweepPlan.seen)
        seen: Callable[[TrialResult], TrialResult] = lambda result: result,
    ) -> None:
        self.store, self.backend, self.others, self.seen = store, backend, others, seen
        self.on_measuring = on_measuring
        self.on_measured = on_measured  # told each measurement made here, and why
        self.cap, self.device_name, self.torch_version = cap, device_name, torch_version
        self.repeats: list[TrialResult] = []  # the answer's measurements, newest first
        self.excluded: set[str] = set()  # settings that failed their repeat (uncapped hash)
        self.load_now: float | None = None  # the answer's newest measurement's (None: unknown)
        self.answered: TrialSpec | None = None  # the setting settled on (uncapped)
        self.again: list[tuple[TrialResult, TrialResult]] = []  # measured again for the load
        self.not_again: list[TrialResult] = []  # measured again for the load, and not ok then

    def settle(
        self,
        results: list[TrialResult],
        target: Target,
        effective_batch_size: int | None,
        baseline: TrialSpec | None = None,
    ) -> tuple[Recommendation, list[TrialResult]]:
        """The recommendation and the results it is from (with the new measurements); the
        baseline, measured again where its rate was taken under another load."""
        made: dict[str, int] = {}  # measurements made here, by setting: two at most
        while True:
            results = [r for r in results if r.spec.uncapped.hash not in self.excluded]
            rec = recommend_from(results, target, effective_batch_size)
            if rec.best is None:
                self.repeats = []
                return rec, results
            setting = rec.best.spec.uncapped
            known = self._measurements(setting)
            ids = {r.id for r in results}
            if any(r.id not in ids for r in known):  # its other measurements count too
                results = [*results, *(r for r in known if r.id not in ids)]
                continue
            # the load of now: the answer's newest measurement's, which its others count by
            self.load_now = newest_load(known)
            at_load_now = [r for r in known if same_load(r, self.load_now)]
            capped = self.cap is None or any(
                r.spec.memory_cap_bytes == self.cap for r in at_load_now
            )
            disagree = len(at_load_now) == 2 and (disagreement(at_load_now) or 0.0) > DISAGREE
            known_now = len(at_load_now) >= 2 and capped and not disagree
            # two repeats at most, in this run or, for a resumed sweep, in the earlier ones
            if known_now or made.get(setting.hash, 0) >= 2 or len(known) >= MOST_MEASUREMENTS:
                answered_at = max(r.id or 0 for r in known)  # the answer's newest measurement
                stale = self._under_another_load(rec.runners_up, baseline, answered_at)
                if not stale:
                    self.repeats = known  # all of them: their spread is said, whatever the load
                    self.answered = setting
                    return rec, results
                for earlier in stale:
                    again = self._again(earlier)
                    if again.status is not Status.ok:  # (its earlier rate stands, said apart)
                        self.not_again.append(earlier)
                        continue
                    self.again.append((earlier, again))
                    if any(r.spec.uncapped == earlier.spec.uncapped for r in results):
                        results = [*results, again]
                continue
            claim = f"answer-{setting.hash}"
            if not self.others.take(claim) or len(self._measurements(setting)) > len(known):
                while claim in self.others.busy():  # another process measures it again
                    time.sleep(POLL_S)
                self.others.drop(claim)
                continue  # and its measurement counts here too
            made[setting.hash] = made.get(setting.hash, 0) + 1
            spec = dataclasses.replace(setting, memory_cap_bytes=self.cap)
            self.on_measuring(0, spec)
            try:
                again = self.backend.measure(spec, repeat=True)  # stored, linked as a repeat
            finally:
                self.others.drop(claim)
            self.on_measured(again, "a repeat of the fastest so far")
            if not (again.status is Status.ok and target.fits(again)):
                self.excluded.add(setting.hash)  # it does not run (or fit) again: the next best

    def baseline(
        self, measured: TrialResult, results: list[TrialResult], target: Target
    ) -> TrialResult:
        """The baseline's figure that the answer is held against: its typical measurement at
        its newest load (the one made again for the load, where it was)."""
        again = [new for old, new in self.again if old.spec.uncapped == measured.spec.uncapped]
        return typical(again[-1] if again else measured, [measured, *again, *results], target)

    def load_check(self, results: list[TrialResult], target: Target) -> LoadCheck | None:
        """What was done for the load, and what could not be: None where nothing was needed."""
        if self.load_now is None:
            return None
        apart = [
            r  # each fitting setting by the figure it is ranked by, beside the answer's
            for r in one_per_setting(results, target)
            if r.status is Status.ok and target.fits(r) and r.spec.uncapped != self.answered
            if not same_load(r, self.load_now)
        ]
        if not (self.again or apart):
            return None
        return LoadCheck(self.load_now, self.again, apart)

    def _under_another_load(
        self, compared: list[TrialResult], baseline: TrialSpec | None, answered_at: int
    ) -> list[TrialResult]:
        """The newest measurement of each setting compared with the answer (its runners-up,
        the baseline) that was taken under another load than now, before the answer's newest
        measurement (trial answered_at), and not measured again: one measured after the answer
        is as near the answer's load as the machine allows, and a resumed sweep does not
        measure it once more."""
        settings = [r.spec.uncapped for r in compared]
        if baseline is not None:
            settings.append(baseline.uncapped)
        done = {earlier.spec.uncapped.hash for earlier, _ in self.again}
        done |= {earlier.spec.uncapped.hash for earlier in self.not_again}
        stale = []
        for setting in dict.fromkeys(settings):  # (in order, once each)
            known = self._measurements(setting)
            if setting.hash in done or not known or same_load(known[0], self.load_now):
                continue  # counted at this load (its newest), measured again already, or never ran
            if (known[0].id or 0) > answered_at:
                continue  # measured after the answer already (again, in an earlier run)
            stale.append(known[0])
        return stale

    def _again(self, earlier: TrialResult) -> TrialResult:
        """The setting measured again under the load of now (as the answer's repeat, under the
        target's cap), or by another process of the sweep while this one waited."""
        setting = earlier.spec.uncapped
        claim = f"answer-{setting.hash}"
        while not self.others.take(claim):  # another process measures it
            time.sleep(POLL_S)
        try:
            for r in self._measurements(setting):
                if (r.id or 0) > (earlier.id or 0):
                    return r  # it measured it meanwhile
            spec = dataclasses.replace(setting, memory_cap_bytes=self.cap)
            self.on_measuring(0, spec)
            again = self.backend.measure(spec, repeat=True)
        finally:
            self.others.drop(claim)
        self.on_measured(again, "under the load of now")
        return again

    def _measurements(self, setting: TrialSpec) -> list[TrialResult]:
        """The setting's ok trials in this environment, whatever cap, newest first (a rank's
        as the search sees it: its whole job's)."""
        hashes = {setting.hash, dataclasses.replace(setting, memory_cap_bytes=self.cap).hash}
        every = TrialFilter(gpus=None)  # (the hash names the setting's GPUs)
        found = [self.seen(r) for h in hashes
                 for r in self.store.trials(spec_hash=h, status="ok", where=every)]  # fmt: skip
        return sorted(
            (
                r for r in found
                if r.environment is not None and r.environment.device_name == self.device_name
                and r.environment.torch == self.torch_version
            ),
            key=lambda r: r.id or 0,
            reverse=True,
        )  # fmt: skip


def time_to(share: float, progress: SweepProgress, best: TrialResult | None) -> float | None:
    """Seconds from the search's start until the recommended setting, or a fitting one
    measured at `share` of its rate or more, was first measured."""
    if best is None:
        return None
    for step in progress.steps:
        r = step.result
        if not step.feasible or r is None:
            continue
        if r.spec.uncapped == best.spec.uncapped or r.samples_per_s >= share * best.samples_per_s:
            return step.at_s
    return None
