"""Readings of this folder's raw files (no GPU):

python read.py spread    # each checking-set spec measured twice (raw/runs, raw/again/runs):
                         # device peak and peak allocated, second against first
python read.py choices   # the layer tables: the benchmark's plan in two processes
                         # (check-1, check-2), and the benchmark's against the heuristics'
python read.py stems     # 3x3 kernels over 3 channels: runs that took no workspace, the
                         # shapes and nets, and those that took one
python read.py strict    # strict fp32's forward workspaces against the bound the estimate
                         # takes (advisor's cuda_workspaces.strict_fp32_forward_bound), its
                         # grouped ones, and its gradients' largest
"""

import gzip
import json
import sys
from pathlib import Path

RAW = Path(__file__).resolve().parent / "raw"


def _rows(name: str) -> list[dict]:
    with gzip.open(RAW / name, "rt") as lines:
        return [json.loads(line) for line in lines][1:]


def spread() -> None:
    for first in sorted((RAW / "runs").glob("*.json")):
        a = json.loads(first.read_text())["memory"]
        b = json.loads((RAW / "again" / "runs" / first.name).read_text())["memory"]
        device = [m["steady_peak_reserved_bytes"] + m["context_bytes"] for m in (a, b)]
        allocated = [m["steady_peak_allocated_bytes"] for m in (a, b)]
        print(f"{first.stem:62} device peak {device[0] / 2**30:6.2f} {device[1] / 2**30:6.2f} GiB "
              f"({device[1] / device[0] - 1:+.1%}), peak allocated "
              f"{allocated[1] / allocated[0] - 1:+.1%}")  # fmt: skip


def _by_layer(name: str) -> dict[tuple, dict]:
    keys = ("precision", "x", "w", "stride", "padding", "groups")
    return {tuple(json.dumps(row[k]) for k in keys): row for row in _rows(name)}


def _compare(one: dict, other: dict, label: str) -> None:
    same, differ = 0, []
    for key, row in one.items():
        for run, sizes in row["runs"].items() if key in other else ():
            mine, theirs = max(sizes, default=0), max(other[key]["runs"][run], default=0)
            same += mine == theirs
            if mine != theirs:
                differ.append((abs(mine - theirs), key[0], key[1], key[2], run, mine, theirs))
    print(f"{label}: {same} runs the same workspace, {len(differ)} another; the largest:")
    for _gap, precision, x, w, run, mine, theirs in sorted(differ, reverse=True)[:6]:
        print(f"  {json.loads(precision)} x={x} w={w} {run}: {mine:,} against {theirs:,}")


def choices() -> None:
    one, two = _by_layer("check-1.jsonl.gz"), _by_layer("check-2.jsonl.gz")
    _compare(one, two, "benchmark, two processes (check-1 against check-2)")
    _compare(two, _by_layer("check-heuristics.jsonl.gz"), "benchmark against heuristics")


def stems() -> None:
    forward, weight, shapes, nets, others = [0, 0], [0, 0], set(), set(), []
    for name in sorted(p.name for p in RAW.glob("*.jsonl.gz")):
        for row in _rows(name):
            if row["x"][1] != 3 or row["w"][2:] != [3, 3] or row["precision"] == "fp32":
                continue
            shapes.add((row["precision"], tuple(row["w"]), tuple(row["stride"])))
            nets.update(net.split("@")[0] for net in row["nets"])
            forward[0] += not row["runs"]["forward"]
            forward[1] += 1
            if row["runs"]["forward"]:
                others.append((name, row["nets"][0], row["runs"]["forward"]))
            if row["precision"] == "tf32":
                weight[0] += not row["runs"]["weight"]
                weight[1] += 1
    print(f"3x3 over 3 channels, 16 bits and TF32: no forward workspace in {forward[0]} of "
          f"{forward[1]} runs; TF32, no weight-gradient workspace in {weight[0]} of {weight[1]}")  # fmt: skip
    print(f"{len(shapes)} (precision, weight, stride) shapes of {len(nets)} nets: {sorted(nets)}")
    for name, net, sizes in others:
        print(f"  a forward workspace: {name} {net} {sizes}")


def strict() -> None:
    import torch

    from advisor.estimation.cuda_workspaces import strict_fp32_forward_bound

    forwards, gradients, grouped = [], [], [0, 0]
    for name in sorted(p.name for p in RAW.glob("*.jsonl.gz")):
        for row in _rows(name):
            if row["precision"] != "fp32":
                continue
            if row["groups"] != 1:
                grouped[0] += sum(max(sizes, default=0) for sizes in row["runs"].values())
                grouped[1] += max(row["runs"]["forward"], default=0)
                continue
            x, w = (torch.empty(row[k], device="meta") for k in ("x", "w"))
            geometry = (row["stride"], row["padding"], row["dilation"], False, [0, 0], 1)
            y = torch.ops.aten.convolution(x, w, None, *geometry)
            taken = {run: max(sizes, default=0) for run, sizes in row["runs"].items()}
            bound = strict_fp32_forward_bound(x, w, y)
            forwards.append((taken.pop("forward") / bound, name, row["x"], row["w"]))
            io = (x.numel() + y.numel()) * 4
            gradients += [(size, size / io, name, run, row["x"], row["w"]) for run, size in
                          taken.items()]  # fmt: skip
    print(f"{len(forwards)} forwards of dense convolutions in strict fp32; the largest against "
          "strict_fp32_forward_bound:")  # fmt: skip
    for ratio, name, x, w in sorted(forwards, reverse=True)[:3]:
        print(f"  {ratio:.2f} {name} x={x} w={w}")
    print(f"grouped: {grouped[0]:,} bytes over all their runs, {grouped[1]:,} in forwards")
    print(f"{len(gradients)} gradient runs; the largest, and as multiples of input + output:")
    for size, io, name, run, x, w in sorted(gradients, reverse=True)[:5]:
        print(f"  {size:,} ({io:.2f}) {name} {run} x={x} w={w}")


if __name__ == "__main__":
    {"spread": spread, "choices": choices, "stems": stems, "strict": strict}[sys.argv[1]]()
