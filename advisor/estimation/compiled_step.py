"""A torch.compile'd model's step on fake tensors, as torch.compile with inductor would run it.

Dynamo traces the model's forward into graphs (breaking them where a real compile breaks them;
the code between runs as it is, counted by the fake step's counter). AOTAutograd traces each
graph's backward with inductor's decompositions, and inductor's own partitioner splits the two
(what the forward keeps for backward, what backward recomputes). Each graph then runs on fake
tensors, its buffers counted as inductor's kernels would hold them (inductor_buffers.py).
"""

from __future__ import annotations

import contextlib
import functools
import unittest.mock
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch import fx, nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from advisor.estimation.cuda_emulation import CUDA_EMULATION_MODES, cross_entropy_as_autocast
from advisor.estimation.inductor_buffers import count_buffers
from advisor.estimation.inductor_padding import left_dense
from advisor.estimation.masks import KnownOnes
from advisor.estimation.real_draws import CountsWithinMinlength, RealScalarDraws
from advisor.estimation.storage_bytes import StorageBytes, storages_of


@contextlib.contextmanager
def compiled(
    model: nn.Module,
    counter: StorageBytes,
    *,
    gpu: bool,
    ddp_buckets: int | None = None,
    cuda_autocast: bool = False,
) -> Iterator[list[fx.GraphModule]]:
    """The model's forward (and so its backward) compiled as torch.compile compiles it: dynamo
    (its graph breaks too) hands each graph to AOTAutograd, with inductor's decompositions and
    partitioner; the graphs count their own buffers, the code between them is counted as run.
    Gives the forward graphs dynamo made (more than one: the model's graph broke; of a graph
    DDP's buckets split, its first piece stands for it). dynamo's
    caches are reset before and after: a process that compiles its own models loses theirs.
    gpu: compiled for CUDA, whose matmuls and kernels' strides inductor pads (not the CPU's).
    ddp_buckets: a DDP rank's bucket cap, by which dynamo splits each graph where DDP's buckets
    of gradients fill (its DDPOptimizer), so that each bucket's all-reduce can start early:
    each piece is compiled alone, and keeps for backward what crosses between them.
    cuda_autocast: the step runs under CUDA's autocast, emulated (cuda_emulation.py); the loss
    modules dynamo puts in a graph past the emulation's modes then run as the emulation runs
    them (_losses_made_in_the_frame_as_autocast)."""
    import torch._inductor.lowering  # noqa: F401 (the decompositions read it; a fresh process lacks it)
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.decomposition import select_decomp_table

    _reset_dynamo()  # a fresh compile, as in a real run (each fake step has its model)
    forward = model.forward
    held: set[int] = set()  # the storages the caller holds (parameters, buffers, the batch)
    graphs: list[fx.GraphModule] = []
    backend: Any = aot_autograd(
        fw_compiler=functools.partial(
            _counting_compiler,
            counter=counter,
            held=held,
            backward=False,
            gpu=gpu,
            graphs=graphs,
        ),
        bw_compiler=functools.partial(
            _counting_compiler, counter=counter, held=held, backward=True, gpu=gpu
        ),
        partition_fn=functools.partial(_partitioned, padded=gpu),
        decompositions=select_decomp_table(),
    )
    if cuda_autocast:
        backend = functools.partial(_losses_made_in_the_frame_as_autocast, backend)
    if ddp_buckets is not None:  # as dynamo does for a module DDP wraps (optimize_ddp)
        from torch._dynamo.backends.distributed import DDPOptimizer

        split = DDPOptimizer(bucket_bytes_cap=ddp_buckets, backend_compile_fn=backend).compile_fn

        def by_buckets(gm: fx.GraphModule, example_inputs: Any, **configs: Any) -> Any:
            pieces = len(graphs)
            compiled_pieces = split(gm, example_inputs, **configs)
            del graphs[pieces + 1 :]  # one graph dynamo made, however DDP's buckets split it
            return compiled_pieces

        backend = by_buckets
    step = torch.compile(forward, backend=backend)

    def compiled_forward(*args: Any, **kwargs: Any) -> Any:
        for storage in storages_of((list(model.parameters()), list(model.buffers()), args, kwargs)):
            if id(storage) not in held:  # forgotten when it dies: another may take its id
                held.add(id(storage))
                weakref.finalize(storage, held.discard, id(storage))
        return step(*args, **kwargs)

    model.forward = compiled_forward
    try:
        yield graphs
    finally:
        del model.forward
        _reset_dynamo()


