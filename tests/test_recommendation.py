"""Recommendations from measured trials: one figure per setting, the median of its measurements."""

from __future__ import annotations

import dataclasses

from fake_backend import GiB, fake_result

from advisor.config import load, trial_spec
from advisor.recommendation import recommend, typical
from advisor.target import Target

SETTINGS = ["model=resnet50", "device=cpu", "precision=fp32"]
TARGET = Target("big", 80 * GiB, 0.05)


def measured(trial_id: int, samples_per_s: float, *overrides: str):
    result = fake_result(trial_spec(load([*SETTINGS, *overrides])))
    assert result.throughput is not None
    throughput = dataclasses.replace(result.throughput, samples_per_s=samples_per_s)
    return dataclasses.replace(result, id=trial_id, throughput=throughput)


def test_a_setting_measured_again_counts_by_its_median_not_its_first():
    """The README's CPU example once said its answer was 1.33x slower than the user's settings:
    that line held the baseline's first measurement (398/s), the runners-up its second
    (168/s). Both now show the one recommendations count, the lower of the middle two."""
    first, second = measured(1, 398.0, "batch_size=64"), measured(2, 168.0, "batch_size=64")
    other = measured(3, 300.0, "batch_size=128")
    assert typical(first, [second, other], TARGET) is second
    rec = recommend([first, second, other], TARGET)
    assert rec.best is other and rec.runners_up == [second]
    three = [first, second, measured(4, 250.0, "batch_size=64")]
    assert typical(first, three, TARGET).id == 4  # three measurements: the median


def test_a_setting_measured_once_is_its_own_figure():
    only, other = measured(1, 398.0, "batch_size=64"), measured(2, 300.0, "batch_size=128")
    assert typical(only, [other], TARGET) is only


def under_load(result, load: float):
    assert result.throughput is not None
    return dataclasses.replace(
        result, throughput=dataclasses.replace(result.throughput, machine_load=load)
    )


def test_the_answer_keeps_the_measurements_it_counts_by():
    """recommend says how often its answer was measured and how far apart, as the sweep does:
    the measurements of the newest load only (the older load's 241,912/s is not among them)."""
    old = under_load(measured(1, 241_912.0, "batch_size=64"), 0.0)
    newer = [under_load(measured(i, rate, "batch_size=64"), 0.5)
             for i, rate in ((2, 85_534.0), (3, 63_489.0))]  # fmt: skip
    other = under_load(measured(4, 50_000.0, "batch_size=128"), 0.5)
    rec = recommend([old, *newer, other], TARGET)
    assert rec.best is not None and rec.best.id == 3  # (of two, the lower)
    assert rec.best_counted == newer
    alone = recommend([other], TARGET)
    assert alone.best_counted == [other]
