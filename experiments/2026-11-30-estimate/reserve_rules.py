"""How calibration should correct the replayed reserve: rules compared, leave one out (issue 4).

    python3 reserve_rules.py > reserve_rules.md

On accuracy.py's specs (the 54 of the accuracy set measured alone, and the earlier runs), each
spec's steady device peak is estimated from the *other* trials most alike it, as `advisor
estimate` picks them, with the steady peak reserved corrected by one rule at a time:
- before: the replayed step x the median measured/replayed ratio where that spreads less over
  the alike trials than the reserve factor does, else the calibrated peak allocated x the median
  factor (advisor's rule until this change);
- ratio: the replayed step x the median ratio, always;
- line (advisor's rule now): the replayed step + a line in the batch through measured - replayed;
- line_of_ratio: the replayed step x a line in the batch through the ratio;
- nearest: the replayed step x the ratio of the alike trial nearest in batch.
The peak allocated and the context are calibrated as advisor does; only the reserve differs.
"""

from __future__ import annotations

import statistics

from accuracy import trials

from advisor.estimate import _Corrections, _most_alike, _replay_ratio, _replayed, steady_device_peak
from advisor.fake_step import fake_step
from advisor.memory_model import fit

GiB = 2**30


def reserve_of(r):
    return r.memory.steady_peak_reserved_bytes


def ratio(r, alike):
    return statistics.median(reserve_of(o) / _replayed(o.spec) for o in alike)


def before(r, alike, allocated):
    factors = [reserve_of(o) / o.memory.steady_peak_allocated_bytes for o in alike]
    replays = [reserve_of(o) / _replayed(o.spec) for o in alike]
    kept = _replay_ratio(r.spec, replays, factors)
    if kept is not None:
        return _replayed(r.spec) * kept
    return allocated * statistics.median(factors)


def line(r, alike, fallback):
    fitted = fit([(o.spec.batch_size, reserve_of(o) - _replayed(o.spec)) for o in alike])
    if fitted is None:
        return fallback
    return _replayed(r.spec) + fitted.peak(r.spec.batch_size)


def line_of_ratio(r, alike, fallback):
    fitted = fit([(o.spec.batch_size, reserve_of(o) / _replayed(o.spec)) for o in alike])
    if fitted is None:
        return fallback
    return _replayed(r.spec) * fitted.peak(r.spec.batch_size)


def nearest(r, alike):
    o = min(alike, key=lambda o: abs(o.spec.batch_size - r.spec.batch_size))
    return _replayed(r.spec) * reserve_of(o) / _replayed(o.spec)


def main() -> None:
    measured = trials()
    errors: dict[str, list[float]] = {}
    rows = []
    for r in measured:
        others = [o for o in measured if o is not r and o.spec.model == r.spec.model]
        alike = [o for o in _most_alike(r.spec, others)[:30] if not o.spec.expandable_segments]
        corrections = _Corrections.of(r.spec, others)
        allocated = corrections.allocated(fake_step(r.spec).peak_allocated_bytes, r.spec.batch_size)
        fallback = before(r, alike, allocated)
        reserves = {
            "before": fallback,
            "ratio": _replayed(r.spec) * ratio(r, alike),
            "line": line(r, alike, fallback),
            "line_of_ratio": line_of_ratio(r, alike, fallback),
            "nearest": nearest(r, alike),
        }
        truth = steady_device_peak(r)
        row = {}
        for k, reserved in reserves.items():
            e = (max(allocated, reserved) + corrections.context) / truth - 1
            errors.setdefault(k, []).append(e)
            row[k] = e
        s = r.spec
        name = f"{s.model.name} {s.precision.value} ckpt={s.checkpointing.value} cl={s.channels_last} b{s.batch_size}"
        rows.append((max(abs(e) for e in row.values()), name, row))
    print(f"# The reserve's calibration rules, leave one out: {len(measured)} specs\n")
    print("| rule | median abs | worst abs | worst under | over 10% | under -5% |")
    print("|---|---|---|---|---|---|")
    for k, v in errors.items():
        print(f"| {k} | {statistics.median(abs(x) for x in v):.1%} | {max(abs(x) for x in v):.1%} "
              f"| {min(v):+.1%} | {sum(abs(x) > 0.10 for x in v)} | {sum(x < -0.05 for x in v)} |")  # fmt: skip
    print("\n| spec (the 15 with the largest error under any rule) | " + " | ".join(errors) + " |")
    print("|---|" + "---|" * len(errors))
    for _, name, row in sorted(rows, key=lambda x: -x[0])[:15]:
        print(f"| {name} | " + " | ".join(f"{e:+.1%}" for e in row.values()) + " |")


if __name__ == "__main__":
    main()
