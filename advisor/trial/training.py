"""A trial's training: the workload's model, the optimizer, scaler and one batch, built for a
spec; and the step.

Everything is built fresh for each trial, in the worker process, directly on the device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
from collections.abc import Callable
from typing import Any

import torch
from hydra.utils import instantiate
from torch import nn
from torch.utils._pytree import tree_map
from torch.utils.checkpoint import checkpoint

from advisor import workload as workloads
from advisor.errors import WorkloadError, error_line
from advisor.result import Phase
from advisor.spec import Checkpointing, Precision, TrialSpec, WorkloadSpec
from advisor.trial import one_rank
from advisor.trial.collectives import Collectives
from advisor.workload import Workload


@dataclasses.dataclass
class Training:
    spec: TrialSpec
    workload: Workload
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler  # disabled (a no-op) unless precision is fp16
    batch: Any  # one micro batch, reused by every micro step
    # one rank of a job on several GPUs: what its collectives carry (recorded in one step)
    collectives: Collectives | None = None
    # DDP's no_sync: the micro batches before an optimizer step's last all-reduce nothing
    no_sync: Callable[[], contextlib.AbstractContextManager[Any]] | None = None

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """Autocast for bf16 and fp16; nothing for the fp32 precisions (see set_precision_flags)."""
        dtype = {Precision.bf16: torch.bfloat16, Precision.fp16: torch.float16}
        if self.spec.precision not in dtype:
            return contextlib.nullcontext()
        return torch.autocast(self.spec.device.value, dtype=dtype[self.spec.precision])


def _no_mark(phase: Phase) -> None:
    pass


def train_step(t: Training, mark: Callable[[Phase], None] = _no_mark) -> None:
    """One optimizer step over grad_accum micro batches; mark(phase) is called as each begins."""
    accum = t.spec.grad_accum
    for micro in range(accum):
        last = micro == accum - 1
        with contextlib.nullcontext() if last or t.no_sync is None else t.no_sync():
            mark(Phase.forward)
            with t.autocast():
                loss = t.workload.compute_loss(t.model, t.batch) / accum
            mark(Phase.backward)
            t.scaler.scale(loss).backward()
            del loss
    mark(Phase.optimizer)
    t.scaler.step(t.optimizer)
    t.scaler.update()
    t.optimizer.zero_grad(set_to_none=True)


def build(spec: TrialSpec, device: torch.device) -> Training:
    set_precision_flags(spec.precision)
    work = workload_of(spec.model)
    model = build_model(work, device)
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if spec.checkpointing is Checkpointing.blocks:
        checkpoint_blocks(model, spec.model.block or "")
    collectives = no_sync = None
    if spec.gpus > 1:  # one rank of the job's, on the fake process group
        collectives = Collectives()
        model = one_rank.spread(model, spec, device, collectives)
        no_sync = getattr(model, "no_sync", None)  # (DDP's; FSDP2 reduce-scatters each one)
    optimizer = _optimizer(spec, model)
    if spec.compile:
        model = torch.compile(model)  # type: ignore[assignment]
    batch = device_batch(work, spec, device)
    scaler = torch.amp.GradScaler(device.type, enabled=spec.precision is Precision.fp16)
    return Training(spec, work, model, optimizer, scaler, batch, collectives, no_sync)


def _optimizer(spec: TrialSpec, model: nn.Module) -> torch.optim.Optimizer:
    """The spec's optimizer over the model's parameters; an argument it refuses
    (optimizer.lr=abc) is the user's to fix, said in one line."""
    builder = json.loads(spec.optimizer.builder)
    try:
        optimizer: torch.optim.Optimizer = instantiate(builder)(model.parameters())
    except (TypeError, ValueError) as error:
        given = ", ".join(f"{k}={v!r}" for k, v in builder.items() if not k.startswith("_"))
        raise WorkloadError(
            f"optimizer {spec.optimizer.name} ({given}) raised {error_line(error)}; "
            "its arguments are set as optimizer.NAME=VALUE"
        ) from None
    return optimizer


@functools.lru_cache(maxsize=16)
def workload_of(model: WorkloadSpec) -> Workload:
    """The spec's workload, called from its source with its arguments."""
    return workloads.load(model.source, json.loads(model.arguments))


def build_model(work: Workload, device: torch.device) -> nn.Module:
    """The model, its parameters created directly on the device (meta: no memory at all)."""
    with torch.device(device):
        model = work.model()
    if not isinstance(model, nn.Module):
        got = type(model).__name__
        raise WorkloadError(f"{work.name}: model() returned {got}; it must return an nn.Module")
    return model.train()


def device_batch(work: Workload, spec: TrialSpec, device: torch.device) -> Any:
    """One micro batch, made on the device; its images in NHWC where the spec says so."""
    batch = workloads.make_batch(work, spec.batch_size, device)
    if not spec.channels_last:
        return batch

    def nhwc(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dim() == 4 and value.is_floating_point():
            return value.contiguous(memory_format=torch.channels_last)
        return value

    return tree_map(nhwc, batch)


def checkpoint_blocks(model: nn.Module, block: str) -> None:
    """Recompute each module of class `block` in backward instead of keeping its activations."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )

    if not any(type(m).__name__ == block for m in model.modules()):
        raise WorkloadError(f"checkpointing: the model has no module of class {block!r}")
    apply_activation_checkpointing(
        model,
        checkpoint_wrapper_fn=functools.partial(
            checkpoint_wrapper, checkpoint_fn=checkpoint_on_copies
        ),
        check_fn=lambda m: type(m).__name__ == block,
    )
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "use_cache", False):
        # No KV cache, as transformers' own gradient checkpointing sets it: the recompute would
        # append each block's keys and values to it a second time, and compiled, it fails on
        # the causal mask (experiments/2026-11-30-h200-compile-ckpt).
        config.use_cache = False


def checkpoint_on_copies(block: nn.Module, *args: Any, **kwargs: Any) -> Any:
    """torch's checkpoint (non-reentrant) of a block, given a copy of each list it is called
    with. The recompute in backward calls the block again with the arguments its forward was
    given, and a list that the caller goes on appending to would hold more by then: torchvision's
    DenseNet gives each layer the list of the features so far, then adds the layer's own
    (checkpointed as it was, the recompute took a concatenation 32 channels too wide). The copy
    holds the same tensors, as they were. (emit/lines.py writes this function out.)"""
    args = tuple(list(a) if isinstance(a, list) else a for a in args)
    return checkpoint(block, *args, use_reentrant=False, **kwargs)


def set_precision_flags(precision: Precision) -> None:
    """fp32 means true fp32; tf32 turns TF32 on; default and the autocast settings leave TF32 as
    torch (or the workload's own code) sets it."""
    if precision in (Precision.fp32, Precision.tf32):
        allow = precision is Precision.tf32
        torch.backends.cuda.matmul.allow_tf32 = allow
        torch.backends.cudnn.allow_tf32 = allow
