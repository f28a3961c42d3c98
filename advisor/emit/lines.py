"""What every trainer's configuration shares: TrainerConfig, and the PyTorch lines that say what
a trainer's own arguments cannot. Each line does what advisor's trial did for the setting
(trial/training.py, trial/worker.py, trial/runner.py), so the user's run is the one measured."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from advisor.spec import Checkpointing, Device, Precision, TrialSpec

ALLOCATOR = "PYTORCH_CUDA_ALLOC_CONF"  # read when CUDA's allocator starts (trial/runner.py)

# The names the emitted Python uses for what only the user's script has.
MODEL = "model: your model (an nn.Module)"
DATASET = "train_dataset: your training dataset"
LOSS = "compute_loss(model, batch): your loss of one micro batch"


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
    """A recommended setting in one trainer's words, for the library as installed here."""

    trainer: str  # hf, lightning, accelerate, torch
    library: str  # what the names follow: "transformers 5.24.0"
    arguments: dict[str, Any]  # the trainer's own: TrainingArguments(**), Trainer(**), the
    # accelerate config file's keys; {} for plain PyTorch
    lines: tuple[str, ...]  # Python for what the arguments cannot say (for accelerate: the
    # training script's)
    environment: dict[str, str]  # set before the process first uses CUDA
    text: str  # the whole, ready to save: Python, or for accelerate its config file (YAML)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def environment(spec: TrialSpec) -> dict[str, str]:
    return {ALLOCATOR: "expandable_segments:True"} if spec.expandable_segments else {}


def environment_lines(spec: TrialSpec) -> list[str]:
    """The allocator's setting from inside Python: it counts if set before CUDA's first
    allocation (in the shell: export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)."""
    settings = environment(spec)
    if not settings:
        return []
    said = [f"os.environ[{python(k)}] = {python(v)}  # before CUDA's first allocation"
            for k, v in settings.items()]  # fmt: skip
    return ["import os", "", *said, ""]


def benchmark_lines(spec: TrialSpec) -> list[str]:
    """cuDNN picks its fastest convolutions, as advisor's trials on CUDA do (trial/worker.py)."""
    return ["torch.backends.cudnn.benchmark = True"] if spec.device is Device.cuda else []


def tf32_lines(precision: Precision) -> list[str]:
    """TF32 as the trial had it (trial/training.py): on for tf32, off for fp32 (strict), torch's
    default otherwise (in convolutions, not in matmuls). For the default these lines are only
    needed where a trainer has changed it. torch 2.9's two APIs for it must not be left mixed:
    the generic fp32_precision that transformers sets, beside a matmul or cuDNN flag set
    otherwise, makes torch.get_float32_matmul_precision() (which Lightning's Trainer calls) or
    torch.backends.cudnn.allow_tf32 raise. The generic one is set first, then the two that
    every torch reads alike (tests/test_emit.py tries each order of the two APIs)."""
    import torch

    matmul, conv = precision is Precision.tf32, precision.cudnn_tf32
    generic = ['torch.backends.fp32_precision = "ieee"  # (torch 2.9\'s: each below decides)']
    return [
        *(generic if hasattr(torch.backends, "fp32_precision") else []),
        f'torch.set_float32_matmul_precision("{"high" if matmul else "highest"}")',
        f"torch.backends.cudnn.allow_tf32 = {conv}",
    ]


def measured_tf32_lines(precision: Precision) -> list[str]:
    """The TF32 lines where the setting sets TF32 (tf32 on, fp32 off); none for the rest."""
    return tf32_lines(precision) if sets_tf32(precision) else []


def loader_line(spec: TrialSpec, why: str = "") -> str:
    """The DataLoader of the user's dataset, at the setting's micro batch."""
    said = f"  # {why}" if why else ""
    return (
        f"train_loader = torch.utils.data.DataLoader(train_dataset, batch_size={spec.batch_size})"
        + said
    )


def sets_tf32(precision: Precision) -> bool:
    return precision in (Precision.tf32, Precision.fp32)


def model_lines(spec: TrialSpec, *, compile_model: bool = True) -> list[str]:
    """What the trial did to the model, in its order: NHWC, each block recomputed in backward,
    compiled (where the trainer does not compile it itself)."""
    lines = []
    if spec.channels_last:
        lines += [
            "model = model.to(memory_format=torch.channels_last)",
            "# (advisor's trial made each image batch NHWC too: "
            "x.contiguous(memory_format=torch.channels_last))",
        ]
    if spec.checkpointing is Checkpointing.blocks:
        lines += checkpointing_lines(spec)
    if spec.compile and compile_model:
        lines.append("model = torch.compile(model)")
    return lines


