"""Why gpt2 with torch.compile and checkpointing crashes on the GPU (seen in
../2026-11-30-h200-sweep-capped): the full traceback, then variants.

    python3 probe.py > probe.log 2>&1

Each variant builds advisor's workload for gpt2 bf16 batch 4 with checkpointing and compile,
changes one thing (or none), and runs three training steps; it prints ok or the whole traceback.
"""

from __future__ import annotations

import traceback

import torch

from advisor.config import load, trial_spec
from advisor.workload import build, train_step

SPEC = ["device=cuda", "model=gpt2", "batch_size=4", "precision=bf16", "compile=true",
        "checkpointing=blocks"]  # fmt: skip


def as_advisor_runs_it() -> None:
    w = build(trial_spec(load(SPEC)), torch.device("cuda"))
    for _ in range(3):
        train_step(w)


def eager_attention() -> None:
    import transformers

    original = transformers.GPT2Config.__init__

    def eager(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._attn_implementation = "eager"

    transformers.GPT2Config.__init__ = eager
    try:
        as_advisor_runs_it()
    finally:
        transformers.GPT2Config.__init__ = original


def main() -> None:
    print(f"torch {torch.__version__}", flush=True)
    for variant in (as_advisor_runs_it, eager_attention):
        torch._dynamo.reset()
        try:
            variant()
            print(f"{variant.__name__}: ok", flush=True)
        except Exception:
            print(f"{variant.__name__}: failed\n{traceback.format_exc()}", flush=True)


if __name__ == "__main__":
    main()
