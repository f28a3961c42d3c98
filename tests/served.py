"""A results database as advisor serve finds it: fake trials of tiny_cnn on a 40 GiB GPU at
several settings (one an OOM), and a sweep that used them all."""

from __future__ import annotations

import dataclasses
import datetime

from fake_backend import fake_result

from advisor.config import load, trial_spec
from advisor.result import TimingStop, TrialResult
from advisor.store.store import Store, Sweep

GiB = 2**30
SETTINGS = [
    *((batch, precision) for precision in ("default", "bf16", "fp16") for batch in (64, 128, 256)),
    (1024, "default"),
]  # fmt: skip  (the last: an OOM)


def stored_sweep(db_url: str) -> tuple[Store, list[int], int]:
    """The store, its trials' ids in the order stored, and the sweep's id."""
    store = Store(db_url)
    start = datetime.datetime(2026, 12, 1, 10, tzinfo=datetime.UTC)
    ids = []
    for i, (batch, precision) in enumerate(SETTINGS):
        spec = trial_spec(load(["model=tiny_cnn", "device=cuda", f"batch_size={batch}",
                                f"precision={precision}"]))  # fmt: skip
        when = start + datetime.timedelta(minutes=i)
        result = with_categories(fake_result(spec))
        if (batch, precision) == (64, "fp16"):  # one whose timing a sweep cut short
            throughput = dataclasses.replace(result.throughput, stopped=TimingStop.cut)
            result = dataclasses.replace(result, throughput=throughput)
        result = dataclasses.replace(result, created_at=when.isoformat())
        ids.append(store.add(result).id)
    sweep = store.open_sweep(Sweep("k" * 32, "tiny_cnn", "a100_40gb", 40 * GiB, 0.05, None))
    for trial_id in ids:
        store.link(sweep.id or 0, trial_id or 0, reused=False)
    store.finish_sweep(sweep.id or 0, "patience")
    return store, [i or 0 for i in ids], sweep.id or 0


def with_categories(result: TrialResult) -> TrialResult:
    """The fake's device peak split into categories, as a measured trial's is (shares of a
    resnet50 step's: context, weights, optimizer state, gradients, activations, inputs)."""
    if result.memory is None:
        return result
    peak = result.memory.device_peak_bytes
    shares = {"context_bytes": 0.03, "params_bytes": 0.07, "optimizer_state_bytes": 0.14,
              "grads_bytes": 0.07, "activations_bytes": 0.6, "inputs_bytes": 0.04}  # fmt: skip
    parts = {key: int(peak * share) for key, share in shares.items()}
    return dataclasses.replace(result, memory=dataclasses.replace(result.memory, **parts))
