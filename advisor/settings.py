"""The schema of conf/config.yaml, as Hydra checks it: every setting a verb reads, its type and
its default (config.py composes conf/ with it, and makes a TrialSpec of the result)."""

from __future__ import annotations

import dataclasses
from typing import Any

from advisor.spec import Checkpointing, Precision, ShardDtype, Strategy
from advisor.target import DEFAULT_MARGIN
from advisor.trial.timing import MeasureConfig


@dataclasses.dataclass
class SpaceConfig:
    """What a sweep searches. An axis with one value is fixed; the command's own setting (e.g.
    precision=bf16) does not narrow the space: give the axis one value (space.precision=[bf16])."""

    # micro batches; None: powers of two from 1 to 1024 for a target of up to 80 GiB, and to
    # the power of two that scales 1024 by the memory beyond (an H200: to 2048)
    batch_sizes: list[int] | None = None
    # accumulation steps, searched only with effective_batch_size (else it keeps grad_accum=):
    # at a fixed micro batch it changes how many samples one update sees, hardly the speed
    grad_accum: list[int] = dataclasses.field(default_factory=lambda: [1, 2, 4, 8])
    checkpointing: list[Checkpointing] = dataclasses.field(
        default_factory=lambda: list(Checkpointing)
    )
    # how a job on several GPUs (gpus=N) spreads the model; fsdp and hsdp only where the model
    # names its block, hsdp only over nodes=2 or more
    strategy: list[Strategy] = dataclasses.field(
        default_factory=lambda: [Strategy.ddp, Strategy.fsdp, Strategy.hsdp]
    )
    # Strict fp32 is left out: it is never faster than torch's default, and cuDNN's benchmark
    # spends minutes on it at large batches (resnet50 b1024 on the H200: over 240 s in the first
    # step, 1.4 s without the benchmark; experiments/2026-12-01-h200-trial-cost).
    precision: list[Precision] = dataclasses.field(
        default_factory=lambda: [Precision.default, Precision.tf32, Precision.bf16, Precision.fp16]
    )
    # None: the implementations of the chosen optimizer's algorithm (adamw: adamw, adamw_fused);
    # name others to open the axis to other algorithms.
    optimizers: list[str] | None = None
    channels_last: list[bool] = dataclasses.field(default_factory=lambda: [False, True])
    compile: list[bool] = dataclasses.field(default_factory=lambda: [False, True])
    # a nuisance axis: with both values, a spec that does not fit is tried again with
    # expandable segments, and the rest keep expandable_segments=
    expandable_segments: list[bool] = dataclasses.field(default_factory=lambda: [False, True])


@dataclasses.dataclass
class FsdpConfig:
    """FSDP2's knobs, with strategy=fsdp (spec.TrialSpec says what each does)."""

    reshard_after_forward: bool = True
    param_dtype: ShardDtype | None = None  # bf16 | fp16 | fp32; None: the parameters' own
    reduce_dtype: ShardDtype | None = None  # ... for the gradients' reduce-scatter


@dataclasses.dataclass
class Config:
    model: Any = None  # conf/model/NAME.yaml: a workload function (_target_) and its arguments
    workload: str | None = None  # your own: path/to/file.py:function or package.module:function
    optimizer: Any = None  # conf/optimizer/NAME.yaml: a partial of a torch.optim class
    gpu: Any = None  # conf/gpu/NAME.yaml: the target GPU's profile; auto is the local one
    device: str = "auto"  # cuda, cpu, or auto: cuda where NVML finds a GPU
    batch_size: int = 32  # micro batch size
    grad_accum: int = 1  # micro batches per optimizer step
    checkpointing: Checkpointing = Checkpointing.none  # none | blocks
    precision: Precision = Precision.default  # default (torch's) | fp32 (strict) | tf32 | bf16
    # | fp16
    channels_last: bool = False  # NHWC memory format (image models)
    compile: bool = False  # torch.compile the model
    expandable_segments: bool = False  # the caching allocator's expandable segments
    memory_cap: int | None = None  # bytes the trial may use on the device (None: all)
    gpus: int = 1  # the job's GPUs: a trial measures one rank of them (trial/one_rank.py)
    strategy: Strategy | None = None  # ddp | fsdp | hsdp, with gpus > 1 (ddp unless given)
    # the machines the job's GPUs are spread over: its communication's link (modelled, not
    # measured: communication.py), and hsdp's replicas
    nodes: int = 1
    fsdp: FsdpConfig = dataclasses.field(default_factory=FsdpConfig)
    timeout_s: float = 900.0  # a trial still running after this is killed: status timeout
    db_url: str | None = None  # SQLAlchemy URL of the results database (or ADVISOR_DB_URL)
    plot: str | None = None  # also draw the memory breakdown into this PNG file
    # advisor run on a GPU: also write torch's memory snapshot of the trial's build, first
    # steps and warm-up (not of its timing, which it would slow) to FILE.pickle, for
    # pytorch.org/memory_viz
    memory_snapshot: str | None = None
    measure: MeasureConfig = dataclasses.field(default_factory=MeasureConfig)
    # sweep and recommend
    space: SpaceConfig = dataclasses.field(default_factory=SpaceConfig)
    effective_batch_size: int | None = None  # only specs with batch_size x grad_accum = this
    trials: int = 40  # the sweep measures at most this many specs
    # ... and answers within about this long: it starts no trial expected to end after it
    # with the answer's repeat still to run (null: no limit)
    minutes: float | None = 7.0
    patience: int = 6  # ... or after this many measured specs (past the designed first ones)
    # without a faster one that fits
    workers: str = "auto"  # trials at once: auto is one on each visible GPU (1 on the CPU), or N
    margin: float = DEFAULT_MARGIN  # fraction of the target's memory kept free
    study_db_url: str | None = None  # Optuna's storage (default db/optuna.sqlite)
