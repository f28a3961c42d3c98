"""A job's step on several GPUs, from one rank's: the rank's compute as measured on the fake
process group, plus its collectives as the interconnect would carry them (issue 28).

What is measured: the rank's step, and the bytes each collective carried in it (recorded as it
ran, trial/collectives.py). What is modelled, and how:
- **time on the wire**: NCCL's ring figures, as nccl-tests report bus bandwidth: an
  all-reduce of S bytes over N GPUs moves 2(N-1)/N x S over each GPU's link, an all-gather or
  a reduce-scatter (S their full, unsharded buffer) (N-1)/N x S; each at the link's bus
  bandwidth (interconnect.py: the GPU profile's published figure, or the user's nccl-tests
  number). HSDP gathers and scatters within a node's GPUs and all-reduces the shards between
  nodes. Latency is not modelled: it matters only for collectives of a few MB or less.
- **the fake group's own copies**: its all-gather copies the local shard into each chunk of
  the output and its reduce-scatter keeps the local chunk; the measured step paid for them at
  the memory bandwidth of the GPU the rank ran on (read and write: its profile's), so they are
  taken out of the compute (not on a GPU without a profile, nor on the CPU).
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
from advisor.interconnect import Interconnect, interconnect, memory_bandwidth, resolved
from advisor.result import JobStep, Kind, Throughput, TrialResult
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


def job_step(
    spec: TrialSpec, throughput: Throughput, link: Interconnect, copied_at: float | None = None
) -> JobStep | None:
    """The job's step from rank 0's measured one; None where the rank recorded no collectives
    (stored before they were, or on one GPU). copied_at: the memory bandwidth (bytes/s) of the
    GPU the rank ran on, at which the fake group's copies are taken out (None: not taken)."""
    carried = carried_bytes(throughput)
    if spec.gpus == 1 or carried is None:
        return None
    ring = _rings(spec, link)
    wire = {kind: nbytes * kind.wire_factor * ring[kind][0] / ring[kind][1]
            for kind, nbytes in carried.items()}  # fmt: skip
    communication = sum(wire.values())
    copies = 0.0
    if copied_at:  # read and written: a gather's whole output, the chunk a scatter keeps
        shard_group = spec.gpus // spec.replicas
        copied = carried[Collective.all_gather] + carried[Collective.reduce_scatter] / shard_group
        copies = 2 * copied / copied_at
    measured = throughput.step_s_median
    compute = max(measured - copies, 0.0)
    first = Collective.all_reduce if spec.strategy is Strategy.ddp else Collective.all_gather
    largest = (throughput.largest_collective_bytes or 0) * first.wire_factor
    unhidden = min(largest * ring[first][0] / ring[first][1], communication)
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
        how=f"{_links(spec, link)}; {overlap}, the largest collective not hidden"
        + (
            ""
            if copied_at
            else "; the fake group's copies not taken out (the rank's device "
            "has no GPU profile to price them at)"
        ),
        nodes=link.nodes,
    )


def _links(spec: TrialSpec, link: Interconnect) -> str:
    """The link in words: HSDP's two, or the one every collective is held to."""
    if spec.strategy is not Strategy.hsdp or not (link.within and link.between):
        return link.says
    return (
        f"gathers and scatters within a node at {link.within / 1e9:g} GB/s, the shards' "
        f"all-reduce {link.says}"
    )


def _rings(spec: TrialSpec, link: Interconnect) -> dict[Collective, tuple[float, float]]:
    """Each collective's ring: the share (N-1)/N of its group of N, and the bus bandwidth it
    runs at. DDP and FSDP: every GPU of the job, held to the slowest link; HSDP: gathers and
    scatters within a node, the all-reduce of the shards between nodes."""
    n, slowest = spec.gpus, link.slowest
    if spec.strategy is not Strategy.hsdp:
        return {kind: ((n - 1) / n, slowest) for kind in Collective}
    shard, replicas = n // spec.replicas, spec.replicas
    inside = ((shard - 1) / shard, link.within or slowest)
    across = ((replicas - 1) / replicas, link.between or slowest)
    return {Collective.all_gather: inside, Collective.reduce_scatter: inside,
            Collective.all_reduce: across}  # fmt: skip


def carried_bytes(throughput: Throughput) -> dict[Collective, int] | None:
    """The bytes of each collective in one step, as recorded; None where none were."""
    if throughput.collectives is None:
        return None
    return {
        Collective.all_reduce: throughput.all_reduce_bytes or 0,
        Collective.all_gather: throughput.all_gather_bytes or 0,
        Collective.reduce_scatter: throughput.reduce_scatter_bytes or 0,
    }


def modelled(result: TrialResult, gpu: Mapping[str, Any], nodes: int) -> JobStep | str | None:
    """The job's step from a rank's trial over the gpu node's link, or why it cannot be
    modelled (the one line a ConfigError would say: `advisor run` stores the rank either way);
    None on one GPU or for a trial with no rate (an OOM)."""
    if result.spec.gpus == 1 or result.throughput is None:
        return None
    ran_on = result.environment.device_name if result.environment else None
    try:
        link = interconnect(gpu, result.spec.gpus, nodes, ran_on)
    except ConfigError as error:
        return str(error)
    step = job_step(result.spec, result.throughput, link, memory_bandwidth(ran_on))
    return step or "the rank recorded no collectives (measured before advisor recorded them)"


def as_job(result: TrialResult, link: Interconnect) -> TrialResult:
    """A rank's trial as the whole job would run: its rate the modelled job's, its `job` saying
    so (what ranks and fits settings on several GPUs; the stored trial keeps the rank's own).
    Unchanged on one GPU, without a rate, or for a rank that recorded no collectives."""
    if result.throughput is None:
        return result
    ran_on = result.environment.device_name if result.environment else None
    job = job_step(result.spec, result.throughput, link, memory_bandwidth(ran_on))
    if job is None:
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
    of the GPUs the run ran on (their profile's, within a node)."""
    ran_on = run.environment.device_name if run.environment else None
    return as_job_over(followed, {}, 1, ran_on)


def stored_job(result: TrialResult) -> JobStep | str | None:
    """A stored rank's job step as `show` and the dashboard print it: over the published link
    of the GPU the rank ran on, on as many nodes as HSDP's replicas, or else the fewest that
    hold its GPUs (the stored spec keeps no nodes= for DDP and FSDP); or why it cannot be
    modelled. None on one GPU, for a rank that did not run, and for a training run."""
    if result.kind is not Kind.measured or result.spec.gpus == 1 or result.throughput is None:
        return None
    ran_on = result.environment.device_name if result.environment else None
    node = resolved({}, ran_on)
    if node.get("intra_node_busbw") is None:
        return f"{ran_on or 'the device it ran on'} has no published bus bandwidth to model it over"
    per_node = int(node.get("gpus_per_node") or result.spec.gpus)
    nodes = result.spec.replicas if result.spec.replicas > 1 else -(-result.spec.gpus // per_node)
    return modelled(result, node, nodes)


def as_job_over(
    result: TrialResult, gpu: Mapping[str, Any], nodes: int, device_name: str | None = None
) -> TrialResult:
    """A rank's trial as its whole job over the gpu node's link (as_job); the trial as it is
    on one GPU, or where the link has no figure (gpu=auto: the profile of `device_name`)."""
    if result.spec.gpus == 1:
        return result
    try:
        link = interconnect(gpu, result.spec.gpus, nodes, device_name)
    except ConfigError:
        return result
    return as_job(result, link)
