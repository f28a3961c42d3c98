"""Workloads whose code prints as it is imported and built (as nanoGPT's model prints its
size), and one whose model raises inside its forward (a T5 config missing a token id)."""

import torch
from torch import nn

import advisor

print("talkative: imported")


class Talkative(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        print("number of parameters: 0.07K")
        self.layer = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class RaisesInForward(Talkative):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("decoder_start_token_id has to be defined")


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch_size, 16, device=device), torch.randint(
        4, (batch_size,), device=device
    )


def workload() -> advisor.Workload:
    print("talkative: workload() called")
    return advisor.Workload(name="talkative", model=Talkative, batch=batch)


def raises_in_forward() -> advisor.Workload:
    return advisor.Workload(name="raises_in_forward", model=RaisesInForward, batch=batch)
