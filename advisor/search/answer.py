"""The sweep's answer: the fastest setting that fits, measured again until it is known (its
median measurement counts), and how soon the search first measured it, or one near it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from advisor.recommendation import DISAGREE, Recommendation, disagreement
from advisor.recommendation import recommend as recommend_from
from advisor.result import Status, TrialResult
from advisor.search.backend import WorkerBackend
from advisor.search.steps import SweepProgress
from advisor.search.sweeper import POLL_S
from advisor.spec import TrialSpec
from advisor.store.sharing import Others
from advisor.store.store import Store
from advisor.target import Target

NEAR = 0.02  # the time to the answer: until a setting within this of its rate was measured


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
    ) -> None:
        self.store, self.backend, self.others = store, backend, others
        self.on_measuring = on_measuring
        self.cap, self.device_name, self.torch_version = cap, device_name, torch_version
        self.repeats: list[TrialResult] = []  # the answer's measurements, newest first
        self.excluded: set[str] = set()  # settings that failed their repeat (uncapped hash)

    def settle(
        self, results: list[TrialResult], target: Target, effective_batch_size: int | None
    ) -> tuple[Recommendation, list[TrialResult]]:
        """The recommendation and the results it is from (with the new measurements)."""
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
            capped = self.cap is None or any(r.spec.memory_cap_bytes == self.cap for r in known)
            disagree = len(known) == 2 and (disagreement(known) or 0.0) > DISAGREE
            if (len(known) >= 2 and capped and not disagree) or made.get(setting.hash, 0) >= 2:
                self.repeats = known
                return rec, results
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
            if not (again.status is Status.ok and target.fits(again)):
                self.excluded.add(setting.hash)  # it does not run (or fit) again: the next best

    def _measurements(self, setting: TrialSpec) -> list[TrialResult]:
        """The setting's ok trials in this environment, whatever cap, newest first."""
        hashes = {setting.hash, dataclasses.replace(setting, memory_cap_bytes=self.cap).hash}
        found = [r for h in hashes for r in self.store.trials(spec_hash=h, status="ok")]
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
