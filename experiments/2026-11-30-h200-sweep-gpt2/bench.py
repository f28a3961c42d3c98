"""`advisor sweep` against an exhaustive grid on the H200 (issue 3): gpt2, 40 GiB budget.

    python3 bench.py OUT_DIR

Space (24 specs): gpt2 (seq 1024), bf16, micro batch {8, 16, 32} x grad_accum {1, 2} x
checkpointing {none, blocks} x optimizer {adamw (foreach), adamw_fused}; compile off (so no
compile cache is involved), expandable_segments off; effective batch free.

1. The sweep, through the real command with the default budget and patience (trials=40,
   patience=6), into its own results database (OUT/advisor.sqlite).
2. The grid: every spec of the space the sweep did not measure, each in its own worker, one at
   a time, into the same database. A spec the sweep measured is not measured again: the grid
   counts that measurement and its wall time (this is what the sweep itself does with history).
3. The recommended spec for 200 timed steps under the budget's cap (40 GiB x 0.95 less the
   CUDA context), as a user's long run would hold it.

OUT/grid.jsonl has all 24 grid results; OUT/sweep.json the sweep's --json; OUT/steps200.json.
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
    "model=gpt2",
    "device=cuda",
    "gpu.memory=40GiB",
    "space.batch_sizes=[8,16,32]",
    "space.grad_accum=[1,2]",
    "space.checkpointing=[none,blocks]",
    "space.optimizers=[adamw,adamw_fused]",
    "space.precision=[bf16]",
    "space.channels_last=[false]",
    "space.compile=[false]",
    "space.expandable_segments=[false]",
]


def grid_overrides():
    axes = itertools.product((8, 16, 32), (1, 2), ("none", "blocks"), ("adamw", "adamw_fused"))
    for batch, accum, ckpt, optimizer in axes:
        yield [
            "model=gpt2", "device=cuda", "precision=bf16", f"batch_size={batch}",
            f"grad_accum={accum}", f"checkpointing={ckpt}", f"optimizer={optimizer}",
        ]  # fmt: skip


def main() -> None:
    out = Path(sys.argv[1])
    url = f"sqlite:///{out / 'advisor.sqlite'}"
    env = {**os.environ, "ADVISOR_DB_URL": url,
           "ADVISOR_STUDY_DB_URL": f"sqlite:///{out / 'optuna.sqlite'}"}  # fmt: skip
    started = time.perf_counter()
    sweep = subprocess.run(
        [sys.executable, "-m", "advisor", "sweep", *SPACE, f"plot={out / 'sweep.png'}", "--json"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    (out / "sweep.json").write_text(sweep.stdout)
    (out / "sweep.log").write_text(sweep.stderr)
    print(sweep.stderr[-5000:], flush=True)
    print(f"sweep wall {time.perf_counter() - started:.0f}s rc={sweep.returncode}", flush=True)

    store = Store(url)
    measured = {r.spec.hash: r for r in store.trials()}
    with (out / "grid.jsonl").open("w") as lines:
        for overrides in grid_overrides():
            spec = trial_spec(load(overrides))
            result = measured.get(spec.hash)
            source = "sweep"
            if result is None:
                result, source = store.add(run_trial(spec, MeasureConfig(), 600)), "grid"
            lines.write(json.dumps({"source": source, **result.to_dict()}) + "\n")
            lines.flush()
            t, m = result.throughput, result.memory
            print(
                f"{source:5} b{spec.batch_size} x{spec.grad_accum} {spec.checkpointing.value} "
                f"{spec.optimizer.name}: {result.status.value} "
                f"{t.samples_per_s if t else 0:.1f}/s {m.device_peak_bytes / GiB if m else 0:.2f}"
                f" GiB wall {result.wall_s:.0f}s",
                flush=True,
            )

    if sweep.returncode != 0:
        return
    best = json.loads(sweep.stdout)["recommendation"]
    spec = next(r.spec for r in measured.values() if r.spec.hash == best["spec"]["hash"])
    cap = int(40 * GiB * 0.95) - best["memory"]["context_bytes"]
    long = MeasureConfig(min_timed_steps=200, max_timed_steps=200, max_timed_s=600)
    check = store.add(run_trial(dataclasses.replace(spec, memory_cap_bytes=cap), long, 600))
    (out / "steps200.json").write_text(json.dumps(check.to_dict(), indent=1))
    t = check.throughput
    print(f"200 steps under {cap / GiB:.2f} GiB: {check.status.value}, "
          f"{t.timed_steps if t else 0} timed steps", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
