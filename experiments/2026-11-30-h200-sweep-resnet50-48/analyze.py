"""The benchmark's numbers from raw/: the sweep against the grid (issue 3's a, b and c).

python3 analyze.py > summary.txt
"""

from __future__ import annotations

import json
from pathlib import Path

RAW = Path(__file__).parent / "raw"
GiB = 2**30
ALLOWED = 24 * GiB * 0.95  # the budget less its 5% margin


def describe(spec: dict) -> str:
    knobs = [f"b{spec['batch_size']}", spec["precision"], f"ckpt={spec['checkpointing']}"]
    knobs += [k for k in ("channels_last", "expandable_segments") if spec[k]]
    return " ".join(knobs)


def main() -> None:
    rows = [json.loads(line) for line in (RAW / "grid.jsonl").open()]
    sweep = json.loads((RAW / "sweep.json").read_text())
    fits = [r for r in rows if r["status"] == "ok" and r["memory"]["device_peak_bytes"] <= ALLOWED]
    best = max(fits, key=lambda r: r["throughput"]["samples_per_s"])
    grid_s = sum(r["wall_s"] for r in rows)
    swept = [r for r in rows if r["source"] == "sweep"]
    swept_s = sum(r["wall_s"] for r in swept)
    rec, confirmation = sweep["recommendation"], sweep["confirmation"]
    wall = float((RAW / "sweep-wall.txt").read_text())
    print(f"grid: {len(rows)} specs, {len(fits)} fit {ALLOWED / GiB:.1f} GiB, {grid_s:.0f} GPU-s "
          "(trial wall times; the sweep's own trials counted once)")  # fmt: skip
    print(f"grid best: {describe(best['spec'])} {best['throughput']['samples_per_s']:.0f}/s")
    print(f"(a) recommended: {describe(rec['spec'])} {rec['throughput']['samples_per_s']:.0f}/s = "
          f"{rec['throughput']['samples_per_s'] / best['throughput']['samples_per_s']:.3f} "
          "of the grid's best")  # fmt: skip
    print(f"(b) {len(swept)} of {len(rows)} specs measured ({len(swept) / len(rows):.1%}); "
          f"{swept_s:.0f} GPU-s in trials = {swept_s / grid_s:.1%} of the grid's; with the "
          f"confirmation under the cap ({confirmation['wall_s']:.0f} s, {confirmation['status']}): "
          f"{(swept_s + confirmation['wall_s']) / grid_s:.1%}; the sweep command's whole wall "
          f"time {wall:.0f} s = {wall / grid_s:.1%}")  # fmt: skip
    print(f"    stopped: {sweep['sweep']['stop_reason']}")
    check = json.loads((RAW / "steps200.json").read_text())
    print(f"(c) 200 steps under a {check['spec']['memory_cap_bytes'] / GiB:.2f} GiB cap: "
          f"{check['status']}, {check['throughput']['timed_steps']} timed steps, device peak "
          f"{check['memory']['device_peak_bytes'] / GiB:.2f} GiB")  # fmt: skip
    print("\nfastest that fit, grid order:")
    for r in sorted(fits, key=lambda r: -r["throughput"]["samples_per_s"])[:6]:
        print(f"  {describe(r['spec']):45} {r['throughput']['samples_per_s']:6.0f}/s "
              f"{r['memory']['device_peak_bytes'] / GiB:6.2f} GiB  ({r['source']})")  # fmt: skip
    print("\nexpandable_segments on against off (same other knobs; device peak, samples/s):")
    by = {describe({**r["spec"], "expandable_segments": False}): r for r in rows
          if not r["spec"]["expandable_segments"]}  # fmt: skip
    for r in rows:
        if r["spec"]["expandable_segments"]:
            off = by[describe({**r["spec"], "expandable_segments": False})]
            print(f"  {describe(off['spec']):32} {off['memory']['device_peak_bytes'] / GiB:6.2f} -> "
                  f"{r['memory']['device_peak_bytes'] / GiB:6.2f} GiB, "
                  f"{r['throughput']['samples_per_s'] / off['throughput']['samples_per_s'] - 1:+.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
