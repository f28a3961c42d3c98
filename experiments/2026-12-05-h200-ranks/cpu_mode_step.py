"""Does a compiled DDP rank on the fake group run eagerly after one step under a dispatch mode
(as advisor's rank trial records a warm-up step's collectives)? On the CPU, plain torch, a
2-layer GPT-2, DDP at 8 on the fake group, the second of 4 warm-up steps under a pass-through
mode or not; dynamo's counters after each, then samples/s over 3 windows of 10 steps:

    python cpu_mode_step.py plain|mode_step
"""

import importlib
import statistics
import sys
import time

import torch
import torch.distributed as dist
from compile_probe import PassThrough, hand_back  # (this folder's: the same mode and hook)
from torch._dynamo.utils import counters
from torch.nn.parallel import DistributedDataParallel
from transformers import GPT2Config, GPT2LMHeadModel


def main(mode: str) -> None:
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, n_positions=128, vocab_size=1000,
                        use_cache=False)  # fmt: skip
    model = GPT2LMHeadModel(config)
    if "fake" not in dist.Backend.backend_list:
        importlib.import_module("torch.testing._internal.distributed.fake_pg")
    dist.init_process_group("fake", rank=0, world_size=8, store=dist.HashStore())
    model = DistributedDataParallel(model)
    model.register_comm_hook(None, hand_back)
    optimizer = torch.optim.AdamW(model.parameters())
    compiled = torch.compile(model)
    tokens = torch.randint(1000, (8, 128))

    def step() -> None:
        compiled(input_ids=tokens, labels=tokens).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for warmup in range(4):
        if warmup == 1 and mode == "mode_step":
            with PassThrough():
                step()
        else:
            step()
        print(warmup, dict(counters["stats"]), flush=True)
    rates = []
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(10):
            step()
        rates.append(80 / (time.perf_counter() - started))
    print(mode, round(statistics.median(rates), 1), dict(counters["stats"]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
