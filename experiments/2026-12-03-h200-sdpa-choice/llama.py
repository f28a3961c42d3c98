"""A Llama decoder as its users train it, built from a transformers config (no download): 0.34B
parameters, grouped-query attention (16 query heads, 4 key/value heads), RoPE and SwiGLU,
sequences of 1024 tokens, transformers' own loss. Not in advisor's catalog.
    advisor run workload=experiments/2026-12-03-h200-sdpa-choice/llama.py:workload ..."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import advisor

SEQ_LEN, VOCAB = 1024, 32000


def build() -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=1024, intermediate_size=2816, num_hidden_layers=24,
        num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=SEQ_LEN,
        use_cache=False,
    )  # fmt: skip
    return LlamaForCausalLM(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    tokens = torch.randint(VOCAB, (batch_size, SEQ_LEN), device=device)
    return {"input_ids": tokens, "labels": tokens}


def workload() -> advisor.Workload:
    return advisor.Workload("llama_0.34b_gqa", build, batch, block="LlamaDecoderLayer")
