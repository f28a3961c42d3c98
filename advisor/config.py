"""Hydra configuration: composing conf/config.yaml with its schema (settings.py), and a TrialSpec
from it."""

from __future__ import annotations

import copy
import difflib
import functools
import json
import re
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from advisor import extras, optimizers, workload
from advisor.errors import ConfigError, first_line
from advisor.gpus import local_gpu
from advisor.paths import CONF_DIR
from advisor.settings import Config, SpaceConfig
from advisor.spec import (
    Checkpointing,
    Device,
    OptimizerSpec,
    Precision,
    Strategy,
    TrialSpec,
    WorkloadIdentity,
    WorkloadSpec,
)

ConfigStore.instance().store(name="schema", node=Config)


GROUPS = ("model", "optimizer", "gpu")  # config groups: a value names a file in conf/GROUP


def options(group: str) -> list[str]:
    """The configs of a group, by name (conf/model/*.yaml: resnet50, gpt2, ...)."""
    return sorted(path.stem for path in (CONF_DIR / group).glob("*.yaml"))


def load(overrides: list[str]) -> DictConfig:
    """Compose conf/config.yaml with Hydra overrides such as ['model=gpt2', 'batch_size=8'].
    The same overrides give the same config (conf/ is read-only package data and holds no
    interpolation of the environment), so a process composes each once: Hydra takes about
    60 ms, a copy 1.5 ms, and advisor.recommend() is called in loops. An override with an
    interpolation of its own (${oc.env:...}, ${now:...}) is composed each time."""
    if any("${" in override for override in overrides):
        return _composed.__wrapped__(tuple(overrides))
    return copy.deepcopy(_composed(tuple(overrides)))


@functools.lru_cache(maxsize=64)
def _composed(overrides: tuple[str, ...]) -> DictConfig:
    for override in overrides:  # a builder's argument may go (~model.module.weights); no setting
        if override.startswith("~") and not override.startswith(("~model.", "~optimizer.")):
            key = override[1:].partition("=")[0]
            raise ConfigError(f"{override}: {key} cannot be removed; set it instead ({key}=...)")
        key, _, value = override.partition("=")
        if key in GROUPS and value not in options(key):  # (Hydra's own words name no group)
            raise ConfigError(f"unknown {key} {value!r}; choose one of: {', '.join(options(key))}")
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = compose(config_name="config", overrides=list(overrides))
        OmegaConf.resolve(cfg)
        OmegaConf.to_container(cfg, throw_on_missing=True)  # a setting left unset (batch_size=???)
    # (Hydra raises ValueError or TypeError for a config group given a number or a list)
    except (HydraException, OmegaConfBaseException, ValueError, TypeError) as error:
        raise ConfigError(_one_line(error, overrides)) from None
    for group in GROUPS:  # each one of its configs (not deleted by a workload's defaults)
        if not isinstance(cfg.get(group), DictConfig) and not (group == "model" and cfg.workload):
            raise ConfigError(f"{group}= names one of: {', '.join(options(group))}")
    _own_model_named(cfg, list(overrides))
    _check_ranges(cfg)
    return cfg


MAX_BATCH = 2**24  # a micro batch or accumulation beyond this is a typo, not a setting
MIN_MEMORY_CAP = 2**20  # a cap in bytes below this is a unit slip (memory_cap=8 for 8 GiB)
MAX_BYTES = 2**50


