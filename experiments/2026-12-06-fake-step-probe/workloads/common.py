"""A causal language model's workload: random tokens as inputs and labels, transformers' own loss."""

import torch

import advisor


def lm(name, cls, config, seq, vocab, block):
    def build():
        return cls(config)

    def batch(b, device):
        t = torch.randint(vocab, (b, seq), device=device)
        return {"input_ids": t, "labels": t}

    return advisor.Workload(name, build, batch, block=block)
