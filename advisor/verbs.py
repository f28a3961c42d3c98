"""What each verb does, for the command line and for Python alike: functions that print nothing
and return dataclasses. cli.py parses and renders around them; advisor/__init__.py exports them.

Settings are those of `advisor run` (conf/config.yaml), given as Hydra overrides, as keyword
arguments (batch_size=8, precision="bf16", gpu={"memory": "24GiB"}), or both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from advisor import communication, config, gpus, interconnect
from advisor.arguments import WorkloadLike, as_overrides, workload_override
from advisor.config import device_of, load, trial_spec, workload_identity
from advisor.errors import ConfigError
from advisor.estimation.estimator import Estimate, Estimator
from advisor.estimation.estimator import estimate as estimate_spec
from advisor.queries import stored_trials
from advisor.recommendation import (
    Against,
    Recommendation,
    against,
    disagreement,
)
from advisor.recommendation import recommend as recommend_from
from advisor.result import Status, TrialResult
from advisor.search import study
from advisor.search.answer import NEAR, Answer, LoadCheck, time_to
from advisor.search.backend import WorkerBackend, local_device, worker_slots
from advisor.search.space import Space, space_of
from advisor.search.steps import Step, SweepProgress
from advisor.search.study import Resumed
from advisor.search.sweeper import Sweeper
from advisor.spec import Device, TrialSpec
from advisor.store.sharing import SharedSweep
from advisor.store.store import Store, existing, study_url
from advisor.store.sweeps import Sweep
from advisor.store.trial_filter import TrialFilter
from advisor.target import Target, target_for, trial_cap
from advisor.trial.runner import run_trial
from advisor.trial.timing import MeasureConfig


def configure(workload: WorkloadLike = None, overrides: Sequence[str] = (),
              one_trial: bool = False, **settings: Any) -> DictConfig:  # fmt: skip
    """The composed config: the overrides, then the keyword settings, then the workload;
    `one_trial` (advisor run): a setting only a search reads is refused, in one line."""
    items = [*overrides, *as_overrides(settings)]
    if one_trial:
        config.refuse_search_settings(items)
    if workload is not None:
        items.append(workload_override(workload))
    return load(items)


def run(
    workload: WorkloadLike = None, *, overrides: Sequence[str] = (), **settings: Any
) -> TrialResult:
    """Measure one setting in its own process and store it."""
    cfg = configure(workload, overrides, one_trial=True, **settings)
    return measure(trial_spec(cfg), cfg)


def measure(spec: TrialSpec, cfg: DictConfig) -> TrialResult:
    """Measure a spec composed from cfg, and store it (the database is opened, and shown to
    take a write, first)."""
    check_device(spec, "run", on_auto=str(cfg.device) == "auto")
    local = gpus.local_gpu() if spec.device is Device.cuda else None
    interconnect.check_nodes(interconnect.resolved(cfg.gpu, local.name if local else None),
                             spec.gpus, cfg.nodes)  # fmt: skip
    snapshot = snapshot_path(cfg.memory_snapshot, spec)
    store = Store(cfg.db_url)
    store.check_writable()
    measured = run_trial(spec, MeasureConfig(**cfg.measure), cfg.timeout_s,
                         memory_snapshot=snapshot)  # fmt: skip
    return store.add(measured)


def _measures_one(cfg: DictConfig, verb: str) -> None:
    """memory_snapshot= is a measured trial's: said, not ignored, by the other verbs."""
    if cfg.memory_snapshot:
        raise ConfigError(
            f"memory_snapshot is for one measured trial, not {verb}: advisor run ... "
            "memory_snapshot=FILE.pickle"
        )


def snapshot_path(given: str | None, spec: TrialSpec) -> Path | None:
    """Where memory_snapshot= writes, made absolute (the worker runs elsewhere); ConfigError
    before anything is measured for one that cannot be written."""
    if not given:
        return None
    if spec.device is not Device.cuda:
        raise ConfigError(
            "memory_snapshot records the CUDA caching allocator's history: it needs "
            "device=cuda (there is no snapshot of CPU memory)"
        )
    path = Path(given).resolve()
    if path.suffix != ".pickle":
        raise ConfigError(f"memory_snapshot={given}: name a .pickle file (memory_viz loads it)")
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK):
        raise ConfigError(
            f"memory_snapshot={given}: cannot write into {path.parent}; name a file in a "
            "folder you can write"
        )
    return path


