"""Memory on the H200, many trials at once (issues 3 and 4).

    python3 run.py OUT_DIR

Memory is per process, so trials that only measure memory share the GPU: each worker holds a
reserve of the pool (plan.json's, or its cap plus the context) and starts when the pool has
room. Their throughput is not comparable (they run side by side) and is not used. In one pool:

1. accuracy: resnet50, vit_b_16, gpt2 x fp32/bf16/fp16 x checkpointing none/blocks x three
   batches (plan.json), uncapped, as earlier runs were;
2. cap: fp32 resnet50 under allocator caps below the whole-trial peak it reaches uncapped
   (the first step's cuDNN workspaces): does the trial still run?
3. truth: the largest micro batch that runs under a cap of BUDGET less the context, by k-ary
   bisection, for resnet50 fp32 AdamW at 24 GiB, gpt2 bf16 at 40 GiB, vit_b_16 bf16 at 24 GiB;
4. steps200: the resnet50 sweep's recommendation (batch 256, fp16, channels_last) for 200 timed
   steps under the sweep's confirmation cap (24 GiB x 0.95 less the context).

Then, alone on the GPU: Lightning's Tuner.scale_batch_size (lightning_tuner.py) under the same
24 GiB cap. Every trial goes to OUT_DIR/trials.jsonl as it ends.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from advisor.config import MeasureConfig, load, trial_spec
from advisor.result import Status, TrialResult
from advisor.runner import run_trial
from advisor.spec import TrialSpec, plain

GiB, MiB = 2**30, 2**20
HERE = Path(__file__).parent
CONTEXT = 799014912  # what a trial holds beyond the allocator on this H200 (earlier runs)
POOL = 124 * GiB  # of the H200's 139.8 GiB; the rest for cuDNN's opportunistic workspaces
SHORT = MeasureConfig(warmup_steps=3, min_timed_steps=10, max_timed_steps=10, max_timed_s=20)
LONG = MeasureConfig(warmup_steps=3, min_timed_steps=200, max_timed_steps=200, max_timed_s=600)


class Pool:
    """Runs a trial once the reserves of the trials running leave room for its own."""

    def __init__(self, out: Path) -> None:
        self.free = POOL
        self.room = threading.Condition()
        self.lines = (out / "trials.jsonl").open("a")
        self.write = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=12)
        self.started = time.perf_counter()

    def run(self, tag: str, spec: TrialSpec, reserve: int, settings: MeasureConfig = SHORT):
        return self.executor.submit(self._run, tag, spec, reserve, settings)

    def _run(self, tag: str, spec: TrialSpec, reserve: int, settings: MeasureConfig):
        with self.room:
            self.room.wait_for(lambda: self.free >= reserve)
            self.free -= reserve
        try:
            result = run_trial(spec, settings, timeout_s=400)
        finally:
            with self.room:
                self.free += reserve
                self.room.notify_all()
        self.record(tag, result)
        return result

    def record(self, tag: str, r: TrialResult) -> None:
        row = {
            "tag": tag,
            "status": r.status.value,
            "spec": {**r.spec.to_dict(), "hash": r.spec.hash},
        }
        row["spec"]["model"], row["spec"]["optimizer"] = r.spec.model.name, r.spec.optimizer.name
        for key in ("memory", "throughput", "environment", "failure"):
            value = getattr(r, key)
            row[key] = plain(dataclasses.asdict(value)) if value else None
        row["wall_s"] = r.wall_s
        with self.write:
            self.lines.write(json.dumps(row) + "\n")
            self.lines.flush()
            m = r.memory
            peak = (
                f"{m.device_peak_bytes / GiB:.2f} GiB (steady {(m.steady_peak_reserved_bytes + m.context_bytes) / GiB:.2f})"
                if m
                else ""
            )
            print(
                f"[{time.perf_counter() - self.started:6.0f}s] {tag:10} {r.status.value:7} "
                f"{r.spec.model.name} b{r.spec.batch_size} {r.spec.precision.value} "
                f"{r.spec.checkpointing.value} cap={r.spec.memory_cap_bytes} {peak} {r.wall_s:.0f}s",
                flush=True,
            )


def spec_of(overrides: list[str]) -> TrialSpec:
    return trial_spec(load(overrides))


def bisect(pool: Pool, tag: str, base: TrialSpec, budget: int, guess: int, out: dict) -> None:
    """The largest batch that runs under a cap of budget - CONTEXT: k-ary, 5 batches at once."""
    cap = budget - CONTEXT
    ran: dict[int, str] = {}
    points = sorted({max(1, round(guess * f)) for f in (0.8, 0.9, 1.0, 1.1, 1.25)})
    for _ in range(8):
        if not points:
            break
        futures = {
            b: pool.run(tag, dataclasses.replace(base, batch_size=b, memory_cap_bytes=cap), budget)
            for b in points
        }
        for b, f in futures.items():
            ran[b] = f.result().status.value
        if any(s not in ("ok", "oom") for s in ran.values()):
            out[tag] = {"error": "a trial neither ran nor ran out of memory", "ran": ran}
            return
        ok = max((b for b, s in ran.items() if s == "ok"), default=0)
        oom = min((b for b, s in ran.items() if s == "oom" and b > ok), default=None)
        if oom is None:
            points = [round(ok * f) for f in (1.15, 1.3, 1.5, 1.8, 2.2)]
        elif ok == 0:
            points = sorted({max(1, round(oom * f)) for f in (0.3, 0.5, 0.7, 0.85)} - set(ran))
        else:
            gap = oom - ok
            k = min(5, gap - 1)
            points = sorted({ok + round(gap * i / (k + 1)) for i in range(1, k + 1)} - set(ran))
    out[tag] = {
        "budget_bytes": budget,
        "cap_bytes": cap,
        "largest_ok": ok,
        "smallest_oom": oom,
        "ran": dict(sorted(ran.items())),
        "inconsistent": sorted(b for b, s in ran.items() if s == "oom" and b < ok),
    }


def main() -> None:
    out = Path(sys.argv[1])
    pool = Pool(out)
    t0 = time.perf_counter()
    futures = []
    for item in json.loads((HERE / "plan.json").read_text()):
        futures.append(
            (item, pool.run("accuracy", spec_of(item["overrides"]), item["reserve_bytes"]))
        )
    fp32 = spec_of(["device=cuda", "model=resnet50", "batch_size=64", "precision=fp32"])
    fp32_ckpt = spec_of(
        ["device=cuda", "model=resnet50", "batch_size=64", "precision=fp32", "checkpointing=blocks"]
    )
    for spec, cap in ((fp32, 7 * GiB), (fp32, 6600 * MiB), (fp32_ckpt, 4 * GiB)):
        pool.run("cap", dataclasses.replace(spec, memory_cap_bytes=cap), cap + CONTEXT)
    best = spec_of(
        ["device=cuda", "model=resnet50", "batch_size=256", "precision=fp16", "channels_last=true"]
    )
    cap = int(24 * GiB * 0.95) - CONTEXT
    pool.run("steps200", dataclasses.replace(best, memory_cap_bytes=cap), cap + CONTEXT, LONG)
    truths: dict = {}
    families = [
        ("truth-r50", ["model=resnet50", "precision=fp32"], 24 * GiB, 210),
        ("truth-gpt2", ["model=gpt2", "precision=bf16"], 40 * GiB, 22),
        ("truth-vit", ["model=vit_b_16", "precision=bf16"], 24 * GiB, 240),
    ]
    threads = [
        threading.Thread(
            target=bisect,
            args=(pool, tag, spec_of(["device=cuda", "batch_size=1", *o]), budget, guess, truths),
        )
        for tag, o, budget, guess in families
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # an uncapped trial that ran out of memory may have met its neighbours: again, alone
    for _, f in futures:
        if f.result().status is Status.oom:
            pool.run("accuracy-alone", f.result().spec, POOL).result()
    pool.executor.shutdown(wait=True)
    (out / "truth.json").write_text(json.dumps(truths, indent=1))
    print(json.dumps(truths), flush=True)
    print(f"pool done in {time.perf_counter() - t0:.0f}s", flush=True)

    started = time.perf_counter()
    tuner = subprocess.run(
        [sys.executable, str(HERE / "lightning_tuner.py"), str(24 * GiB - CONTEXT)],
        capture_output=True,
        text=True,
        timeout=420,
    )
    (out / "lightning.log").write_text(tuner.stdout + tuner.stderr)
    print(
        tuner.stdout[-3000:],
        tuner.stderr[-3000:],
        f"lightning rc={tuner.returncode} {time.perf_counter() - started:.0f}s",
        flush=True,
    )


if __name__ == "__main__":
    main()
