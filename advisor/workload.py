"""What a trial trains: the model, optimizer, scaler and synthetic batch of a spec; the step.

Everything is built fresh for each trial, in the worker process, directly on the device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable

import torch
from hydra.utils import instantiate
from torch import nn
from torch.nn import functional as F

from advisor.result import Phase
from advisor.spec import Checkpointing, InputKind, Loss, Precision, TrialSpec


@dataclasses.dataclass
class Workload:
    spec: TrialSpec
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler  # disabled (a no-op) unless precision is fp16
    inputs: torch.Tensor  # one micro batch, reused by every micro step
    labels: torch.Tensor

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        dtype = {Precision.bf16: torch.bfloat16, Precision.fp16: torch.float16}
        if self.spec.precision not in dtype:
            return contextlib.nullcontext()
        return torch.autocast(self.inputs.device.type, dtype=dtype[self.spec.precision])


def _no_mark(phase: Phase) -> None:
    pass


def train_step(w: Workload, mark: Callable[[Phase], None] = _no_mark) -> None:
    """One optimizer step over grad_accum micro batches; mark(phase) is called as each begins."""
    accum = w.spec.grad_accum
    for _ in range(accum):
        mark(Phase.forward)
        with w.autocast():
            loss = compute_loss(w.spec.model.loss, w.model(w.inputs), w.labels) / accum
        mark(Phase.backward)
        w.scaler.scale(loss).backward()
        del loss
    mark(Phase.optimizer)
    w.scaler.step(w.optimizer)
    w.scaler.update()
    w.optimizer.zero_grad(set_to_none=True)


def compute_loss(kind: Loss, output: object, labels: torch.Tensor) -> torch.Tensor:
    logits = output.logits if hasattr(output, "logits") else output  # transformers' outputs
    assert isinstance(logits, torch.Tensor)
    if kind is Loss.causal_lm:  # predict token t+1 from tokens up to t
        return F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())
    return F.cross_entropy(logits, labels)


def build(spec: TrialSpec, device: torch.device) -> Workload:
    set_precision_flags(spec.precision)
    model = build_model(spec, device)
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if spec.checkpointing is Checkpointing.blocks:
        checkpoint_blocks(model, spec.model.block or "")
    optimizer = instantiate(json.loads(spec.optimizer.builder))(model.parameters())
    if spec.compile:
        model = torch.compile(model)  # type: ignore[assignment]
    inputs, labels = make_batch(spec, device)
    scaler = torch.amp.GradScaler(device.type, enabled=spec.precision is Precision.fp16)
    return Workload(spec, model, optimizer, scaler, inputs, labels)


def build_model(spec: TrialSpec, device: torch.device) -> nn.Module:
    """The model, its parameters created directly on the device (meta: no memory at all)."""
    with torch.device(device):
        model = instantiate(json.loads(spec.model.builder))
    if not isinstance(model, nn.Module):
        raise TypeError(f"{spec.model.name}: the builder returned {type(model).__name__}")
    return model.train()


def make_batch(spec: TrialSpec, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Synthetic data of the model's real input shape, made on the device."""
    shape = (spec.batch_size, *spec.model.input.shape)
    n = spec.model.input.num_classes
    if spec.model.input.kind is InputKind.tokens:
        tokens = torch.randint(n, shape, device=device)
        return tokens, tokens  # causal LM: the labels are the tokens themselves, shifted
    inputs = torch.randn(shape, device=device)
    if spec.channels_last and inputs.dim() == 4:
        inputs = inputs.contiguous(memory_format=torch.channels_last)
    return inputs, torch.randint(n, (spec.batch_size,), device=device)


def checkpoint_blocks(model: nn.Module, block: str) -> None:
    """Recompute each module of class `block` in backward instead of keeping its activations."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing,
    )

    if not any(type(m).__name__ == block for m in model.modules()):
        raise ValueError(f"checkpointing: the model has no module of class {block!r}")
    apply_activation_checkpointing(model, check_fn=lambda m: type(m).__name__ == block)
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "use_cache", False):
        # No KV cache, as transformers' own gradient checkpointing sets it: the recompute would
        # append each block's keys and values to it a second time, and compiled, it fails on
        # the causal mask (experiments/2026-11-30-h200-compile-ckpt).
        config.use_cache = False


def set_precision_flags(precision: Precision) -> None:
    """fp32 means true fp32; tf32 turns TF32 on; the autocast settings leave torch's defaults."""
    if precision in (Precision.fp32, Precision.tf32):
        allow = precision is Precision.tf32
        torch.backends.cuda.matmul.allow_tf32 = allow
        torch.backends.cudnn.allow_tf32 = allow
