"""`advisor sweep` with every trial under the target's cap, against exhaustive grids on the H200
(issue 3), on a host of two H200s (one lane per GPU).

    CUDA_VISIBLE_DEVICES=N python3 bench.py WORK LANE PART [DEADLINE]

Since this session a sweep for a GPU smaller than the local one runs each trial under the
target's cap (what it allows less a 762 MiB context), so the recommended trial is its own
confirmation. Two benchmarks:

gpt2-48 (new): gpt2 (124M, seq 1024), bf16, grad_accum 1, micro batch {8, 16, 32} x
checkpointing {none, blocks} x optimizer {adamw (foreach), adamw_fused} x compile {false, true}
x expandable_segments {false, true}; target gpu.memory=40GiB, default margin. The grid runs the
same 48 specs under the same cap as the sweep's trials, so "fits" means the same in both.

resnet50-48 (again, PART sweep-r50-48): the sweep alone, with the new code, over the space of
../2026-11-30-h200-sweep-resnet50-48 (eager), set against that grid (uncapped, another H200).

resnet50-compile (again, not run: no device time left): the sweep alone, with the new code, over the 48-spec space of
../2026-11-30-h200-sweep-resnet50-compile, whose grid (measured uncapped, on another H200 of
this day) it is set against.

Compile cache: cold for both: each sweep and each grid lane starts from an empty inductor cache
of its own and keeps it as it goes; grid lanes take expandable_segments twins one after the
other, compiled pairs first.

PART sweep-gpt2 / sweep-r50 (lane 0): the sweep through the real command, default budget and
stop rule, into WORK/NAME/sweep.sqlite, then the recommended spec for 200 timed steps under
the cap. PART grid: grid work for gpt2-48, each lane claiming the next twin pair (an atomic
mkdir under WORK/gpt2/claims), into WORK/gpt2/grid-LANE.sqlite, skipping specs a finished sweep
measured (the grid counts the sweep's measurement for them). No new trial starts after
DEADLINE (seconds since the epoch); running it again goes on.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from advisor.config import MeasureConfig, load, trial_spec
from advisor.estimate import DEFAULT_CONTEXT_BYTES
from advisor.runner import run_trial
from advisor.store.store import Store

GiB = 2**30
SPACES = {
    "gpt2": [
        "model=gpt2", "device=cuda", "gpu.memory=40GiB", "precision=bf16",
        "space.batch_sizes=[8,16,32]", "space.precision=[bf16]", "space.grad_accum=[1]",
        "space.checkpointing=[none,blocks]", "space.optimizers=[adamw,adamw_fused]",
        "space.compile=[false,true]", "space.expandable_segments=[false,true]",
    ],
    "r50": [
        "model=resnet50", "device=cuda", "gpu.memory=24GiB", "space.batch_sizes=[128,256,512]",
        "space.precision=[bf16,fp16]", "space.checkpointing=[none]",
        "space.channels_last=[false,true]", "space.grad_accum=[1]", "space.optimizers=[adamw]",
        "space.compile=[false,true]", "space.expandable_segments=[false,true]",
    ],
    "r50-48": [
        "model=resnet50", "device=cuda", "gpu.memory=24GiB", "space.batch_sizes=[128,256,512]",
        "space.precision=[bf16,fp16]", "space.checkpointing=[none,blocks]",
        "space.channels_last=[false,true]", "space.grad_accum=[1]", "space.optimizers=[adamw]",
        "space.compile=[false]", "space.expandable_segments=[false,true]",
    ],
}  # fmt: skip
BUDGET = {"gpt2": 40 * GiB, "r50": 24 * GiB, "r50-48": 24 * GiB}
COMPILE_THREADS = "16"


def cap(name: str) -> int:
    return int(BUDGET[name] * 0.95) - DEFAULT_CONTEXT_BYTES


def twin_pairs():
    """gpt2-48's units of grid work, compiled first (the longest), twins adjacent."""
    for compiled, batch, ckpt, optimizer in itertools.product(
        (True, False), (8, 16, 32), ("none", "blocks"), ("adamw", "adamw_fused")
    ):
        yield [
            ["model=gpt2", "device=cuda", "precision=bf16", f"batch_size={batch}",
             f"checkpointing={ckpt}", f"optimizer={optimizer}", f"compile={compiled}",
             f"expandable_segments={es}", f"memory_cap={cap('gpt2')}"]
            for es in (False, True)
        ]  # fmt: skip


def caching_env(cache: Path) -> dict[str, str]:
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache), "TORCHINDUCTOR_COMPILE_THREADS": COMPILE_THREADS}


