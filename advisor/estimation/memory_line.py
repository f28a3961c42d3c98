"""Peak device memory against micro batch size, per family of specs.

A family is every spec that differs only in micro batch size. Within one, the device peak is
close to affine in the batch: a fixed part (context, parameters, gradients, optimizer state,
workspaces) plus a part per sample (activations, inputs). Two measured batches fix the line;
more are fitted by least squares, and the worst residual is kept as the line's own error. One
measured batch fixes it too when its fixed part is known from the measured categories (context +
parameters + gradients + optimizer state): a lower bound, so the slope errs on the safe side.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from advisor.spec import TrialSpec


def family_key(spec: TrialSpec) -> str:
    """Specs with the same key differ only in micro batch size (and the cap they ran under)."""
    return dataclasses.replace(spec.uncapped, batch_size=1).hash


@dataclasses.dataclass(frozen=True)
class AffineFit:
    fixed_bytes: float  # the peak at batch 0
    bytes_per_sample: float
    max_residual_bytes: float  # the worst miss on the points it was fitted to
    points: int

    def peak(self, batch_size: int) -> float:
        return self.fixed_bytes + self.bytes_per_sample * batch_size

    def largest_batch(self, budget_bytes: float) -> int:
        """The largest micro batch whose predicted peak is within the budget (0 if none)."""
        if self.bytes_per_sample <= 0:
            return 0
        return max(0, math.floor((budget_bytes - self.fixed_bytes) / self.bytes_per_sample))


def fit(points: Sequence[tuple[int, int]], fixed_bytes: int | None = None) -> AffineFit | None:
    """Least-squares line through (batch size, peak bytes); with one batch, the line through it
    and (0, fixed_bytes). None when that is not enough."""
    batches = {b for b, _ in points}
    if len(batches) == 1 and fixed_bytes is not None and 0 < fixed_bytes < points[0][1]:
        b, p = points[0]
        return AffineFit(float(fixed_bytes), (p - fixed_bytes) / b, 0.0, 1)
    if len(batches) < 2:
        return None
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_p = sum(p for _, p in points) / n
    var = sum((b - mean_b) ** 2 for b, _ in points)
    slope = sum((b - mean_b) * (p - mean_p) for b, p in points) / var
    intercept = mean_p - slope * mean_b
    residual = max(abs(p - (intercept + slope * b)) for b, p in points)
    return AffineFit(intercept, slope, residual, n)
