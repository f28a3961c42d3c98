"""t5-small's shape from its transformers config (no download): an encoder-decoder, 512 source
and 128 target tokens, relative position biases, transformers' own loss."""

import torch
from transformers import T5Config, T5ForConditionalGeneration

import advisor

SOURCE_LEN, TARGET_LEN, VOCAB = 512, 128, 32128


def build() -> T5ForConditionalGeneration:
    config = T5Config(
        vocab_size=VOCAB, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
        decoder_start_token_id=0, pad_token_id=0, use_cache=False,
    )  # fmt: skip
    return T5ForConditionalGeneration(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.randint(1, VOCAB, (batch_size, SOURCE_LEN), device=device),
        "labels": torch.randint(1, VOCAB, (batch_size, TARGET_LEN), device=device),
    }


def workload() -> advisor.Workload:
    return advisor.Workload("t5_small", build, batch, block="T5Block")
