"""torchvision's densenet121, each _DenseLayer the block: its input is the list of the features so far."""

import torch
import torchvision

import advisor


def workload():
    def build():
        return torchvision.models.densenet121(num_classes=1000)

    def batch(b, device):
        return (
            torch.randn(b, 3, 224, 224, device=device),
            torch.randint(1000, (b,), device=device),
        )

    return advisor.Workload("densenet121", build, batch, block="_DenseLayer")
