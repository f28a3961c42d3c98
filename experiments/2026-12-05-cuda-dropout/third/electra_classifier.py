"""electra-base-discriminator's shape as a sequence classifier from its transformers config (no
download): padded batches of up to 512 tokens with an attention mask, 2 labels, transformers'
own loss."""

import torch
from transformers import ElectraConfig, ElectraForSequenceClassification

import advisor

SEQ_LEN, VOCAB = 512, 30522


def build() -> ElectraForSequenceClassification:
    config = ElectraConfig(
        vocab_size=VOCAB, embedding_size=768, hidden_size=768, num_hidden_layers=12,
        num_attention_heads=12, intermediate_size=3072, max_position_embeddings=SEQ_LEN,
        num_labels=2,
    )  # fmt: skip
    return ElectraForSequenceClassification(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    lengths = torch.randint(SEQ_LEN // 4, SEQ_LEN + 1, (batch_size, 1), device=device)
    mask = (torch.arange(SEQ_LEN, device=device) < lengths).long()
    tokens = torch.randint(1000, VOCAB, (batch_size, SEQ_LEN), device=device)
    return {
        "input_ids": tokens * mask,  # 0 pads
        "attention_mask": mask,
        "labels": torch.randint(2, (batch_size,), device=device),
    }


def workload() -> advisor.Workload:
    return advisor.Workload("electra_base_classifier", build, batch, block="ElectraLayer")
