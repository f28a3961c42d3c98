"""The main-effects model of throughput, and the sweep's stop on it."""

from __future__ import annotations

import math

import pytest
from fake_backend import FakeBackend, make_sweeper

from advisor.search import throughput_model
from advisor.store.store import Store

EFFECTS = {"precision": {"bf16": 2.0, "fp32": 1.0}, "channels_last": {True: 1.3, False: 1.0},
           "batch_size": {64: 1.0, 128: 1.5, 256: 1.8}}  # fmt: skip


def rate(point):
    return 100.0 * math.prod(EFFECTS[axis][value] for axis, value in point.items())


def test_one_change_at_a_time_fixes_every_effect():
    base = {"precision": "fp32", "channels_last": False, "batch_size": 64}
    design = [base] + [
        {**base, axis: value} for axis, values in EFFECTS.items() for value in values
        if value != base[axis]
    ]  # fmt: skip
    model = throughput_model.fit([(p, rate(p)) for p in design])
    assert model is not None
    unmeasured = {"precision": "bf16", "channels_last": True, "batch_size": 256}
    assert model.predict(unmeasured) == pytest.approx(rate(unmeasured))
    # a value nothing measured had is not predicted
    assert model.predict({**unmeasured, "batch_size": 512}) is None
    # two axes only ever changed together: their effects cannot be told apart, so no model
    together = [base, {**base, "precision": "bf16", "channels_last": True}]
    assert throughput_model.fit([(p, rate(p)) for p in together]) is None


def test_the_sweep_stops_when_nothing_left_is_predicted_clearly_faster(db_url, study_url):
    store = Store(db_url)
    backend = FakeBackend(store)
    sweeper, _ = make_sweeper(store, backend, study_url, "space.optimizers=[adamw]")
    reason = sweeper.run(trials=40, minutes=None, patience=100)
    assert reason.startswith("no setting left is predicted to be 2% faster")
    assert len(backend.calls) < 40


def test_a_batch_below_every_measured_one_is_not_worth_measuring(db_url, study_url):
    store = Store(db_url)
    sweeper, _ = make_sweeper(
        store, FakeBackend(store), study_url, "space.batch_sizes=[32,64]", "space.grad_accum=[1]",
        "space.precision=[bf16,fp16]", "space.optimizers=[adamw]", "space.checkpointing=[none]",
    )  # fmt: skip
    for precision in ("bf16", "fp16"):
        spec = sweeper.space.spec({"batch_size": 64, "precision": precision})
        sweeper.first(spec)  # measured at batch 64 only
    # batch 32 was never measured, yet it is predicted no faster than 64: nothing left to try
    assert sweeper.climb.most_promising(sweeper.progress.best, sweeper.results.values()) is False
