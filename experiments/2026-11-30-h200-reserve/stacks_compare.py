"""What the real steady step allocates that the fake step does not (raw/stacks-N.json.gz, from
trace_stacks.py), on this CPU-only machine.

    python3 stacks_compare.py > stacks_compare.txt

For each traced spec: the third full step of the real trace (between its step markers) against
advisor's fake step (its passes, plus the optimizer update's temporaries as the replay adds
them), as counts of allocations by size (>= 1 MiB, 512-byte rounded), where the two
differ; then the real step's transients (an allocation freed before the next one of 1 MiB or more) of
32 MiB or more, with the Python frame that made them ("backward": none kept, as for the
autograd engine's thread; the optimizer's frames are not kept either). Last, the whole real trace replayed through advisor/allocator.py, as is and
without those transients: the peak reserved over steps 2-4 in each, beside the fake step's.
"""

from __future__ import annotations

import collections
import gzip
import json
import math
from pathlib import Path

from advisor.allocator import CachingAllocator
from advisor.config import load, trial_spec
from advisor.fake_step import fake_step, replayed_reserved

RAW = Path(__file__).parent / "raw"
MiB = 2**20


def rounded(size: int) -> int:
    return (size + 511) // 512 * 512


def steady_replay(events: list, start: int, dropped: set[int]) -> int:
    """The allocator model's peak reserved from event `start` on, over the real trace less the
    allocations (and their frees) at the indices in `dropped`."""
    model, live, peak = CachingAllocator(), {}, 0
    dropped_addresses: dict[int, int] = {}
    for i, (action, address, size, _) in enumerate(events):
        if action == "alloc":
            if i in dropped:
                dropped_addresses[address] = i
                continue
            live[address] = model.malloc(size)
        elif action == "free_completed":
            if dropped_addresses.pop(address, None) is None and address in live:
                model.free(live.pop(address))
        elif action == "segment_free":
            model.release_free_segments()
        if i >= start:
            peak = max(peak, model.reserved)
    return peak


def transient_indices(events: list) -> list[int]:
    """Allocations of 32 MiB or more freed before the next allocation of 1 MiB or more."""
    found = []
    for i, e in enumerate(events):
        if e[0] != "alloc" or e[2] < 32 * MiB:
            continue
        for after in events[i + 1 :]:
            if after[0] == "alloc" and after[2] >= MiB:
                break
            if after[0] == "free_completed" and after[1] == e[1]:
                found.append(i)
                break
    return found


def main() -> None:
    for path in sorted(RAW.glob("stacks-*.json.gz")):
        with gzip.open(path, "rt") as source:
            trace = json.load(source)
        events = trace["events"]
        marks = [i for i, e in enumerate(events) if e[0] == "alloc" and "step_marker" in e[3]]
        step = events[marks[2] : marks[3]]
        spec = trial_spec(load(["device=cuda", *trace["spec"].split()]))
        fake = fake_step(spec)
        real = collections.Counter(rounded(e[2]) for e in step if e[0] == "alloc" and e[2] >= MiB)
        faked = collections.Counter(size for _, size in fake.trace if size >= MiB)
        for k in range(math.ceil(fake.update_ratio)):  # the update's temporaries, as replayed
            for size in fake.param_sizes:
                if (scaled := rounded(int(size * min(1.0, fake.update_ratio - k)))) >= MiB:
                    faked[scaled] += 1
        print(f"## {trace['spec']}")
        print(f"steady peak reserved {trace['steady_peak_reserved'] / 2**30:.2f} GiB; "
              f"allocations >= 1 MiB in one step: real {sum(real.values())} "
              f"({sum(k * v for k, v in real.items()) / 2**30:.2f} GiB), fake "
              f"{sum(faked.values())} ({sum(k * v for k, v in faked.items()) / 2**30:.2f} GiB)")  # fmt: skip
        print("sizes whose counts differ (MiB: real / fake):")
        for size in sorted(set(real) | set(faked), reverse=True):
            if real[size] != faked[size]:
                print(f"  {size / MiB:9.2f}: {real[size]:4d} / {faked[size]:4d}")
        transients: collections.Counter[tuple[float, str]] = collections.Counter()
        for i in transient_indices(step):
            e = step[i]
            transients[(round(e[2] / MiB, 2), e[3].split(" < ")[0] or "backward")] += 1
        print("transients >= 32 MiB (MiB, where: count):")
        for (size, where), n in sorted(transients.items(), reverse=True):
            print(f"  {size:9.2f} {where}: {n}")
        dropped = {marks[1] + i for i in transient_indices(events[marks[1] :])}
        print(f"steady peak reserved, GiB: real {trace['steady_peak_reserved'] / 2**30:.2f}; "
              f"model on the real trace {steady_replay(events, marks[1], set()) / 2**30:.2f}, "
              f"without the transients >= 32 MiB "
              f"{steady_replay(events, marks[1], dropped) / 2**30:.2f}; fake step replayed "
              f"{replayed_reserved(fake) / 2**30:.2f}")  # fmt: skip
        print()


if __name__ == "__main__":
    main()
