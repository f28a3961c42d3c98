"""Where the run-to-run spread of the steady device peak comes from (issue 4).

    python3 probe.py OUT.jsonl PART PARTS

The same spec's steady device peak differed by up to 13.2% between runs (resnet50 bf16
checkpointed b128: 4.46, 4.46 and 5.04 GiB) while its peak allocated repeated within 0.6%. The
steady state starts after the first step, but the allocator's cache does not: whatever the first
step reserved (cuDNN's autotuning tries workspaces of many sizes) stays reserved. This probe runs
each spec three times, each in a fresh process as a trial runs, and reads after the first step:
  kept:   the peak reserved over three more steps, as measure.py reads it (the cache kept);
  fresh:  the same after torch.cuda.empty_cache(), over three more steps: what the steady state
          itself reserves, the first step's leftovers released (as the allocator would release
          them before failing an allocation).
The specs are the worst of the estimate's wider check (../2026-11-30-estimate/wider.md).
"""

from __future__ import annotations

import json
import subprocess
import sys

SPECS = [
    ["model=resnet50", "precision=bf16", "checkpointing=blocks", "batch_size=128"],
    ["model=resnet50", "precision=fp32", "checkpointing=blocks", "batch_size=256"],
    ["model=resnet50", "precision=fp32", "batch_size=64"],
    ["model=gpt2", "precision=bf16", "checkpointing=blocks", "batch_size=16"],
    ["model=gpt2", "precision=bf16", "checkpointing=blocks", "batch_size=8", "grad_accum=2"],
    ["model=vit_b_16", "precision=bf16", "checkpointing=blocks", "batch_size=32"],
]
REPEATS = 3


def one(overrides: list[str]) -> dict:
    import torch

    from advisor.config import load, trial_spec
    from advisor.workload import build, train_step

    torch.backends.cudnn.benchmark = True  # as the worker sets it
    spec = trial_spec(load(["device=cuda", *overrides]))
    device = torch.device("cuda")
    workload = build(spec, device)

    def steps(n: int) -> tuple[int, int]:
        torch.cuda.reset_peak_memory_stats()
        for _ in range(n):
            train_step(workload)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()

    first_allocated, first_reserved = steps(1)
    after_first = torch.cuda.memory_reserved()
    kept_allocated, kept_reserved = steps(3)
    torch.cuda.empty_cache()
    fresh_allocated, fresh_reserved = steps(3)
    return {
        "spec": " ".join(overrides),
        "first_peak_allocated": first_allocated,
        "first_peak_reserved": first_reserved,
        "reserved_after_first": after_first,
        "kept_peak_allocated": kept_allocated,
        "kept_peak_reserved": kept_reserved,
        "fresh_peak_allocated": fresh_allocated,
        "fresh_peak_reserved": fresh_reserved,
    }


def main() -> None:
    if sys.argv[1] == "one":
        print(json.dumps(one(sys.argv[2:])))
        return
    out, part, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    from advisor.config import load, trial_spec
    from advisor.runner import worker_environment

    with open(out, "a") as sink:
        for overrides in SPECS[part::parts]:
            env = worker_environment(trial_spec(load(["device=cuda", *overrides])))
            for run in range(REPEATS):
                done = subprocess.run(
                    [sys.executable, __file__, "one", *overrides],
                    capture_output=True, text=True, env=env,
                )  # fmt: skip
                if done.returncode != 0:
                    print(done.stdout[-2000:], done.stderr[-2000:], flush=True)
                    continue
                row = {"run": run, **json.loads(done.stdout.strip().splitlines()[-1])}
                sink.write(json.dumps(row) + "\n")
                sink.flush()
                print(row, flush=True)


if __name__ == "__main__":
    main()
