"""advisor serve's JSON API under /api/v1 (FastAPI; its OpenAPI document is /openapi.json):
stored trials with history's filters, one trial, the sweeps, one sweep, and recommend from
history. Every route reads: none measures, builds a model, loads a workload or imports.

Errors are JSON {"detail": "..."}: 400 for a bad parameter, 404 for an id not stored, 503 when
the database cannot be read; never a 500 for anything a request can say.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from advisor import history
from advisor.errors import ConfigError
from advisor.memory_model import Target
from advisor.recommendation import Recommendation, recommend
from advisor.result import TrialResult
from advisor.spec import Device
from advisor.store.store import Store, Sweep

DEFAULT_LIMIT = 100  # trials in one answer unless limit= says otherwise (0: all)
RECOMMEND_PARAMS = ("model", "gpu", "memory", "margin", "effective_batch_size", "device")
Id = Annotated[int, Path(ge=1, le=2**63 - 1, description="as advisor history lists it")]


class NotStored(LookupError):
    """An id the database does not hold: 404."""


def router(store: Store) -> APIRouter:
    api = APIRouter(prefix="/api/v1")

    @api.get("/trials")
    def trials(
        request: Request,
        model: str | None = None,
        workload: Annotated[str | None, Query(description="the end of its source")] = None,
        status: Annotated[str | None, Query(description="ok, oom, crashed, timeout")] = None,
        gpu: Annotated[str | None, Query(description="part of the device's name")] = None,
        torch: Annotated[str | None, Query(description="2.11: any 2.11.x")] = None,
        since: Annotated[str | None, Query(description="ISO date or time, UTC")] = None,
        until: Annotated[str | None, Query(description="ISO date or time, UTC")] = None,
        sweep: Annotated[str | None, Query(description="a sweep's id")] = None,
        hash: Annotated[str | None, Query(description="a spec's hash")] = None,
        limit: Annotated[str, Query(description="0: all")] = str(DEFAULT_LIMIT),
    ) -> dict[str, Any]:
        """Stored trials, newest first, with advisor history's filters."""
        results, more = matching(store, dict(request.query_params))
        return {"trials": [r.to_dict() for r in results], "more": more}

    @api.get("/trials/{trial_id}")
    def trial(trial_id: Id) -> dict[str, Any]:
        """One stored trial, as advisor show --json prints it."""
        return stored_trial(store, trial_id).to_dict()

    @api.get("/sweeps")
    def sweeps() -> list[dict[str, Any]]:
        """Every stored sweep, newest first, with how many trials it used."""
        return [{**dataclasses.asdict(s), "trials": n} for s, n in store.sweeps()]

    @api.get("/sweeps/{sweep_id}")
    def sweep(sweep_id: Id) -> dict[str, Any]:
        """One sweep: its trials in order, and the recommendation they give for its target."""
        found, used = stored_sweep(store, sweep_id)
        return {
            **dataclasses.asdict(found),
            "trials": [{"trial": r.to_dict(), "reused": reused} for r, reused in used],
            "recommendation": sweep_recommendation(found, used).to_dict(),
        }

    @api.get("/recommend")
    def recommend_route(
        request: Request,
        model: Annotated[str, Query(description="a stored model's name")] = "",
        gpu: Annotated[str | None, Query(description="a GPU profile: a100_40gb, h200")] = None,
        memory: Annotated[str | None, Query(description="a budget: 24GiB (wins over gpu)")] = None,
        margin: Annotated[str | None, Query(description="fraction kept free")] = None,
        effective_batch_size: str | None = None,
        device: Annotated[str, Query(description="cuda or cpu")] = "cuda",
    ) -> dict[str, Any]:
        """The fastest stored setting of a model that fits a GPU, from history alone."""
        return recommendation(store, dict(request.query_params)).to_dict()

    return api


def matching(store: Store, given: dict[str, str]) -> tuple[list[TrialResult], bool]:
    """history's filters from a request's query, at most DEFAULT_LIMIT trials by default."""
    return history.trial_query(given, DEFAULT_LIMIT).run(store)


def stored_trial(store: Store, trial_id: int) -> TrialResult:
    result = store.get(trial_id)
    if result is None:
        raise NotStored(f"no trial {trial_id} is stored; /api/v1/trials lists them")
    return result


def stored_sweep(store: Store, sweep_id: int) -> tuple[Sweep, list[tuple[TrialResult, bool]]]:
    found = next((s for s, _ in store.sweeps() if s.id == sweep_id), None)
    if found is None:
        raise NotStored(f"no sweep {sweep_id} is stored; /api/v1/sweeps lists them")
    return found, store.sweep_trials(sweep_id)


def sweep_recommendation(found: Sweep, used: list[tuple[TrialResult, bool]]) -> Recommendation:
    """What the sweep's trials recommend for its own target."""
    target = Target(name=found.target, memory_bytes=found.target_memory_bytes, margin=found.margin)
    return recommend([r for r, _ in used], target, found.effective_batch_size)


def recommendation(store: Store, given: dict[str, str]) -> Recommendation:
    """recommend's parameters (RECOMMEND_PARAMS, as text) answered from the store."""
    unknown = [key for key in given if key not in RECOMMEND_PARAMS]
    if unknown:
        raise ConfigError(f"unknown parameter {unknown[0]!r}; use {', '.join(RECOMMEND_PARAMS)}")
    model = given.get("model", "")
    if not model:
        raise ConfigError("recommend needs model=NAME, a model with stored trials")
    try:
        margin = float(given["margin"]) if given.get("margin") else history.DEFAULT_MARGIN
    except ValueError:
        raise ConfigError(f"margin must be a fraction in [0, 1), got {given['margin']!r}") from None
    target = history.target_named(given.get("gpu") or None, given.get("memory") or None, margin)
    batch = given.get("effective_batch_size") or None
    if batch is not None and not (batch.isascii() and batch.isdigit() and int(batch) > 0):
        raise ConfigError(f"effective_batch_size must be a positive whole number, got {batch!r}")
    try:
        device = Device(given.get("device") or "cuda")
    except ValueError:
        raise ConfigError(f"device must be cuda or cpu, got {given['device']!r}") from None
    return history.stored_recommendation(
        store, model, target, int(batch) if batch else None, device
    )
