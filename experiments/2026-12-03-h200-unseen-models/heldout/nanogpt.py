"""nanoGPT's GPT-2 (124M) as its train.py trains it: its own model.py (copied unchanged beside
this file), 1024-token blocks, the vocabulary padded to 50,304, no dropout, no biases, the loss
its forward returns."""

import torch
from nanogpt_model import GPT, GPTConfig

import advisor

BLOCK, VOCAB = 1024, 50304


def build() -> GPT:
    config = GPTConfig(block_size=BLOCK, vocab_size=VOCAB, n_layer=12, n_head=12, n_embd=768,
                       dropout=0.0, bias=False)  # fmt: skip
    return GPT(config)


def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    # train.py's get_batch stacks separate slices: both contiguous (its loss views the targets)
    tokens = torch.randint(VOCAB, (batch_size, BLOCK + 1), device=device)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def loss(model: GPT, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    inputs, targets = batch
    return model(inputs, targets)[1]


def workload() -> advisor.Workload:
    return advisor.Workload("nanogpt_124m", build, batch, loss, block="Block")
