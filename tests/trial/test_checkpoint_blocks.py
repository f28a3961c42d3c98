"""Activation checkpointing as a trial applies it: the recompute sees what the forward saw."""

from __future__ import annotations

import torch
from torch import nn

from advisor.trial.training import checkpoint_blocks


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


def _gradients(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    model(x).backward()
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_a_block_given_a_list_its_caller_appends_to_is_recomputed_as_it_was_given():
    torch.manual_seed(0)
    plain, x = Dense(), torch.randn(4, 8)
    checkpointed = Dense()
    checkpointed.load_state_dict(plain.state_dict())
    checkpoint_blocks(checkpointed, "Layer")
    # without the copy, a layer's recompute concatenated the features its caller added later
    expected, got = _gradients(plain, x), _gradients(checkpointed, x)
    assert len(got) == len(expected) == 12
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
