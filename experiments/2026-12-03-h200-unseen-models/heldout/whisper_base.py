"""whisper-base's shape from its transformers config (no download): 30 s of 80-bin log-mel
features through a convolutional front end into an encoder-decoder, 128 target tokens,
transformers' own loss."""

import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration

import advisor

FRAMES, TARGET_LEN, VOCAB = 3000, 128, 51865


def build() -> WhisperForConditionalGeneration:
    config = WhisperConfig(
        vocab_size=VOCAB, d_model=512, encoder_layers=6, decoder_layers=6,
        encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
        decoder_ffn_dim=2048, num_mel_bins=80, use_cache=False,
    )  # fmt: skip
    return WhisperForConditionalGeneration(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    return {
        "input_features": torch.randn(batch_size, 80, FRAMES, device=device),
        "labels": torch.randint(VOCAB - 100, (batch_size, TARGET_LEN), device=device),
    }


def workload() -> advisor.Workload:
    return advisor.Workload("whisper_base", build, batch, block="WhisperEncoderLayer")