# how each measuring verb is run on the CPU when there is no GPU here, said when it is not
ON_THE_CPU = {
    "run": "advisor run model=tiny_cnn device=cpu",
    "sweep": "advisor sweep model=tiny_cnn device=cpu gpu.memory=64MiB trials=6",
}


def check_device(spec: TrialSpec, verb: str, on_auto: bool = False) -> None:
    """Measuring needs the device here: device=cuda without a GPU was stored as crashed trials.
    Left to device=auto on a host without one, run and sweep both refuse, rather than measure
    the CPU unasked: a sweep of resnet50 ran on the CPU for hours, and a run's CPU figures
    answer no question about a GPU; device=cpu says the CPU is meant."""
    if spec.device is Device.cuda and not torch.cuda.is_available():
        raise ConfigError(
            "device=cuda, but torch sees no CUDA GPU here: measure on the CPU with device=cpu "
            "and a tiny model (model=tiny_cnn), or estimate a GPU you don't have with "
            "advisor estimate ... gpu=NAME"
        )
    if on_auto and spec.device is Device.cpu:
        raise ConfigError(
            f"no CUDA GPU here to {verb} on (device=auto): {verb} on the CPU by saying so, with "
            f"a tiny model ({ON_THE_CPU[verb]}), or ask about a GPU you don't have with "
            "advisor estimate ... gpu=NAME or advisor recommend"
        )


def estimate(
    workload: WorkloadLike = None, *, overrides: Sequence[str] = (), **settings: Any
) -> Estimate:
    """The memory breakdown of a setting on a GPU, without one (fake tensors), calibrated on
    the stored history of the same workload."""
    cfg = configure(workload, ["device=cuda", *overrides], **settings)
    _measures_one(cfg, "estimate")
    spec = trial_spec(cfg)
    interconnect.check_nodes(interconnect.resolved(cfg.gpu, None), spec.gpus, cfg.nodes)
    config.check_job(cfg)
    target = target_for(cfg.gpu.name, cfg.gpu.memory, cfg.margin, spec.device)
    # calibration keeps the ranks of the same job (a calibrated rank's estimate is not checked
    # yet: experiments/2026-12-05-rank-estimate ran with no history)
    history = Store(cfg.db_url).trials(
        model=spec.model.name, status="ok", where=TrialFilter(gpus=spec.gpus)
    )
    return estimate_spec(spec, target, history)


def recommend(
    workload: WorkloadLike = None, *, overrides: Sequence[str] = (), **settings: Any
) -> Recommendation:
    """The fastest stored setting that fits the target, from history alone. GPU measurements
    count unless device= says otherwise."""
    given = [*overrides, *as_overrides(settings)]
    on_gpu = [] if any(o.startswith("device=") for o in given) else ["device=cuda"]
    cfg = configure(workload, [*on_gpu, *given])
    _measures_one(cfg, "recommend")
    identity = workload_identity(cfg)  # as the code has it now (the model is not built)
    device = device_of(cfg.device)
    target = target_for(cfg.gpu.name, cfg.gpu.memory, cfg.margin, device)
    interconnect.check_nodes({}, cfg.gpus, cfg.nodes)  # (nodes= without gpus=: said)
    config.check_job(cfg)  # (what would otherwise be "nothing measured")
    trials = stored_trials(existing(cfg.db_url), identity.name, device, identity, cfg.gpus)
    if cfg.gpus > 1:  # ranks of a job: each as the whole job, its communication modelled
        local = gpus.local_gpu() if device is Device.cuda else None
        name = local.name if local else None
        link = interconnect.interconnect(cfg.gpu, cfg.gpus, cfg.nodes, name)
        trials = communication.jobs_of(trials, link, cfg.strategy)
    return recommend_from(trials, target, cfg.effective_batch_size)


