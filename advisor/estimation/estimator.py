"""The memory breakdown of a spec without a GPU, from one training step on fake tensors
(advisor/estimation/fake_step.py).

What no fake run sees (the CUDA context, the caching allocator's reserve) comes from measured
history where there is some, and from stated defaults otherwise. The largest batch on a GPU comes
from replaying the fake step through the caching allocator's model under the target's limit.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from torch.nn.modules.batchnorm import _BatchNorm

from advisor import gpus
from advisor.errors import EstimateError
from advisor.estimation.allocator import ReplayOutOfMemory
from advisor.estimation.corrections import Calibration, Corrections
from advisor.estimation.fake_step import FakeStep, fake_step, replayed_reserved, step_between
from advisor.estimation.memory_line import fit
from advisor.estimation.meta_model import meta_model_of
from advisor.result import Category, TrialResult
from advisor.spec import Device, TrialSpec
from advisor.target import Target

# How far the truth was from the estimate's device peak where it was checked (true = estimate x
# (1 + e)): uncalibrated, on 49 specs of 24 public models it had never run (5 of them, ViT-S's
# and a UNet's, since read for cuDNN's workspace rules), e from -4.9% (EfficientNetV2
# checkpointed) to +3.1% (RegNet in channels-last bf16: cuDNN's workspaces),
# after dropout and masks were emulated as CUDA runs them, the allocator's ties fall as on the
# GPU and the kernels' own temporaries are made (experiments/2026-12-06-cudnn-2d-workspaces,
# torch 2.11; before, -11.8% for T5 in fp32: the lower side is kept there); calibrated leave one
# out on the catalog's eager specs, e from -5.9% (resnet50 fp32 b64) to +3.6% (resnet50 fp16
# checkpointed; experiments/2026-12-06-cudnn-2d-workspaces), and compiled in 16 bits up to
# +12.7% (gpt2 b32, within COMPILED_ABOVE; experiments/2026-12-05-gpt2-calibrated). The fit
# verdict takes the upper side, so that "fits" is not said of a setting that, by that record,
# may not.
UNCALIBRATED_RANGE = (-0.12, 0.05)
CALIBRATED_RANGE = (-0.07, 0.06)
# A net with convolutions whose workspaces cuDNN decides beyond what is modelled
# (channels-first ones, strict fp32: cuda_workspaces.has_unmodelled_convolutions), uncalibrated,
# was further above: those workspaces shape its reserve. Up to 25.3% on the catalog's resnet50
# (fp32 checkpointed b256, channels-first) and 10.1% on a VGG11 no set had measured; and under
# a 16 GiB cap on an H100 the same resnet50 ran out of memory at the batch that 5% above had
# said fits (425; the estimate 436, the truth 421 to 424). So its range and its verdict take
# this (experiments/2026-12-06-cudnn-2d-workspaces). In channels-last and with patch kernels
# only, the truth stayed within the uncalibrated range: at most 4.2% above on the sets that
# had measured them, and below the estimate on ten specs of nine nets none had measured so
# (experiments/2026-12-06-channels-last-range).
CONVOLUTIONS_ABOVE = 0.26
# In strict fp32 cuDNN's benchmark (on in advisor's runs, as in most scripts) picks the fastest
# algorithm whatever its workspace, unmodelled: a VGG11 at 24 reserved 37.7% above its estimate
# (one 3x3's forward took 2.4 GB). So its upper side adds a bound that every measured forward
# stayed within (cuda_workspaces.strict_fp32_forward_bound, capped at the largest seen), a
# compiled step's as an eager one's (its graphs' convolutions are counted). The gradients'
# workspaces, which grow with the batch, are not in it: the two nets measured stayed within the
# 26% and the bound (experiments/2026-12-06-conv-workspace-survey).
# Compiled, estimated with the torch the H200 ran (2.11) on 43 compiled specs, graph-broken ones
# among them, the device peak was up to 9.3% above the estimate (gpt2 b32 bf16; 13.4% before
# inductor's buffer reuse was modelled) and the peak allocated up to 3.6% (a DDPM UNet;
# experiments/2026-12-06-compiled-device-peak). The upper side stays at 14%: 43 specs of 14
# models, and a compiled step's first-step reserve moved 21% between two runs of one spec
# there. The estimate compiles as the torch it runs on does: another torch's inductor may keep
# other tensors.
COMPILED_ABOVE = 0.14
# An FSDP2 rank that casts its parameters for each gather (fsdp.param_dtype) reserved 9.4% above
# its estimated device peak on an H100 (gpt2 at 8: 2.51 GiB over its peak allocated, the
# other knobs' ranks about 1.1; experiments/2026-12-05-h200-ranks): not yet modelled
CAST_PARAMETERS_ABOVE = 0.10
# NCCL's memory outside the allocator, which no rank on the fake group shows (gpus.py)
RANK_UNMODELLED = (
    f"NCCL's own memory, outside PyTorch's allocator: {gpus.NCCL_OWN_BYTES / 2**20:,.0f} MiB "
    "in a one-GPU NCCL group on an H200, likely more with peers (the default margin=0.05 "
    "keeps more than that free on a GPU of 11 GiB or more)"
)
PROBED_GPU = re.compile(r"h[12]00", re.IGNORECASE)  # where the kernels' rules were probed (sm90)


class FitVerdict(enum.Enum):
    """Whether a setting fits, by the estimate and the range of its record."""

    fits = "fits"  # by the upper side
    may_not_fit = "may not fit"  # by the estimate itself, not by the upper side
    does_not_fit = "does not fit"


@dataclasses.dataclass(frozen=True)
class Estimate:
    spec: TrialSpec
    target: Target
    step: FakeStep
    context_bytes: int
    reserved_factor: float  # calibrated: measured reserved over allocated (median)
    # the steady state's: corrected by calibration where there is one, else with cuBLAS's
    # workspaces added
    peak_allocated_bytes: int
    # the steady state's: the replayed step by calibration's offset or ratio, or (uncalibrated)
    # by the replay's margin plus cuBLAS's workspaces; never below the peak allocated
    peak_reserved_bytes: int
    # peak reserved + context. Not the first steps': cuDNN's benchmark workspaces there take only
    # what is free (experiments/2026-11-30-h200-memory).
    device_peak_bytes: int
    # the largest micro batch whose estimated device peak fits the target (by the estimate
    # itself: its verdict may be "may not fit")
    largest_batch: int | None
    calibration: Calibration | None
    # where the true device peak lies by the estimate's record (true / estimate - 1), and the
    # largest batch that fits by its upper side
    error_range: tuple[float, float] = (0.0, 0.0)
    largest_batch_sure: int | None = None
    unmodelled: tuple[str, ...] = ()  # what it could not model, in words
    notes: tuple[str, ...] = ()  # what it modelled that a user should know (graph breaks)
    # cuBLAS's workspaces, held outside the step: in the peak allocated where uncalibrated
    workspace_bytes: int = 0

    @property
    def device_peak_range(self) -> tuple[int, int]:
        low, high = self.error_range
        return int(self.device_peak_bytes * (1 + low)), int(self.device_peak_bytes * (1 + high))

    @property
    def fits(self) -> bool:
        """Whether the setting fits by the upper side of the estimate's record. On a GPU by the
        allocator model (near its limit the allocator gives back its cache, so the device peak,
        what it holds with memory to spare, can be more); elsewhere by the device peak."""
        if self.spec.device is Device.cuda and self.largest_batch_sure is not None:
            return self.spec.batch_size <= self.largest_batch_sure
        return self.device_peak_range[1] <= self.target.allowed_bytes

    @property
    def verdict(self) -> FitVerdict:
        if self.fits:
            return FitVerdict.fits
        if self.spec.device is Device.cuda and self.largest_batch is not None:
            central = self.spec.batch_size <= self.largest_batch
        else:
            central = self.device_peak_bytes <= self.target.allowed_bytes
        return FitVerdict.may_not_fit if central else FitVerdict.does_not_fit

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
                "cublas_workspace_bytes": self.workspace_bytes,
            },
            "target": dataclasses.asdict(self.target),
            "device_peak_range_bytes": list(self.device_peak_range),
            "fits": self.fits,
            "verdict": self.verdict.value,
            "margin_left_bytes": self.target.memory_bytes - self.device_peak_bytes,
            "largest_batch": self.largest_batch,
            "largest_batch_sure": self.largest_batch_sure,
            "unmodelled": list(self.unmodelled),
            "notes": list(self.notes),
            "top_modules": [{"module": m, "activations_bytes": b} for m, b in s.top_modules],
            "calibration": dataclasses.asdict(self.calibration) if self.calibration else None,
        }


def estimate(spec: TrialSpec, target: Target, history: Sequence[TrialResult] = ()) -> Estimate:
    """The estimate for a spec on the target GPU, calibrated on history of the same model."""
    step = fake_step(spec)
    corrections = Corrections.of(spec, history)
    b = spec.batch_size
    peak = int(corrections.allocated(step.peak_allocated_bytes, b))
    reserved = corrections.steady_reserved(spec, step)
    unmodelled = list(step.unmodelled)
    low, high = CALIBRATED_RANGE if corrections.calibration else UNCALIBRATED_RANGE
    above_bytes = 0  # the upper side's bytes, beside its fraction
    if step.unmodelled_convolutions and not corrections.calibration:
        high = CONVOLUTIONS_ABOVE
        if not spec.precision.cudnn_tf32:
            above_bytes = step.strict_fp32_forward_bound_bytes
            unmodelled.append(
                "strict fp32: cuDNN's benchmark picks convolution algorithms by speed, whatever "
                f"their workspace; the range and the verdict take {above_bytes / 2**20:,.0f} MiB "
                "more, a bound every forward of such shapes measured on an H100 stayed within"
            )
    if spec.compile and step.compiled_graphs == 0:
        unmodelled.append("torch.compile made no graph of the model: estimated as it ran, eagerly")
    elif spec.compile:
        high = max(high, COMPILED_ABOVE)
    notes = []
    if step.compiled_graphs > 1:  # modelled, but worth knowing: each break costs speed
        notes.append(
            f"torch.compile breaks the model into {step.compiled_graphs} graphs (each modelled "
            "as compiled, the code between them as it runs)"
        )
    if spec.gpus > 1:
        unmodelled.append(RANK_UNMODELLED)
        notes.extend(_rank_notes(spec, step))
    if spec.gpus > 1 and spec.param_dtype is not None:
        unmodelled.append(
            "the reserve of parameters cast for each gather (fsdp.param_dtype): measured up to "
            f"{CAST_PARAMETERS_ABOVE:.0%} above the estimate"
        )
        high = max(high, CAST_PARAMETERS_ABOVE)
    if spec.device is Device.cpu:  # the record is the H200's; the CPU's was not checked
        low, high = 0.0, 0.0
    elif not target.is_budget and not PROBED_GPU.search(target.name):
        unmodelled.append(
            "the kernels' rules (attention, cuBLAS's workspaces, the reductions' launch) were "
            f"probed on an H200 and an H100; {target.name} may pick others"
        )
    largest = largest_batch(spec, target, corrections)
    sure = largest_batch(
        spec, target, corrections, above=high, above_bytes=above_bytes, checked=False
    )
    if sure is not None and largest is not None:
        sure = min(sure, largest)  # (the upper side's answer is not checked by a step of its own)
    device_peak = reserved + corrections.context
    return Estimate(
        spec, target, step, corrections.context, corrections.factor, peak, reserved,
        device_peak, largest, corrections.calibration, (low, high + above_bytes / device_peak),
        sure, tuple(unmodelled), tuple(notes), corrections.workspace_bytes,
    )  # fmt: skip


def _rank_notes(spec: TrialSpec, step: FakeStep) -> list[str]:
    """What a job's rank is, as estimated."""
    assert spec.strategy is not None  # (a job on several GPUs has one)
    notes = [f"one rank of a job on {spec.gpus} GPUs ({spec.strategy.value}): its step run on "
             "torch's fake process group, which moves nothing"]  # fmt: skip
    if step.ddp_buckets_bytes:
        notes.append(
            f"DDP's gradient buckets, {step.ddp_buckets_bytes / 2**20:,.1f} MiB, are in the "
            "peak and in no category"
        )
    return notes


