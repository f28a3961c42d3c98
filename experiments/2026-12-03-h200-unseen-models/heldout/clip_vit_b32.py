"""CLIP ViT-B/32's shape from its transformers config (no download): an image and a text tower
trained with the contrastive loss (transformers' own, return_loss=True), 77-token captions."""

import torch
from transformers import CLIPConfig, CLIPModel

import advisor

TEXT_LEN, VOCAB = 77, 49408


def build() -> CLIPModel:
    config = CLIPConfig(
        text_config={"vocab_size": VOCAB, "max_position_embeddings": TEXT_LEN},
        vision_config={"patch_size": 32, "image_size": 224},
    )
    return CLIPModel(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.randint(VOCAB, (batch_size, TEXT_LEN), device=device),
        "pixel_values": torch.randn(batch_size, 3, 224, 224, device=device),
    }


def loss(model: CLIPModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(**batch, return_loss=True).loss


def workload() -> advisor.Workload:
    return advisor.Workload("clip_vit_b32", build, batch, loss, block="CLIPEncoderLayer")
