"""What CUDA's kernels allocate and free inside themselves, beyond their outputs, where the fake
kernel makes nothing: each is a temporary the caching allocator must find room for, and a
temporary's room shapes the segments the step's tensors fall into. In the H100's real traces
(torch 2.11; experiments/2026-12-05-h200-allocator-trace), leaving them out made the replayed
reserve 6.3% smaller for Whisper in bf16 (cuDNN's convolution workspaces) and 8.0% for a
checkpointed ViT (those, attention's and the reductions'). Each size below is one seen to the
byte in those traces; where a kernel's choice is cuDNN's own, it is said.

cuda_temporaries(func, args, out, tf32=...): rounds of temporaries, each round's alive together
and freed before the next (the counter under the fake step, storage_bytes.py, makes them);
tf32 says whether cuDNN runs fp32 convolutions in TF32 (Precision.cudnn_tf32).
CudaTemporaries(tf32=..., channels_last=...): the same for one fake step, keeping the bound of
its strict-fp32 convolutions' forward workspaces (strict_fp32_forward_bound), and whether a
convolution ran, and one whose workspaces cuDNN decides beyond the record.
has_unmodelled_convolutions(model, channels_last=..., tensor_cores=...): whether cuDNN decides
workspaces beyond what is modelled, which widens the estimate's range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

SIXTEEN_BITS = (torch.bfloat16, torch.float16)
FUSED_ATTENTION_BACKWARD = {
    torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default,
    torch.ops.aten._scaled_dot_product_flash_attention_backward.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
}
SUMS = {torch.ops.aten.sum.dim_IntList, torch.ops.aten.sum.default}
PARTIAL_SUMS_IN_FP32 = (*SIXTEEN_BITS, torch.float32)  # (fp64's are fp64: not modelled)
TRANSPOSE_WORKSPACE_EXTRA = 147  # bytes beyond the three tensors, in each of Whisper's
PATCH_WORKSPACE_EXTRA = 400  # the same, in ViT-S's patch kernel's weight gradient

# the reduction kernel's launch (aten/src/ATen/native/cuda/Reduce.cuh, setReduceConfig), on the
# H100 and H200: 132 multiprocessors of 2048 threads. Another GPU's staging buffers scale with
# its multiprocessors; these are the ones advisor's traces were taken on.
MULTIPROCESSORS, THREADS_PER_MULTIPROCESSOR, WARP = 132, 2048, 32
MAX_REDUCE_THREADS, MIN_VALUES_PER_THREAD, MAX_VALUES_PER_THREAD = 512, 16, 256
# cuDNN's weight gradient of a depthwise 2-d kernel on a channels-last input in 16 bits (ATen
# picks cuDNN for any channels-last depthwise one): a workspace of 32 bytes (8 fp32 partial
# sums) for each sample, kernel tap and channel, the channels rounded up to 32. To the byte in
# all 16 of EfficientNet-B0's, compiled, on the H100 and the H200 (b256: 225 MiB for 1152
# channels of 5x5; 240 channels counted as 256), and in ShuffleNet-V2's eager on the H100
# (b128, 232 channels as 256: 9,437,184 bytes; experiments/2026-12-07-depthwise-workspaces)
DEPTHWISE_WEIGHT_GRADIENT_BYTES, DEPTHWISE_CHANNEL_BLOCK = 32, 32
# the largest strict-fp32 forward workspace seen at batches up to 128 (2.9 GB), rounded up: where
# strict_fp32_forward_bound stops (experiments/2026-12-06-conv-workspace-survey)
STRICT_FP32_FORWARD_CAP_BYTES = 3 * 2**30


def cuda_temporaries(func: Any, args: Sequence[Any], out: Any, *, tf32: bool) -> list[list[int]]:
    """The rounds of bytes an operator allocates and frees inside itself on CUDA; fp32
    convolutions as cuDNN runs them in TF32 where tf32 (Precision.cudnn_tf32)."""
    if func is torch.ops.aten._safe_softmax.default and args[0].dim():
        return [_row_check(args[0], args[1])]
    if func in SUMS and args[0].dtype in PARTIAL_SUMS_IN_FP32:
        dims = args[1] if len(args) > 1 else None
        return [staged] if (staged := _reduction_staging(args[0], dims)) else []
    if func in FUSED_ATTENTION_BACKWARD and args[1].dtype in SIXTEEN_BITS:
        return [_attention_backward_workspace(q=args[1], k=args[2])]
    if func is torch.ops.aten.convolution.default:
        x, w, stride, transposed = args[0], args[1], args[3], args[6]
        return _cudnn_workspaces(x, w, out, stride, transposed, tf32, runs=("forward",))
    if func is torch.ops.aten.convolution_backward.default:
        grad, x, w, stride, transposed, mask = args[0], args[1], args[2], args[4], args[7], args[-1]
        runs = tuple(run for run, m in zip(("input", "weight"), mask[:2], strict=True) if m)
        return _cudnn_workspaces(x, w, grad, stride, transposed, tf32, runs)
    return []


class CudaTemporaries:
    """cuda_temporaries for one fake step. In strict fp32 no workspace is modelled, and cuDNN's
    benchmark takes the fastest algorithm whatever its workspace (2.4 GB for one 512-channel 3x3
    of a VGG11 at batch 24): strict_fp32_forward_bound keeps the largest bound of its
    convolutions' forwards (all of them, patch kernels too), up to STRICT_FP32_FORWARD_CAP_BYTES,
    for the estimate's upper side. It also keeps whether a convolution ran, and whether one ran
    whose workspaces cuDNN decides beyond the record (has_unmodelled_convolutions' rule, by the
    call's shapes and the spec's layout, channels_last): a functional one (F.conv2d) is in no
    module's scan."""

    def __init__(self, *, tf32: bool, channels_last: bool) -> None:
        self.tf32, self.channels_last, self.strict_fp32_forward_bound = tf32, channels_last, 0
        self.ran_convolution = self.ran_unmodelled_convolution = False

    def __call__(self, func: Any, args: Sequence[Any], out: Any) -> list[list[int]]:
        if func is torch.ops.aten.convolution.default:
            self._note_convolution(args, out)
        return cuda_temporaries(func, args, out, tf32=self.tf32)

    def convolutions_of(self, model: nn.Module) -> tuple[bool, bool]:
        """Whether the step had a convolution, and one whose workspaces cuDNN decides beyond the
        record: by the calls the step ran (a compiled step's graphs' too), and by the model's
        modules, which stand for any the step did not run."""
        has_modules = any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())
        modules_beyond = has_unmodelled_convolutions(
            model, channels_last=self.channels_last, tensor_cores=self.tf32
        )
        return (
            self.ran_convolution or has_modules,
            self.ran_unmodelled_convolution or modules_beyond,
        )

    def _note_convolution(self, args: Sequence[Any], out: torch.Tensor) -> None:
        # aten.convolution's arguments: input, weight, bias, stride, padding, dilation,
        # transposed, output_padding, groups
        x, w, stride, padding, dilation, transposed, groups = *args[:2], *args[3:7], args[8]
        self.ran_convolution = True
        within = _within_the_record(
            two_d=w.dim() == 4 and not transposed,
            dense=groups == 1 and set(dilation) == {1},
            unpadded=not any(padding),
            kernel=tuple(w.shape[2:]),
            stride=tuple(stride),
            channels_last=self.channels_last,
            tensor_cores=self.tf32,
        )
        self.ran_unmodelled_convolution = self.ran_unmodelled_convolution or not within
        if not self.tf32 and not transposed:
            bound = strict_fp32_forward_bound(x, w, out)
            bound = min(max(self.strict_fp32_forward_bound, bound), STRICT_FP32_FORWARD_CAP_BYTES)
            self.strict_fp32_forward_bound = bound