def run_sweep(work: Path, name: str) -> None:
    home = work / name
    home.mkdir(parents=True, exist_ok=True)
    if (home / "sweep.json").exists():
        return
    started = time.perf_counter()
    env = {**os.environ, **caching_env(home / "inductor-sweep"),
           "ADVISOR_DB_URL": f"sqlite:///{home / 'sweep.sqlite'}",
           "ADVISOR_STUDY_DB_URL": f"sqlite:///{home / 'optuna.sqlite'}"}  # fmt: skip
    sweep = subprocess.run(
        [sys.executable, "-m", "advisor", "sweep", *SPACES[name], f"plot={home / 'sweep.png'}",
         "--json"], capture_output=True, text=True, env=env,
    )  # fmt: skip
    (home / "sweep.log").write_text(sweep.stderr)
    print(sweep.stderr[-3000:], flush=True)
    wall = time.perf_counter() - started
    print(f"{name} sweep wall {wall:.0f}s rc={sweep.returncode}", flush=True)
    (home / "sweep-wall.txt").write_text(f"{wall:.1f}\n")
    (home / "sweep.json").write_text(sweep.stdout)
    run_long_check(home, name)


def run_long_check(home: Path, name: str) -> None:
    """The recommended spec for 200 timed steps under the budget's cap (the sweep's cache)."""
    best = json.loads((home / "sweep.json").read_text() or "{}").get("recommendation")
    if best is None:
        return
    store = Store(f"sqlite:///{home / 'sweep.sqlite'}")
    spec = next(r.spec for r in store.trials() if r.spec.hash == best["spec"]["hash"])
    long = MeasureConfig(min_timed_steps=200, max_timed_steps=200, max_timed_s=600)
    os.environ.update(caching_env(home / "inductor-sweep"))
    check = run_trial(dataclasses.replace(spec, memory_cap_bytes=cap(name)), long, 900)
    (home / "steps200.json").write_text(json.dumps(check.to_dict(), indent=1))
    t = check.throughput
    print(f"{name}: 200 steps under {cap(name) / GiB:.2f} GiB: {check.status.value}, "
          f"{t.timed_steps if t else 0} timed steps", flush=True)  # fmt: skip


def logged() -> set[str]:
    """The grid specs the first device command measured (raw/run1-lane*.log): its results
    databases were lost with the machine's working tree (device.sh had lost its arguments, so
    WORK was the repository root), not its logs."""
    done = set()
    for log in (Path(__file__).parent / "raw").glob("run1-lane*.log"):
        for line in log.read_text().splitlines():
            m = re.match(r"lane \d grid b(\d+) (\w+) (\w+) compile=(\w+) es=(\w+):", line)
            if m:
                b, ckpt, opt, compiled, es = m.groups()
                done.add(trial_spec(load(
                    ["model=gpt2", "device=cuda", "precision=bf16", f"batch_size={b}",
                     f"checkpointing={ckpt}", f"optimizer={opt}", f"compile={compiled}",
                     f"expandable_segments={es}", f"memory_cap={cap('gpt2')}"]
                )).hash)  # fmt: skip
    return done


def run_grid(work: Path, lane: int, deadline: float) -> None:
    home = work / "gpt2"
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update(caching_env(home / f"inductor-grid-{lane}"))
    store = Store(f"sqlite:///{home / f'grid-{lane}.sqlite'}")
    swept = set()
    if (home / "sweep.json").exists():
        swept = {r.spec.hash for r in Store(f"sqlite:///{home / 'sweep.sqlite'}").trials()}
    mine = {r.spec.hash for r in store.trials()} | logged()
    (home / "claims").mkdir(exist_ok=True)
    for pair in twin_pairs():
        specs = [trial_spec(load(o)) for o in pair]
        claim = home / "claims" / specs[0].hash
        if claim.exists() and not (claim / str(lane)).exists():
            continue  # the other lane's
        todo = [s for s in specs if s.hash not in mine and s.hash not in swept]
        if not todo:
            continue
        if time.time() > deadline:
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
                f"lane {lane} grid b{spec.batch_size} {spec.checkpointing.value} "
                f"{spec.optimizer.name} compile={spec.compile} es={spec.expandable_segments}: "
                f"{result.status.value} {t.samples_per_s if t else 0:.1f}/s "
                f"{m.device_peak_bytes / GiB if m else 0:.2f} GiB wall {result.wall_s:.0f}s",
                flush=True,
            )
    print(f"lane {lane}: grid work done", flush=True)


def check_hashes() -> None:
    """Here, without a GPU: the grid's specs are the sweep's (same hashes, same cap)."""
    from advisor.space import space_of
    from advisor.target import target_of, trial_cap

    overrides = SPACES["gpt2"]
    cfg = load(overrides)
    base = dataclasses.replace(trial_spec(cfg), memory_cap_bytes=cap("gpt2"))
    space = space_of(cfg, overrides, base)
    target = target_of(cfg, base.device)
    assert trial_cap(target, 150 * GiB) == cap("gpt2")
    swept = {space.spec(p).hash for p in space.points()}
    grid = {trial_spec(load(o)).hash for pair in twin_pairs() for o in pair}
    assert swept == grid and len(grid) == 48, (len(swept), len(grid), len(swept & grid))
    print("48 specs, the sweep's and the grid's the same")


def main() -> None:
    if sys.argv[1] == "check":
        check_hashes()
        return
    work, lane, part = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    deadline = float(sys.argv[4]) if len(sys.argv) > 4 else float("inf")
    if part.startswith("sweep-"):
        run_sweep(work, part.removeprefix("sweep-"))
    else:
        run_grid(work, lane, deadline)


if __name__ == "__main__":
    main()
