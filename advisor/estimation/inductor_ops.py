"""Which aten operators inductor lowers into the kernels that read them (fused: pointwise ones
and those it treats so), which make a kernel of their own that fuses what feeds them (fusing:
reductions, which `reduces` names, and concatenation), and which it calls as extern kernels (a
matmul, a convolution, attention)."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

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
    # pooling's windows, computed where they are read (torch/_inductor/lowering.py); a max
    # pool's indices from its offsets were a 392 MiB int64 buffer in ResNet-50-D's fake step,
    # which the H200's step never allocated (experiments/2026-12-06-compiled-device-peak)
    "prims::_low_memory_max_pool_offsets_to_indices", "aten::max_pool2d_with_indices_backward",
    "aten::avg_pool2d", "aten::avg_pool2d_backward",
}  # fmt: skip
FUSING = {"aten::cat"}  # kernels that make a buffer of their own and fuse what feeds them


def schema_name(node: fx.Node) -> str:
    target = node.target
    return target._schema.name if isinstance(target, torch._ops.OpOverload) else ""


def fused(node: fx.Node) -> bool:
    return torch.Tag.pointwise in _tags(node) or schema_name(node) in FUSED


def extern(node: fx.Node) -> bool:
    """A kernel inductor calls rather than generates (a convolution, a matmul, attention)."""
    return isinstance(node.target, torch._ops.OpOverload) and not (fused(node) or fusing(node))


def fusing(node: fx.Node) -> bool:
    return reduces(node) or schema_name(node) in FUSING


def reduces(node: fx.Node) -> bool:
    return torch.Tag.reduction in _tags(node)


def _tags(node: fx.Node) -> tuple[Any, ...] | list[Any]:
    return node.target.tags if isinstance(node.target, torch._ops.OpOverload) else ()
