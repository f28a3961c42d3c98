"""Your own model for advisor, as the README shows it: a conv net with its own loss.
advisor run workload=examples/own_model.py:workload batch_size=64 precision=bf16"""

import torch
import torchvision
from torch import nn

import advisor


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randn(batch_size, 3, 32, 32, device=device)
    return images, torch.randint(10, (batch_size,), device=device)


def loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    images, labels = batch
    return nn.functional.cross_entropy(model(images), labels, label_smoothing=0.1)


def workload() -> advisor.Workload:
    return advisor.Workload(
        name="resnet18_smoothed",
        model=lambda: torchvision.models.resnet18(num_classes=10),
        batch=batch,
        loss=loss,
        block="BasicBlock",  # checkpointing=blocks recomputes each of these
    )
