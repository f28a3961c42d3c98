"""A compiled spec's real allocations beside the fake step's: the real step's reserve, the real
steady step replayed through advisor's allocator model (is the model right, given the right
allocations?), and the fake step's replay (are the allocations right?), with the sizes each
allocated more of. Internal API (the fake step and the allocator model): the question is theirs.

    python compare.py NAME SNAPSHOT [FAKE.pickle]

SNAPSHOT: a real run's memory snapshot whose trace holds at least its last step
(history.py's, or ../2026-12-06-compiled-partitions' step-3 ones). The fake step is made
afresh (with this machine's torch: the truth's was 2.11), or read from FAKE.pickle if it exists,
and kept there.
"""

import collections
import gzip
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from history import partitions  # noqa: E402  (with history's two more specs)

from advisor.estimation.allocator import CachingAllocator  # noqa: E402
from advisor.estimation.fake_step import fake_step, replayed_reserved  # noqa: E402

GB = 1e9


def last_step(snapshot: dict) -> list[dict]:
    """The trace's last step: from the last allocation of the step's first tensor's size at
    its address (the trace repeats each step's allocations at the same addresses)."""
    trace = [e for e in snapshot["device_traces"][0] if e["action"] in ("alloc", "free_completed")]
    allocations = [i for i, e in enumerate(trace) if e["action"] == "alloc"]
    if not any(e["action"] == "segment_alloc" for e in snapshot["device_traces"][0]):
        return trace  # a step-3 snapshot: its trace is the step
    first = trace[allocations[-1]]
    # a steady step's allocations repeat: find where the last one's sequence began
    sizes = [trace[i]["size"] for i in allocations]
    for length in range(len(sizes) // 3, 10, -1):
        if sizes[-length:] == sizes[-2 * length : -length]:
            return trace[allocations[-length] :]
    raise SystemExit(f"no repeating step in the trace (its last allocation: {first['size']})")


def real_replayed(snapshot: dict, step: list[dict], times: int = 3) -> int:
    """The real step's allocations replayed through the model, after the blocks it found live."""
    traced = {e["addr"] for e in step if e["action"] == "alloc"}
    allocator, live = CachingAllocator(), {}
    for segment in snapshot["segments"]:
        address = segment["address"]
        for block in segment["blocks"]:
            if block["state"] == "active_allocated" and address not in traced:
                live[address] = allocator.malloc(block["size"])
            address += block["size"]
    for _ in range(times):
        for event in step:
            if event["action"] == "alloc":
                live[event["addr"]] = allocator.malloc(event["size"])
            elif event["addr"] in live:
                allocator.free(live.pop(event["addr"]))
    return allocator.peak_reserved


def main(name: str, snapshot_path: str, fake_path: str | None = None) -> None:
    with gzip.open(snapshot_path) as file:
        snapshot = pickle.load(file)
    step = last_step(snapshot)
    if fake_path and Path(fake_path).exists():
        fake = pickle.loads(Path(fake_path).read_bytes())
    else:
        fake = fake_step(partitions.spec_of(name, "cuda"))
        if fake_path:
            Path(fake_path).write_bytes(pickle.dumps(fake))
    reserved = sum(s["total_size"] for s in snapshot["segments"])
    print(f"{name}: real reserved {reserved / GB:.3f} GB; the real step replayed "
          f"{real_replayed(snapshot, step) / GB:.3f}; the fake step replayed "
          f"{replayed_reserved(fake) / GB:.3f}")  # fmt: skip

    def rounded(n: int) -> int:
        return max(512, -(-n // 512) * 512)

    real = collections.Counter(rounded(e["size"]) for e in step if e["action"] == "alloc")
    faked = collections.Counter(rounded(size) for _, size in fake.trace if size >= 0)
    for label, sizes in (("real", real), ("fake", faked)):
        print(
            f"  {label}: {sum(sizes.values())} allocations, {sum(k * v for k, v in sizes.items()) / GB:.2f} GB"
        )
    print("  sizes allocated a different number of times (MiB: real, fake), the largest 25:")
    differing = [k for k in sorted(set(real) | set(faked), reverse=True) if real[k] != faked[k]]
    for size in differing[:25]:
        print(f"    {size / 2**20:9.2f}: {real[size]:4d} {faked[size]:4d}")


if __name__ == "__main__":
    main(*sys.argv[1:])
