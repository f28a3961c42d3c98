"""Each run's real allocations, replayed through the allocator's model with expandable segments,
against what the real allocator mapped: the trace of a snapshot holds the whole run, from the
model's build (its segment_map and segment_unmap events are the real reserve). Where the real
allocator gave pages back (segment_unmap: cuDNN's benchmark emptying the cache), the model gives
its free pages back too. Internal API (the allocator's model): the question is the model's.

    python replay_real.py RUNS_DIR > raw/replay-real.md   # RUNS_DIR: raw/runs.tar, extracted
"""

import gzip
import pickle
import sys
from pathlib import Path

from advisor.estimation.allocator import CachingAllocator, ExpandableSegments

GB = 1e9


def replayed(trace: list[dict], allocator: CachingAllocator) -> tuple[int, int, int, int]:
    """The real allocator's peak reserve over the trace and the model's; and of the times the
    real one gave pages back, at how many the two reserves were then equal to the byte."""
    real = real_peak = equal = releases = 0
    live = {}
    released = False
    for event in trace:
        action = event["action"]
        if action == "segment_map":
            real += event["size"]
        elif action == "segment_unmap":
            real -= event["size"]
            if not released:  # one release for a run of unmaps
                allocator.release_free_segments()
            released = True
            continue
        if released:  # the run of unmaps has ended: compare
            releases += 1
            equal += allocator.reserved == real
        released = False
        if action == "alloc":
            live[event["addr"]] = allocator.malloc(event["size"], 0 if event["stream"] == 0 else 1)
        elif action == "free_completed" and event["addr"] in live:
            allocator.free(live.pop(event["addr"]))
        real_peak = max(real_peak, real)
    return real_peak, allocator.peak_reserved, equal, releases


def main(runs: str) -> None:
    print("| run | real peak reserved GB | the model's, expandable | error | reserves equal after "
          "a release | without expandable segments |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for path in sorted(Path(runs).glob("*.pickle.gz")):
        with gzip.open(path) as file:
            trace = pickle.load(file)["device_traces"][0]
        real, model, equal, releases = replayed(trace, ExpandableSegments())
        plain = replayed(trace, CachingAllocator())[1]
        name = path.name.removesuffix(".pickle.gz")
        print(f"| {name} | {real / GB:.3f} | {model / GB:.3f} | {model / real - 1:+.2%} | "
              f"{equal} of {releases} | {plain / GB:.3f} |")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1])
