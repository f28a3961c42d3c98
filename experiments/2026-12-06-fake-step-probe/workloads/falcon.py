"""Falcon with ALiBi, shrunk (4 layers)."""

from common import lm
from transformers import FalconConfig, FalconForCausalLM


def workload():
    c = FalconConfig(
        vocab_size=32000,
        hidden_size=512,
        num_hidden_layers=4,
        num_attention_heads=8,
        alibi=True,
        new_decoder_architecture=False,
        use_cache=False,
    )
    return lm("falcon_alibi", FalconForCausalLM, c, 512, 32000, "FalconDecoderLayer")
