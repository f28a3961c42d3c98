"""Real allocation traces with Python stacks, to name what the fake step misses (issue 4).

    python3 trace_stacks.py OUT_DIR

As trace.py, for the specs whose reserve the replayed fake step still misses most
(checkpointed vit_b_16 and resnet50), but with each allocation's Python stack, cut to the
frames in torch.nn, torchvision, transformers, torch.utils.checkpoint and advisor (innermost
first), and a marker allocation between steps (frame `step_marker`). Written as
OUT_DIR/stacks-N.json.gz: {"spec", "first_peak_reserved", "steady_peak_reserved",
"events": [[action, address, size, "file:line:function < ..."], ...]}.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

SPECS = [
    ["model=vit_b_16", "precision=bf16", "checkpointing=blocks", "batch_size=128"],
    ["model=vit_b_16", "precision=bf16", "checkpointing=blocks", "batch_size=32"],
    ["model=resnet50", "precision=fp16", "checkpointing=blocks", "channels_last=true",
     "batch_size=128"],
    ["model=resnet50", "precision=fp32", "checkpointing=blocks", "batch_size=256"],
]  # fmt: skip
KEPT = ("alloc", "free_completed", "segment_alloc", "segment_free")
OURS = ("torch/nn/", "torchvision/", "transformers/", "torch/utils/checkpoint", "advisor/",
        "torch/autograd", "trace_stacks")  # fmt: skip


def step_marker() -> None:
    import torch

    torch.empty(1, device="cuda")  # a 512-byte block whose stack names the step boundary


def frames(event: dict) -> str:
    kept = [f for f in event.get("frames", []) if any(o in f["filename"] for o in OURS)]
    return " < ".join(f"{Path(f['filename']).name}:{f['line']}:{f['name']}" for f in kept[:5])


def one(path: Path, overrides: list[str]) -> None:
    import torch

    from advisor.config import load, trial_spec
    from advisor.workload import build, train_step

    torch.backends.cudnn.benchmark = True  # as the worker sets it
    spec = trial_spec(load(["device=cuda", *overrides]))
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(
        context="alloc", stacks="python", max_entries=5_000_000
    )
    workload = build(spec, torch.device("cuda"))
    step_marker()
    train_step(workload)
    torch.cuda.synchronize()
    first = torch.cuda.max_memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(3):
        step_marker()
        train_step(workload)
    torch.cuda.synchronize()
    steady = torch.cuda.max_memory_reserved()
    snapshot = torch.cuda.memory._snapshot()
    events = [
        [e["action"], e["addr"], e["size"], frames(e)]
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
        path = out / f"stacks-{n}.json.gz"
        subprocess.run([sys.executable, __file__, "one", str(path), *overrides], env=env)


if __name__ == "__main__":
    main()
