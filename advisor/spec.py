"""TrialSpec: the frozen, hashable description of one training setting.

Two specs with the same hash are the same experiment, whoever ran them and on whatever machine;
the machine is recorded beside each result (see result.Environment), not in the spec.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from typing import Any


class Precision(enum.Enum):
    """How the step computes: plain fp32, fp32 with TF32 matmuls, or autocast to 16 bits."""

    fp32 = "fp32"  # TF32 off for matmuls and convolutions: true fp32
    tf32 = "tf32"  # fp32 storage, TF32 tensor-core math for matmuls and convolutions
    bf16 = "bf16"  # autocast to bfloat16
    fp16 = "fp16"  # autocast to float16 with a GradScaler


class Checkpointing(enum.Enum):
    """Activation checkpointing: none, or recompute each block of the model in backward."""

    none = "none"
    blocks = "blocks"


class Device(enum.Enum):
    cuda = "cuda"
    cpu = "cpu"


class InputKind(enum.Enum):
    """What a model eats: images (float tensors) or token ids (int64 tensors)."""

    image = "image"
    tokens = "tokens"


class Loss(enum.Enum):
    classification = "classification"  # logits [B, C] against integer labels
    causal_lm = "causal_lm"  # next-token prediction over [B, T, V] logits


@dataclasses.dataclass(frozen=True)
class InputSpec:
    kind: InputKind
    shape: tuple[int, ...]  # one sample: (C, H, W) for images, (T,) for tokens
    num_classes: int  # classes for classification, vocabulary size for token models


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    builder: str  # canonical JSON of the Hydra node that builds the model (with _target_)
    input: InputSpec
    loss: Loss
    block: str | None  # class name of the module that activation checkpointing wraps
    family: str  # cnn, vit, transformer...: models whose memory behaves alike


@dataclasses.dataclass(frozen=True)
class OptimizerSpec:
    name: str
    builder: str  # canonical JSON of the Hydra node (a partial of a torch.optim class)


@dataclasses.dataclass(frozen=True)
class TrialSpec:
    model: ModelSpec
    optimizer: OptimizerSpec
    device: Device
    batch_size: int  # micro batch: samples per forward/backward
    grad_accum: int  # micro batches per optimizer step
    checkpointing: Checkpointing
    precision: Precision
    channels_last: bool  # NHWC memory format for image models
    compile: bool  # torch.compile the model
    expandable_segments: bool  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    memory_cap_bytes: int | None = None  # cap on the device memory the trial may use

    def __post_init__(self) -> None:
        for name in ("batch_size", "grad_accum"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(f"{name} must be a positive integer, got {value!r}")
        if self.memory_cap_bytes is not None and self.memory_cap_bytes < 1:
            raise SpecError(f"memory_cap must be positive, got {self.memory_cap_bytes!r}")

    @property
    def effective_batch_size(self) -> int:
        return self.batch_size * self.grad_accum

    @property
    def uncapped(self) -> TrialSpec:
        """The training setting alone: this spec without the cap it was measured under."""
        return dataclasses.replace(self, memory_cap_bytes=None)

    def to_dict(self) -> dict[str, Any]:
        return plain(dataclasses.asdict(self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @property
    def hash(self) -> str:
        """Identifies the same experiment across runs: sha256 of the canonical JSON, 16 hex."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialSpec:
        model = data["model"]
        return cls(
            model=ModelSpec(
                name=model["name"],
                builder=model["builder"],
                input=InputSpec(
                    kind=InputKind(model["input"]["kind"]),
                    shape=tuple(model["input"]["shape"]),
                    num_classes=model["input"]["num_classes"],
                ),
                loss=Loss(model["loss"]),
                block=model["block"],
                family=model["family"],
            ),
            optimizer=OptimizerSpec(**data["optimizer"]),
            device=Device(data["device"]),
            batch_size=data["batch_size"],
            grad_accum=data["grad_accum"],
            checkpointing=Checkpointing(data["checkpointing"]),
            precision=Precision(data["precision"]),
            channels_last=data["channels_last"],
            compile=data["compile"],
            expandable_segments=data["expandable_segments"],
            memory_cap_bytes=data.get("memory_cap_bytes"),
        )

    @classmethod
    def from_json(cls, text: str) -> TrialSpec:
        return cls.from_dict(json.loads(text))


class SpecError(ValueError):
    """A setting that cannot describe a trial; the message says which and why."""


def plain(value: Any) -> Any:
    """Enums to their values and tuples to lists, recursively: JSON-ready and canonical."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
