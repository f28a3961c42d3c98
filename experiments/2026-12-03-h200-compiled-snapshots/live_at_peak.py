"""What a torch memory snapshot holds at its peak: the live blocks by the line that allocated
them (inductor's generated code, or the model's), largest first. No advisor code.

    python3 live_at_peak.py raw/gpt2-bf16-b8-compiled.pickle.gz [LINES]
"""

from __future__ import annotations

import collections
import gzip
import pickle
import sys


def where(frames: list[dict]) -> str:
    """The first frame in generated or model code, as file:line:function."""
    marks = ("torchinductor", "cache-", "/advisor/", "transformers", "torchvision")
    for frame in frames:
        if any(mark in frame["filename"] for mark in marks):
            return f"{frame['filename'].split('/')[-1]}:{frame['line']}:{frame['name']}"
    return "?"


def main(path: str, lines: int = 25) -> None:
    with gzip.open(path) as f:
        trace = pickle.load(f)["device_traces"][0]
    live: dict[int, int] = {}
    current, peak, peak_at = 0, 0, -1
    for i, event in enumerate(trace):
        if event["action"] == "alloc":
            live[event["addr"]] = event["size"]
            current += event["size"]
            if current > peak:
                peak, peak_at = current, i
        elif event["action"] == "free_completed":
            current -= live.pop(event["addr"], 0)
    alive: dict[int, dict] = {}
    for event in trace[: peak_at + 1]:
        if event["action"] == "alloc":
            alive[event["addr"]] = event
        elif event["action"] == "free_completed":
            alive.pop(event["addr"], None)
    by_line: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for event in alive.values():
        by_line[where(event["frames"])][0] += event["size"]
        by_line[where(event["frames"])][1] += 1
    print(f"peak of the recorded blocks: {peak / 1e9:.3f} GB, at event {peak_at} of {len(trace)}, "
          f"allocated at {where(trace[peak_at]['frames'])}")  # fmt: skip
    for line, (size, count) in sorted(by_line.items(), key=lambda kv: -kv[1][0])[:lines]:
        print(f"{size / 1e6:10.1f} MB {count:5d}  {line}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
