"""The calibrated device peak on every uncapped spec the H200 measured, against the median of
its runs: a wider check than accuracy.py's 71 specs (its newest run of each).

    python3 wider.py > wider.md

Adds the gpt2 grid's accumulation and fused-AdamW variants and the 48-spec resnet50 grid
(expandable_segments) to accuracy.py's sources. A spec measured in several runs is one trial
whose steady figures are the medians of its runs. Each is estimated by `advisor.estimate.
device_peak`, calibrated on the *other* specs of its model (leave one out).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import statistics
from pathlib import Path

from accuracy import RAW, trial_of

from advisor.estimate import device_peak, steady_device_peak
from advisor.result import TrialResult

HERE = Path(__file__).parent
WIDER = [
    *RAW,
    HERE.parent / "2026-11-30-h200-sweep-gpt2" / "raw" / "grid.jsonl",
    HERE.parent / "2026-11-30-h200-sweep-resnet50-48" / "raw" / "grid.jsonl",
]


def median_runs() -> list[tuple[TrialResult, int]]:
    """Each spec once, its steady figures the medians of its distinct runs; with the count."""
    runs: dict[str, dict[tuple, TrialResult]] = collections.defaultdict(dict)
    for path in WIDER:
        for line in path.open():
            trial = trial_of(path, json.loads(line))
            if trial is not None:  # one run copied into two files counts once
                runs[trial.spec.hash][(trial.wall_s, trial.memory)] = trial
    out = []
    for found in runs.values():
        trials = list(found.values())
        memories = [t.memory for t in trials if t.memory is not None]
        median = {
            field: int(statistics.median(getattr(m, field) for m in memories))
            for field in ("steady_peak_allocated_bytes", "steady_peak_reserved_bytes",
                          "context_bytes")
        }  # fmt: skip
        memory = dataclasses.replace(memories[0], **median)
        out.append((dataclasses.replace(trials[0], memory=memory), len(trials)))
    return out


def main() -> None:
    specs = median_runs()
    errors, rows = [], []
    for trial, count in specs:
        others = [t for t, _ in specs if t is not trial and t.spec.model == trial.spec.model]
        error = device_peak(trial.spec, others) / steady_device_peak(trial) - 1
        errors.append(error)
        s = trial.spec
        rows.append((abs(error), f"| {s.model.name} {s.precision.value} ckpt={s.checkpointing.value} "
                     f"cl={s.channels_last} es={s.expandable_segments} {s.optimizer.name} "
                     f"x{s.grad_accum} b{s.batch_size} | {count} | {error:+.1%} |"))  # fmt: skip
    print(f"# Calibrated steady device peak, {len(specs)} specs against the median of their runs\n")
    print(f"median abs {statistics.median(abs(e) for e in errors):.1%}, worst abs "
          f"{max(abs(e) for e in errors):.1%}, worst under {min(errors):+.1%}, worst over "
          f"{max(errors):+.1%}; {sum(c > 1 for _, c in specs)} specs measured in 2+ runs\n")  # fmt: skip
    print("| spec (worst 15) | runs | error |\n|---|---|---|")
    for _, row in sorted(rows, reverse=True)[:15]:
        print(row)


if __name__ == "__main__":
    main()
