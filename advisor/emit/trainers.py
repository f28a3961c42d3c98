"""Which trainer's words: the emit= choices, the library each needs, and the configuration of a
setting for one of them."""

from __future__ import annotations

import enum
from collections.abc import Callable

from advisor import extras
from advisor.emit import lightning_args
from advisor.emit.accelerate_config import accelerate_config
from advisor.emit.lightning_args import lightning_config
from advisor.emit.lines import TrainerConfig
from advisor.emit.torch_loop import torch_config
from advisor.emit.transformers_args import hf_config
from advisor.errors import ConfigError
from advisor.spec import TrialSpec


class Trainer(enum.Enum):
    hf = "hf"  # transformers' Trainer: TrainingArguments
    lightning = "lightning"  # Lightning's Trainer
    accelerate = "accelerate"  # accelerate launch's config file
    torch = "torch"  # plain PyTorch: the setup and the train step


# what each trainer's configuration needs installed: every group, by any one of its names
# (Lightning: its 2.0 name, or the older one); transformers' Trainer needs accelerate too
# (without it, the emitted file's Trainer(...) raised ImportError)
LIBRARIES = {
    Trainer.hf: (("transformers",), ("accelerate",)),
    Trainer.lightning: (lightning_args.PACKAGES,),
    Trainer.accelerate: (("accelerate",),),
    Trainer.torch: (("torch",),),
}
EMITTERS: dict[Trainer, Callable[[TrialSpec], TrainerConfig]] = {
    Trainer.hf: hf_config,
    Trainer.lightning: lightning_config,
    Trainer.accelerate: accelerate_config,
    Trainer.torch: torch_config,
}


def trainer_of(name: str | Trainer) -> Trainer:
    """The trainer emit= names; ConfigError, listing the choices, for another."""
    try:
        return Trainer(name)
    except ValueError:
        choices = ", ".join(t.value for t in Trainer)
        raise ConfigError(f"unknown emit '{name}'; choose one of: {choices}") from None


def require(trainer: Trainer) -> None:
    """ConfigError unless the trainer's library is installed, said before a sweep, not after."""
    for names in LIBRARIES[trainer]:
        if not any(extras.installed(name) for name in names):
            raise ConfigError(
                f"emit={trainer.value} needs {names[0]}, which is not installed: "
                "pip install 'advisor[trainers]'"
            )


def trainer_config(spec: TrialSpec, trainer: str | Trainer) -> TrainerConfig:
    """The setting in the trainer's words, for its library as installed here."""
    chosen = trainer_of(trainer)
    require(chosen)
    if spec.gpus > 1 and chosen is not Trainer.torch:  # (each trainer spreads a job its own way)
        raise ConfigError(
            f"emit={chosen.value} of a job on {spec.gpus} GPUs is not written yet: emit=torch "
            "prints the lines torchrun runs"
        )
    return EMITTERS[chosen](spec.uncapped)
