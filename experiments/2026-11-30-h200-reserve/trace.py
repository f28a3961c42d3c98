"""The real allocation trace of a step, to replay through advisor/allocator.py (issue 4).

    python3 trace.py OUT_DIR

For each spec, in a fresh process as a trial runs: the caching allocator's own record of every
allocation and free (torch.cuda.memory._record_memory_history, no stacks) from building the
workload through four steps, and its peak reserved over the first step and over steps 2-4.
Written as OUT_DIR/trace-N.json.gz: {"spec", "first_peak_reserved", "steady_peak_reserved",
"events": [[action, address, size], ...]} in the allocator's order.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

SPECS = [
    ["model=gpt2", "precision=bf16", "checkpointing=blocks", "batch_size=16"],
    ["model=gpt2", "precision=bf16", "checkpointing=blocks", "batch_size=8", "grad_accum=2"],
    ["model=resnet50", "precision=fp32", "checkpointing=blocks", "batch_size=256"],
    ["model=resnet50", "precision=bf16", "batch_size=256"],
]
KEPT = ("alloc", "free_completed", "segment_alloc", "segment_free")


def one(path: Path, overrides: list[str]) -> None:
    import torch

    from advisor.config import load, trial_spec
    from advisor.workload import build, train_step

    torch.backends.cudnn.benchmark = True  # as the worker sets it
    spec = trial_spec(load(["device=cuda", *overrides]))
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(context=None, max_entries=5_000_000)
    workload = build(spec, torch.device("cuda"))
    train_step(workload)
    torch.cuda.synchronize()
    first = torch.cuda.max_memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(3):
        train_step(workload)
    torch.cuda.synchronize()
    steady = torch.cuda.max_memory_reserved()
    snapshot = torch.cuda.memory._snapshot()
    events = [
        [e["action"], e["addr"], e["size"]]
        for e in snapshot["device_traces"][0]
        if e["action"] in KEPT
    ]
    with gzip.open(path, "wt") as sink:
        json.dump({"spec": " ".join(overrides), "first_peak_reserved": first,
                   "steady_peak_reserved": steady, "events": events}, sink)  # fmt: skip
    print(f"{' '.join(overrides)}: {len(events)} events, first {first / 2**30:.2f} GiB, "
          f"steady {steady / 2**30:.2f} GiB", flush=True)  # fmt: skip


def main() -> None:
    if sys.argv[1] == "one":
        one(Path(sys.argv[2]), sys.argv[3:])
        return
    from advisor.config import load, trial_spec
    from advisor.runner import worker_environment

    out = Path(sys.argv[1])
    for n, overrides in enumerate(SPECS):
        env = worker_environment(trial_spec(load(["device=cuda", *overrides])))
        path = out / f"trace-{n}.json.gz"
        subprocess.run([sys.executable, __file__, "one", str(path), *overrides], env=env)


if __name__ == "__main__":
    main()
