"""Tiny models for fast tests on the CPU. Real models come from torchvision and transformers."""

from __future__ import annotations

import torch
from torch import nn


class MLPBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.linear(self.norm(x)))


class TinyMLP(nn.Module):
    def __init__(self, in_features: int, hidden: int, depth: int, num_classes: int) -> None:
        super().__init__()
        self.stem = nn.Linear(in_features, hidden)
        self.blocks = nn.Sequential(*(MLPBlock(hidden) for _ in range(depth)))
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)))


class ConvBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.norm(self.conv(x)))


class TinyCNN(nn.Module):
    def __init__(self, channels: int, depth: int, num_classes: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.Sequential(*(ConvBlock(channels) for _ in range(depth)))
        self.head = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(x.mean(dim=(2, 3)))
