"""TrialSpec: the frozen, hashable description of one training setting.

Two specs with the same hash are the same experiment, whoever ran them and on whatever machine;
the machine is recorded beside each result (see result.Environment), not in the spec.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
from typing import Any, NamedTuple

from advisor.errors import ConfigError


class Precision(enum.Enum):
    """How the step computes: fp32 weights with torch's own TF32 settings, strict fp32, fp32 with
    TF32 everywhere, or autocast to 16 bits."""

    default = "default"  # torch's defaults, as a plain fp32 run has them: TF32 in cuDNN's
    # convolutions, not in matmuls (resnet50 b256 on the H200: 1,060/s strict, ~2,200/s this)
    fp32 = "fp32"  # TF32 off for matmuls and convolutions: true fp32
    tf32 = "tf32"  # fp32 storage, TF32 tensor-core math for matmuls and convolutions
    bf16 = "bf16"  # autocast to bfloat16
    fp16 = "fp16"  # autocast to float16 with a GradScaler

    @property
    def cudnn_tf32(self) -> bool:
        """Whether cuDNN runs fp32 convolutions in TF32: off only for strict fp32 (torch's
        default, which the other precisions leave, has it on)."""
        return self is not Precision.fp32


class Checkpointing(enum.Enum):
    """Activation checkpointing: none, or recompute each block of the model in backward."""

    none = "none"
    blocks = "blocks"


class Strategy(enum.Enum):
    """How a job spreads the model over its GPUs (gpus > 1)."""

    ddp = "ddp"  # DistributedDataParallel: each rank holds it whole; gradients all-reduced
    fsdp = "fsdp"  # FSDP2's fully_shard, each block and the root: parameters, gradients and
    # optimizer state in shards of 1/N, parameters gathered a block at a time
    hsdp = "hsdp"  # FSDP2 on a 2-D mesh: sharded within each of `replicas` groups (a node's
    # GPUs), replicated across them (the shards' gradients all-reduced between nodes)

    @property
    def shards(self) -> bool:
        """FSDP2's: the model in shards, its knobs apply."""
        return self is not Strategy.ddp

    @property
    def takes_channels_last(self) -> bool:
        """FSDP2 shards only contiguous parameters, and channels_last makes a conv's weights
        not (fully_shard refuses them)."""
        return not self.shards


