"""inductor's comprehensive padding on a GPU (torch/_inductor/ir.py, Layout._pad_strides): a
buffer one of its own kernels makes has each stride over 1024 elements rounded up to 128 bytes,
so that a warp's loads stay aligned, and its storage grows by as much. An attention score of
[..., 49, 49] grows by 1.3%: Swin-T's 225.09 MiB scores took 228.00 MiB on the H200
(experiments/2026-12-07-inductor-padding).

Left dense, as inductor leaves them (torch/_inductor/graph.py, mark_nodes_dislike_padding):
channels-last buffers; the graph's user-visible outputs and what they are views of (a
backward's gradients, a forward's own outputs, not what it saves for backward); and whatever
feeds a convolution with no reduction between.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import fx

from advisor.estimation.inductor_ops import fused, fusing, schema_name
from advisor.estimation.storage_bytes import tensors

# torch/_inductor/config.py: padding_alignment_bytes, padding_stride_threshold
ALIGNMENT_BYTES, PADDED_ABOVE = 128, 1024
# operators whose inputs inductor keeps dense, and the reductions that stop that going further up
DISLIKING = {
    "aten::convolution",
    "aten::convolution_backward",
    "aten::_scaled_mm",
    "aten::_scaled_mm_v2",
}
REDUCING = {
    f"aten::{name}"
    for name in ("var_mean", "sum", "mean", "prod", "any", "amin", "amax", "min", "max")
    + ("argmin", "argmax", "scatter_reduce")
}


def pad_buffers(gm: fx.GraphModule, env: dict[fx.Node, Any], user_visible: list[fx.Node]) -> None:
    """Grow each storage that a kernel of inductor's own makes (its values run on fake tensors
    in env) to the bytes inductor allocates for it."""
    dense = left_dense(gm, user_visible)
    seen: set[int] = set()  # storages made before (the graph's inputs first)
    for node in gm.graph.nodes:
        for t in tensors(env[node]):
            storage = t.untyped_storage()
            if id(storage) in seen:
                continue
            seen.add(id(storage))
            if node.op == "call_function" and node not in dense and (fused(node) or fusing(node)):
                nbytes = padded_nbytes(t)
                if nbytes > storage.nbytes():
                    storage.resize_(nbytes)


def left_dense(gm: fx.GraphModule, user_visible: Iterable[fx.Node]) -> set[fx.Node]:
    """The graph's nodes whose buffers inductor does not pad."""
    visible = _with_view_bases(user_visible)
    dense: set[fx.Node] = set()
    for node in reversed(gm.graph.nodes):
        if not isinstance(node.target, torch._ops.OpOverload):
            continue
        tag = torch._library.utils.get_layout_constraint_tag(node.target)
        if tag == torch._C.Tag.needs_exact_strides:
            dense.add(node)
            continue
        if schema_name(node) in DISLIKING:
            dense.add(node)
        if node in dense:
            for prior in node.all_input_nodes:
                if isinstance(prior.target, torch._ops.OpOverload) and (
                    schema_name(prior) not in REDUCING
                ):
                    dense.add(prior)
        if node in visible:
            dense.add(node)
    return dense


def _with_view_bases(nodes: Iterable[fx.Node]) -> set[fx.Node]:
    found, queue = set(nodes), list(nodes)
    while queue:
        node = queue.pop()
        target = node.target
        if isinstance(target, torch._ops.OpOverload) and target.is_view and node.args:
            base = node.args[0]
            if isinstance(base, fx.Node) and base not in found:
                found.add(base)
                queue.append(base)
    return found


def padded_nbytes(t: torch.Tensor) -> int:
    """The bytes of a buffer of t's shape and stride order, its strides padded as inductor
    pads them (no more than t's own where nothing is padded)."""
    size, strides = list(t.shape), list(t.stride())
    if not size or not all(isinstance(n, int) for n in (*size, *strides)):
        return t.untyped_storage().nbytes()  # symbolic sizes are not padded
    if t.dim() in (4, 5) and size[1] != 1 and _channels_last(t):
        return t.untyped_storage().nbytes()
    align = ALIGNMENT_BYTES // t.element_size()
    fill_order = sorted(range(len(size)), key=strides.__getitem__)  # innermost first
    padded = [0] * len(size)
    padded[fill_order[0]] = 1
    for previous, dim in zip(fill_order, fill_order[1:], strict=False):
        stride = padded[previous] * size[previous]
        if stride > PADDED_ABOVE and stride % align:
            stride = -(-stride // align) * align
        padded[dim] = stride
    if 0 in size:
        return t.untyped_storage().nbytes()
    elements = 1 + sum((n - 1) * s for n, s in zip(size, padded, strict=True))
    return max(elements * t.element_size(), t.untyped_storage().nbytes())


def _channels_last(t: torch.Tensor) -> bool:
    memory_format = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
    return t.is_contiguous(memory_format=memory_format)
