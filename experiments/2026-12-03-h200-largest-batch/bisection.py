"""On the H200: the largest batch of each spec of one lane of budgets.txt that runs within its
budget, by bisection with `advisor run` (public API) under an allocator cap of the budget less
the CUDA context, starting from the estimate (raw/estimates-before.jsonl: the estimate before
this folder's change) and its 3% neighbours.

    python3 bisection.py LANE OUT DEADLINE_S   # no trial starts after DEADLINE_S seconds
"""

from __future__ import annotations

import json
import math
import sqlite3
import sys
import time
from pathlib import Path

from estimate import MODELS, key, lines

import advisor

HERE = Path(__file__).resolve().parent
CONTEXT = 794820608  # the CUDA context the H200's runs of these models measured (median)
GIB = 2**30


class Trials:
    """advisor run of one spec at any batch, under the cap, each batch once, logged."""

    def __init__(self, line: tuple, cap: int, db_url: str, log, stop_at: float) -> None:
        _, chosen_set, name, budget, self.settings = line
        self.source = f"{MODELS / chosen_set / name}.py:workload"
        self.key, self.cap, self.db_url, self.log = (
            key(name, budget, self.settings),
            cap,
            db_url,
            log,
        )
        self.stop_at, self.runs = stop_at, {}

    def fits(self, batch: int) -> bool | None:
        """Whether the batch ran; None once the deadline has passed."""
        if batch not in self.runs:
            if time.monotonic() > self.stop_at:
                return None
            t0 = time.monotonic()
            result = advisor.run(self.source, overrides=[
                *self.settings, f"batch_size={batch}", f"memory_cap={self.cap}",
                "measure.min_timed_steps=3", "measure.max_timed_s=2", f"db_url={self.db_url}",
            ])  # fmt: skip
            self.runs[batch] = result.status.value == "ok"
            row = {"key": self.key, "batch": batch, "status": result.status.value,
                   "seconds": round(time.monotonic() - t0, 1)}  # fmt: skip
            print(json.dumps(row), file=self.log, flush=True)
        return self.runs[batch]


def bisect(trials: Trials, estimate: int) -> tuple[int, int | None]:
    """(the largest batch that ran, the smallest that did not), from the estimate and its 3%
    neighbours outwards, then halving; as far as the deadline lets it."""
    low, high = 0, None
    first = trials.fits(estimate)
    if first is None:
        return low, high
    if first:
        low, probe = estimate, math.floor(estimate * 1.03) + 1
    else:
        high, probe = estimate, max(1, math.ceil(estimate * 0.97) - 1)
    while high is None or high - low > 1:
        if high is not None and low > 0 and not low < probe < high:
            probe = (low + high) // 2
        ran = trials.fits(probe)
        if ran is None:
            break
        if ran:
            low = probe
            probe = math.ceil(probe * 1.15) + 1 if high is None else (low + high) // 2
        else:
            high = probe
            probe = max(1, math.floor(probe / 1.15)) if low == 0 else (low + high) // 2
    return low, high


def main(lane: str, out: Path, deadline: float) -> None:
    stop_at = time.monotonic() + deadline
    estimates = {
        row["key"]: row["largest_batch"]
        for row in map(
            json.loads, (HERE / "raw" / "estimates-before.jsonl").read_text().splitlines()
        )
    }
    out.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{out}/truth-{lane}.sqlite"
    with (out / f"bisect-{lane}.jsonl").open("a") as log:
        for line in lines():
            if line[0] != lane:
                continue
            cap = int(float(line[3].removesuffix("GiB")) * GIB) - CONTEXT
            trials = Trials(line, cap, db_url, log, stop_at)
            estimate = max(1, estimates[trials.key] or 1)
            low, high = bisect(trials, estimate)
            summary = {"key": trials.key, "estimate": estimate, "largest_ran": low,
                       "smallest_failed": high, "runs": len(trials.runs)}  # fmt: skip
            print(json.dumps(summary), file=log, flush=True)
    source_db = sqlite3.connect(f"{out}/truth-{lane}.sqlite")
    copy = sqlite3.connect(f"{out}/truth-{lane}-copy.sqlite")
    source_db.backup(copy)
    copy.close()
    source_db.close()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]))
