"""What the fake step keeps where CUDA's kernels keep other than the CPU's, each seen in an
allocation trace on a GPU (experiments/2026-12-05-h200-allocator-trace,
experiments/2026-12-05-cuda-dropout): counted on fake tensors under the emulation, by the
bytes a step's forward leaves alive."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from conftest import spec_of
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from advisor.estimation.cuda_emulation import step_precision
from advisor.estimation.cuda_workspaces import cuda_temporaries
from advisor.estimation.storage_bytes import StorageBytes

MiB = 2**20


@contextlib.contextmanager
def counted(precision: str, unmodelled: set[str] | None = None) -> Iterator[StorageBytes]:
    spec = spec_of("model=tiny_mlp", "device=cuda", f"precision={precision}")
    tf32 = spec.precision.cudnn_tf32
    counter = StorageBytes(512, functools.partial(cuda_temporaries, tf32=tf32))
    with (
        FakeTensorMode(),
        counter,
        step_precision(spec, set() if unmodelled is None else unmodelled),
    ):
        yield counter


def kept_by(step: Callable[[], torch.Tensor], counter: StorageBytes) -> int:
    """The bytes the step leaves alive: its output and what its backward keeps."""
    before = counter.live
    out = step()  # noqa: F841 (alive while counted)
    return counter.live - before


def test_dropout_keeps_a_bool_mask_as_cudas_fused_kernel_does():
    """The CPU's dropout keeps its scaled noise in the input's dtype (4 bytes an element in
    fp32); CUDA's keeps a bool mask: T5 in fp32 was estimated 9.8% over."""
    with counted("fp32") as counter:
        x = torch.randn(MiB, requires_grad=True)
        assert kept_by(lambda: F.dropout(x, 0.1), counter) == 4 * MiB + MiB
        assert kept_by(lambda: torch.nn.Dropout(0.1)(x), counter) == 4 * MiB + MiB
        assert kept_by(lambda: torch.dropout(x, 0.1, True), counter) == 4 * MiB + MiB
        assert kept_by(lambda: F.dropout(x, 0.1, training=False), counter) == 0  # x itself


def test_softmax_under_autocast_is_computed_in_fp32_also_when_dtype_none_is_passed():
    """F.softmax passes its default on as dtype=None; CUDA's autocast still computes it in
    fp32: MPNet's attention in bf16 was estimated 9.6% under."""
    with counted("bf16"):
        scores = torch.randn(MiB, dtype=torch.bfloat16, requires_grad=True)
        assert F.softmax(scores, dim=-1).dtype == torch.float32
        assert scores.softmax(-1).dtype == torch.float32
        assert F.softmax(scores, dim=-1, dtype=torch.bfloat16).dtype == torch.bfloat16


def test_grouped_heads_with_dropout_keep_no_attention_matrix_in_16_bits():
    """CUDA's fused kernels read grouped heads in place and drop out inside; the CPU's kernel,
    standing in, would take its math path for the dropout and keep the matrix: GPTBigCode's
    multi-query attention was estimated 4.3 times what it held."""
    batch, heads, tokens, size = 2, 16, 512, 64
    matrix = batch * heads * tokens * tokens * 2
    unmodelled: set[str] = set()
    with counted("bf16", unmodelled) as counter:
        q = torch.randn(batch, heads, tokens, size, requires_grad=True)
        k, v = (torch.randn(batch, 1, tokens, size, requires_grad=True) for _ in range(2))
        mask = torch.ones(tokens, tokens, dtype=torch.bool).tril()
        for given in (None, mask):

            def attention(given: torch.Tensor | None = given) -> torch.Tensor:
                return F.scaled_dot_product_attention(
                    q, k, v, given, dropout_p=0.1, enable_gqa=True
                )

            assert kept_by(attention, counter) < matrix / 2  # its output, q, k, v in 16 bits
    assert [n for n in unmodelled if "a mask and a dropout" in n]  # not probed: said


