"""Model builders that misbehave on purpose, for the crashed and timeout statuses. The worker
imports them by name (model._target_=builders.crashing), as it would a user's own builder;
they take the arguments of the tiny_mlp config they replace."""

from __future__ import annotations

import time

import torch
from torch import nn


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
