"""The buffers inductor's kernels would make for one graph of a compiled step, and when each
is freed, counted on the fake step's counter in the graph's order.

An operator inductor fuses into the kernels that read it (pointwise ones, gathers, random
numbers) makes no buffer of its own, unless an extern kernel (a matmul, a convolution,
attention) reads it, the graph returns it, or inductor's realize heuristics compute it once
(torch/_inductor/ir.py, StorageBox). A reduction or a concatenation makes a buffer and fuses
what feeds it, unless its one reader is a pointwise kernel as wide as it: then it runs in that
kernel, where that kernel runs (which operators are which: inductor_ops.py). Every buffer is
freed after its last reader; a backward graph's inputs (what the forward saved) too, as
inductor's code frees them, except what the caller holds.

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
from typing import Any, NamedTuple

import torch
from torch import fx

from advisor.estimation.inductor_ops import extern, fused, fusing, reduces, schema_name
from advisor.estimation.inductor_padding import pad_buffers
from advisor.estimation.storage_bytes import StorageBytes, dense, numel, storages_of, tensors

# extern kernels whose output inductor's wrapper allocates (ExternKernelOut: at::mm_out, ...),
# which can so take a freed buffer; a convolution or attention allocates its own
ALLOCATED_EXTERN = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
# inductor's thresholds (torch/_inductor/config.py): a kernel reads at most 8 buffers; a node
# read by several is computed once where it reads over 4 or computes over 30 operators
ACCUMULATED_READS, REUSED_READS, REUSED_OPS = 8, 4, 30
# max_fusion_buffer_group_pairwise_attempts: how many of a buffer's next readers inductor tries
# to fuse with one that reads it
FUSION_CANDIDATES = 64


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
    graph = _Graph(gm, env)
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


def _events(graph: _Graph, backward: bool, held: set[int]) -> list[Event]:
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


def _reuses(graph: _Graph, events: list[Event]) -> _Reuses:
    """Which buffers inductor's memory planning reuses (torch/_inductor/codegen/wrapper.py,
    AllocateLine.plan): a buffer the wrapper allocates takes the last freed one of its dtype
    and size, unless that would raise the graph's own peak (the graph's buffers and freeable
    inputs, kernel by kernel) where kernels lie between the free and the allocation. An extern
    kernel that makes its own output (a convolution, attention) takes none; its output, once
    freed, can be taken."""
    kernels = max((event.kernel for event in events), default=-1) + 2
    peak = [0] * kernels  # at kernel k + 1: the graph's bytes while it runs
    live = sum(graph.storage[e.key].nbytes() for e in events if e.kind is Happens.RELEASED)
    peak[0] = live  # the graph's freeable inputs, live from its start
    for event in events:  # (a kernel's allocations come before its frees)
        if event.kind in (Happens.COUNTED, Happens.ALLOCATED):
            live += graph.storage[event.key].nbytes()
            peak[event.kernel + 1] = max(peak[event.kernel + 1], live)
        elif event.kind in (Happens.FREED, Happens.HANDED_OVER, Happens.RELEASED):
            live -= graph.storage[event.key].nbytes()
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


def _allocated_by_wrapper(node: fx.Node) -> bool:
    return fused(node) or fusing(node) or schema_name(node) in ALLOCATED_EXTERN


class _Graph:
    """One graph's storages: who made each, who reads it, and which are buffers."""

    def __init__(self, gm: fx.GraphModule, env: dict[fx.Node, Any]) -> None:
        *self.nodes, output = gm.graph.nodes
        self.env = env
        self.returned = {id(s) for s in storages_of(env[output])}
        self.storage: dict[int, torch.UntypedStorage] = {}
        self.order: dict[int, int] = {}  # a storage: when it was first seen
        self.owner: dict[int, fx.Node] = {}
        self.made: dict[fx.Node, list[int]] = {}
        self.reads: dict[fx.Node, list[int]] = {}
        self.readers: dict[int, list[fx.Node]] = {}
        for node in self.nodes:
            own = list(
                {id(s): s for s in storages_of(env[node]) if id(s) not in self.owner}.values()
            )
            for s in own:
                self.storage[id(s)], self.owner[id(s)] = s, node
                self.order[id(s)] = len(self.order)
            self.made[node] = [id(s) for s in own]
            inputs = {id(s) for i in node.all_input_nodes for s in storages_of(env[i])}
            self.reads[node] = sorted(inputs - set(self.made[node]), key=self.order.__getitem__)
            for key in self.reads[node]:
                self.readers.setdefault(key, []).append(node)
        self.inputs = [k for n in self.nodes if n.op == "placeholder" for k in self.made[n]]
        self.input_keys = set(self.inputs)
        self.is_buffer: dict[fx.Node, bool] = {}
        self._resolved_keys: dict[int, frozenset[int]] = {}
        ops: dict[fx.Node, int] = {}  # a fused node: the operators its kernel computes
        for node in self.nodes:  # in order: what a node reads is decided before it
            if node.op != "call_function" or not self.made[node] or not fused(node):
                self.is_buffer[node] = node.op == "placeholder" or bool(self.made[node])
                continue
            read = self.buffers_read(node)
            inlined = {self.owner[k] for k in self.reads[node] if not self._is_buffer(k)}
            ops[node] = 1 + sum(ops.get(n, 0) for n in inlined)
            self.is_buffer[node] = (
                any(k in self.returned or self._read_by_extern(k) for k in self.made[node])
                or len(read) > ACCUMULATED_READS
                or (len(node.users) > 1 and (len(read) > REUSED_READS or ops[node] > REUSED_OPS))
            )
        self.in_registers: set[int] = set()  # a reduction's output its epilogue reads unwritten
        self.kernels = self._with_epilogues(self._kernels())
        self.last: dict[int, int] = {}  # a buffer: where its last reader is
        for at, node in enumerate(self.nodes):
            for member in self.kernels.get(node, ()):
                for key in self.buffers_read(member):
                    self.last[key] = at

    def _kernels(self) -> dict[fx.Node, list[fx.Node]]:
        """Each kernel by the node where it runs: the node, and the pointwise buffers inductor
        fuses into it (horizontally: nodes as wide that read a buffer it reads, among that
        buffer's next 64 readers, all their inputs made before it). Their buffers are made
        together: gpt2's two padded copies of its logits' gradient, one for each matmul of
        backward, were live at once on the H200 (experiments/2026-12-03-h200-compiled-snapshots)."""
        at = {node: i for i, node in enumerate(self.nodes)}
        kernels: dict[fx.Node, list[fx.Node]] = {}
        readers: dict[int, list[fx.Node]] = {}  # a buffer: the kernels' nodes reading it
        for node in self.nodes:
            if node.op == "call_function" and self.is_buffer[node]:
                for key in self.buffers_read(node):
                    readers.setdefault(key, []).append(node)
        fused_into: set[fx.Node] = set()
        for i, node in enumerate(self.nodes):
            if node.op != "call_function" or not self.is_buffer[node] or node in fused_into:
                continue
            kernels[node] = [node]
            if not fused(node):
                continue
            read = self.buffers_read(node)
            for key in sorted(read, key=self.order.__getitem__):
                later = [n for n in readers.get(key, ()) if at[n] > i][:FUSION_CANDIDATES]
                for other in later:
                    if (
                        fused(other)
                        and other not in fused_into
                        and numel(self.env[other]) == numel(self.env[node])
                        and all(at[self.owner[k]] < i for k in self.buffers_read(other))
                    ):
                        kernels[node].append(other)
                        fused_into.add(other)
        return kernels

    def _with_epilogues(
        self, kernels: dict[fx.Node, list[fx.Node]]
    ) -> dict[fx.Node, list[fx.Node]]:
        """Each reduction (of one buffer, not returned) whose one reader is a pointwise kernel
        as wide as its output, fused into that kernel and run where it runs, as inductor fuses
        an epilogue (its scheduler fuses vertically whatever the distance); a kernel takes
        reductions over one loop only (as many elements read). T5's encoder layers each summed
        their shared position bias's gradient, which an add read at the end, and on the H200
        the layers' inputs to those sums (up to 448 MiB a layer) stayed until then
        (experiments/2026-12-06-epilogue-fusion)."""
        readers: dict[int, set[fx.Node]] = {}  # a buffer: the kernels reading it
        for node, members in kernels.items():
            for key in frozenset().union(*(self.buffers_read(m) for m in members)):
                readers.setdefault(key, set()).add(node)
        # (readers stays as it was before any move: it decides for reductions' outputs only,
        # and one that a reduction reads never moves, as only a pointwise kernel takes one)
        for node in [n for n in kernels if fused(n)]:
            loop = 0  # the elements each reduction fused into it reads
            read = frozenset().union(*map(self.buffers_read, kernels[node]))
            for key in sorted(read, key=self.order.__getitem__):
                reduction = self.owner[key]
                if not (
                    reduction in kernels
                    and reduces(reduction)
                    and self.made[reduction] == [key]
                    and key not in self.returned
                    and readers[key] == {node}
                    and numel(self.env[reduction]) == numel(self.env[node])
                ):
                    continue
                elements = numel(self.env[reduction.all_input_nodes[0]])
                if loop in (0, elements):
                    kernels[node] = [*kernels.pop(reduction), *kernels[node]]
                    self.in_registers.add(key)
                    loop = elements
        return kernels

    def _is_buffer(self, key: int) -> bool:
        return self.is_buffer[self.owner[key]]

    def _read_by_extern(self, key: int) -> bool:
        return any(
            n.op == "call_function" and self.made[n] and not (fused(n) or fusing(n))
            for n in self.readers.get(key, ())
        )

    def buffers_read(self, node: fx.Node) -> frozenset[int]:
        return frozenset().union(*(self._resolved(k) for k in self.reads[node]))

    def _resolved(self, key: int) -> frozenset[int]:
        """The buffers read when a storage is read: itself, or what its fused maker reads."""
        if key not in self._resolved_keys:
            self._resolved_keys[key] = (
                frozenset((key,)) if self._is_buffer(key) else self.buffers_read(self.owner[key])
            )
        return self._resolved_keys[key]

    def written_in_place_of(
        self, member: fx.Node, key: int, kernel: list[fx.Node], at: int, alive: set[int]
    ) -> int | None:
        """The buffer a pointwise kernel writes its output into, as inductor's scheduler
        decides (torch/_inductor/scheduler.py, decide_inplace_update): one of the graph's own
        buffers it alone reads, read for the last time, of the output's dtype and size, and
        read as the output is written: where the node reads it directly, in the output's shape
        and dense (the output then takes its layout; a strided view is read elsewhere)."""
        if not fused(member):
            return None
        out = self.tensor(member, key)
        for old in sorted(self.buffers_read(member), key=self.order.__getitem__):
            if old not in alive or old in self.returned or self.last.get(old, -1) > at:
                continue
            if sum(old in self.buffers_read(m) for m in kernel) != 1:
                continue
            if self.reuse_key(old) != self.reuse_key(key):
                continue
            read = [
                t
                for n in member.all_input_nodes
                for t in tensors(self.env[n])
                if id(t.untyped_storage()) == old
            ]
            if not read:  # read through the fused nodes before it: as the output is written
                return old
            if read[0].shape == out.shape and dense(read[0]):
                return old
        return None

    def reuse_key(self, key: int) -> tuple[torch.dtype, int]:
        """What inductor matches a freed buffer to a new one by: dtype and size."""
        return self.tensor(self.owner[key], key).dtype, self.storage[key].nbytes()

    def tensor(self, node: fx.Node, key: int) -> torch.Tensor:
        """The node's tensor on the storage."""
        return next(t for t in tensors(self.env[node]) if id(t.untyped_storage()) == key)