def checkpointing_lines(spec: TrialSpec) -> list[str]:
    """Each module of the workload's block class recomputed in backward, as the trial did: by
    torch's checkpoint, given a copy of each list the block is called with
    (trial/training.py's checkpoint_on_copies, written out)."""
    lines = [
        "",
        "",
        "def checkpoint_on_copies(block, *args, **kwargs):",
        "    # a list the caller appends to after the call (DenseNet's) is recomputed as it was",
        "    args = [list(a) if isinstance(a, list) else a for a in args]",
        "    return checkpoint(block, *args, use_reentrant=False, **kwargs)",
        "",
        "",
        "apply_activation_checkpointing(  # recompute each block in backward",
        "    model,",
        "    checkpoint_wrapper_fn=functools.partial(",
        "        checkpoint_wrapper, checkpoint_fn=checkpoint_on_copies",
        "    ),",
        f"    check_fn=lambda module: type(module).__name__ == {python(spec.model.block)},",
        ")",
    ]
    if uses_transformers(spec):  # no KV cache while blocks are recomputed (trial/training.py)
        lines += ['if hasattr(model, "config"):', "    model.config.use_cache = False"]
    return lines


def imports(
    spec: TrialSpec, *more: str, checkpointing: bool = True, optimizer: bool = True
) -> list[str]:
    """torch, the trainer's own (`more`), and what the lines for the setting use (python_text
    drops `import torch` where no line uses it)."""
    found = ["import torch", *more]
    if checkpointing and spec.checkpointing is Checkpointing.blocks:
        found.insert(0, "import functools")
        found += [
            "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (",
            "    apply_activation_checkpointing,",
            "    checkpoint_wrapper,",
            ")",
            "from torch.utils.checkpoint import checkpoint",
        ]
    module = optimizer_arguments(spec)[0].rpartition(".")[0]
    if optimizer and module and module.split(".")[0] != "torch":
        found.insert(0, f"import {module}")
    return found


def uses_transformers(spec: TrialSpec) -> bool:
    """The workload builds its model with transformers (its versions name it)."""
    return any(name == "transformers" for name, _ in spec.model.versions)


def optimizer_arguments(spec: TrialSpec) -> tuple[str, dict[str, Any]]:
    """The optimizer's class (dotted) and its keyword arguments, from the spec's builder."""
    builder = json.loads(spec.optimizer.builder)
    target = str(builder.pop("_target_"))
    builder.pop("_partial_", None)
    return target, builder


def optimizer_call(spec: TrialSpec, params: str = "model.parameters()") -> str:
    """`torch.optim.AdamW(model.parameters(), lr=..., fused=True)`: the spec's optimizer."""
    target, arguments = optimizer_arguments(spec)
    given = "".join(f", {key}={python(value)}" for key, value in sorted(arguments.items()))
    return f"{target}({params}{given})"


def autocast_dtype(spec: TrialSpec) -> str | None:
    return {Precision.bf16: "torch.bfloat16", Precision.fp16: "torch.float16"}.get(spec.precision)


def header(spec: TrialSpec, library: str, expects: list[str]) -> list[str]:
    """What the configuration is for, and the names it expects of the user's script."""
    return [
        f"# advisor's recommended setting for {spec.model.name} on {spec.device.value}, in "
        f"{library}'s words:",
        f"# {spec.batch_size} samples a micro batch, {spec.grad_accum} micro "
        f"batch{'es' if spec.grad_accum > 1 else ''} a step "
        f"({spec.effective_batch_size} samples)",
        *(f"# {line}" for line in expects),
    ]


def python_text(spec: TrialSpec, library: str, expects: list[str], *parts: list[str]) -> str:
    """Python the user saves: the header, the allocator's environment variable, then the
    parts (imports, the setup, the trainer), a blank line between."""
    said = [*header(spec, library, expects), *environment_lines(spec)]
    code = [line for part in parts for line in part if not line.startswith(("import ", "from "))]
    unused = [] if any("torch." in line for line in code) else ["import torch"]
    for part in parts:
        kept = [line for line in part if line not in unused]  # (TrainingArguments need none)
        said += [*kept, ""] if kept else []
    return "\n".join(said).rstrip("\n") + "\n"


def python(value: Any) -> str:
    """A value as Python source: strings in double quotes, lists as tuples (betas)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{python(k)}: {python(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "(" + ", ".join(python(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def call(name: str, arguments: dict[str, Any]) -> list[str]:
    """`name(` and one keyword argument a line, as a formatter would write it."""
    if not arguments:
        return [f"{name}()"]
    return [f"{name}(", *(f"    {k}={python(v)}," for k, v in arguments.items()), ")"]
