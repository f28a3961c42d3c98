"""What the GPU runs differently from the CPU, emulated on fake CPU tensors above autograd, where
it changes what backward saves (advisor/estimation/fake_step.py runs the step under it):
- CUDA autocast's policy (matmuls and convolutions in 16 bits; norms, softmax, losses and pow in
  fp32), instead of the CPU's;
- attention as the kernel CUDA picks keeps it: the fused kernels no attention matrix and no
  dropout mask, with gradients in the layout of q, k and v; the math path (fp32 with
  grouped-query heads, say) the whole matrix (in a compiled step under autocast, its gradients
  multiplied in 16 bits: AOTAutograd traces the backward under the forward's autocast);
- grouped matmuls (mixture-of-experts layers) in fp32, which CUDA runs and torch's meta
  function refuses;
- dropout as CUDA's fused kernel, which keeps a bool mask for backward where the CPU's keeps its
  scaled noise in the input's dtype.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from advisor.spec import Device, Precision, TrialSpec

# CUDA autocast's lists (aten/src/ATen/autocast_mode.cpp), by the name of the Python callable.
LOWER_PRECISION = {
    "linear", "addmm", "matmul", "__matmul__", "mm", "bmm", "baddbmm", "addbmm", "mv", "addmv",
    "einsum", "prelu", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "scaled_dot_product_attention",
}  # fmt: skip
FP32 = {
    "layer_norm", "group_norm", "pow", "__pow__", "exp", "log", "log1p", "log2", "log10",
    "rsqrt", "reciprocal", "softplus", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "nll_loss", "kl_div", "binary_cross_entropy_with_logits", "logsumexp", "cosine_similarity",
    "cdist",
}  # fmt: skip
FP32_OUTPUT = {"softmax", "log_softmax", "cumsum", "cumprod"}  # computed into an fp32 output
COMPOSITES = {"multi_head_attention_forward"}  # Python functions whose inside must be seen


def autocast_dtype(spec: TrialSpec) -> torch.dtype | None:
    """The 16-bit dtype the spec's autocast runs in; None for the fp32 precisions."""
    return {Precision.bf16: torch.bfloat16, Precision.fp16: torch.float16}.get(spec.precision)


@contextlib.contextmanager
def step_precision(spec: TrialSpec, unmodelled: set[str]) -> Iterator[None]:
    """The step's autocast: CUDA's, emulated, for a GPU spec; the CPU's own for a CPU spec.
    What the emulation could not model as CUDA runs it is said into `unmodelled`."""
    dtype = autocast_dtype(spec)
    with contextlib.ExitStack() as stack:
        if spec.device is Device.cuda:
            stack.enter_context(_CudaKernels(unmodelled, autocast=dtype))
            if dtype is not None:
                stack.enter_context(_CudaAutocast(dtype))
        elif dtype is not None:
            stack.enter_context(torch.autocast("cpu", dtype=dtype))
        yield


