"""What a sweep must fit: the target GPU's memory (from gpu.memory, a named profile, or the
local GPU) and, when the target is smaller than the local GPU, the cap every trial runs under."""

from __future__ import annotations

from omegaconf import DictConfig

from advisor import gpus
from advisor.errors import ConfigError
from advisor.estimation.estimator import DEFAULT_CONTEXT_BYTES
from advisor.estimation.memory_line import Target
from advisor.spec import Device


def target_of(cfg: DictConfig, device: Device) -> Target:
    """The memory to fit: gpu.memory if given, else the named profile's, else the local GPU's."""
    if not 0 <= cfg.margin < 1:
        raise ConfigError(f"margin must be a fraction in [0, 1), got {cfg.margin}")
    gpu = cfg.gpu
    if gpu.memory is not None:
        try:
            memory = gpus.parse_bytes(gpu.memory)
        except ValueError as error:
            raise ConfigError(f"gpu.memory: {error}") from None
        if gpu.name == "auto":
            return Target.budget(memory, cfg.margin)
        return Target(name=gpu.name, memory_bytes=memory, margin=cfg.margin)
    if device is Device.cuda and (local := gpus.local_gpu()) is not None:
        return Target(
            name=f"local {local.name}", memory_bytes=local.memory_bytes, margin=cfg.margin
        )
    if device is Device.cpu:  # (a GPU's profile here would sweep a big model on the CPU)
        raise ConfigError(
            "device=cpu has no GPU memory to fit: name a budget, e.g. gpu.memory=64MiB for a "
            "tiny model (model=tiny_cnn)"
        )
    raise ConfigError("no GPU here to fit: name one (gpu=a100_40gb) or a budget (gpu.memory=24GiB)")


def trial_cap(target: Target, local_memory_bytes: int | None) -> int | None:
    """The cap every trial runs under when the target GPU is smaller than the local one: what
    the target allows less a CUDA context (the cap covers only the allocator). Near the cap the
    allocator gives its cache back and retries, as it would on the target's full memory, so a
    trial that runs under the cap fits the target."""
    if local_memory_bytes is None or target.memory_bytes >= local_memory_bytes:
        return None
    return target.allowed_bytes - DEFAULT_CONTEXT_BYTES
