"""What one rank's collectives carry in a step, recorded as the step runs on the fake process
group (issue 28): each all-reduce, all-gather and reduce-scatter by its full buffer, as
communication.py's model of their time wants it.

FSDP2 calls c10d's ops, which a dispatch mode sees, on whatever thread autograd runs its hooks
(the mode travels with autograd's thread-local state); a compiled graph's own collectives are
c10d_functional's. DDP's all-reduces are not called at all here: its comm hook
(one_rank._bucket_as_it_is) hands each bucket back, and tells the recorder its size.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from advisor.communication import Collective

# c10d's ops and the functional ones, by name (their overload packet's): what each collective is
_KINDS = {
    "allreduce_": Collective.all_reduce,
    "allreduce_coalesced_": Collective.all_reduce,
    "all_reduce": Collective.all_reduce,
    "all_reduce_coalesced": Collective.all_reduce,
    "_allgather_base_": Collective.all_gather,
    "allgather_": Collective.all_gather,
    "allgather_into_tensor_coalesced_": Collective.all_gather,
    "all_gather_into_tensor": Collective.all_gather,
    "all_gather_into_tensor_coalesced": Collective.all_gather,
    "_reduce_scatter_base_": Collective.reduce_scatter,
    "reduce_scatter_": Collective.reduce_scatter,
    "reduce_scatter_tensor_coalesced_": Collective.reduce_scatter,
    "reduce_scatter_tensor": Collective.reduce_scatter,
    "reduce_scatter_tensor_coalesced": Collective.reduce_scatter,
}
_NAMESPACES = ("c10d", "_c10d_functional")


class Collectives(TorchDispatchMode):
    """The bytes of every collective run while recording(), by kind; off, it sees nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.carried: Counter[Collective] = Counter()
        self.count = 0
        self.largest = 0
        self.on = False

    @contextlib.contextmanager
    def recording(self, watch_ops: bool = True) -> Iterator[None]:
        """Record what runs inside, from nothing: what add() is told, and where `watch_ops`,
        the c10d ops that run (as a dispatch mode, which dynamo does not compile under)."""
        self.carried.clear()
        self.count = self.largest = 0
        self.on = True
        try:
            with self if watch_ops else contextlib.nullcontext():
                yield
        finally:
            self.on = False

    def add(self, kind: Collective, nbytes: int) -> None:
        if self.on:
            self.carried[kind] += nbytes
            self.count += 1
            self.largest = max(self.largest, nbytes)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        namespace = getattr(func, "namespace", "")
        kind = _KINDS.get(func._opname) if namespace in _NAMESPACES else None
        if kind is not None:
            self.add(kind, _full_bytes(kind, namespace, args))
        return func(*args, **(kwargs or {}))

    def figures(self) -> dict[str, int]:
        """Throughput's fields for what was recorded."""
        return {
            "all_reduce_bytes": self.carried[Collective.all_reduce],
            "all_gather_bytes": self.carried[Collective.all_gather],
            "reduce_scatter_bytes": self.carried[Collective.reduce_scatter],
            "collectives": self.count,
            "largest_collective_bytes": self.largest,
        }


def _full_bytes(kind: Collective, namespace: str, args: Any) -> int:
    """A collective's full buffer: c10d's ops take (outputs, inputs, ...) for a gather or a
    scatter, of which the unsharded side is the larger, and (tensors, ...) for an all-reduce;
    a functional all-gather takes (input, group_size, ...)."""
    if namespace == "_c10d_functional" and kind is Collective.all_gather:
        return _bytes(args[0]) * int(args[1])
    return max(_bytes(args[0]), _bytes(args[1]) if len(args) > 1 else 0)


def _bytes(value: Any) -> int:
    """The bytes of a tensor, or of the tensors of a (nested) list; 0 for anything else."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(_bytes(v) for v in value)
    return 0
