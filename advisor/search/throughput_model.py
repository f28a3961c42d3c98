"""Throughput over a sweep's space, predicted from the points measured: a main-effects model.

log(samples/s) = intercept + one effect per value of each axis (least squares). The sweep's
designed trials change one axis at a time from the best so far, which is what fixes these
effects; the model then says whether any point not yet measured could still be clearly faster,
and the sweep stops when none can. It knows nothing of a value no measured point has, so a point
with one is never predicted (it stays worth measuring).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from advisor.estimation.memory_line import family_key
from advisor.result import TrialResult
from advisor.search.space import Choice, Space

PROMISING = 0.02  # keep measuring while a point left is predicted this much faster than the best


@dataclasses.dataclass(frozen=True)
class MainEffects:
    columns: dict[tuple[str, Choice], int]  # (axis, value) -> its column; references have none
    reference: dict[str, Choice]  # per axis, the value folded into the intercept
    coefficients: np.ndarray

    def predict(self, point: Mapping[str, Choice]) -> float | None:
        """Samples/s at the point; None when it has a value no measured point had."""
        total = float(self.coefficients[0])
        for axis, value in point.items():
            if value == self.reference.get(axis):
                continue
            column = self.columns.get((axis, value))
            if column is None:
                return None
            total += float(self.coefficients[column])
        return math.exp(total)


def fit(points: Sequence[tuple[Mapping[str, Choice], float]]) -> MainEffects | None:
    """The least-squares fit; None unless every effect is fixed by the points (full rank)."""
    points = [(p, rate) for p, rate in points if rate > 0]
    if not points:
        return None
    axes = sorted(points[0][0])
    reference = {axis: points[0][0][axis] for axis in axes}
    columns: dict[tuple[str, Choice], int] = {}
    for p, _ in points:
        for axis in axes:
            if p[axis] != reference[axis] and (axis, p[axis]) not in columns:
                columns[(axis, p[axis])] = len(columns) + 1
    design = np.zeros((len(points), len(columns) + 1))
    design[:, 0] = 1.0
    for row, (p, _) in enumerate(points):
        for axis in axes:
            if p[axis] != reference[axis]:
                design[row, columns[(axis, p[axis])]] = 1.0
    if np.linalg.matrix_rank(design) < design.shape[1]:
        return None
    rates = np.log([rate for _, rate in points])
    coefficients, *_ = np.linalg.lstsq(design, rates, rcond=None)
    return MainEffects(columns, reference, coefficients)


def most_promising(
    space: Space,
    rates: Sequence[tuple[Mapping[str, Choice], float]],
    best: TrialResult,
    tried: set[str],
    batch_for: Callable[[dict[str, Choice]], int] | None,
) -> dict[str, Choice] | bool:
    """The untried setting (its family not in `tried`) the model fitted to `rates` predicts
    PROMISING faster than the best, at the largest batch predicted to fit (`batch_for`, where
    the batch is an axis). The model is over settings (all axes but the batch), each at its
    climb's end: at a small batch a setting reads slow, and with the batch an axis,
    interactions confounded it (on the H200 it rated tf32 + compile at b2048 fastest; it did
    not fit). True: none, but some cannot be predicted; False: none."""
    model = fit(rates)
    if model is None:
        return True
    at: dict[str, Choice] = {"batch_size": best.spec.batch_size} if batch_for else {}
    unknown, top, top_rate = False, None, best.samples_per_s * (1 + PROMISING)
    for setting in space.settings():
        predicted = model.predict(setting)
        if predicted is not None and predicted <= top_rate:
            continue  # (the cheap test first: spaces run to thousands of points)
        if family_key(space.spec({**setting, **at})) in tried:
            continue  # at some batch: the climb has it
        if predicted is None:
            unknown = True
        else:
            top, top_rate = {**setting, **at}, predicted
    if top is not None and batch_for is not None:
        top["batch_size"] = batch_for(top)
    return top if top is not None else unknown
