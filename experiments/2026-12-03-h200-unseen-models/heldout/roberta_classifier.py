"""roberta-base's shape as a sequence classifier from its transformers config (no download):
padded batches of up to 256 tokens with an attention mask, 3 labels, transformers' own loss."""

import torch
from transformers import RobertaConfig, RobertaForSequenceClassification

import advisor

SEQ_LEN, VOCAB = 256, 50265


def build() -> RobertaForSequenceClassification:
    config = RobertaConfig(vocab_size=VOCAB, max_position_embeddings=SEQ_LEN + 2, num_labels=3)
    return RobertaForSequenceClassification(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    lengths = torch.randint(SEQ_LEN // 2, SEQ_LEN + 1, (batch_size, 1), device=device)
    mask = (torch.arange(SEQ_LEN, device=device) < lengths).long()
    tokens = torch.randint(3, VOCAB, (batch_size, SEQ_LEN), device=device)
    return {
        "input_ids": tokens * mask + (1 - mask),  # 1 pads
        "attention_mask": mask,
        "labels": torch.randint(3, (batch_size,), device=device),
    }


def workload() -> advisor.Workload:
    return advisor.Workload("roberta_base_classifier", build, batch, block="RobertaLayer")
