"""torchvision's EfficientNetV2-S at 224 pixels, 1000 classes, built without weights: fused
MBConv blocks, then depthwise ones with squeeze-excitation, stochastic depth."""

import torch
import torchvision

import advisor


def build() -> torch.nn.Module:
    return torchvision.models.efficientnet_v2_s()


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randn(batch_size, 3, 224, 224, device=device)
    return images, torch.randint(1000, (batch_size,), device=device)


def workload() -> advisor.Workload:
    return advisor.Workload("torchvision_efficientnet_v2_s", build, batch, block="MBConv")
