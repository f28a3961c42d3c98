"""A results database as advisor serve finds it: fake trials of tiny_cnn on a 40 GiB GPU at
several settings (one an OOM), and a sweep that used them all; and `advisor serve` itself,
listening on a free port."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from fake_backend import fake_result

from advisor.config import load, trial_spec
from advisor.result import TimingStop, TrialResult
from advisor.store.store import Store
from advisor.store.sweeps import Sweep

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


@contextlib.contextmanager
def serving(path: Path, within_s: float = 60) -> Iterator[tuple[str, list[str]]]:
    """`advisor serve` of the SQLite file, once it answers: its base URL, and a list that
    holds what it said on stderr once it has stopped."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    said: list[str] = []
    with tempfile.TemporaryFile("w+") as stderr:
        command = [sys.executable, "-m", "advisor", "serve", "--port", str(port),
                   f"db_url=sqlite:///{path}"]  # fmt: skip
        server = subprocess.Popen(command, stderr=stderr, text=True)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + within_s
            while True:
                try:
                    urllib.request.urlopen(f"{base}/api/v1/sweeps", timeout=5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        stderr.seek(0)
                        told = stderr.read()
                        raise RuntimeError(f"advisor serve did not answer: {told}") from None
                    time.sleep(0.3)
            yield base, said
        finally:
            server.terminate()
            server.wait(timeout=30)
            stderr.seek(0)
            said.append(stderr.read())