@dataclasses.dataclass(frozen=True)
class SweepOutcome:
    sweep_id: int
    target: Target
    device_name: str
    stop_reason: str
    # the settings given (or the defaults), measured first: what the recommendation is held
    # against, by the measurement recommendations count (its median, where measured again).
    # None when judged not to fit without running.
    baseline: TrialResult | None
    recommendation: Recommendation
    # the recommended setting's newest measurement (under the target's cap, where there is one)
    confirmation: TrialResult | None
    # every measurement of the recommended setting in this environment, newest first; a third
    # is made when two disagree by more than 5%
    repeats: list[TrialResult]
    results: list[TrialResult]  # the results in the space, which the recommendation is from
    largest_batches: dict[str, tuple[TrialSpec, int, str]]  # family: (spec, batch, by what)
    elapsed_s: float  # the search, from the first trial to the last
    # seconds until a setting within NEAR of the recommendation's rate was measured
    time_to_answer_s: float | None
    workers: int
    # the earlier run it took up again, and what was given otherwise; None for a new sweep
    resumed: Resumed | None = None
    # rates taken under other loads than the answer's: measured again, or said to be apart
    load: LoadCheck | None = None

    @property
    def against_baseline(self) -> Against | None:
        """The recommendation against the baseline, where both were measured."""
        return against(self.baseline, self.recommendation.best)

    @property
    def disagreement(self) -> float | None:
        """How far apart the recommended setting's measurements are: (max - min) / median."""
        return disagreement(self.repeats)


@dataclasses.dataclass
class SweepEvents:
    """What a sweep tells as it goes (the command line shows it; Python callers may listen)."""

    started: Callable[[int, str, Resumed | None, int], None] = (
        lambda sweep_id, what, resumed, workers: None
    )
    step: Callable[[SweepProgress, Step], None] = lambda progress, step: None
    # a measurement the answer made, after the search, and why (its repeat, the load)
    measured_again: Callable[[TrialResult, str], None] = lambda result, why: None
    measuring: Callable[[int, TrialSpec], None] = lambda slot, spec: None  # worker slot's spec
    phase: Callable[[int, str], None] = lambda slot, phase: None  # building, compiling, ...


@dataclasses.dataclass(frozen=True)
class SweepPlan:
    """What a sweep of some settings would search, every setting checked."""

    cfg: DictConfig
    baseline: TrialSpec  # the settings given, under the trials' cap
    target: Target
    cap: int | None  # the cap every trial runs under (a target smaller than the local GPU)
    space: Space
    slots: list[str | None]  # the workers' devices (CUDA_VISIBLE_DEVICES entries)
    arguments: tuple[str, ...]  # what was given, as KEY=VALUE overrides, sorted
    # a job on several GPUs: the link its communication is modelled over (communication.py)
    link: interconnect.Interconnect | None = None

    def seen(self, result: TrialResult) -> TrialResult:
        """A measurement as the search ranks it: a rank's as its whole job."""
        return result if self.link is None else communication.as_job(result, self.link)


def plan(
    workload: WorkloadLike = None, overrides: Sequence[str] = (), **settings: Any
) -> SweepPlan:
    """What a sweep of these settings would search, nothing stored or measured. Raises
    ConfigError or WorkloadError, one line each."""
    given = [*overrides, *as_overrides(settings)]
    cfg = configure(workload, given)
    base = trial_spec(cfg)
    check_device(base, "sweep", on_auto=str(cfg.device) == "auto")
    target = target_for(cfg.gpu.name, cfg.gpu.memory, cfg.margin, base.device)
    local = gpus.local_gpu() if base.device is Device.cuda else None
    cap = trial_cap(target, local.memory_bytes if local else None)
    if base.memory_cap_bytes is None and cap is not None:
        base = dataclasses.replace(base, memory_cap_bytes=cap)
    named = [*given, *([workload_override(workload)] if workload else [])]
    space = space_of(
        config.space_config(cfg), config.searched_optimizers(cfg, named), base,
        cfg.effective_batch_size, target.memory_bytes, cfg.nodes,
    )  # fmt: skip
    slots = worker_slots(str(cfg.workers), base.device)
    interconnect.check_nodes({}, base.gpus, cfg.nodes)  # (nodes= without gpus=: said)
    if base.gpus == 1 and any(a.startswith("space.strategy") for a in named):
        raise ConfigError("space.strategy searches a job on several GPUs: give gpus=N too")
    link = None
    if base.gpus > 1:  # ranked by the job's step: a link to model it over, before anything runs
        name = local.name if local else None
        link = interconnect.interconnect(cfg.gpu, base.gpus, cfg.nodes, name)
    return SweepPlan(cfg, base, target, cap, space, slots, searched_arguments(named), link)


# Arguments that say where results go, not what is searched: never stored with a sweep (a
# database URL may hold a password) nor said to differ on a resume
NOT_THE_SEARCH = ("db_url", "study_db_url", "plot")


def searched_arguments(named: Sequence[str]) -> tuple[str, ...]:
    """The arguments a sweep is begun with, as stored and compared on a resume (sorted)."""
    kept = (a for a in named if a.partition("=")[0].strip().lstrip("+~") not in NOT_THE_SEARCH)
    return tuple(sorted(kept))


