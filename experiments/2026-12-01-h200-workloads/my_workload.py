"""A workload in the current folder: a small transformer encoder regressing a vector, with its
own loss (mean squared error on a (x, y) tuple, where the default would be cross entropy)."""

import torch
from torch import nn

import advisor


class Regressor(nn.Module):
    def __init__(self, width: int = 256, depth: int = 4) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width,
                                           batch_first=True)  # fmt: skip
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x).mean(dim=1)).squeeze(-1)


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch_size, 128, 256, device=device), torch.randn(batch_size, device=device)


def mse(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return nn.functional.mse_loss(model(x).float(), y)


def workload() -> advisor.Workload:
    return advisor.Workload("regressor", Regressor, batch, loss=mse,
                            block=nn.TransformerEncoderLayer)  # fmt: skip