class ShardDtype(enum.Enum):
    """A dtype FSDP2's mixed-precision policy gathers parameters or reduces gradients in."""

    bf16 = "bf16"
    fp16 = "fp16"
    fp32 = "fp32"

    @property
    def torch_name(self) -> str:
        """torch's name for it: torch.bfloat16 is getattr(torch, "bfloat16")."""
        return {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[self.value]


# FSDP2's knobs as a spec holds them when not given: fully_shard's own defaults
FSDP_DEFAULTS: dict[str, Any] = {
    "reshard_after_forward": True,
    "param_dtype": None,
    "reduce_dtype": None,
}


class Device(enum.Enum):
    cuda = "cuda"
    cpu = "cpu"


class WorkloadIdentity(NamedTuple):
    """The same workload, whatever the library versions and the folder of its file: what
    calibration and recommend match history on (the versions are each trial's own)."""

    name: str
    file: str  # its source without the folder
    arguments: str
    code: str

    @classmethod
    def of(cls, name: str, source: str, arguments: str, code: str) -> WorkloadIdentity:
        return cls(name, source.rsplit("/", 1)[-1], arguments, code)


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    """The workload a trial trains (advisor.Workload), as data: where the worker finds it, and
    what identifies its code."""

    name: str
    source: str  # its function: package.module:function or /absolute/path/file.py:function
    arguments: str  # canonical JSON of the keyword arguments the function is called with
    code: str  # sha256 (16 hex) of the source behind it: edited code is a new experiment
    versions: tuple[tuple[str, str], ...]  # torch and the model libraries, (name, version)
    block: str | None  # class name of the module that activation checkpointing wraps
    family: str  # workloads whose memory behaves alike
    image_input: bool  # its batch holds 4-D float tensors (channels_last applies)
    tokens_per_sample: int | None  # token models: the sequence length (tokens/s)

    @property
    def identity(self) -> WorkloadIdentity:
        return WorkloadIdentity.of(self.name, self.source, self.arguments, self.code)

    @property
    def fingerprint(self) -> str:
        """The code and the library versions together, as history shows them (16 hex)."""
        text = json.dumps([self.code, self.versions], separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkloadSpec:
        if "source" not in data:  # stored before workloads (schema 0002): a model node
            given = data.get("input", {})
            image = given.get("kind") == "image" and len(given.get("shape", ())) == 3
            tokens = given.get("shape", [None])[0] if given.get("kind") == "tokens" else None
            return cls(
                name=data["name"], source="", arguments=data.get("builder", "{}"), code="",
                versions=(), block=data.get("block"), family=data.get("family", data["name"]),
                image_input=image, tokens_per_sample=tokens,
            )  # fmt: skip
        return cls(**{**data, "versions": tuple(tuple(v) for v in data["versions"])})


@dataclasses.dataclass(frozen=True)
class OptimizerSpec:
    name: str
    builder: str  # canonical JSON of the Hydra node (a partial of a torch.optim class)


@dataclasses.dataclass(frozen=True)
class TrialSpec:
    model: WorkloadSpec
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
    # the job's GPUs, each running a rank: a trial measures rank 0 of them on one device, on
    # torch's fake process group (trial/one_rank.py); batch_size and grad_accum are a rank's
    gpus: int = 1
    strategy: Strategy | None = None  # how the ranks share the model; None on one GPU
    # FSDP2's knobs (strategy=fsdp): free a block's gathered parameters after its forward
    # (gathered again for backward), and the dtypes its mixed-precision policy gathers
    # parameters and reduces gradients in (None: the parameters' own)
    reshard_after_forward: bool = True
    param_dtype: ShardDtype | None = None
    reduce_dtype: ShardDtype | None = None
    replicas: int = 1  # hsdp: the groups the GPUs form (nodes), each holding the model sharded

    def __post_init__(self) -> None:
        for name in ("batch_size", "grad_accum"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.memory_cap_bytes is not None and self.memory_cap_bytes < 1:
            raise ConfigError(f"memory_cap must be positive, got {self.memory_cap_bytes!r}")
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 1:
            raise ConfigError(f"gpus must be a positive integer, got {self.gpus!r}")
        knobs = self.fsdp_knobs()
        if knobs and not (self.strategy and self.strategy.shards):
            raise ConfigError(f"fsdp.{next(iter(knobs))} is FSDP2's: give strategy=fsdp too")
        if (self.replicas > 1) != (self.strategy is Strategy.hsdp):
            raise ConfigError(
                "strategy=hsdp shards within each node and replicates across nodes: give "
                "nodes=M, 2 or more"
                if self.strategy is Strategy.hsdp
                else f"replicas={self.replicas} are hsdp's: give strategy=hsdp"
            )
        if self.replicas > 1 and (self.gpus % self.replicas or self.gpus // self.replicas < 2):
            raise ConfigError(
                f"strategy=hsdp over gpus={self.gpus} and nodes={self.replicas} shards each "
                "node's GPUs: give nodes that divide gpus, 2 GPUs a node or more"
            )
        if (self.gpus > 1) != (self.strategy is not None):
            raise ConfigError(
                f"gpus={self.gpus} takes strategy=ddp, fsdp or hsdp"
                if self.gpus > 1
                else "strategy= spreads a job over several GPUs: give gpus=N, 2 or more"
            )

    def fsdp_knobs(self) -> dict[str, Any]:
        """FSDP2's knobs that are not its defaults, by name (as the spec's JSON has them)."""
        given = {name: getattr(self, name) for name in FSDP_DEFAULTS}
        return {k: plain(v) for k, v in given.items() if v != FSDP_DEFAULTS[k]}

    @property
    def effective_batch_size(self) -> int:
        """The samples of one optimizer step, over all the job's GPUs."""
        return self.batch_size * self.grad_accum * self.gpus

    # (hash and uncapped are kept once worked out: the spec is frozen, and a recommendation
    # from 100k stored trials asks them thousands of times)
    @functools.cached_property
    def uncapped(self) -> TrialSpec:
        """The training setting alone: this spec without the cap it was measured under."""
        if self.memory_cap_bytes is None:
            return self
        return dataclasses.replace(self, memory_cap_bytes=None)

    def to_dict(self) -> dict[str, Any]:
        """Every field; on one GPU without gpus and strategy, and FSDP2's knobs only where not
        its defaults, so that a spec stored before they were keeps its hash."""
        data = plain(dataclasses.asdict(self))
        if self.gpus == 1:
            del data["gpus"], data["strategy"]
        if self.replicas == 1:
            del data["replicas"]
        given = self.fsdp_knobs()
        for knob in FSDP_DEFAULTS.keys() - given.keys():  # (at its defaults: a hash as before)
            del data[knob]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @functools.cached_property
    def hash(self) -> str:
        """Identifies the same experiment across runs: sha256 of the canonical JSON, 16 hex. A
        workload file counts by its name and code, not by the folder it was found in."""
        identity = self.to_dict()
        source = identity["model"]["source"]
        if ".py:" in source:
            identity["model"]["source"] = source.rsplit("/", 1)[-1]
        text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialSpec:
        return cls(
            model=WorkloadSpec.from_dict(data["model"]),
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
            gpus=data.get("gpus", 1),
            strategy=Strategy(data["strategy"]) if data.get("strategy") else None,
            reshard_after_forward=data.get("reshard_after_forward", True),
            param_dtype=ShardDtype(data["param_dtype"]) if data.get("param_dtype") else None,
            reduce_dtype=ShardDtype(data["reduce_dtype"]) if data.get("reduce_dtype") else None,
            replicas=data.get("replicas", 1),
        )

    @classmethod
    def from_json(cls, text: str) -> TrialSpec:
        """The spec stored as this text; one spec for each text (specs are frozen), so that
        stored trials of one setting share it and its hash."""
        return _parsed(text)


@functools.lru_cache(maxsize=16384)
def _parsed(text: str) -> TrialSpec:
    return TrialSpec.from_dict(json.loads(text))


def plain(value: Any) -> Any:
    """Enums to their values and tuples to lists, recursively: JSON-ready and canonical."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
