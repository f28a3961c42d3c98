"""bart-base's shape from its transformers config (no download): an encoder-decoder with learned
positions, 512 source and 128 target tokens, transformers' own loss."""

import torch
from transformers import BartConfig, BartForConditionalGeneration

import advisor

SOURCE_LEN, TARGET_LEN, VOCAB = 512, 128, 50265


def build() -> BartForConditionalGeneration:
    config = BartConfig(vocab_size=VOCAB, max_position_embeddings=1024, use_cache=False)
    return BartForConditionalGeneration(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.randint(3, VOCAB, (batch_size, SOURCE_LEN), device=device),
        "labels": torch.randint(3, VOCAB, (batch_size, TARGET_LEN), device=device),
    }


def workload() -> advisor.Workload:
    return advisor.Workload("bart_base", build, batch, block="BartEncoderLayer")
