"""The live bytes of fake storages, as the CUDA caching allocator would hold them, and when each
came and went: a dispatch mode that counts every storage an operator makes, rounded to the
allocator's block, and notes its free when the storage dies. A compiled step's graphs count
their buffers themselves (compiled_step.py): the mode is paused while they run."""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_flatten, tree_leaves

BLOCK = 512  # the caching allocator rounds every block to this many bytes


@dataclasses.dataclass
class _GradientSum:
    """An out-of-place sum of two gradients the engine just made, which may be undone."""

    result: int  # the sum's storage (id)
    at: int  # where its allocation is in the trace
    addends: set[int]  # the summed storages (ids)
    size: int  # the sum's bytes, rounded as counted
    peak_before: int  # the counter's peak before the sum was allocated


# an operator's rounds of temporaries, by its function, arguments and outputs
Temporaries = Callable[[Any, Sequence[Any], Any], list[list[int]]]


class StorageBytes(TorchDispatchMode):
    """Live bytes of fake storages (each rounded to the allocator's block), and their peak."""

    def __init__(self, block: int, temporaries: Temporaries | None = None) -> None:
        super().__init__()
        self.block, self.live, self.peak, self.extra = block, 0, 0, 0
        # what an operator allocates and frees inside itself, by its arguments and outputs
        # (CUDA's kernels' temporaries, which fake kernels make none of: cuda_workspaces.py)
        self.temporaries = temporaries
        self._counted: dict[int, int] = {}  # id of a live storage: its number in the trace
        self._numbered = 0
        self.trace: list[tuple[int, int]] = []
        self.summing = False  # the autograd engine is summing gradients (_gradient_sums_marked)
        self._sum: _GradientSum | None = None
        self.is_paused = False
        # the storages made on a side stream (FSDP2 gathers and reduce-scatters on its own: on
        # fake tensors, CPU streams, which torch.cpu tracks as CUDA would), by trace number:
        # the caching allocator keeps each stream's blocks apart
        self.streams: dict[int, int] = {}
        self._streams_seen: list[object] = [torch.cpu.current_stream()]  # (held: ids unique)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if self.is_paused:
            return out
        peak_before, at = self.peak, len(self.trace)
        for t in local_tensors(tree_flatten(out)[0]):
            self.count(t)
        self.make_temporaries(func, args, out)
        if (
            self.summing
            and func is torch.ops.aten.add.Tensor
            and len(self.trace) == at + 1
            and not is_traceable_wrapper_subclass(out)
        ):
            addends = {id(a.untyped_storage()) for a in args[:2] if isinstance(a, torch.Tensor)}
            result = out.untyped_storage()
            size = self._rounded(result.nbytes())
            self._sum = _GradientSum(id(result), at, addends, size, peak_before)
        return out

    def make_temporaries(self, func: Any, args: Any, out: Any) -> None:
        """The operator's own temporaries, allocated and freed now: each round's alive
        together, freed before the next."""
        for round_ in self.temporaries(func, args, out) if self.temporaries else ():
            made = [(self.allocate(n), n) for n in round_]
            for number, nbytes in reversed(made):
                self.free(number, nbytes)

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        """dynamo compiles under this mode (it skips frames under any other); what a compiled
        step's graphs hold is counted by the graphs themselves (compiled_step.py)."""
        return True

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Operators run inside make storages that are not counted (what counts them does so
        itself, with count, allocate and release)."""
        was, self.is_paused = self.is_paused, True
        try:
            yield
        finally:
            self.is_paused = was

    def allocate(self, nbytes: int) -> int:
        """A buffer no tensor stands for (a compiled kernel's), allocated now: its number."""
        self._sum = None  # as for a counted storage: a sum is in place only if nothing came
        number = self._numbered
        self._numbered += 1
        self.trace.append((number, nbytes))
        self._note_stream(number)
        self.live += self._rounded(nbytes)
        self.peak = max(self.peak, self.live + self.extra)
        return number

    def free(self, number: int, nbytes: int) -> None:
        """An allocated buffer's free."""
        self.trace.append((number, -1))
        self.live -= self._rounded(nbytes)

    def release(self, storage: torch.UntypedStorage) -> None:
        """A counted storage freed now, though a Python object still holds it (a compiled
        backward's inputs, freed by the kernels at their last use)."""
        key = id(storage)
        if key in self._counted:
            self.trace.append((self._counted.pop(key), -1))
            self.live -= self._rounded(storage.nbytes())

    def _rounded(self, nbytes: int) -> int:
        return -(-nbytes // self.block) * self.block

    def count(self, t: torch.Tensor) -> int:
        """Count a tensor's storage now, if it is not counted yet; its bytes as counted."""
        storage = t.untyped_storage()
        key, size = id(storage), self._rounded(storage.nbytes())
        if size and key not in self._counted:
            self._sum = None  # a sum is in place only if its addend is freed before this
            number = self._counted[key] = self._numbered
            self._numbered += 1
            self.trace.append((number, storage.nbytes()))
            self._note_stream(number)
            self.live += size
            self.peak = max(self.peak, self.live + self.extra)
            weakref.finalize(storage, self._freed, key, size)
        return size

    def _note_stream(self, number: int) -> None:
        stream = torch.cpu.current_stream()
        index = next((i for i, s in enumerate(self._streams_seen) if s is stream), None)
        if index is None:
            index = len(self._streams_seen)
            self._streams_seen.append(stream)
        if index:
            self.streams[number] = index

    def _freed(self, key: int, size: int) -> None:
        if key not in self._counted:  # released before it died
            return
        number = self._counted.pop(key)
        s = self._sum
        if s is not None and key in s.addends and size == s.size:
            # The engine sums into a gradient nothing else holds: CUDA writes the sum into it
            # and allocates nothing; the fake tensors were summed into a new storage.
            del self.trace[s.at]
            self._counted[s.result] = number
            self.peak, self._sum = s.peak_before, None
        else:
            self.trace.append((number, -1))
        self.live -= size

    def alive(self) -> tuple[int, ...]:
        """The sizes of the storages traced and not yet freed, in the order they came."""
        numbers = set(self._counted.values())
        return tuple(size for number, size in self.trace if size >= 0 and number in numbers)

    def bytes_of(self, tensors: Iterable[torch.Tensor]) -> int:
        sizes = {id(t.untyped_storage()): self._rounded(t.untyped_storage().nbytes())
                 for t in local_tensors(tensors)}  # fmt: skip
        return sum(sizes.values())


def local_tensors(values: Iterable[Any]) -> Iterator[torch.Tensor]:
    """The tensors among the values whose storages hold the bytes: a wrapper subclass (FSDP2's
    DTensor parameters) by the tensors inside it; its own storage, as big as the whole tensor
    it stands for, holds nothing on a device."""
    for value in values:
        if is_traceable_wrapper_subclass(value):
            inner, _ = value.__tensor_flatten__()
            yield from local_tensors(getattr(value, name) for name in inner)
        elif isinstance(value, torch.Tensor):
            yield value


def storages_of(value: Any) -> list[torch.UntypedStorage]:
    """The storages of the tensors in a value (a tensor, or a pytree of them)."""
    return [t.untyped_storage() for t in tensors(value)]


def dense(t: torch.Tensor) -> bool:
    """Whether a tensor covers its storage in some order of its dimensions (a pointwise
    kernel's output takes the layout of such an input: inductor decides its layout)."""
    return (
        t.is_contiguous()
        or t.is_contiguous(memory_format=torch.channels_last)
        or (t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d))
    )


def numel(value: Any) -> int:
    return sum(t.numel() for t in tensors(value))


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in a value (a tensor, or a pytree of them) whose storages hold the bytes."""
    return list(local_tensors(tree_leaves(value)))
