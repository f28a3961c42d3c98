"""A Phi-3-style decoder from its transformers config (no download): fused query/key/value and
gate/up projections, grouped-query attention, RoPE, 1024-token sequences, transformers' own
loss."""

import torch
from transformers import Phi3Config, Phi3ForCausalLM

import advisor

SEQ_LEN, VOCAB = 1024, 32064


def build() -> Phi3ForCausalLM:
    config = Phi3Config(
        vocab_size=VOCAB, hidden_size=1024, intermediate_size=2816, num_hidden_layers=16,
        num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=SEQ_LEN,
        pad_token_id=0, use_cache=False,
    )  # fmt: skip
    return Phi3ForCausalLM(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    tokens = torch.randint(VOCAB, (batch_size, SEQ_LEN), device=device)
    return {"input_ids": tokens, "labels": tokens}


def workload() -> advisor.Workload:
    return advisor.Workload("phi3_style_0.3b", build, batch, block="Phi3DecoderLayer")
