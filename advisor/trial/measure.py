"""Measuring one trial: memory by category, allocator and NVML figures, and timed steps.

Runs inside the worker process (it initialises CUDA). The protocol (DESIGN.md):
- setup and the first step are inside the whole-trial peak (cuDNN autotuning and compilation can
  take more than the steady state); the steps after the first are the steady state;
- at least three warm-up steps (more while fp16 skips steps), then timed steps until the median
  step time is known to the stated precision (its 95% interval), or, in a sweep, until it is
  clear that the spec cannot beat the best so far;
- where the seconds went: building, the first step (compilation, cuDNN's benchmark), the other
  warm-up steps, timing; and how busy the machine was with other work while it timed;
- one rank of a job on several GPUs: what its collectives carried in the second step (the
  first whose buckets DDP has settled), recorded outside the timed steps (compiled, without
  letting dynamo give up on code it meets there: _collectives_recorded);
- every figure in int bytes and float seconds.
How memory is counted is device_memory.py's; how steps are timed, timing.py's; what an OOM
is, out_of_memory.py's.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable

import torch
from torch.utils._pytree import tree_leaves

from advisor import gpus
from advisor.result import Memory, Throughput
from advisor.spec import Device, TrialSpec
from advisor.trial.device_memory import (
    CpuMemory,
    CudaMemory,
    DeviceMemory,
    StepMarks,
    context_bytes_of,
    optimizer_state_bytes,
    tensor_bytes,
)
from advisor.trial.machine_load import MachineLoad
from advisor.trial.out_of_memory import as_out_of_memory, watch_cuda_oom
from advisor.trial.snapshot import MemorySnapshot
from advisor.trial.timing import (
    Clock,
    MeasureConfig,
    count_flops,
    iqr,
    median_ci95,
    time_steps,
    warmup_step,
)
from advisor.trial.training import Training, build, train_step

# fp16's GradScaler starts at a scale of 2**16 and halves it, skipping the optimizer step, while
# gradients overflow: warm-up goes on (up to this many steps) until a step really updates, so
# the optimizer state exists and the timed steps are the steady state.
MAX_WARMUP_STEPS = 50


def measure(
    spec: TrialSpec,
    settings: MeasureConfig,
    beat_samples_per_s: float | None = None,
    on_phase: Callable[[str], None] = lambda phase: None,
    memory_snapshot: str | None = None,
) -> tuple[Memory, Throughput]:
    """Build the trial's workload, warm it up and time it. Raises OutOfMemory as the step does.
    With beat_samples_per_s, timing stops as soon as this spec clearly cannot reach that rate.
    on_phase(name) is told each phase as it begins: building, compiling or first step, warm-up,
    timing (a compiled CPU trial: compiling again after warm-up, outside the memory count).
    memory_snapshot: torch's memory snapshot of the build, first step and warm-up (of an OOM
    there, up to it) is written there; recording stops before timing, which it would slow."""
    device = torch.device(spec.device.value)
    sharded = spec.strategy is not None and spec.strategy.shards
    memory: DeviceMemory = CudaMemory(device) if spec.device is Device.cuda else CpuMemory(sharded)
    marks = StepMarks(memory)
    # NVML's view of the GPU before this process touches it, for when it cannot name processes.
    used_before = gpus.device_used_bytes(0) if spec.device is Device.cuda else None
    observed_request = watch_cuda_oom() if spec.device is Device.cuda else None
    clock = Clock(spec.device)
    snapshot = None
    if memory_snapshot and spec.device is Device.cuda:
        snapshot = MemorySnapshot(memory_snapshot)
    # the CPU's count is a dispatch mode, under which dynamo compiles nothing (below); with
    # dynamo off, it marks no code as never to compile (see _collectives_recorded)
    counted_eagerly = spec.compile and spec.device is Device.cpu
    try:
        with (
            memory.tracking(),
            snapshot or contextlib.nullcontext(),
            torch.compiler.set_stance("force_eager")
            if counted_eagerly
            else contextlib.nullcontext(),
        ):
            on_phase("building")
            training = build(spec, device)
            marks.training = training
            setup_s = clock.lap()
            on_phase("compiling" if spec.compile else "first step")
            skipped = warmup_step(training, marks)  # the first: autotuning, compilation
            first_step_s = clock.lap()
            first_peak_allocated = memory.peak_allocated()
            first_peak_reserved = memory.peak_reserved()
            marks.restart_peak()
            on_phase("warm-up")
            warmup_steps = 1
            communication = {}
            if training.collectives is not None:  # one rank of several GPUs: a step's bytes
                skipped = _collectives_recorded(training, spec, marks)
                warmup_steps += 1
                communication = training.collectives.figures()
            while warmup_steps < max(settings.warmup_steps, 3) or (
                skipped and warmup_steps < MAX_WARMUP_STEPS
            ):
                skipped = warmup_step(training, marks)
                warmup_steps += 1
            params_bytes = tensor_bytes(training.model.parameters())
            buffers_bytes = tensor_bytes(training.model.buffers())
            state_bytes = optimizer_state_bytes(training.optimizer, device)
            inputs_bytes = tensor_bytes(
                t for t in tree_leaves(training.batch) if isinstance(t, torch.Tensor)
            )
            warmup_s = clock.lap()
        if counted_eagerly:
            # CPU memory is counted by a dispatch mode, under which dynamo runs the model
            # eagerly: it compiles at the first step outside it, which belongs to compiling,
            # not to timing (there it took a 2-core trial's time budget in one step); the
            # compiled graph's first run then gets a warm-up step, as on the GPU
            on_phase("compiling")
            train_step(training)  # (unmarked: its memory is not counted, its phases not kept)
            first_step_s += clock.lap()
            train_step(training)
            warmup_steps += 2
            warmup_s += clock.lap()
        on_phase("timing")
        load = MachineLoad()
        times, stopped = time_steps(training, settings, beat_samples_per_s)
        timing_s = clock.lap()
        machine_load = load.others_share()
    except Exception as error:
        oom = as_out_of_memory(error, marks.phase, observed_request)
        if oom is None:
            raise
        raise oom from None

    steady_allocated = memory.peak_allocated()
    steady_reserved = memory.peak_reserved()
    peak_reserved = max(first_peak_reserved, steady_reserved)
    context_bytes, nvml_bytes = context_bytes_of(spec, device, used_before)
    median = statistics.median(times)
    samples_per_s = spec.effective_batch_size / median
    tokens = spec.model.tokens_per_sample
    mem = Memory(
        context_bytes=context_bytes,
        params_bytes=params_bytes,
        buffers_bytes=buffers_bytes,
        activations_bytes=marks.activations_bytes,
        grads_bytes=marks.grads_bytes,
        optimizer_state_bytes=state_bytes,
        inputs_bytes=inputs_bytes,
        peak_allocated_bytes=max(first_peak_allocated, steady_allocated),
        peak_reserved_bytes=peak_reserved,
        steady_peak_allocated_bytes=steady_allocated,
        steady_peak_reserved_bytes=steady_reserved,
        peak_phase=marks.peak_phase,
        device_peak_bytes=peak_reserved + context_bytes,
        nvml_process_bytes=nvml_bytes,
        num_alloc_retries=memory.num_alloc_retries(),
    )
    throughput = Throughput(
        samples_per_s=samples_per_s,
        tokens_per_s=samples_per_s * tokens if tokens else None,
        step_s_median=median,
        step_s_iqr=iqr(times),
        timed_steps=len(times),
        warmup_steps=warmup_steps,
        flops_per_step=count_flops(spec),
        step_s_ci95=median_ci95(times),
        stopped=stopped,
        setup_s=setup_s,
        first_step_s=first_step_s,
        warmup_s=warmup_s,
        timing_s=timing_s,
        machine_load=machine_load,
        **communication,
    )
    return mem, throughput


def _collectives_recorded(training: Training, spec: TrialSpec, marks: StepMarks) -> bool:
    """One warm-up step with what its collectives carry recorded; whether the optimizer
    skipped it. DDP's are told by its comm hook; FSDP2's are c10d's ops, seen by a dispatch
    mode. dynamo compiles no frame it meets under a dispatch mode, and a torch without
    pytorch/pytorch#186085 (June 2026) marks that frame's code never to compile again. On the
    H200's torch 2.11 a compiled DDP rank of gpt2 (b32, at 8, recorded under the mode then)
    ran at its eager rate and held more than the eager rank (device peak 49.5 against 48.2 GiB;
    one GPU compiled: 28.1), likely for this reason. So DDP records without the mode. A
    compiled FSDP2 rank on a GPU records with dynamo's stance eager_on_recompile, which runs the
    compiled code where its guards hold and new code eagerly, marking nothing. Then it gives
    back what an eager part held: the cache is emptied, the steady peak restarted and the
    activations kept as before this step. The steady figures are then the compiled steps'. (On
    the CPU, every counted step runs eagerly anyway: measure.)"""
    collectives = training.collectives
    assert collectives is not None and spec.strategy is not None
    if not spec.strategy.shards:  # DDP
        with collectives.recording(watch_ops=False):
            return warmup_step(training, marks)
    if not (spec.compile and spec.device is Device.cuda):
        with collectives.recording():
            return warmup_step(training, marks)
    activations = marks.activations_bytes
    with torch.compiler.set_stance("eager_on_recompile"), collectives.recording():
        skipped = warmup_step(training, marks)
    marks.activations_bytes = activations
    torch.cuda.empty_cache()
    marks.restart_peak()
    return skipped