def _losses_made_in_the_frame_as_autocast(
    backend: Any, gm: fx.GraphModule, example_inputs: Any, **configs: Any
) -> Any:
    """dynamo makes an nn.CrossEntropyLoss() built inside the compiled code (Whisper's forward
    builds one) an F.cross_entropy node of its own, which no torch function mode sees
    (torch/_dynamo/variables/user_defined.py: _call_cross_entropy_loss). Its nll_loss then ran
    in bf16 in the fake step where CUDA's autocast runs it in fp32, and the backward graph was
    not the H100's (experiments/2026-12-06-compiled-partitions): such a node is run as the
    emulation's mode runs the loss it sees."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is F.cross_entropy:
            node.target = cross_entropy_as_autocast
    gm.recompile()
    return backend(gm, example_inputs, **configs)


def _reset_dynamo() -> None:
    torch._dynamo.reset()
    _emulation_never_compiled_alone()


def _emulation_never_compiled_alone() -> None:
    """The emulation's modes (cuda_emulation.py, real_draws.py, masks.py) run where the model's
    code calls torch: traced into the caller's graph where dynamo compiles the caller, run as
    they are where the caller runs eagerly (a frame dynamo gave up on), never compiled as frames
    of their own, which a real run has not (dynamo did, and counted them as graphs: a step's
    bytes then depended on the compiles before it in the process)."""
    from torch._dynamo.eval_frame import set_code_exec_strategy
    from torch._dynamo.types import FrameAction, FrameExecStrategy

    skipped = FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP)  # and what they call
    modes: tuple[type[TorchFunctionMode], ...] = (
        *CUDA_EMULATION_MODES,
        RealScalarDraws,
        CountsWithinMinlength,
        KnownOnes,
    )
    for mode in modes:
        set_code_exec_strategy(mode.__torch_function__.__code__, skipped)


def _partitioned(gm: fx.GraphModule, joint_inputs: Any, *, padded: bool, **kwargs: Any) -> Any:
    """Inductor's partitioner, after its passes over the joint graph (the random numbers its
    kernels draw among them, the matmuls it pads where `padded`), in the fake mode of the
    graph's inputs, as inductor runs it."""
    from torch._guards import detect_fake_mode
    from torch._inductor.compile_fx import partition_fn
    from torch._inductor.virtualized import V

    padding = _matmuls_padded_as_on_a_gpu() if padded else contextlib.nullcontext()
    with V.set_fake_mode(detect_fake_mode(joint_inputs)), padding:
        return partition_fn(gm, joint_inputs, **kwargs)


# inductor pads a matmul (a padded copy of each operand) where it is compute bound: its
# arithmetic intensity above half the GPU's FLOPS per byte (the H100/H200's dense bf16, 989
# TFLOPS over 4.8 TB/s, is 206); its timing decides the rest, which the H200 did in 16 bits
# (gpt2's logits, 50257 wide: two padded copies of their gradient in backward, the snapshots of
# experiments/2026-12-03-h200-compiled-snapshots) and not in fp32 (gpt2 in tf32 and torch's
# default precision needed no padded copy: experiments/2026-12-03-compile-estimate-catalog)
PADDED_ABOVE_INTENSITY = 206 / 2
PADDED_DTYPES = (torch.bfloat16, torch.float16)
# pad_mm also times the padding copy of an operand whose copy cannot be planned away; modelled
# here for one such case only, an operand that is not contiguous (a transposed gradient),
# whose copy transposes it: the copy's share of the padded time falls as the matmul's other
# side grows. Whisper-base's weight gradient, 51865 x 4096 times 4096 x 512, stayed unpadded
# on the H100 (1.59 ms; 2.04 padded, copy included; the H200's history made the same
# allocations: experiments/2026-12-07-inductor-code), while gpt2's, 768 wide, was padded on
# the H200 (experiments/2026-12-03-h200-compiled-snapshots). So no padding where that other
# side is 512 or less; above it the copy is counted, which errs high for a GPU whose
# crossover lies between 512 and 768 (and applies to any such operand, bmm's too)
PADDING_BY_TRANSPOSING_LOSES_UP_TO = 512


