"""distilbert-base's shape as a sequence classifier from its transformers config (no download):
padded batches of up to 256 tokens with an attention mask, 2 labels, transformers' own loss."""

import torch
from transformers import DistilBertConfig, DistilBertForSequenceClassification

import advisor

SEQ_LEN, VOCAB = 256, 30522


def build() -> DistilBertForSequenceClassification:
    return DistilBertForSequenceClassification(DistilBertConfig(vocab_size=VOCAB, num_labels=2))


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    lengths = torch.randint(SEQ_LEN // 2, SEQ_LEN + 1, (batch_size, 1), device=device)
    mask = (torch.arange(SEQ_LEN, device=device) < lengths).long()
    return {
        "input_ids": torch.randint(1000, VOCAB, (batch_size, SEQ_LEN), device=device) * mask,
        "attention_mask": mask,
        "labels": torch.randint(2, (batch_size,), device=device),
    }


def workload() -> advisor.Workload:
    return advisor.Workload("distilbert_classifier", build, batch, block="TransformerBlock")
