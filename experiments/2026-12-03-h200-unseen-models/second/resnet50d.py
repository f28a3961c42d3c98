"""timm's ResNet-50-D at 224 pixels, 1000 classes, built without weights: a deep stem and
average-pooled shortcuts."""

import timm
import torch

import advisor


def build() -> torch.nn.Module:
    return timm.create_model("resnet50d", pretrained=False)


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randn(batch_size, 3, 224, 224, device=device)
    return images, torch.randint(1000, (batch_size,), device=device)


def workload() -> advisor.Workload:
    return advisor.Workload("timm_resnet50d", build, batch, block="Bottleneck")
