"""opt-125m's shape from its transformers config (no download): a decoder with learned
positions and ReLU MLPs, 2048-token sequences, transformers' own loss."""

import torch
from transformers import OPTConfig, OPTForCausalLM

import advisor

SEQ_LEN, VOCAB = 2048, 50272


def build() -> OPTForCausalLM:
    config = OPTConfig(
        vocab_size=VOCAB, hidden_size=768, num_hidden_layers=12, ffn_dim=3072,
        num_attention_heads=12, max_position_embeddings=SEQ_LEN, word_embed_proj_dim=768,
        use_cache=False,
    )  # fmt: skip
    return OPTForCausalLM(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    tokens = torch.randint(VOCAB, (batch_size, SEQ_LEN), device=device)
    return {"input_ids": tokens, "labels": tokens}


def workload() -> advisor.Workload:
    return advisor.Workload("opt_125m", build, batch, block="OPTDecoderLayer")
