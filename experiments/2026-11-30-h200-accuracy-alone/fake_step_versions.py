"""The fake step under this machine's torch, to compare across versions (issue 4).

    python3 fake_step_versions.py > fake_step-TORCH.txt

The fake step's attention runs the meta functions of CUDA's kernels, which are torch's
internals: this prints, per spec, what the step traces and what its replay reserves, so the
output under the device's torch 2.11 and this machine's 2.14 can be set side by side.
"""

from __future__ import annotations

import time

import torch

from advisor.config import load, trial_spec
from advisor.fake_step import fake_step, replayed_reserved

SPECS = [
    "model=gpt2 precision=bf16 batch_size=8",
    "model=gpt2 precision=fp32 checkpointing=blocks batch_size=4",
    "model=vit_b_16 precision=bf16 checkpointing=blocks batch_size=32",
    "model=vit_b_16 precision=fp32 batch_size=32",
    "model=resnet50 precision=fp16 checkpointing=blocks batch_size=64",
]


def main() -> None:
    print(f"torch {torch.__version__}")
    for overrides in SPECS:
        started = time.perf_counter()
        step = fake_step(trial_spec(load(["device=cuda", *overrides.split()])))
        print(f"{overrides}: {len(step.trace)} events, peak allocated {step.peak_allocated_bytes}, "
              f"replayed {replayed_reserved(step)}, {time.perf_counter() - started:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
