"""cuDNN's weight-gradient workspaces in a channels-first VGG11 (bf16 b64, default b32), read
from the fourth set's H100 snapshots (../2026-12-06-cudnn-2d-workspaces/raw/runs.tar, unpacked
into DIR): each size of the steady half against the layer whose input + weight + output (16
bits: channels padded to 8) it exceeds least, the excess in fp32 copies of that weight.

    python workspaces.py DIR/runs/vgg11_bn_precision-bf16_batch_size-64.pickle.gz 64 2
"""

import collections
import gzip
import pickle
import sys
from pathlib import Path

import torch
import torchvision

path, batch, element = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
model = torchvision.models.vgg11_bn().to("meta")
layers = []


def padded(t: torch.Tensor) -> int:
    return t.numel() // t.size(1) * -(-t.size(1) // 8) * 8 * element


def seen(module: torch.nn.Module, args: tuple, out: torch.Tensor) -> None:
    x, w = args[0], module.weight
    layers.append((module.label, tuple(w.shape), padded(x) + padded(w) + out.numel() * element,
                   w.numel() * 4))  # fmt: skip


for label, module in model.named_modules():
    if isinstance(module, torch.nn.Conv2d):
        module.label = label
        module.register_forward_hook(seen)
model(torch.empty(batch, 3, 224, 224, device="meta"))
trace = pickle.loads(gzip.decompress(Path(path).read_bytes()))["device_traces"][0]
counts: collections.Counter = collections.Counter()
for e in trace[len(trace) // 2 :]:
    frames = [f["name"] for f in e.get("frames", [])]
    conv = any("run_conv_plan" in f for f in frames[:10])
    other_run = any("forward_out" in f or "backward_input" in f for f in frames)
    if e["action"] == "alloc" and conv and not other_run:  # a weight gradient's
        counts[e["size"]] += 1
for size, n in sorted(counts.items(), reverse=True):
    label, shape, tensors, weight32 = min(
        (layer for layer in layers if layer[2] <= size), key=lambda layer: size - layer[2]
    )
    excess = size - tensors
    print(f"{size:>13,} x{n}  {label} {shape}: tensors {tensors:,} + {excess:,} "
          f"= {excess / weight32:.2f} fp32 weights")  # fmt: skip
