"""How a trial's steps are timed: warm-up until a step really updates, then timed steps until
the median step time is known to the stated precision (its 95% interval), or, in a sweep,
until it is clear that the spec cannot beat the best so far; and the model FLOPs of a step."""

from __future__ import annotations

import dataclasses
import math
import statistics
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from advisor.result import TimingStop
from advisor.spec import Device, TrialSpec
from advisor.trial.device_memory import StepMarks
from advisor.trial.training import Training, build_model, device_batch, train_step, workload_of


@dataclasses.dataclass
class MeasureConfig:
    warmup_steps: int = 3  # untimed steps first (cuDNN autotuning, compilation); at least 3
    min_timed_steps: int = 10  # timed steps before the spread is looked at
    max_timed_steps: int = 100  # stop timing here even if the rate is not yet that precise
    max_timed_s: float = 30.0  # ... or after this many seconds of timed steps
    target_precision: float = 0.01  # stop once the median step's 95% interval is within this


class Clock:
    """Seconds between laps, the device's queued work included."""

    def __init__(self, device: Device) -> None:
        self.cuda = device is Device.cuda
        self.last = time.perf_counter()

    def lap(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        now = time.perf_counter()
        seconds, self.last = now - self.last, now
        return seconds


def warmup_step(training: Training, marks: StepMarks) -> bool:
    """One marked step; True if fp16's GradScaler skipped the optimizer step (inf gradients)."""
    scaler = training.scaler
    scale = scaler.get_scale() if scaler.is_enabled() else None
    train_step(training, marks.mark)
    marks.end_step()
    return scale is not None and scaler.get_scale() < scale


CUDA_CHUNK = 5  # steps queued between synchronisations (CUDA events time each one)
CUT_AFTER_STEPS = 5  # timed steps before a spec may be judged unable to beat the best


def time_steps(
    training: Training, settings: MeasureConfig, beat_samples_per_s: float | None = None
) -> tuple[list[float], TimingStop]:
    """Step times in seconds, and why timing stopped: once the median is known to
    settings.target_precision (after min_timed_steps), once even the fastest rate its 95%
    interval allows is below beat_samples_per_s, or at a limit."""
    cuda = training.spec.device is Device.cuda
    samples = training.spec.effective_batch_size
    times: list[float] = []
    started = time.perf_counter()
    while True:
        if cuda:
            events = []
            for _ in range(CUDA_CHUNK):
                begin = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                begin.record()
                train_step(training)
                end.record()
                events.append((begin, end))
            torch.cuda.synchronize()
            times += [b.elapsed_time(e) / 1000.0 for b, e in events]
        else:
            begin_s = time.perf_counter()
            train_step(training)
            times.append(time.perf_counter() - begin_s)
        median, half = statistics.median(times), median_ci95(times)
        if len(times) >= settings.min_timed_steps and half <= settings.target_precision * median:
            return times, TimingStop.precise
        fastest = samples / (median - half) if median > half else float("inf")
        if beat_samples_per_s and len(times) >= CUT_AFTER_STEPS and fastest < beat_samples_per_s:
            return times, TimingStop.cut
        if len(times) >= settings.max_timed_steps:
            return times, TimingStop.steps
        if time.perf_counter() - started >= settings.max_timed_s and len(times) >= 3:
            return times, TimingStop.seconds


def median_ci95(times: list[float]) -> float:
    """Half-width of a distribution-free 95% confidence interval of the median: the order
    statistics n/2 -+ 1.96 sqrt(n)/2 (step times are skewed; no normal law is assumed)."""
    ordered, n = sorted(times), len(times)
    reach = 1.96 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - reach))
    high = min(n - 1, math.ceil(n / 2 + reach) - 1)
    return (ordered[high] - ordered[low]) / 2


def count_flops(spec: TrialSpec) -> float | None:
    """Model FLOPs of one optimizer step: forward and backward of every micro batch, counted on
    the meta device (nothing allocated), without checkpointing's recompute, as MFU counts them."""
    meta = torch.device("meta")
    try:
        work = workload_of(spec.model)
        model = build_model(work, meta)
        batch = device_batch(work, spec, meta)
        with FlopCounterMode(display=False) as counter:
            work.compute_loss(model, batch).backward()
        return float(counter.get_total_flops() * spec.grad_accum)
    except Exception:  # a model that meta tensors cannot run: no MFU, the rest stands
        return None


def iqr(times: list[float]) -> float:
    if len(times) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(times, n=4)
    return q3 - q1
