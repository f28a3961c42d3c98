"""A measurement backend for testing the search without running anything.

Its table is resnet50 on the H200 with AdamW, as measured in experiments/2026-11-30-h200-measure
(device peak at batch 64 and 256 gives each family's memory line; samples/s at 256 its speed),
extended to other batches by the affine memory law and a saturating throughput curve. A batch
whose peak passes CAPACITY is an OOM. Results are stored in a real Store, as the worker's are.
"""

from __future__ import annotations

import dataclasses

from advisor.result import Environment, Failure, Memory, Phase, Status, Throughput, TrialResult
from advisor.spec import TrialSpec
from advisor.store.store import Store

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
