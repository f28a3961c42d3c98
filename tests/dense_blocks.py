"""A DenseNet-like model (torchvision's _DenseBlock and _DenseLayer, in small): each layer is
given the list of the features so far, which its caller appends the layer's output to after
the call. Checkpointed naively, a layer's recompute in backward sees the longer list."""

from __future__ import annotations

import torch
from torch import nn


class Layer(nn.Module):
    """Like torchvision's _DenseLayer: given the list of the features so far, concatenates them."""

    def __init__(self, width: int, grows: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(width)
        self.linear = nn.Linear(width, grows)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        return self.linear(torch.relu(self.norm(torch.cat(features, 1))))


class Dense(nn.Module):
    """Like torchvision's _DenseBlock: each layer's output is appended to the list it was given."""

    def __init__(self, width: int = 8, grows: int = 4, depth: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(width + i * grows, grows) for i in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1).sum()


def gradients(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """The parameters' gradients of one backward pass."""
    model(x).backward()
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]
