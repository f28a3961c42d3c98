"""Replay the real allocation traces (raw/trace-N.json.gz, trace.py) through advisor/allocator.py.

    python3 replay_trace.py

If the model of the caching allocator is right, the real sequence of allocations and frees
replayed through it reserves what the real allocator reserved (read from the trace's own
segment_alloc and segment_free events). A segment_free in the real trace (cuDNN's benchmark
empties the cache when its search runs out of memory) is replayed as releasing every wholly free
segment. Beside it, what the estimate replays: the spec's fake step (advisor/fake_step.py),
through the same model, over steady steps.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from advisor.allocator import CachingAllocator
from advisor.config import load, trial_spec
from advisor.fake_step import fake_step, replayed_reserved

RAW = Path(__file__).parent / "raw"
GiB = 2**30


def replay(events: list) -> dict[str, float]:
    model = CachingAllocator()
    live = {}
    real_reserved = real_peak = allocated = real_allocated_peak = 0
    model_at_real_peak = 0
    for action, address, size in events:
        if action == "alloc":
            live[address] = model.malloc(size)
            allocated += size
            real_allocated_peak = max(real_allocated_peak, allocated)
        elif action == "free_completed" and address in live:
            model.free(live.pop(address))
            allocated -= size
        elif action == "segment_alloc":
            real_reserved += size
        elif action == "segment_free":
            real_reserved -= size
            model.release_free_segments()
        if real_reserved > real_peak:
            real_peak = real_reserved
            model_at_real_peak = model.reserved
    return {
        "real_peak_reserved": real_peak / GiB,
        "model_peak_reserved": model.peak_reserved / GiB,
        "model_reserved_at_real_peak": model_at_real_peak / GiB,
        "real_peak_allocated": real_allocated_peak / GiB,
        "model_peak_allocated": model.peak_allocated / GiB,
    }


def main() -> None:
    for path in sorted(RAW.glob("trace-*.json.gz")):
        with gzip.open(path, "rt") as source:
            trace = json.load(source)
        r = replay(trace["events"])
        print(f"{trace['spec']}")
        print(f"  real: peak reserved {r['real_peak_reserved']:.2f} GiB (first step "
              f"{trace['first_peak_reserved'] / GiB:.2f}, steps 2-4 "
              f"{trace['steady_peak_reserved'] / GiB:.2f}), peak allocated "
              f"{r['real_peak_allocated']:.2f}")  # fmt: skip
        print(f"  model on the real trace: peak reserved {r['model_peak_reserved']:.2f} GiB "
              f"({r['model_peak_reserved'] / r['real_peak_reserved'] - 1:+.1%}), peak allocated "
              f"{r['model_peak_allocated']:.2f}")  # fmt: skip
        step = fake_step(trial_spec(load(["device=cuda", *trace["spec"].split()])))
        print(f"  fake step: steady reserved {replayed_reserved(step) / GiB:.2f} GiB replayed "
              f"(real steps 2-4: {trace['steady_peak_reserved'] / GiB:.2f}), peak allocated "
              f"{step.peak_allocated_bytes / GiB:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
