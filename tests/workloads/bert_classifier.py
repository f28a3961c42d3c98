"""A transformers classifier as a user writes one: BERT from its config (no download), padded
batches with an attention mask, transformers' own loss (the default for a dict batch)."""

import torch
from transformers import BertConfig, BertForSequenceClassification

import advisor

SEQ_LEN = 32


def build() -> BertForSequenceClassification:
    config = BertConfig(
        vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=64, num_labels=3,
    )  # fmt: skip
    return BertForSequenceClassification(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    lengths = torch.randint(SEQ_LEN // 2, SEQ_LEN + 1, (batch_size, 1), device=device)
    mask = (torch.arange(SEQ_LEN, device=device) < lengths).long()
    return {
        "input_ids": torch.randint(512, (batch_size, SEQ_LEN), device=device) * mask,
        "attention_mask": mask,
        "labels": torch.randint(3, (batch_size,), device=device),
    }


def workload() -> advisor.Workload:
    return advisor.Workload("bert_classifier", build, batch, block="BertLayer")
