"""A trial's device memory as it runs: the caching allocator's counters on a GPU, a count of
every tensor storage on the CPU (which has no caching allocator: a dispatch mode accounts for
each storage while the warm-up steps run, and is off for the timed steps), the phases of the
step the peak rose in, and what the process holds beyond the allocator (NVML)."""

from __future__ import annotations

import contextlib
import os
import sys
import weakref
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from advisor import gpus
from advisor.result import Phase
from advisor.spec import Device, TrialSpec
from advisor.trial.one_rank import fsdp_storage_told
from advisor.trial.training import Training


class CudaMemory:
    """The caching allocator's own counters for one GPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def tracking(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device)

    def peak_allocated(self) -> int:
        return torch.cuda.max_memory_allocated(self.device)

    def peak_reserved(self) -> int:
        return torch.cuda.max_memory_reserved(self.device)

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def num_alloc_retries(self) -> int:
        return int(torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0))


class CpuMemory(TorchDispatchMode):
    """Live bytes of the tensor storages made while tracking, and their peak.

    Each storage is counted once (views and in-place results share it) and uncounted when it is
    freed: torch keeps a storage's Python object alive exactly as long as the storage. FSDP2
    frees and gathers again by resizing a storage, which it is told of where it shards.
    """

    def __init__(self, follows_fsdp_resizes: bool = False) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self.follows_fsdp_resizes = follows_fsdp_resizes
        self._counted: dict[int, object] = {}  # data pointer: the count's own token

    def tracking(self) -> contextlib.AbstractContextManager[Any]:
        if not self.follows_fsdp_resizes:
            return self
        stack = contextlib.ExitStack()
        stack.enter_context(self)
        stack.enter_context(fsdp_storage_told(lambda t: self.count([t]), self.release))
        return stack

    def release(self, tensor: torch.Tensor) -> None:
        """A counted tensor's storage about to be freed though it lives on (FSDP2 resizes it
        to nothing)."""
        storage = tensor.untyped_storage()
        if self._counted.pop(storage.data_ptr(), None) is not None:
            self.live -= storage.nbytes()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.count(tree_flatten(out)[0])
        return out

    def count(self, values: Iterable[object]) -> None:
        for t in values:
            if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
                continue
            t = local(t)
            storage = t.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
            if size == 0 or key in self._counted:
                continue
            token = self._counted[key] = object()
            self.live += size
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._freed, key, size, token)

    def _freed(self, key: int, size: int, token: object) -> None:
        if self._counted.get(key) is token:  # (not released before, nor its memory reused)
            del self._counted[key]
            self.live -= size

    def allocated(self) -> int:
        return self.live

    def peak_allocated(self) -> int:
        return self.peak

    def peak_reserved(self) -> int:
        return self.peak  # no caching allocator: what is reserved is what is allocated

    def reset_peak(self) -> None:
        self.peak = self.live

    def num_alloc_retries(self) -> int:
        return 0


DeviceMemory = CudaMemory | CpuMemory


class StepMarks:
    """Follows the phases of the train step: the current phase (for an OOM), the phase in which
    the peak rose, the activations one forward leaves for backward, and the gradients' size."""

    def __init__(self, memory: DeviceMemory) -> None:
        self.memory = memory
        self.phase = Phase.setup
        self.peak_phase: Phase | None = None
        self.activations_bytes = 0
        self.grads_bytes = 0
        self.training: Training | None = None
        self._peak_seen = 0
        self._forward_start = 0

    def mark(self, phase: Phase) -> None:
        self._close_phase()
        allocated = self.memory.allocated()
        if phase is Phase.forward:
            self._forward_start = allocated
        elif phase is Phase.backward:
            self.activations_bytes = max(self.activations_bytes, allocated - self._forward_start)
        elif phase is Phase.optimizer and self.training is not None:
            grads = (p.grad for p in self.training.model.parameters() if p.grad is not None)
            self.grads_bytes = tensor_bytes(grads)
        self.phase = phase

    def end_step(self) -> None:
        self._close_phase()

    def restart_peak(self) -> None:
        """From here on is the steady state: its peak and peak phase start afresh."""
        self.memory.reset_peak()
        self._peak_seen = 0
        self.peak_phase = None

    def _close_phase(self) -> None:
        peak = self.memory.peak_allocated()
        if peak > self._peak_seen:  # the peak rose during the phase now ending
            self._peak_seen = peak
            self.peak_phase = self.phase


def local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's shard on this rank (FSDP2's parameters, gradients and optimizer state), else
    the tensor itself. (No DTensor exists where its module was never imported.)"""
    dtensor = sys.modules.get("torch.distributed.tensor")
    if dtensor is not None and isinstance(t, dtensor.DTensor):
        return t.to_local()
    return t


def tensor_bytes(tensors: Iterable[torch.Tensor], device: torch.device | None = None) -> int:
    """Bytes of distinct storages among the tensors (on `device` only, if given); of a DTensor,
    its shard's."""
    seen: dict[int, int] = {}
    for t in map(local, tensors):
        if device is not None and t.device.type != device.type:
            continue
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def optimizer_state_bytes(optimizer: torch.optim.Optimizer, device: torch.device) -> int:
    """State tensors on the device (AdamW: exp_avg and exp_avg_sq; its step counters sit on the
    host unless the implementation is fused or capturable)."""
    values: list[torch.Tensor] = []
    for state in optimizer.state.values():
        values.extend(v for v in state.values() if isinstance(v, torch.Tensor))
    return tensor_bytes(values, device)


def context_bytes_of(
    spec: TrialSpec, device: torch.device, used_before: int | None
) -> tuple[int, int | None]:
    """What the process holds on the GPU beyond the caching allocator (CUDA context, libraries'
    handles, loaded kernels), as NVML sees it at the end of the trial; NVML's figure too."""
    if spec.device is not Device.cuda:
        return 0, None
    torch.cuda.synchronize(device)
    used = gpus.process_used_bytes(os.getpid(), device.index or 0)
    if used is None and used_before is not None:  # no per-process figures (a container, a VM)
        now = gpus.device_used_bytes(device.index or 0)
        used = None if now is None else now - used_before
    if used is None:
        return 0, None
    return max(0, used - torch.cuda.memory_reserved(device)), used