def _check_ranges(cfg: DictConfig) -> None:
    """Settings whose type Hydra checks but whose range it cannot: said here, before anything
    is built, run or stored."""
    counts = {"batch_size": cfg.batch_size, "grad_accum": cfg.grad_accum}
    counts |= {f"space.batch_sizes[{i}]": b for i, b in enumerate(cfg.space.batch_sizes or [])}
    counts |= {f"space.grad_accum[{i}]": a for i, a in enumerate(cfg.space.grad_accum)}
    for name, value in counts.items():
        if not isinstance(value, int) or not 1 <= value <= MAX_BATCH:  # ([[]] passes the schema)
            raise ConfigError(f"{name} must be a whole number from 1 to {MAX_BATCH}, got {value}")
    for axis in ("checkpointing", "precision", "channels_last", "compile", "expandable_segments"):
        for i, value in enumerate(cfg.space[axis]):  # (a list inside passes the schema too)
            if not isinstance(value, bool | Checkpointing | Precision):
                raise ConfigError(f"space.{axis}[{i}] must be one value, not {value}")
    for name in ("trials", "patience"):
        if cfg[name] < 1:
            raise ConfigError(f"{name} must be at least 1, got {cfg[name]}")
    for name in ("timeout_s", "minutes"):
        if cfg[name] is not None and not cfg[name] > 0:
            raise ConfigError(f"{name} must be more than 0, got {cfg[name]}")
    if cfg.memory_cap is not None and not MIN_MEMORY_CAP <= cfg.memory_cap <= MAX_BYTES:
        raise ConfigError(
            f"memory_cap is in bytes, from {MIN_MEMORY_CAP} (1 MiB) to {MAX_BYTES} (1 PiB); "
            f"got {cfg.memory_cap}"
        )


def _own_model_named(cfg: DictConfig, overrides: list[str]) -> None:
    """A model builder of the user's (model.module._target_=pkg.build) is not the config's
    model: it takes its name from the builder and checkpoints no block, unless told."""
    keys = {o.partition("=")[0].lstrip("+") for o in overrides}
    replaced = [o.partition("=")[2] for o in overrides if o.partition("=")[0].lstrip("+") in
                ("model.module._target_", "model.config._target_")]  # fmt: skip
    if not replaced:
        return
    if "model.name" not in keys:
        cfg.model.name = replaced[-1].rpartition(".")[2]
    if "model.block" not in keys:
        cfg.model.block = None


# what only the verbs that search or fit a target read (sweep, recommend, estimate)
SEARCH_SETTINGS = ("gpu", "margin", "space", "effective_batch_size", "trials", "minutes",
                   "patience", "workers", "study_db_url")  # fmt: skip


# what a job on several GPUs reads of the gpu node: the GPUs its communication is modelled for
INTERCONNECT_SETTINGS = ("gpu", "gpu.intra_node_busbw", "gpu.inter_node_busbw",
                         "gpu.memory_bandwidth", "gpu.gpus_per_node")  # fmt: skip


def refuse_search_settings(overrides: list[str]) -> None:
    """ConfigError for a search's setting given to advisor run, which measures the one setting
    it is given, on this machine: said, not dropped (gpu.memory=lots went without a word). With
    gpus=N the gpu node's interconnect is read: the link the job's step is modelled over."""
    items = (i.partition("=") for i in overrides)
    given = [value for key, _, value in items if key.lstrip("+~").strip() == "gpus"]
    several = bool(given) and given[-1].strip() != "1"  # (the last gpus= is the one composed)
    for item in overrides:
        key = item.partition("=")[0].lstrip("+~").strip()
        if several and key in INTERCONNECT_SETTINGS:
            continue
        if key.partition(".")[0] in SEARCH_SETTINGS:
            cap = ", or cap its memory with memory_cap=BYTES" if key.startswith("gpu") else ""
            raise ConfigError(
                f"{key}= does not apply to run, which measures the one setting given, on this "
                f"machine: leave it out{cap}"
            )


def check_job(cfg: DictConfig) -> None:
    """A job's settings that a question of history (recommend) can get wrong, said as the
    spec and the sweep say them."""
    if cfg.gpus == 1:
        return
    batch = cfg.effective_batch_size
    if batch is not None and batch % cfg.gpus:
        raise ConfigError(
            f"effective_batch_size={batch} over gpus={cfg.gpus} is uneven: give a multiple of "
            f"{cfg.gpus}"
        )
    if cfg.strategy is Strategy.hsdp and cfg.nodes < 2:
        raise ConfigError(
            "strategy=hsdp shards within each node and replicates across nodes: give nodes=M, "
            "2 or more"
        )


