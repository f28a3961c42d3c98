"""Questions of the stored history, asked as text (the command line's KEY=VALUE filters, a web
request's query): which trials match, one trial or sweep, and the fastest stored setting that
fits a target. Each bad value is a ConfigError of one line, an id not stored is NotStored;
nothing here loads a workload, measures or writes anything."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping

from advisor.communication import as_job_over
from advisor.errors import ConfigError, NotStored
from advisor.interconnect import of_arguments
from advisor.recommendation import Recommendation, recommend, run_on
from advisor.result import Kind, Status, TrialResult
from advisor.spec import Device, WorkloadIdentity
from advisor.store.store import Store, existing
from advisor.store.sweeps import Sweep
from advisor.store.trial_filter import TrialFilter
from advisor.target import DEFAULT_MARGIN, Target, target_for

FILTERS = ("model", "workload", "status", "gpu", "torch", "since", "until", "sweep", "hash",
           "kind", "gpus", "limit")  # fmt: skip
RECOMMEND_PARAMS = ("model", "gpu", "memory", "margin", "effective_batch_size", "device")
MAX_LIMIT = 2**31  # rows: more than any database here holds, well inside SQL's 64-bit LIMIT
LARGEST_ID = 2**63 - 1  # SQL's 64-bit integers: a larger id is no id


@dataclasses.dataclass(frozen=True)
class TrialQuery:
    """Stored trials by history's filters, newest first, at most `limit` of them (0: all)."""

    model: str | None = None
    status: str | None = None
    spec_hash: str | None = None
    limit: int = 0
    where: TrialFilter = TrialFilter()

    def run(self, store: Store) -> tuple[list[TrialResult], bool]:
        """The matching trials, and whether the limit left some out."""
        results = store.trials(model=self.model, status=self.status, spec_hash=self.spec_hash,
                               limit=self.limit + 1 if self.limit else None,
                               where=self.where)  # fmt: skip
        if self.limit and len(results) > self.limit:
            return results[: self.limit], True
        return results, False


def history(*, db_url: str | None = None, **filters: object) -> list[TrialResult]:
    """Stored trials, newest first, by `advisor history`'s filters: model=, workload=, status=,
    gpu=, torch=, since=, until=, sweep=, hash=, kind= (measured, training: every kind unless
    given), gpus= (a job's GPUs: any unless given) and limit= (all of them unless given; the
    command shows 20). A value may be text, a number, a date or an enum (Status.ok).

        advisor.history(model="resnet50", status="ok", gpu="h200", since="2026-12-01")
    """
    given = {key: _text(value) for key, value in filters.items()}
    return trial_query(given, default_limit=0).run(existing(db_url))[0]


def _text(value: object) -> str:
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    return str(value)


def trial_query(
    given: Mapping[str, str], default_limit: int, most: int | None = None
) -> TrialQuery:
    """History's filters (FILTERS, as text) made into a query. `most`: the largest limit, 0
    (all) refused (a web answer); else any up to MAX_LIMIT, and 0 for all."""
    given = _asked(given, FILTERS, "filter")
    status = given.get("status")
    if status is not None and status not in {s.value for s in Status}:
        raise ConfigError(f"unknown status {status!r}; choose one of ok, oom, crashed, timeout")
    kind = given.get("kind")
    if kind is not None and kind not in {k.value for k in Kind}:
        raise ConfigError(f"unknown kind {kind!r}; choose one of measured, training")
    try:
        limit = int(given.get("limit", str(default_limit)))
    except ValueError:
        raise ConfigError(f"limit must be a whole number, got {given['limit']!r}") from None
    if most is not None and not 1 <= limit <= most:
        raise ConfigError(f"limit must be from 1 to {most} here (older ones: until=), got {limit}")
    if not 0 <= limit <= MAX_LIMIT:
        raise ConfigError(f"limit must be from 0 (all) to {MAX_LIMIT}, got {limit}")
    where = TrialFilter(
        workload=given.get("workload"),
        gpu=given.get("gpu"),
        torch=given.get("torch"),
        since=_utc(given.get("since"), "since"),
        until=_utc(given.get("until"), "until"),
        sweep_id=_whole(given["sweep"], "sweep", "a sweep's id") if given.get("sweep") else None,
        kind=Kind(kind) if kind else None,  # (history shows every kind unless asked)
        gpus=_gpus(given.get("gpus")),
    )
    return TrialQuery(model=given.get("model"), status=status,
                      spec_hash=given.get("hash"), limit=limit, where=where)  # fmt: skip


def stored_trial(store: Store, trial_id: int) -> TrialResult:
    result = store.get(trial_id)
    if result is None:
        raise NotStored(f"no trial {trial_id} is stored; history lists them")
    return result


def stored_sweep(store: Store, sweep_id: int) -> tuple[Sweep, list[tuple[TrialResult, bool]]]:
    """The sweep and the trials it used, in order."""
    found = next((s for s, _ in store.sweeps() if s.id == sweep_id), None)
    if found is None:
        raise NotStored(f"no sweep {sweep_id} is stored; sweeps lists them")
    return found, store.sweep_trials(sweep_id)


