"""live2.sh's sweep (raw/live2) against the grid recorded in the earlier session (raw/grid.jsonl).

python3 live2.py > live2.txt
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from advisor.store.store import Store

HERE = Path(__file__).parent
ALLOWED = 40 * 2**30 * 0.95


def main() -> None:
    grid = {d["spec"]["hash"]: d for d in map(json.loads, (HERE / "raw" / "grid.jsonl").open())}
    fits = [d for d in grid.values()
            if d["status"] == "ok" and d["memory"]["device_peak_bytes"] <= ALLOWED]  # fmt: skip
    best = max(fits, key=lambda d: d["throughput"]["samples_per_s"])
    grid_s = sum(d["wall_s"] for d in grid.values())
    run = HERE / sys.argv[1]
    used = Store(f"sqlite:///{run / 'advisor.sqlite'}").sweep_trials(1)
    trials = [r for r, _ in used if r.spec.memory_cap_bytes is None]
    confirmations = [r for r, _ in used if r.spec.memory_cap_bytes is not None]
    rec = json.loads((run / "sweep.json").read_text())["recommendation"]
    rate = rec["throughput"]["samples_per_s"]
    trial_s = sum(r.wall_s for r in trials)
    confirm_s = sum(r.wall_s for r in confirmations)
    print(f"grid (earlier session): {len(grid)} specs, best {best['throughput']['samples_per_s']:.1f}/s, "
          f"{grid_s:.0f} GPU-s")  # fmt: skip
    print(f"recommended: {rec['spec']['batch_size']} x{rec['spec']['grad_accum']} "
          f"{rec['spec']['optimizer']} ckpt={rec['spec']['checkpointing']}: {rate:.1f}/s = "
          f"{rate / best['throughput']['samples_per_s']:.3f} of the grid's best")  # fmt: skip
    print(f"measured {len(trials)} of {len(grid)} specs; {trial_s:.0f} GPU-s = "
          f"{trial_s / grid_s:.1%} of the grid's; with the confirmation "
          f"({', '.join(r.status.value for r in confirmations)}, {confirm_s:.0f} s): "
          f"{(trial_s + confirm_s) / grid_s:.1%}")  # fmt: skip
    print("\nthe same specs in both sessions (samples/s):")
    for r in trials:
        d = grid[r.spec.hash]
        assert r.throughput is not None and r.memory is not None
        print(f"  b{r.spec.batch_size} x{r.spec.grad_accum} {r.spec.optimizer.name:11} "
              f"{r.spec.checkpointing.value:6} {d['throughput']['samples_per_s']:6.1f} -> "
              f"{r.throughput.samples_per_s:6.1f} "
              f"({r.throughput.samples_per_s / d['throughput']['samples_per_s'] - 1:+.1%})")  # fmt: skip


if __name__ == "__main__":
    main()