def strict_fp32_forward_bound(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> int:
    """A bound on a dense convolution's forward workspace in strict fp32: 64 bytes an (input
    channel, output channel, output position), whatever the batch. Each of 1,026 such 2-d
    forwards on the H100 (16 nets' layers, batches 24 to 128, cuDNN's heuristics or its
    benchmark) took at most 0.93 of it; grouped ones took none
    (experiments/2026-12-06-conv-workspace-survey, read.py strict). 1-d and 3-d ones, not
    measured, take the same bound."""
    if x.dtype is not torch.float32 or w.size(1) != x.size(1):
        return 0
    return 64 * x.size(1) * w.size(0) * (y.numel() // (y.size(0) * y.size(1)))


def has_unmodelled_convolutions(
    model: nn.Module, *, channels_last: bool, tensor_cores: bool
) -> bool:
    """Whether the model has a convolution whose workspaces cuDNN decides beyond
    what the fake step models or the record holds within the usual range (which widens the
    estimate's range). Within it: a 2-d patch kernel, dense, unpadded and as wide as its
    stride (ViT's, Swin's; in any precision), and a 2-d kernel on channels-last input
    (channels_last: the spec's layout stands for each convolution's) in 16 bits or TF32
    (tensor_cores), which runs without transposing. On conv nets no set had measured in those
    layouts, the truth stayed 0.4% to 2.7% below the estimate's device peak (torchvision's
    DenseNet, VGG, wide ResNet, ResNeXt, MnasNet, ShuffleNet and ConvNeXt in channels-last;
    ViT-B/32 and Swin-V2-T: experiments/2026-12-06-channels-last-range)."""
    return not all(
        _module_within_the_record(m, channels_last, tensor_cores)
        for m in model.modules()
        if isinstance(m, nn.modules.conv._ConvNd)
    )


def _module_within_the_record(
    convolution: nn.modules.conv._ConvNd, channels_last: bool, tensor_cores: bool
) -> bool:
    return _within_the_record(
        two_d=isinstance(convolution, nn.Conv2d),  # (ConvTranspose2d is not one)
        dense=convolution.groups == 1 and convolution.dilation == (1, 1),
        unpadded=convolution.padding in ((0, 0), "valid"),
        kernel=tuple(convolution.kernel_size),
        stride=tuple(convolution.stride),
        channels_last=channels_last,
        tensor_cores=tensor_cores,
    )


def _within_the_record(
    *,
    two_d: bool,
    dense: bool,
    unpadded: bool,
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    channels_last: bool,
    tensor_cores: bool,
) -> bool:
    """has_unmodelled_convolutions' rule for one convolution, a module or a call."""
    if not two_d:  # 1-d, 3-d and transposed: not traced so
        return False
    if dense and unpadded and _is_patch(kernel, stride):
        return True
    return channels_last and tensor_cores


def _is_patch(kernel: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """A kernel as wide as its stride, wider than 1: each window a patch of its own."""
    return max(kernel) > 1 and kernel == stride


def _row_check(x: torch.Tensor, dim: int) -> list[int]:
    """_safe_softmax (the math path's softmax) checks each row for -inf: a bool copy of its
    input and a bool a row (Qwen2's trace in tf32: isneginf, then all)."""
    return [x.numel(), x.numel() // max(1, x.size(dim % x.dim()))]


def _attention_backward_workspace(q: torch.Tensor, k: torch.Tensor) -> list[int]:
    """cuDNN's attention backward (and flash attention's, its stand-in where there is no mask)
    accumulates the query's gradient in fp32, with an fp32 figure a row: cuDNN's held
    (batch, heads, tokens, head + 1) in fp32 and 256 bytes, in Whisper, OPT and ViT; twice the
    gradient with grouped-query heads (Qwen2's, 2 key/value heads for 14)."""
    rows = q.numel() // q.size(-1)
    grouped = q.dim() == 4 and k.size(-3) != q.size(-3)
    return [q.numel() * 4 * (2 if grouped else 1) + rows * 4 + 256]


def _cudnn_workspaces(
    x: torch.Tensor,
    w: torch.Tensor,
    y: torch.Tensor,
    stride: Sequence[int],
    transposed: bool,
    tf32: bool,
    runs: tuple[str, ...],
) -> list[list[int]]:
    """cuDNN's tensor-core convolution kernels (16 bits, or TF32) run in channels-last. Where the
    kernel it picked for a channels-first input transposed it, the workspace held input, weight
    and output in channels-last (in 16 bits, the channels of input and weight padded to a
    multiple of 8) plus a few bytes; one workspace a run (forward; backward's input, then
    weight gradients). Seen to the byte in the H100's traces, for the kernels a shape alone
    tells:
    - a dense 1-d kernel wider than 1 (Whisper's conv1d, in bf16; its TF32 run was not
      traced): every run;
    - a dense 2-d kernel wider than 1 that overlaps itself (resnet50's 3x3s and its 7x7 stem,
      strided or not): every run, 147 bytes more; its weight's gradient sometimes took up to 4%
      more than this;
    - a strided 1x1 (resnet50's downsampling shortcuts): every run, input and output only (a
      1x1's weight is the same in either layout), 147 bytes more; the weight's gradient took
      2.4% more in the first stage, where the checkpointed resnet50's peak falls;
    - a patch kernel, as wide as its stride (ViT-S's): the weight's gradient only, 400 bytes
      more (Swin's and ConvNeXt's took 2-3% more); forward ran without transposing;
    - a 3x3 kernel over 3 channels, of stride 1 or 2 (VGG's, MobileNet's, EfficientNet's and
      RegNet's stems, on an RGB image): forward without transposing in 45 of 48 runs of 12
      nets on the H100 (the 3 others took 108 bytes), and in TF32 the weight's gradient too (21
      of 21; experiments/2026-12-06-conv-workspace-survey, read.py stems; 16 bits measured in
      bf16); a 7x7 or 11x11 stem transposes.
    The same held in TF32 (a diffusion UNet's 3x3s, resnet50's strided 1x1s), where a forward
    sometimes transposed input and weight only. A depthwise kernel on a channels-last input in
    16 bits takes a workspace in its weight's gradient only, DEPTHWISE_WEIGHT_GRADIENT_BYTES a
    sample, channel and tap; on a channels-first one none was seen (ATen's own kernel, in 212
    runs of the survey). cuDNN's choice for 1x1 kernels of stride 1 and grouped ones varied with
    the shape where seen (resnet50's transposed in its last stage only), and in strict fp32 it
    picks algorithms whose workspaces no shape rule fits: those are not modelled
    (experiments/2026-12-06-cudnn-2d-workspaces, experiments/2026-12-06-conv-workspace-survey)."""
    sixteen_bits = x.dtype in SIXTEEN_BITS
    if transposed or not (sixteen_bits or (tf32 and x.dtype is torch.float32)):
        return []  # a transposed convolution's kernels were not traced; strict fp32: no rule
    kernel = tuple(w.shape[2:])
    dense = w.size(1) == x.size(1) and max(kernel) > 1
    if x.dim() == 3:  # (a grouped, pointwise or transposed-in-memory conv1d was not traced)
        if not (sixteen_bits and dense and x.is_contiguous()):
            return []
        size = (x.numel() + w.numel() + y.numel()) * x.element_size()
        return [[size + TRANSPOSE_WORKSPACE_EXTRA]] * len(runs)
    if x.dim() != 4:
        return []
    # (one channel is contiguous in either layout: such an input is channels-first here)
    channels_last = x.is_contiguous(memory_format=torch.channels_last) and x.size(1) > 1
    if channels_last and sixteen_bits and _depthwise(x, w):  # the weight's gradient only
        channels = -(-x.size(1) // DEPTHWISE_CHANNEL_BLOCK) * DEPTHWISE_CHANNEL_BLOCK
        size = x.size(0) * channels * math.prod(kernel) * DEPTHWISE_WEIGHT_GRADIENT_BYTES
        return [[size]] if "weight" in runs else []
    pointwise = kernel == (1, 1)
    if channels_last or w.size(1) != x.size(1) or (pointwise and max(stride) == 1):
        return []  # already channels-last; grouped; or a 1x1 of stride 1: not modelled
    if x.size(1) == 3 and kernel == (3, 3) and not _is_patch(kernel, tuple(stride)):
        # an RGB stem's 3x3 ran without transposing (its input, an image, took no gradient)
        runs = tuple(r for r in runs if r == "input" or (r == "weight" and sixteen_bits))
    weight = 0 if pointwise else _padded(w, w.size(1))  # a 1x1's is the same in either layout
    size = (_padded(x, x.size(1)) + weight + y.numel()) * x.element_size()
    if _is_patch(kernel, tuple(stride)):
        return [[size + PATCH_WORKSPACE_EXTRA]] if "weight" in runs else []
    return [[size + TRANSPOSE_WORKSPACE_EXTRA]] * len(runs)


def _depthwise(x: torch.Tensor, w: torch.Tensor) -> bool:
    """A 2-d kernel of one input channel per output channel, as many as the input has."""
    return w.size(1) == 1 and w.size(0) == x.size(1) > 1


def _padded(t: torch.Tensor, channels: int) -> int:
    """Elements of t with its channels (dimension 1) padded to a multiple of 8 in 16 bits (a
    resnet50's and a ViT's 3 colour channels); TF32's were seen unpadded."""
    if t.dtype not in SIXTEEN_BITS:
        return t.numel()
    return t.numel() // channels * -(-channels // 8) * 8


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