@contextlib.contextmanager
def _matmuls_padded_as_on_a_gpu() -> Iterator[None]:
    """inductor's shape padding (torch/_inductor/fx_passes/pad_mm.py) decided as on a GPU: its
    own pass checks for CUDA tensors and times the kernels, neither of which a fake step has."""
    try:
        from torch._inductor.fx_passes import pad_mm
    except ImportError:  # another torch: its matmuls are counted as they are
        yield
        return
    if not callable(getattr(pad_mm, "should_pad", None)):  # a torch that moved it: unpadded
        yield
        return
    with unittest.mock.patch.object(pad_mm, "should_pad", _padded_on_a_gpu):
        yield


def _padded_on_a_gpu(
    match: Any, mat1: torch.Tensor, mat2: torch.Tensor, op: Any, input: Any = None
) -> bool:
    from torch._inductor import config

    if not config.shape_padding or mat1.dtype != mat2.dtype:
        return False
    if config.force_shape_pad and mat1.is_floating_point():
        return True
    if mat1.dtype not in PADDED_DTYPES:
        return False
    shapes = (mat1.shape, mat2.shape)
    if not all(isinstance(d, int) for shape in shapes for d in shape):
        return False  # symbolic sizes are not modelled (inductor pads the static ones)
    if op is torch.ops.aten.bmm:
        (m, k), n = mat1.shape[1:], mat2.shape[2]
    elif op in (torch.ops.aten.mm, torch.ops.aten.addmm):
        (m, k), n = mat1.shape, mat2.shape[1]
    else:
        return False
    if not _unaligned((m, k, n)) or 0 in (m, k, n):
        return False  # aligned already (8 elements of 16 bits)
    for operand, sides, other_side in ((mat1, (m, k), n), (mat2, (k, n), m)):
        if (
            _unaligned(sides)
            and not operand.is_contiguous()
            and other_side <= PADDING_BY_TRANSPOSING_LOSES_UP_TO
        ):
            return False  # pad_mm's timed transposing copy outweighs what padding gains
    return m * n * k / (m * k + n * k + m * n) > PADDED_ABOVE_INTENSITY


def _unaligned(sizes: tuple[int, ...]) -> bool:
    """Whether a matmul's sizes need padding to 8 elements (16 bits): 1 is squeezed away."""
    return any(d % 8 and d != 1 for d in sizes)


def _counting_compiler(
    gm: fx.GraphModule,
    example_inputs: Any,
    *,
    counter: StorageBytes,
    held: set[int],
    backward: bool,
    gpu: bool,
    graphs: list[fx.GraphModule] | None = None,
) -> Any:
    """AOTAutograd's compiler: a function that runs the graph and counts its buffers, their
    strides padded as inductor pads them on a GPU where `gpu`."""
    if graphs is not None:
        graphs.append(gm)
    dense = left_dense(gm, _user_visible_outputs(gm, backward)) if gpu else None

    def run(args: list[Any]) -> Any:
        inputs = list(args)
        args.clear()  # as inductor's code does: the inputs die with their last reader
        with counter.paused():
            interpreter = fx.Interpreter(gm, garbage_collect_values=False)
            outputs = interpreter.run(*inputs)
        count_buffers(gm, interpreter.env, counter, backward=backward, held=held, left_dense=dense)
        return outputs

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def _user_visible_outputs(gm: fx.GraphModule, backward: bool) -> list[fx.Node]:
    """The outputs whose strides inductor keeps as eager's (torch/_inductor/compile_fx.py): a
    backward's all, a forward's own after the inputs it mutates, not what it saves for
    backward (all, where AOTAutograd's metadata is not at hand)."""
    returned: Any = gm.graph.output_node().args[0]
    context = torch._guards.TracingContext.try_get()
    metadata = context.fw_metadata if context is not None else None
    if not backward and metadata is not None:
        start = metadata.num_mutated_inp_runtime_indices
        returned = returned[start : start + metadata.num_outputs]
    return [n for n in returned if isinstance(n, fx.Node)]
