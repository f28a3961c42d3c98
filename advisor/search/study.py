"""Where a sweep's Optuna study lives: the key that identifies it (the same command on the same
kind of machine gives the same key, so running it again resumes), the readable name it goes by,
and its storage, apart from the results database's tables. Optuna is used as its authors mean:
the memory budget is a constraint (`trial.set_constraint`, which TPE and `study.best_trial`
read; also in the older list form, which optuna-dashboard 0.21 shows), a spec settled without
running is PRUNED, and each trial names advisor's trial in its user attrs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from typing import Any

import optuna
from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError

from advisor.errors import ConfigError
from advisor.result import TrialResult
from advisor.search.space import Choice, Space
from advisor.store import schema
from advisor.store.sweeps import Sweep
from advisor.target import Target

STARTUP_TRIALS = 8  # TPE samples at random until the study has this many trials
CONSTRAINT = "device_memory"  # the constraint's name in Optuna: (peak - allowed) / allowed
TRIAL_ID = "advisor_trial_id"  # the user attr naming the advisor trial that measured it
OWNER = "advisor_owner"  # the user attr naming the process that asked for it (SharedSweep.owner)
CREATE_WAITS_S = (0.5, 2.0)  # a study storage that failed to open is tried again after these


def sweep_key(
    space: Space, target: Target, device_name: str, torch_version: str, link: str | None = None
) -> str:
    """The same command on the same kind of machine gives the same key: that is how it resumes.
    A job on several GPUs: its GPUs and the link its rates are modelled over count too."""
    base = space.base
    job = {} if base.gpus == 1 else {"gpus": base.gpus, "link": link, **base.fsdp_knobs()}
    what = {
        **job,
        "model": [space.base.model.identity, space.base.model.versions],  # not its folder
        "device": space.base.device.value,
        "axes": space.axes,
        "fixed": space.fixed,
        "batch_sizes": space.batch_sizes,
        "optimizers": {k: v.optimizer.builder for k, v in space.optimizers.items()},
        "effective_batch_size": space.effective_batch_size,
        "target": dataclasses.asdict(target),
        "environment": [device_name, torch_version],
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:32]


@dataclasses.dataclass(frozen=True)
class Resumed:
    """An earlier run of the same sweep taken up again, named, and what was given otherwise:
    a sweep is found by its key, which holds the space and target, not every argument (a run
    with other `trials=` or baseline settings resumes the same one)."""

    sweep_id: int
    study: str  # the Optuna study's name
    begun_at: str | None  # ISO 8601, UTC
    trials: int  # the trials its earlier runs used
    # the arguments (KEY=VALUE) it was begun with that were not given now, and those given now
    # that it was not begun with; both None for a sweep stored before its arguments were
    then: tuple[str, ...] | None
    now: tuple[str, ...] | None


def resumed(sweep: Sweep, study: str, trials: int, arguments: tuple[str, ...]) -> Resumed | None:
    """The resumption of a stored sweep with these arguments; None when it had no trials (a
    sweep begun now, or one that stopped before measuring anything)."""
    if not trials:
        return None
    assert sweep.id is not None
    then = now = None
    if sweep.arguments is not None:
        then = tuple(a for a in sweep.arguments if a not in arguments)
        now = tuple(a for a in arguments if a not in sweep.arguments)
    return Resumed(sweep.id, study, sweep.created_at, trials, then, now)


def study_name(model: str, target: Target, key: str) -> str:
    """What the study is called where people see it (optuna-dashboard): model, target and
    the key's first digits, which tell apart the spaces searched."""
    return f"{model} for {target.name} ({key[:8]})"


def open_study(url: str, key: str, name: str | None = None, seed: int = 0) -> optuna.Study:
    """The sweep's Optuna study, in a storage of its own (created, or loaded to resume), called
    `name`; one an earlier advisor called by its key keeps that name."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(
            f"study_db_url: {url!r} is not a database URL; give one like sqlite:///optuna.sqlite"
        ) from None
    if parsed.get_backend_name() == "sqlite" and (file := schema.sqlite_file(url)) is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
    for wait_s in CREATE_WAITS_S:
        try:
            return _create(url, key, name or key, seed)
        except (IntegrityError, OperationalError):
            # another process creating the same storage at once (Optuna's own tables and
            # version row race, as advisor's did): the second try finds them made
            time.sleep(wait_s)
    try:
        return _create(url, key, name or key, seed)
    except (IntegrityError, OperationalError) as error:
        raise schema.why_unusable(url, error) from None


def _create(url: str, key: str, name: str, seed: int) -> optuna.Study:
    storage = optuna.storages.RDBStorage(url)
    if storage.engine.dialect.name == "sqlite":
        _one_step_at_a_time(storage.engine)
    if name != key and key in optuna.get_all_study_names(storage):
        name = key  # made by an earlier advisor: resume it
    return optuna.create_study(
        storage=storage,
        study_name=name,
        direction="maximize",
        sampler=optuna.samplers.TPESampler(
            seed=seed, multivariate=True, n_startup_trials=STARTUP_TRIALS
        ),
        load_if_exists=True,
    )


def _one_step_at_a_time(engine: Engine) -> None:
    """Every transaction on a SQLite study storage begins IMMEDIATE (taking the write lock).
    pysqlite runs a SELECT outside any transaction, so Optuna's pop of an enqueued trial (read
    that it waits, then write RUNNING) was two steps, and two processes of one sweep could both
    pop it: one told it FAIL (another process measured the spec), and the other's result then
    met "Trial#3 has already finished"."""

    @event.listens_for(engine, "connect")
    def _connect(connection: Any, _: Any) -> None:
        connection.isolation_level = None  # BEGIN is emitted below

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # the connections opened before these listeners existed


def add_settled(
    study: optuna.Study,
    space: Space,
    params: dict[str, Choice],
    result: TrialResult | None,
    excess: float,
) -> None:
    """Tell Optuna of a point settled outside ask and tell (history, the baseline): its
    constraint in both of Optuna's forms (as tell_settled sets them); PRUNED when judged not to
    fit without running."""
    study.add_trial(
        optuna.trial.create_trial(
            params=params, distributions=space.distributions,
            value=result.samples_per_s if result else None,
            state=optuna.trial.TrialState.COMPLETE if result else optuna.trial.TrialState.PRUNED,
            system_attrs={f"constraints:{CONSTRAINT}": excess, "constraints": [excess]},
            user_attrs={TRIAL_ID: result.id} if result else {},
        )
    )  # fmt: skip


def tell_settled(
    study: optuna.Study,
    trial: optuna.trial.Trial,
    result: TrialResult | None,
    failed: bool,
    excess: float,
) -> None:
    """Tell Optuna how an asked trial was settled: its memory constraint, advisor's trial, and
    its rate; FAIL for a crash (it says nothing of memory), PRUNED when judged not to fit
    without running."""
    trial.set_constraint(CONSTRAINT, excess)
    # the list form too: optuna-dashboard 0.21 shows constraints from it alone
    trial.storage.set_trial_system_attr(trial._trial_id, "constraints", [excess])
    if result is not None:
        trial.set_user_attr(TRIAL_ID, result.id)
    if failed:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    elif result is None:
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    else:
        study.tell(trial, result.samples_per_s)
