"""A 1.1B Llama decoder (TinyLlama's shape: 22 layers, hidden 2048, 32 query heads and 4
key/value heads, SwiGLU 5632, vocab 32000), built from a transformers config, no download;
sequences of 1024 tokens, transformers' own loss. The 1B decoder of issue 28's checks.
    advisor run workload=experiments/2026-12-05-h200-ranks/llama_1b.py:workload ..."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import advisor

SEQ_LEN, VOCAB = 1024, 32000


def build() -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
        num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=SEQ_LEN,
        use_cache=False,
    )  # fmt: skip
    return LlamaForCausalLM(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    tokens = torch.randint(VOCAB, (batch_size, SEQ_LEN), device=device)
    return {"input_ids": tokens, "labels": tokens}


def workload() -> advisor.Workload:
    return advisor.Workload("llama_1.1b_gqa", build, batch, block="LlamaDecoderLayer")
