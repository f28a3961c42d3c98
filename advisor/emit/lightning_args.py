"""The setting in Lightning's words: Trainer's keyword arguments, its precision named as the
installed Lightning names it ("bf16-mixed" from 2.0, "bf16" before), and the lines for what
Trainer cannot say: the batch size (the DataLoader's), the optimizer (the LightningModule's),
TF32, NHWC, checkpointing and compiling."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import typing
from typing import Any

from advisor import extras
from advisor.emit import lines
from advisor.emit.lines import TrainerConfig
from advisor.spec import Device, Precision, TrialSpec

# each precision's names, newest first: the first the installed Trainer takes is used
PRECISIONS: dict[Precision, tuple[str | int, ...]] = {
    Precision.bf16: ("bf16-mixed", "bf16"),
    Precision.fp16: ("16-mixed", 16),
}
FP32 = ("32-true", 32)  # default, fp32 and tf32: fp32 weights and math (TF32 by the lines)


# Lightning's names: from 2.0, and the older one
PACKAGES = ("lightning", "pytorch_lightning")


def package() -> str:
    """lightning (2.0 on), or the older pytorch_lightning where only it is installed."""
    return next((name for name in PACKAGES if extras.installed(name)), PACKAGES[-1])


def lightning_config(spec: TrialSpec) -> TrainerConfig:
    name = package()
    module = "lightning.pytorch" if name == "lightning" else name
    trainer_class = importlib.import_module(module).Trainer
    taken = inspect.signature(trainer_class).parameters
    precisions = _literals(typing.get_type_hints(trainer_class.__init__).get("precision"))
    wanted = PRECISIONS.get(spec.precision, FP32)
    arguments: dict[str, Any] = {
        "accelerator": spec.device.value,
        "precision": next((p for p in wanted if p in precisions), wanted[0]),
        "accumulate_grad_batches": spec.grad_accum,
    }
    before: list[str] = []
    if spec.device is Device.cuda:
        if "benchmark" in taken:
            arguments["benchmark"] = True
        else:
            before += lines.benchmark_lines(spec)
    before += lines.measured_tf32_lines(spec.precision)
    before += lines.model_lines(spec)
    before += [
        lines.loader_line(spec, "Trainer takes no batch size"),
        "",
        "",
        "def configure_optimizers(self):  # your LightningModule's: Trainer takes no optimizer",
        f"    return {lines.optimizer_call(spec, 'self.parameters()')}",
        "",
    ]
    library = f"Lightning {importlib.metadata.version(name)}"
    trainer = [
        *lines.call("trainer = Trainer", arguments),
        "# trainer.fit(your_lightning_module, train_loader)",
    ]
    return TrainerConfig(
        trainer="lightning",
        library=library,
        arguments=arguments,
        lines=tuple(before),
        environment=lines.environment(spec),
        text=lines.python_text(
            spec,
            library,
            [f"{lines.MODEL}, before your LightningModule takes it", lines.DATASET],
            lines.imports(spec, f"from {module} import Trainer"),
            before,
            trainer,
        ),
    )


def _literals(annotation: Any) -> set[Any]:
    """The values a Literal[...] annotation allows, through Unions and Optionals."""
    if annotation is None:
        return set()
    if typing.get_origin(annotation) is typing.Literal:
        return set(typing.get_args(annotation))
    return set().union(*(_literals(a) for a in typing.get_args(annotation)))
