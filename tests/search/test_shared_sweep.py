"""One sweep run by several processes at once (the same command on several GPUs or hosts,
sharing one database): claims keep a spec from being measured twice, and each process takes
in what the others measured."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from fake_backend import FakeBackend, fake_result, make_sweeper
from sqlalchemy import select, text
from sqlalchemy.orm import Session
from test_cli import ADVISOR
from test_sweep_cli import SWEEP

from advisor.search.study import OWNER
from advisor.search.sweeper import Sweeper
from advisor.store import sharing
from advisor.store.sharing import SharedSweep
from advisor.store.store import Store
from advisor.store.sweeps import Sweep
from advisor.store.tables import SweepClaimRow


def open_sweep(db_url: str) -> int:
    sweep = Store(db_url).open_sweep(Sweep("k" * 32, "tiny_mlp", "t", 2**30, 0.05, None))
    assert sweep.id is not None
    return sweep.id


def plant(db_url: str, sweep_id: int, key: str, owner: str, age_s: float) -> None:
    """A claim as another process left it."""
    beat = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=age_s)
    with Session(Store(db_url).engine) as session, session.begin():
        session.add(SweepClaimRow(sweep_id=sweep_id, key=key, owner=owner, heartbeat_at=beat))


def test_a_claim_is_one_processs_until_it_drops_it(db_url):
    sweep_id = open_sweep(db_url)
    a, b = SharedSweep(Store(db_url), sweep_id), SharedSweep(Store(db_url), sweep_id)
    try:
        assert a.take("spec-1") and not b.take("spec-1")
        assert b.busy() == {"spec-1"} and a.busy() == set()  # one's own claims are not busy
        assert a.take("spec-1")  # taking one's own again is fine
        a.drop("spec-1")
        assert b.take("spec-1") and a.busy() == {"spec-1"}
        assert b.take("spec-2")
    finally:
        a.close()
        b.close()  # gives up its claims
    c = SharedSweep(Store(db_url), sweep_id)
    assert c.busy() == set() and c.take("spec-1") and c.take("spec-2")
    c.close()


def test_a_dead_processs_claim_is_taken_over(db_url):
    """On this host a claim whose process is gone is taken at once; on another host, once its
    heartbeat is older than STALE_S. A live one is left alone."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    sweep_id = open_sweep(db_url)
    host = sharing.this_host()
    plant(db_url, sweep_id, "here-dead", f"{host}:{gone.pid}:00000000", 1)
    plant(db_url, sweep_id, "here-alive", f"{host}:{os.getppid()}:00000000", 1)
    plant(db_url, sweep_id, "there-alive", "another-host:12:00000000", 1)
    plant(db_url, sweep_id, "there-stale", "another-host:12:00000000", sharing.STALE_S + 5)
    shared = SharedSweep(Store(db_url), sweep_id)
    try:
        assert shared.busy() == {"here-alive", "there-alive"}
        assert shared.take("here-dead") and shared.take("there-stale")
        assert not shared.take("here-alive") and not shared.take("there-alive")
    finally:
        shared.close()


def test_news_hands_out_each_trial_once(db_url):
    store = Store(db_url)
    sweep_id = open_sweep(db_url)
    shared = SharedSweep(store, sweep_id)
    try:
        first = store.add(fake_result(make_spec(64)), sweep_id)
        assert [r.id for r, _ in shared.news()] == [first.id]
        assert shared.news() == []
        second = store.add(fake_result(make_spec(128)), sweep_id)
        assert [r.id for r, _ in shared.news()] == [second.id]
    finally:
        shared.close()


def make_spec(batch: int):
    from advisor.config import load, trial_spec

    return trial_spec(load(["model=resnet50", "device=cpu", f"batch_size={batch}"]))


class LinkedBackend(FakeBackend):
    """The fake table, each result stored linked to the sweep (as the worker's are), with a
    little wall time so that the two processes' trials overlap."""

    def __init__(self, store: Store, sweep_id: int) -> None:
        super().__init__(store)
        self.sweep_id = sweep_id

    def measure(self, spec, slot=0, beat_samples_per_s=None):
        self.calls.append(spec)
        time.sleep(0.05)
        return self.store.add(fake_result(spec), self.sweep_id)


