"""Model builders that misbehave on purpose, for the crashed and timeout statuses. The worker
imports them by name (model.module._target_=builders.crashing), as it would a user's own builder;
they take the arguments of the tiny_mlp config they replace."""

from __future__ import annotations

import time

import torch
from torch import nn

import advisor


class _Crashing(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("this model always fails in forward")


class _Hanging(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(3600)
        return super().forward(x)


def crashing(**tiny_mlp_arguments: int) -> nn.Module:
    return _Crashing()


def hanging(**tiny_mlp_arguments: int) -> nn.Module:
    return _Hanging(64, 10)


def noting(**tiny_mlp_arguments: int) -> nn.Module:
    """tiny_mlp, which notes the process building it (its pid and its parent's) in the file
    $ADVISOR_TEST_PIDS."""
    import os

    from advisor.models import TinyMLP

    with open(os.environ["ADVISOR_TEST_PIDS"], "a") as notes:
        notes.write(f"{os.getpid()} {os.getppid()}\n")
    return TinyMLP(**tiny_mlp_arguments)


def hungry(**tiny_mlp_arguments: int) -> nn.Module:
    """tiny_mlp, built after a 64 MiB buffer of Python's own (a builder reading weights, say):
    under a small cap, Python's MemoryError comes before any tensor."""
    from advisor.models import TinyMLP

    buffer = bytearray(64 * 2**20)
    del buffer
    return TinyMLP(**tiny_mlp_arguments)


def loud(**tiny_mlp_arguments: int) -> nn.Module:
    """tiny_mlp with logits scaled up 10^4: its fp16 gradients overflow at GradScaler's first
    scales, so the scaler skips the optimizer's first steps."""
    from advisor.models import TinyMLP

    model = TinyMLP(**tiny_mlp_arguments)
    return nn.Sequential(model, _Scale(1e4))


class _Scale(nn.Module):
    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor


def tiny_workload() -> advisor.Workload:
    """A workload given to the Python API as the function itself."""
    from advisor.models import TinyMLP

    def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(batch_size, 64, device=device), torch.randint(
            10, (batch_size,), device=device
        )

    return advisor.Workload("tiny_workload", lambda: TinyMLP(64, 32, 2, 10), batch)