def _cast(value: Any, dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() and value.dtype != dtype else value
    if isinstance(value, list | tuple):
        return type(value)(_cast(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, dtype) for k, v in value.items()}
    return value


def _no_dtype_given(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """No dtype asked for: F.softmax passes its default on as dtype=None (MPNet's softmax in bf16
    was counted in 16 bits, where CUDA's autocast computed it in fp32: -9.6% on the H100)."""
    return kwargs.get("dtype") is None and not any(isinstance(a, torch.dtype) for a in args)


def _floating(args: Sequence[Any]) -> bool:
    # (len, not bool: torch 2.11's dynamo cannot trace bool() of a tuple and breaks the graph)
    return len(args) > 0 and isinstance(args[0], torch.Tensor) and args[0].is_floating_point()


def cross_entropy_as_autocast(*args: Any, **kwargs: Any) -> torch.Tensor:
    """F.cross_entropy as CUDA's autocast runs it: it asks log_softmax for the input's own dtype,
    so autocast leaves that in 16 bits; nll_loss is on its fp32 list: a 32-bit copy of the
    log-probabilities (seen in the H200's allocation trace: experiments/2026-11-30-h200-reserve).
    nll_loss takes cross_entropy's arguments but label_smoothing (the eighth): its smoothing
    term is a sum over the log-probabilities, one scalar more."""
    loss_args = {k: v for k, v in kwargs.items() if k != "label_smoothing"}
    log_p = _cast(F.log_softmax(args[0], 1), torch.float32)
    return F.nll_loss(log_p, args[1], *args[2:7], **loss_args)


class _CudaAutocast(TorchFunctionMode):
    """CUDA autocast's casts, done above autograd (so backward saves what it would save)."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if func is F.cross_entropy:
            return cross_entropy_as_autocast(*args, **kwargs)
        if name in COMPOSITES:
            return _inside(self, func, args, kwargs)
        if name in LOWER_PRECISION:
            args, kwargs = _cast(args, self.dtype), _cast(kwargs, self.dtype)
        elif name in FP32:
            args, kwargs = _cast(args, torch.float32), _cast(kwargs, torch.float32)
        elif name in FP32_OUTPUT and _no_dtype_given(args, kwargs) and _floating(args):
            kwargs = {**kwargs, "dtype": torch.float32}
        return func(*args, **kwargs)


class _CudaKernels(TorchFunctionMode):
    """The kernels whose memory on CUDA is not the CPU's:
    - attention as the kernel CUDA picks keeps it (_fused_attention): a fused kernel keeps no
      attention matrix and no dropout mask (the dropout happens inside it), the math path both;
    - torch's grouped matmul in fp32 (transformers' experts, whose weights autocast leaves in
      fp32), which CUDA runs but torch's meta function refuses (it takes 16 bits only): done by
      _GroupedMatmul, which allocates what the kernel does;
    - dropout, which keeps a bool mask, not the CPU's scaled noise (_fused_dropout)."""

    def __init__(self, unmodelled: set[str], autocast: torch.dtype | None) -> None:
        super().__init__()
        self.unmodelled, self.autocast = unmodelled, autocast  # (autocast: its 16-bit dtype)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in COMPOSITES:
            return _inside(self, func, args, kwargs)
        if name == "scaled_dot_product_attention":
            return _fused_attention(self.unmodelled, self.autocast, *args, **kwargs)
        if func is F.dropout or func is torch.dropout:
            return _fused_dropout(func, args, kwargs)
        if name in ("grouped_mm", "_grouped_mm") and len(args) >= 2:
            a, b = args[0], args[1]
            if a.dim() == 2 and b.dim() == 3 and a.dtype not in (torch.float16, torch.bfloat16):
                return _GroupedMatmul.apply(a, b)
        return func(*args, **kwargs)


def _fused_attention(
    unmodelled: set[str],
    autocast: torch.dtype | None,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """The kernel CUDA's dispatcher picks (cuda_attention_kernel), by its meta function, which
    runs on fake CPU tensors. cuDNN's, flash and memory-efficient attention keep no attention
    matrix and give gradients in the layout of q, k and v, as CUDA's do (cuDNN's output takes
    q's layout too), and a bool mask reaches them in q's dtype (_additive_mask); the math path
    keeps the matrix, as it does on the GPU. Where the CPU's own kernel stands in, it is its
    flash kernel; it has no dropout (its math path would run, keeping the matrix), so grouped
    heads with a dropout take CUDA's fused kernels' meta functions, which read them in place
    (GPTBigCode's multi-query attention: +331% before)."""
    aten = torch.ops.aten
    kernel = cuda_attention_kernel(q, k, attn_mask, enable_gqa)
    if kernel == "math":
        grads_in = autocast if autocast and torch.compiler.is_compiling() else None
        args = (q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)
        return _math_attention(*args, grads_in=grads_in)
    if kernel == "unprobed":
        unmodelled.add(
            f"attention with heads of {q.size(-1)}: CUDA's kernel for it was not probed, the "
            "CPU's stands in"
        )
    if kernel == "unprobed" or (kernel == "cpu" and dropout_p == 0.0):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
        )
    if kernel == "cpu" and attn_mask is not None:
        unmodelled.add(
            "attention with grouped heads, a mask and a dropout: CUDA's kernel for it was not "
            "probed, memory-efficient attention's stands in"
        )
    if kernel == "flash" or (kernel == "cpu" and attn_mask is None):
        out = aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, scale=scale)
    elif kernel == "cudnn":
        out = aten._scaled_dot_product_cudnn_attention(
            q, k, v, _additive_mask(attn_mask, q.dtype), True, dropout_p, is_causal, scale=scale
        )
    else:
        out = aten._scaled_dot_product_efficient_attention(
            q, k, v, _additive_mask(attn_mask, q.dtype), True, dropout_p, is_causal, scale=scale
        )
    return out[0]


