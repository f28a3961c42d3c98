"""Hydra configuration: the schema of conf/config.yaml, composing it, and a TrialSpec from it."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from advisor.gpus import CONF_DIR, local_gpu
from advisor.spec import (
    Checkpointing,
    Device,
    InputKind,
    InputSpec,
    Loss,
    ModelSpec,
    OptimizerSpec,
    Precision,
    SpecError,
    TrialSpec,
)

# Keys of a model or optimizer node that describe it; the rest are the builder's arguments.
MODEL_META_KEYS = ("name", "family", "input", "loss", "block", "seq_len")
OPTIMIZER_META_KEYS = ("name", "algorithm")


@dataclasses.dataclass
class MeasureConfig:
    warmup_steps: int = 3  # untimed steps first (cuDNN autotuning, compilation); at least 3
    min_timed_steps: int = 10  # timed steps before the spread is looked at
    max_timed_steps: int = 200  # stop timing here even if the spread is still wide
    max_timed_s: float = 30.0  # ... or after this many seconds of timed steps
    target_spread: float = 0.02  # stop once IQR / median of step times is below this


@dataclasses.dataclass
class SpaceConfig:
    """What a sweep searches. An axis with one value is fixed; the command's own setting (e.g.
    precision=bf16) does not narrow the space: give the axis one value (space.precision=[bf16])."""

    batch_sizes: list[int] = dataclasses.field(
        default_factory=lambda: [2**i for i in range(11)]  # micro batches 1 to 1024
    )
    grad_accum: list[int] = dataclasses.field(default_factory=lambda: [1, 2, 4, 8])
    checkpointing: list[Checkpointing] = dataclasses.field(
        default_factory=lambda: list(Checkpointing)
    )
    precision: list[Precision] = dataclasses.field(default_factory=lambda: list(Precision))
    # None: the implementations of the chosen optimizer's algorithm (adamw: adamw, adamw_fused);
    # name others to open the axis to other algorithms.
    optimizers: list[str] | None = None
    channels_last: list[bool] = dataclasses.field(default_factory=lambda: [False, True])
    compile: list[bool] = dataclasses.field(default_factory=lambda: [False, True])
    expandable_segments: list[bool] = dataclasses.field(default_factory=lambda: [False, True])


@dataclasses.dataclass
class Config:
    model: Any = None  # conf/model/NAME.yaml: _target_ and its arguments, input, loss, block
    optimizer: Any = None  # conf/optimizer/NAME.yaml: a partial of a torch.optim class
    gpu: Any = None  # conf/gpu/NAME.yaml: the target GPU's profile; auto is the local one
    device: str = "auto"  # cuda, cpu, or auto: cuda where NVML finds a GPU
    batch_size: int = 32  # micro batch size
    grad_accum: int = 1  # micro batches per optimizer step
    checkpointing: Checkpointing = Checkpointing.none  # none | blocks
    precision: Precision = Precision.fp32  # fp32 | tf32 | bf16 | fp16
    channels_last: bool = False  # NHWC memory format (image models)
    compile: bool = False  # torch.compile the model
    expandable_segments: bool = False  # the caching allocator's expandable segments
    memory_cap: int | None = None  # bytes the trial may use on the device (None: all)
    timeout_s: float = 900.0  # a trial still running after this is killed: status timeout
    db_url: str | None = None  # SQLAlchemy URL of the results database (or ADVISOR_DB_URL)
    plot: str | None = None  # also draw the memory breakdown into this PNG file
    measure: MeasureConfig = dataclasses.field(default_factory=MeasureConfig)
    # sweep and recommend
    space: SpaceConfig = dataclasses.field(default_factory=SpaceConfig)
    effective_batch_size: int | None = None  # only specs with batch_size x grad_accum = this
    trials: int = 40  # the sweep measures at most this many specs
    minutes: float | None = None  # ... and stops starting new ones after this long
    patience: int = 6  # ... or after this many measured specs (past the designed first ones)
    # without a faster one that fits
    margin: float = 0.05  # fraction of the target's memory kept free
    study_db_url: str | None = None  # Optuna's storage (default db/optuna.sqlite)


ConfigStore.instance().store(name="schema", node=Config)


class ConfigError(ValueError):
    """Configuration a user got wrong; the message is one line that says what to do."""


def load(overrides: list[str]) -> DictConfig:
    """Compose conf/config.yaml with Hydra overrides such as ['model=gpt2', 'batch_size=8']."""
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = compose(config_name="config", overrides=overrides)
        OmegaConf.resolve(cfg)
        return cfg
    except (HydraException, OmegaConfBaseException) as error:
        raise ConfigError(_one_line(error)) from None


def trial_spec(cfg: DictConfig) -> TrialSpec:
    """The TrialSpec a composed config describes; SpecError says what is wrong with it."""
    model = _node(cfg.model)
    optimizer = _node(cfg.optimizer)
    model_spec = _model_spec(model)
    device = _device(cfg.device)
    if cfg.channels_last and model_spec.input.kind is not InputKind.image:
        raise SpecError(f"channels_last applies to image models; {model_spec.name} takes tokens")
    if cfg.checkpointing is Checkpointing.blocks and not model_spec.block:
        raise SpecError(f"model {model_spec.name} names no block to checkpoint; set model.block")
    return TrialSpec(
        model=model_spec,
        optimizer=OptimizerSpec(
            name=str(optimizer.get("name", optimizer.get("_target_"))),
            builder=_canonical(_without(optimizer, OPTIMIZER_META_KEYS)),
        ),
        device=device,
        batch_size=cfg.batch_size,
        grad_accum=cfg.grad_accum,
        checkpointing=cfg.checkpointing,
        precision=cfg.precision,
        channels_last=cfg.channels_last,
        compile=cfg.compile,
        expandable_segments=cfg.expandable_segments,
        memory_cap_bytes=cfg.memory_cap,
    )


def _node(config: Any) -> dict[str, Any]:
    node = OmegaConf.to_container(config)
    assert isinstance(node, dict)
    return {str(k): v for k, v in node.items()}


def _model_spec(node: dict[str, Any]) -> ModelSpec:
    if "_target_" not in node:
        raise SpecError("the model config has no _target_; set model._target_=package.builder")
    name = str(node.get("name") or node["_target_"])
    if "input" not in node:
        raise SpecError(f"model {name} does not say its input; set model.input (kind, shape)")
    given = node["input"]
    try:
        input_spec = InputSpec(
            kind=InputKind(given["kind"]),
            shape=tuple(int(n) for n in given["shape"]),
            num_classes=int(given["num_classes"]),
        )
        loss = Loss(node.get("loss", "classification"))
    except (KeyError, ValueError, TypeError) as error:
        raise SpecError(f"model {name}: bad input or loss ({error})") from None
    return ModelSpec(
        name=name,
        builder=_canonical(_without(node, MODEL_META_KEYS)),
        input=input_spec,
        loss=loss,
        block=node.get("block"),
        family=str(node.get("family", name)),
    )


def _device(value: str) -> Device:
    if value == "auto":
        return Device.cuda if local_gpu() is not None else Device.cpu
    try:
        return Device(value)
    except ValueError:
        raise SpecError(f"unknown device {value!r}; choose cuda, cpu or auto") from None


def _without(node: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The builder's arguments: the node less the keys that describe it."""
    return {k: v for k, v in node.items() if k not in keys}


