"""A user's plain training loop with advisor's OOM fallback, held to advisor's memory cap on the
CPU (the address space it may add): its samples grow long at step LONG_FROM (a longer batch, as
in a real run), which the first split's micro batch cannot hold. Run by test_oom_fallback.py:

    python fallback_loop.py OUT.json [RANK WORLD INIT_FILE]

With a rank, it joins a gloo group of WORLD and only rank 1's samples grow long. It writes what
it did: each finished step's sample ids, each micro batch's weight, the splits and fallbacks.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from advisor.config import load, trial_spec
from advisor.in_training.oom_fallback import OOMFallback, Split
from advisor.trial.out_of_memory import apply_memory_cap

STEPS, LONG_FROM = 8, 5
SAMPLES = 32  # a step's samples on each rank
SHORT, LONG = 8, 4096  # tokens a sample
CAP = 160 * 2**20  # the address space the loop may add once built


class Tokens(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.up, self.down, self.head = nn.Linear(32, 256), nn.Linear(256, 32), nn.Linear(32, 4)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.down(F.gelu(self.up(self.embed(tokens))))
        return self.head(hidden.mean(dim=1))


def main(out: str, rank: int = 0, world: int = 1, init_file: str = "") -> None:
    torch.manual_seed(rank)
    torch.set_num_threads(1)  # (threads' stacks would take the cap's address space)
    if world > 1:
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                                world_size=world)  # fmt: skip
    model = Tokens()
    if world > 1:  # (gloo's threads and buffers made before the cap, not counted in it)
        dist.all_reduce(torch.zeros(1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    spec = trial_spec(load(["model=tiny_mlp", "device=cpu"]))
    apply_memory_cap(dataclasses.replace(spec, memory_cap_bytes=CAP))

    counted: list[list[int]] = []  # each finished step's sample ids
    weights: list[list[float]] = []
    pending_ids: list[int] = []
    pending_weights: list[float] = []

    def micro_step(micro: tuple[torch.Tensor, torch.Tensor, torch.Tensor], weight: float) -> None:
        ids, tokens, labels = micro
        loss = F.cross_entropy(model(tokens), labels) * weight
        loss.backward()
        pending_ids.extend(ids.tolist())
        pending_weights.append(weight)

    def finish() -> None:
        for p in model.parameters():  # gradients synchronised after the ranks agreed
            if world > 1:
                dist.all_reduce(p.grad)
                p.grad /= world
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        counted.append(list(pending_ids))
        weights.append(list(pending_weights))
        pending_ids.clear()
        pending_weights.clear()

    def discard() -> None:
        optimizer.zero_grad(set_to_none=True)
        pending_ids.clear()
        pending_weights.clear()

    fallback = OOMFallback([Split(32, 1), Split(16, 2), Split(4, 8), Split(1, 32)])
    splits = []
    for step in range(STEPS):
        long = step + 1 >= LONG_FROM and (world == 1 or rank == 1)
        ids = torch.arange(step * SAMPLES, (step + 1) * SAMPLES)
        tokens = torch.randint(100, (SAMPLES, LONG if long else SHORT))
        samples = (ids, tokens, torch.randint(4, (SAMPLES,)))
        splits.append(dataclasses.asdict(fallback.step(samples, micro_step, finish, discard)))
    said = {
        "counted": counted,
        "weights": weights,
        "splits": splits,
        "fell_back": [dataclasses.asdict(f) for f in fallback.fell_back],
    }
    with open(out, "w") as file:
        json.dump(said, file)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:4]), *sys.argv[4:5])  # type: ignore[arg-type]
    # Out without the interpreter's teardown: after a gloo group, torch 2.14's CPU build aborts
    # there in about 1 run of 7 ("terminate called without an active exception"), with no cap
    # and no fallback too; what this loop did is written by then.
    sys.stdout.flush()
    os._exit(0)
