"""From measured trials and a target GPU: the fastest setting that fits, the runners-up, and the
Pareto front of throughput against device memory."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from advisor.emit.lines import TrainerConfig
from advisor.emit.trainers import Trainer, trainer_config
from advisor.errors import ConfigError
from advisor.result import Status, TrialResult
from advisor.spec import Device
from advisor.target import Target
from advisor.trial.machine_load import LOAD_NOISE

MIN_TRIALS = 3  # fewer measured settings than this is too thin to recommend from
DISAGREE = 0.05  # measurements of one setting further apart than this disagree
RUNNERS_UP = 4


@dataclasses.dataclass(frozen=True)
class Recommendation:
    target: Target
    best: TrialResult | None  # None: nothing measured fits
    runners_up: list[TrialResult]  # the next fastest that fit
    front: list[TrialResult]  # no other trial is both faster and smaller; fitting or not
    considered: int  # ok trials looked at
    measured_on: list[str]  # the devices the throughput figures come from
    thin: str | None  # why history is too thin to trust, if it is
    # the best setting's measurements that its rate counts by (`counted`), oldest first
    best_counted: list[TrialResult] = dataclasses.field(default_factory=list)

    @property
    def margin_left_bytes(self) -> int | None:
        if self.best is None or self.best.memory is None:
            return None
        return self.target.memory_bytes - self.best.memory.device_peak_bytes

    def emit(self, trainer: str | Trainer) -> TrainerConfig:
        """The recommended setting in a trainer's words (hf, lightning, accelerate, torch), as
        its installed library names it; its .text is ready to save. ConfigError where nothing
        fits."""
        if self.best is None:
            raise ConfigError(f"nothing to emit: {self.thin or 'no measured setting fits'}")
        return trainer_config(self.best.spec, trainer)

    def to_dict(self) -> dict[str, object]:
        return {
            "target": dataclasses.asdict(self.target),
            "recommendation": self.best.to_dict() if self.best else None,
            "runners_up": [r.to_dict() for r in self.runners_up],
            "pareto_front": [r.to_dict() for r in self.front],
            "considered": self.considered,
            "measured_on": self.measured_on,
            "thin": self.thin,
            "margin_left_bytes": self.margin_left_bytes,
            "best_counted": [r.to_dict() for r in self.best_counted],
            "best_disagreement": disagreement(self.best_counted),
        }


def recommend(
    results: Sequence[TrialResult], target: Target, effective_batch_size: int | None = None
) -> Recommendation:
    ok = [
        r
        for r in one_per_setting(results, target)
        if r.status is Status.ok and r.memory is not None and r.throughput is not None
        if effective_batch_size is None or r.spec.effective_batch_size == effective_batch_size
    ]
    fitting = sorted((r for r in ok if target.fits(r)), key=_speed, reverse=True)
    thin = None
    if len(ok) < MIN_TRIALS:
        said = (
            f"only {len(ok)} measured setting{'' if len(ok) == 1 else 's'}"
            if ok
            else "nothing measured"
        )
        thin = f"{said}; measure more with advisor sweep"
    elif not fitting:
        thin = "no measured setting fits the target; sweep smaller batches or checkpointing"
    best = fitting[0] if fitting else None
    of_best = same_setting(best, results) if best else []
    return Recommendation(
        target=target,
        best=best,
        runners_up=fitting[1 : 1 + RUNNERS_UP],
        front=pareto_front(ok),
        considered=len(ok),
        measured_on=sorted({r.environment.device_name for r in ok if r.environment}),
        thin=thin,
        best_counted=sorted(counted(of_best, target), key=_newest),
    )


def run_on(trials: Sequence[TrialResult], device: Device, model: str) -> list[TrialResult]:
    """The trials of a model run on the device (a GPU's recommendation counts no CPU run);
    ConfigError, saying where they ran, when there are trials but none on it."""
    mine = [r for r in trials if r.spec.device is device]
    if trials and not mine:
        elsewhere = sorted({r.spec.device.value for r in trials})[0]
        raise ConfigError(
            f"no ok {device.value} trial of model {model!r} is stored; its trials ran on "
            f"{elsewhere}: device={elsewhere}"
        )
    return mine


def disagreement(measurements: Sequence[TrialResult]) -> float | None:
    """How far apart one setting's measured rates are: (max - min) / median; None for fewer
    than two."""
    rates = sorted(r.samples_per_s for r in measurements if r.status is Status.ok)
    if len(rates) < 2:
        return None
    return (rates[-1] - rates[0]) / rates[(len(rates) - 1) // 2]


def pareto_front(results: Sequence[TrialResult]) -> list[TrialResult]:
    """Trials no other beats on both throughput (higher) and device peak (lower); by memory."""
    by_memory = sorted(results, key=lambda r: (_peak(r), -_speed(r)))
    front: list[TrialResult] = []
    for r in by_memory:
        if not front or _speed(r) > _speed(front[-1]):
            front.append(r)
    return front


def typical(measured: TrialResult, results: Sequence[TrialResult], target: Target) -> TrialResult:
    """The measurement of `measured`'s setting that recommendations count (the median, see
    one_per_setting), among it and `results`: a setting measured again is shown by the figure
    the runners-up table shows, not by its first."""
    same = {r.id: r for r in same_setting(measured, results)}
    same.setdefault(measured.id, measured)
    return one_per_setting(list(same.values()), target)[0]


def same_setting(measured: TrialResult, results: Sequence[TrialResult]) -> list[TrialResult]:
    """The results of `measured`'s setting, whatever cap they ran under."""
    return [r for r in results if r.spec.uncapped.hash == measured.spec.uncapped.hash]


