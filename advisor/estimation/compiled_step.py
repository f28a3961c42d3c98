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
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch import fx, nn
from torch.overrides import TorchFunctionMode

from advisor.estimation.cuda_emulation import CUDA_EMULATION_MODES
from advisor.estimation.inductor_buffers import count_buffers
from advisor.estimation.real_draws import RealScalarDraws
from advisor.estimation.storage_bytes import StorageBytes, storages_of


@contextlib.contextmanager
def compiled(model: nn.Module, counter: StorageBytes) -> Iterator[list[fx.GraphModule]]:
    """The model's forward (and so its backward) compiled as torch.compile compiles it: dynamo
    (its graph breaks too) hands each graph to AOTAutograd, with inductor's decompositions and
    partitioner; the graphs count their own buffers, the code between them is counted as run.
    Gives the forward graphs dynamo made (more than one: the model's graph broke). dynamo's
    caches are reset before and after: a process that compiles its own models loses theirs."""
    import torch._inductor.lowering  # noqa: F401 (the decompositions read it; a fresh process lacks it)
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.decomposition import select_decomp_table

    _reset_dynamo()  # a fresh compile, as in a real run (each fake step has its model)
    forward = model.forward
    held: set[int] = set()  # the storages the caller holds (parameters, buffers, the batch)
    graphs: list[fx.GraphModule] = []
    backend = aot_autograd(
        fw_compiler=functools.partial(
            _counting_compiler, counter=counter, held=held, backward=False, graphs=graphs
        ),
        bw_compiler=functools.partial(
            _counting_compiler, counter=counter, held=held, backward=True
        ),
        partition_fn=_partitioned,
        decompositions=select_decomp_table(),
    )
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


def _reset_dynamo() -> None:
    torch._dynamo.reset()
    _emulation_never_compiled_alone()


def _emulation_never_compiled_alone() -> None:
    """The emulation's modes (cuda_emulation.py, real_draws.py) run where the model's code calls
    torch: traced into the caller's graph where dynamo compiles the caller, run as they are where
    the caller runs eagerly (a frame dynamo gave up on), never compiled as frames of their own,
    which a real run has not (dynamo did, and counted them as graphs: a step's bytes then
    depended on the compiles before it in the process)."""
    from torch._dynamo.eval_frame import set_code_exec_strategy
    from torch._dynamo.types import FrameAction, FrameExecStrategy

    skipped = FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP)  # and what they call
    modes: tuple[type[TorchFunctionMode], ...] = (*CUDA_EMULATION_MODES, RealScalarDraws)
    for mode in modes:
        set_code_exec_strategy(mode.__torch_function__.__code__, skipped)


def _partitioned(gm: fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
    """Inductor's partitioner, after its passes over the joint graph (the random numbers its
    kernels draw among them), in the fake mode of the graph's inputs, as inductor runs it."""
    from torch._guards import detect_fake_mode
    from torch._inductor.compile_fx import partition_fn
    from torch._inductor.virtualized import V

    with V.set_fake_mode(detect_fake_mode(joint_inputs)):
        return partition_fn(gm, joint_inputs, **kwargs)


def _counting_compiler(
    gm: fx.GraphModule,
    example_inputs: Any,
    *,
    counter: StorageBytes,
    held: set[int],
    backward: bool,
    graphs: list[fx.GraphModule] | None = None,
) -> Any:
    """AOTAutograd's compiler: a function that runs the graph and counts its buffers."""
    if graphs is not None:
        graphs.append(gm)

    def run(args: list[Any]) -> Any:
        inputs = list(args)
        args.clear()  # as inductor's code does: the inputs die with their last reader
        with counter.paused():
            interpreter = fx.Interpreter(gm, garbage_collect_values=False)
            outputs = interpreter.run(*inputs)
        count_buffers(gm, interpreter.env, counter, backward=backward, held=held)
        return outputs

    run._boxed_call = True  # type: ignore[attr-defined]
    return run
