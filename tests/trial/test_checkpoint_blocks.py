"""Activation checkpointing as a trial applies it: the recompute sees what the forward saw."""

from __future__ import annotations

import torch
from dense_blocks import Dense, gradients

from advisor.trial.training import checkpoint_blocks


def test_a_block_given_a_list_its_caller_appends_to_is_recomputed_as_it_was_given():
    torch.manual_seed(0)
    plain, x = Dense(), torch.randn(4, 8)
    checkpointed = Dense()
    checkpointed.load_state_dict(plain.state_dict())
    checkpoint_blocks(checkpointed, "Layer")
    # without the copy, a layer's recompute concatenated the features its caller added later
    expected, got = gradients(plain, x), gradients(checkpointed, x)
    assert len(got) == len(expected) == 12
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
