"""The setting as plain PyTorch: the lines that set it up, and the train step advisor's trial
timed (trial/training.py: train_step), in the installed torch's names."""

from __future__ import annotations

from advisor.emit import lines
from advisor.emit.lines import TrainerConfig
from advisor.spec import Precision, TrialSpec


def torch_config(spec: TrialSpec) -> TrainerConfig:
    import torch

    device = spec.device.value
    dtype = lines.autocast_dtype(spec)
    fp16 = spec.precision is Precision.fp16
    per_step = spec.effective_batch_size
    setup = [
        *lines.benchmark_lines(spec),
        *lines.measured_tf32_lines(spec.precision),
        f"BATCH_SIZE = {spec.batch_size}  # samples in each micro batch: your DataLoader's",
        f"GRAD_ACCUM = {spec.grad_accum}  # micro batches in each optimizer step ({per_step} "
        "samples a step)",
        *lines.model_lines(spec, compile_model=False),
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
    step = [
        "",
        "def train_step(micro_batches):",
        '    """One optimizer step over GRAD_ACCUM micro batches of BATCH_SIZE samples."""',
        "    for batch in micro_batches:",
        *(
            [
                f'        with torch.autocast("{device}", dtype={dtype}):',
                f"            loss = {loss}",
            ]
            if dtype
            else [f"        loss = {loss}"]
        ),
        "        scaler.scale(loss).backward()" if fp16 else "        loss.backward()",
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
            [f"{lines.MODEL}, on its device", lines.LOSS],
            lines.imports(spec),
            setup,
            step,
        ),  # fmt: skip
    )
