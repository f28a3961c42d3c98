"""The setting in accelerate's words: the config file `accelerate launch --config_file` reads
(its keys as the installed accelerate's ClusterConfig has them), with the training script's
lines for what the file cannot say, as comments above it."""

from __future__ import annotations

import importlib.metadata
from typing import Any

from advisor.emit import lines
from advisor.emit.lines import TrainerConfig
from advisor.spec import Device, Precision, TrialSpec

MIXED = {Precision.bf16: "bf16", Precision.fp16: "fp16"}  # the rest: "no" (fp32 weights and math)


def accelerate_config(spec: TrialSpec) -> TrainerConfig:
    import yaml  # (accelerate's own dependency)
    from accelerate.commands.config.config_args import ClusterConfig

    fields = ClusterConfig.__dataclass_fields__
    arguments: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "NO",
        "num_processes": 1,
        "mixed_precision": MIXED.get(spec.precision, "no"),
        "use_cpu": spec.device is Device.cpu,
        "debug": False,
    }
    if spec.compile:  # accelerate compiles the model in prepare()
        inductor = {"dynamo_backend": "INDUCTOR"}
        arguments |= {"dynamo_config": inductor} if "dynamo_config" in fields else inductor
    setup = [
        "# the config file takes accumulation only for DeepSpeed",
        f"accelerator = Accelerator(gradient_accumulation_steps={spec.grad_accum})",
        *lines.benchmark_lines(spec),
        *_tf32_after_accelerator(spec),
        *lines.model_lines(spec, compile_model=False),
        f"optimizer = {lines.optimizer_call(spec)}",
        lines.loader_line(spec),
        "model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)",
        "",
        "",
        "def train_step(batch):",
        f'    """One micro batch; the optimizer steps on every {spec.grad_accum} of them."""'
        if spec.grad_accum > 1
        else '    """One batch; the optimizer steps on each."""',
        "    with accelerator.accumulate(model):",
        "        loss = compute_loss(model, batch)",
        "        accelerator.backward(loss)",
        "        optimizer.step()",
        "        optimizer.zero_grad(set_to_none=True)",
    ]
    script = [
        *lines.environment_lines(spec),
        *lines.imports(spec, "from accelerate import Accelerator"),
        "",
        *setup,
    ]
    library = f"accelerate {importlib.metadata.version('accelerate')}"
    text = [
        *lines.header(spec, library, [lines.MODEL, lines.DATASET, lines.LOSS]),
        "# Save this file as accelerate.yaml and run: accelerate launch --config_file "
        "accelerate.yaml train.py",
        "# where train.py has what the file cannot say:",
        *(f"#   {line}".rstrip() for line in script),
        yaml.safe_dump(arguments, sort_keys=False).rstrip(),
    ]
    return TrainerConfig(
        trainer="accelerate",
        library=library,
        arguments=arguments,
        lines=tuple(script),
        environment=lines.environment(spec),
        text="\n".join(text) + "\n",
    )


def _tf32_after_accelerator(spec: TrialSpec) -> list[str]:
    """TF32 as measured, set after Accelerator(), which turns it on in matmuls for a model it
    compiles in fp32."""
    if lines.sets_tf32(spec.precision):
        return lines.tf32_lines(spec.precision)
    if spec.compile and spec.precision is Precision.default and spec.device is Device.cuda:
        return ["# Accelerator turns TF32 on for a compiled fp32 model; as measured, torch's "
                "default:", *lines.tf32_lines(Precision.default)]  # fmt: skip
    return []
