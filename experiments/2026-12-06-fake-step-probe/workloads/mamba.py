"""Mamba, shrunk (4 layers): its selective scan as transformers runs it without the CUDA kernels."""

from common import lm
from transformers import MambaConfig, MambaForCausalLM


def workload():
    c = MambaConfig(
        vocab_size=32000, hidden_size=512, num_hidden_layers=4, state_size=16, use_cache=False
    )
    return lm("mamba_small", MambaForCausalLM, c, 512, 32000, "MambaBlock")
