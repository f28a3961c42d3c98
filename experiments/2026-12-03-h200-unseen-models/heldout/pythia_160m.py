"""pythia-160m's shape (GPT-NeoX) from its transformers config (no download): parallel attention
and MLP, partial rotary embeddings, 2048-token sequences, transformers' own loss."""

import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

import advisor

SEQ_LEN, VOCAB = 2048, 50304


def build() -> GPTNeoXForCausalLM:
    config = GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, rotary_pct=0.25, max_position_embeddings=SEQ_LEN,
        use_parallel_residual=True, use_cache=False,
    )  # fmt: skip
    return GPTNeoXForCausalLM(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    tokens = torch.randint(VOCAB, (batch_size, SEQ_LEN), device=device)
    return {"input_ids": tokens, "labels": tokens}


def workload() -> advisor.Workload:
    return advisor.Workload("pythia_160m", build, batch, block="GPTNeoXLayer")
