"""What CUDA's kernels allocate and free inside themselves, counted on the fake step as the
H100's traces held it (advisor/estimation/cuda_workspaces.py)."""

from __future__ import annotations

import torch
from test_cuda_emulation import counted
from torch.nn import functional as F

from advisor.estimation.cuda_workspaces import _staging_bytes


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


def test_a_16_bit_convolution_not_in_channels_last_counts_cudnns_transposing_workspace():
    """cuDNN's 16-bit kernels run in channels-last: on Whisper's conv1d in bf16 the H100's trace
    held a workspace of input + weight + output bytes in forward, then one in backward for the
    input's gradient and one for the weight's, each freed before the next (3.3% of its device
    peak). Not for 2-d convolutions, where cuDNN was seen to pick otherwise, nor in fp32."""
    batch, channels, length = 4, 64, 1024
    x_bytes, w_bytes = batch * channels * length * 2, channels * channels * 3 * 2
    workspace = x_bytes + w_bytes + x_bytes + 147  # padding 1 keeps the length
    for precision, layout, expected in (
        ("bf16", "1d", 3),
        ("bf16", "channels_last", 0),
        ("bf16", "2d", 0),
        ("fp32", "1d", 0),
    ):
        with counted(precision) as counter:
            if layout == "1d":
                w = torch.randn(channels, channels, 3, requires_grad=True)
                x = torch.randn(batch, channels, length, requires_grad=True)
                y = F.conv1d(x, w, padding=1)
            elif layout == "2d":
                w = torch.randn(channels, channels, 3, 3, requires_grad=True)
                x = torch.randn(batch, channels, 32, 32, requires_grad=True)
                y = F.conv2d(x, w, padding=1)
            else:
                last = torch.channels_last
                w = torch.randn(channels, channels, 3, 3).to(memory_format=last).requires_grad_()
                x = torch.randn(batch, channels, 32, 32).to(memory_format=last).requires_grad_()
                y = F.conv2d(x, w, padding=1)
            y.float().sum().backward()
            allocated = [n for _, n in counter.trace if n > 0]
            assert allocated.count(workspace) == expected, (precision, layout)
            if expected:
                at = [i for i, (_, n) in enumerate(counter.trace) if n == workspace]
                freed = [counter.trace[i + 1] for i in at]  # at once, before anything else
                assert freed == [(counter.trace[i][0], -1) for i in at]


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
