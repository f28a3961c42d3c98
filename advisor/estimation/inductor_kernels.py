"""A compiled graph as inductor's kernels see it: which of its values are buffers, which nodes
each kernel computes, and where each buffer is last read.

An operator inductor fuses into the kernels that read it (pointwise ones, gathers, random
numbers) makes no buffer of its own, unless an extern kernel (a matmul, a convolution,
attention) reads it, the graph returns it, or inductor's realize heuristics compute it once
(torch/_inductor/ir.py, StorageBox); one computed once is fused back into its one reader, where
its scheduler can. A reduction or a concatenation makes a buffer and fuses what feeds it, unless
its one reader is a pointwise kernel as wide as it: then it runs in that kernel, where that
kernel runs (which operators are which: inductor_ops.py).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from advisor.estimation.inductor_ops import fused, fusing, reduces
from advisor.estimation.storage_bytes import dense, numel, storages_of, tensors

# inductor's thresholds (torch/_inductor/config.py; graph.py, run_node; ir.py, StorageBox): a
# pointwise node is computed once, into a buffer, where its kernel would read over 8 buffers
# (realize_acc_reads_threshold), or compute over 30 operations reading more than one buffer
# (realize_opcount_threshold), or over 100 whatever it reads; a node read by several, where it
# reads over 4 (realize_reads_threshold) or computes over 30
ACCUMULATED_READS, REUSED_READS, REALIZE_OPS, INLINED_OPS_LIMIT = 8, 4, 30, 100
# max_fusion_buffer_group_pairwise_attempts: how many of a buffer's next readers inductor tries
# to fuse with one that reads it
FUSION_CANDIDATES = 64


def _constants(nodes: frozenset[fx.Node]) -> set[float]:
    """The numbers a kernel's operators take. Inductor's op count (OpCounterCSE) counts each
    distinct constant once, as each load and each operator; this approximates it on the graph's
    nodes (1 and 1.0 count once here, a keyword's number not at all, a node lowered to several
    operations as one)."""
    return {
        a for n in nodes for a in n.args if isinstance(a, (int, float)) and not isinstance(a, bool)
    }


class KernelGraph:
    """One graph as inductor's kernels see it: each storage's maker and readers, which are
    buffers, which nodes each kernel computes (kernels, by the node where it runs), and where
    each buffer is last read (last)."""

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
        computed: dict[fx.Node, frozenset[fx.Node]] = {}  # a fused node: what its kernel computes
        for node in self.nodes:  # in order: what a node reads is decided before it
            if node.op != "call_function" or not self.made[node] or not fused(node):
                self.is_buffer[node] = node.op == "placeholder" or bool(self.made[node])
                continue
            read = self.buffers_read(node)
            inlined = {self.owner[k] for k in self.reads[node] if not self._is_buffer(k)}
            computed[node] = frozenset((node,)).union(
                *(computed.get(n, frozenset()) for n in inlined)
            )
            ops = len(computed[node]) + len(read) + len(_constants(computed[node]))
            self.is_buffer[node] = (
                any(k in self.returned or self._read_by_extern(k) for k in self.made[node])
                or len(read) > ACCUMULATED_READS
                or (len(read) > 1 and ops > REALIZE_OPS)
                or ops > INLINED_OPS_LIMIT
                or (len(node.users) > 1 and (len(read) > REUSED_READS or ops > REALIZE_OPS))
            )
        # a buffer its one reading kernel computes in registers, unwritten: a reduction's output
        # its epilogue reads, a pointwise one fused into its reader
        self.in_registers: set[int] = set()
        self.kernels = self._fused_vertically(self._with_epilogues(self._kernels()))
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
        readers = self._kernel_readers(kernels)
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

    def _fused_vertically(
        self, kernels: dict[fx.Node, list[fx.Node]]
    ) -> dict[fx.Node, list[fx.Node]]:
        """Each pointwise kernel of one buffer, not returned, that one pointwise kernel as wide
        reads, and reads as it is written, fused into that kernel and run where it runs: a
        pointwise node is a buffer where inductor's realize heuristics compute it once (read by
        several nodes, it reads over 4 buffers or computes over 30 operations; it reads over 8,
        or more than one and computes over 30; or it computes over 100), and its scheduler then
        fuses it into the one kernel that reads it and drops the buffer. Compiled
        EfficientNet-B0's batch norms (5 reads: the input, mean, inverse deviation, weight and
        bias) read by SiLU's two operators made a 1176 MiB fp32 buffer a layer in the fake
        step's forward, none in the H200's and H100's steps, whose one kernel wrote the bf16
        output (experiments/2026-12-07-fused-into-reader)."""
        readers = self._kernel_readers(kernels)
        for producer in list(kernels):
            if len(kernels[producer]) != 1 or len(self.made[producer]) != 1 or not fused(producer):
                continue
            (key,) = self.made[producer]
            consumers = readers.get(key, set())
            if len(consumers) != 1 or key in self.returned:
                continue
            (consumer,) = consumers
            if not (
                fused(consumer)
                and numel(self.env[consumer]) == numel(self.env[producer])
                and self._read_as_written(key)
            ):
                continue
            kernels[consumer] = [*kernels.pop(producer), *kernels[consumer]]
            self.in_registers.add(key)
            for read in self.buffers_read(producer):
                readers[read].discard(producer)
                readers[read].add(consumer)
        return kernels

    def _kernel_readers(self, kernels: dict[fx.Node, list[fx.Node]]) -> dict[int, set[fx.Node]]:
        """Each buffer: the kernels reading it, by the node where each runs."""
        readers: dict[int, set[fx.Node]] = {}
        for node, members in kernels.items():
            for key in frozenset().union(*(self.buffers_read(m) for m in members)):
                readers.setdefault(key, set()).add(node)
        return readers

    def _read_as_written(self, key: int) -> bool:
        """Whether every node reading the storage reads it in its maker's shape and strides."""
        made = self.tensor(self.owner[key], key)
        return all(
            t.shape == made.shape and t.stride() == made.stride()
            for node in self.readers.get(key, ())
            for i in node.all_input_nodes
            for t in tensors(self.env[i])
            if id(t.untyped_storage()) == key
        )

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