def _additive_mask(attn_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A bool mask as torch hands it to a fused kernel (at::convert_boolean_attn_mask): 0 where
    attended, -inf elsewhere, in q's dtype, and kept so for backward. The H100's trace of an
    fp32 RoBERTa held one (64, 1, 256, 256) fp32 copy a layer
    (experiments/2026-12-05-h200-allocator-trace); the H200 probe's cuDNN kernel, one in bf16
    (experiments/2026-12-04-cudnn-attention)."""
    if attn_mask is None or attn_mask.dtype != torch.bool:
        return attn_mask
    return torch.zeros_like(attn_mask, dtype=dtype).masked_fill_(~attn_mask, float("-inf"))


def _math_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
    *,
    grads_in: torch.dtype | None,
) -> torch.Tensor:
    """CUDA's math path as it runs there: in fp32 for 16-bit inputs (the H200 kept T5's bf16
    softmax in fp32), its dropout CUDA's fused one, which keeps a bool mask (the CPU's math path
    keeps a float one: a third matrix more). Where `grads_in` names a dtype, its matmuls'
    gradients are multiplied in it: a compiled step's backward is traced under the forward's
    autocast (the H100's compiled T5 in bf16 ran these matmuls in fp32 and the 48 matmuls of
    their gradients in bf16, so its partitioner kept 16-bit q, k and v and recomputed the
    dropped-out attention: experiments/2026-12-06-compiled-unseen-recheck)."""
    dtype = q.dtype
    q, k, v, attn_mask = _cast((q, k, v, attn_mask), torch.float32)
    if dropout_p == 0.0 and grads_in is None:
        return torch.ops.aten._scaled_dot_product_attention_math(
            q, k, v, attn_mask, 0.0, is_causal, scale=scale, enable_gqa=enable_gqa
        )[0].to(dtype)
    if enable_gqa and q.size(-3) != k.size(-3):
        repeats = q.size(-3) // k.size(-3)
        k, v = k.repeat_interleave(repeats, -3), v.repeat_interleave(repeats, -3)
    root = math.sqrt(scale if scale is not None else 1 / math.sqrt(q.size(-1)))

    def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b if grads_in is None else _MatmulGradsIn.apply(a, b, grads_in)

    attn = matmul(q * root, (k * root).transpose(-2, -1))
    if is_causal:
        attn_mask = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn = attn.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        attn = attn + attn_mask
    attn = torch.ops.aten._safe_softmax(attn, -1)
    if dropout_p > 0.0:
        attn = torch.native_dropout(attn, dropout_p, True)[0]
    return matmul(attn, v).to(dtype)


class _MatmulGradsIn(torch.autograd.Function):
    """a @ b as it is, its gradients multiplied in another dtype (the operands and the incoming
    gradient cast to it, as autocast casts them)."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        ctx.dtype = dtype
        return a @ b

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        a, b = (t.to(ctx.dtype) for t in ctx.saved_tensors)
        grad = grad.to(ctx.dtype)
        return grad @ b.transpose(-2, -1), a.transpose(-2, -1) @ grad, None


