"""The space a sweep searches: its axes (Optuna's categorical distributions), the TrialSpec each
point names, and the values most often fastest, which the sweep's designed trials try first."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence

from optuna.distributions import BaseDistribution, CategoricalDistribution

from advisor.errors import ConfigError
from advisor.settings import SpaceConfig
from advisor.spec import (
    FSDP_DEFAULTS,
    Checkpointing,
    Device,
    OptimizerSpec,
    Precision,
    Strategy,
    TrialSpec,
)

START_BATCH = 32  # the designed start's micro batch, where the space allows it
Choice = bool | int | float | str | None  # a value Optuna can choose for an axis

# The values most often fastest, first: the designed trials start from them.
PREFERRED: dict[str, list[Choice]] = {
    "precision": ["bf16", "fp16", "tf32", "default", "fp32"],
    "checkpointing": ["none", "blocks"],
    "channels_last": [True, False],
    "compile": [False, True],  # compiling costs minutes: try it as a change, not first
    "expandable_segments": [False, True],
    "strategy": ["ddp", "hsdp", "fsdp"],  # whole on each rank: the least to move, if it fits
}


class Space:
    """The axes searched and the TrialSpec each point names."""

    def __init__(
        self,
        base: TrialSpec,
        config: SpaceConfig,
        optimizers: dict[str, TrialSpec],  # implementation name -> base spec with it
        effective_batch_size: int | None,
        target_memory_bytes: int | None = None,  # sizes the default batch sizes
        nodes: int = 1,  # a job's machines: hsdp's replicas
    ) -> None:
        self.base, self.optimizers = base, optimizers
        self.effective_batch_size = effective_batch_size
        image = base.model.image_input
        cuda = base.device is Device.cuda
        axes: dict[str, Sequence[Choice]] = {
            "checkpointing": [c.value for c in config.checkpointing],
            "precision": _precisions(config.precision, cuda),
            "optimizer": list(optimizers),
            "channels_last": list(config.channels_last) if image else [False],
            "compile": list(config.compile),
            "expandable_segments": list(config.expandable_segments) if cuda else [False],
        }
        self.nodes = nodes
        if base.gpus > 1:  # a job on several GPUs: how it spreads the model
            axes["strategy"] = [
                s.value for s in config.strategy
                if (base.model.block or not s.shards) and (nodes > 1 or s is not Strategy.hsdp)
            ]  # fmt: skip
        if not base.model.block:
            axes["checkpointing"] = [Checkpointing.none.value]
        # Nuisance axes change what fits, hardly the speed: they keep the base's value, and
        # enter only where memory binds (the sweep retries a spec that did not fit with them).
        self.nuisance: dict[str, list[Choice]] = {}
        for axis, value in (
            ("expandable_segments", base.expandable_segments),
            ("checkpointing", base.checkpointing.value),
        ):
            if len(axes[axis]) > 1 and value in axes[axis]:
                self.nuisance[axis] = list(axes[axis])
                axes[axis] = [value]
        batch_sizes = sorted(set(config.batch_sizes or default_batch_sizes(target_memory_bytes)))
        if effective_batch_size is None:
            axes["batch_size"] = batch_sizes
            axes["grad_accum"] = [base.grad_accum]  # a nuisance without a fixed effective batch
        else:
            if effective_batch_size % base.gpus:
                raise ConfigError(
                    f"effective_batch_size={effective_batch_size} over gpus={base.gpus} is "
                    f"uneven: give a multiple of {base.gpus}"
                )
            per_rank = effective_batch_size // base.gpus
            accum = [a for a in sorted(set(config.grad_accum)) if per_rank % a == 0]
            if not accum:
                share = f" over gpus={base.gpus}: {per_rank} a rank" if base.gpus > 1 else ""
                raise ConfigError(
                    f"no grad_accum in {list(config.grad_accum)} divides effective_batch_size="
                    f"{effective_batch_size}{share}; add one to space.grad_accum"
                )
            axes["grad_accum"] = accum
        if base.gpus > 1 and not axes["strategy"]:
            raise ConfigError(
                f"space.strategy={[s.value for s in config.strategy]} leaves nothing to search "
                "here: hsdp needs nodes=2 or more, and fsdp and hsdp the model's blocks (the "
                "workload's block=)"
            )
        for name, values in axes.items():
            if not values:
                raise ConfigError(f"space.{name} is empty; give it at least one value")
        # micro batches the sweep may climb to (none when the effective batch fixes them)
        self.batch_sizes: list[int] = batch_sizes if effective_batch_size is None else []
        self.fixed = {k: v[0] for k, v in axes.items() if len(v) == 1}
        self.axes = {k: v for k, v in axes.items() if len(v) > 1}  # what Optuna chooses
        self.distributions: dict[str, BaseDistribution] = {
            k: CategoricalDistribution(v) for k, v in self.axes.items()
        }

    def preferred(self, axis: str) -> list[Choice]:
        """The axis's values, the one most often fastest first (what the designed trials try)."""
        choices = list(self.axes[axis])
        first = PREFERRED.get(axis)
        if first is not None:
            return sorted(choices, key=first.index)
        if axis == "optimizer":  # a fused implementation first
            return sorted(choices, key=lambda name: "fused" not in str(name))
        return sorted(choices, key=as_int)  # batch, accumulation: ascending

    def start(self) -> dict[str, Choice]:
        """The first point: preferred values, a moderate batch (the climb takes it up)."""
        params = {axis: self.preferred(axis)[0] for axis in self.axes}
        if "batch_size" in self.axes:
            batches = self.preferred("batch_size")
            moderate = [as_int(b) for b in batches if as_int(b) <= START_BATCH]
            params["batch_size"] = max(moderate) if moderate else batches[0]
        return params

    def spec(self, params: dict[str, Choice]) -> TrialSpec:
        p = {**self.fixed, **params}
        accum = as_int(p["grad_accum"])
        batch = (
            self.effective_batch_size // self.base.gpus // accum
            if self.effective_batch_size is not None
            else as_int(p["batch_size"])
        )
        strategy = None if p.get("strategy") is None else Strategy(p["strategy"])
        base = self.optimizers[str(p["optimizer"])]
        if strategy is not None and not strategy.shards:  # (FSDP2's knobs are FSDP2's alone)
            base = dataclasses.replace(base, **FSDP_DEFAULTS)
        return dataclasses.replace(
            base,
            strategy=strategy,
            replicas=self.nodes if strategy is Strategy.hsdp else 1,
            batch_size=batch,
            grad_accum=accum,
            checkpointing=Checkpointing(p["checkpointing"]),
            precision=Precision(p["precision"]),
            channels_last=bool(p["channels_last"])
            and (strategy is None or strategy.takes_channels_last),
            compile=bool(p["compile"]),
            expandable_segments=bool(p["expandable_segments"]),
        )

    def params(self, spec: TrialSpec) -> dict[str, Choice] | None:
        """The point of the space that names this spec's setting (whatever cap it ran under),
        or None if it lies outside."""
        if spec.optimizer.name not in self.optimizers:
            return None
        values: dict[str, Choice] = {
            "batch_size": spec.batch_size,
            "grad_accum": spec.grad_accum,
            "checkpointing": spec.checkpointing.value,
            "precision": spec.precision.value,
            "optimizer": spec.optimizer.name,
            "channels_last": spec.channels_last,
            "compile": spec.compile,
            "expandable_segments": spec.expandable_segments,
            "strategy": spec.strategy.value if spec.strategy else None,
        }
        if spec.gpus != self.base.gpus:
            return None
        params = {k: values[k] for k in self.distributions}
        inside = all(values[k] in choices for k, choices in self.axes.items())
        inside &= all(values[k] in choices for k, choices in self.nuisance.items())
        if not inside:
            return None
        named = dataclasses.replace(
            self.spec(params), **{k: getattr(spec, k) for k in self.nuisance}
        )
        return params if named.uncapped == spec.uncapped else None

    def points(self) -> Iterator[dict[str, Choice]]:
        """Every point of the space."""
        for values in itertools.product(*self.axes.values()):
            yield dict(zip(self.axes, values, strict=True))

    def settings(self) -> Iterator[dict[str, Choice]]:
        """Every setting of the space: its points without the micro batch (where it is an axis)."""
        axes = {k: v for k, v in self.axes.items() if k != "batch_size"}
        for values in itertools.product(*axes.values()):
            yield dict(zip(axes, values, strict=True))

    def size(self) -> int:
        n = 1
        for choices in self.axes.values():
            n *= len(choices)
        return n


