"""advisor serve's JSON API under /api/v1 (FastAPI; its OpenAPI document is /openapi.json):
stored trials with history's filters, one trial, the sweeps, one sweep, and recommend from
history (queries.py answers each). Every route reads: none measures, builds a model, loads a
workload or imports.

Errors are JSON {"detail": "..."}: 400 for a bad parameter, 422 for a path that is no id, 404
for an id not stored, 503 when the database cannot be read; never a 500 for anything a
request can say.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from advisor import queries
from advisor.result import TrialResult
from advisor.store.store import Store

DEFAULT_LIMIT = 100  # trials in one answer unless limit= says otherwise
MOST = 10_000  # ... and at most (about 2 KB each): older ones, with until=
Id = Annotated[int, Path(ge=1, le=2**63 - 1, description="as advisor history lists it")]


def router(store: Store) -> APIRouter:
    api = APIRouter(prefix="/api/v1")

    # The parameters are declared for the OpenAPI document; queries.py reads them from the
    # request, all as text, so that each bad one gets its own sentence.
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
        kind: Annotated[str | None, Query(description="measured, training (every kind)")] = None,
        gpus: Annotated[str | None, Query(description="a job's GPUs (any number)")] = None,
        limit: Annotated[str, Query(description=f"1 to {MOST}")] = str(DEFAULT_LIMIT),
    ) -> dict[str, Any]:
        """Stored trials, newest first, with advisor history's filters; `more`: whether the
        limit left some out."""
        results, more = matching(store, request.query_params)
        return {"trials": [r.to_dict() for r in results], "more": more}

    @api.get("/trials/{trial_id}")
    def trial(trial_id: Id) -> dict[str, Any]:
        """One stored trial, as advisor show --json prints it."""
        return queries.stored_trial(store, trial_id).to_dict()

    @api.get("/sweeps")
    def sweeps() -> list[dict[str, Any]]:
        """Every stored sweep, newest first, with how many trials it used."""
        return [{**dataclasses.asdict(s), "trials": n} for s, n in store.sweeps()]

    @api.get("/sweeps/{sweep_id}")
    def sweep(sweep_id: Id) -> dict[str, Any]:
        """One sweep: its trials in order, and the recommendation they give for its target."""
        found, used = queries.stored_sweep(store, sweep_id)
        return {
            **dataclasses.asdict(found),
            "trials": [{"trial": r.to_dict(), "reused": reused} for r, reused in used],
            "recommendation": queries.sweep_recommendation(found, used).to_dict(),
        }

    @api.get("/recommend")
    def recommend(
        request: Request,
        model: Annotated[str, Query(description="a stored model's name")] = "",
        gpu: Annotated[str | None, Query(description="a GPU profile: a100_40gb, h200")] = None,
        memory: Annotated[str | None, Query(description="a budget: 24GiB (wins over gpu)")] = None,
        margin: Annotated[str | None, Query(description="fraction kept free")] = None,
        effective_batch_size: str | None = None,
        device: Annotated[str, Query(description="cuda or cpu")] = "cuda",
    ) -> dict[str, Any]:
        """The fastest stored setting of a model that fits a GPU, from history alone (among
        the trials of the model's workload measured last)."""
        return queries.recommendation(store, request.query_params).to_dict()

    return api


def matching(store: Store, given: Any) -> tuple[list[TrialResult], bool]:
    """history's filters from a request's query: DEFAULT_LIMIT trials, at most MOST."""
    return queries.trial_query(given, DEFAULT_LIMIT, most=MOST).run(store)
