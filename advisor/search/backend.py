"""Where a sweep's measurements come from: worker processes on the local devices, one trial at
a time on each (or, in tests, a recorded table), and which devices those are."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Protocol

from advisor import gpus
from advisor.errors import ConfigError
from advisor.result import TrialResult
from advisor.spec import Device, TrialSpec
from advisor.store.store import Store
from advisor.trial.runner import run_trial
from advisor.trial.timing import MeasureConfig


class Backend(Protocol):
    """Measures specs (and stores them); `slot` is which of the sweep's workers asks, one trial
    at a time each; with beat_samples_per_s, timing stops once the spec clearly cannot beat it."""

    def measure(
        self, spec: TrialSpec, slot: int = 0, beat_samples_per_s: float | None = None
    ) -> TrialResult: ...

    def measured_before(self, spec: TrialSpec) -> TrialResult | None: ...

    def stop(self) -> None: ...  # interrupted: end what is being measured, store nothing


class WorkerBackend:
    """Each spec in a worker process of its own, on the slot's GPU; every result stored."""

    def __init__(
        self,
        store: Store,
        settings: MeasureConfig,
        timeout_s: float,
        device_name: str,
        torch_version: str,
        gpus: Sequence[str | None] = (None,),  # CUDA_VISIBLE_DEVICES entry per slot
        compile_cache: Path | None = None,
        on_phase: Callable[[int, str], None] | None = None,  # (slot, phase) as it changes
        sweep_id: int | None = None,  # the sweep each result is linked to as it is stored
        # what the search sees of a stored result (a rank's as its whole job); it as stored
        seen_as: Callable[[TrialResult], TrialResult] | None = None,
    ) -> None:
        self.store, self.settings, self.timeout_s = store, settings, timeout_s
        self.device_name, self.torch_version = device_name, torch_version
        self.gpus, self.compile_cache, self.on_phase = list(gpus), compile_cache, on_phase
        self.sweep_id = sweep_id
        self.seen_as = seen_as or (lambda result: result)
        self._cancel = threading.Event()

    def measure(
        self,
        spec: TrialSpec,
        slot: int = 0,
        beat_samples_per_s: float | None = None,
        repeat: bool = False,  # the answer measured again (stored as such)
    ) -> TrialResult:
        self.store.check_writable()  # before the GPU time, not after
        result = run_trial(
            spec,
            self.settings,
            self.timeout_s,
            beat_samples_per_s=beat_samples_per_s,
            on_phase=None if self.on_phase is None else partial(self.on_phase, slot),
            gpu=self.gpus[slot],
            compile_cache=self.compile_cache,
            cancel=self._cancel,
        )
        return self.seen_as(self.store.add(result, self.sweep_id, repeat))

    def measured_before(self, spec: TrialSpec) -> TrialResult | None:
        found = self.store.measured_before(spec, self.device_name, self.torch_version)
        return None if found is None else self.seen_as(found)

    def stop(self) -> None:
        self._cancel.set()


def worker_slots(workers: str, device: Device) -> list[str | None]:
    """What each worker runs on: a GPU each (its CUDA_VISIBLE_DEVICES entry), or, on the
    CPU, none (workers=N there shares the cores; for tests)."""
    if workers != "auto" and not (workers.isdigit() and int(workers) >= 1):
        raise ConfigError(f"workers must be auto or a whole number of at least 1, got {workers!r}")
    if device is Device.cpu:
        cores = os.cpu_count() or 1
        if workers != "auto" and int(workers) > cores:
            raise ConfigError(f"workers={workers} on the CPU: at most its {cores} cores")
        return [None] * (1 if workers == "auto" else int(workers))
    visible = gpus.visible_gpus()
    if workers != "auto" and int(workers) > max(1, len(visible)):
        raise ConfigError(
            f"workers={workers} but {len(visible)} GPU(s) are visible: one trial runs on each "
            "GPU at a time; use workers=auto"
        )
    slots: list[str | None] = list(visible) or [None]  # none visible: as torch sees them
    return slots if workers == "auto" else slots[: int(workers)]


def local_device(device: Device) -> tuple[str, str]:
    """The name the worker will report for this device, and torch's version (no CUDA init)."""
    import torch

    gpu = gpus.local_gpu() if device is Device.cuda else None
    return (gpu.name if gpu else gpus.cpu_name()), torch.__version__