def _canonical(node: dict[str, Any]) -> str:
    return json.dumps(node, sort_keys=True, separators=(",", ":"))


def _one_line(error: Exception) -> str:
    """Hydra's and OmegaConf's errors, cut to the line a user needs."""
    cause = error.__cause__ or error  # Hydra wraps OmegaConf's validation errors
    text = str(cause).strip()
    first = text.splitlines()[0] if text else type(cause).__name__
    missing = re.search(r"Could not find '([^/']+)/([^']*)'", first)
    if missing:  # an unknown choice in a config group: list the options
        group, given = missing.groups()
        options = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
        return f"unknown {group} '{given}'; choose one of: {', '.join(options)}"
    key = getattr(cause, "full_key", None)
    if not key:
        return first
    new_key = re.search(r"Key '([^']+)' is not in struct", first)
    if new_key and key.startswith(("model", "optimizer")):  # a builder argument the YAML lacks
        key = f"{key}.{new_key.group(1)}" if not key.endswith(new_key.group(1)) else key
        return f"{key}: no such argument in the config; add it with +{key}=VALUE"
    return f"{key}: {first}"


def implementations(algorithm: str) -> list[str]:
    """The optimizer configs that implement one algorithm (adamw: adamw, adamw_fused)."""
    names = []
    for path in sorted((CONF_DIR / "optimizer").glob("*.yaml")):
        if _node(OmegaConf.load(path)).get("algorithm") == algorithm:
            names.append(path.stem)
    return names
