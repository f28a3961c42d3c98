"""Workloads that break the contract, one way each: advisor must say so in one line and store
nothing."""

import torch
from torch import nn

import advisor


def _batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch_size, 8, device=device), torch.randint(2, (batch_size,), device=device)


def not_a_workload() -> nn.Module:
    return nn.Linear(8, 2)


def batch_raises() -> advisor.Workload:
    def batch(batch_size: int, device: torch.device) -> torch.Tensor:
        raise ValueError("no data for you")

    return advisor.Workload("batch_raises", lambda: nn.Linear(8, 2), batch)


def loss_not_scalar() -> advisor.Workload:
    def loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return nn.functional.cross_entropy(model(batch[0]), batch[1], reduction="none")

    return advisor.Workload("loss_not_scalar", lambda: nn.Linear(8, 2), _batch, loss=loss)


def wrong_block() -> advisor.Workload:
    return advisor.Workload("wrong_block", lambda: nn.Linear(8, 2), _batch, block="Bottleneck")
