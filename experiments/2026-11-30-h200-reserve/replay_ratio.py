"""Per measured spec: its steady reserve against the fake step replayed through the allocator
model (ratio) and against its own peak allocated (factor). The estimate keeps, per spec, the
one that its alike trials spread less (advisor/estimate.py, _replay_ratio).

    python3 replay_ratio.py MODEL > replay_ratio-MODEL.txt

Every uncapped spec the H200 measured, as ../2026-11-30-estimate/wider.py gathers them (each
spec once, the medians of its runs). The replay here is scaled so its peak allocated is the
measured one, to isolate the reserve.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "2026-11-30-estimate"))
from wider import median_runs  # noqa: E402

from advisor.fake_step import fake_step, replayed_reserved  # noqa: E402

GiB = 2**30


def main() -> None:
    model = sys.argv[1]
    ratios, factors = [], []
    for t, runs in sorted(median_runs(), key=lambda x: str(x[0].spec.to_dict())):
        s, m = t.spec, t.memory
        if s.model.name != model or m is None or s.expandable_segments:
            continue
        step = fake_step(s)
        scale = m.steady_peak_allocated_bytes / step.peak_allocated_bytes
        replayed = replayed_reserved(step, scale=scale)
        ratio = m.steady_peak_reserved_bytes / replayed
        factor = m.steady_peak_reserved_bytes / m.steady_peak_allocated_bytes
        ratios.append(ratio)
        factors.append(factor)
        print(f"{s.precision.value} ckpt={s.checkpointing.value} cl={s.channels_last} "
              f"{s.optimizer.name} x{s.grad_accum} b{s.batch_size}: allocated "
              f"{m.steady_peak_allocated_bytes / GiB:.2f} reserved "
              f"{m.steady_peak_reserved_bytes / GiB:.2f} replayed {replayed / GiB:.2f} GiB; "
              f"ratio {ratio:.3f}, factor {factor:.3f} ({runs} runs)")  # fmt: skip
    print(f"\n{model}: {len(ratios)} specs without expandable segments; ratio median "
          f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}), factor median "
          f"{statistics.median(factors):.3f} ({min(factors):.3f}-{max(factors):.3f})")  # fmt: skip


if __name__ == "__main__":
    main()