def _fused_dropout(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """Dropout as CUDA runs it (aten's `dropout`): out of place in training with 0 < p < 1, its
    fused kernel (native_dropout), whose backward keeps a bool mask. The CPU's takes another
    path, which keeps the scaled noise in the input's dtype: 4 bytes an element in fp32, where
    the H100's trace of T5 kept 1 (experiments/2026-12-05-h200-allocator-trace). In place,
    CUDA takes that other path too."""
    names = ("input", "p", "training", "inplace") if func is F.dropout else ("input", "p", "train")
    given = {**dict(zip(names, args, strict=False)), **kwargs}
    x, p = given["input"], given.get("p", 0.5)
    training = given.get("training", given.get("train", True))
    if training and not given.get("inplace", False) and 0 < p < 1 and x.numel() > 0:
        return torch.native_dropout(x, p, True)[0]
    return func(*args, **kwargs)


def cuda_attention_kernel(
    q: torch.Tensor, k: torch.Tensor, attn_mask: torch.Tensor | None, enable_gqa: bool
) -> str:
    """flash, cudnn, efficient or math, as CUDA picks it for memory's sake (probed on the H200
    with torch 2.11: experiments/2026-12-03-h200-sdpa-choice); cpu where the CPU's kernel stands
    in for a kernel that keeps as little, unprobed where it stands in for one not probed.
    - A mask whose last dimension is not contiguous (T5's position bias as transformers 5.17
      passes it, a permuted view): the math path, in fp32 for 16-bit inputs (seen in the H200's
      memory snapshot of T5: experiments/2026-12-03-h200-unseen-models).
    - Grouped-query heads (fewer key/value heads, read in place) in fp32, or with heads over
      256: the math path, which keeps the attention matrix (no fused kernel takes them).
    - Grouped-query heads in 16 bits: cuDNN's kernel on the H200, which keeps no matrix; the
      CPU's flash kernel stands in (an older GPU may run the math path where there is a mask).
    - Heads not a multiple of 8 were not probed: the CPU's kernel stands in (unprobed).
    - 16 bits with a mask that takes no gradient: cuDNN's kernel, whose output takes q's layout
      (experiments/2026-12-04-cudnn-attention): a q made contiguous head-major (pythia's rotary
      embeddings) has its output copied for the projection after it, and a compiled step keeps
      that copy (the H100's pythia and BART ran it: experiments/2026-12-06-compiled-partitions).
    - Otherwise flash attention for 16 bits without a mask (cuDNN's on the H200 keeps as
      little), else memory-efficient attention (fp32, a learned bias, heads over 256)."""
    head_dim, sixteen = q.size(-1), q.dtype in (torch.float16, torch.bfloat16)
    if attn_mask is not None and attn_mask.size(-1) > 1 and attn_mask.stride(-1) != 1:
        return "math"
    if head_dim % 8:
        return "unprobed"
    if enable_gqa and q.size(-3) != k.size(-3):
        return "cpu" if sixteen and head_dim <= 256 else "math"
    if sixteen and attn_mask is None and head_dim <= 256:
        return "flash"
    if sixteen and head_dim <= 256 and attn_mask is not None and not attn_mask.requires_grad:
        return "cudnn"
    return "efficient"


class _GroupedMatmul(torch.autograd.Function):
    """(S, K) rows by one of E (K, N) matrices each: an (S, N) output; backward keeps both inputs
    (no copies) and gives a gradient of each."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return a.new_empty(a.shape[0], b.shape[-1])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = ctx.saved_tensors
        return torch.empty_like(a), torch.empty_like(b)


# the modes step_precision may enter (compiled_step.py keeps dynamo from compiling them alone)
CUDA_EMULATION_MODES: tuple[type[TorchFunctionMode], ...] = (_CudaKernels, _CudaAutocast)


def _inside(mode: TorchFunctionMode, func: Any, args: Any, kwargs: Any) -> Any:
    """Run a composite of torch.nn.functional with the mode seeing the calls inside it: a mode
    is switched off while it handles a call, and these would hide their matmuls and attention.
    Their own check is switched off instead (it would hand the call back to the mode)."""
    names = vars(F)
    check = names["has_torch_function"]
    names["has_torch_function"] = lambda *_: False
    try:
        with mode:
            return func(*args, **kwargs)
    finally:
        names["has_torch_function"] = check
