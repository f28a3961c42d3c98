"""timm's EfficientNet-B0 at 224 pixels, 1000 classes, built without weights: depthwise
convolutions, squeeze-excitation, SiLU."""

import timm
import torch

import advisor


def build() -> torch.nn.Module:
    return timm.create_model("efficientnet_b0", pretrained=False)


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randn(batch_size, 3, 224, 224, device=device)
    return images, torch.randint(1000, (batch_size,), device=device)


def workload() -> advisor.Workload:
    return advisor.Workload("timm_efficientnet_b0", build, batch, block="InvertedResidual")
