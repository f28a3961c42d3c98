"""inductor's comprehensive padding, as the fake step counts it for a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import spec_of
from torch._dynamo.backends.common import aot_autograd
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn import functional as F

from advisor.estimation.compiled_step import _user_visible_outputs
from advisor.estimation.fake_step import fake_step
from advisor.estimation.inductor_buffers import count_buffers
from advisor.estimation.inductor_padding import left_dense, padded_nbytes
from advisor.estimation.storage_bytes import StorageBytes

EDGES = Path(__file__).parents[1] / "workloads" / "estimate_edges.py"
MIB = 2**20


def test_a_stride_over_1024_elements_is_padded_to_128_bytes_as_swin_ts_scores_were():
    with FakeTensorMode():
        scores = torch.empty(8192, 3, 49, 49)  # Swin-T's first stage at batch 128, in fp32
        # 49 x 49 = 2401 elements a head, padded to 2432 (32 fp32 elements are 128 bytes)
        assert padded_nbytes(scores) == 4 * (1 + 8191 * 3 * 2432 + 2 * 2432 + 48 * 49 + 48)
        assert round(padded_nbytes(scores) / MIB, 2) == 228.00  # as the H200 allocated them
        assert round(scores.untyped_storage().nbytes() / MIB, 2) == 225.09  # eager's size
        half = scores.to(torch.bfloat16)  # 64 elements to 128 bytes: 2401 to 2432 again
        assert round(padded_nbytes(half) / MIB, 2) == 114.00


@pytest.mark.parametrize(
    "shape, memory_format",
    [
        ((64, 3072), torch.contiguous_format),  # aligned already (3072 elements: 6,144 bytes)
        ((64, 1000), torch.contiguous_format),  # 1000 elements: at most 1024 are not padded
        ((8, 3, 100, 100), torch.channels_last),  # inductor leaves channels-last dense
    ],
)
def test_aligned_short_or_channels_last_strides_are_not_padded(shape, memory_format):
    with FakeTensorMode():
        t = torch.empty(shape, dtype=torch.bfloat16).contiguous(memory_format=memory_format)
        assert padded_nbytes(t) == t.untyped_storage().nbytes()
        if memory_format == torch.channels_last:  # its channels-first twin is: 10000 -> 10048
            first = t.contiguous()
            assert padded_nbytes(first) == 2 * (1 + 7 * 3 * 10048 + 2 * 10048 + 99 * 100 + 99)


def test_what_feeds_a_convolution_up_to_a_reduction_and_the_users_outputs_stay_dense():
    def step(x, w):
        fed = (x * 2).relu()  # feeds the convolution: left dense
        statistic = (x + 1).sum(dim=0, keepdim=True)  # a reduction stops that going further
        out = F.conv2d(fed - statistic, w)
        # the user's output (a view of a pointwise result), a value saved for backward
        return out, (x * 3).exp().view(-1), x.sin()

    with FakeTensorMode():
        gm = make_fx(step)(torch.empty(4, 3, 40, 40), torch.empty(8, 3, 3, 3))
    nodes = {n.name: n for n in gm.graph.nodes}
    returned = gm.graph.output_node().args[0]
    dense = left_dense(gm, [returned[0], returned[1]])
    assert dense is not None
    assert {nodes[name] for name in ("mul", "relu", "sub", "convolution")} <= dense
    assert nodes["exp"] in dense  # the base of the user's view
    assert nodes["sum_1"] not in dense and nodes["add"] not in dense
    assert nodes["sin"] not in dense  # not the user's: padded


def test_a_buffer_grows_to_its_padded_size_unless_the_user_gets_it():
    with FakeTensorMode():
        x = torch.empty(64, 3, 49, 49)
        gm = make_fx(lambda x: ((x * 2).exp(), x.sin()))(x)
        interpreter = torch.fx.Interpreter(gm, garbage_collect_values=False)
        interpreter.run(x)
        saved, users = gm.graph.output_node().args[0]
        dense = left_dense(gm, [users])
        assert dense is not None
        count_buffers(gm, interpreter.env, StorageBytes(1), backward=False, held=set(),
                      left_dense=dense)  # fmt: skip
        eager = 64 * 3 * 49 * 49 * 4
        assert interpreter.env[saved].untyped_storage().nbytes() == padded_nbytes(x) > eager
        assert interpreter.env[users].untyped_storage().nbytes() == eager


def test_a_compiled_forward_gives_the_user_its_own_outputs_not_what_it_saves():
    seen: dict[str, list] = {}

    def forward_compiler(gm, example_inputs):
        seen["visible"] = _user_visible_outputs(gm, backward=False)
        seen["returned"] = list(gm.graph.output_node().args[0])
        return gm.forward

    backend = aot_autograd(fw_compiler=forward_compiler, bw_compiler=lambda gm, _: gm.forward)
    torch._dynamo.reset()
    try:
        torch.compile(lambda x: (x.sin() * 2).exp(), backend=backend)(
            torch.randn(4, 3, 49, 49, requires_grad=True)
        )
    finally:
        torch._dynamo.reset()
    assert len(seen["returned"]) > 1  # the output, and what backward needs
    assert seen["visible"] == seen["returned"][:1]


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_compiled_step_pads_its_kernels_buffers_for_cuda_only(device):
    """A 50257-wide head in bf16: the matmul's padded copy of its weight (768 x 50264, by
    pad_mm) has its rows padded to 50304 on a GPU (as the H200's gpt2 had its gradient's
    padded copies: experiments/2026-12-03-h200-compiled-snapshots). 1024 rows: across 512 or
    fewer, pad_mm would not pad the transposed weight (compiled_step.py)."""
    spec = spec_of(f"workload={EDGES}:wide_head", f"device={device}", "batch_size=1024",
                   "precision=bf16", "compile=true")  # fmt: skip
    sizes = {size for _, size in fake_step(spec).trace}
    assert ((1 + 767 * 50304 + 50263) * 2 in sizes) is (device == "cuda")


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_kernels_buffer_1500_wide_is_padded_to_1504_for_cuda_only(device):
    """The SiLU product that feeds the down projection: inductor pads it on a GPU only."""
    spec = spec_of(f"workload={EDGES}:odd_width", f"device={device}", "batch_size=64",
                   "precision=fp32", "compile=true")  # fmt: skip
    sizes = {size for _, size in fake_step(spec).trace}
    assert ((1 + 63 * 1504 + 1499) * 4 in sizes) is (device == "cuda")
    assert 64 * 1500 * 4 in sizes  # the matmul's output, its layout fixed, either way