def device_peak(spec: TrialSpec, history: Sequence[TrialResult] = ()) -> int:
    """Just the device peak of one spec (the sweep's question before it spends GPU time)."""
    corrections = Corrections.of(spec, history)
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
        return largest_batch(spec, target, Corrections.of(spec, [*measured, *self.history]))


def largest_batch(
    spec: TrialSpec,
    target: Target,
    corrections: Corrections,
    above: float = 0.0,
    above_bytes: int = 0,
    checked: bool = True,
) -> int | None:
    """The largest micro batch that fits (0 where the optimizer step alone does not), its device
    peak taken `above` higher than estimated and `above_bytes` more (the upper side of its
    error); where `checked`, the answer is checked with a fake step of its own."""
    allowed = (target.allowed_bytes - above_bytes) / (1 + above)
    update_peak = fake_step(spec).update_peak_bytes
    if corrections.device_peak(update_peak, spec.batch_size) > allowed:
        return 0
    return _largest_batch(spec, corrections, allowed, checked)


def _largest_batch(
    spec: TrialSpec, corrections: Corrections, allowed: float, checked: bool
) -> int | None:
    """The largest micro batch whose device peak is within `allowed`. The passes' peak is close
    to affine in the batch: a line through batch b and 2b gives a first answer. On a GPU the
    answer is then found with the caching allocator's model: the step replayed under the cap a
    trial would have (the allowed bytes less the context and, uncalibrated, cuBLAS's
    workspaces), where the allocator gives its cache back before it fails."""

    def peak_at(batch: int) -> int:
        step = fake_step(dataclasses.replace(spec, batch_size=batch))
        return corrections.device_peak(step.passes_peak_bytes, batch)

    b = spec.batch_size
    points = [(b, peak_at(b)), (2 * b, peak_at(2 * b))]
    line = fit(points)
    guess = line.largest_batch(int(allowed)) if line else None
    if spec.device is Device.cpu:
        for _ in range(3):  # no allocator to model: check the line with fake steps
            if not guess or peak_at(guess) <= allowed < peak_at(guess + 1):
                break
            points = [points[-1], (guess, peak_at(guess))]
            line = fit(points)
            guess = line.largest_batch(int(allowed)) if line else guess
        return guess
    # Not by the replay's margin: that is the steady reserve's, uncapped; under the cap the
    # allocator gives its cache back before it fails, and the replay models that (without it,
    # 10 of 12 largest batches within 3% of the H200's bisection, against 4 of 12 with it:
    # experiments/2026-12-03-h200-largest-batch)
    cap = allowed - corrections.context - corrections.workspace_bytes
    return _largest_replayed(spec, int(cap), corrections, guess, checked)


