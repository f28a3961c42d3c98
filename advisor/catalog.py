"""The bundled models, as workloads trained the way their communities train them.

Each function takes data from its config (conf/model/NAME.yaml) and returns a Workload; nested
nodes with a _target_ (a torchvision builder, a transformers config) are instantiated only when
the model is built, in the trial's process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from hydra.utils import instantiate
from torch import nn

from advisor import extras
from advisor.workload import Workload


def classifier(
    name: str,
    module: dict[str, Any],
    input_shape: Sequence[int],
    num_classes: int,
    block: str | None = None,
    family: str | None = None,
) -> Workload:
    """An image (or feature) classifier: cross entropy of model(x) against integer labels."""
    shape = tuple(int(n) for n in input_shape)

    def batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn((batch_size, *shape), device=device)
        return x, torch.randint(num_classes, (batch_size,), device=device)

    return Workload(name, lambda: instantiate(module), batch, block=block, family=family)


def causal_lm(
    name: str,
    config: dict[str, Any],
    seq_len: int,
    block: str | None = None,
    family: str | None = None,
) -> Workload:
    """A transformers causal language model as it is trained: model(input_ids=..., labels=...)
    computes its own loss inside the call (compiled with it), and no KV cache is kept."""

    def model() -> nn.Module:
        from transformers import AutoModelForCausalLM

        cfg = instantiate(config)
        cfg.use_cache = False  # training keeps no KV cache
        return AutoModelForCausalLM.from_config(cfg)

    def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
        vocab = int(config.get("vocab_size", 50257))
        tokens = torch.randint(vocab, (batch_size, seq_len), device=device)
        return {"input_ids": tokens, "labels": tokens}  # the model shifts the labels itself

    return Workload(name, model, batch, block=block, family=family)


def sequence_classifier(
    name: str,
    config: dict[str, Any],
    seq_len: int,
    num_labels: int,
    block: str | None = None,
    family: str | None = None,
) -> Workload:
    """A transformers sequence classifier (e.g. BERT) on padded batches: an attention mask with
    a random length per sample, transformers' own loss."""

    def model() -> nn.Module:
        from transformers import AutoModelForSequenceClassification

        cfg = instantiate(config)
        cfg.num_labels = num_labels
        return AutoModelForSequenceClassification.from_config(cfg)

    def batch(batch_size: int, device: torch.device) -> dict[str, torch.Tensor]:
        vocab = int(config.get("vocab_size", 30522))
        lengths = torch.randint(seq_len // 2, seq_len + 1, (batch_size, 1), device=device)
        mask = (torch.arange(seq_len, device=device) < lengths).long()
        return {
            "input_ids": torch.randint(vocab, (batch_size, seq_len), device=device) * mask,
            "attention_mask": mask,
            "labels": torch.randint(num_labels, (batch_size,), device=device),
        }

    return Workload(name, model, batch, block=block, family=family)


# The block each library's conv nets are made of, by architecture prefix: (timm, torchvision).
CONV_BLOCKS = {"convnext": ("ConvNeXtBlock", "CNBlock")}


def convnet(
    name: str,
    architecture: str,
    image_size: int,
    num_classes: int,
    family: str | None = None,
) -> Workload:
    """A conv net from timm where it is installed (pip install 'advisor[timm]'), else the
    torchvision model of the same name; cross entropy on (x, y). The block checkpointed is
    the library's own."""
    with_timm = extras.installed("timm")
    if not with_timm:
        extras.require("torchvision", f"model={name} (without timm)")

    def model() -> nn.Module:
        if with_timm:
            import timm

            return timm.create_model(architecture, num_classes=num_classes)
        import torchvision

        return torchvision.models.get_model(architecture, num_classes=num_classes)

    blocks = next((b for k, b in CONV_BLOCKS.items() if architecture.startswith(k)), None)
    block = None if blocks is None else blocks[0] if with_timm else blocks[1]
    images = classifier(name, {}, (3, image_size, image_size), num_classes).batch
    return Workload(name, model, images, block=block, family=family)
