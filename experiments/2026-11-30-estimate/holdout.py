"""The estimate on specs it was never calibrated or tuned on (issue 4), on this CPU-only machine.

    python3 holdout.py > holdout.md

The measured side: ../2026-11-30-h200-accuracy-alone/raw/holdout.jsonl, batches between and
beyond the accuracy set's (holdout.py there); for checkpointed gpt2, the newer run in
../2026-11-30-h200-compile-ckpt/raw/trials-holdout.jsonl (no KV cache). Each is estimated without calibration, then
calibrated on the whole history accuracy.py reads (none of it at these batches).
"""

from __future__ import annotations

import json
import statistics

from accuracy import H200, HERE, trial_of, trials

from advisor.estimate import estimate, steady_device_peak

HOLDOUT = [
    HERE.parent / "2026-11-30-h200-accuracy-alone" / "raw" / "holdout.jsonl",
    HERE.parent / "2026-11-30-h200-compile-ckpt" / "raw" / "trials-holdout.jsonl",
]
GiB = 2**30


def main() -> None:
    history = trials()
    print("# The estimate on held-out specs (H200, each trial alone)\n")
    print("| spec | measured steady peak alloc GiB | calibrated | measured steady device peak "
          "GiB | estimated | calibrated |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    errors: dict[str, list[float]] = {"alloc_cal": [], "steady": [], "steady_cal": []}
    newest = {}  # each spec's newest run
    for path in HOLDOUT:
        for line in path.open():
            r = trial_of(path, json.loads(line))
            if r is not None and r.memory is not None:
                newest[r.spec.hash] = r
    for r in newest.values():
        assert r.memory is not None
        raw, cal = estimate(r.spec, H200), estimate(r.spec, H200, history)
        steady = steady_device_peak(r)
        e = {
            "alloc_cal": cal.peak_allocated_bytes / r.memory.steady_peak_allocated_bytes - 1,
            "steady": raw.device_peak_bytes / steady - 1,
            "steady_cal": cal.device_peak_bytes / steady - 1,
        }
        for k, v in e.items():
            errors[k].append(v)
        s = r.spec
        print(f"| {s.model.name} {s.precision.value} ckpt={s.checkpointing.value} "
              f"cl={s.channels_last} b{s.batch_size} "
              f"| {r.memory.steady_peak_allocated_bytes / GiB:.2f} "
              f"| {cal.peak_allocated_bytes / GiB:.2f} ({e['alloc_cal']:+.1%}) "
              f"| {steady / GiB:.2f} | {raw.device_peak_bytes / GiB:.2f} ({e['steady']:+.1%}) "
              f"| {cal.device_peak_bytes / GiB:.2f} ({e['steady_cal']:+.1%}) |")  # fmt: skip
    print("\n| error | median abs | worst abs | worst under (most negative) |")
    print("|---|---|---|---|")
    for k, v in errors.items():
        print(f"| {k} | {statistics.median(abs(x) for x in v):.1%} | "
              f"{max(abs(x) for x in v):.1%} | {min(v):+.1%} |")  # fmt: skip


if __name__ == "__main__":
    main()
