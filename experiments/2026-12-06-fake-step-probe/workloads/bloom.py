"""BLOOM's shape, shrunk (4 layers): ALiBi."""

from common import lm
from transformers import BloomConfig, BloomForCausalLM


def workload():
    c = BloomConfig(vocab_size=32000, hidden_size=512, n_layer=4, n_head=8, use_cache=False)
    return lm("bloom_small", BloomForCausalLM, c, 512, 32000, "BloomBlock")
