"""The buffers inductor's kernels would make for one graph of a compiled step, and when each
is freed, counted on the fake step's counter in the graph's order.

Which values are buffers, and which nodes each kernel computes, is the graph model's
(inductor_kernels.py). Every buffer is freed after its last reader; a backward graph's inputs
(what the forward saved) too, as inductor's code frees them, except what the caller holds.

inductor's code also keeps buffers that an eager step would free and allocate again: a pointwise
kernel writes in place of a buffer it reads for the last time, and a buffer the code allocates
takes one freed before it of the same dtype and size. An extern kernel's own workspaces (cuDNN's
convolutions', attention's) come after its outputs, as in an eager step. Left out, the fake
step's replay reserved 17% less than the H200's steady compiled step (a DDPM UNet) to 10.5% more
(ResNet-50-D; experiments/2026-12-06-compiled-device-peak).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from typing import Any, NamedTuple

import torch
from torch import fx

from advisor.estimation.inductor_kernels import KernelGraph
from advisor.estimation.inductor_ops import extern, fused, fusing, schema_name
from advisor.estimation.inductor_padding import pad_buffers
from advisor.estimation.storage_bytes import StorageBytes

# extern kernels whose output inductor's wrapper allocates (ExternKernelOut: at::mm_out, ...),
# which can so take a freed buffer; a convolution or attention allocates its own
ALLOCATED_EXTERN = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}


def count_buffers(
    gm: fx.GraphModule,
    env: dict[fx.Node, Any],
    counter: StorageBytes,
    *,
    backward: bool,
    held: set[int],
    left_dense: set[fx.Node] | None = None,
) -> None:
    """Count the graph's buffers, its values (env) as one run of it on fake tensors left them:
    what it returns as the tensors themselves (they live on), the rest as allocations freed
    after their last reader, unless a later buffer takes them over as inductor's code does;
    and each extern kernel's workspaces (the counter's temporaries). left_dense: on a GPU, the
    nodes whose buffers inductor leaves unpadded; the rest grow as it pads them."""
    graph = KernelGraph(gm, env)
    if left_dense is not None:  # on a GPU: inductor's comprehensive padding
        made = ((graph.owner[key], graph.tensor(graph.owner[key], key)) for key in graph.storage)
        pad_buffers(made, left_dense)
    events = _events(graph, backward, held)
    reused = _reuses(graph, events)
    allocated: dict[int, int] = {}  # a buffer: its number in the counter's trace
    for index, event in enumerate(events):
        key, member = event.key, event.member
        if event.kind is Happens.COUNTED:  # returned: counted as itself, from a taken buffer on
            assert member is not None
            if key in reused.taken:
                taken = reused.taken[key]
                counter.free(allocated.pop(taken), graph.storage[taken].nbytes())
            counter.count(graph.tensor(member, key))
        elif event.kind is Happens.ALLOCATED:
            if key in reused.taken:
                allocated[key] = allocated.pop(reused.taken[key])
            else:
                allocated[key] = counter.allocate(graph.storage[key].nbytes())
        elif event.kind is Happens.WRITTEN_IN_PLACE:
            assert event.in_place_of is not None
            allocated[key] = allocated.pop(event.in_place_of)
        elif event.kind is Happens.WORKSPACES:
            assert member is not None
            args = fx.node.map_arg(member.args, env.__getitem__)
            counter.make_temporaries(member.target, args, env[member])
        elif event.kind in (Happens.FREED, Happens.HANDED_OVER):
            if index not in reused.frees_removed:
                counter.free(allocated.pop(key), graph.storage[key].nbytes())
        elif event.kind is Happens.RELEASED:  # a backward's input, freed at its last reader
            counter.release(graph.storage[key])


class Happens(enum.Enum):
    """What an event of a graph's run does to a storage."""

    ALLOCATED = "allocated"  # a buffer the graph's code allocates
    COUNTED = "counted"  # a returned tensor, counted as itself (it lives on)
    WRITTEN_IN_PLACE = "written in place"  # a buffer written into another the kernel reads
    HANDED_OVER = "handed over"  # a buffer that a returned tensor is written in place of
    WORKSPACES = "workspaces"  # an extern kernel's own (the storage is none: -1)
    FREED = "freed"  # one of the graph's buffers, after its last reader
    RELEASED = "released"  # a backward graph's input, after its last reader


class Event(NamedTuple):
    """One event of a graph's run, in the order inductor's code runs it."""

    kind: Happens
    key: int  # the storage (-1: none)
    kernel: int  # the kernel's place among the graph's kernels (-1: before the first)
    member: fx.Node | None = None  # the node that makes the storage, or runs the kernel
    in_place_of: int | None = None  # the buffer it is written into


