"""What CUDA's kernels allocate and free inside themselves, counted on the fake step as the
H100's traces held it (advisor/estimation/cuda_workspaces.py)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from test_cuda_emulation import counted
from torch import nn
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from advisor.estimation.cuda_workspaces import (
    STRICT_FP32_FORWARD_CAP_BYTES,
    CudaTemporaries,
    _staging_bytes,
    has_unmodelled_convolutions,
)


def test_the_math_paths_softmax_counts_its_row_check():
    """_safe_softmax checks each row for -inf on CUDA: a bool copy of its input and a bool a
    row, both alive until it returns (seen in Qwen2's trace in tf32, on the math path that
    grouped heads in fp32 take)."""
    batch, heads, tokens, size = 1, 4, 512, 64
    matrix = batch * heads * tokens * tokens
    with counted("fp32") as counter:
        q = torch.randn(batch, heads, tokens, size, requires_grad=True)
        k, v = (torch.randn(batch, 2, tokens, size, requires_grad=True) for _ in range(2))
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        at = [i for i, (_, size) in enumerate(counter.trace) if size in (matrix, matrix // tokens)]
        assert len(at) == 2  # the bool copy, then the bool a row
        (copy, _), (row, _) = (counter.trace[i] for i in at)
        # alive together, freed as the softmax returns
        assert at[1] == at[0] + 1 and counter.trace[at[1] + 1 : at[1] + 3] == [
            (row, -1),
            (copy, -1),
        ]
        assert counter.peak >= 4 * matrix * 2 + matrix + matrix // tokens


def _convolution_workspaces(precision: str, layout: str) -> list[int]:
    """The workspaces a convolution's forward and backward counted in a precision, in order:
    each freed at once, before anything else is allocated."""
    batch, channels = 4, 64
    with counted(precision) as counter:
        if layout == "1d":
            w = torch.randn(channels, channels, 3, requires_grad=True)
            x = torch.randn(batch, channels, 1024, requires_grad=True)
            y = F.conv1d(x, w, padding=1)
        elif layout == "channels_last":
            last = torch.channels_last
            w = torch.randn(channels, channels, 3, 3).to(memory_format=last).requires_grad_()
            x = torch.randn(batch, channels, 32, 32).to(memory_format=last).requires_grad_()
            y = F.conv2d(x, w, padding=1)
        elif layout == "channels_last depthwise":  # EfficientNet-B0's 240 channels of 5x5
            last = torch.channels_last
            w = torch.randn(240, 1, 5, 5).to(memory_format=last).requires_grad_()
            x = torch.randn(batch, 240, 28, 28).to(memory_format=last).requires_grad_()
            y = F.conv2d(x, w, padding=2, groups=240)
        elif layout == "transposed":
            w = torch.randn(channels, channels, 3, 3, requires_grad=True)
            x = torch.randn(batch, channels, 32, 32, requires_grad=True)
            y = F.conv_transpose2d(x, w, padding=1)
        elif layout == "grouped 1d":  # Mamba's depthwise conv1d
            w = torch.randn(channels, 1, 4, requires_grad=True)
            x = torch.randn(batch, channels, 1024, requires_grad=True)
            y = F.conv1d(x, w, padding=3, groups=channels)
        elif layout == "patch":  # a ViT's: 3 channels, 16x16 patches, the image needs no grad
            w = torch.randn(channels, 3, 16, 16, requires_grad=True)
            y = F.conv2d(torch.randn(batch, 3, 64, 64), w, stride=16)
        elif layout.endswith("stem"):  # a conv net's first layer, on an RGB image
            kernel, stride = {"3x3 stem": (3, 1), "strided 3x3 stem": (3, 2), "7x7 stem": (7, 2)}[
                layout
            ]
            w = torch.randn(channels, 3, kernel, kernel, requires_grad=True)
            y = F.conv2d(torch.randn(batch, 3, 64, 64), w, stride=stride, padding=kernel // 2)
        else:
            kernel, stride, groups = {
                "2d": (3, 1, 1),
                "strided 1x1": (1, 2, 1),
                "1x1": (1, 1, 1),
                "depthwise": (3, 1, channels),
            }[layout]
            w = torch.randn(channels, channels // groups, kernel, kernel, requires_grad=True)
            x = torch.randn(batch, channels, 32, 32, requires_grad=True)
            y = F.conv2d(x, w, stride=stride, padding=kernel // 2, groups=groups)
        y.float().sum().backward()
        trace = counter.trace
        big = [i for i in range(len(trace) - 1) if trace[i][1] > 100_000]
        workspaces = [i for i in big if trace[i + 1] == (trace[i][0], -1)]  # freed at once
        return [trace[i][1] for i in workspaces]


def test_a_tensor_core_convolution_not_in_channels_last_counts_cudnns_transposing_workspace():
    """cuDNN's tensor-core kernels run in channels-last. Where the kernel it picked for a
    channels-first input transposed it, the H100's traces held a workspace of input + weight +
    output bytes, the channels padded to a multiple of 8, plus a few bytes: in each run
    (forward, backward's input and weight gradients) for Whisper's conv1d and resnet50's 3x3s,
    and for resnet50's strided 1x1s, less the weight; in the weight's gradient only for ViT-S's
    patches. The same in TF32 (torch's default for cuDNN) for 2-d kernels, the channels
    unpadded (the 1-d was traced in 16 bits only). Not for a channels-last input, nor for the
    1x1s of stride 1, the grouped and the transposed kernels, nor in strict fp32; an RGB
    image's 3x3 stem ran forward without transposing, and in TF32 its weight's gradient too."""
    x, w = 4 * 64 * 32 * 32 * 2, 64 * 64 * 9 * 2
    patch = 4 * 8 * 64 * 64 * 2 + 64 * 8 * 16 * 16 * 2 + 4 * 64 * 4 * 4 * 2  # 3 channels as 8

    def stem(kernel_area: int, side: int, element: int = 2, channels: int = 8) -> int:
        """A 64x64 RGB image's stem: input, weight and output (16 bits: 3 channels as 8)."""
        tensors = 4 * channels * 64 * 64 + 64 * channels * kernel_area + 4 * 64 * side * side
        return tensors * element

    for precision, layout, expected in (
        ("bf16", "1d", [4 * 64 * 1024 * 2 * 2 + 64 * 64 * 3 * 2 + 147] * 3),
        ("bf16", "2d", [x + w + x + 147] * 3),
        ("fp16", "2d", [x + w + x + 147] * 3),
        ("bf16", "strided 1x1", [x + x // 4 + 147] * 3),  # a 1x1's weight needs no transposing
        ("bf16", "patch", [patch + 400]),
        ("bf16", "3x3 stem", [stem(9, 64) + 147]),  # the weight's only: forward runs as it is
        ("bf16", "7x7 stem", [stem(49, 32) + 147] * 2),  # a 7x7 stem transposes in both
        ("bf16", "strided 3x3 stem", [stem(9, 32) + 147]),  # (MobileNet's, EfficientNet's)
        ("tf32", "3x3 stem", []),  # and in TF32 neither
        ("tf32", "7x7 stem", [stem(49, 32, element=4, channels=3) + 147] * 2),
        ("bf16", "channels_last", []),
        ("bf16", "transposed", []),  # a transposed convolution's kernels were not traced
        ("bf16", "grouped 1d", []),
        ("bf16", "1x1", []),
        ("bf16", "depthwise", []),
        ("tf32", "2d", [(x + w + x) * 2 + 147] * 3),  # TF32: 4 bytes an element
        ("default", "2d", [(x + w + x) * 2 + 147] * 3),  # torch's default: cuDNN in TF32
        ("tf32", "patch", [(4 * 3 * 64 * 64 + 64 * 3 * 16 * 16 + 4 * 64 * 4 * 4) * 4 + 400]),
        ("tf32", "1d", []),  # a 1-d convolution was traced in 16 bits only
        ("fp32", "1d", []),  # strict fp32: cuDNN's own algorithms
        ("fp32", "2d", []),
    ):
        assert _convolution_workspaces(precision, layout) == expected, (precision, layout)


def test_a_channels_last_depthwise_convolution_counts_its_weight_gradients_workspace():
    """A depthwise kernel on a channels-last input in 16 bits took a workspace in its weight's
    gradient alone: 32 bytes a sample, tap and channel, the channels rounded up to 32 (240 as
    256; EfficientNet-B0's, compiled, on the H100 and H200; ShuffleNet-V2's eager). Neither in
    TF32 nor channels-first (the survey's 212 runs took none)."""
    for precision, layout, expected in (
        ("bf16", "channels_last depthwise", [4 * 256 * 25 * 32]),
        ("fp16", "channels_last depthwise", [4 * 256 * 25 * 32]),
        ("tf32", "channels_last depthwise", []),
        ("bf16", "depthwise", []),
    ):
        assert _convolution_workspaces(precision, layout) == expected, (precision, layout)


def test_a_bias_gradient_summed_over_many_rows_counts_the_reduction_kernels_partial_sums():
    """Autograd sums a bias's gradient over the batch's rows; CUDA's reduction kernel splits a
    sum that long over blocks meeting in global memory, fp32 partials and a semaphore a column
    (Reduce.cuh's setReduceConfig, on the H100's 132 multiprocessors). The H100's traces held
    these sizes to the byte: Whisper's (48,000, 2,048) gradient, ViT-S's (100,864, 1,152)."""
    assert _staging_bytes(2048, 48_000, inner=False, element_size=2) == [138_412_032, 64]
    assert _staging_bytes(1152, 100_864, inner=False, element_size=2) == [138_608_640, 36]
    assert _staging_bytes(2048, 64, inner=False, element_size=2) == []  # one block's work: none
    with counted("bf16") as counter:
        x = torch.randn(48_000, 512, requires_grad=True)
        w = torch.randn(2048, 512, requires_grad=True)
        b = torch.randn(2048, requires_grad=True)
        F.linear(x, w, b).float().sum().backward()
        at = [i for i, (_, n) in enumerate(counter.trace) if n == 138_412_032]
        assert len(at) == 1  # the bias's gradient; its semaphores (64 bytes) beside it
        partials, semaphores = counter.trace[at[0]][0], counter.trace[at[0] + 1][0]
        assert counter.trace[at[0] + 1 : at[0] + 4] == [(semaphores, 64), (semaphores, -1),
                                                        (partials, -1)]  # fmt: skip


@pytest.mark.parametrize(
    "convolutions, channels_last, tensor_cores, unmodelled",
    [
        ([nn.Conv2d(3, 8, 16, stride=16)], False, False, False),  # a patch kernel, any precision
        ([nn.Conv2d(8, 8, 3, padding=1)], True, True, False),  # channels-last, 16 bits or TF32
        ([nn.Conv2d(8, 8, 3, padding=1, groups=8)], True, True, False),  # depthwise too
        ([nn.Conv2d(8, 8, 3, padding=1)], True, False, True),  # strict fp32: no record
        ([nn.Conv2d(8, 8, 3, padding=1)], False, True, True),  # channels-first
        ([nn.Conv2d(8, 8, 1)], False, True, True),  # a 1x1 of stride 1, channels-first
        ([nn.Conv2d(8, 8, 2, stride=2, groups=8)], False, True, True),  # a grouped "patch"
        ([nn.Conv2d(8, 8, 2, stride=2, padding=1)], False, True, True),  # a padded one
        ([nn.Conv3d(3, 8, 2, stride=2)], True, True, True),  # a 3-d patch (a video's tubelet)
        ([nn.Conv1d(8, 8, 3, padding=1)], True, True, True),  # 1-d: no channels-last layout
        ([nn.ConvTranspose2d(8, 8, 2, stride=2)], True, True, True),  # transposed: not traced
        ([nn.Conv2d(3, 8, 16, stride=16), nn.Conv2d(8, 8, 3, padding=1)], False, True, True),
    ],
)
def test_convolutions_whose_workspaces_cudnns_heuristics_decide_are_told(
    convolutions, channels_last, tensor_cores, unmodelled
):
    """Which convolutions widen an uncalibrated estimate's range: channels-first ones but for
    dense 2-d patch kernels, any in strict fp32, and those no trace had (the last case: a
    patch kernel beside a channels-first 3x3 is not enough). The step's calls are told so as
    the model's modules are (a functional convolution is in no module)."""
    model = nn.Sequential(nn.Linear(4, 4), *convolutions)
    said = has_unmodelled_convolutions(
        model, channels_last=channels_last, tensor_cores=tensor_cores
    )
    assert said is unmodelled
    temporaries = CudaTemporaries(tf32=tensor_cores, channels_last=channels_last)
    with _CallsTold(temporaries):
        for convolution in convolutions:
            size = [2, convolution.in_channels] + [32] * (convolution.weight.dim() - 2)
            convolution.to("meta")(torch.empty(size, device="meta"))
    assert temporaries.ran_convolution
    assert temporaries.ran_unmodelled_convolution is unmodelled


class _CallsTold(TorchDispatchMode):
    """Each operator the code runs, told to the temporaries as the fake step's counter tells
    them."""

    def __init__(self, temporaries: CudaTemporaries) -> None:
        super().__init__()
        self.temporaries = temporaries

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.temporaries(func, args, out)
        return out


def test_a_model_without_convolutions_has_none_unmodelled():
    assert not has_unmodelled_convolutions(nn.Linear(4, 4), channels_last=False, tensor_cores=False)


def test_strict_fp32_keeps_a_bound_on_its_convolutions_forward_workspaces():
    """In strict fp32 no workspace is counted, but the step keeps the largest bound of its dense
    convolutions' forwards, 64 bytes an (input channel, output channel, output position) up to
    3 GiB, which every forward measured on the H100 stayed within; not in TF32, and not for a
    grouped or a transposed convolution (none measured)."""
    conv = torch.ops.aten.convolution.default

    def kept(tf32: bool, x: torch.Tensor, w: torch.Tensor, groups: int = 1, transposed=False):
        temporaries = CudaTemporaries(tf32=tf32, channels_last=False)
        geometry = ([1, 1], [1, 1], [1, 1], transposed, [0, 0], groups)
        y = conv(x, w, None, *geometry)
        counted = temporaries(conv, (x, w, None, *geometry), y)
        assert tf32 or counted == []  # strict fp32: nothing counted, only the bound kept
        return temporaries.strict_fp32_forward_bound

    x, w = torch.empty(2, 64, 28, 28, device="meta"), torch.empty(128, 64, 3, 3, device="meta")
    assert kept(False, x, w) == 64 * 64 * 128 * 28 * 28  # whatever the batch
    assert kept(False, x[:1], w) == kept(False, x, w)
    assert kept(True, x, w) == 0
    assert kept(False, x, torch.empty(128, 1, 3, 3, device="meta"), groups=64) == 0
    assert kept(False, x, torch.empty(64, 64, 3, 3, device="meta"), transposed=True) == 0
    wide = torch.empty(1, 1024, 56, 56, device="meta"), torch.empty(1024, 1024, 3, 3, device="meta")
    assert kept(False, *wide) == STRICT_FP32_FORWARD_CAP_BYTES
