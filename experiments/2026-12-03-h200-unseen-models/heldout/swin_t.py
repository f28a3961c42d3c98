"""torchvision's Swin-T at 224 pixels, 1000 classes, built without weights: shifted windows."""

import torch
import torchvision

import advisor


def build() -> torch.nn.Module:
    return torchvision.models.swin_t()


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randn(batch_size, 3, 224, 224, device=device)
    return images, torch.randint(1000, (batch_size,), device=device)


def workload() -> advisor.Workload:
    return advisor.Workload("torchvision_swin_t", build, batch, block="SwinTransformerBlock")
