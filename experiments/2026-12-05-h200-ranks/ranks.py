"""Issue 28 on one H200: one rank of a job on N GPUs, measured on torch's fake process group.

    python ranks.py shards DB_URL OUT.json    # gpt2 and the 1.1B Llama: one GPU, DDP at 2,
                                              # FSDP2 at 2, 4 and 8 (eager; gpt2 compiled at 8)
    python ranks.py sweep DB_URL OUT.json     # advisor sweep gpus=8 of gpt2, timed

`shards` holds each rank's parameters, gradients and optimizer state against the 1/N shard
sizes worked out from the model's parameter shapes (FSDP2 pads each parameter's first
dimension to a multiple of N; rank 0 holds the first chunk), its activations against the
one-GPU trial's at the same micro batch, and writes every figure, with the collectives'
bytes and the job's step modelled over the H200's published link, as JSON. Public API only.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import torch

import advisor

HERE = Path(__file__).parent
LLAMA = f"{HERE / 'llama_1b.py'}:workload"
MODELS = {  # name: (how advisor.run names it, its micro batch)
    "gpt2": ({"model": "gpt2"}, 8),
    "llama_1b": ({"workload": LLAMA}, 4),
}
SETTING = {"precision": "bf16", "optimizer": "adamw_fused"}


def parameter_shapes(name: str) -> list[tuple[int, ...]]:
    """The model's parameter shapes, built on the meta device (no memory)."""
    with torch.device("meta"):
        if name == "gpt2":
            from transformers import GPT2Config, GPT2LMHeadModel

            model = GPT2LMHeadModel(GPT2Config())  # the catalog's gpt2: 124M, its defaults
        else:
            sys.path.insert(0, str(HERE))
            from llama_1b import build

            model = build()
    return [tuple(p.shape) for p in model.parameters()]


def rank0_bytes(shapes: list[tuple[int, ...]], n: int, size: int = 4) -> int:
    """Rank 0's shards of fp32 parameters: each first dimension padded to a multiple of n."""
    return size * sum(math.ceil(s[0] / n) * math.prod(s[1:]) for s in shapes)


def figures(result) -> dict:  # (a TrialResult)
    said = result.to_dict()
    return {"status": said["status"], "spec": said["spec"], "memory": said["memory"],
            "throughput": said["throughput"], "failure": said["failure"]}  # fmt: skip


def shards(db_url: str, out: str) -> None:
    rows = []
    for name, (names, batch) in MODELS.items():
        shapes = parameter_shapes(name)
        plans = [(1, None, False), (2, "ddp", False), (2, "fsdp", False), (4, "fsdp", False),
                 (8, "fsdp", False)] + ([(8, "fsdp", True)] if name == "gpt2" else [])  # fmt: skip
        for gpus, strategy, compiled in plans:
            extra = {"gpus": gpus, "strategy": strategy} if gpus > 1 else {}
            started = time.perf_counter()
            result = advisor.run(**names, batch_size=batch, compile=compiled, db_url=db_url,
                                 **SETTING, **extra)  # fmt: skip
            row = {"model": name, "gpus": gpus, "strategy": strategy, "compile": compiled,
                   "wall_s": time.perf_counter() - started,
                   "expected_shard_bytes": rank0_bytes(shapes, gpus if strategy == "fsdp" else 1),
                   **figures(result)}  # fmt: skip
            rows.append(row)
            print(name, gpus, strategy, compiled, result.status.value,
                  result.memory and result.memory.params_bytes, row["expected_shard_bytes"],
                  round(result.samples_per_s, 1), flush=True)  # fmt: skip
    Path(out).write_text(json.dumps(rows, indent=1))


def sweep(db_url: str, out: str) -> None:
    """advisor sweep gpus=8 of gpt2 at a global batch of 256, timed as a user runs it."""
    started = time.perf_counter()
    ran = subprocess.run(
        [sys.executable, "-m", "advisor", "sweep", "model=gpt2", "gpu=h200", "gpus=8",
         "effective_batch_size=256", "minutes=7", "emit=torch", f"db_url={db_url}"],
        capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - started
    Path(out).write_text(
        json.dumps(
            {"rc": ran.returncode, "wall_s": wall, "emitted": ran.stdout, "report": ran.stderr},
            indent=1,
        )
    )
    print("sweep", ran.returncode, round(wall, 1), flush=True)


if __name__ == "__main__":
    {"shards": shards, "sweep": sweep}[sys.argv[1]](sys.argv[2], sys.argv[3])
