"""inductor's comprehensive padding on a GPU (torch/_inductor/ir.py, Layout._pad_strides): a
buffer one of its own kernels makes has each stride over 1024 elements rounded up to 128 bytes,
so that a warp's loads stay aligned, and its storage grows by as much. An attention score of
[..., 49, 49] grows by 1.3%: Swin-T's 225.09 MiB scores took 228.00 MiB on the H200
(experiments/2026-12-07-inductor-padding). torch's own rules decide, called as inductor calls
them, under its config (TORCHINDUCTOR_COMPREHENSIVE_PADDING=0 turns it off).

Left dense, as inductor leaves them (torch/_inductor/graph.py, mark_nodes_dislike_padding):
channels-last buffers; the graph's user-visible outputs and what they are views of (a
backward's gradients, a forward's own outputs, not what it saves for backward); whatever feeds
a convolution with no reduction between; extern kernels' outputs, whose layout is fixed.

Coarser than inductor: it asks whether the node being lowered when a layout is frozen dislikes
padding, this module whether the buffer's maker does (an extern kernel that fixes its inputs'
strides, attention's, leaves them dense there); and it pads in the fake tensor's stride order,
where inductor picks its own.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import fx

from advisor.estimation.inductor_ops import fused, fusing


def left_dense(gm: fx.GraphModule, user_visible: list[fx.Node]) -> set[fx.Node] | None:
    """The graph's nodes whose buffers inductor does not pad; None where it pads none (its
    config says so, or a torch that moved the rules)."""
    try:
        from torch._inductor import config
        from torch._inductor.graph import mark_nodes_dislike_padding
    except ImportError:
        return None
    if not config.comprehensive_padding:
        return None
    mark_nodes_dislike_padding(gm.graph, dict.fromkeys(user_visible, ()))
    return {node for node in gm.graph.nodes if node.meta.get("dislike_padding", False)}


def pad_buffers(made: Iterable[tuple[fx.Node, torch.Tensor]], dense: set[fx.Node]) -> None:
    """Grow each storage that a kernel of inductor's own makes (each storage by the node that
    made it, its tensor there, on fake tensors) to the bytes inductor allocates for it."""
    for node, t in made:
        if node.op == "call_function" and node not in dense and (fused(node) or fusing(node)):
            nbytes = padded_nbytes(t)
            if nbytes > t.untyped_storage().nbytes():
                t.untyped_storage().resize_(nbytes)


def padded_nbytes(t: torch.Tensor) -> int:
    """The bytes of a buffer of t's shape and stride order, its strides padded as inductor
    pads them (t's own where nothing is padded)."""
    from torch._inductor.ir import Layout

    size, strides = list(t.shape), list(t.stride())
    padded = Layout._pad_strides(strides, size, t.dtype)
    if list(padded) == strides or 0 in size:
        return t.untyped_storage().nbytes()
    elements = 1 + sum((n - 1) * s for n, s in zip(size, padded, strict=True))
    return max(int(elements) * t.element_size(), t.untyped_storage().nbytes())
