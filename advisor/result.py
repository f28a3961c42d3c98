"""TrialResult and its parts: what one trial measured, in int bytes and float seconds.

The JSON names here are the public ones (`advisor run --json`, `advisor history --json`); other
verbs reuse them.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from advisor.spec import TrialSpec, plain


class Status(enum.Enum):
    ok = "ok"
    oom = "oom"  # ran out of device memory: a result, the search needs infeasible points
    crashed = "crashed"  # the worker died or raised something other than an OOM
    timeout = "timeout"  # the worker did not finish in time and was killed


class Kind(enum.Enum):
    """What a stored trial is: advisor's measurement, or the user's own training run."""

    measured = "measured"  # advisor measured the setting (run, sweep): what it predicts from
    training = "training"  # the user's training, recorded by advisor.in_training's callbacks


class Phase(enum.Enum):
    """Where in the training step something happened (an OOM, the peak)."""

    setup = "setup"  # building the model, optimizer and batch on the device
    forward = "forward"
    backward = "backward"
    optimizer = "optimizer"


class Category(enum.Enum):
    """Where memory goes, named as torch's MemTracker names its reference types
    (torch.distributed._tools.mem_tracker._MemRefType), with the CUDA context before them. The
    one list of categories: measure, estimate, store, report and JSON all derive theirs from it,
    in this order (the order a breakdown is stacked)."""

    context = "Context"  # the CUDA context and runtime: only NVML sees it
    params = "Parameter"
    buffers = "Buffer"
    optimizer_state = "Optstate"
    grads = "Gradient"
    activations = "Activation"
    inputs = "Inputs"

    @property
    def field(self) -> str:
        """The name of its figure in Memory, the store and JSON: params -> params_bytes."""
        return f"{self.name}_bytes"

    @property
    def label(self) -> str:
        """How a person reads it."""
        return _LABELS[self]


_LABELS = {
    Category.context: "CUDA context",
    Category.params: "parameters",
    Category.buffers: "buffers",
    Category.optimizer_state: "optimizer state",
    Category.grads: "gradients",
    Category.activations: "activations",
    Category.inputs: "inputs",
}


@dataclasses.dataclass(frozen=True)
class Memory:
    """Where the memory went.

    The categories are each taken at their own largest: parameters, gradients and optimizer state
    are exact tensor sizes; activations are what the forward pass leaves alive for backward
    (allocated after the forward minus before it). They do not all coexist (backward frees
    activations as it makes gradients), so their sum may exceed the peak.
    """

    context_bytes: int  # CUDA context and runtime (NVML's process figure minus reserved); 0 on CPU
    params_bytes: int  # parameters (nn.Module.parameters())
    buffers_bytes: int  # buffers (nn.Module.buffers(): BatchNorm's running statistics)
    activations_bytes: int  # saved for backward by one micro batch's forward
    grads_bytes: int  # parameter gradients
    optimizer_state_bytes: int  # optimizer state tensors (e.g. AdamW: exp_avg, exp_avg_sq)
    inputs_bytes: int  # the synthetic batch (inputs and labels) of one micro batch
    peak_allocated_bytes: int  # over the whole trial, the first steps included
    peak_reserved_bytes: int  # over the whole trial, the first steps included
    steady_peak_allocated_bytes: int  # over the timed steps only
    steady_peak_reserved_bytes: int  # over the timed steps only
    peak_phase: Phase | None  # the phase of the step where the steady peak was reached
    device_peak_bytes: int  # what the device must hold: peak reserved plus context
    nvml_process_bytes: int | None  # NVML's figure for the process at the end (context included)
    num_alloc_retries: int  # times the caching allocator freed its cache and retried (cudaMalloc)

    def categories(self) -> dict[Category, int]:
        return {c: getattr(self, c.field) for c in Category}

    @property
    def allocator_overhead_bytes(self) -> int:
        """Reserved but not allocated at the peak: block rounding, caching, fragmentation."""
        return self.peak_reserved_bytes - self.peak_allocated_bytes


class TimingStop(enum.Enum):
    """Why the timed steps stopped."""

    precise = "precise"  # the median step time was known to the stated precision
    cut = "cut"  # it could not beat the sweep's best so far: the rate is a bound, not exact
    steps = "steps"  # measure.max_timed_steps were timed
    seconds = "seconds"  # measure.max_timed_s passed


@dataclasses.dataclass(frozen=True)
class Throughput:
    samples_per_s: float  # micro batch x accumulation (x the job's GPUs) / median step time
    tokens_per_s: float | None  # language models only
    step_s_median: float  # one optimizer step (all its micro batches)
    step_s_iqr: float  # interquartile range of the step times: the spread
    timed_steps: int
    warmup_steps: int
    flops_per_step: float | None  # model FLOPs of one step (forward + backward, no recompute)
    mfu: float | None = None  # flops_per_step / step_s_median / the GPU's peak; None on CPU
    # Stored since schema 0004 (None before):
    step_s_ci95: float | None = None  # half-width of the median's 95% confidence interval
    stopped: TimingStop | None = None  # why timing stopped
    setup_s: float | None = None  # building the model, optimizer and batch on the device
    first_step_s: float | None = None  # the first step: compilation, cuDNN's benchmark
    warmup_s: float | None = None  # the other untimed steps
    timing_s: float | None = None  # the timed steps
    # Stored since schema 0009 (None before): how busy the machine was with other work while
    # the steps were timed, as others' share of every core's time (trial/machine_load.py)
    machine_load: float | None = None
    # Stored since schema 0012 (None before, and on one GPU): what rank 0's collectives carried
    # in one optimizer step, recorded on the fake group as it ran (trial/collectives.py), each
    # by its full buffer (an all-reduce's bucket, an all-gather's output, a reduce-scatter's
    # input); communication.py models their time
    all_reduce_bytes: int | None = None
    all_gather_bytes: int | None = None
    reduce_scatter_bytes: int | None = None
    collectives: int | None = None  # how many ran
    largest_collective_bytes: int | None = None

    @property
    def spread(self) -> float:
        """The spread relative to the median (IQR / median)."""
        return self.step_s_iqr / self.step_s_median

    @property
    def precision(self) -> float | None:
        """How well the rate is known: the median's 95% interval relative to the median."""
        return None if self.step_s_ci95 is None else self.step_s_ci95 / self.step_s_median

    @property
    def cut(self) -> bool:
        """Timing stopped once it could not beat the sweep's best: the rate is a bound."""
        return self.stopped is TimingStop.cut


