"""`advisor sweep` against an exhaustive grid on the H200 (issue 3): resnet50, 24 GiB budget,
over a space of 48 specs with torch.compile in it, on a host of two H200s (one lane per GPU).

    CUDA_VISIBLE_DEVICES=N python3 bench.py WORK LANE [DEADLINE_S]

Space (48 specs): resnet50, AdamW (foreach), micro batch {128, 256, 512} x precision {bf16,
fp16} x channels_last {false, true} x expandable_segments {false, true} x compile {false, true};
checkpointing none, grad_accum 1; effective batch free.

Compile cache: cold for both. The sweep starts from an empty inductor cache of its own, and so
does each grid lane; each keeps its cache as it goes, as a user's machine would, so a spec whose
graph was compiled before (its expandable_segments twin) starts warm in either. The grid takes
the twins of a pair one after the other in one lane, so it gets every warm start it can. Both
compile with 16 threads, a single H200 machine's default (this host has 32 cores for 2 GPUs).

Lane 0: the sweep, through the real command with the default budget and stop rule, into its own
results database (WORK/sweep.sqlite); then the recommended spec for 200 timed steps under the
budget's cap (the sweep's cache, warm, as a user's long run after a sweep); then grid work.
Lane 1: grid work from the start. Grid work: each lane claims the next pair of expandable_segments
twins (an atomic mkdir under WORK/claims) and measures both into its own database
(WORK/grid-LANE.sqlite), skipping a spec the finished sweep measured (the grid counts the sweep's
measurement and wall time for it, as before). A spec lane 1 measured while the sweep also did
stays measured twice: the grid keeps its own. No new trial starts after DEADLINE_S seconds;
running the command again goes on where it stopped. analyze.py assembles the grid.
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
    "space.checkpointing=[none]",
    "space.channels_last=[false,true]",
    "space.grad_accum=[1]",
    "space.optimizers=[adamw]",
    "space.compile=[false,true]",
    "space.expandable_segments=[false,true]",
]
COMPILE_THREADS = "16"


def twin_pairs():
    """The grid's units of work, compiled first (the longest), twins adjacent."""
    for compiled, batch, precision, cl in itertools.product(
        (True, False), (128, 256, 512), ("bf16", "fp16"), (False, True)
    ):
        yield [
            ["model=resnet50", "device=cuda", f"batch_size={batch}", f"precision={precision}",
             f"channels_last={cl}", f"compile={compiled}", f"expandable_segments={es}"]
            for es in (False, True)
        ]  # fmt: skip


def caching_env(cache: Path) -> dict[str, str]:
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache), "TORCHINDUCTOR_COMPILE_THREADS": COMPILE_THREADS}


def run_sweep(work: Path) -> None:
    started = time.perf_counter()
    env = {**os.environ, **caching_env(work / "inductor-sweep"),
           "ADVISOR_DB_URL": f"sqlite:///{work / 'sweep.sqlite'}",
           "ADVISOR_STUDY_DB_URL": f"sqlite:///{work / 'optuna.sqlite'}"}  # fmt: skip
    sweep = subprocess.run(
        [sys.executable, "-m", "advisor", "sweep", *SPACE, f"plot={work / 'sweep.png'}", "--json"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    (work / "sweep.log").write_text(sweep.stderr)
    print(sweep.stderr[-4000:], flush=True)
    wall = time.perf_counter() - started
    print(f"sweep wall {wall:.0f}s rc={sweep.returncode}", flush=True)
    (work / "sweep-wall.txt").write_text(f"{wall:.1f}\n")
    (work / "sweep.json").write_text(sweep.stdout)


def run_long_check(work: Path) -> None:
    """The recommended spec for 200 timed steps under the budget's cap."""
    best = json.loads((work / "sweep.json").read_text() or "{}").get("recommendation")
    if best is None:
        return
    store = Store(f"sqlite:///{work / 'sweep.sqlite'}")
    spec = next(r.spec for r in store.trials() if r.spec.hash == best["spec"]["hash"])
    cap = int(24 * GiB * 0.95) - best["memory"]["context_bytes"]
    long = MeasureConfig(min_timed_steps=200, max_timed_steps=200, max_timed_s=600)
    os.environ.update(caching_env(work / "inductor-sweep"))
    check = store.add(run_trial(dataclasses.replace(spec, memory_cap_bytes=cap), long, 900))
    (work / "steps200.json").write_text(json.dumps(check.to_dict(), indent=1))
    t = check.throughput
    print(f"200 steps under {cap / GiB:.2f} GiB: {check.status.value}, "
          f"{t.timed_steps if t else 0} timed steps", flush=True)  # fmt: skip


def run_grid(work: Path, lane: int, started: float, deadline: float) -> None:
    os.environ.update(caching_env(work / f"inductor-grid-{lane}"))
    store = Store(f"sqlite:///{work / f'grid-{lane}.sqlite'}")
    sweep_done = (work / "sweep.json").exists()
    swept = set()
    if sweep_done:
        swept = {r.spec.hash for r in Store(f"sqlite:///{work / 'sweep.sqlite'}").trials()}
    mine = {r.spec.hash for r in store.trials()}
    (work / "claims").mkdir(exist_ok=True)
    for pair in twin_pairs():
        specs = [trial_spec(load(o)) for o in pair]
        claim = work / "claims" / specs[0].hash
        if claim.exists() and not (claim / str(lane)).exists():
            continue  # the other lane's
        todo = [s for s in specs if s.hash not in mine and s.hash not in swept]
        if not todo:
            continue
        if time.perf_counter() - started > deadline:
            print(f"lane {lane}: deadline, the grid goes on in the next command", flush=True)
            return
        try:
            claim.mkdir()
            (claim / str(lane)).touch()
        except FileExistsError:
            if not (claim / str(lane)).exists():
                continue
        for spec in todo:
            result = store.add(run_trial(spec, MeasureConfig(), 900))
            t, m = result.throughput, result.memory
            print(
                f"lane {lane} grid b{spec.batch_size} {spec.precision.value} "
                f"cl={spec.channels_last} compile={spec.compile} es={spec.expandable_segments}: "
                f"{result.status.value} {t.samples_per_s if t else 0:.0f}/s "
                f"{m.device_peak_bytes / GiB if m else 0:.2f} GiB wall {result.wall_s:.0f}s",
                flush=True,
            )
    print(f"lane {lane}: grid work done", flush=True)


def main() -> None:
    started = time.perf_counter()
    work, lane = Path(sys.argv[1]), int(sys.argv[2])
    deadline = float(sys.argv[3]) if len(sys.argv) > 3 else float("inf")
    work.mkdir(parents=True, exist_ok=True)
    if lane == 0 and not (work / "sweep.json").exists():
        run_sweep(work)
    if lane == 0 and not (work / "steps200.json").exists():
        run_long_check(work)
    run_grid(work, lane, started, deadline)


if __name__ == "__main__":
    main()