def test_a_masked_16_bit_attention_is_cudnns_whose_output_takes_qs_layout():
    """CUDA runs cuDNN's kernel for 16-bit attention with a mask (the H100's compiled pythia and
    BART); its output takes q's layout, so a q made contiguous head-major (pythia's rotary
    embeddings) gives a head-major output, which the projection after it must copy: the H100's
    compiled pythia kept that copy a layer (the fake step's memory-efficient kernel, whose
    output is tokens-major, kept none: -2.6%). A learned bias stays memory-efficient attention's
    (cuDNN's gives it no gradient)."""
    from advisor.estimation.cuda_emulation import cuda_attention_kernel

    batch, heads, tokens, size = 2, 4, 64, 32
    with counted("bf16"):
        q = torch.randn(batch, heads, tokens, size, dtype=torch.bfloat16)  # head-major
        k, v = (torch.randn(batch, tokens, heads, size).transpose(1, 2) for _ in range(2))
        mask, bias = torch.zeros(batch, 1, tokens, tokens), torch.zeros(1, heads, tokens, tokens)
        assert cuda_attention_kernel(q, k, mask, False) == "cudnn"
        assert cuda_attention_kernel(q, k, bias.requires_grad_(), False) == "efficient"
        out = F.scaled_dot_product_attention(q, k, v, mask)
        assert out.stride() == q.stride()
        assert not out.transpose(1, 2).is_contiguous()  # the projection's input: a copy


@pytest.mark.parametrize(
    ("precision", "dropout", "compiled", "backward_in"),
    [
        ("bf16", 0.1, False, torch.float32),
        ("bf16", 0.0, False, torch.float32),
        ("bf16", 0.1, True, torch.bfloat16),
        ("bf16", 0.0, True, torch.bfloat16),
        ("default", 0.1, True, torch.float32),  # no autocast: nothing casts
    ],
)
def test_the_math_paths_gradients_are_multiplied_in_16_bits_compiled_under_autocast(
    precision: str, dropout: float, compiled: bool, backward_in: torch.dtype
) -> None:
    """CUDA's math path (taken for T5's permuted position bias) multiplies 16-bit q, k and v in
    fp32; a compiled step's backward is traced under the forward's autocast, which casts its
    gradients' matmuls to 16 bits: the H100's compiled T5 ran its 24 forward matmuls in fp32
    and all 48 backward ones in bf16, and kept 16-bit q, k and v, where the estimate had it 31%
    over (experiments/2026-12-06-compiled-unseen-recheck)."""
    multiplied: dict[str, set[torch.dtype]] = {"forward": set(), "backward": set()}

    def bmms_of(gm: torch.fx.GraphModule, graph: str) -> None:
        for node in gm.graph.nodes:
            if node.target is torch.ops.aten.bmm.default:
                multiplied[graph].update(a.meta["val"].dtype for a in node.args)

    def recorded(graph: str) -> Callable[..., Any]:
        def compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
            bmms_of(gm, graph)
            return make_boxed_func(gm.forward)

        return compiler

    class Matmuls(TorchDispatchMode):
        def __init__(self, graph: str) -> None:
            super().__init__()
            self.graph = graph

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            if func is torch.ops.aten.bmm.default:
                multiplied[self.graph].update(a.dtype for a in args)
            return func(*args, **(kwargs or {}))

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> Any:
        return F.scaled_dot_product_attention(q, k, v, bias, dropout_p=dropout)

    q, k, v = (torch.randn(2, 4, 16, 8, dtype=torch.bfloat16, requires_grad=True) for _ in "qkv")
    bias = torch.randn(2, 4, 16, 16).transpose(-1, -2)  # its last dimension not contiguous
    spec = spec_of("model=tiny_mlp", "device=cuda", f"precision={precision}")
    try:
        if compiled:
            backend = aot_autograd(
                fw_compiler=recorded("forward"), bw_compiler=recorded("backward")
            )
            with step_precision(spec, set()):
                out = torch.compile(attention, backend=backend)(q, k, v, bias)
            out.sum().backward()
        else:
            with step_precision(spec, set()), Matmuls("forward"):
                out = attention(q, k, v, bias)
            with Matmuls("backward"):
                out.sum().backward()
    finally:
        torch._dynamo.reset()
    assert multiplied == {"forward": {torch.float32}, "backward": {backward_in}}
