"""torchvision's mobilenet_v3_large: depthwise convolutions, hard-swish."""

import torch
import torchvision

import advisor


def workload():
    def build():
        return torchvision.models.mobilenet_v3_large(num_classes=1000)

    def batch(b, device):
        return (
            torch.randn(b, 3, 224, 224, device=device),
            torch.randint(1000, (b,), device=device),
        )

    return advisor.Workload("mobilenet_v3_large", build, batch, block="InvertedResidual")
