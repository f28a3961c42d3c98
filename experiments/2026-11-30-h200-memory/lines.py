"""The memory lines of README section 3 against the bisected truth.

    python3 lines.py

Each line is advisor's own least-squares fit (advisor.memory_model.fit) through the three
uncapped accuracy batches of a family (raw/trials.jsonl), as the sweep would fit measured
points; its largest batch is set against raw/truth.json. Last, what the sweep now predicts for
the family from the same three points: the estimate calibrated on them (advisor.estimate.
Estimator, as `advisor sweep` asks it), which replays the step through the allocator's model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from advisor.estimate import Estimator
from advisor.memory_model import Target, fit

sys.path.insert(0, str(Path(__file__).parent.parent / "2026-11-30-estimate"))
from accuracy import trials  # noqa: E402  (the measured trials, rebuilt as TrialResults)

RAW = Path(__file__).parent / "raw"
CONTEXT = 799014912  # the cap of the truth runs is the budget less this
FAMILIES = {"truth-r50": ("resnet50", "fp32"), "truth-gpt2": ("gpt2", "bf16"),
            "truth-vit": ("vit_b_16", "bf16")}  # fmt: skip
PEAKS = {  # what a line is drawn on, and the budget it is held to
    "whole-trial device peak": (lambda m: m["device_peak_bytes"], 0),
    "steady device peak": (lambda m: m["steady_peak_reserved_bytes"] + m["context_bytes"], 0),
    "steady peak allocated + context": (lambda m: m["steady_peak_allocated_bytes"], CONTEXT),
}


def main() -> None:
    rows = [json.loads(line) for line in (RAW / "trials.jsonl").open()]
    truths = json.loads((RAW / "truth.json").read_text())
    measured = trials()
    for tag, (model, precision) in FAMILIES.items():
        accuracy = [
            r for r in rows
            if r["tag"] == "accuracy" and r["status"] == "ok" and r["spec"]["model"] == model
            and r["spec"]["precision"] == precision and r["spec"]["checkpointing"] == "none"
        ]  # fmt: skip
        truth = truths[tag]["largest_ok"]
        for name, (peak, less) in PEAKS.items():
            line = fit([(r["spec"]["batch_size"], peak(r["memory"])) for r in accuracy])
            assert line is not None
            largest = line.largest_batch(truths[tag]["budget_bytes"] - less)
            print(f"{model} {precision}, line on {name}: {largest} "
                  f"({largest / truth - 1:+.1%} against {truth})")  # fmt: skip
        hashes = {r["spec"]["hash"] for r in accuracy}
        points = [r for r in measured if r.spec.hash in hashes]
        spec = points[0].spec
        target = Target(tag, truths[tag]["budget_bytes"], 0.0)
        largest = Estimator([]).largest_batch(spec, target, points)
        print(f"{model} {precision}, the sweep's estimate calibrated on the {len(points)} points: "
              f"{largest} ({(largest or 0) / truth - 1:+.1%} against {truth})")  # fmt: skip


if __name__ == "__main__":
    main()
