"""torchvision's RegNetY-1.6GF at 224 pixels, 1000 classes, built without weights: grouped
convolutions with squeeze-excitation."""

import torch
import torchvision

import advisor


def build() -> torch.nn.Module:
    return torchvision.models.regnet_y_1_6gf()


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randn(batch_size, 3, 224, 224, device=device)
    return images, torch.randint(1000, (batch_size,), device=device)


def workload() -> advisor.Workload:
    return advisor.Workload("torchvision_regnet_y_1_6gf", build, batch, block="ResBottleneckBlock")
