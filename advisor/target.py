"""What a setting must fit: the target GPU's memory (a budget, a named profile, or the local
GPU), the margin kept free, and, when the target is smaller than the local GPU, the cap every
trial runs under. The sweep, recommend, estimate and the server all name their target here."""

from __future__ import annotations

import dataclasses

from advisor import gpus
from advisor.errors import ConfigError
from advisor.result import Status, TrialResult
from advisor.spec import Device

DEFAULT_MARGIN = 0.05  # fraction of the target's memory kept free unless margin= says


@dataclasses.dataclass(frozen=True)
class Target:
    """The GPU memory a sweep must fit: a profile's, a budget, or the local GPU's."""

    name: str
    memory_bytes: int
    margin: float  # fraction kept free

    @classmethod
    def budget(cls, memory_bytes: int, margin: float) -> Target:
        """A memory budget (gpu.memory=24GiB) and no GPU's name: named by its size."""
        return cls(gpus.format_bytes(memory_bytes), memory_bytes, margin)

    @property
    def is_budget(self) -> bool:
        return self.name == gpus.format_bytes(self.memory_bytes)

    @property
    def label(self) -> str:
        """The target as said to a user: a GPU's name, or a budget's size (64MB: "61.0 MiB",
        where its name is "61.0352MiB")."""
        return gpus.size_text(self.memory_bytes) if self.is_budget else self.name

    @property
    def allowed_bytes(self) -> int:
        return int(self.memory_bytes * (1 - self.margin))

    def excess(self, peak_bytes: float) -> float:
        """Optuna's constraint value: <= 0 fits."""
        return (peak_bytes - self.allowed_bytes) / self.allowed_bytes

    def fits(self, result: TrialResult) -> bool:
        return (
            result.status is Status.ok
            and result.memory is not None
            and (result.memory.device_peak_bytes <= self.allowed_bytes)
        )


def target_for(
    gpu: str | None,
    memory: str | int | None,
    margin: float,
    device: Device | None = None,
    memory_named: str = "gpu.memory",
) -> Target:
    """The memory to fit: a budget if one is given (memory=, named by its size unless a GPU is
    named too), else the named GPU profile's, else the local GPU's (device=cuda, where there is
    one). gpu=auto names no GPU; memory_named is how the caller calls the memory setting."""
    if not 0 <= margin < 1:
        raise ConfigError(f"margin must be a fraction in [0, 1), got {margin}")
    name = None if gpu in (None, "", "auto") else gpu
    if memory is not None:
        try:
            memory_bytes = gpus.parse_bytes(memory)
        except ValueError as error:
            raise ConfigError(f"{memory_named}: {error}") from None
        if name is None:
            return Target.budget(memory_bytes, margin)
        return Target(name=name, memory_bytes=memory_bytes, margin=margin)
    if name is not None or device is None:  # (a question of history names its GPU)
        profiles = gpus.load_profiles()
        if name not in profiles:
            named = f"unknown gpu {name!r}; " if name else ""
            raise ConfigError(f"{named}name a GPU ({', '.join(profiles)}) or a memory (24GiB)")
        profile = profiles[name]
        return Target(name=profile.name, memory_bytes=profile.memory_bytes, margin=margin)
    if device is Device.cuda and (local := gpus.local_gpu()) is not None:
        return Target(name=f"local {local.name}", memory_bytes=local.memory_bytes, margin=margin)
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
    return target.allowed_bytes - gpus.DEFAULT_CONTEXT_BYTES
