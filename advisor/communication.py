"""A job's step on several GPUs, from one rank's: the rank's compute as measured on the fake
process group, plus its collectives as the interconnect would carry them (issue 28).

What is measured: the rank's step, and the bytes each collective carried in it (recorded as it
ran, trial/collectives.py). What is modelled, and how:
- **time on the wire**: NCCL's ring figures, as nccl-tests report bus bandwidth: an
  all-reduce of S bytes moves 2(N-1)/N x S over each GPU's link, an all-gather or a
  reduce-scatter (S their full, unsharded buffer) (N-1)/N x S; each at the link's bus
  bandwidth (the GPU profile's published figure, or the user's nccl-tests number). Latency is
  not modelled: it matters only for collectives of a few MB or less.
- **the fake group's own copies**: its all-gather copies the local shard into each chunk of
  the output and its reduce-scatter keeps the local chunk; the measured step paid for them at
  the GPU's memory bandwidth (read and write), so they are taken out of the compute.
- **overlap**: DDP all-reduces its buckets as the last micro batch's backward makes them (the
  others run under no_sync), and that backward is taken as 2/3 of a micro batch's compute (it
  does twice the forward's FLOPs); FSDP2 prefetches each block's all-gather during the block
  before it, and reduce-scatters during the backward, over all of the step's compute. Either
  way the largest collective is counted as not hidden (the first gather, the last bucket), and
  what the window cannot hide adds to the step. NCCL's kernels slowing the compute they overlap
  is not modelled.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

from advisor.errors import ConfigError
from advisor.gpus import profile_for_device_name
from advisor.result import JobStep, Throughput, TrialResult
from advisor.spec import Strategy, TrialSpec


class Collective(enum.Enum):
    """The collectives a data-parallel step runs, each named by its full buffer's bytes."""

    all_reduce = "all_reduce"  # DDP's gradient buckets
    all_gather = "all_gather"  # FSDP's parameters (the gathered output)
    reduce_scatter = "reduce_scatter"  # FSDP's gradients (the unsharded input)

    @property
    def wire_factor(self) -> float:
        """Bytes each GPU's link carries per byte of the buffer, times N/(N-1)."""
        return 2.0 if self is Collective.all_reduce else 1.0


@dataclasses.dataclass(frozen=True)
class Interconnect:
    """The bus bandwidth a job's collectives run at, and where the figure comes from."""

    busbw: float  # bytes/s, as nccl-tests' busbw column
    memory_bandwidth: float | None  # the GPU's, bytes/s: the fake group's copies ran at it
    says: str  # e.g. 'within a node, 460 GB/s (h200's profile)'


def interconnect(
    gpu: Mapping[str, Any], gpus: int, nodes: int, device_name: str | None = None
) -> Interconnect:
    """The link a job of `gpus` over `nodes` communicates over, from the composed gpu node
    (conf/gpu/NAME.yaml, with the user's gpu.KEY= overrides; gpu=auto: the profile of
    `device_name`, the GPU the rank ran on): within a node, NVLink or PCIe; across nodes, the
    network, which a ring over both is held to. ConfigError, in one line with how to give
    one, where the profile has no figure."""
    node = resolved(gpu, device_name)
    check_nodes(node, gpus, nodes)
    name = node.get("name")
    key = "intra_node_busbw" if nodes == 1 else "inter_node_busbw"
    figure = node.get(key)
    if figure is None:
        where = "within a node" if nodes == 1 else "between nodes"
        said = (
            f"{name} has no published bus bandwidth {where}"
            if name not in (None, "auto")
            else "no GPU is named whose interconnect to model"
        )
        raise ConfigError(
            f"{said}: give gpu.{key}=GB_PER_S (nccl-tests' all_reduce_perf busbw at large "
            "sizes)" + ("" if name not in (None, "auto") else " or gpu=NAME")
        )
    busbw = _gb_per_s(figure, key)
    memory_bandwidth = node.get("memory_bandwidth")
    where = "within a node" if nodes == 1 else f"between {nodes} nodes"
    return Interconnect(
        busbw=busbw,
        memory_bandwidth=None if memory_bandwidth is None else float(memory_bandwidth),
        says=f"{where} at {busbw / 1e9:g} GB/s ("
        + (f"{name}'s gpu.{key})" if name not in (None, "auto") else f"gpu.{key} as given)"),
    )


def check_nodes(gpu: Mapping[str, Any], gpus: int, nodes: int) -> None:
    """nodes= that can hold gpus=: ConfigError in one line for any other."""
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ConfigError(f"nodes must be a positive integer, got {nodes!r}")
    if nodes > 1 and gpus == 1:
        raise ConfigError("nodes= spreads a job's GPUs over machines: give gpus=N too")
    if gpus % nodes:
        raise ConfigError(f"gpus={gpus} over nodes={nodes} is uneven: give a multiple of {nodes}")
    per_node = gpu.get("gpus_per_node")
    if per_node is not None and gpus // nodes > int(per_node):
        raise ConfigError(
            f"gpus={gpus} over nodes={nodes} is {gpus // nodes} a node, and a "
            f"{gpu.get('name')} node holds {per_node}: give nodes={-(-gpus // int(per_node))}"
        )


