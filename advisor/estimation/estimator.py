"""The memory breakdown of a spec without a GPU, from one training step on fake tensors
(advisor/estimation/fake_step.py).

What no fake run sees (the CUDA context, the caching allocator's reserve) comes from measured
history where there is some, and from stated defaults otherwise. The largest batch on a GPU comes
from replaying the fake step through the caching allocator's model under the target's limit.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Sequence
from typing import Any

from advisor.estimation.allocator import ReplayOutOfMemory
from advisor.estimation.fake_step import FakeStep, fake_step, replayed_reserved, step_between
from advisor.estimation.memory_line import family_key, fit
from advisor.gpus import DEFAULT_CONTEXT_BYTES
from advisor.optimizers import bundled_optimizer
from advisor.result import Category, Status, TrialResult
from advisor.spec import Checkpointing, Device, OptimizerSpec, TrialSpec
from advisor.target import Target

# Defaults for what a fake run cannot see, from the H200's 54 trials in experiments/2026-11-30-
# h200-memory: steady peak reserved / steady peak allocated (median; checkpointing's recompute
# leaves the cache more fragmented); what a trial's process held beyond the allocator is
# gpus.DEFAULT_CONTEXT_BYTES.
DEFAULT_RESERVED_FACTOR = {Checkpointing.none: 1.11, Checkpointing.blocks: 1.31}


@dataclasses.dataclass(frozen=True)
class Calibration:
    """How the fake run compared with measurements of the same model on this kind of GPU."""

    trials: int  # the measured trials most alike the spec, which the corrections come from
    # measured - estimated steady-state peak allocated: bytes + bytes per sample x batch, fitted
    # where the alike trials span two batches or more ...
    peak_offset: tuple[float, float] | None
    peak_ratio: float  # ... else measured / estimated (median)
    reserved_factor: float  # steady peak reserved / steady peak allocated (median)
    # The fake step replayed through the allocator's model follows the fragmentation the step's
    # own sequence makes (checkpointed gpt2 holds 1.2-1.6x its peak), but sees neither cuDNN's
    # workspaces (they grow with the batch) nor expandable segments. Where the alike trials have
    # no expandable segments: measured - replayed steady peak reserved, bytes + bytes per sample
    # x batch, where they span two batches or more ...
    reserve_offset: tuple[float, float] | None
    # ... else measured / replayed (median), where it spreads less over them than the factor does
    replay_ratio: float | None
    context_bytes: int  # measured beyond-allocator bytes (median)
    # |estimated / measured - 1| of the alike trials' steady device peak, uncorrected
    error_median: float
    error_worst: float


@dataclasses.dataclass(frozen=True)
class Estimate:
    spec: TrialSpec
    target: Target
    step: FakeStep
    context_bytes: int
    reserved_factor: float
    peak_allocated_bytes: int  # the steady state's, corrected by calibration where there is one
    # the steady state's: peak allocated x reserve factor, or the replayed step x replay ratio
    peak_reserved_bytes: int
    # peak reserved + context. Not the first steps': cuDNN's benchmark workspaces there take only
    # what is free (experiments/2026-11-30-h200-memory).
    device_peak_bytes: int
    largest_batch: int | None  # the largest micro batch whose device peak fits the target
    calibration: Calibration | None

    @property
    def fits(self) -> bool:
        """On a GPU, whether the steps run within the target by the allocator model (near its
        limit the allocator gives back its cache, so the device peak, what it holds with memory
        to spare, can be more); elsewhere, whether the device peak is within it."""
        if self.spec.device is Device.cuda and self.largest_batch is not None:
            return self.spec.batch_size <= self.largest_batch
        return self.device_peak_bytes <= self.target.allowed_bytes

    def categories(self) -> dict[Category, int]:
        """The breakdown: the context as calibrated, the rest as the fake step counted it."""
        s = self.step
        return {c: self.context_bytes if c is Category.context else getattr(s, c.field)
                for c in Category}  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        s = self.step
        return {
            "spec": {
                **self.spec.to_dict(),
                "model": self.spec.model.name,
                "optimizer": self.spec.optimizer.name,
                "hash": self.spec.hash,
            },
            "memory": {
                **{c.field: n for c, n in self.categories().items()},
                "peak_allocated_bytes": self.peak_allocated_bytes,
                "peak_reserved_bytes": self.peak_reserved_bytes,
                "device_peak_bytes": self.device_peak_bytes,
            },
            "target": dataclasses.asdict(self.target),
            "fits": self.fits,
            "margin_left_bytes": self.target.memory_bytes - self.device_peak_bytes,
            "largest_batch": self.largest_batch,
            "top_modules": [{"module": m, "activations_bytes": b} for m, b in s.top_modules],
            "calibration": dataclasses.asdict(self.calibration) if self.calibration else None,
        }


def estimate(spec: TrialSpec, target: Target, history: Sequence[TrialResult] = ()) -> Estimate:
    """The estimate for a spec on the target GPU, calibrated on history of the same model."""
    step = fake_step(spec)
    corrections = _Corrections.of(spec, history)
    b = spec.batch_size
    peak = int(corrections.allocated(step.peak_allocated_bytes, b))
    reserved = corrections.steady_reserved(spec, step)
    largest = _largest_batch(spec, target, corrections)
    if corrections.device_peak(step.update_peak_bytes, b) > target.allowed_bytes:
        largest = 0  # the optimizer step alone does not fit
    return Estimate(
        spec, target, step, corrections.context, corrections.factor, peak, reserved,
        reserved + corrections.context, largest, corrections.calibration,
    )  # fmt: skip


def device_peak(spec: TrialSpec, history: Sequence[TrialResult] = ()) -> int:
    """Just the device peak of one spec (the sweep's question before it spends GPU time)."""
    corrections = _Corrections.of(spec, history)
    return corrections.steady_reserved(spec, fake_step(spec)) + corrections.context


@dataclasses.dataclass(frozen=True)
class Estimator:
    """The estimate as a sweep asks it: calibrated on history and on what the sweep measured
    (first: calibration takes the newest)."""

    history: Sequence[TrialResult]

    def device_peak(self, spec: TrialSpec, measured: Sequence[TrialResult]) -> int:
        return device_peak(spec, [*measured, *self.history])

    def largest_batch(
        self, spec: TrialSpec, target: Target, measured: Sequence[TrialResult]
    ) -> int | None:
        return estimate(spec, target, [*measured, *self.history]).largest_batch


@dataclasses.dataclass(frozen=True)
class _Corrections:
    """What turns a fake run's bytes into the device's: calibrated, defaults, or none (CPU)."""

    calibration: Calibration | None
    factor: float  # reserved over allocated, in the steady state
    context: int

    @classmethod
    def of(cls, spec: TrialSpec, history: Sequence[TrialResult]) -> _Corrections:
        if spec.device is Device.cpu:
            return cls(None, 1.0, 0)
        c = calibrate(spec, history) if history else None
        if c is None:
            return cls(None, DEFAULT_RESERVED_FACTOR[spec.checkpointing], DEFAULT_CONTEXT_BYTES)
        return cls(c, c.reserved_factor, c.context_bytes)

    def steady_reserved(self, spec: TrialSpec, step: FakeStep) -> int:
        """The steady state's peak reserved: the replayed step plus the reserve offset or by the
        replay ratio where the calibration keeps one, else the peak allocated by the reserve
        factor. Never less than the peak allocated. Uncalibrated on a GPU, never less than the
        replayed step either: each misses a part of the reserve (the replay cuDNN's workspaces,
        one factor the step's own fragmentation), and an estimate under says "fits" wrongly."""
        c = self.calibration
        allocated = self.allocated(step.peak_allocated_bytes, spec.batch_size)
        if c is None and spec.device is Device.cuda:
            return int(max(allocated * self.factor, _replayed(spec)))
        if c is not None and c.reserve_offset is not None:
            fixed, per_sample = c.reserve_offset
            return int(max(allocated, _replayed(spec) + fixed + per_sample * spec.batch_size))
        if c is not None and c.replay_ratio is not None:
            return int(max(allocated, _replayed(spec) * c.replay_ratio))
        return int(allocated * self.factor)

    def allocated(self, estimated: float, batch: int) -> float:
        """The fake run's peak allocated at a batch, as the device would see it."""
        c = self.calibration
        if c is None:
            return estimated
        if c.peak_offset is None:
            return estimated * c.peak_ratio
        return max(0.0, estimated + c.peak_offset[0] + c.peak_offset[1] * batch)

    def device_peak(self, allocated: float, batch: int) -> int:
        return int(self.allocated(allocated, batch) * self.factor) + self.context


def _largest_batch(spec: TrialSpec, target: Target, corrections: _Corrections) -> int | None:
    """The largest micro batch that fits. The passes' peak is close to affine in the batch: a
    line through batch b and 2b gives a first answer. On a GPU the answer is then found with the
    caching allocator's model: the step replayed under the cap a trial would have (the allowed
    bytes less the context), where the allocator gives its cache back before it fails."""

    def peak_at(batch: int) -> int:
        step = fake_step(dataclasses.replace(spec, batch_size=batch))
        return corrections.device_peak(step.passes_peak_bytes, batch)

    b = spec.batch_size
    points = [(b, peak_at(b)), (2 * b, peak_at(2 * b))]
    line = fit(points)
    guess = line.largest_batch(target.allowed_bytes) if line else None
    if spec.device is Device.cpu:
        for _ in range(3):  # no allocator to model: check the line with fake steps
            if not guess or peak_at(guess) <= target.allowed_bytes < peak_at(guess + 1):
                break
            points = [points[-1], (guess, peak_at(guess))]
            line = fit(points)
            guess = line.largest_batch(target.allowed_bytes) if line else guess
        return guess
    return _largest_replayed(spec, target.allowed_bytes - corrections.context, corrections, guess)


def _largest_replayed(
    spec: TrialSpec, cap: int, corrections: _Corrections, guess: int | None
) -> int:
    """The largest batch whose replayed steps run under the cap: bracket around the guess, then
    bisect. The steps in between are drawn from two fake steps (every traced size is affine in
    the batch), so the search costs replays, not fake runs; the answer is then checked with a
    fake step of its own."""
    b = spec.batch_size
    first, second = (fake_step(dataclasses.replace(spec, batch_size=n)) for n in (b, 2 * b))

    def runs(batch: int, drawn: bool = True) -> bool:
        step = step_between(first, second, b, batch) if drawn else None
        if step is None:
            step = fake_step(dataclasses.replace(spec, batch_size=batch))
            estimated: float = step.peak_allocated_bytes
        else:  # drawn steps keep the first's figures: the peak, too, is drawn
            one, two = first.peak_allocated_bytes, second.peak_allocated_bytes
            estimated = one + (two - one) * (batch - b) / b
        scale = corrections.allocated(estimated, batch) / estimated if estimated else 1.0
        try:
            replayed_reserved(step, cap, scale=scale)
        except ReplayOutOfMemory:
            return False
        return True

    smallest = _smallest_batch(spec)
    if cap <= 0 or not runs(smallest, drawn=False):
        return 0
    low, high = smallest, max(smallest + 1, guess or 2)
    while runs(high):
        low, high = high, math.ceil(high * 1.25) + 1
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if runs(middle) else (low, middle)
    while low > smallest and not runs(low, drawn=False):  # the drawn steps were off: step down
        low -= 1
    return low


def _smallest_batch(spec: TrialSpec) -> int:
    """1, or 2 where a step cannot train on one sample: BatchNorm needs more than one value per
    channel, which a batch of one small image lacks at the end of a conv net (resnet18 on
    32x32 images: [1, 512, 1, 1])."""
    try:
        fake_step(dataclasses.replace(spec, batch_size=1))
    except ValueError:
        return 2
    return 1


def calibrate(spec: TrialSpec, history: Sequence[TrialResult]) -> Calibration | None:
    """Compare fake runs with measured trials of the same model on a GPU, and correct by the
    trials most alike the spec (the newest 30 of them): the steady-state peak by a line through
    what the fake run missed at each batch (measured and estimated peaks are both close to
    affine in the batch; what it misses, cuDNN's workspaces above all, grows with it), or by the
    median ratio of measured to estimated where the alike trials have one batch; the steady
    peak reserved likewise, by a line through what the fake step replayed through the
    allocator's model missed (cuDNN's workspaces again), or by a median ratio where there is no
    line (Calibration says which). A trial's first steps are left out: in fp32, cuDNN's benchmark
    tries workspaces that nearly double the peak on a big GPU, but under a cap it takes only
    what is free and the trial still runs (experiments/2026-11-30-h200-memory). History comes
    newest first."""
    measured = [
        dataclasses.replace(r, spec=rebuilt)
        for r in history
        if r.spec.model.identity == spec.model.identity and r.status is Status.ok
        and r.memory is not None and r.spec.device is Device.cuda and not _squeezed(r)
        and (rebuilt := _rebuilt(r.spec, spec)) is not None
    ]  # fmt: skip
    if not measured:
        return None
    alike = _most_alike(spec, measured)[:30]
    errors, ratios, factors, missed, replays, reserve_missed = [], [], [], [], [], []
    for r in alike:
        assert r.memory is not None
        fake, real = fake_step(r.spec).peak_allocated_bytes, r.memory.steady_peak_allocated_bytes
        uncorrected = fake * DEFAULT_RESERVED_FACTOR[r.spec.checkpointing] + DEFAULT_CONTEXT_BYTES
        errors.append(abs(uncorrected / steady_device_peak(r) - 1))
        ratios.append(real / fake)
        missed.append((r.spec.batch_size, real - fake))
        factors.append(r.memory.steady_peak_reserved_bytes / r.memory.steady_peak_allocated_bytes)
        if not r.spec.expandable_segments:
            replayed = _replayed(r.spec)
            replays.append(r.memory.steady_peak_reserved_bytes / replayed)
            reserve_missed.append(
                (r.spec.batch_size, r.memory.steady_peak_reserved_bytes - replayed)
            )
    contexts = [r.memory.context_bytes for r in measured[:30] if r.memory is not None]
    line = fit(missed)  # None where the alike trials have one batch
    reserve_line = None if spec.expandable_segments else fit(reserve_missed)
    return Calibration(
        trials=len(alike),
        peak_offset=(line.fixed_bytes, line.bytes_per_sample) if line else None,
        peak_ratio=statistics.median(ratios),
        reserved_factor=statistics.median(factors),
        reserve_offset=(
            (reserve_line.fixed_bytes, reserve_line.bytes_per_sample) if reserve_line else None
        ),
        replay_ratio=_replay_ratio(spec, replays, factors),
        context_bytes=int(statistics.median(contexts)),
        error_median=statistics.median(errors),
        error_worst=max(errors),
    )


def _rebuilt(stored: TrialSpec, spec: TrialSpec) -> TrialSpec | None:
    """A stored trial's setting as this advisor would build it: the spec's own workload and
    optimizer, or a bundled optimizer of the stored name; None for an optimizer it does not
    know. A row's builders are data: a shared database must not run code on its readers."""
    if stored.optimizer.name == spec.optimizer.name:
        optimizer: OptimizerSpec | None = spec.optimizer
    else:
        optimizer = bundled_optimizer(stored.optimizer.name)
    if optimizer is None:
        return None
    return dataclasses.replace(stored, model=spec.model, optimizer=optimizer)


def _replay_ratio(spec: TrialSpec, replays: list[float], factors: list[float]) -> float | None:
    """The median ratio of measured to replayed reserve, kept where the spec has no expandable
    segments (the model has none) and two or more alike trials spread it less than the factor."""
    if spec.expandable_segments or len(replays) < 2 or min(replays) <= 0 or min(factors) <= 0:
        return None
    if max(replays) / min(replays) >= max(factors) / min(factors):
        return None
    return statistics.median(replays)


def _squeezed(r: TrialResult) -> bool:
    """Whether a trial's cap changed its reserve: the allocator reached the cap and gave its
    cache back. Below the cap a capped trial allocates as an uncapped one does."""
    if r.spec.memory_cap_bytes is None:
        return False
    return r.memory is None or r.memory.num_alloc_retries > 0


@functools.lru_cache(maxsize=1024)
def _replayed(spec: TrialSpec) -> int:
    """The spec's fake step replayed through the allocator's model: its steady peak reserved."""
    return replayed_reserved(fake_step(spec))


def steady_device_peak(r: TrialResult) -> int:
    """What a measured trial needed of the device in its timed steps: reserved plus context."""
    assert r.memory is not None
    return r.memory.steady_peak_reserved_bytes + r.memory.context_bytes


def _most_alike(spec: TrialSpec, measured: list[TrialResult]) -> list[TrialResult]:
    """The trials sharing the most of the knobs that change what the allocator does beyond the
    fake run: all but the batch first, then precision (cuDNN's workspaces), checkpointing
    (recompute) and channels_last."""
    keys = [
        family_key,
        lambda s: (s.precision, s.checkpointing, s.channels_last),
        lambda s: (s.precision, s.checkpointing),
        lambda s: s.precision,
    ]
    for key in keys:
        alike = [r for r in measured if key(r.spec) == key(spec)]
        if alike:
            return alike
    return measured
