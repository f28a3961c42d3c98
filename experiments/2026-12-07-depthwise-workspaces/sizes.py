"""Whether each depthwise kernel's weight gradient, on a channels-last input in 16 bits, took a
workspace of 32 bytes a sample, channel and tap, the channels rounded up to 32: the sizes the
rule gives for a model's depthwise layers, counted among a real step's allocations, beside the
sizes of the same rule with the channels unrounded.

    python sizes.py

Reads the compiled EfficientNet-B0's histories (b256, their steady steps): the H200's
(../2026-12-06-compiled-device-peak/raw/efficientnet_b0-history.pickle.gz) and the H100's (in
../2026-12-07-inductor-code/raw/code.tar.gz); and the H100's eager ShuffleNet-V2 snapshot
(b128, in ../2026-12-06-channels-last-range/raw/runs.tar, every step of the run). Models built
on the meta device, no weights."""

from __future__ import annotations

import collections
import gzip
import io
import pickle
import sys
import tarfile
from pathlib import Path

import timm
import torch
import torchvision

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-12-06-compiled-device-peak"))
from compare import last_step  # noqa: E402

SHUFFLENET = "runs/shufflenet_v2_precision-bf16_batch_size-128_channels_last-true.pickle.gz"


def packed(tar_path: Path, member: str) -> dict:
    """A gzipped pickle kept inside a tar."""
    with tarfile.open(tar_path) as tar:
        file = tar.extractfile(member)
        assert file is not None
        with gzip.open(io.BytesIO(file.read())) as unzipped:
            return pickle.load(unzipped)


def depthwise(model: torch.nn.Module) -> list[tuple[int, int]]:
    """(channels, taps) of each depthwise 2-d kernel."""
    return [(m.in_channels, m.kernel_size[0] * m.kernel_size[1]) for m in model.modules()
            if isinstance(m, torch.nn.Conv2d) and m.groups == m.in_channels == m.out_channels > 1]  # fmt: skip


def check(label: str, model: torch.nn.Module, batch: int, allocations: list[int]) -> None:
    seen = collections.Counter(allocations)
    layers = collections.Counter(depthwise(model))
    print(f"{label}: {sum(layers.values())} depthwise layers, {len(allocations)} allocations")
    for (channels, taps), count in sorted(layers.items()):
        rounded = batch * (-(-channels // 32) * 32) * taps * 32
        unrounded = batch * channels * taps * 32
        print(f"  {channels:5d} channels, {taps:2d} taps, {count} layer(s): {rounded:>11,} bytes "
              f"seen {seen[rounded]:3d}; unrounded {unrounded:>11,} seen {seen[unrounded]:3d}")  # fmt: skip


def main() -> None:
    with torch.device("meta"):
        efficientnet = timm.create_model("efficientnet_b0", pretrained=False)
        shufflenet = torchvision.models.shufflenet_v2_x1_0()
    history = HERE.parent / "2026-12-06-compiled-device-peak/raw/efficientnet_b0-history.pickle.gz"
    with gzip.open(history) as file:
        step = last_step(pickle.load(file))
    check("EfficientNet-B0, compiled, H200, its steady step", efficientnet, 256,
          [e["size"] for e in step if e["action"] == "alloc"])  # fmt: skip
    code = HERE.parent / "2026-12-07-inductor-code/raw/code.tar.gz"
    step = last_step(packed(code, "./efficientnet_b0-history.pickle.gz"))
    check("EfficientNet-B0, compiled, H100, its steady step", efficientnet, 256,
          [e["size"] for e in step if e["action"] == "alloc"])  # fmt: skip
    snapshot = packed(HERE.parent / "2026-12-06-channels-last-range/raw/runs.tar", SHUFFLENET)
    check("ShuffleNet-V2, eager, H100, the whole run", shufflenet, 128,
          [e["size"] for e in snapshot["device_traces"][0] if e["action"] == "alloc"])  # fmt: skip


if __name__ == "__main__":
    main()
