"""Several workers on one sweep (workers=N): one study, one trial at a time each, nothing
measured twice, and a failure in one stops them all."""

from __future__ import annotations

import optuna
import pytest
from fake_backend import FakeBackend, make_sweeper

from advisor.recommendation import recommend
from advisor.store.store import Store


class SlowBackend(FakeBackend):
    """The fake table, each measurement taking half a second, counting how many run at once
    (one worker's half second is ample for the other to take a spec of its own)."""

    def __init__(self, store):
        super().__init__(store)
        import threading

        self.lock = threading.Lock()
        self.running = self.most_at_once = 0
        self.slots = set()

    def measure(self, spec, slot=0, beat_samples_per_s=None):
        import time

        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.slots.add(slot)
        time.sleep(0.5)
        with self.lock:
            self.running -= 1
            return super().measure(spec)


def test_two_workers_share_one_study_and_measure_nothing_twice(db_url, study_url):
    store = Store(db_url)
    backend = SlowBackend(store)
    sweeper, target = make_sweeper(store, backend, study_url, "space.optimizers=[adamw]")
    sweeper.run(trials=12, minutes=None, patience=8, workers=2)
    hashes = [s.hash for s in backend.calls]
    assert len(hashes) == len(set(hashes))  # nothing measured twice
    assert backend.slots == {0, 1} and backend.most_at_once == 2  # both, at once
    assert len(hashes) <= 12
    alone, _ = make_sweeper(Store(db_url + "-alone"), FakeBackend(Store(db_url + "-alone")),
                            study_url + "-alone", "space.optimizers=[adamw]")  # fmt: skip
    alone.run(trials=12, minutes=None, patience=8)
    rec = recommend(list(sweeper.results.values()), target)
    assert rec.best is not None
    assert rec.best.spec == recommend(list(alone.results.values()), target).best.spec


def test_a_failure_in_one_worker_stops_the_sweep_and_is_raised(db_url, study_url):
    from advisor.errors import WorkloadError

    class Breaking(SlowBackend):
        def measure(self, spec, slot=0, beat_samples_per_s=None):
            if len(self.calls) >= 3:
                raise WorkloadError("the workload broke its contract")
            return super().measure(spec, slot)

    store = Store(db_url)
    backend = Breaking(store)
    sweeper, _ = make_sweeper(store, backend, study_url, "space.optimizers=[adamw]")
    with pytest.raises(WorkloadError, match="broke its contract"):
        sweeper.run(trials=12, minutes=None, patience=8, workers=2)
    assert sweeper.study.get_trials(states=(optuna.trial.TrialState.RUNNING,)) == []
    assert len(backend.calls) <= 4  # the other worker took nothing new once one failed