def trial_spec(cfg: DictConfig) -> TrialSpec:
    """The TrialSpec a composed config describes; ConfigError says what is wrong with it, and
    WorkloadError what is wrong with the workload (loaded here, and one batch made on the CPU)."""
    optimizer = _node(cfg.optimizer)
    model_spec = workload_spec(cfg)
    device = device_of(cfg.device)
    if cfg.channels_last and not model_spec.image_input:
        raise ConfigError(
            f"channels_last applies to image models; {model_spec.name} takes no images"
        )
    if cfg.checkpointing is Checkpointing.blocks and not model_spec.block:
        raise ConfigError(
            f"{model_spec.name} names no block to checkpoint; set block= in its Workload "
            "(or model.block=)"
        )
    strategy = cfg.strategy or (Strategy.ddp if cfg.gpus > 1 else None)
    if strategy and strategy.shards and not model_spec.block:
        raise ConfigError(
            f"strategy={strategy.value} shards each of the model's blocks; {model_spec.name} "
            "names none: set block= in its Workload (or model.block=)"
        )
    if strategy and not strategy.takes_channels_last and cfg.channels_last:
        raise ConfigError(
            f"strategy={strategy.value} with channels_last=true: FSDP2 shards only contiguous "
            "parameters, and channels_last makes a conv's weights not: give channels_last=false "
            "(or strategy=ddp)"
        )
    return TrialSpec(
        model=model_spec,
        optimizer=optimizers.optimizer_spec(optimizer),
        device=device,
        batch_size=cfg.batch_size,
        grad_accum=cfg.grad_accum,
        checkpointing=cfg.checkpointing,
        precision=cfg.precision,
        channels_last=cfg.channels_last,
        compile=cfg.compile,
        expandable_segments=cfg.expandable_segments,
        memory_cap_bytes=cfg.memory_cap,
        gpus=cfg.gpus,
        strategy=strategy,
        reshard_after_forward=cfg.fsdp.reshard_after_forward,
        param_dtype=cfg.fsdp.param_dtype,
        reduce_dtype=cfg.fsdp.reduce_dtype,
        replicas=cfg.nodes if strategy is Strategy.hsdp else 1,
    )


def workload_spec(cfg: DictConfig) -> WorkloadSpec:
    """The workload of a config: workload=FILE_OR_MODULE:FUNCTION, else the model's node (a
    catalog function with its arguments)."""
    return workload.describe(*_workload_source(cfg))


def workload_identity(cfg: DictConfig) -> WorkloadIdentity:
    """workload_spec(cfg).identity, with nothing built."""
    return workload.identity(*_workload_source(cfg))


def _workload_source(cfg: DictConfig) -> tuple[str, str]:
    """The workload's function and its arguments (canonical JSON)."""
    if cfg.workload:
        source, arguments = _absolute(str(cfg.workload)), {}
    else:
        node = _node(cfg.model)
        if "_target_" not in node:
            raise ConfigError("the model config has no _target_; name a workload with workload=")
        source, arguments = str(node.pop("_target_")), node
        # torchvision.models.resnet50, transformers.GPT2Config: each library's extra installed
        for target in workload.targets_in(node):
            extras.require(target, f"model={arguments.get('name', source)}")
    return source, _canonical(arguments)


def _absolute(source: str) -> str:
    """A workload file's path made absolute, so the worker and later runs find it."""
    module, sep, function = source.rpartition(":")
    if sep and module.endswith(".py") and Path(module).is_file():
        return f"{Path(module).resolve()}:{function}"
    return source


def _node(config: Any) -> dict[str, Any]:
    node = OmegaConf.to_container(config)
    assert isinstance(node, dict)
    return {str(k): v for k, v in node.items()}


def device_of(value: str) -> Device:
    if value == "auto":
        return Device.cuda if local_gpu() is not None else Device.cpu
    try:
        return Device(value)
    except ValueError:
        raise ConfigError(f"unknown device {value!r}; choose cuda, cpu or auto") from None


def _canonical(node: dict[str, Any]) -> str:
    return json.dumps(node, sort_keys=True, separators=(",", ":"))


