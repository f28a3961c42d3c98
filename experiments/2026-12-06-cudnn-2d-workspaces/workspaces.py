"""What cuDNN's convolution workspaces held, read from the H100's memory snapshots of
../2026-12-05-cudnn-workspaces/raw/device/snapshots.tar (unpacked into DIR):

    python workspaces.py sizes DIR/NAME.pickle.gz MODEL BATCH BYTES   # MODEL: resnet50 | unet
    python workspaces.py peak DIR/NAME.pickle.gz                      # what the peak holds

`sizes`: each workspace size of the snapshot's later half (its steady steps), by run (forward,
backward's input or weight gradient), how many times it was asked for, and which of the model's
convolutions it equals: its input (x, or x8 with the channels padded to 8), weight (w, w8) and
output (y) in BYTES an element, plus 0 to 400 bytes. `peak`: the allocation the steady peak
allocated was reached at, and the C++ frame that asked for it."""

from __future__ import annotations

import collections
import gzip
import pickle
import sys
from pathlib import Path

import torch
import torchvision

HERE = Path(__file__).resolve().parent
EXTRAS = (0, 16, 147, 272, 400)


def events(path: str) -> list[dict]:
    return pickle.loads(gzip.decompress(Path(path).read_bytes()))["device_traces"][0]


def model_and_input(name: str, batch: int) -> tuple[torch.nn.Module, tuple]:
    if name == "resnet50":
        return torchvision.models.resnet50(), (torch.empty(batch, 3, 224, 224, device="meta"),)
    sys.path.insert(0, str(HERE.parent / "2026-12-03-h200-unseen-models" / "heldout"))
    import unet_ddpm  # noqa: PLC0415 (the held-out workload, from its own folder)

    images = torch.empty(batch, 3, 64, 64, device="meta")
    return unet_ddpm.build(), (images, torch.zeros(batch, dtype=torch.long, device="meta"))


def candidates(name: str, batch: int, element: int) -> dict[int, set[str]]:
    """Each sum of a convolution's tensors: what it names."""
    model, inputs = model_and_input(name, batch)
    model = model.to("meta")
    sums: dict[int, set[str]] = collections.defaultdict(set)

    def padded(t: torch.Tensor) -> int:
        return t.numel() // t.size(1) * -(-t.size(1) // 8) * 8 * element

    def seen(module: torch.nn.Module, args: tuple, out: torch.Tensor) -> None:
        x, w = args[0], module.weight
        sizes = {"x": x.numel() * element, "x8": padded(x), "w": w.numel() * element,
                 "w8": padded(w), "y": out.numel() * element}  # fmt: skip
        shape = f"{module.label}{tuple(w.shape)}s{module.stride[0]}"
        for terms in ("x+w+y", "x8+w8+y", "x+y", "x+w", "w+y", "x", "y", "w"):
            total = sum(sizes[t] for t in terms.split("+"))
            sums[total].add(f"{shape}:{terms}")

    for label, module in model.named_modules():
        if isinstance(module, torch.nn.Conv2d):
            module.label = label
            module.register_forward_hook(seen)
    model(*inputs)
    return sums


def run_of(frames: list[str]) -> str:
    if any("forward_out" in f for f in frames):
        return "forward"
    return "input grad" if any("backward_input" in f for f in frames) else "weight grad"


def sizes(path: str, name: str, batch: int, element: int) -> None:
    sums, trace = candidates(name, batch, element), events(path)
    counts: collections.Counter = collections.Counter()
    for e in trace[len(trace) // 2 :]:
        frames = [f["name"] for f in e.get("frames", [])]
        if e["action"] == "alloc" and any("run_conv_plan" in f for f in frames[:10]):
            counts[(run_of(frames), e["size"])] += 1
    for (run, size), n in sorted(counts.items(), key=lambda kv: -kv[0][1]):
        named = next(((x, sorted(sums[size - x])[:2]) for x in EXTRAS if size - x in sums), None)
        said = f"= {' or '.join(named[1])} + {named[0]}" if named else "(no sum of one kernel's)"
        print(f"{run:11s} {size:>13,} x{n:<3} {said}")


def peak(path: str) -> None:
    trace, live, held, top = events(path), 0, {}, (0, -1)
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            live, held[e["addr"]] = live + e["size"], e["size"]
        elif e["action"] == "free_completed" and e["addr"] in held:
            live -= held.pop(e["addr"])
        if i >= len(trace) // 2 and live > top[0]:
            top = (live, i)
    e = trace[top[1]]
    frame = next((f["name"] for f in e["frames"] if "at::native" in f["name"]), "?")
    print(f"{Path(path).name}: steady peak {top[0]:,} bytes at a {e['size']:,}-byte {e['action']}"
          f" by {frame[:100]}")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1] == "sizes":
        sizes(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        peak(sys.argv[2])
