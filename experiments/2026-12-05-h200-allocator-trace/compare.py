"""Each spec's real allocations (the memory snapshot of its run) against the estimate's fake step
(fake.jsonl), both replayed through advisor's model of the caching allocator:
    python compare.py TRACE_DIR            # the table: measured, real replayed, fake replayed
    python compare.py TRACE_DIR NAME       # one spec's allocations by size, real against fake
TRACE_DIR is measure.sh's trace/ folder (raw/trace.tar unpacked)."""

import collections
import gzip
import json
import pickle
import sys
from pathlib import Path

from advisor.estimation.allocator import CachingAllocator, round_size

GB = 1e9


def real_events(path: Path) -> list[dict]:
    snapshot = pickle.loads(gzip.decompress(path.read_bytes()))
    return snapshot["device_traces"][0]


def replay_real(events: list[dict]) -> tuple[int, int]:
    """The real trace through the model: its peak reserved, and the real trace's own (from its
    segment events). A real segment_free (cuDNN's benchmark, out of memory) gives back the
    model's free segments at the same point."""
    model, blocks = CachingAllocator(), {}
    reserved = real_peak = 0
    for event in events:
        action = event["action"]
        if action == "segment_alloc":
            reserved += event["size"]
            real_peak = max(real_peak, reserved)
        elif action == "segment_free":
            reserved -= event["size"]
            model.release_free_segments()
        elif action == "alloc":
            blocks[event["addr"]] = model.malloc(event["size"], event["stream"])
        elif action == "free_completed" and event["addr"] in blocks:
            model.free(blocks.pop(event["addr"]))
    return model.peak_reserved, real_peak


def fakes(folder: Path) -> dict[str, dict]:
    rows = [json.loads(line) for line in (folder / "fake.jsonl").read_text().splitlines()]
    return {row["spec"].replace(" ", "_").replace("=", "-"): row for row in rows}


def table(folder: Path) -> None:
    fake = fakes(folder)
    print(
        "| spec | measured steady reserved GB | real trace replayed | fake step replayed "
        "| fake / measured | fake peak allocated / measured |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for run in sorted(folder.glob("*.json")):
        if not run.stat().st_size or not (pickle_gz := run.with_suffix(".pickle.gz")).exists():
            continue
        said = json.loads(run.read_text())
        if said.get("status") != "ok" or run.stem not in fake or "error" in fake[run.stem]:
            continue
        memory = said["memory"]
        measured = memory["steady_peak_reserved_bytes"]
        replayed, _ = replay_real(real_events(pickle_gz))
        row = fake[run.stem]
        print(
            f"| {run.stem} | {measured / GB:.2f} | {replayed / GB:.2f} "
            f"({replayed / measured - 1:+.1%}) | {row['replayed_reserved'] / GB:.2f} "
            f"| {row['replayed_reserved'] / measured - 1:+.1%} "
            f"| {row['peak_allocated'] / memory['steady_peak_allocated_bytes'] - 1:+.1%} |"
        )


def by_size(folder: Path, name: str, steps: int = 3) -> None:
    """Allocations by rounded size: the real trace's (build and warm-up steps) against the fake
    step's times the steps, each with the Python line that made the first of them."""
    events = [e for e in real_events(folder / f"{name}.pickle.gz") if e["action"] == "alloc"]
    real = collections.Counter(round_size(e["size"]) for e in events)
    where = {}
    for e in events:
        frames = [f for f in e["frames"] if f["filename"].endswith(".py")][:2]
        where.setdefault(
            round_size(e["size"]),
            " < ".join(f"{f['filename'].split('/')[-1]}:{f['line']} {f['name']}" for f in frames)
            or "(C++)",
        )
    fake = collections.Counter(round_size(s) for _, s in fakes(folder)[name]["step"]["trace"]
                               if s >= 0)  # fmt: skip
    print(f"{'bytes':>15} {'real':>6} {'fake x' + str(steps):>8}  where (real)")
    for size in sorted(set(real) | set(fake), reverse=True):
        if size * abs(real[size] - steps * fake[size]) > 2**20 * steps:
            print(f"{size:>15,} {real[size]:>6} {steps * fake[size]:>8}  {where.get(size, '')}")


if __name__ == "__main__":
    if len(sys.argv) > 2:
        by_size(Path(sys.argv[1]), sys.argv[2])
    else:
        table(Path(sys.argv[1]))
