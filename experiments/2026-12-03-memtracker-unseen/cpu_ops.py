"""Which kernels the CPU runs where MemTracker is off by more than [-2%, +5%] of the H200's peak
allocated: one forward and backward at batch size 2 of each such eager spec, set up as
memtracker.py sets it up (fake CPU tensors), its attention, softmax, dropout and normalisation
ops counted with their output dtype.

    PYTHONPATH=/tmp/libs517 python cpu_ops.py > raw/cpu-ops.jsonl
"""

from __future__ import annotations

import collections
import contextlib
import json
import sys
from typing import Any

import memtracker
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

WORDS = ("attention", "softmax", "dropout", "bernoulli", "norm", "grouped_mm", "nll_loss")


class CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        name = str(func.overloadpacket.__name__)
        if any(word in name for word in WORDS):
            dtypes = sorted({str(t.dtype)[6:] for t in tree_leaves(out) if torch.is_tensor(t)})
            self.counts[f"{name} -> {','.join(dtypes)}"] += 1
        return out


def off_specs() -> list[tuple[str, str, list[str]]]:
    """The eager specs whose MemTracker peak is outside [-2%, +5%] of the H200's peak allocated."""
    tracked = memtracker.jsonl(memtracker.HERE / "raw" / "memtracker.jsonl")
    chosen = []
    for chosen_set, name, settings in memtracker.specs():
        run = memtracker.run_name(name, settings)
        row, truth = tracked.get(run), memtracker.truth(run)
        if row is None or "error" in row or truth is None or "compile=true" in settings:
            continue
        if not -0.02 <= row["peak_bytes"] / truth[0] - 1 <= 0.05:
            chosen.append((chosen_set, name, settings))
    return chosen


def ops(chosen_set: str, name: str, settings: list[str]) -> dict[str, Any]:
    small = [s for s in settings if not s.startswith("batch_size=")] + ["batch_size=2"]
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    t = memtracker.fake_training(mode, chosen_set, name, small)
    counter = CountOps()
    with mode, counter:
        with t["autocast"]():
            loss = t["work"].compute_loss(t["model"], t["batch"])
        loss.backward()
    return dict(sorted(counter.counts.items()))


def main() -> None:
    for chosen_set, name, settings in off_specs():
        row: dict[str, Any] = {"run": memtracker.run_name(name, settings)}
        try:
            with contextlib.redirect_stdout(sys.stderr):
                row["ops"] = ops(chosen_set, name, settings)
        except Exception as error:
            row["error"] = f"{type(error).__name__}: {memtracker.one_line(error)[:200]}"
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
