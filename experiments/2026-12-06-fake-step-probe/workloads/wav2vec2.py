"""wav2vec2 with a CTC head, shrunk (4 layers): 2 s of 16 kHz audio, 40 labels."""

import torch
from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

import advisor


def workload():
    c = Wav2Vec2Config(
        vocab_size=32,
        hidden_size=384,
        num_hidden_layers=4,
        num_attention_heads=6,
        intermediate_size=1536,
    )

    def build():
        return Wav2Vec2ForCTC(c)

    def batch(b, device):
        return {
            "input_values": torch.randn(b, 32000, device=device),
            "labels": torch.randint(1, 32, (b, 40), device=device),
        }

    return advisor.Workload("wav2vec2_small", build, batch, block="Wav2Vec2EncoderLayer")