LARGEST_DEFAULT_BATCH = 1024  # for a target of up to 80 GiB
MEMORY_PER_LARGEST = 80 * 2**30


def default_batch_sizes(target_memory_bytes: int | None) -> list[int]:
    """Powers of two from 1 to 1024 for a target of up to 80 GiB; beyond, to the power of two
    that scales 1024 by the memory (an H200's 140 GiB: 2048): room for larger batches."""
    largest = LARGEST_DEFAULT_BATCH
    memory = target_memory_bytes or 0
    while largest * MEMORY_PER_LARGEST < LARGEST_DEFAULT_BATCH * memory:
        largest *= 2
    return [2**i for i in range(largest.bit_length())]


def _precisions(given: Sequence[Precision], cuda: bool) -> list[Choice]:
    """The precision axis. On the CPU default, fp32 and tf32 are one computation (TF32 is a
    setting of CUDA's matmuls and cuDNN): searching more than one of them measures one setting
    twice and reads noise as a difference, so the first given stands for them."""
    values: list[Choice] = [p.value for p in given]
    if not cuda:
        same = [p.value for p in given if p in (Precision.default, Precision.fp32, Precision.tf32)]
        values = [v for v in values if v not in same[1:]]
    return values


def space_of(
    space_config: SpaceConfig,
    optimizers: dict[str, OptimizerSpec],
    base: TrialSpec,
    effective_batch_size: int | None = None,
    target_memory_bytes: int | None = None,
    nodes: int = 1,
) -> Space:
    """The space of a sweep: its axes (space.*), and a base spec for each optimizer searched
    (config.searched_optimizers)."""
    if effective_batch_size is not None and effective_batch_size < 1:
        raise ConfigError(f"effective_batch_size must be positive, got {effective_batch_size}")
    specs = {name: dataclasses.replace(base, optimizer=o) for name, o in optimizers.items()}
    return Space(base, space_config, specs, effective_batch_size, target_memory_bytes, nodes)


def as_int(value: Choice) -> int:
    """A batch or accumulation value of the space, typed as what it is."""
    assert isinstance(value, int)
    return value
