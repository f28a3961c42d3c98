"""Checkpointed gpt2 measured again now that checkpointing drops transformers' KV cache.

    CUDA_VISIBLE_DEVICES=N python3 remeasure.py OUT_DIR DEADLINE

Until this change the recompute appended each block's keys and values to the cache a second
time, and the measured memory held that. The checkpointed gpt2 specs of the estimate's
accuracy set (../2026-11-30-h200-memory/plan.json) and of its held-out set
(../2026-11-30-h200-accuracy-alone/holdout.py) run again, each alone, as run.py runs them there;
rows go to OUT_DIR/trials.jsonl. No trial starts within 60 s of DEADLINE (Unix seconds).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "2026-11-30-h200-accuracy-alone"))
from holdout import HOLDOUT  # noqa: E402
from run import NEEDED_S, PLAN, SHORT, record  # noqa: E402

from advisor.config import load, trial_spec  # noqa: E402
from advisor.runner import run_trial  # noqa: E402


def main() -> None:
    out, deadline = Path(sys.argv[1]), float(sys.argv[2])
    plan = [item["overrides"] for item in json.loads(PLAN.read_text())]
    held_out = [["device=cuda", *o.split()] for o in HOLDOUT]
    specs = [o for o in [*plan, *held_out] if "model=gpt2" in o and "checkpointing=blocks" in o]
    sink = (out / "trials.jsonl").open("a")
    started = time.time()
    for overrides in specs:
        if time.time() > deadline - NEEDED_S:
            print(f"deadline, stopped before {' '.join(overrides)}", flush=True)
            break
        r = run_trial(trial_spec(load(overrides)), SHORT, timeout_s=240)
        steady = record(sink, "no-kv-cache", r)
        print(f"[{time.time() - started:5.0f}s] {r.status.value:7} {' '.join(overrides[1:])} "
              f"{steady} {r.wall_s:.0f}s", flush=True)  # fmt: skip
    print("remeasure: done", flush=True)


if __name__ == "__main__":
    main()