def sweep(
    workload: WorkloadLike = None,
    *,
    overrides: Sequence[str] = (),
    events: SweepEvents | None = None,
    **settings: Any,
) -> SweepOutcome:
    """Search the settings for the fastest that fits the target, measuring each for real;
    first the settings given (the baseline). Running it again resumes."""
    events = events or SweepEvents()
    planned = plan(workload, overrides, **settings)
    cfg, base, target, cap = planned.cfg, planned.baseline, planned.target, planned.cap
    space, slots, seen = planned.space, planned.slots, planned.seen
    _measures_one(cfg, "sweep")
    device_name, torch_version = local_device(base.device)
    link = planned.link.says if planned.link else None
    key = study.sweep_key(space, target, device_name, torch_version, link)
    name = study.study_name(base.model.name, target, key)
    optuna_study = study.open_study(cfg.study_db_url or study_url(), key, name)  # before any row
    store = Store(cfg.db_url)
    record = store.open_sweep(
        Sweep(key, base.model.name, target.name, target.memory_bytes, target.margin,
              space.effective_batch_size, arguments=planned.arguments)
    )  # fmt: skip
    assert record.id is not None
    sweep_id = record.id
    backend = WorkerBackend(
        store, MeasureConfig(**cfg.measure), cfg.timeout_s, device_name, torch_version,
        gpus=slots, compile_cache=store.compile_cache(), on_phase=events.phase, sweep_id=sweep_id,
        seen_as=seen,
    )  # fmt: skip
    used = store.sweep_trials(sweep_id)
    # the search's (as it ranks them); the answer's go below
    earlier = [(seen(r), reused) for r, reused in store.sweep_trials(sweep_id, repeats=False)]
    taken_up = study.resumed(record, optuna_study.study_name, len(used), planned.arguments)
    events.started(
        sweep_id,
        f"{base.model.name} on {device_name} for {target.label}"
        + (f" (a job on {base.gpus} GPUs: a rank of each measured)" if base.gpus > 1 else "")
        + f": {space.size()} combinations to search",
        taken_up,
        len(slots),
    )
    history = [seen(r) for r in store.trials(model=base.model.name,
                                             where=TrialFilter(gpus=base.gpus))]  # fmt: skip
    # the same command running elsewhere (another GPU, another host) joins this sweep
    with contextlib.closing(SharedSweep(store, sweep_id, seen)) as others:
        sweeper = Sweeper(
            space,
            target,
            backend,
            optuna_study,
            on_step=events.step,
            on_result=lambda result, reused: store.link(sweep_id, result.id or 0, reused),
            estimate=Estimator(history),
            on_measuring=events.measuring,
            others=others,
        )
        sweeper.resume(earlier)
        sweeper.warm_start(
            [r for r in history if r.environment and r.environment.device_name == device_name]
        )
        baseline = sweeper.first(base)
        reason = sweeper.run(cfg.trials, cfg.minutes, cfg.patience, workers=len(slots))
        elapsed_s = sweeper.progress.elapsed_s
        # recommended from the space asked for (the baseline may lie outside it), with what
        # earlier runs' answers measured again (their runners-up' newer rates among them)
        searched = {r.id for r in sweeper.results.values()}
        again = [seen(r) for r, _ in used if r.id not in searched and r.status is Status.ok]
        results = [
            r for r in [*sweeper.results.values(), *again] if space.params(r.spec) is not None
        ]
        answer = Answer(
            store, backend, events.measuring, cap, device_name, torch_version, others,
            on_measured=events.measured_again, seen=seen,
        )  # fmt: skip
        measured = baseline.result is not None and baseline.result.status is Status.ok
        rec, results = answer.settle(
            results, target, space.effective_batch_size, base if measured else None
        )
        store.finish_sweep(sweep_id, reason)
        return SweepOutcome(
            sweep_id=sweep_id,
            target=target,
            device_name=device_name,
            stop_reason=reason,
            baseline=baseline.result and answer.baseline(baseline.result, results, target),
            recommendation=rec,
            confirmation=answer.repeats[0] if answer.repeats else None,
            repeats=answer.repeats,
            results=results,
            largest_batches=sweeper.largest_batches(rec.best),
            elapsed_s=elapsed_s,
            time_to_answer_s=time_to(1 - NEAR, sweeper.progress, rec.best),
            workers=len(slots),
            resumed=taken_up,
            load=answer.load_check(results, target),
        )
