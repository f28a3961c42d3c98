"""The setting in transformers' words: TrainingArguments' keyword arguments, named as the installed
transformers names them (its signature is read, not a version's names assumed), and the lines
for what they cannot say."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import inspect
from typing import Any

from advisor.emit import lines
from advisor.emit.lines import TrainerConfig
from advisor.spec import Checkpointing, Device, Precision, TrialSpec

# TrainingArguments' own defaults for Adam's constants: said only where the spec's differ
ADAM_DEFAULTS = {"adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-8}
SGD_ARGS = ("momentum", "dampening", "nesterov")  # what its optim_args carry to torch's SGD
NAN_FILTER_NOTE = [  # (said above the arguments; issue 29's gpt2 runs on the H200)
    "# logging_nan_inf_filter=False: on (its default), the Trainer asks the GPU after each micro",
    "# batch whether the loss is nan or inf, and waits for the answer. Off, a nan or inf loss",
    "# makes the logged training loss nan from then on, and evaluation's loss counts such",
    "# batches; the training itself is the same.",
]


def hf_config(spec: TrialSpec) -> TrainerConfig:
    from transformers import TrainingArguments

    taken = inspect.signature(TrainingArguments).parameters
    arguments: dict[str, Any] = {
        "per_device_train_batch_size": spec.batch_size,
        "gradient_accumulation_steps": spec.grad_accum,
    }
    before = lines.benchmark_lines(spec)
    after: list[str] = []
    if spec.precision is Precision.bf16:
        arguments["bf16"] = True
    elif spec.precision is Precision.fp16:
        arguments["fp16"] = True
    elif lines.sets_tf32(spec.precision) and "tf32" in taken:
        arguments["tf32"] = spec.precision is Precision.tf32
    elif lines.sets_tf32(spec.precision):
        before += lines.tf32_lines(spec.precision)
    optim = optim_arguments(spec)
    arguments |= optim or {}
    # transformers' models checkpoint their own blocks; another model's are wrapped by hand
    checkpointing = _checkpointing_argument(taken) if lines.uses_transformers(spec) else None
    by_hand = spec
    if spec.checkpointing is Checkpointing.blocks and checkpointing is not None:
        arguments[checkpointing] = True
        if f"{checkpointing}_kwargs" in taken:  # (non-reentrant, as the trial's)
            arguments[f"{checkpointing}_kwargs"] = {"use_reentrant": False}
        by_hand = dataclasses.replace(spec, checkpointing=Checkpointing.none)
    compiled = spec.compile and "torch_compile" in taken
    if compiled:
        arguments["torch_compile"] = True
        if spec.device is Device.cuda and spec.precision in (Precision.default, Precision.bf16):
            after += [
                "# TrainingArguments turns TF32 on for a compiled model; as measured, torch's "
                "default:",
                *lines.tf32_lines(Precision.default),
            ]
    if spec.device is Device.cpu:
        arguments["use_cpu" if "use_cpu" in taken else "no_cuda"] = True
    said: list[str] = []
    if spec.device is Device.cuda and "logging_nan_inf_filter" in taken:  # (a wait a step)
        arguments["logging_nan_inf_filter"] = False
        said = NAN_FILTER_NOTE
    before += lines.model_lines(by_hand, compile_model=not compiled)
    if spec.channels_last:
        before += _contiguous_saves()
    trainer = "trainer = Trainer(model=model, args=args, train_dataset=train_dataset)"
    if optim is None:  # an optimizer TrainingArguments' optim cannot name: given to Trainer
        before.append(f"optimizer = {lines.optimizer_call(spec)}")
        trainer = trainer[:-1] + ", optimizers=(optimizer, None))"
    library = f"transformers {importlib.metadata.version('transformers')}"
    imports = lines.imports(
        spec,
        "from transformers import Trainer, TrainingArguments",
        checkpointing=by_hand.checkpointing is Checkpointing.blocks,
        optimizer=optim is None,
    )
    return TrainerConfig(
        trainer="hf",
        library=library,
        arguments=arguments,
        lines=tuple(before + after),
        environment=lines.environment(spec),
        text=lines.python_text(
            spec,
            library,
            [lines.MODEL, lines.DATASET],
            imports,
            before,
            [*said, *lines.call("args = TrainingArguments", arguments), *after, trainer],
        ),
    )


def optim_arguments(spec: TrialSpec) -> dict[str, Any] | None:
    """The optimizer as TrainingArguments' optim and its settings; None where none of its
    names is this optimizer (another class, an argument it does not pass on)."""
    import torch
    from transformers.training_args import OptimizerNames

    names = {name.value for name in OptimizerNames}
    target, given = lines.optimizer_arguments(spec)
    classes = {"torch.optim.AdamW": torch.optim.AdamW, "torch.optim.Adam": torch.optim.Adam,
               "torch.optim.SGD": torch.optim.SGD}  # fmt: skip
    if target not in classes:
        return None
    defaults = {
        name: p.default
        for name, p in inspect.signature(classes[target]).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    settings = defaults | given
    # foreach: torch's default on CUDA, which the Trainer leaves as it is
    if settings.pop("foreach", None) and spec.device is not Device.cuda:
        return None
    fused = bool(settings.pop("fused", None))
    arguments: dict[str, Any] = {
        "learning_rate": settings.pop("lr"),
        "weight_decay": settings.pop("weight_decay"),
    }
    if target == "torch.optim.Adam" and arguments["weight_decay"]:  # L2, not AdamW's decay
        return None
    if target == "torch.optim.SGD":
        if fused:
            return None
        sgd = [f"{k}={settings.pop(k)}" for k in SGD_ARGS if settings.get(k)]
        arguments = {"optim": "sgd", **arguments} | ({"optim_args": ",".join(sgd)} if sgd else {})
    else:
        beta1, beta2 = settings.pop("betas")
        adam = {"adam_beta1": beta1, "adam_beta2": beta2, "adam_epsilon": settings.pop("eps")}
        optim = "adamw_torch_fused" if fused else "adamw_torch"
        arguments = {"optim": optim, **arguments}
        arguments |= {k: v for k, v in adam.items() if v != ADAM_DEFAULTS[k]}
    if arguments["optim"] not in names or any(
        value != defaults.get(key) for key, value in settings.items()
    ):
        return None
    return arguments


def _checkpointing_argument(taken: Any) -> str | None:
    """activation_checkpointing (transformers 5.x), gradient_checkpointing before it."""
    names = ("activation_checkpointing", "gradient_checkpointing")
    return next((name for name in names if name in taken), None)


def _contiguous_saves() -> list[str]:
    """The Trainer saves with safetensors, which refuses a tensor that is not contiguous: an
    NHWC model's weights are saved as contiguous copies."""
    import torch

    if not hasattr(torch.nn.Module, "register_state_dict_post_hook"):  # (torch before 2.3)
        return ["# the Trainer's safetensors refuses NHWC weights: save contiguous copies"]
    return [
        "model.register_state_dict_post_hook(  # the Trainer's safetensors refuses NHWC weights",
        "    lambda module, state, prefix, meta: state.update({k: v.contiguous() for k, v in "
        "state.items()})",
        ")",
    ]
