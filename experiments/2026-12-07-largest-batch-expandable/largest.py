"""The largest batch within a budget with expandable segments on, for four of the fifth set's
specs (their largest batch without them: ../2026-12-07-largest-batch-fifth-set): estimated on
the CPU (public API, an empty database; the budget as the card's memory, no margin), and found
on the GPU by bisection with `advisor run` under an allocator cap of the budget less the CUDA
context measured for the model there. The workloads are ../2026-12-06-channels-last-range's.

    python largest.py estimate OUT.jsonl [INDEX]  # each line of BUDGETS, or the one at INDEX
    python largest.py bisect LINE ESTIMATES.jsonl OUT.jsonl DEADLINE_S  # LINE: into BUDGETS
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from pathlib import Path

import advisor

HERE = Path(__file__).resolve().parent
GIB = 2**30
# (workload, budget in GiB, settings, the CUDA context its run measured on the H100 there);
# 14 GiB each, as without expandable segments
BUDGETS = [
    (
        "densenet121",
        14,
        ["precision=bf16", "channels_last=true", "expandable_segments=true"],
        799014912,
    ),
    (
        "shufflenet_v2",
        14,
        ["precision=bf16", "channels_last=true", "expandable_segments=true"],
        799014912,
    ),
    ("swin_v2_t", 14, ["precision=bf16", "expandable_segments=true"], 796917760),
    (
        "mnasnet1_0",
        14,
        ["precision=default", "channels_last=true", "expandable_segments=true"],
        805306368,
    ),
]


def source(name: str) -> str:
    return f"workload={HERE.parent / '2026-12-06-channels-last-range' / 'workloads.py'}:{name}"


def estimate(out: str, only: int | None) -> None:
    chosen = BUDGETS if only is None else [BUDGETS[only]]
    with tempfile.TemporaryDirectory() as empty, open(out, "a") as sink:
        for name, budget, settings, _ in chosen:
            e = advisor.estimate(overrides=[
                source(name), *settings, "batch_size=64", "gpu=h100_80gb",
                f"gpu.memory={budget}GiB", "margin=0", f"db_url=sqlite:///{empty}/e.sqlite",
            ])  # fmt: skip
            row = {"spec": " ".join([name, f"{budget}GiB", *settings]),
                   "largest_batch": e.largest_batch, "largest_batch_sure": e.largest_batch_sure}  # fmt: skip
            sink.write(json.dumps(row) + "\n")
            sink.flush()


def bisect(index: int, estimates: str, out: str, deadline: float) -> None:
    """From the estimate's largest batch outwards by 15%, then halving, until one batch runs
    and the next does not (or the deadline passes)."""
    name, budget, settings, context = BUDGETS[index]
    spec = " ".join([name, f"{budget}GiB", *settings])
    estimated = {
        json.loads(r)["spec"]: json.loads(r) for r in Path(estimates).read_text().splitlines()
    }
    start, stop_at = estimated[spec]["largest_batch"], time.monotonic() + deadline
    cap = budget * GIB - context
    ran: dict[int, bool] = {}
    with tempfile.TemporaryDirectory() as db, open(out, "a") as log:

        def fits(batch: int) -> bool | None:
            if time.monotonic() > stop_at:
                return None
            if batch not in ran:
                t0 = time.monotonic()
                result = advisor.run(overrides=[
                    source(name), *settings, f"batch_size={batch}", f"memory_cap={cap}",
                    "measure.min_timed_steps=3", "measure.max_timed_s=2",
                    f"db_url=sqlite:///{db}/truth.sqlite",
                ])  # fmt: skip
                ran[batch] = result.status.value == "ok"
                log.write(json.dumps({"spec": spec, "batch": batch, "status": result.status.value,
                                      "seconds": round(time.monotonic() - t0, 1)}) + "\n")  # fmt: skip
                log.flush()
            return ran[batch]

        low, high, probe = 0, None, start
        while high is None or high - low > 1:
            ok = fits(probe)
            if ok is None:
                break
            if ok:
                low = probe
                probe = math.ceil(probe * 1.15) + 1 if high is None else (low + high) // 2
            else:
                high = probe
                probe = max(1, math.floor(probe / 1.15)) if low == 0 else (low + high) // 2
        log.write(json.dumps({"spec": spec, "estimate": start, "largest_ran": low,
                              "smallest_failed": high, "runs": len(ran)}) + "\n")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1] == "estimate":
        estimate(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None)
    else:
        bisect(int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]))
