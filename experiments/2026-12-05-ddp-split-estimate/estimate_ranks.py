"""The uncalibrated estimate (public API, an empty database) of the two compiled DDP ranks
measured on an H100 (torch 2.11, transformers 5.17), against their measured steady peaks:
- the 1.1B Llama, DDP at 2, micro batch 4 (../2026-12-05-allocator-ties/raw/ranks);
- gpt2, DDP at 8, micro batch 32 (../2026-12-05-h200-ranks/raw/recheck).
    python estimate_ranks.py > raw/NAME.txt     (with the advisor to check first on PYTHONPATH)
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import advisor

EXPERIMENTS = Path(__file__).resolve().parent.parent
RANKS = [
    ("llama_1b ddp/2 b4",
     EXPERIMENTS / "2026-12-05-allocator-ties" / "raw" / "ranks" / "ddp2-compiled.json",
     [f"workload={EXPERIMENTS / '2026-12-05-h200-ranks' / 'llama_1b.py'}:workload",
      "batch_size=4", "gpus=2"]),
    ("gpt2 ddp/8 b32",
     EXPERIMENTS / "2026-12-05-h200-ranks" / "raw" / "recheck" / "ddp8-b32-compiled.json",
     ["model=gpt2", "batch_size=32", "gpus=8"]),
]  # fmt: skip
COMMON = ["precision=bf16", "optimizer=adamw_fused", "strategy=ddp", "compile=true",
          "gpu=h100_80gb"]  # fmt: skip

if __name__ == "__main__":
    print(f"advisor from {Path(advisor.__file__).parent}")
    for name, truth_path, overrides in RANKS:
        truth = json.loads(truth_path.read_text())["memory"]
        device = truth["steady_peak_reserved_bytes"] + truth["context_bytes"]
        with tempfile.TemporaryDirectory() as empty:
            started = time.perf_counter()
            memory = advisor.estimate(
                overrides=[*overrides, *COMMON, f"db_url=sqlite:///{empty}/fresh.sqlite"]
            ).to_dict()["memory"]
        allocated = memory["peak_allocated_bytes"] / truth["steady_peak_allocated_bytes"] - 1
        print(f"{name}: measured {truth['steady_peak_allocated_bytes'] / 2**30:.2f} GiB "
              f"allocated, {device / 2**30:.2f} GiB device; estimate {allocated:+.1%} "
              f"allocated, {memory['device_peak_bytes'] / device - 1:+.1%} device "
              f"({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
