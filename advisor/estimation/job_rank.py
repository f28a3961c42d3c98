"""One rank of a job on several GPUs, on fake tensors (issue 28): the estimate's side of
trial/one_rank.py. FSDP2's fully_shard runs on the fake tensors as it does in a trial, over
torch's fake process group, so the step holds the rank's true shards and gathers each block's
parameters as it goes. DDP cannot be built on fake tensors (its constructor checks the
parameters' data across ranks), and what it adds to one GPU's step is known: a gradient
bucket per group of parameters it forms, a copy of their gradients, allocated when it is
built. On the H200 a DDP rank held its one-GPU step plus exactly those buckets
(experiments/2026-12-05-h200-ranks)."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from advisor.spec import TrialSpec
from advisor.trial import one_rank
from advisor.trial.collectives import Collectives

DDP_BUCKET_BYTES = 25 * 2**20  # DistributedDataParallel's bucket_cap_mb, its default


def mesh(spec: TrialSpec) -> DeviceMesh | None:
    """FSDP2's mesh for the job, made before the fake mode (a mesh made inside holds fake
    tensors, which the fake group cannot take); None for one GPU or DDP."""
    if spec.strategy is None or not spec.strategy.shards:
        return None
    return one_rank.mesh_of(spec, torch.device("cpu"))


def as_one_rank(
    model: nn.Module, spec: TrialSpec, rank_mesh: DeviceMesh | None
) -> tuple[nn.Module, list[torch.Tensor]]:
    """The model as one rank holds it, and DDP's gradient buckets (none for FSDP2), made now
    under the fake mode, so that they are counted and stay alive through the step."""
    if spec.strategy is not None and spec.strategy.shards:
        return one_rank.spread(model, spec, torch.device("cpu"), Collectives(), rank_mesh), []
    trained: list[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
    groups, _ = dist._compute_bucket_assignment_by_size(  # DDP's own grouping
        trained, [dist._DEFAULT_FIRST_BUCKET_BYTES, DDP_BUCKET_BYTES]
    )
    buckets = [
        torch.empty(sum(trained[i].numel() for i in group), dtype=trained[group[0]].dtype)
        for group in groups
    ]
    return model, buckets