def throughput_from_dict(data: dict[str, Any]) -> Throughput:
    stopped = data.get("stopped")
    return Throughput(**{**data, "stopped": TimingStop(stopped) if stopped else None})


@dataclasses.dataclass(frozen=True)
class Environment:
    device_name: str  # 'NVIDIA H200', or the CPU's name
    device_memory_bytes: int | None
    driver: str | None
    cuda: str | None  # the CUDA version torch was built with
    torch: str
    advisor: str
    python: str
    host: str


@dataclasses.dataclass(frozen=True)
class Failure:
    """Why a trial did not finish: the OOM's phase and request, or a crash's stderr."""

    phase: Phase | None = None
    requested_bytes: int | None = None  # what the failing allocation asked for
    message: str = ""  # the error, or the tail of the worker's stderr

    @property
    def last_line(self) -> str:
        """What it said last, in one line: a traceback's exception, or the exit code."""
        lines = [line.strip() for line in self.message.splitlines() if line.strip()]
        return lines[-1] if lines else ""


@dataclasses.dataclass(frozen=True)
class JobStep:
    """One optimizer step of a job on several GPUs, modelled from its rank 0's trial
    (communication.py), each figure said as measured or modelled."""

    measured_s: float  # rank 0's step on the fake group (measured)
    local_copies_s: float  # the fake group's own copies within it (modelled)
    compute_s: float  # measured_s less the copies
    communication_s: float  # every collective of the step on the wire (modelled)
    hidden_s: float  # the part of it compute hides (modelled)
    step_s: float  # compute_s + communication_s - hidden_s
    samples_per_s: float  # the job's global batch / step_s
    how: str  # the link and the overlap, in words
    nodes: int = 1  # the machines the job's GPUs were modelled over

    @property
    def exposed_s(self) -> float:
        return self.communication_s - self.hidden_s


@dataclasses.dataclass(frozen=True)
class TrialResult:
    spec: TrialSpec
    status: Status
    environment: Environment | None  # None when the worker died before reporting it
    # None unless status is ok (a training run that ended in an error keeps what it recorded)
    memory: Memory | None
    throughput: Throughput | None
    failure: Failure | None  # None when status is ok
    wall_s: float  # the whole trial, process start to exit
    id: int | None = None  # set by the store
    created_at: str | None = None  # ISO 8601, UTC; set by the store
    memory_snapshot: str | None = None  # the file torch's memory snapshot was written to
    kind: Kind = Kind.measured
    follows: int | None = None  # a training run's: the id of the measured trial it followed
    # a rank's trial seen as the whole job (communication.as_job): the job's step, modelled;
    # its throughput is then the job's. Never stored: worked out for a link when asked
    job: JobStep | None = None

    @property
    def samples_per_s(self) -> float:
        """Its throughput; 0 when it has none (an OOM, a crash)."""
        return 0.0 if self.throughput is None else self.throughput.samples_per_s

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape: id, status, spec, memory, throughput, environment, failure,
        and what kind of trial it is (a training run: the measured trial it followed)."""
        spec = self.spec.to_dict()
        spec["model"] = self.spec.model.name  # the full workload description stays in the store
        # its code and library versions; None for trials stored before workloads had one
        spec["fingerprint"] = self.spec.model.fingerprint if self.spec.model.source else None
        spec["optimizer"] = self.spec.optimizer.name
        spec["hash"] = self.spec.hash
        memory = None
        if self.memory is not None:
            memory = plain(dataclasses.asdict(self.memory))
            memory["allocator_overhead_bytes"] = self.memory.allocator_overhead_bytes
        return {
            "id": self.id,
            "created_at": self.created_at,
            "status": self.status.value,
            "spec": spec,
            "memory": memory,
            "throughput": _part(self.throughput),
            "environment": _part(self.environment),
            "failure": _part(self.failure),
            "wall_s": self.wall_s,
            "memory_snapshot": self.memory_snapshot,
            "kind": self.kind.value,
            "follows": self.follows,
            **({"job": _part(self.job)} if self.job is not None else {}),
        }


def _part(value: Any) -> dict[str, Any] | None:
    return None if value is None else plain(dataclasses.asdict(value))


def memory_from_dict(data: dict[str, Any]) -> Memory:
    data = {k: v for k, v in data.items() if k != "allocator_overhead_bytes"}
    if data.get("buffers_bytes") is None:  # stored before 0003: buffers counted in params_bytes
        data["buffers_bytes"] = 0
    phase = data.get("peak_phase")
    return Memory(**{**data, "peak_phase": Phase(phase) if phase else None})


def failure_from_dict(data: dict[str, Any]) -> Failure:
    phase = data.get("phase")
    return Failure(**{**data, "phase": Phase(phase) if phase else None})
