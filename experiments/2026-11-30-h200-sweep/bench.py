"""A first, reduced benchmark of `advisor sweep` against an exhaustive grid on the H200 (issue 3).

    python3 bench.py OUT_DIR

resnet50, 24 GiB budget (5% margin), AdamW (foreach), effective batch free, over a space of 24
specs: micro batch {128, 256, 512} x precision {bf16, fp16} x checkpointing {none, blocks} x
channels_last {false, true}; grad_accum 1, compile off, expandable_segments off. torch.compile
is not in this space, so no compile cache is involved. The sweep runs first, through the real
command, with its own results database; then every spec of the grid, each in its own worker,
into another; then the recommended spec runs 200 timed steps under the 24 GiB cap.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

from advisor.config import MeasureConfig, load, trial_spec
from advisor.runner import run_trial
from advisor.store.store import Store

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
    "space.expandable_segments=[false]",
]


def main() -> None:
    out = Path(sys.argv[1])
    env = {
        "ADVISOR_DB_URL": f"sqlite:///{out / 'sweep.sqlite'}",
        "ADVISOR_STUDY_DB_URL": f"sqlite:///{out / 'optuna.sqlite'}",
    }
    started = time.perf_counter()
    sweep = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisor",
            "sweep",
            *SPACE,
            "trials=12",
            "patience=4",
            f"plot={out / 'sweep.png'}",
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, **env},
    )
    sweep_wall = time.perf_counter() - started
    (out / "sweep.json").write_text(sweep.stdout)
    print(sweep.stderr[-6000:], flush=True)
    print(f"sweep wall {sweep_wall:.0f}s rc={sweep.returncode}", flush=True)

    grid_store = Store(f"sqlite:///{out / 'grid.sqlite'}")
    lines = (out / "grid.jsonl").open("w")
    axes = itertools.product(
        ("128", "256", "512"), ("bf16", "fp16"), ("none", "blocks"), ("false", "true")
    )
    for batch, precision, ckpt, cl in axes:
        cfg = load(
            [
                "model=resnet50",
                "device=cuda",
                f"batch_size={batch}",
                f"precision={precision}",
                f"checkpointing={ckpt}",
                f"channels_last={cl}",
            ]
        )
        result = grid_store.add(run_trial(trial_spec(cfg), MeasureConfig(), 300))
        lines.write(json.dumps(result.to_dict()) + "\n")
        lines.flush()
        t = result.throughput
        print(
            f"grid b{batch} {precision} {ckpt} cl={cl}: {result.status.value} "
            f"{t.samples_per_s if t else 0:.0f}/s peak "
            f"{result.memory.device_peak_bytes / 2**30 if result.memory else 0:.2f} GiB "
            f"wall {result.wall_s:.0f}s",
            flush=True,
        )

    if sweep.returncode != 0:
        return
    best = json.loads(sweep.stdout)["recommendation"]
    spec, context = best["spec"], best["memory"]["context_bytes"]
    cap = int(24 * 2**30 * 0.95) - context
    check = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisor",
            "run",
            "model=resnet50",
            "device=cuda",
            f"batch_size={spec['batch_size']}",
            f"precision={spec['precision']}",
            f"checkpointing={spec['checkpointing']}",
            f"channels_last={spec['channels_last']}",
            f"memory_cap={cap}",
            "measure.min_timed_steps=200",
            "measure.max_timed_steps=200",
            "measure.max_timed_s=600",
            "measure.target_spread=0",
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, **env},
    )
    (out / "check200.json").write_text(check.stdout)
    print(check.stderr[-2000:], flush=True)


if __name__ == "__main__":
    main()
