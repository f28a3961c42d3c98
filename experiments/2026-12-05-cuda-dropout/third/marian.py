"""An opus-mt-en-de-sized Marian translation model from its transformers config (no download):
an encoder-decoder with sinusoidal positions, 256 source and 256 target tokens, transformers'
own loss."""

import torch
from transformers import MarianConfig, MarianMTModel

import advisor

SOURCE_LEN, TARGET_LEN, VOCAB = 256, 256, 58101


def build() -> MarianMTModel:
    config = MarianConfig(
        vocab_size=VOCAB, d_model=512, encoder_layers=6, decoder_layers=6,
        encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
        decoder_ffn_dim=2048, max_position_embeddings=512, pad_token_id=VOCAB - 1,
        decoder_start_token_id=VOCAB - 1, use_cache=False,
    )  # fmt: skip
    return MarianMTModel(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.randint(VOCAB - 1, (batch_size, SOURCE_LEN), device=device),
        "labels": torch.randint(VOCAB - 1, (batch_size, TARGET_LEN), device=device),
    }


def workload() -> advisor.Workload:
    return advisor.Workload("marian_en_de", build, batch, block="MarianEncoderLayer")
