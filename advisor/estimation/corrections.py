"""What turns a fake step's bytes into the device's: calibrated on measured history of the same
model where there is some (calibrate), stated defaults otherwise (Corrections.uncalibrated).
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections.abc import Sequence

from advisor.estimation.fake_step import FakeStep, fake_step, replayed_reserved
from advisor.estimation.memory_line import family_key, fit
from advisor.gpus import DEFAULT_CONTEXT_BYTES
from advisor.optimizers import bundled_optimizer
from advisor.result import Status, TrialResult
from advisor.spec import Checkpointing, Device, OptimizerSpec, TrialSpec

# Defaults for what a fake run cannot see, from the H200's 54 trials in experiments/2026-11-30-
# h200-memory: steady peak reserved / steady peak allocated (median; checkpointing's recompute
# leaves the cache more fragmented); what a trial's process held beyond the allocator is
# gpus.DEFAULT_CONTEXT_BYTES.
# (Uncalibrated, these only start the largest batch's search and check the optimizer step.)
DEFAULT_RESERVED_FACTOR = {Checkpointing.none: 1.11, Checkpointing.blocks: 1.31}
# cuBLAS's and cuBLASLt's workspaces, 32 MiB each on the H200, taken from the caching allocator at
# the first matmul and held: in every measured peak allocated, never in a fake step (64 MiB
# exactly apart in the Mixtral, 64-91 MiB in the other held-out models of experiments/2026-12-03-
# h200-unseen-models; with them, gpt2's and resnet50's grids are estimated to 0.0% median).
# Older GPUs take less (8 MiB): the estimate errs on the safe side there.
CUBLAS_WORKSPACE_BYTES = 64 * 2**20
# Uncalibrated, the steady reserve is the step replayed through the allocator's model, by this
# margin: the replay missed up to 8% of the held-out models' reserve, and a reserve factor of the
# peak allocated (1.11, 1.31 checkpointed) was 6% under to 22% over (same folder).
REPLAY_MARGIN = 1.03


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
    # own sequence makes (checkpointed gpt2 holds 1.2-1.6x its peak), but not all of cuDNN's
    # workspaces (they grow with the batch). A trial with expandable segments calibrates no
    # replay: the model replays them (allocator.ExpandableSegments), but a calibration through
    # that replay has not been checked (experiments/2026-12-07-expandable-segments).
    # Where the alike trials have none: measured - replayed steady peak reserved, bytes + bytes
    # per sample x batch, where they span two batches or more ...
    reserve_offset: tuple[float, float] | None
    # ... else measured / replayed (median), where it spreads less over them than the factor
    # does, or is one trial's
    replay_ratio: float | None
    context_bytes: int  # measured beyond-allocator bytes (median)
    # |estimated / measured - 1| of the alike trials' steady device peak, uncorrected
    error_median: float
    error_worst: float
    # whether any alike trial recomputes as the spec does (checkpointing, compile): where none
    # does, the reserve is the replayed step's, as uncalibrated, and only the peak is calibrated
    reserve_calibrated: bool = True


@dataclasses.dataclass(frozen=True)
class Corrections:
    """What turns a fake run's bytes into the device's: calibrated, defaults, or none (CPU)."""

    calibration: Calibration | None
    factor: float  # reserved over allocated, in the steady state
    context: int
    workspace_bytes: int = 0  # cuBLAS's, held outside the step, where nothing calibrates

    @classmethod
    def of(cls, spec: TrialSpec, history: Sequence[TrialResult]) -> Corrections:
        if spec.device is Device.cpu:
            return cls(None, 1.0, 0)
        c = calibrate(spec, history) if history else None
        if c is None:
            return cls.uncalibrated(spec)
        return cls(c, c.reserved_factor, c.context_bytes)

    @classmethod
    def uncalibrated(cls, spec: TrialSpec) -> Corrections:
        factor = DEFAULT_RESERVED_FACTOR[spec.checkpointing]
        return cls(None, factor, DEFAULT_CONTEXT_BYTES, CUBLAS_WORKSPACE_BYTES)

    def steady_reserved(self, spec: TrialSpec, step: FakeStep) -> int:
        """The steady state's peak reserved: the replayed step plus the reserve offset or by the
        replay ratio where the calibration keeps one; uncalibrated on a GPU, or where no alike
        trial recomputes as the spec does, the replayed step by its margin, and what is held
        outside it; else the peak allocated by the reserve factor. Never less than the peak
        allocated."""
        c = self.calibration
        allocated = self.allocated(step.peak_allocated_bytes, spec.batch_size)
        if spec.device is Device.cuda and (c is None or not c.reserve_calibrated):
            return int(max(allocated, replayed(spec) * REPLAY_MARGIN + CUBLAS_WORKSPACE_BYTES))
        if c is not None and c.reserve_offset is not None:
            fixed, per_sample = c.reserve_offset
            return int(max(allocated, replayed(spec) + fixed + per_sample * spec.batch_size))
        if c is not None and c.replay_ratio is not None:
            return int(max(allocated, replayed(spec) * c.replay_ratio))
        return int(allocated * self.factor)

    def allocated(self, estimated: float, batch: int) -> float:
        """The fake run's peak allocated at a batch, as the device would see it."""
        return self.in_step(estimated, batch) + self.workspace_bytes

    def in_step(self, estimated: float, batch: int) -> float:
        """The fake run's peak allocated at a batch, corrected by calibration where there is
        one; without what is held outside the step."""
        c = self.calibration
        if c is None:
            return estimated
        if c.peak_offset is None:
            return estimated * c.peak_ratio
        return max(0.0, estimated + c.peak_offset[0] + c.peak_offset[1] * batch)

    def device_peak(self, allocated: float, batch: int) -> int:
        return int(self.allocated(allocated, batch) * self.factor) + self.context


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
    newest first. Only ranks of the same job calibrate a rank (gpus, strategy, replicas): what
    a DDP rank's buckets or FSDP2's gathers add is the strategy's, not the model's."""
    measured = [
        dataclasses.replace(r, spec=rebuilt)
        for r in history
        if r.spec.model.identity == spec.model.identity and r.status is Status.ok
        and _same_job(r.spec, spec)
        and r.memory is not None and r.spec.device is Device.cuda and not _squeezed(r)
        and (rebuilt := _rebuilt(r.spec, spec)) is not None
    ]  # fmt: skip
    if not measured:
        return None
    alike = _most_alike(spec, measured)[:30]
    errors, ratios, factors, missed, replays, reserve_missed = [], [], [], [], [], []
    for r in alike:
        assert r.memory is not None
        step, real = fake_step(r.spec), r.memory.steady_peak_allocated_bytes
        fake = step.peak_allocated_bytes
        defaults = Corrections.uncalibrated(r.spec)
        uncorrected = defaults.steady_reserved(r.spec, step) + defaults.context
        errors.append(abs(uncorrected / steady_device_peak(r) - 1))
        ratios.append(real / fake)
        missed.append((r.spec.batch_size, real - fake))
        factors.append(r.memory.steady_peak_reserved_bytes / r.memory.steady_peak_allocated_bytes)
        if not r.spec.expandable_segments and _recomputes_alike(r.spec, spec):
            replay = replayed(r.spec)
            replays.append(r.memory.steady_peak_reserved_bytes / replay)
            reserve_missed.append((r.spec.batch_size, r.memory.steady_peak_reserved_bytes - replay))
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
        reserve_calibrated=any(_recomputes_alike(r.spec, spec) for r in alike),
    )


def _recomputes_alike(stored: TrialSpec, spec: TrialSpec) -> bool:
    """Whether a trial's reserve can calibrate the spec's: checkpointing's recompute and
    inductor's buffers shape the reserve beyond the peak (gpt2's checkpointed compiled b64,
    calibrated on the grid's trials that do neither, came out 24.5% over; uncalibrated, +7.0%:
    experiments/2026-12-05-gpt2-calibrated)."""
    return (stored.checkpointing, stored.compile) == (spec.checkpointing, spec.compile)


def _same_job(stored: TrialSpec, spec: TrialSpec) -> bool:
    job = (spec.gpus, spec.strategy, spec.replicas)
    return (stored.gpus, stored.strategy, stored.replicas) == job


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
    segments (as reserve_offset is) and the alike trials spread it less than the factor. Where
    one alike trial without them has a ratio, there is no spread to compare, and it is kept:
    the replay follows the step's own fragmentation as the batch changes, where the factor
    assumes the reserve grows as the peak allocated (gpt2's grid, one other batch of each
    setting: the factor put the steady device peak 7.8% under to 8.5% over;
    experiments/2026-12-05-gpt2-calibrated)."""
    if spec.expandable_segments or not replays or min(replays) <= 0 or min(factors) <= 0:
        return None
    if len(replays) > 1 and max(replays) / min(replays) >= max(factors) / min(factors):
        return None
    return statistics.median(replays)


def _squeezed(r: TrialResult) -> bool:
    """Whether a trial's cap changed its reserve: the allocator reached the cap and gave its
    cache back. Below the cap a capped trial allocates as an uncapped one does."""
    if r.spec.memory_cap_bytes is None:
        return False
    return r.memory is None or r.memory.num_alloc_retries > 0


@functools.lru_cache(maxsize=1024)
def replayed(spec: TrialSpec) -> int:
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
