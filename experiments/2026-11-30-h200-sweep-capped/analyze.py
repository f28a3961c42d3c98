"""gpt2-48's numbers from raw/: the sweep against the grid (issue 3's a, b and c).

    python3 analyze.py > summary.txt

The grid: all 48 specs, each measured by a grid lane under the same cap as the sweep's trials
(37.26 GiB: 40 GiB x 0.95 less a 762 MiB context). 33 of them in the first device command, whose
results databases were lost (bench.py, `logged`): for those the lane logs (raw/run1-lane*.log)
give status, samples/s, device peak and trial wall time; the other 15 are in raw/grid-*.sqlite.
The sweep: raw/sweep.sqlite, sweep.json, sweep-wall.txt; the 200-step check: steps200.json.

Then resnet50-48: the sweep again with trials under the cap (raw/r50-48/) against the grid of
../2026-11-30-h200-sweep-resnet50-48 (raw/grid.jsonl: uncapped, on another H200 earlier this
day; a spec fits there when its device peak is within 24 GiB x 0.95).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from advisor.store.store import Store

RAW = Path(__file__).parent / "raw"
GiB = 2**30
ALLOWED = 40 * GiB * 0.95
LINE = re.compile(
    r"lane (\d) grid b(\d+) (\w+) (\w+) compile=(\w+) es=(\w+): (\w+) ([\d.]+)/s ([\d.]+) GiB "
    r"wall (\d+)s"
)


def key(batch, ckpt, optimizer, compiled, es) -> str:
    knobs = [f"b{batch}", ckpt, optimizer]
    knobs += ["compile"] * (str(compiled) == "True") + ["es"] * (str(es) == "True")
    return " ".join(knobs)


def of(result) -> tuple[str, dict]:
    s, t, m = result.spec, result.throughput, result.memory
    return key(s.batch_size, s.checkpointing.value, s.optimizer.name, s.compile,
               s.expandable_segments), {
        "status": result.status.value, "rate": t.samples_per_s if t else 0.0,
        "peak": m.device_peak_bytes / GiB if m else 0.0, "wall": result.wall_s,
    }  # fmt: skip


def main() -> None:
    grid: dict[str, dict] = {}
    for log in sorted(RAW.glob("run1-lane*.log")):
        for line in log.read_text().splitlines():
            m = LINE.match(line)
            if m:
                lane, b, ckpt, opt, compiled, es, status, rate, peak, wall = m.groups()
                grid[key(b, ckpt, opt, compiled, es)] = {
                    "status": status, "rate": float(rate), "peak": float(peak),
                    "wall": float(wall), "source": f"run1 lane {lane} (log)",
                }  # fmt: skip
    for lane in (0, 1):
        for r in Store(f"sqlite:///{RAW / f'grid-{lane}.sqlite'}").trials():
            k, row = of(r)
            grid[k] = {**row, "source": f"run2 lane {lane}"}
    sweep_trials = Store(f"sqlite:///{RAW / 'sweep.sqlite'}").trials()
    swept = dict(of(r) for r in sweep_trials)
    assert len(grid) == 48, len(grid)
    with (RAW / "grid.jsonl").open("w") as sink:
        for k, row in sorted(grid.items()):
            sink.write(json.dumps({"spec": k, **row}) + "\n")

    ok = {k: r for k, r in grid.items() if r["status"] == "ok" and r["peak"] <= ALLOWED / GiB}
    best_key = max(ok, key=lambda k: ok[k]["rate"])
    best = ok[best_key]
    grid_s = sum(r["wall"] for r in grid.values())
    sweep_s = sum(r.wall_s for r in sweep_trials)
    sweep = json.loads((RAW / "sweep.json").read_text())
    rec, confirmation = sweep["recommendation"], sweep["confirmation"]
    rec_key, _ = of(next(r for r in sweep_trials if r.id == rec["id"]))
    wall = float((RAW / "sweep-wall.txt").read_text())
    counts = {s: sum(r["status"] == s for r in grid.values()) for s in ("ok", "oom", "crashed")}
    print(f"grid: 48 specs under the sweep's cap, {counts['ok']} ok, {counts['oom']} oom, "
          f"{counts['crashed']} crashed; {len(ok)} fit {ALLOWED / GiB:.1f} GiB; {grid_s:.0f} "
          f"GPU-s (trial wall times)")  # fmt: skip
    print(f"grid best: {best_key} {best['rate']:.1f}/s {best['peak']:.2f} GiB ({best['source']})")
    rate = rec["throughput"]["samples_per_s"]
    print(f"(a) recommended: {rec_key} {rate:.1f}/s (the sweep's own trial) = "
          f"{rate / best['rate']:.3f} of the grid's best; the grid's own trial of the same spec "
          f"{grid[rec_key]['rate']:.1f}/s = {grid[rec_key]['rate'] / best['rate']:.3f}")  # fmt: skip
    print(f"(b) {len(sweep_trials)} of 48 specs measured ({len(sweep_trials) / 48:.1%}); "
          f"{sweep_s:.0f} GPU-s in trials = {sweep_s / grid_s:.1%} of the grid's; confirmation: "
          f"{'the recommended trial itself' if confirmation['id'] == rec['id'] else 'a run'} "
          f"(under {confirmation['spec']['memory_cap_bytes'] / GiB:.2f} GiB), no second run; "
          f"the sweep command's whole wall time {wall:.0f} s = {wall / grid_s:.1%}")  # fmt: skip
    print(f"    stopped: {sweep['sweep']['stop_reason']}")
    check = json.loads((RAW / "steps200.json").read_text())
    print(f"(c) 200 steps under the {check['spec']['memory_cap_bytes'] / GiB:.2f} GiB cap: "
          f"{check['status']}, {check['throughput']['timed_steps']} timed steps, "
          f"{check['throughput']['samples_per_s']:.1f}/s, device peak "
          f"{check['memory']['device_peak_bytes'] / GiB:.2f} GiB, allocator retries "
          f"{check['memory']['num_alloc_retries']}")  # fmt: skip

    print("\nfastest that fit (grid):")
    for k in sorted(ok, key=lambda k: -ok[k]["rate"])[:8]:
        print(f"  {k:36} {ok[k]['rate']:6.1f}/s {ok[k]['peak']:6.2f} GiB  ({ok[k]['source']})")
    print("\nthe sweep's trials against the grid's of the same spec:")
    for k, row in swept.items():
        g = grid[k]
        ratio = f"{row['rate'] / g['rate'] - 1:+.1%}" if g["rate"] and row["rate"] else "-"
        print(f"  {k:36} sweep {row['status']:7} {row['rate']:6.1f}/s {row['peak']:6.2f} GiB "
              f"{row['wall']:4.0f}s | grid {g['status']:7} {g['rate']:6.1f}/s {g['wall']:4.0f}s "
              f"{ratio}")  # fmt: skip
    print("\ncompile on against off (same other knobs), where both ran:")
    for k in sorted(grid):
        if " compile" not in k:
            continue
        on, off = grid[k], grid[k.replace(" compile", "")]
        if on["status"] == off["status"] == "ok":
            print(f"  {k.replace(' compile', ''):30} {on['rate'] / off['rate'] - 1:+6.1%}  "
                  f"{off['peak']:6.2f} -> {on['peak']:6.2f} GiB")  # fmt: skip
        else:
            print(
                f"  {k.replace(' compile', ''):30} eager {off['status']}, compiled {on['status']}"
            )


def resnet50_48() -> None:
    home = RAW / "r50-48"
    allowed = 24 * GiB * 0.95
    earlier = RAW.parent.parent / "2026-11-30-h200-sweep-resnet50-48" / "raw" / "grid.jsonl"
    grid = [json.loads(line) for line in earlier.open()]
    fits = [g for g in grid if g["status"] == "ok" and g["memory"]["device_peak_bytes"] <= allowed]
    best = max(fits, key=lambda g: g["throughput"]["samples_per_s"])
    grid_s = sum(g["wall_s"] for g in grid)
    trials = Store(f"sqlite:///{home / 'sweep.sqlite'}").trials()
    sweep = json.loads((home / "sweep.json").read_text())
    rec, confirmation = sweep["recommendation"], sweep["confirmation"]
    sweep_s = sum(r.wall_s for r in trials)
    wall = float((home / "sweep-wall.txt").read_text())

    def name(s: dict) -> str:
        knobs = [f"b{s['batch_size']}", s["precision"], f"ckpt={s['checkpointing']}"]
        return " ".join(knobs + [k for k in ("channels_last", "expandable_segments") if s[k]])

    rate, top = rec["throughput"]["samples_per_s"], best["throughput"]["samples_per_s"]
    print("\nresnet50-48, 24 GiB, the sweep again with its trials under the 22.06 GiB cap:")
    print(f"grid (uncapped, earlier): {len(grid)} specs, {len(fits)} fit, {grid_s:.0f} GPU-s; "
          f"best {name(best['spec'])} {top:.0f}/s")  # fmt: skip
    print(f"(a) recommended: {name(rec['spec'])} {rate:.0f}/s under the cap (device peak "
          f"{rec['memory']['device_peak_bytes'] / GiB:.2f} GiB, allocator retries "
          f"{rec['memory']['num_alloc_retries']}) = {rate / top:.3f} of the grid's best")  # fmt: skip
    print(f"(b) {len(trials)} of 48 specs ({len(trials) / 48:.1%}); {sweep_s:.0f} GPU-s in trials "
          f"= {sweep_s / grid_s:.1%} of the grid's; confirmation: "
          f"{'the recommended trial itself' if confirmation['id'] == rec['id'] else 'a run'}, "
          f"no second run; the sweep command's whole wall time {wall:.0f} s = "
          f"{wall / grid_s:.1%}")  # fmt: skip
    print(f"    stopped: {sweep['sweep']['stop_reason']}")
    check = json.loads((home / "steps200.json").read_text())
    print(f"(c) 200 steps under the cap: {check['status']}, "
          f"{check['throughput']['timed_steps']} timed steps, "
          f"{check['throughput']['samples_per_s']:.0f}/s, device peak "
          f"{check['memory']['device_peak_bytes'] / GiB:.2f} GiB, allocator retries "
          f"{check['memory']['num_alloc_retries']}")  # fmt: skip
    by_hash = {g["spec"]["hash"]: g for g in grid}
    print("the sweep's trials against the grid's (uncapped) of the same setting:")
    for r in trials:
        s, g = r.spec.uncapped.to_dict(), by_hash.get(r.spec.uncapped.hash)
        here = r.throughput.samples_per_s if r.throughput else 0.0
        peak = r.memory.device_peak_bytes / GiB if r.memory else 0.0
        there = g["throughput"]["samples_per_s"] if g and g["throughput"] else 0.0
        gpeak = g["memory"]["device_peak_bytes"] / GiB if g and g["memory"] else 0.0
        print(f"  {name(s):50} {here:6.0f}/s {peak:6.2f} GiB | grid {there:6.0f}/s "
              f"{gpeak:6.2f} GiB")  # fmt: skip


if __name__ == "__main__":
    main()
    resnet50_48()
