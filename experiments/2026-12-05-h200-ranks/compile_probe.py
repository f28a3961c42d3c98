"""Why a compiled rank of DDP or FSDP2 on the fake group ran no faster than the eager one
(sweep: gpt2 b32 ddp at 8, 1,234.7 against 1,235.1 job samples/s), while one GPU's compiled
gpt2 runs about 2.5x its eager rate. Plain torch, gpt2 micro batch 8, bf16, fused AdamW, each
mode in a process of its own; dynamo's counters say what it compiled and where it broke:

    python compile_probe.py OUT.jsonl [MODE ...]   # each MODE (all unless given): eager,
                        # compile, ddp8, ddp8_compile, ddp8_compile_no_split, fsdp8_compile,
                        # ddp8_compile_blocks, fsdp8_compile_blocks, ddp8_compile_mode_step,
                        # fsdp8 (eager, added later: the compiled FSDP2 modes' baseline)

The *_compile_blocks modes compile each GPT2Block before wrapping (torchtitan's order), in
place of the whole wrapped model. ddp8_compile_mode_step runs the second warm-up step under a
dispatch mode that passes every operator through, as advisor's rank trial records a step's
collectives. peak_allocated_bytes is the timed steps' (the peak is reset after warm-up).
"""

# (no `from __future__ import annotations`: DDP reads the hook's annotations as objects)
import importlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

BATCH, SEQ, WARMUP, WINDOWS, STEPS = 8, 1024, 4, 3, 10
MODES = [
    "eager",
    "compile",
    "ddp8",
    "ddp8_compile",
    "ddp8_compile_no_split",
    "fsdp8_compile",
    "ddp8_compile_blocks",
    "fsdp8_compile_blocks",
    "ddp8_compile_mode_step",
    "fsdp8",
]


class PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def hand_back(state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


def one(mode: str) -> dict:
    import torch._dynamo
    from torch._dynamo.utils import counters
    from transformers import GPT2Config, GPT2LMHeadModel

    if mode.endswith("no_split"):
        torch._dynamo.config.optimize_ddp = False
    with torch.device("cuda"):
        model = GPT2LMHeadModel(GPT2Config(n_positions=SEQ, vocab_size=50257, use_cache=False))
    blocks = [m for m in model.modules() if type(m).__name__ == "GPT2Block"]
    if "compile_blocks" in mode:
        for block in blocks:
            block.compile()
    if mode.startswith(("ddp", "fsdp")):
        if "fake" not in dist.Backend.backend_list:
            importlib.import_module("torch.testing._internal.distributed.fake_pg")
        dist.init_process_group("fake", rank=0, world_size=8, store=dist.HashStore())
    if mode.startswith("ddp"):
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[0])
        model.register_comm_hook(None, hand_back)
    elif mode.startswith("fsdp"):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cuda", (8,))
        for block in blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    if "compile" in mode and "compile_blocks" not in mode:
        model = torch.compile(model)
    tokens = torch.randint(50257, (BATCH, SEQ), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for warmup in range(WARMUP):
        if warmup == 1 and mode.endswith("mode_step"):
            with PassThrough():
                step()
        else:
            step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    rates = []
    for _ in range(WINDOWS):
        started = time.perf_counter()
        for _ in range(STEPS):
            step()
        torch.cuda.synchronize()
        rates.append(BATCH * STEPS / (time.perf_counter() - started))
    return {"mode": mode, "samples_per_s": statistics.median(rates), "rates": rates,
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
            "graph_breaks": dict(counters["graph_break"]), "stats": dict(counters["stats"]),
            "torch": torch.__version__}  # fmt: skip


if __name__ == "__main__":
    out = sys.argv[1]
    if sys.argv[2:3] == ["--one"]:
        with open(out, "a") as f:
            f.write(json.dumps(one(sys.argv[3]), default=str) + "\n")
    else:
        for mode in sys.argv[2:] or MODES:
            subprocess.run([sys.executable, __file__, out, "--one", mode], check=False)
            print(Path(out).read_text().splitlines()[-1][:300], flush=True)