def _events(graph: KernelGraph, backward: bool, held: set[int]) -> list[Event]:
    """The graph's buffers made and freed, kernel by kernel, as inductor's code runs them."""
    events: list[Event] = []
    if backward:  # inputs no kernel reads die at once
        for key in graph.inputs:
            if key not in graph.last and key not in graph.returned and key not in held:
                events.append(Event(Happens.RELEASED, key, -1))
    made_here: set[int] = set()  # the graph's own buffers, alive
    kernel_nodes = [(at, node) for at, node in enumerate(graph.nodes) if node in graph.kernels]
    for ordinal, (at, node) in enumerate(kernel_nodes):
        kernel = graph.kernels[node]
        for member in kernel:
            for key in graph.made[member]:
                if key in graph.in_registers:
                    continue
                old = graph.written_in_place_of(member, key, kernel, at, made_here)
                if old is None:
                    kind = Happens.COUNTED if key in graph.returned else Happens.ALLOCATED
                elif key in graph.returned:  # (the storage is the output's from here on)
                    events.append(Event(Happens.HANDED_OVER, old, ordinal))
                    kind = Happens.COUNTED
                else:
                    kind = Happens.WRITTEN_IN_PLACE
                if old is not None:
                    made_here.discard(old)
                events.append(Event(kind, key, ordinal, member, old))
                made_here.add(key)
            if extern(member):  # its own workspaces, after its outputs, as CUDA's kernels
                events.append(Event(Happens.WORKSPACES, -1, ordinal, member))
        made = [key for member in kernel for key in graph.made[member]]
        read = frozenset().union(*(graph.buffers_read(member) for member in kernel))
        for key in [*made, *sorted(read, key=graph.order.__getitem__)]:
            if graph.last.get(key, -1) <= at and key not in graph.returned:
                if key in made_here:
                    events.append(Event(Happens.FREED, key, ordinal))
                    made_here.discard(key)
                elif backward and key in graph.input_keys and key not in held:
                    events.append(Event(Happens.RELEASED, key, ordinal))
    return events


@dataclasses.dataclass
class _Reuses:
    """Buffers made in freed ones (new storage: freed one), and the frees that removes."""

    taken: dict[int, int] = dataclasses.field(default_factory=dict)
    frees_removed: set[int] = dataclasses.field(default_factory=set)


def _reuses(graph: KernelGraph, events: list[Event]) -> _Reuses:
    """Which buffers inductor's memory planning reuses (torch/_inductor/codegen/wrapper.py,
    AllocateLine.plan): a buffer the wrapper allocates takes the last freed one of its dtype
    and size, unless that would raise the graph's peak as inductor estimates it
    (_estimated_memory) where kernels lie between the free and the allocation. An extern
    kernel that makes its own output (a convolution, attention) takes none; its output, once
    freed, can be taken."""
    peak = _estimated_memory(graph, events)
    overall = max(peak, default=0)
    reuses = _Reuses()
    pool: dict[tuple[torch.dtype, int], list[tuple[int, int, int]]] = {}
    for index, (kind, key, at, member, in_place_of) in enumerate(events):
        if kind is Happens.FREED:
            pool.setdefault(graph.reuse_key(key), []).append((index, key, at))
        elif (
            kind in (Happens.ALLOCATED, Happens.COUNTED)
            and in_place_of is None
            and member is not None
            and _allocated_by_wrapper(member)
        ):
            candidates = pool.get(graph.reuse_key(key))
            if not candidates:
                continue
            freed_at_index, old, freed_at = candidates.pop()
            size = graph.storage[key].nbytes()
            between = peak[freed_at + 2 : at + 1]
            if freed_at + 1 == at or size + max(between, default=0) <= overall:
                reuses.taken[key] = old
                reuses.frees_removed.add(freed_at_index)
                for k in range(freed_at + 2, at + 1):
                    peak[k] += size
            else:
                candidates.append((freed_at_index, old, freed_at))
    return reuses


def _estimated_memory(graph: KernelGraph, events: list[Event]) -> list[int]:
    """The graph's bytes before its first kernel and while each runs, as inductor's memory
    planning estimates them (torch/_inductor/memory.py, estimate_peak_memory): each buffer from
    the kernel that makes it through its last reader, the inputs kernels read from the start.
    The estimate precedes the planning, so a buffer written in place of another counts apart
    from it, both at the kernel that writes it.

    Counted as one, as the code runs them, the DDPM UNet's backward declined a 256 MiB reuse by
    1.1 MiB. Inductor took it on the H100, with 128 MiB to spare: each resnet block's group
    norm computes its input gradient into one buffer, then writes it in place of that. The fake
    step's device peak was 5.7% under the H200's (experiments/2026-12-07-inductor-estimate)."""
    # change[0]: before the first kernel; change[k + 1]: kernel k; the last slot takes the frees
    # after the last kernel
    change = [0] * (max((event.kernel for event in events), default=-1) + 3)
    for kind, key, kernel, _member, in_place_of in events:
        size = graph.storage[key].nbytes() if key >= 0 else 0
        match kind:
            case Happens.RELEASED if kernel >= 0:  # an input a kernel reads: from the start
                change[0] += size
                change[kernel + 2] -= size
            case Happens.COUNTED | Happens.ALLOCATED:
                change[kernel + 1] += size
            case Happens.WRITTEN_IN_PLACE:
                assert in_place_of is not None
                change[kernel + 1] += size
                change[kernel + 2] -= graph.storage[in_place_of].nbytes()  # its last reader ran
            case Happens.FREED | Happens.HANDED_OVER:
                change[kernel + 2] -= size
            case _:  # an input no kernel reads (not in the estimate), a kernel's workspaces
                pass
    return list(itertools.accumulate(change[:-1]))


def _allocated_by_wrapper(node: fx.Node) -> bool:
    return fused(node) or fusing(node) or schema_name(node) in ALLOCATED_EXTERN
