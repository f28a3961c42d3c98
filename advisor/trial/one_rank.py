"""One rank of a job on several GPUs, measured on one device (issue 28): torch's fake process
group runs rank 0's real step, with its true shards under the real allocator, and moves
nothing. Every collective's buffers are allocated; what the other ranks would send is not
there (an all-reduce leaves the local gradient, an all-gather copies the local shard into each
chunk), so the memory is the rank's and the time is its compute, less any communication.

DDP holds the model whole on each rank and all-reduces gradient buckets; FSDP2's fully_shard,
on each of the model's blocks and then its root, keeps parameters, gradients and optimizer
state in shards of 1/N and gathers a block's parameters as it runs; HSDP is FSDP2 on a 2-D
mesh, sharding within each node's GPUs and all-reducing the shards' gradients across nodes.
"""

# (no `from __future__ import annotations`: DDP reads the hook's annotations as objects)

import contextlib
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from advisor.communication import Collective
from advisor.errors import WorkloadError
from advisor.spec import ShardDtype, Strategy, TrialSpec
from advisor.trial.collectives import Collectives

FAKE = "fake"  # torch's process-group backend that communicates nothing


def join(spec: TrialSpec) -> None:
    """This process as rank 0 of spec.gpus on the fake group: once for a trial (a process of
    its own); again for an estimate of another job size in the same process."""
    if dist.is_initialized():
        if dist.get_backend() != FAKE:  # (a real job's group is never ours to use or end)
            raise WorkloadError(
                f"this process is a rank of a real job of {dist.get_world_size()} GPUs; "
                f"estimate gpus={spec.gpus} in a process of its own"
            )
        if dist.get_world_size() == spec.gpus:
            return
        dist.destroy_process_group()
    if FAKE not in dist.Backend.backend_list:  # (a torch that registers it on this import)
        import torch.testing._internal.distributed.fake_pg  # noqa: F401
    dist.init_process_group(FAKE, rank=0, world_size=spec.gpus, store=dist.HashStore())


def spread(
    model: nn.Module,
    spec: TrialSpec,
    device: torch.device,
    collectives: Collectives,
    mesh: DeviceMesh | None = None,
) -> nn.Module:
    """The model as one rank of spec.gpus holds it under spec.strategy; build the optimizer
    after this (FSDP2 replaces the parameters with their shards). DDP's buckets are told to
    `collectives` (FSDP2's collectives, c10d's ops, it sees as a dispatch mode). FSDP2's mesh
    is made here unless given (on fake tensors it must be made outside the fake mode)."""
    join(spec)
    if spec.strategy is Strategy.ddp:
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index or 0] if device.type == "cuda" else None
        wrapped = DistributedDataParallel(model, device_ids=ids)
        # the fake work's future carries None, on which DDP's backward fails: a hook that
        # hands back the bucket as it is (the local gradient, as the fake all-reduce leaves it)
        wrapped.register_comm_hook(collectives, _bucket_as_it_is)
        return wrapped
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if mesh is None:
        mesh = mesh_of(spec, device)
    blocks = [m for m in model.modules() if type(m).__name__ == spec.model.block]
    if not blocks:  # (the root alone would gather the whole model: not what fsdp= asked)
        name = spec.strategy.value if spec.strategy else "fsdp"
        raise WorkloadError(
            f"strategy={name} shards each {spec.model.block}, and {spec.model.name} has none: "
            "name its block class with block= (or model.block=)"
        )
    policy = MixedPrecisionPolicy(param_dtype=_dtype(spec.param_dtype),
                                  reduce_dtype=_dtype(spec.reduce_dtype))  # fmt: skip
    for block in blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=spec.reshard_after_forward,
                    mp_policy=policy)  # fmt: skip
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


def mesh_of(spec: TrialSpec, device: torch.device) -> DeviceMesh:
    """FSDP2's device mesh for the spec's job, this process its rank 0 on the fake group: 1-D,
    or for HSDP 2-D (FSDP2 replicates over its first dimension, the nodes)."""
    from torch.distributed.device_mesh import init_device_mesh

    join(spec)
    if spec.strategy is Strategy.hsdp:
        shape = (spec.replicas, spec.gpus // spec.replicas)
        return init_device_mesh(device.type, shape, mesh_dim_names=("replicate", "shard"))
    return init_device_mesh(device.type, (spec.gpus,))


def _dtype(given: ShardDtype | None) -> torch.dtype | None:
    return None if given is None else getattr(torch, given.torch_name)


def _bucket_as_it_is(
    collectives: Collectives, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    buffer = bucket.buffer()
    collectives.add(Collective.all_reduce, buffer.numel() * buffer.element_size())
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(buffer)
    return future


@contextlib.contextmanager
def fsdp_storage_told(
    allocated: Callable[[torch.Tensor], object], freeing: Callable[[torch.Tensor], object]
) -> Iterator[None]:
    """FSDP2 frees a block's gathered parameters by resizing their storage to nothing, and
    gathers again into the same storage resized back: no operator a dispatch mode sees, and no
    storage dies. While inside, its two helpers tell `allocated` of a tensor just given its
    storage back and `freeing` of one about to lose it, so that a count of storages (the CPU's,
    the estimate's) follows FSDP2's memory. A torch without the helpers tells nothing."""
    from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group

    alloc = getattr(_fsdp_param, "alloc_storage", None)
    free = getattr(_fsdp_param, "free_storage", None)
    if alloc is None or free is None:
        yield
        return

    def alloc_told(tensor: torch.Tensor) -> None:
        alloc(tensor)
        allocated(tensor)

    def free_told(tensor: torch.Tensor) -> None:
        freeing(tensor)
        free(tensor)

    told = {"alloc_storage": alloc_told, "free_storage": free_told}
    modules = (_fsdp_param, _fsdp_param_group)  # (the group imports alloc_storage by name)
    was = [(m, name, getattr(m, name)) for m in modules for name in told if hasattr(m, name)]
    for module, name, _ in was:
        setattr(module, name, told[name])
    try:
        yield
    finally:
        for module, name, helper in was:
            setattr(module, name, helper)
