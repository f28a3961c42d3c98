"""Specs the estimate was never calibrated or tuned on, measured alone (issue 4).

    CUDA_VISIBLE_DEVICES=N python3 holdout.py OUT_DIR DEADLINE

The calibration rule was chosen on the accuracy set (run.py's 54 specs and the earlier runs);
these batches lie between and beyond its three per family, so the estimate's error on them,
calibrated on all of that history, is an out-of-sample check. Rows go to OUT_DIR/holdout.jsonl
in run.py's shape; no trial starts within 60 s of DEADLINE (Unix seconds). Specs already in
that file are not run again (a second call goes on where the first stopped).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from run import NEEDED_S, SHORT, record

from advisor.config import load, trial_spec
from advisor.runner import run_trial

HOLDOUT = [
    "model=resnet50 precision=fp32 checkpointing=none batch_size=96",
    "model=resnet50 precision=fp32 checkpointing=none batch_size=192",
    "model=resnet50 precision=fp32 checkpointing=none batch_size=384",
    "model=resnet50 precision=fp32 checkpointing=blocks batch_size=96",
    "model=resnet50 precision=fp32 checkpointing=blocks batch_size=192",
    "model=resnet50 precision=fp32 checkpointing=blocks batch_size=384",
    "model=resnet50 precision=bf16 checkpointing=blocks batch_size=192",
    "model=resnet50 precision=fp16 checkpointing=none batch_size=192",
    "model=resnet50 precision=bf16 checkpointing=none channels_last=true batch_size=384",
    "model=vit_b_16 precision=bf16 checkpointing=blocks batch_size=96",
    "model=vit_b_16 precision=bf16 checkpointing=blocks batch_size=192",
    "model=vit_b_16 precision=fp32 checkpointing=blocks batch_size=96",
    "model=vit_b_16 precision=fp32 checkpointing=none batch_size=96",
    "model=vit_b_16 precision=bf16 checkpointing=none batch_size=192",
    "model=gpt2 precision=bf16 checkpointing=blocks batch_size=6",
    "model=gpt2 precision=bf16 checkpointing=blocks batch_size=12",
    "model=gpt2 precision=fp32 checkpointing=none batch_size=6",
    "model=gpt2 precision=bf16 checkpointing=none batch_size=12",
    "model=gpt2 precision=fp32 checkpointing=blocks batch_size=12",
]


def main() -> None:
    out, deadline = Path(sys.argv[1]), float(sys.argv[2])
    path = out / "holdout.jsonl"
    done = {json.loads(line)["spec"]["hash"] for line in path.open()} if path.exists() else set()
    sink = path.open("a")
    started = time.time()
    for overrides in HOLDOUT:
        spec = trial_spec(load(["device=cuda", *overrides.split()]))
        if spec.hash in done:
            continue
        if time.time() > deadline - NEEDED_S:
            print(f"deadline, stopped before {overrides}", flush=True)
            break
        r = run_trial(spec, SHORT, timeout_s=240)
        steady = record(sink, "holdout", r)
        print(f"[{time.time() - started:5.0f}s] {r.status.value:7} {overrides} {steady} "
              f"{r.wall_s:.0f}s", flush=True)  # fmt: skip
    print("holdout: done", flush=True)


if __name__ == "__main__":
    main()
