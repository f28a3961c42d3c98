"""What CUDA's kernels allocate and free inside themselves, beyond their outputs, where the fake
kernel makes nothing: each is a temporary the caching allocator must find room for, and a
temporary's room shapes the segments the step's tensors fall into. In the H100's real traces
(torch 2.11; experiments/2026-12-05-h200-allocator-trace), leaving them out made the replayed
reserve 6.3% smaller for Whisper in bf16 (cuDNN's convolution workspaces) and 8.0% for a
checkpointed ViT (those, attention's and the reductions'). Each size below is one seen to the
byte in those traces; where a kernel's choice is cuDNN's own, it is said.

cuda_temporaries(func, args, out): rounds of temporaries, each round's alive together and freed
before the next (the counter under the fake step, storage_bytes.py, makes them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

SIXTEEN_BITS = (torch.bfloat16, torch.float16)
FUSED_ATTENTION_BACKWARD = {
    torch.ops.aten._scaled_dot_product_flash_attention_backward.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
}
SUMS = {torch.ops.aten.sum.dim_IntList, torch.ops.aten.sum.default}
PARTIAL_SUMS_IN_FP32 = (*SIXTEEN_BITS, torch.float32)  # (fp64's are fp64: not modelled)
TRANSPOSE_WORKSPACE_EXTRA = 147  # bytes beyond the three tensors, in each of Whisper's

# the reduction kernel's launch (aten/src/ATen/native/cuda/Reduce.cuh, setReduceConfig), on the
# H100 and H200: 132 multiprocessors of 2048 threads. Another GPU's staging buffers scale with
# its multiprocessors; these are the ones advisor's traces were taken on.
MULTIPROCESSORS, THREADS_PER_MULTIPROCESSOR, WARP = 132, 2048, 32
MAX_REDUCE_THREADS, MIN_VALUES_PER_THREAD, MAX_VALUES_PER_THREAD = 512, 16, 256


def cuda_temporaries(func: Any, args: Sequence[Any], out: Any) -> list[list[int]]:
    """The rounds of bytes an operator allocates and frees inside itself on CUDA."""
    if func is torch.ops.aten._safe_softmax.default and args[0].dim():
        return [_row_check(args[0], args[1])]
    if func in SUMS and args[0].dtype in PARTIAL_SUMS_IN_FP32:
        dims = args[1] if len(args) > 1 else None
        return [staged] if (staged := _reduction_staging(args[0], dims)) else []
    if func in FUSED_ATTENTION_BACKWARD and args[1].dtype in SIXTEEN_BITS:
        return [_attention_backward_workspace(q=args[1], k=args[2])]
    if func is torch.ops.aten.convolution.default:
        return _cudnn_workspaces(args[0], args[1], out, runs=1)
    if func is torch.ops.aten.convolution_backward.default:
        grad, x, w, mask = args[0], args[1], args[2], args[-1]
        return _cudnn_workspaces(x, w, grad, runs=sum(bool(m) for m in mask[:2]))
    return []


def _row_check(x: torch.Tensor, dim: int) -> list[int]:
    """_safe_softmax (the math path's softmax) checks each row for -inf: a bool copy of its
    input and a bool a row (Qwen2's trace in tf32: isneginf, then all)."""
    return [x.numel(), x.numel() // max(1, x.size(dim % x.dim()))]


def _attention_backward_workspace(q: torch.Tensor, k: torch.Tensor) -> list[int]:
    """Flash attention's backward (the fake step's stand-in for the fused kernel CUDA runs in
    16 bits) accumulates the query's gradient in fp32, with an fp32 figure a row: cuDNN's held
    (batch, heads, tokens, head + 1) in fp32 and 256 bytes, in Whisper, OPT and ViT; twice the
    gradient with grouped-query heads (Qwen2's, 2 key/value heads for 14)."""
    rows = q.numel() // q.size(-1)
    grouped = q.dim() == 4 and k.size(-3) != q.size(-3)
    return [q.numel() * 4 * (2 if grouped else 1) + rows * 4 + 256]


def _cudnn_workspaces(
    x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, runs: int
) -> list[list[int]]:
    """cuDNN's 16-bit convolution kernels run in channels-last: for Whisper's conv1d (channels
    first, as a 1-d convolution's input is) the kernel it picked transposed input, weight and
    output into its workspace (their bytes and 147 more), one workspace a run: forward;
    backward's input, then weight gradients. Only 1-d convolutions: for 2-d ones cuDNN picked
    otherwise where seen (a ViT's patches: 3 KB forward, 490 MB backward), and taking the rule
    to them moved resnet50's calibrated device peak by up to 8 points on the H200's accuracy
    set (experiments/2026-12-05-cudnn-workspaces)."""
    if x.dtype not in SIXTEEN_BITS or x.dim() != 3:
        return []
    transposed = (x.numel() + w.numel() + y.numel()) * x.element_size()
    return [[transposed + TRANSPOSE_WORKSPACE_EXTRA]] * runs


def _reduction_staging(x: torch.Tensor, dims: Sequence[int] | None) -> list[int]:
    """A sum too long for one block of threads is split over blocks that meet in global memory:
    the kernel allocates the partial sums (fp32) and a semaphore an output column, as
    setReduceConfig decides them. Autograd sums each bias's gradient over the batch's rows so:
    138,412,032 bytes for a (48,000, 2,048) gradient in Whisper, to the byte. Only a sum of a
    contiguous tensor over its leading or trailing dimensions is modelled."""
    shape = list(x.shape)
    if not shape or not x.is_contiguous() or x.numel() == 0:
        return []
    reduced = sorted({d % len(shape) for d in dims} if dims else range(len(shape)))
    kept = [d for d in range(len(shape)) if d not in reduced]
    if kept and reduced != list(range(len(reduced))) and kept != list(range(len(kept))):
        return []  # reduced dimensions in the middle: not modelled
    inputs = math.prod(shape[d] for d in reduced)
    outputs = math.prod(shape[d] for d in kept)
    inner = not kept or reduced[-1] == len(shape) - 1  # the sum runs along contiguous memory
    return _staging_bytes(outputs, inputs, inner, x.element_size())


def _staging_bytes(outputs: int, inputs: int, inner: bool, element_size: int) -> list[int]:
    """setReduceConfig for a reduction of `inputs` values into each of `outputs`, fp32 partials
    (sum's accumulator for 16 and 32 bits): the global buffer and the semaphores, if any. Line
    for line as Reduce.cuh, its names shortened."""
    # (16 bits: vt0 4 < input_vec_size 8, so no vectorized loads)
    vectorized_in = inner and inputs > 128 and element_size == 4
    out_vec = 1 if inner else _output_vector(outputs)
    dim0, dim1 = (inputs, outputs) if inner else (outputs, inputs)
    dim0 //= 4 if vectorized_in else out_vec
    most = MAX_REDUCE_THREADS // out_vec
    dim0_pow2 = _last_pow2(dim0) if dim0 < most else most
    dim1_pow2 = _last_pow2(dim1) if dim1 < most else most
    width = min(dim0_pow2, WARP)
    height = min(dim1_pow2, most // width)
    width = min(dim0_pow2, most // height)
    threads = width * height
    step_in = step_out = 1
    if inner:
        step_in *= width  # block_x_reduce
    else:
        step_out *= width
    split_block_y = _div_up(inputs, step_in) >= min(height * 16, MAX_VALUES_PER_THREAD)
    if split_block_y:
        step_in *= height
    else:
        step_out *= height
    grid = _div_up(outputs // out_vec, step_out)
    target = MULTIPROCESSORS * (THREADS_PER_MULTIPROCESSOR // threads)
    per_thread = _div_up(inputs, step_in)
    if not (split_block_y and per_thread >= MAX_VALUES_PER_THREAD and grid <= target):
        return []
    ctas = max(
        min(_div_up(target, grid), _div_up(per_thread, MIN_VALUES_PER_THREAD)),
        _div_up(per_thread, MAX_VALUES_PER_THREAD),
    )
    if ctas <= 1:
        return []
    partials = 4 * outputs * ctas * (1 if inner else width * out_vec)
    return [partials, 4 * grid]


def _output_vector(outputs: int) -> int:
    vector = 4
    while outputs % vector:
        vector //= 2
    return vector


def _last_pow2(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def _div_up(a: int, b: int) -> int:
    return -(-a // b)
