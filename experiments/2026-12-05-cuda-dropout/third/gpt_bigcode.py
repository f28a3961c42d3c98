"""A 222M-parameter GPTBigCode (the StarCoder family) from its transformers config (no
download): multi-query attention (one key/value head), GELU MLPs, 2048-token sequences, dropout
0.1 as its config's default, transformers' own loss."""

import torch
from transformers import GPTBigCodeConfig, GPTBigCodeForCausalLM

import advisor

SEQ_LEN, VOCAB = 2048, 49280


def build() -> GPTBigCodeForCausalLM:
    config = GPTBigCodeConfig(
        vocab_size=VOCAB, n_positions=SEQ_LEN, n_embd=1024, n_layer=16, n_head=16,
        multi_query=True, bos_token_id=0, eos_token_id=0, use_cache=False,
    )  # fmt: skip
    return GPTBigCodeForCausalLM(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    tokens = torch.randint(VOCAB, (batch_size, SEQ_LEN), device=device)
    return {"input_ids": tokens, "labels": tokens}


def workload() -> advisor.Workload:
    return advisor.Workload("gpt_bigcode_220m", build, batch, block="GPTBigCodeBlock")
