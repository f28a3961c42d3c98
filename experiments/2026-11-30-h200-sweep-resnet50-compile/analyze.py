"""The benchmark's numbers from raw/: the sweep against the grid (issue 3's a, b and c).

python3 analyze.py > summary.txt   (also writes raw/grid.jsonl, the assembled grid)

The grid: for each of the 48 specs, the grid lanes' measurement (raw/grid-0.sqlite,
raw/grid-1.sqlite), or the sweep's (raw/sweep.sqlite) where no lane measured it (bench.py).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from advisor.store.store import Store

RAW = Path(__file__).parent / "raw"
GiB = 2**30
ALLOWED = 24 * GiB * 0.95  # the budget less its 5% margin


def describe(spec) -> str:
    knobs = [f"b{spec.batch_size}", spec.precision.value]
    knobs += [k for k in ("channels_last", "compile", "expandable_segments") if getattr(spec, k)]
    return " ".join(knobs)


def trials(name: str) -> list:
    return [r for r in Store(f"sqlite:///{RAW / name}").trials() if r.spec.memory_cap_bytes is None]


def main() -> None:
    sweep_trials = trials("sweep.sqlite")
    lanes = {"grid-0": trials("grid-0.sqlite"), "grid-1": trials("grid-1.sqlite")}
    grid = {r.spec.hash: (r, lane) for lane, rows in lanes.items() for r in rows}
    swept = {r.spec.hash: r for r in sweep_trials}
    for h, r in swept.items():
        grid.setdefault(h, (r, "sweep"))
    rows = list(grid.values())
    with (RAW / "grid.jsonl").open("w") as sink:  # for ../2026-11-30-h200-sweep/replay.py
        for r, source in rows:
            sink.write(json.dumps({"source": source, **r.to_dict()}) + "\n")
    sweep = json.loads((RAW / "sweep.json").read_text())

    def fits(r) -> bool:
        return r.status.value == "ok" and r.memory.device_peak_bytes <= ALLOWED

    ok = [r for r, _ in rows if fits(r)]
    best = max(ok, key=lambda r: r.throughput.samples_per_s)
    grid_s = sum(r.wall_s for r, _ in rows)
    sweep_s = sum(r.wall_s for r in sweep_trials)
    rec, confirmation = sweep["recommendation"], sweep["confirmation"]
    rec_rate = rec["throughput"]["samples_per_s"]
    wall = float((RAW / "sweep-wall.txt").read_text())
    print(f"grid: {len(rows)} specs, {len(ok)} fit {ALLOWED / GiB:.1f} GiB, {grid_s:.0f} GPU-s "
          f"(trial wall times; {sum(1 for _, s in rows if s == 'sweep')} specs only the sweep "
          "measured, counted with the sweep's wall time)")  # fmt: skip
    print(f"grid best: {describe(best.spec)} {best.throughput.samples_per_s:.0f}/s "
          f"{best.memory.device_peak_bytes / GiB:.2f} GiB")  # fmt: skip
    print(f"(a) recommended: b{rec['spec']['batch_size']} {rec['spec']['precision']} "
          f"cl={rec['spec']['channels_last']} compile={rec['spec']['compile']} "
          f"es={rec['spec']['expandable_segments']} {rec_rate:.0f}/s = "
          f"{rec_rate / best.throughput.samples_per_s:.3f} of the grid's best")  # fmt: skip
    print(f"(b) {len(sweep_trials)} of {len(rows)} specs measured "
          f"({len(sweep_trials) / len(rows):.1%}); {sweep_s:.0f} GPU-s in trials = "
          f"{sweep_s / grid_s:.1%} of the grid's; with the confirmation under the cap "
          f"({confirmation['wall_s']:.0f} s, {confirmation['status']}): "
          f"{(sweep_s + confirmation['wall_s']) / grid_s:.1%}; the sweep command's whole wall "
          f"time {wall:.0f} s = {wall / grid_s:.1%}")  # fmt: skip
    print(f"    stopped: {sweep['sweep']['stop_reason']}")
    check = json.loads((RAW / "steps200.json").read_text())
    print(f"(c) 200 steps under a {check['spec']['memory_cap_bytes'] / GiB:.2f} GiB cap: "
          f"{check['status']}, {check['throughput']['timed_steps']} timed steps, device peak "
          f"{check['memory']['device_peak_bytes'] / GiB:.2f} GiB")  # fmt: skip

    print("\nfastest that fit:")
    for r in sorted(ok, key=lambda r: -r.throughput.samples_per_s)[:8]:
        source = grid[r.spec.hash][1]
        print(f"  {describe(r.spec):48} {r.throughput.samples_per_s:6.0f}/s "
              f"{r.memory.device_peak_bytes / GiB:6.2f} GiB  ({source})")  # fmt: skip

    print("\nspecs both the sweep and a lane measured (sweep ran beside lane 1):")
    twice = [(r, *grid[h]) for h, r in swept.items() if grid[h][1] != "sweep"]
    if not twice:
        print("  none")
    for r, other, lane in twice:
        print(f"  {describe(r.spec):48} sweep {r.throughput.samples_per_s:6.0f}/s, {lane} "
                  f"{other.throughput.samples_per_s:6.0f}/s "
                  f"({other.throughput.samples_per_s / r.throughput.samples_per_s - 1:+.1%})")  # fmt: skip

    print("\ncompile on against off (same other knobs): samples/s, device peak, trial wall")
    by = {describe(r.spec): r for r, _ in rows}
    for r, _ in sorted(rows, key=lambda x: describe(x[0].spec)):
        if not r.spec.compile:
            continue
        off = by[describe(r.spec).replace(" compile", "")]
        print(f"  {describe(off.spec):42} {r.throughput.samples_per_s / off.throughput.samples_per_s - 1:+6.1%} "
              f"{off.memory.device_peak_bytes / GiB:6.2f} -> {r.memory.device_peak_bytes / GiB:6.2f} GiB "
              f"{off.wall_s:4.0f} -> {r.wall_s:4.0f} s")  # fmt: skip
    compiled = [r.wall_s for r, _ in rows if r.spec.compile]
    eager = [r.wall_s for r, _ in rows if not r.spec.compile]
    print(f"  trial wall, median: eager {statistics.median(eager):.0f} s, compiled "
          f"{statistics.median(compiled):.0f} s (each cache grows as its lane or sweep goes)")  # fmt: skip
    earlier = {}
    for line in (RAW.parent.parent / "2026-11-30-h200-sweep-resnet50-48/raw/grid.jsonl").open():
        row = json.loads(line)
        earlier[row["spec"]["hash"]] = row
    ratios = [r.throughput.samples_per_s / earlier[r.spec.hash]["throughput"]["samples_per_s"]
              for r, _ in rows if r.spec.hash in earlier]  # fmt: skip
    print(f"\nthe {len(ratios)} eager specs also in the 48-spec grid (another H200, earlier this "
          f"day): samples/s here against there, median {statistics.median(ratios) - 1:+.1%}, "
          f"{min(ratios) - 1:+.1%} to {max(ratios) - 1:+.1%}")  # fmt: skip
    contexts = {lane: statistics.median(r.memory.context_bytes / GiB for r in rs if r.memory)
                for lane, rs in lanes.items()}  # fmt: skip
    print("\nCUDA context, median per lane (NVML through CUDA_VISIBLE_DEVICES): "
          + ", ".join(f"{k} {v:.2f} GiB" for k, v in contexts.items()))  # fmt: skip


if __name__ == "__main__":
    main()