def sweep_recommendation(found: Sweep, used: list[tuple[TrialResult, bool]]) -> Recommendation:
    """What the sweep's trials recommend for its own target; a job's sweep, by each rank as
    its whole job over the link the sweep was begun with (its gpu= and gpu.*= arguments, or
    the profile of the GPU the rank ran on)."""
    target = Target(name=found.target, memory_bytes=found.target_memory_bytes, margin=found.margin)
    gpu, nodes = of_arguments(found.arguments or ())
    trials = [
        as_job_over(r, gpu, nodes, r.environment.device_name if r.environment else None)
        for r, _ in used
    ]
    return recommend(trials, target, found.effective_batch_size)


def recommendation(store: Store, given: Mapping[str, str]) -> Recommendation:
    """recommend's parameters (RECOMMEND_PARAMS, as text) answered from the store."""
    given = _asked(given, RECOMMEND_PARAMS, "parameter")
    model = given.get("model")
    if not model:
        raise ConfigError("recommend needs model=NAME, a model with stored trials")
    try:
        margin = float(given.get("margin", DEFAULT_MARGIN))
    except ValueError:
        raise ConfigError(f"margin must be a fraction in [0, 1), got {given['margin']!r}") from None
    target = target_for(given.get("gpu"), given.get("memory"), margin, memory_named="gpu memory")
    batch = given.get("effective_batch_size")
    if batch is not None:
        batch_size = _whole(batch, "effective_batch_size", "a positive whole number")
        if batch_size < 1:
            raise ConfigError(f"effective_batch_size must be a positive whole number, got {batch}")
    try:
        device = Device(given.get("device", "cuda"))
    except ValueError:
        raise ConfigError(f"device must be cuda or cpu, got {given['device']!r}") from None
    trials = stored_trials(store, model, device)
    if not trials:
        raise ConfigError(
            f"no ok {device.value} trial of model {model!r} is stored; sweep it first"
        )
    return recommend(trials, target, int(batch) if batch else None)


def stored_trials(
    store: Store,
    model: str,
    device: Device,
    identity: WorkloadIdentity | None = None,
    gpus: int = 1,
) -> list[TrialResult]:
    """What recommend answers from, one choice for the command line, Python and the server:
    the model's ok trials on the device, of one workload (name, source, arguments and code: an
    edited workload is another), on one GPU or ranks of a job on `gpus`. `identity` is the
    workload as the caller's code has it now (advisor recommend composes it); without it (the
    server, which loads no code), the workload measured last."""
    stored = store.trials(model=model, status="ok", where=TrialFilter(gpus=gpus))
    if identity is not None:
        same = [r for r in stored if r.spec.model.identity == identity]
        if stored and not same:
            raise ConfigError(
                f"the {len(stored)} ok trial(s) of model {model!r} stored ran other code or "
                "arguments (a workload edited since is another); sweep it as it is now"
            )
        stored = same
    trials = run_on(stored, device, model)
    if trials and identity is None:
        newest = trials[0].spec.model.identity
        trials = [r for r in trials if r.spec.model.identity == newest]
    return trials


def _asked(given: Mapping[str, str], known: tuple[str, ...], what: str) -> dict[str, str]:
    """The values given, less the empty ones (a web form sends every field); an unknown key or
    a NUL (which PostgreSQL refuses in text) is a ConfigError."""
    asked = {key: value for key, value in given.items() if value != ""}
    unknown = [key for key in asked if key not in known]
    if unknown:
        raise ConfigError(f"unknown {what} {unknown[0]!r}; use one of {', '.join(known)}")
    for key, value in asked.items():
        if "\x00" in value:
            raise ConfigError(f"{key}: a NUL character is not allowed")
    return asked


def _whole(text: str, key: str, what: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > LARGEST_ID:
        raise ConfigError(f"{key} must be {what}, got {text!r}")
    return int(text)


def _gpus(text: str | None) -> int | None:
    """A job's GPUs, 1 or more; None (any) where not given."""
    if not text:
        return None
    gpus = _whole(text, "gpus", "a number of GPUs")
    if gpus < 1:
        raise ConfigError(f"gpus must be a number of GPUs, 1 or more, got {text!r}")
    return gpus


def _utc(text: str | None, key: str) -> datetime.datetime | None:
    """An ISO date or time, in UTC where it names no zone."""
    if not text:
        return None
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"{key} must be an ISO date or time (2026-12-01, 2026-12-01T14:00): {text!r}"
        ) from None
    # in UTC: SQLite compares the stored UTC times with the text of this one, without its zone
    try:
        return when.astimezone(datetime.UTC) if when.tzinfo else when.replace(tzinfo=datetime.UTC)
    except OverflowError:  # (9999-12-31T23:59:59-01:00 is in the year 10000 in UTC)
        raise ConfigError(
            f"{key} must be a time in the years 1 to 9999 in UTC, got {text!r}"
        ) from None
