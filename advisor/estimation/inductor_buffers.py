"""The buffers inductor's kernels would make for one graph of a compiled step, and when each
is freed, counted on the fake step's counter in the graph's order.

An operator inductor fuses into the kernels that read it (pointwise ones, gathers, random
numbers) makes no buffer of its own, unless an extern kernel (a matmul, a convolution,
attention) reads it, the graph returns it, or inductor's realize heuristics compute it once
(torch/_inductor/ir.py, StorageBox). A reduction or a concatenation makes a buffer and fuses
what feeds it. Every buffer is freed after its last reader; a backward graph's inputs (what
the forward saved) too, as inductor's code frees them, except what the caller holds.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx
from torch.utils._pytree import tree_leaves

from advisor.estimation.storage_bytes import StorageBytes, storages_of

# Not tagged pointwise, but lowered by inductor into the kernels that read them (schema names)
FUSED = {
    "aten::_to_copy", "prims::convert_element_type", "aten::clone", "aten::copy", "aten::full",
    "aten::zeros", "aten::ones", "aten::scalar_tensor", "prims::iota", "aten::arange",
    "aten::rand", "aten::rand_like", "aten::randn", "aten::randn_like", "aten::bernoulli",
    "aten::index", "aten::gather", "aten::embedding", "aten::constant_pad_nd",
    "aten::slice_scatter", "aten::select_scatter", "aten::where", "aten::full_like",
    "aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::expand_copy",
    "aten::permute_copy", "prims::inductor_random", "prims::inductor_randint",
    "prims::inductor_seeds", "prims::inductor_lookup_seed",
}  # fmt: skip
FUSING = {"aten::cat"}  # kernels that make a buffer of their own and fuse what feeds them
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
) -> None:
    """Count the graph's buffers, its values (env) as one run of it on fake tensors left them:
    what it returns as the tensors themselves (they live on), the rest as allocations freed
    after their last reader."""
    graph = _Graph(gm, env)
    allocated: dict[int, int] = {}  # a buffer: its number in the counter's trace

    def free(key: int) -> None:
        if key in allocated:
            counter.free(allocated.pop(key), graph.storage[key].nbytes())
        elif backward and key not in held:
            counter.release(graph.storage[key])

    if backward:  # inputs no kernel reads die at once
        for key in graph.inputs:
            if key not in graph.last and key not in graph.returned:
                free(key)
    for at, node in enumerate(graph.nodes):
        if node not in graph.kernels:
            continue
        kernel = graph.kernels[node]
        for member in kernel:
            for key in graph.made[member]:
                if key in graph.returned:
                    counter.count(graph.tensor(member, key))
                else:
                    allocated[key] = counter.allocate(graph.storage[key].nbytes())
        made = [key for member in kernel for key in graph.made[member]]
        read = frozenset().union(*(graph.buffers_read(member) for member in kernel))
        for key in [*made, *sorted(read, key=graph.order.__getitem__)]:
            if graph.last.get(key, -1) <= at and key not in graph.returned:
                free(key)


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
        self.is_buffer: dict[fx.Node, bool] = {}
        self._resolved_keys: dict[int, frozenset[int]] = {}
        ops: dict[fx.Node, int] = {}  # a fused node: the operators its kernel computes
        for node in self.nodes:  # in order: what a node reads is decided before it
            if node.op != "call_function" or not self.made[node] or not _fused(node):
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
        self.kernels = self._kernels()
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
            if not _fused(node):
                continue
            read = self.buffers_read(node)
            for key in sorted(read, key=self.order.__getitem__):
                later = [n for n in readers.get(key, ()) if at[n] > i][:FUSION_CANDIDATES]
                for other in later:
                    if (
                        _fused(other)
                        and other not in fused_into
                        and _numel(self.env[other]) == _numel(self.env[node])
                        and all(at[self.owner[k]] < i for k in self.buffers_read(other))
                    ):
                        kernels[node].append(other)
                        fused_into.add(other)
        return kernels

    def _is_buffer(self, key: int) -> bool:
        return self.is_buffer[self.owner[key]]

    def _read_by_extern(self, key: int) -> bool:
        return any(
            n.op == "call_function" and self.made[n] and not (_fused(n) or _fusing(n))
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

    def tensor(self, node: fx.Node, key: int) -> torch.Tensor:
        """The node's tensor on the storage."""
        return next(t for t in _tensors(self.env[node]) if id(t.untyped_storage()) == key)


def _numel(value: Any) -> int:
    return sum(t.numel() for t in _tensors(value))


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def _fused(node: fx.Node) -> bool:
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return False
    return torch.Tag.pointwise in target.tags or target._schema.name in FUSED


def _fusing(node: fx.Node) -> bool:
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return False
    return torch.Tag.reduction in target.tags or target._schema.name in FUSING
