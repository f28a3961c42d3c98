"""The H200 evidence for `advisor run` (issue 2): every trial through the real runner, each in a
worker process of its own, stored in a real SQLite file; one JSON line per trial.

    python3 run.py OUT_DIR {gpu-a|gpu-b}

Part a: the bare CUDA context; resnet50 alone first; then resnet50 in fp32, bf16 and fp16, with
and without checkpointing, at batch 64 and 256, AdamW. Part b: gpt2 bf16 at batch 8 and 16,
vit_b_16 bf16 at 64, an oversized batch (expect oom, the run carries on), then the first spec of
each model measured again after all the others; the fp16 rows of part a again (see README.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from advisor.config import MeasureConfig, load, trial_spec
from advisor.runner import run_trial
from advisor.store.store import Store

PART_A = [("alone", ["model=resnet50", "batch_size=64", "precision=bf16"])] + [
    ("grid", ["model=resnet50", f"batch_size={b}", f"precision={p}", f"checkpointing={c}"])
    for p in ("fp32", "bf16", "fp16")
    for c in ("none", "blocks")
    for b in (64, 256)
]
PART_B = [
    ("grid", ["model=gpt2", "batch_size=8", "precision=bf16"]),
    ("grid", ["model=gpt2", "batch_size=16", "precision=bf16"]),
    ("grid", ["model=vit_b_16", "batch_size=64", "precision=bf16"]),
    ("oversized", ["model=resnet50", "batch_size=4096", "precision=fp32"]),
    ("after-others", ["model=resnet50", "batch_size=64", "precision=bf16"]),
    ("repeat", ["model=gpt2", "batch_size=8", "precision=bf16"]),
    ("repeat", ["model=vit_b_16", "batch_size=64", "precision=bf16"]),
] + [  # fp16 again: part a ran before warm-up waited for GradScaler's skipped steps
    ("grid", ["model=resnet50", f"batch_size={b}", "precision=fp16", f"checkpointing={c}"])
    for c in ("none", "blocks")
    for b in (64, 256)
]

BARE_CONTEXT = """
import json, os, torch
from advisor import gpus
before = gpus.device_used_bytes(0)
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
process = gpus.process_used_bytes(os.getpid(), 0)
device = gpus.device_used_bytes(0) - before
print(json.dumps({"nvml_process_bytes": process, "device_delta_bytes": device,
                  "reserved_bytes": torch.cuda.memory_reserved(0)}))
"""


def main() -> None:
    out, part = Path(sys.argv[1]), sys.argv[2]
    store = Store(f"sqlite:///{out / 'advisor.sqlite'}")
    lines = (out / f"results-{part}.jsonl").open("a")
    if part == "gpu-a":
        bare = subprocess.run([sys.executable, "-c", BARE_CONTEXT], capture_output=True, text=True)
        print(bare.stdout, bare.stderr, flush=True)
        lines.write(json.dumps({"tag": "bare-context", **json.loads(bare.stdout)}) + "\n")
    budget_s = float(os.environ.get("BUDGET_S", "480"))
    started = time.perf_counter()
    for tag, overrides in PART_A if part == "gpu-a" else PART_B:
        if time.perf_counter() - started > budget_s:
            print(f"budget spent: skipping {tag} {overrides}", flush=True)
            continue
        cfg = load(["device=cuda", *overrides])
        result = store.add(run_trial(trial_spec(cfg), MeasureConfig(**cfg.measure), 300))
        row = {"tag": tag, "overrides": overrides, **result.to_dict()}
        lines.write(json.dumps(row) + "\n")
        lines.flush()
        t = result.throughput
        print(
            f"{tag:12} {' '.join(overrides):60} {result.status.value:7} "
            f"{t.samples_per_s if t else 0:9.1f}/s  wall {result.wall_s:5.1f}s",
            flush=True,
        )


if __name__ == "__main__":
    main()