def one_per_setting(results: Sequence[TrialResult], target: Target) -> list[TrialResult]:
    """One trial of each setting, whatever cap it ran under. Among its trials that fit the
    target (a setting over it uncapped can fit under the target's cap, where the allocator
    gives its cache back) and were timed under the load of its newest (rates under other
    loads are not pooled: the newest load wins), the one at the median rate, the lower of the
    middle two: a setting measured more than once counts by its typical measurement, not its
    luckiest. Where none fits, the newest."""
    groups: dict[str, list[TrialResult]] = {}
    for r in results:
        groups.setdefault(r.spec.uncapped.hash, []).append(r)
    chosen = []
    for group in groups.values():
        fitting = counted(group, target)
        chosen.append(fitting[(len(fitting) - 1) // 2] if fitting else max(group, key=_newest))
    return chosen


def counted(measurements: Sequence[TrialResult], target: Target) -> list[TrialResult]:
    """Of one setting's measurements, those its rate counts by (one_per_setting): the ones
    that fit the target, timed under the load of the newest of them; slowest first."""
    fitting = [r for r in measurements if _rank(r, target)[0]]
    newest = newest_load(fitting)
    return sorted((r for r in fitting if same_load(r, newest)), key=_speed)


def load_of(result: TrialResult) -> float | None:
    """Others' share of the CPUs while the result was timed; None where not known."""
    return result.throughput.machine_load if result.throughput else None


def newest_load(results: Sequence[TrialResult]) -> float | None:
    """The load of the newest result whose load is known (None: none is)."""
    known = [r for r in results if load_of(r) is not None]
    return load_of(max(known, key=_newest)) if known else None


def same_load(result: TrialResult, load: float | None) -> bool:
    """Whether a rate was taken under this load, within the load's noise (a rate whose load is
    not known, stored before loads were, compares with any)."""
    own = load_of(result)
    return load is None or own is None or abs(own - load) <= LOAD_NOISE


def _newest(r: TrialResult) -> int:
    return r.id or 0


def _rank(r: TrialResult, target: Target) -> tuple[bool, int]:
    return r.status is Status.ok and target.fits(r), r.id or 0


def _speed(r: TrialResult) -> float:
    return r.throughput.samples_per_s if r.throughput else 0.0


def _peak(r: TrialResult) -> int:
    return r.memory.device_peak_bytes if r.memory else 0


@dataclasses.dataclass(frozen=True)
class Against:
    """The recommendation held against the user's own settings (the sweep's baseline)."""

    speedup: float  # the recommended setting's samples/s over the baseline's
    memory_saved_bytes: int  # the baseline's device peak less the recommended one's (< 0: more)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def against(baseline: TrialResult | None, best: TrialResult | None) -> Against | None:
    """How the recommended setting compares with the baseline, where both were measured."""
    if baseline is None or best is None or baseline.status is not Status.ok:
        return None
    if baseline.memory is None or best.memory is None or _speed(baseline) <= 0:
        return None
    return Against(
        speedup=_speed(best) / _speed(baseline),
        memory_saved_bytes=baseline.memory.device_peak_bytes - best.memory.device_peak_bytes,
    )
