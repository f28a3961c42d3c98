"""`advisor sweep` against an exhaustive grid on the H200 (issue 3): resnet50, 24 GiB budget,
over a space of 48 specs that adds expandable_segments to the first benchmark's 24.

    python3 bench.py WORK_DIR [DEADLINE_S]

Space (48 specs): resnet50, AdamW (foreach), micro batch {128, 256, 512} x precision {bf16,
fp16} x checkpointing {none, blocks} x channels_last {false, true} x expandable_segments {false,
true}; grad_accum 1, compile off (so no compile cache is involved); effective batch free.

1. The sweep, through the real command with the default budget and patience (trials=40,
   patience=6), into its own results database (WORK/advisor.sqlite).
2. The grid: every spec of the space the sweep did not measure, each in its own worker, one at
   a time, into the same database. A spec the sweep measured is not measured again: the grid
   counts that measurement and its wall time.
3. The recommended spec for 200 timed steps under the budget's cap (24 GiB x 0.95 less the
   CUDA context), as a user's long run would hold it.

Resumable, for the device's 10-minute commands: each step is skipped when its output exists,
and no new grid trial starts after DEADLINE_S seconds. WORK/grid.jsonl has all 48 grid results,
WORK/sweep.json the sweep's --json, WORK/steps200.json the long run.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from advisor.config import MeasureConfig, load, trial_spec
from advisor.runner import run_trial
from advisor.store.store import Store

GiB = 2**30
SPACE = [
    "model=resnet50",
    "device=cuda",
    "gpu.memory=24GiB",
    "space.batch_sizes=[128,256,512]",
    "space.precision=[bf16,fp16]",
    "space.checkpointing=[none,blocks]",
    "space.channels_last=[false,true]",
    "space.grad_accum=[1]",
    "space.optimizers=[adamw]",
    "space.compile=[false]",
    "space.expandable_segments=[false,true]",
]


def grid_overrides():
    axes = itertools.product(
        (128, 256, 512), ("bf16", "fp16"), ("none", "blocks"), (False, True), (False, True)
    )
    for batch, precision, ckpt, cl, expandable in axes:
        yield [
            "model=resnet50", "device=cuda", f"batch_size={batch}", f"precision={precision}",
            f"checkpointing={ckpt}", f"channels_last={cl}", f"expandable_segments={expandable}",
        ]  # fmt: skip


def main() -> None:
    started = time.perf_counter()
    work = Path(sys.argv[1])
    deadline = float(sys.argv[2]) if len(sys.argv) > 2 else float("inf")
    work.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{work / 'advisor.sqlite'}"
    env = {**os.environ, "ADVISOR_DB_URL": url,
           "ADVISOR_STUDY_DB_URL": f"sqlite:///{work / 'optuna.sqlite'}"}  # fmt: skip
    if not (work / "sweep.json").exists():
        sweep = subprocess.run(
            [sys.executable, "-m", "advisor", "sweep", *SPACE, f"plot={work / 'sweep.png'}",
             "--json"],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        (work / "sweep.log").write_text(sweep.stderr)
        print(sweep.stderr[-5000:], flush=True)
        wall = time.perf_counter() - started
        print(f"sweep wall {wall:.0f}s rc={sweep.returncode}", flush=True)
        (work / "sweep-wall.txt").write_text(f"{wall:.1f}\n")
        (work / "sweep.json").write_text(sweep.stdout)

    store = Store(url)
    measured = {r.spec.hash: r for r in store.trials()}
    sweep_hashes = {r.spec.hash for r, _ in store.sweep_trials(1)}
    rows = []
    for overrides in grid_overrides():
        spec = trial_spec(load(overrides))
        result = measured.get(spec.hash)
        if result is None:
            if time.perf_counter() - started > deadline:
                print("deadline: the grid goes on in the next command", flush=True)
                return
            result = store.add(run_trial(spec, MeasureConfig(), 600))
            t, m = result.throughput, result.memory
            print(
                f"grid b{spec.batch_size} {spec.precision.value} {spec.checkpointing.value} "
                f"cl={spec.channels_last} es={spec.expandable_segments}: {result.status.value} "
                f"{t.samples_per_s if t else 0:.0f}/s {m.device_peak_bytes / GiB if m else 0:.2f}"
                f" GiB wall {result.wall_s:.0f}s",
                flush=True,
            )
        source = "sweep" if spec.hash in sweep_hashes else "grid"
        rows.append(json.dumps({"source": source, **result.to_dict()}))
    (work / "grid.jsonl").write_text("\n".join(rows) + "\n")

    sweep_out = json.loads((work / "sweep.json").read_text() or "{}")
    best = sweep_out.get("recommendation")
    if best is None or (work / "steps200.json").exists():
        return
    spec = next(r.spec for r in store.trials() if r.spec.hash == best["spec"]["hash"])
    cap = int(24 * GiB * 0.95) - best["memory"]["context_bytes"]
    long = MeasureConfig(min_timed_steps=200, max_timed_steps=200, max_timed_s=600)
    check = store.add(run_trial(dataclasses.replace(spec, memory_cap_bytes=cap), long, 600))
    (work / "steps200.json").write_text(json.dumps(check.to_dict(), indent=1))
    t = check.throughput
    print(f"200 steps under {cap / GiB:.2f} GiB: {check.status.value}, "
          f"{t.timed_steps if t else 0} timed steps", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
