"""Gemma 2's shape, shrunk (4 layers): logit soft-capping, sliding-window attention, GQA."""

from common import lm
from transformers import Gemma2Config, Gemma2ForCausalLM


def workload():
    c = Gemma2Config(
        vocab_size=32000,
        hidden_size=512,
        intermediate_size=2048,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=64,
        max_position_embeddings=1024,
        sliding_window=256,
        use_cache=False,
    )
    return lm("gemma2_small", Gemma2ForCausalLM, c, 512, 32000, "Gemma2DecoderLayer")
