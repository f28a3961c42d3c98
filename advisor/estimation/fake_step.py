"""One training step on fake tensors: what each storage would take, and when.

FakeTensorMode runs the real model code with no memory behind the tensors; a dispatch mode
counts the bytes each storage would take, rounded as the CUDA caching allocator rounds (512 B),
and traces when each comes and goes. Fake tensors live on the CPU (fake CUDA tensors need a CUDA
driver), so what the GPU would run differently is emulated above autograd
(cuda_emulation.py); below it, the engine's gradient sums are counted in place where
CUDA's are (the engine does not make them so for fake tensors). The trace can be replayed
through the caching allocator's model (advisor/estimation/allocator.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from hydra.utils import instantiate
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_leaves

from advisor.errors import AdvisorError, EstimateError, error_line, where_in_the_users_code
from advisor.estimation import job_rank
from advisor.estimation.allocator import Block, CachingAllocator, ExpandableSegments
from advisor.estimation.compiled_step import compiled
from advisor.estimation.cuda_emulation import autocast_dtype, step_precision
from advisor.estimation.cuda_workspaces import CudaTemporaries
from advisor.estimation.masks import as_in_a_real_run
from advisor.estimation.meta_model import meta_model_of, with_fake_storage
from advisor.estimation.real_draws import CountsWithinMinlength, RealScalarDraws
from advisor.estimation.storage_bytes import BLOCK, StorageBytes, local_tensors
from advisor.spec import Checkpointing, Device, Strategy, TrialSpec
from advisor.trial import one_rank
from advisor.trial.training import checkpoint_blocks, device_batch, workload_of

TOP_MODULES = 10
# cuDNN picks each convolution's kernel, and its workspace, on the GPU (advisor's runs: by speed).
# The kernels a shape tells are modelled; channels-last and patch kernels kept the truth within
# the estimate's usual range (cuda_workspaces.has_unmodelled_convolutions, for the step's calls
# and the model's modules: CudaTemporaries.convolutions_of). Left out of the H100's traces, the
# workspaces took 7.6% off RegNet's reserve in channels-last bf16, 6.3% off Whisper's in bf16
# and 11.2% off a checkpointed resnet50's in strict fp32 (estimator.CONVOLUTIONS_ABOVE).
CUDNN_UNMODELLED = (
    "cuDNN's convolution workspaces but for the kernels a shape tells (cuDNN picks its "
    "kernels on the GPU): a resnet50 in strict fp32 needed 25.3% more device memory"
)


@dataclasses.dataclass(frozen=True)
class FakeStep:
    """What one fake training step showed, in allocator-rounded bytes."""

    params_bytes: int
    buffers_bytes: int
    grads_bytes: int
    optimizer_state_bytes: int
    inputs_bytes: int
    activations_bytes: int
    passes_peak_bytes: int  # the forward and backward passes' peak: grows with the batch
    update_peak_bytes: int  # the optimizer step's: does not
    top_modules: list[tuple[str, int]]
    # For the allocator model: the step's storages as they came and went, (id, bytes) for an
    # allocation and (id, -1) for its free; the storages alive before it (parameters, buffers,
    # inputs); the parameters' sizes; the optimizer's state and update per parameter byte.
    trace: tuple[tuple[int, int], ...] = ()
    persistent: tuple[int, ...] = ()
    param_sizes: tuple[int, ...] = ()
    state_ratio: float = 0.0
    update_ratio: float = 0.0
    # cuDNN's benchmark empties the allocator's cache after each search of the first step
    # (ATen's Conv_v8.cpp; seen in the traces of resnet50 and vit_b_16, never in gpt2's)
    first_step_releases_cache: bool = False
    # on CUDA, convolutions whose workspaces cuDNN decides beyond what is modelled
    # (CudaTemporaries.convolutions_of): the estimate's range widens
    unmodelled_convolutions: bool = False
    # in strict fp32, a bound on its convolutions' forward workspaces (CudaTemporaries), capped
    strict_fp32_forward_bound_bytes: int = 0
    # what the step could not run as CUDA would, in words (an attention kernel not probed)
    unmodelled: tuple[str, ...] = ()
    compiled_graphs: int = 0  # compiled: the forward graphs dynamo made (more: graph breaks)
    ddp_buckets_bytes: int = 0  # a DDP rank's gradient buckets: in the peak, in no category
    # the trace's storages on a side stream (FSDP2's), (number, stream): kept apart as CUDA does
    streams: tuple[tuple[int, int], ...] = ()
    expandable_segments: bool = False  # the allocator's (allocator.ExpandableSegments)

    @property
    def peak_allocated_bytes(self) -> int:
        return max(self.passes_peak_bytes, self.update_peak_bytes)


@functools.lru_cache(maxsize=256)
def fake_step(spec: TrialSpec) -> FakeStep:
    """One steady-state step of the spec on fake tensors: the categories and the peak.
    Deterministic, so kept: calibration asks again for the specs of history. A step that
    cannot run on fake tensors (an operator torch's meta functions refuse, say) is said in one
    line."""
    try:
        with _no_cycle_collection():
            return _run_fake_step(spec)
    except AdvisorError:
        raise
    except Exception as error:
        raise EstimateError(
            f"{spec.model.name}: its step raised on fake tensors ({error_line(error)})"
            f"{where_in_the_users_code(error)}; if it runs on a GPU, measure it there instead "
            "(advisor run)"
        ) from None


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector stays off while a step runs: it ran when the objects made since
    its last run (this process's imports and compiles before the step too) passed a threshold,
    and the storages it freed mid-step made the same spec count differently in a fresh process
    and after other estimates (a checkpointed compiled resnet50: 59.6 GB, then 71.2 GB)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
            gc.collect()


def _run_fake_step(spec: TrialSpec) -> FakeStep:
    gpu = spec.device is Device.cuda
    temporaries = CudaTemporaries(tf32=spec.precision.cudnn_tf32, channels_last=spec.channels_last)
    counter = StorageBytes(BLOCK, temporaries) if gpu else StorageBytes(1)
    cpu = torch.device("cpu")
    work = workload_of(spec.model)
    meta_model = meta_model_of(spec.model)
    if spec.channels_last:  # before the fake storage: empty_like keeps the layout
        meta_model = meta_model.to(memory_format=torch.channels_last)
    unmodelled: set[str] = set()
    rank_mesh = job_rank.mesh(spec)  # (FSDP2's: made outside the fake mode)
    with contextlib.ExitStack() as stack:
        for context in (
            FakeTensorMode(allow_non_fake_inputs=True), counter, as_in_a_real_run(),
            RealScalarDraws(), CountsWithinMinlength(),
        ):  # fmt: skip
            stack.enter_context(context)
        model = with_fake_storage(meta_model)
        if spec.checkpointing is Checkpointing.blocks:
            _precision_inside_blocks(model, spec, unmodelled)
            checkpoint_blocks(model, spec.model.block or "")
        buckets: list[torch.Tensor] = []  # DDP's, alive through the step
        if spec.gpus > 1:
            model, buckets = job_rank.as_one_rank(model, spec, rank_mesh)
            # FSDP2 frees gathered parameters by resizing their storage: the counter is told
            told = one_rank.fsdp_storage_told(
                counter.count, lambda tensor: counter.release(tensor.untyped_storage())
            )
            stack.enter_context(told)
        # a job's rank compiled is estimated compiled, as one GPU's step: gpt2's compiled ranks
        # at N=8, measured on an H100 once the trial kept dynamo from giving up on them, held
        # 4.98 GiB (FSDP2, micro batch 8; estimated 5.67 with this machine's torch 2.14) and
        # 20.01 GiB (DDP, 32) at their steady peaks (experiments/2026-12-05-h200-ranks, its
        # recheck; an earlier rule's eager figure came from a rank that ran eagerly). A DDP rank's
        # graph is split where DDP's buckets fill (experiments/2026-12-05-ddp-split-estimate).
        ddp = spec.gpus > 1 and spec.strategy is Strategy.ddp
        buckets_cap = job_rank.DDP_BUCKET_BYTES if ddp else None
        graphs: list[Any] = []
        if spec.compile:
            autocast = gpu and autocast_dtype(spec) is not None
            graphs = stack.enter_context(
                compiled(model, counter, gpu=gpu, ddp_buckets=buckets_cap, cuda_autocast=autocast)
            )
        params = list(model.parameters())
        params_bytes = counter.bytes_of(params)
        buffers_bytes = counter.bytes_of(model.buffers())
        batch = device_batch(work, spec, cpu)
        inputs_bytes = counter.bytes_of(
            t for t in tree_leaves(batch) if isinstance(t, torch.Tensor)
        )
        state_ratio, update_ratio = _optimizer_probe(spec.optimizer.builder)
        state_bytes = int(state_ratio * counter.bytes_of(params))
        counter.extra = state_bytes  # the optimizer's state stays alive through the step
        counter.peak = counter.live + counter.extra
        persistent = counter.alive()
        counter.trace = []  # from here on, the step
        top: dict[str, int] = {}
        activations = 0
        for _ in range(spec.grad_accum):
            before = counter.live
            # compiled, the modules' code runs only in the tracing: no hooks (they break graphs)
            per_module = (
                contextlib.nullcontext()
                if spec.compile
                else _module_activations(model, counter, top)
            )
            with per_module, step_precision(spec, unmodelled):
                loss = work.compute_loss(model, batch) / spec.grad_accum
            activations = max(activations, counter.live - before)
            with _gradient_sums_marked(loss, counter):
                loss.backward()
            del loss
        grads_bytes = counter.bytes_of([p.grad for p in params if p.grad is not None])
        has_convolutions, unmodelled_convolutions = (
            temporaries.convolutions_of(model) if gpu else (False, False)
        )
        if unmodelled_convolutions:
            unmodelled.add(CUDNN_UNMODELLED)
        # the optimizer step: parameters, gradients and state, plus the update's temporaries
        update_peak = counter.live + state_bytes + int(update_ratio * grads_bytes)
    return FakeStep(
        params_bytes=params_bytes,
        buffers_bytes=buffers_bytes,
        grads_bytes=grads_bytes,
        optimizer_state_bytes=state_bytes,
        inputs_bytes=inputs_bytes,
        activations_bytes=activations,
        passes_peak_bytes=counter.peak,
        update_peak_bytes=update_peak,
        top_modules=sorted(top.items(), key=lambda kv: -kv[1])[:TOP_MODULES],
        trace=tuple(counter.trace),
        persistent=persistent,
        param_sizes=tuple(p.untyped_storage().nbytes() for p in local_tensors(params)),
        state_ratio=state_ratio,
        update_ratio=update_ratio,
        first_step_releases_cache=has_convolutions,
        unmodelled_convolutions=unmodelled_convolutions,
        strict_fp32_forward_bound_bytes=temporaries.strict_fp32_forward_bound,
        unmodelled=tuple(sorted(unmodelled)),
        compiled_graphs=len(graphs),
        ddp_buckets_bytes=counter.bytes_of(buckets),
        streams=tuple(counter.streams.items()),
        expandable_segments=spec.expandable_segments,
    )


def _precision_inside_blocks(model: nn.Module, spec: TrialSpec, unmodelled: set[str]) -> None:
    """Checkpointing recomputes each block in backward, outside the step's precision context:
    give the blocks their own, as torch's checkpoint restores real autocast."""
    for module in model.modules():
        if type(module).__name__ == spec.model.block:
            forward = module.forward

            def under_precision(*args: Any, _forward: Any = forward, **kwargs: Any) -> Any:
                if torch.compiler.is_compiling():  # traced: the step's own modes are in the
                    return _forward(*args, **kwargs)  # graph (dynamo's checkpoint refuses more)
                with step_precision(spec, unmodelled):
                    return _forward(*args, **kwargs)

            module.forward = under_precision


@contextlib.contextmanager
def _gradient_sums_marked(loss: torch.Tensor, counter: StorageBytes) -> Iterator[None]:
    """Tell the counter when the autograd engine, in the backward pass run inside, sums
    gradients: after a node has made its gradients (its post hook) and before the next node
    starts (its pre hook)."""

    def summing(*_: object) -> None:
        counter.summing = True

    def computing(*_: object) -> None:
        counter.summing = False

    seen: set[torch.autograd.graph.Node] = set()
    nodes = [loss.grad_fn]
    while nodes:
        node = nodes.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        node.register_prehook(computing)
        node.register_hook(summing)
        nodes.extend(n for n, _ in node.next_functions)
    try:
        yield
    finally:
        counter.summing = False


@contextlib.contextmanager
def _module_activations(
    model: nn.Module, counter: StorageBytes, into: dict[str, int]
) -> Iterator[None]:
    """Per leaf module: the bytes its forward added that are still alive after it (its saved
    tensors and output); leaves only, so nothing is counted twice."""
    started: dict[str, int] = {}

    def before(name: str) -> Callable[..., None]:
        return lambda *_: started.__setitem__(name, counter.live)

    def after(name: str) -> Callable[..., None]:
        def hook(*_: object) -> None:
            added = counter.live - started.pop(name, counter.live)
            into[name] = max(into.get(name, 0), added)

        return hook

    handles = []
    for name, module in model.named_modules():
        if name and next(module.children(), None) is None:
            handles.append(module.register_forward_pre_hook(before(name)))
            handles.append(module.register_forward_hook(after(name)))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@functools.cache
def _optimizer_probe(builder: str) -> tuple[float, float]:
    """State bytes per parameter byte, and the update's temporaries per gradient byte, of the
    spec's optimizer: a steady (second) real step on a small CPU parameter, its storages
    counted."""
    counter = StorageBytes(1)
    with counter:  # everything made under the counter, so in-place updates are not new bytes
        param = nn.Parameter(torch.zeros(4096))
        param.grad = torch.ones(4096)
        optimizer = instantiate(json.loads(builder))([param])
        optimizer.step()  # the first step makes the state; the second is the steady one
        before = counter.peak = counter.live
        optimizer.step()
    state = [v for v in optimizer.state[param].values() if isinstance(v, torch.Tensor)]
    per_element = sum(t.numel() * t.element_size() for t in state if t.numel() == param.numel())
    param_bytes = param.numel() * param.element_size()
    return per_element / param_bytes, (counter.peak - before) / param_bytes


def step_between(first: FakeStep, second: FakeStep, batch: int, at: int) -> FakeStep | None:
    """The fake step at batch `at`, from those at `batch` and twice it, when both traced the
    same storages in the same order (None if not)."""
    if len(first.trace) != len(second.trace) or len(first.persistent) != len(second.persistent):
        return None
    if _renumbered(first.trace) != _renumbered(second.trace):
        return None

    def size(a: int, b: int) -> int:
        return a if a < 0 else max(0, a + (b - a) * (at - batch) // batch)

    return dataclasses.replace(
        first,
        trace=tuple(
            (n, size(a, b)) for (n, a), (_, b) in zip(first.trace, second.trace, strict=True)
        ),
        persistent=tuple(
            size(a, b) for a, b in zip(first.persistent, second.persistent, strict=True)
        ),
    )


def _renumbered(trace: tuple[tuple[int, int], ...]) -> list[tuple[int, bool]]:
    """The trace's shape: each storage by the order it first appears (the counter's numbers
    count the storages made before the step too), each event an allocation or a free."""
    order: dict[int, int] = {}
    return [(order.setdefault(number, len(order)), size >= 0) for number, size in trace]


def replayed_reserved(
    step: FakeStep, cap: int | None = None, steps: int = 3, scale: float = 1.0
) -> int:
    """The caching allocator's peak reserved bytes over steady steps (all but the first), the
    fake step's allocations replayed through its model; ReplayOutOfMemory when a cap is too small.
    Each step: the passes as traced (in the first step followed by the free segments given
    back, where the step says cuDNN's benchmark does that), the optimizer's state (first step
    only) and its update's temporaries, then the gradients freed (zero_grad(set_to_none=True)).
    Scale corrects the step's sizes by calibration (measured / fake peak allocated)."""
    allocator = (ExpandableSegments if step.expandable_segments else CachingAllocator)(cap)
    for size in step.persistent:
        allocator.malloc(size)
    streams = dict(step.streams)
    steady = 0
    for index in range(steps):
        live: dict[int, Block] = {}
        for number, size in step.trace:
            if size >= 0:
                live[number] = allocator.malloc(int(size * scale), streams.get(number, 0))
            elif number in live:
                allocator.free(live.pop(number))
        if index == 0 and step.first_step_releases_cache:
            allocator.release_free_segments()
        if index == 0:
            for size in step.param_sizes:
                for _ in range(round(step.state_ratio)):
                    allocator.malloc(size)
        temporaries = [
            allocator.malloc(int(size * min(1.0, step.update_ratio - k)))
            for k in range(math.ceil(step.update_ratio))
            for size in step.param_sizes
        ]
        for block in temporaries:
            allocator.free(block)
        for block in live.values():  # the gradients, and whatever else the step left
            allocator.free(block)
        if index == 0:
            allocator.peak_reserved = allocator.reserved
        steady = allocator.peak_reserved
    return steady
