"""A measurement backend for testing the search without running anything.

Its table is resnet50 on the H200 with AdamW, as measured in experiments/2026-11-30-h200-measure
(device peak at batch 64 and 256 gives each family's memory line; samples/s at 256 its speed),
extended to other batches by the affine memory law and a saturating throughput curve. A batch
whose peak passes CAPACITY is an OOM. Results are stored in a real Store, as the worker's are.
A Sweeper over it (make_sweeper) searches resnet50's space on the CPU as a sweep would.
"""

from __future__ import annotations

import dataclasses

from advisor.config import load, searched_optimizers, space_config, trial_spec
from advisor.result import Environment, Failure, Memory, Phase, Status, Throughput, TrialResult
from advisor.search import study
from advisor.search.space import space_of
from advisor.search.sweeper import Sweeper
from advisor.spec import TrialSpec
from advisor.store.store import Store
from advisor.target import target_for

GiB = 2**30
CAPACITY = 40 * GiB
ENVIRONMENT = Environment("FAKE H200", CAPACITY, None, None, "fake", "0", "3", "test")

# (precision, checkpointing) -> device peak at batch 64 and 256 (GiB), samples/s at 256; torch's
# default precision takes fp32's memory at DESIGN.md's ~2,200/s (TF32 in cuDNN's convolutions)
TABLE = {
    ("default", "none"): (11.12, 28.61, 2200.0),
    ("default", "blocks"): (8.03, 16.38, 1730.0),
    ("fp32", "none"): (11.12, 28.61, 1057.0),
    ("fp32", "blocks"): (8.03, 16.38, 831.0),
    ("bf16", "none"): (4.34, 14.10, 2400.0),
    ("bf16", "blocks"): (2.87, 7.72, 1815.0),
    ("fp16", "none"): (4.17, 13.97, 2929.0),
    ("fp16", "blocks"): (2.78, 7.82, 2298.0),
}


def line(spec: TrialSpec) -> tuple[float, float]:
    """Fixed bytes and bytes per sample of the spec's family."""
    at64, at256, _ = TABLE[(spec.precision.value, spec.checkpointing.value)]
    per_sample = (at256 - at64) * GiB / 192
    return at64 * GiB - 64 * per_sample, per_sample


def peak(spec: TrialSpec) -> int:
    fixed, per_sample = line(spec)
    return int(fixed + per_sample * spec.batch_size)


def speed(spec: TrialSpec) -> float:
    """Saturating in the micro batch (half speed at 32); fused AdamW 2% faster."""
    top = TABLE[(spec.precision.value, spec.checkpointing.value)][2] * (256 + 32) / 256
    fused = 1.02 if spec.optimizer.name == "adamw_fused" else 1.0
    return top * spec.batch_size / (spec.batch_size + 32) * fused


class FakeBackend:
    def __init__(self, store: Store, interrupt_after: int | None = None) -> None:
        self.store = store
        self.calls: list[TrialSpec] = []
        self.interrupt_after = interrupt_after

    def measure(
        self, spec: TrialSpec, slot: int = 0, beat_samples_per_s: float | None = None
    ) -> TrialResult:
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            raise KeyboardInterrupt  # Ctrl-C in the middle of a trial
        self.calls.append(spec)
        return self.store.add(fake_result(spec))

    def stop(self) -> None:
        pass

    def measured_before(self, spec: TrialSpec) -> TrialResult | None:
        return self.store.measured_before(spec, ENVIRONMENT.device_name, ENVIRONMENT.torch)


def fake_result(spec: TrialSpec) -> TrialResult:
    device_peak = peak(spec)
    if device_peak > CAPACITY:
        return TrialResult(
            spec,
            Status.oom,
            ENVIRONMENT,
            None,
            None,
            Failure(Phase.forward, device_peak - CAPACITY, "CUDA out of memory"),
            1.0,
        )
    memory = Memory(
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        device_peak,
        device_peak,
        device_peak,
        device_peak,
        Phase.backward,
        device_peak,
        None,
        0,
    )
    rate = speed(spec) * (1.0 - 0.01 * (spec.grad_accum > 1))  # accumulation costs a little
    step_s = spec.effective_batch_size / rate
    throughput = Throughput(rate, None, step_s, 0.0, 10, 3, None)
    return dataclasses.replace(
        TrialResult(spec, Status.ok, ENVIRONMENT, memory, throughput, None, 1.0)
    )


SPACE = [
    "model=resnet50",
    "device=cpu",
    "space.batch_sizes=[16,32,64,128,256,512,1024]",
    "space.grad_accum=[1,2,4]",
    "space.precision=[fp32,bf16,fp16]",
    "space.compile=[false]",
    "space.channels_last=[false]",
]


def make_sweeper(store, backend, study_url, *extra, memory="24GiB"):
    overrides = [*SPACE, f"gpu.memory={memory}", *extra]
    cfg = load(overrides)
    base = trial_spec(cfg)
    space = space_of(space_config(cfg), searched_optimizers(cfg, overrides), base,
                     cfg.effective_batch_size)  # fmt: skip
    target = target_for(cfg.gpu.name, cfg.gpu.memory, cfg.margin, base.device)
    key = study.sweep_key(space, target, "FAKE H200", "fake")
    optuna_study = study.open_study(study_url, key)
    return Sweeper(space, target, backend, optuna_study), target


class PerfectEstimate:
    """The fake backend's own memory law, as an estimate that is never wrong."""

    def device_peak(self, spec, measured):
        return peak(spec)

    def largest_batch(self, spec, target, measured):
        fixed, per_sample = line(spec)
        return int((target.allowed_bytes - fixed) // per_sample)
