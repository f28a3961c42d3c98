"""A small Mixtral from its transformers config (no download): a mixture of 8 experts, 2 per
token, grouped-query attention, 512-token sequences, transformers' own loss (the router's
auxiliary loss included)."""

import torch
from transformers import MixtralConfig, MixtralForCausalLM

import advisor

SEQ_LEN, VOCAB = 512, 32000


def build() -> MixtralForCausalLM:
    config = MixtralConfig(
        vocab_size=VOCAB, hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
        num_attention_heads=8, num_key_value_heads=2, num_local_experts=8,
        num_experts_per_tok=2, max_position_embeddings=SEQ_LEN, output_router_logits=True,
        use_cache=False,
    )  # fmt: skip
    return MixtralForCausalLM(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    tokens = torch.randint(VOCAB, (batch_size, SEQ_LEN), device=device)
    return {"input_ids": tokens, "labels": tokens}


def workload() -> advisor.Workload:
    return advisor.Workload("mixtral_moe_small", build, batch, block="MixtralDecoderLayer")
