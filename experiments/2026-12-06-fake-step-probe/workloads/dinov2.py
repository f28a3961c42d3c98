"""DINOv2's shape, shrunk (4 layers): 14-pixel patches, 224-pixel images, a classifier head."""

import torch
from transformers import Dinov2Config, Dinov2ForImageClassification

import advisor


def workload():
    c = Dinov2Config(
        hidden_size=384,
        num_hidden_layers=4,
        num_attention_heads=6,
        image_size=224,
        patch_size=14,
        num_labels=1000,
    )

    def build():
        return Dinov2ForImageClassification(c)

    def batch(b, device):
        return {
            "pixel_values": torch.randn(b, 3, 224, 224, device=device),
            "labels": torch.randint(1000, (b,), device=device),
        }

    return advisor.Workload("dinov2_small", build, batch, block="Dinov2Layer")
