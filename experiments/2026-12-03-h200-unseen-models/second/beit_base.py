"""timm's BEiT-B/16 at 224 pixels, 1000 classes, built without weights: relative position
biases inside attention."""

import timm
import torch

import advisor


def build() -> torch.nn.Module:
    return timm.create_model("beit_base_patch16_224", pretrained=False)


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randn(batch_size, 3, 224, 224, device=device)
    return images, torch.randint(1000, (batch_size,), device=device)


def workload() -> advisor.Workload:
    return advisor.Workload("timm_beit_base", build, batch, block="Block")
