"""The setting as plain PyTorch: the lines that set it up, and the train step advisor's trial
timed (trial/training.py: train_step), in the installed torch's names."""

from __future__ import annotations

from advisor.emit import lines
from advisor.emit.lines import TrainerConfig
from advisor.spec import Device, Precision, Strategy, TrialSpec


def torch_config(spec: TrialSpec) -> TrainerConfig:
    import torch

    device = spec.device.value
    dtype = lines.autocast_dtype(spec)
    fp16 = spec.precision is Precision.fp16
    per_step = spec.effective_batch_size
    ranks = spec.gpus > 1
    setup = [
        *(rank_lines(spec) if ranks else []),
        *lines.benchmark_lines(spec),
        *lines.measured_tf32_lines(spec.precision),
        f"BATCH_SIZE = {spec.batch_size}  # samples in each micro batch: your DataLoader's"
        + (" on each rank" if ranks else ""),
        f"GRAD_ACCUM = {spec.grad_accum}  # micro batches in each optimizer step ({per_step} "
        "samples a step" + (f" over {spec.gpus} ranks)" if ranks else ")"),
        *lines.model_lines(spec, compile_model=False),
        *(spread_lines(spec) if ranks else []),
        f"optimizer = {lines.optimizer_call(spec)}",
        *(["model = torch.compile(model)"] if spec.compile else []),
    ]
    if fp16:  # the loss scaled so that small fp16 gradients do not underflow
        named = hasattr(torch.amp, "GradScaler")  # (torch 2.3 on; torch.cuda.amp's before)
        setup.append(
            f'scaler = torch.amp.GradScaler("{device}")'
            if named
            else "scaler = torch.cuda.amp.GradScaler()"
        )
    loss = "compute_loss(model, batch) / GRAD_ACCUM"
    ddp = spec.strategy is Strategy.ddp
    inner = "    " * (2 + ddp)  # (DDP's micro batches inside no_sync)
    step = [
        "",
        "def train_step(micro_batches):",
        '    """One optimizer step over GRAD_ACCUM micro batches of BATCH_SIZE samples."""',
        *(
            [
                "    for i, batch in enumerate(micro_batches):",
                "        # DDP all-reduces the gradients once a step: at its last micro batch",
                "        last = i == len(micro_batches) - 1",
                "        with contextlib.nullcontext() if last else model.no_sync():",
            ]
            if ddp
            else ["    for batch in micro_batches:"]
        ),
        *(
            [
                f'{inner}with torch.autocast("{device}", dtype={dtype}):',
                f"{inner}    loss = {loss}",
            ]
            if dtype
            else [f"{inner}loss = {loss}"]
        ),
        f"{inner}scaler.scale(loss).backward()" if fp16 else f"{inner}loss.backward()",
        *(
            ["    scaler.step(optimizer)", "    scaler.update()"]
            if fp16
            else ["    optimizer.step()"]
        ),
        "    optimizer.zero_grad(set_to_none=True)",
    ]
    library = f"PyTorch {torch.__version__}"
    return TrainerConfig(
        trainer="torch",
        library=library,
        arguments={},
        lines=tuple(setup + step),
        environment=lines.environment(spec),
        text=lines.python_text(
            spec,
            library,
            [
                f"{lines.MODEL}, on its device" + (" (moved to its rank's below)" if ranks else ""),
                lines.LOSS + (", of a batch on the rank's device" if ranks else ""),
                *(launch_lines(spec) if ranks else []),
            ],
            ["import contextlib", "import os"] if ranks else [],
            lines.imports(spec, *(rank_imports(spec) if ranks else [])),
            setup,
            step,
        ),  # fmt: skip
    )


def launch_lines(spec: TrialSpec) -> list[str]:
    """How a job on several GPUs is started: a process a GPU (torchrun's own flags for nodes)."""
    if spec.replicas > 1:  # hsdp: its mesh is nodes x a node's GPUs
        per_node = spec.gpus // spec.replicas
        return [
            f"run it as {spec.gpus} processes, one a GPU, on {spec.replicas} nodes of "
            f"{per_node}: torchrun --nnodes={spec.replicas} --nproc_per_node={per_node} "
            "--rdzv_endpoint=HOST:PORT train.py on each"
        ]
    return [
        f"run it as {spec.gpus} processes, one a GPU: "
        f"torchrun --nproc_per_node={spec.gpus} train.py",
        "(across nodes: --nnodes, each node's --nproc_per_node, and a --rdzv_endpoint)",
    ]


def rank_imports(spec: TrialSpec) -> list[str]:
    policy = spec.param_dtype is not None or spec.reduce_dtype is not None
    spread = (
        "from torch.nn.parallel import DistributedDataParallel"
        if spec.strategy is Strategy.ddp
        else f"from torch.distributed.fsdp import {'MixedPrecisionPolicy, ' * policy}fully_shard"
    )
    mesh = ["from torch.distributed.device_mesh import init_device_mesh"] * (
        spec.strategy is Strategy.hsdp
    )
    return ["import torch.distributed as dist", *mesh, spread]


def rank_lines(spec: TrialSpec) -> list[str]:
    """This process as one rank of the job, on its own device."""
    cuda = spec.device is Device.cuda
    backend = "nccl" if cuda else "gloo"
    return [
        f'dist.init_process_group("{backend}")  # torchrun gives RANK, WORLD_SIZE, MASTER_ADDR',
        'local_rank = int(os.environ["LOCAL_RANK"])',
        *(
            ["torch.cuda.set_device(local_rank)", 'device = torch.device("cuda", local_rank)']
            if cuda
            else ['device = torch.device("cpu")']
        ),
        "model = model.to(device)",
        "# each rank its own samples: DataLoader(train_dataset, batch_size=BATCH_SIZE,",
        "#     sampler=torch.utils.data.DistributedSampler(train_dataset)), batches on device",
    ]


def spread_lines(spec: TrialSpec) -> list[str]:
    """The model spread over the ranks as advisor's trial spread it (trial/one_rank.py)."""
    if spec.strategy is Strategy.ddp:
        ids = "device_ids=[local_rank]" if spec.device is Device.cuda else ""
        return [f"model = DistributedDataParallel(model{', ' + ids if ids else ''})"]
    block = lines.python(spec.model.block)
    dtypes = {"param_dtype": spec.param_dtype, "reduce_dtype": spec.reduce_dtype}
    policy = ", ".join(f"{k}=torch.{v.torch_name}" for k, v in dtypes.items() if v is not None)
    policy_lines = [f"policy = MixedPrecisionPolicy({policy})"] if policy else []
    given = ", mp_policy=policy" if policy else ""
    mesh_lines = []
    if spec.strategy is Strategy.hsdp:  # sharded within each node, replicated across them
        device = spec.device.value
        shard = spec.gpus // spec.replicas
        mesh_lines = [
            f'mesh = init_device_mesh("{device}", ({spec.replicas}, {shard}), '
            'mesh_dim_names=("replicate", "shard"))'
        ]
        given = ", mesh=mesh" + given
    reshard = "" if spec.reshard_after_forward else ", reshard_after_forward=False"
    return [
        "# each block sharded over the ranks, then the root (FSDP2)",
        *mesh_lines,
        *policy_lines,
        f"blocks = [m for m in model.modules() if type(m).__name__ == {block}]",
        "for block in blocks:",
        f"    fully_shard(block{reshard}{given})",
        f"fully_shard(model{given})",
    ]
