"""Questions of the stored history, asked as text (the command line's KEY=VALUE filters, a web
request's query): which trials match, and the fastest stored setting that fits a target. Each
bad value is a ConfigError of one line; nothing here loads a workload or measures anything."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping

from advisor import gpus
from advisor.errors import ConfigError
from advisor.memory_model import DEFAULT_MARGIN, Target
from advisor.recommendation import Recommendation, recommend
from advisor.result import Status, TrialResult
from advisor.spec import Device
from advisor.store.store import Store, TrialFilter

FILTERS = ("model", "workload", "status", "gpu", "torch", "since", "until", "sweep", "hash",
           "limit")  # fmt: skip
MAX_LIMIT = 2**31  # rows: more than any database here holds, well inside SQL's 64-bit LIMIT


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


def trial_query(given: Mapping[str, str], default_limit: int) -> TrialQuery:
    """History's filters (FILTERS, as text) made into a query; an empty one is not asked (a
    web form sends every field)."""
    given = {key: value for key, value in given.items() if value != ""}
    unknown = [key for key in given if key not in FILTERS]
    if unknown:
        raise ConfigError(f"unknown filter {unknown[0]!r}; use one of {', '.join(FILTERS)}")
    status = given.get("status")
    if status is not None and status not in {s.value for s in Status}:
        raise ConfigError(f"unknown status {status!r}; choose one of ok, oom, crashed, timeout")
    limit = _whole(given.get("limit", str(default_limit)), "limit", "a whole number")
    if limit > MAX_LIMIT:
        raise ConfigError(f"limit must be from 0 (all) to {MAX_LIMIT}, got {limit}")
    where = TrialFilter(
        workload=given.get("workload") or None,
        gpu=given.get("gpu") or None,
        torch=given.get("torch") or None,
        since=_utc(given.get("since"), "since"),
        until=_utc(given.get("until"), "until"),
        sweep_id=_whole(given["sweep"], "sweep", "a sweep's id") if given.get("sweep") else None,
    )
    return TrialQuery(model=given.get("model") or None, status=status,
                      spec_hash=given.get("hash") or None, limit=limit, where=where)  # fmt: skip


def target_named(gpu: str | None, memory: str | None, margin: float = DEFAULT_MARGIN) -> Target:
    """A target GPU named without a GPU here: a profile (gpu=a100_40gb) or a budget
    (memory=24GiB, which wins where both are given)."""
    if not 0 <= margin < 1:
        raise ConfigError(f"margin must be a fraction in [0, 1), got {margin}")
    if memory:
        try:
            memory_bytes = gpus.parse_bytes(memory)
        except ValueError as error:
            raise ConfigError(f"gpu memory: {error}") from None
        return Target(name=gpu or gpus.format_bytes(memory_bytes), memory_bytes=memory_bytes,
                      margin=margin)  # fmt: skip
    profiles = gpus.load_profiles()
    if gpu not in profiles:
        named = f"unknown gpu {gpu!r}; " if gpu else ""
        raise ConfigError(f"{named}name a GPU ({', '.join(profiles)}) or a memory (24GiB)")
    profile = profiles[gpu]
    return Target(name=profile.name, memory_bytes=profile.memory_bytes, margin=margin)


def stored_recommendation(
    store: Store, model: str, target: Target, effective_batch_size: int | None = None,
    device: Device = Device.cuda,
) -> Recommendation:  # fmt: skip
    """advisor recommend from history alone, for a model by its stored name: among its trials
    on the device, those of the workload measured last (its identity: name, source, arguments
    and code; an edited workload is another)."""
    trials = [r for r in store.trials(model=model, status="ok") if r.spec.device is device]
    if not trials:
        raise ConfigError(f"no {device.value} trial of model {model!r} is stored; sweep it first")
    identity = trials[0].spec.model.identity
    return recommend([r for r in trials if r.spec.model.identity == identity], target,
                     effective_batch_size)  # fmt: skip


def _whole(text: str, key: str, what: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ConfigError(f"{key} must be {what}, got {text!r}")
    return int(text)


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
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)
