"""mpnet-base's shape as a masked language model from its transformers config (no download):
relative position buckets, 384-token sequences, 15% of tokens as labels, transformers' own
loss."""

import torch
from transformers import MPNetConfig, MPNetForMaskedLM

import advisor

SEQ_LEN, VOCAB = 384, 30527


def build() -> MPNetForMaskedLM:
    return MPNetForMaskedLM(MPNetConfig(vocab_size=VOCAB, max_position_embeddings=514))


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    tokens = torch.randint(5, VOCAB, (batch_size, SEQ_LEN), device=device)
    chosen = torch.rand(batch_size, SEQ_LEN, device=device) < 0.15
    return {"input_ids": tokens, "labels": torch.where(chosen, tokens, -100)}


def workload() -> advisor.Workload:
    return advisor.Workload("mpnet_base_mlm", build, batch, block="MPNetLayer")