def test_two_processes_of_one_sweep_measure_no_spec_twice(db_url, study_url, monkeypatch):
    """Two sweepers, each with its own store, study and claims (as two processes have), run
    one sweep at once: between them no spec is measured twice, the baseline included, and the
    budget of trials holds for the two together (give or take the one each may start at
    once)."""
    monkeypatch.setattr("advisor.search.sweeper.POLL_S", 0.05)
    sweep_id = open_sweep(db_url)
    runs: list[tuple[LinkedBackend, Sweeper, SharedSweep]] = []
    for _ in range(2):  # (built here: Hydra's loading is not for threads)
        store = Store(db_url)
        backend = LinkedBackend(store, sweep_id)
        sweeper, _ = make_sweeper(store, backend, study_url)
        sweeper.others = SharedSweep(store, sweep_id)
        runs.append((backend, sweeper, sweeper.others))
    failures: list[BaseException] = []

    def one_process(sweeper: Sweeper, shared: SharedSweep) -> None:
        try:
            sweeper.resume(shared.store.sweep_trials(sweep_id))
            sweeper.first(sweeper.space.base)
            sweeper.run(trials=10, minutes=None, patience=100)
        except BaseException as error:  # the test's thread raises it
            failures.append(error)
        finally:
            shared.close()

    threads = [threading.Thread(target=one_process, args=run[1:], daemon=True) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive()  # (a deadlock fails, and does not hang the suite)
    assert not failures, failures
    measured = [spec.hash for backend, _, _ in runs for spec in backend.calls]
    assert [h for h, n in Counter(measured).items() if n > 1] == []
    assert all(backend.calls for backend, _, _ in runs)  # both measured
    assert len(measured) <= 10 + 1
    # each knows what the other measured, as if it had measured it
    for _, sweeper, _ in runs:
        others = [s for s in sweeper.progress.steps if s.settled == "elsewhere"]
        assert others and all(s.result is not None for s in others)


@pytest.mark.slow
def test_the_same_sweep_started_twice_at_once_joins_one_sweep(db_url, tmp_path):
    """Two `advisor sweep` processes of one command, started together on fresh databases:
    one sweep, every trial linked to it, no spec of the search measured twice."""
    env = {**os.environ, "ADVISOR_DB_URL": db_url,
           "ADVISOR_STUDY_DB_URL": f"sqlite:///{tmp_path / 'optuna.sqlite'}"}  # fmt: skip
    args = [ADVISOR, *SWEEP[:4], "trials=6", *SWEEP[5:], "space.optimizers=[adamw,sgd]", "--json"]
    sweeps = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(2)]  # fmt: skip
    outputs = [sweep.communicate(timeout=600) for sweep in sweeps]
    for sweep, (_, err) in zip(sweeps, outputs, strict=True):
        assert sweep.returncode == 0, err
    answers = [json.loads(out) for out, _ in outputs]
    assert answers[0]["sweep"]["id"] == answers[1]["sweep"]["id"]
    store = Store(db_url)
    linked = store.sweep_trials(answers[0]["sweep"]["id"])
    assert {r.id for r in store.trials()} == {r.id for r, _ in linked}  # nothing lost
    with store.engine.connect() as db:
        searched = [h for (h,) in db.execute(text(
            "SELECT spec_hash FROM sweep_trials JOIN trials ON trials.id = trial_id "
            "WHERE NOT repeat"))]  # fmt: skip
    assert [h for h, n in Counter(searched).items() if n > 1] == []
    assert len(searched) <= 6 + 1


def test_a_running_trial_is_failed_on_resume_only_when_its_process_died(db_url, study_url):
    """A second process joining must not fail the trials the first is measuring (it did:
    UpdateFinishedTrialError when the first told its result); a killed process's are failed.
    A trial that names no owner yet is another's just asked while another process is present;
    with none present, it was left by one killed between asking and naming itself (a fault
    test's resume left it running for good)."""
    import optuna

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = sharing.this_host()
    sweep_id = open_sweep(db_url)
    shared = SharedSweep(Store(db_url), sweep_id)
    other = SharedSweep(Store(db_url), sweep_id)
    optuna_study = optuna.create_study(storage=study_url, study_name="s")
    owners = {
        "dead here": f"{host}:{gone.pid}:00000000",
        "alive here": f"{host}:{os.getpid()}:00000000",
        "young elsewhere": "another-host:12:00000000",
        "none, young": None,
    }
    for owner in owners.values():
        trial = optuna_study.ask()
        if owner is not None:
            trial.set_user_attr(OWNER, owner)
    try:
        running = optuna_study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
        verdicts = [shared.abandoned(str(t.user_attrs.get(OWNER, "")), t.datetime_start)
                    for t in running]  # fmt: skip
    finally:
        other.close()
    try:  # the other killed, its presence left behind: the trial is the dead one's
        plant(db_url, sweep_id, sharing.PRESENT + "dead", f"{host}:{gone.pid}:00000000", 1)
        alone = shared.abandoned("", running[-1].datetime_start)
        plant(db_url, sweep_id, sharing.PRESENT + "there", "another-host/7:13:00000000", 1)
        joined = shared.abandoned("", running[-1].datetime_start)  # one alive elsewhere
    finally:
        shared.close()
    assert dict(zip(owners, verdicts, strict=True)) == {
        "dead here": True, "alive here": False, "young elsewhere": False, "none, young": False,
    }  # fmt: skip
    assert alone and not joined


def test_a_process_clears_the_presence_of_those_that_died(db_url):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    sweep_id, host = open_sweep(db_url), sharing.this_host()
    plant(db_url, sweep_id, sharing.PRESENT + "dead", f"{host}:{gone.pid}:00000000", 1)
    plant(db_url, sweep_id, sharing.PRESENT + "there", "another-host/7:13:00000000", 1)
    plant(db_url, sweep_id, sharing.PRESENT + "stale", "another-host/7:14:00000000", 600)
    shared = SharedSweep(Store(db_url), sweep_id)
    try:
        with Session(Store(db_url).engine) as session:
            keys = set(session.scalars(select(SweepClaimRow.key)))
    finally:
        shared.close()
    assert {key for key in keys if not key.startswith(sharing.PRESENT)} == set()
    assert sharing.PRESENT + "there" in keys and len(keys) == 2  # that one, and its own
    assert not {sharing.PRESENT + "dead", sharing.PRESENT + "stale"} & keys


def test_an_old_trial_from_another_host_is_abandoned_unless_its_owner_holds_a_live_claim(db_url):
    sweep_id = open_sweep(db_url)
    old = datetime.datetime.now() - datetime.timedelta(seconds=sharing.STALE_S + 60)
    plant(db_url, sweep_id, "spec-1", "another-host/7:13:00000000", 1)  # measuring now
    shared = SharedSweep(Store(db_url), sweep_id)
    try:
        assert shared.abandoned("another-host/7:12:00000000", old)  # no claim: it died
        assert not shared.abandoned("another-host/7:13:00000000", old)
        assert not shared.abandoned("another-host/7:12:00000000", datetime.datetime.now())
    finally:
        shared.close()