def resolved(gpu: Mapping[str, Any], device_name: str | None) -> dict[str, Any]:
    """The gpu node with gpu=auto's figures taken from the profile of `device_name` (the GPU
    the rank runs on), where it has one; the user's gpu.KEY= overrides stay."""
    node = dict(gpu)
    profile = None if device_name is None else profile_for_device_name(device_name)
    if node.get("name") in (None, "auto") and profile is not None:
        given = {k: v for k, v in node.items() if v is not None and k != "name"}
        node = {**dataclasses.asdict(profile), **given}
    return node


def _gb_per_s(figure: Any, key: str) -> float:
    """A bus bandwidth given in GB/s, as bytes/s."""
    try:
        value = float(figure)
    except (TypeError, ValueError):
        value = -1.0
    if not 0 < value < 1e5:
        raise ConfigError(f"gpu.{key}={figure!r}: give GB/s as a positive number, e.g. 460")
    return value * 1e9


def job_step(spec: TrialSpec, throughput: Throughput, link: Interconnect) -> JobStep | None:
    """The job's step from rank 0's measured one; None where the rank recorded no collectives
    (stored before they were, or on one GPU)."""
    carried = carried_bytes(throughput)
    if spec.gpus == 1 or carried is None:
        return None
    n = spec.gpus
    share = (n - 1) / n
    wire = {
        kind: nbytes * kind.wire_factor * share / link.busbw for kind, nbytes in carried.items()
    }
    communication = sum(wire.values())
    copies = 0.0
    if link.memory_bandwidth:  # read and write: an all-gather's whole output, a chunk of an RS
        copied = carried[Collective.all_gather] + carried[Collective.reduce_scatter] / n
        copies = 2 * copied / link.memory_bandwidth
    measured = throughput.step_s_median
    compute = max(measured - copies, 0.0)
    largest = throughput.largest_collective_bytes or 0
    largest_kind = Collective.all_reduce if spec.strategy is Strategy.ddp else Collective.all_gather
    unhidden = min(largest * largest_kind.wire_factor * share / link.busbw, communication)
    if spec.strategy is Strategy.ddp:
        window = compute / spec.grad_accum * 2 / 3
        overlap = "DDP's buckets under the last micro batch's backward (2/3 of its compute)"
    else:
        window = compute
        overlap = "FSDP's gathers and reduce-scatters under the step's compute"
    hidden = min(communication - unhidden, window)
    step = compute + communication - hidden
    return JobStep(
        measured_s=measured,
        local_copies_s=copies,
        compute_s=compute,
        communication_s=communication,
        hidden_s=hidden,
        step_s=step,
        samples_per_s=spec.effective_batch_size / step,
        how=f"{link.says}; {overlap}, the largest collective not hidden",
    )


def carried_bytes(throughput: Throughput) -> dict[Collective, int] | None:
    """The bytes of each collective in one step, as recorded; None where none were."""
    if throughput.collectives is None:
        return None
    return {
        Collective.all_reduce: throughput.all_reduce_bytes or 0,
        Collective.all_gather: throughput.all_gather_bytes or 0,
        Collective.reduce_scatter: throughput.reduce_scatter_bytes or 0,
    }


def modelled(
    spec: TrialSpec,
    throughput: Throughput | None,
    gpu: Mapping[str, Any],
    nodes: int,
    device_name: str | None,
) -> JobStep | str | None:
    """The job's step from a rank's trial, or why it cannot be modelled (one line); None on
    one GPU or for a trial with no rate (an OOM)."""
    if spec.gpus == 1 or throughput is None:
        return None
    try:
        link = interconnect(gpu, spec.gpus, nodes, device_name)
    except ConfigError as error:
        return str(error)
    step = job_step(spec, throughput, link)
    return step or "the rank recorded no collectives (measured before advisor recorded them)"


def as_job(result: TrialResult, link: Interconnect) -> TrialResult:
    """A rank's trial as the whole job would run: its rate the modelled job's, its `job` saying
    so (what ranks and fits settings on several GPUs; the stored trial keeps the rank's own).
    Unchanged on one GPU, without a rate, or for a rank that recorded no collectives."""
    job = None if result.throughput is None else job_step(result.spec, result.throughput, link)
    if job is None or result.throughput is None:
        return result
    tokens = result.spec.model.tokens_per_sample
    rate = dataclasses.replace(
        result.throughput,
        samples_per_s=job.samples_per_s,
        tokens_per_s=job.samples_per_s * tokens if tokens else None,
        step_s_median=job.step_s,
    )
    return dataclasses.replace(result, throughput=rate, job=job)


def jobs_of(
    ranks: Sequence[TrialResult], link: Interconnect, strategy: Strategy | None = None
) -> list[TrialResult]:
    """Rank trials as whole jobs over the link (as_job), of the strategy where one is given;
    a rank that recorded no collectives (stored before they were) has no job's rate to rank
    by, and is left out."""
    jobs = [as_job(r, link) for r in ranks if strategy in (None, r.spec.strategy)]
    return [j for j in jobs if j.job is not None]


def as_followed(followed: TrialResult, run: TrialResult) -> TrialResult:
    """The prediction a training run is held to: a rank's trial as its whole job, over the link
    of the GPUs the run ran on (their profile's, within a node); the trial as it is where that
    link has no published figure, or on one GPU."""
    if followed.spec.gpus == 1 or run.environment is None:
        return followed
    try:
        link = interconnect({}, followed.spec.gpus, 1, run.environment.device_name)
    except ConfigError:
        return followed
    return as_job(followed, link)