def _largest_replayed(
    spec: TrialSpec, cap: int, corrections: Corrections, guess: int | None, checked: bool
) -> int:
    """The largest batch whose replayed steps run under the cap: bracket around the guess, then
    bisect. The steps in between are drawn from two fake steps (every traced size is affine in
    the batch), so the search costs replays, not fake runs; where `checked`, the answer is
    then checked with a fake step of its own."""
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
        scale = corrections.in_step(estimated, batch) / estimated if estimated else 1.0
        try:
            replayed_reserved(step, cap, scale=scale)
        except ReplayOutOfMemory:
            return False
        return True

    smallest = _smallest_batch(spec)
    if cap <= 0 or not runs(smallest, drawn=smallest == 1):
        return 0
    low, high = smallest, max(smallest + 1, guess or 2)
    while runs(high):
        low, high = high, math.ceil(high * 1.25) + 1
    low = _bisected(low, high, runs)
    if checked and low > smallest and not runs(low, drawn=False):  # the drawn were off
        low = _largest_run_below(low, smallest, lambda batch: runs(batch, drawn=False))
    return low


def _largest_run_below(failed: int, smallest: int, runs: Callable[[int], bool]) -> int:
    """The largest batch below `failed` whose own fake step runs: steps down doubling, then
    bisects. A drawn step can be off by more than a sample where a kernel's temporaries do not
    grow in proportion to the batch (the reduction kernel's partial sums level off at the GPU's
    multiprocessors): stepping down one sample at a time, a tiny model's search at batches in
    the millions never ended."""
    high, step = failed, 1
    low = max(smallest, high - step)
    while low > smallest and not runs(low):
        high, step = low, step * 2
        low = max(smallest, high - step)
    return _bisected(low, high, runs)


def _bisected(low: int, high: int, runs: Callable[[int], bool]) -> int:
    """The largest batch that runs between one that runs (low) and one that does not (high)."""
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if runs(middle) else (low, middle)
    return low


def _smallest_batch(spec: TrialSpec) -> int:
    """1, or 2 where a step cannot train on one sample: BatchNorm needs more than one value per
    channel, which a batch of one small image lacks at the end of a conv net (resnet18 on
    32x32 images: [1, 512, 1, 1]). Only a model with BatchNorm takes a fake step to tell."""
    if not any(isinstance(m, _BatchNorm) for m in meta_model_of(spec.model).modules()):
        return 1
    try:
        fake_step(dataclasses.replace(spec, batch_size=1))
    except EstimateError:  # BatchNorm's ValueError, as the fake step says it
        return 2
    return 1