# what a setting takes (and a list's items), by OmegaConf's name for the type it could not
# convert a value to
TAKES = {
    "integer": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "boolean": "true or false",
    "listconfig": "a list, such as [32,64]",
}
ITEMS = {"integer": "whole numbers", "float": "numbers"}


def _one_line(error: Exception, overrides: tuple[str, ...]) -> str:
    """Hydra's and OmegaConf's errors, cut to the line a user needs, naming the override given."""
    cause = error.__cause__ or error  # Hydra wraps OmegaConf's validation errors
    first = first_line(cause)
    missing = re.search(r"Could not find '([^/']+)/([^']*)'", first)
    if missing:  # an unknown choice in a config group: list the options
        group, given = missing.groups()
        return f"unknown {group} '{given}'; choose one of: {', '.join(options(group))}"
    key = getattr(cause, "full_key", None)
    if not key:
        return first
    new_key = re.search(r"Key '([^']+)' is not in struct", first)
    if new_key and not key.endswith(new_key.group(1)):
        key = f"{key}.{new_key.group(1)}"
    if new_key and key.startswith(("model", "optimizer")):  # a builder argument the YAML lacks
        return f"{key}: no such argument in the config; add it with +{key}=VALUE"
    if new_key or re.match(r"Key '[^']+' not in '", first):  # a setting misspelled (modle=)
        return f"{key}= is not a setting{_did_you_mean(key)}; --help and README list them"
    setting = re.sub(r"\[\d+\]$", "", key)  # space.batch_sizes[0]: the list's setting
    keys = [(o, o.lstrip("+").partition("=")[0]) for o in overrides]
    given = next((o for o, k in keys if k == setting or k.startswith(f"{setting}.")), key)
    kinds = r"could not be converted to (\w+)|is not a valid (\w+)|is not a (ListConfig)"
    wrong_type = re.search(kinds, first)
    if wrong_type:
        kind = next(k for k in wrong_type.groups() if k).lower()
        if setting != key and kind in ITEMS:
            return f"{given}: {setting} takes a list of {ITEMS[kind]}"
        return f"{given}: {setting} takes {TAKES.get(kind, kind)}"
    if "is not Optional" in first:
        return f"{given}: {setting} needs a value (null is none)"
    if "is not a subclass of" in first:  # measure=abc
        return f"{given}: {setting} holds settings of its own; set one ({setting}.NAME=VALUE)"
    return f"{key}: {first}"


def _did_you_mean(key: str) -> str:
    """' (did you mean model=?)' for a key a slip away from a setting: of its own node first,
    then of any node (lr= for optimizer.lr=)."""
    base = _composed(())
    parent, _, name = key.rpartition(".")
    node = OmegaConf.select(base, parent) if parent else base
    if isinstance(node, DictConfig):
        close = difflib.get_close_matches(name, [str(k) for k in node], n=1)
        if close:
            return f" (did you mean {parent + '.' if parent else ''}{close[0]}=?)"
    paths = [str(k) for k in base]  # the top level, then one node down
    for k, v in base.items():
        paths += [f"{k!s}.{sub!s}" for sub in v] if isinstance(v, DictConfig) else []
    by_name = {path.rpartition(".")[2]: path for path in reversed(paths)}  # the top's first
    close = difflib.get_close_matches(name, list(by_name), n=1)
    return f" (did you mean {by_name[close[0]]}=?)" if close else ""


def space_config(cfg: DictConfig) -> SpaceConfig:
    """What a sweep of this config searches (space.*), as its dataclass."""
    return SpaceConfig(**OmegaConf.to_container(cfg.space))  # type: ignore[arg-type]


def searched_optimizers(cfg: DictConfig, overrides: list[str]) -> dict[str, OptimizerSpec]:
    """The optimizers a sweep searches, by name, each with the command's other settings (its
    optimizer.lr= applies to each): space.optimizers, or the implementations of the chosen
    optimizer's algorithm."""
    names = cfg.space.optimizers or optimizers.implementations(str(cfg.optimizer.algorithm))
    others = [o for o in overrides if not o.startswith("optimizer=")]
    return {name: trial_spec(load([*others, f"optimizer={name}"])).optimizer for name in names}
