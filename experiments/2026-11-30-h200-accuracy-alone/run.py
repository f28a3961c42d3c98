"""The estimate's accuracy set measured again, each trial alone on its GPU (issue 4).

    CUDA_VISIBLE_DEVICES=N python3 run.py OUT_DIR LANE DEADLINE

The 54 specs of ../2026-11-30-h200-memory/plan.json (resnet50, vit_b_16, gpt2 x fp32/bf16/fp16 x
checkpointing none/blocks x three batches) were measured there several at once on one GPU. Here
each runs alone on its GPU, as advisor runs trials: lane 0 takes the even ones, lane 1 the odd
ones; then, until DEADLINE (Unix seconds), each lane measures the other lane's specs again, on
the other GPU, checkpointed convolutions first (their reserve varied most between runs). Every
trial goes to OUT_DIR/trials-laneN.jsonl as it ends, in run.py's row shape there.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import TextIO

from advisor.config import MeasureConfig, load, trial_spec
from advisor.result import TrialResult
from advisor.runner import run_trial
from advisor.spec import plain

HERE = Path(__file__).parent
PLAN = HERE.parent / "2026-11-30-h200-memory" / "plan.json"
SHORT = MeasureConfig(warmup_steps=3, min_timed_steps=10, max_timed_steps=10, max_timed_s=20)
NEEDED_S = 60  # no trial starts with less time than this left
GiB = 2**30


def row_of(tag: str, r: TrialResult) -> dict:
    row = {"tag": tag, "status": r.status.value, "spec": {**r.spec.to_dict(), "hash": r.spec.hash}}
    row["spec"]["model"], row["spec"]["optimizer"] = r.spec.model.name, r.spec.optimizer.name
    for key in ("memory", "throughput", "environment", "failure"):
        value = getattr(r, key)
        row[key] = plain(dataclasses.asdict(value)) if value else None
    row["wall_s"] = r.wall_s
    return row


def record(sink: TextIO, tag: str, r: TrialResult) -> str:
    """Write the trial's row; return its steady device peak, for the log."""
    sink.write(json.dumps(row_of(tag, r)) + "\n")
    sink.flush()
    m = r.memory
    return f"steady {(m.steady_peak_reserved_bytes + m.context_bytes) / GiB:.2f} GiB" if m else ""


def main() -> None:
    out, lane, deadline = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    plan = [item["overrides"] for item in json.loads(PLAN.read_text())]
    mine, theirs = plan[lane::2], plan[1 - lane :: 2]
    theirs.sort(key=lambda o: ("checkpointing=blocks" not in o, "model=resnet50" not in o))
    sink = (out / f"trials-lane{lane}.jsonl").open("a")
    started = time.time()
    for tag, overrides in [*(("alone", o) for o in mine), *(("again", o) for o in theirs)]:
        if time.time() > deadline - NEEDED_S:
            print(f"lane {lane}: deadline, stopped before {' '.join(overrides)}", flush=True)
            break
        r = run_trial(trial_spec(load(overrides)), SHORT, timeout_s=240)
        steady = record(sink, tag, r)
        print(f"[{time.time() - started:5.0f}s] lane {lane} {tag:5} {r.status.value:7} "
              f"{' '.join(overrides[1:])} {steady} {r.wall_s:.0f}s", flush=True)  # fmt: skip
    print(f"lane {lane}: done", flush=True)


if __name__ == "__main__":
    main()
