"""Issue 28's first check, in plain torch: does torch's fake process group at N=1 give the
plain step's memory (within 0.5%) and throughput (within 2%)? gpt2 (the catalog's shape, no
KV cache), micro batch 8 of 1,024 tokens, bf16 autocast, fused AdamW, trained as advisor's
trial trains it; DDP and FSDP2 wrapped as advisor's rank trial wraps them (DDP's comm hook
hands back the bucket, FSDP2 on each GPT2Block and then the root). Each mode in a process of
its own. The same wrappers on a real NCCL group of one rank (ddp_nccl, fsdp_nccl) tell what the
fake group changes from what a real group runs, and what NCCL's own memory is (the device's
used memory, outside the allocator):

    python fake_one.py OUT.jsonl              # plain, ddp, fsdp, ddp_nccl, fsdp_nccl, twice
    python fake_one.py OUT.jsonl MODE         # one mode (what the first form runs)
"""

# (no `from __future__ import annotations`: DDP reads the hook's annotations as objects)

import importlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

BATCH, SEQ, WARMUP, WINDOWS, STEPS = 8, 1024, 5, 5, 10


def hand_back(state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


def one(mode: str) -> dict:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    with torch.device("cuda"):
        model = GPT2LMHeadModel(GPT2Config(n_positions=SEQ, vocab_size=50257, use_cache=False))
    if mode.endswith("nccl"):
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", rank=0, world_size=1, store=dist.HashStore(),
                                device_id=torch.device("cuda", 0))  # fmt: skip
    elif mode != "plain":
        if "fake" not in dist.Backend.backend_list:
            importlib.import_module("torch.testing._internal.distributed.fake_pg")
        dist.init_process_group("fake", rank=0, world_size=1, store=dist.HashStore())
    if mode == "ddp_nccl":
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[0])  # (NCCL's own all-reduce)
    elif mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[0])
        model.register_comm_hook(None, hand_back)
    elif mode.startswith("fsdp"):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cuda", (1,))
        for block in [m for m in model.modules() if type(m).__name__ == "GPT2Block"]:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    tokens = torch.randint(50257, (BATCH, SEQ), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(WARMUP):
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
    stats = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    return {"mode": mode, "samples_per_s": statistics.median(rates), "rates": rates,
            "peak_allocated_bytes": stats["allocated_bytes.all.peak"],
            "peak_reserved_bytes": stats["reserved_bytes.all.peak"],
            "reserved_bytes": stats["reserved_bytes.all.current"],
            "device_used_bytes": total - free,
            "torch": torch.__version__}  # fmt: skip


if __name__ == "__main__":
    out = sys.argv[1]
    if len(sys.argv) > 2:
        with open(out, "a") as f:
            f.write(json.dumps(one(sys.argv[2])) + "\n")
    else:
        for mode in ("plain", "ddp", "fsdp", "ddp_nccl", "fsdp_nccl") * 2:
            subprocess.run([sys.executable, __file__, out, mode], check=True)
            print(Path(out).read_text().splitlines()[-1], flush=True)
