"""deberta-v3-small's shape as a sequence classifier from its transformers config (no download):
disentangled relative attention (its own, not SDPA), padded batches of up to 256 tokens, 3
labels, transformers' own loss."""

import torch
from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

import advisor

SEQ_LEN, VOCAB = 256, 128100


def build() -> DebertaV2ForSequenceClassification:
    config = DebertaV2Config(
        vocab_size=VOCAB, hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
        intermediate_size=3072, max_position_embeddings=512, relative_attention=True,
        position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True,
        pos_att_type=["p2c", "c2p"], position_biased_input=False, num_labels=3,
    )  # fmt: skip
    return DebertaV2ForSequenceClassification(config)


def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    lengths = torch.randint(SEQ_LEN // 2, SEQ_LEN + 1, (batch_size, 1), device=device)
    mask = (torch.arange(SEQ_LEN, device=device) < lengths).long()
    tokens = torch.randint(5, VOCAB, (batch_size, SEQ_LEN), device=device)
    return {
        "input_ids": tokens * mask,
        "attention_mask": mask,
        "labels": torch.randint(3, (batch_size,), device=device),
    }


def workload() -> advisor.Workload:
    return advisor.Workload("deberta_v3_small_classifier", build, batch, block="DebertaV2Layer")
