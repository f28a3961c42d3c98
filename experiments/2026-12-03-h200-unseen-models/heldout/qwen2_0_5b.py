"""Qwen2-0.5B's shape from its transformers config (no download): 0.5B parameters, grouped-query
attention (14 query heads, 2 key/value heads), RoPE, SwiGLU, tied embeddings over a 151,936-token
vocabulary, 1024-token sequences, transformers' own loss."""

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

import advisor

SEQ_LEN, VOCAB = 1024, 151936


def build() -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=VOCAB, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=SEQ_LEN,
        tie_word_embeddings=True, use_cache=False,
    )  # fmt: skip
    return Qwen2ForCausalLM(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    tokens = torch.randint(VOCAB, (batch_size, SEQ_LEN), device=device)
    return {"input_ids": tokens, "labels": tokens}


def workload() -> advisor.Workload:
    return advisor.Workload("qwen2_0.5b", build, batch, block="Qwen2DecoderLayer")
