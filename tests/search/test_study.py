"""The sweep's Optuna study as Optuna's authors mean it to be used: a readable name, the memory
budget as a constraint that Optuna itself (and optuna-dashboard) reads, specs settled without
running as PRUNED, and each trial linked to advisor's."""

from __future__ import annotations

import dataclasses

import optuna
from fake_backend import FakeBackend, PerfectEstimate, make_sweeper
from optuna.trial import TrialState

from advisor.result import Status
from advisor.search import study
from advisor.store.store import Store
from advisor.store.sweeps import Sweep
from advisor.target import Target


def test_the_study_respects_the_budget_and_names_advisors_trials(db_url, study_url):
    store = Store(db_url)
    backend = FakeBackend(store)
    sweeper, target = make_sweeper(store, backend, study_url, memory="16GiB")
    sweeper.first(sweeper.space.base)
    sweeper.run(trials=10, minutes=None, patience=100)
    trials = sweeper.study.get_trials(deepcopy=False)
    by_id = {r.id: r for r in store.trials()}
    complete = [t for t in trials if t.state is TrialState.COMPLETE]
    assert complete and all(t.user_attrs.get(study.TRIAL_ID) in by_id for t in complete)
    for t in complete:  # both forms of the constraint, and the trial's own figures behind them
        result = by_id[t.user_attrs[study.TRIAL_ID]]
        assert t.value == result.samples_per_s
        assert t.constraints[study.CONSTRAINT] == t.system_attrs["constraints"][0]
        assert (t.constraints[study.CONSTRAINT] <= 0) == target.fits(result)
    over = [t for t in complete if t.constraints[study.CONSTRAINT] > 0]
    assert over and max(over, key=lambda t: t.value).value > 0  # something fast did not fit
    best = sweeper.study.best_trial  # Optuna's own best: within the budget
    assert best.constraints[study.CONSTRAINT] <= 0
    assert best.user_attrs[study.TRIAL_ID] == sweeper.progress.best.id
    ran = [t for t in complete if by_id[t.user_attrs[study.TRIAL_ID]].status is Status.ok]
    assert ran and all(t.value > 0 for t in ran)


def test_a_spec_judged_not_to_fit_without_running_is_pruned(db_url, study_url):
    """Not a complete trial of value 0 (optuna-dashboard drew those as measured)."""
    store = Store(db_url)
    sweeper, _ = make_sweeper(store, FakeBackend(store), study_url, memory="16GiB")
    sweeper.estimate = sweeper.feasibility.estimate = PerfectEstimate()
    sweeper.run(trials=6, minutes=None, patience=100)
    trials = sweeper.study.get_trials(deepcopy=False)
    pruned = [t for t in trials if t.state is TrialState.PRUNED]
    skipped = [s for s in sweeper.progress.steps if s.result is None]
    assert skipped and len(pruned) >= len({s.spec.hash for s in skipped})
    assert all(t.value is None and t.constraints[study.CONSTRAINT] > 0 for t in pruned)
    assert all(t.value for t in trials if t.state is TrialState.COMPLETE)


def test_a_study_is_named_for_people_and_one_named_by_its_key_still_resumes(study_url):
    target = Target("local NVIDIA H200", 140 * 2**30, 0.05)
    name = study.study_name("resnet50", target, "0123456789abcdef" * 2)
    assert name == "resnet50 for local NVIDIA H200 (01234567)"
    made = study.open_study(study_url, "k" * 32, name)
    assert made.study_name == name
    old = optuna.create_study(storage=study_url, study_name="f" * 32, direction="maximize")
    old.enqueue_trial({"x": 1})
    again = study.open_study(study_url, "f" * 32, "resnet50 for somewhere (ffffffff)")
    assert again.study_name == "f" * 32 and len(again.trials) == 1


def test_a_resumption_names_the_study_and_what_was_given_otherwise():
    """The key holds the space and target, not every argument: a run with another trials= (or
    other baseline settings) resumes the same sweep, and says what differs."""
    begun = Sweep(
        "k" * 32, "m", "t", 2**30, 0.05, None, id=3, arguments=("model=m", "trials=20"),
        created_at="2026-12-03T21:00:00+00:00",
    )  # fmt: skip
    again = study.resumed(begun, "m for t (kkkkkkkk)", 12, ("model=m", "patience=7", "trials=5"))
    assert again == study.Resumed(
        3, "m for t (kkkkkkkk)", "2026-12-03T21:00:00+00:00", 12, ("trials=20",),
        ("patience=7", "trials=5"),
    )  # fmt: skip
    same = study.resumed(begun, "s", 12, ("model=m", "trials=20"))
    assert same is not None and same.then == () and same.now == ()
    assert study.resumed(begun, "s", 0, ("model=m",)) is None  # nothing to take up
    older = dataclasses.replace(begun, arguments=None)  # stored before arguments were
    assert study.resumed(older, "s", 2, ("model=m",)).then is None


def test_a_sweep_keeps_the_arguments_of_its_search_not_where_its_results_go():
    """A database URL may hold a password: it is neither stored with the sweep nor said to
    differ on a resume, nor is the plot's file."""
    from advisor.verbs import searched_arguments

    given = ["trials=5", "db_url=postgresql://me:secret@host/db", "model=m", "plot=x.png",
             "study_db_url=sqlite:///o.sqlite", "+db_url=x"]  # fmt: skip
    assert searched_arguments(given) == ("model=m", "trials=5")
