"""What the kernels' own temporaries do to the reserve, read from the H100's real allocation
traces (../2026-12-05-h200-allocator-trace/raw/trace.tar, unpacked: TRACE_DIR/trace/...):
    python traces.py drop TRACE_DIR     # each kind of temporary left out, the trace replayed
    python traces.py drop-steady DIR    # the same, the first step's plan probe always left out
                                        # (DIR/trace/: raw/device/snapshots.tar's snapshots)
    python traces.py scale TRACE_DIR    # cuDNN's convolution workspaces scaled, replayed
    python traces.py sizes TRACE_DIR    # each kind's sizes, most common first
Replayed through advisor's model of the caching allocator (internal API on purpose: the
question is that model's input). A kind is told by the first frame past the allocator's own."""

import collections
import gzip
import json
import pickle
import sys
from collections.abc import Callable
from pathlib import Path

from advisor.estimation.allocator import CachingAllocator

KINDS = {  # the frame's text: the kind
    "gpu_reduce_kernel": "reduction partial sums",
    "run_conv_plan": "cuDNN convolution workspace",
    "generate_and_filter_plans": "cuDNN plan probe (first step)",
    "run_cudnn_SDP": "cuDNN attention workspace",
}


def kind(event: dict) -> str:
    frame = event["frames"][6]["name"] if len(event["frames"]) > 6 else ""
    return next((k for text, k in KINDS.items() if text in frame), "")


def replay(events: list[dict], size: Callable[[dict], int]) -> int:
    """Peak reserved of the trace through the model, each allocation resized (0: left out)."""
    model, blocks = CachingAllocator(), {}
    for event in events:
        action = event["action"]
        if action == "segment_free":
            model.release_free_segments()
        elif action == "alloc" and (n := size(event)) > 0:
            blocks[event["addr"]] = model.malloc(n, event["stream"])
        elif action == "free_completed" and event["addr"] in blocks:
            model.free(blocks.pop(event["addr"]))
    return model.peak_reserved


def traces(folder: Path) -> list[tuple[str, list[dict], int]]:
    rows = []
    for path in sorted((folder / "trace").glob("*.pickle.gz")):
        run = json.loads(path.with_name(path.name.replace(".pickle.gz", ".json")).read_text())
        if run.get("status") != "ok":
            continue
        events = pickle.loads(gzip.decompress(path.read_bytes()))["device_traces"][0]
        name = path.name.removesuffix(".pickle.gz")
        rows.append((name, events, run["memory"]["steady_peak_reserved_bytes"]))
    return rows


def drop(folder: Path) -> None:
    print("| spec | real trace | " + " | ".join(f"without {k}" for k in KINDS.values())
          + " | without all |\n|---|" + "---:|" * (len(KINDS) + 2))  # fmt: skip
    for name, events, measured in traces(folder):
        cells = [replay(events, lambda e: e["size"])]
        for k in KINDS.values():
            cells.append(replay(events, lambda e, k=k: 0 if kind(e) == k else e["size"]))
        cells.append(replay(events, lambda e: 0 if kind(e) else e["size"]))
        print(f"| {name} | " + " | ".join(f"{c / measured - 1:+.1%}" for c in cells) + " |")


def drop_steady(folder: Path) -> None:
    """As drop, the first step's plan probe left out of every replay: the steady figure it is
    compared with leaves the first step out."""
    probe = "cuDNN plan probe (first step)"
    others = [k for k in KINDS.values() if k != probe]
    print("| spec | real trace | " + " | ".join(f"without {k}" for k in others)
          + " |\n|---|" + "---:|" * (len(others) + 1))  # fmt: skip
    for name, events, measured in traces(folder):
        cells = [replay(events, lambda e: 0 if kind(e) == probe else e["size"])]
        for k in others:
            cells.append(replay(events, lambda e, k=k: 0 if kind(e) in (k, probe) else e["size"]))
        print(f"| {name} | " + " | ".join(f"{c / measured - 1:+.1%}" for c in cells) + " |")


def scale(folder: Path) -> None:
    factors = (0, 0.25, 0.5, 0.75, 1, 1.5, 2, 3)
    print("| spec | " + " | ".join(f"x{f}" for f in factors) + " |\n|---|" + "---:|" * len(factors))
    for name, events, measured in traces(folder):
        if not any(kind(e) == "cuDNN convolution workspace" for e in events if "frames" in e):
            continue
        cells = [replay(events, lambda e, f=f: int(e["size"] * f)
                        if kind(e) == "cuDNN convolution workspace" else e["size"])
                 for f in factors]  # fmt: skip
        print(f"| {name} | " + " | ".join(f"{c / measured - 1:+.1%}" for c in cells) + " |")


def sizes(folder: Path) -> None:
    for name, events, _ in traces(folder):
        seen: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for e in events:
            if e["action"] == "alloc" and kind(e):
                seen[kind(e)][e["size"]] += 1
        for k, counts in seen.items():
            print(f"{name}  {k}: {counts.most_common(4)}")


if __name__ == "__main__":
    commands = {"drop": drop, "drop-steady": drop_steady, "scale": scale, "sizes": sizes}
    commands[sys.argv[1]](Path(sys.argv[2]))
