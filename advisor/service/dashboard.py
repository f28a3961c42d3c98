"""advisor serve's pages: the trials with history's filters, one trial's memory breakdown, the
sweeps, one sweep's throughput against memory, and a recommendation form. Pages are drawn on
the server (Jinja2 templates in advisor/service/templates; the sweep's plot is matplotlib's SVG, the
same figure as its PNG), so the dashboard needs no script and nothing from the network. The
figures in words are the terminal's own, exported by rich."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from rich.console import Console, RenderableType

from advisor import extras, gpus, queries
from advisor.communication import as_followed
from advisor.errors import ConfigError
from advisor.report import plots, sweep_report, tables, terminal
from advisor.result import Kind, Memory
from advisor.service import http_api
from advisor.store import schema
from advisor.store.store import Store

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")
TEMPLATES.env.globals.update(describe=terminal.describe, gib=terminal.gib)
HINTS = {"model": "resnet50", "workload": "my_model.py:workload", "status": "ok", "gpu": "h200",
         "torch": "2.11", "since": "2026-12-01", "sweep": "id", "kind": "training",
         "gpus": "8", "limit": "100"}  # fmt: skip
FILTER_HINTS = [(key, HINTS.get(key, "")) for key in queries.FILTERS]  # the form's fields


@dataclasses.dataclass(frozen=True)
class BarPart:
    label: str
    size: str
    colour: str
    share: float  # of the bar's scale


@dataclasses.dataclass(frozen=True)
class Bar:
    """The stacked breakdown, as terminal.memory_bar draws it in the terminal."""

    parts: list[BarPart]
    peak: str
    peak_share: float
    scale_label: str


def router(store: Store) -> APIRouter:
    pages = APIRouter(default_response_class=HTMLResponse, include_in_schema=False)

    def page(request: Request, name: str, **context: Any) -> HTMLResponse:
        return TEMPLATES.TemplateResponse(
            request, name, {"database": schema.shown(store.url), **context},
            status_code=400 if context.get("error") else 200,
        )  # fmt: skip

    @pages.get("/")
    def trials(request: Request) -> HTMLResponse:
        given = dict(request.query_params)
        message: str | None = None
        try:
            results, more = http_api.matching(store, given)
        except ConfigError as error:
            results, more, message = [], False, str(error)
        return page(request, "trials.html", filters=FILTER_HINTS, given=given,
                    results=results, more=more, error=message)  # fmt: skip

    @pages.get("/trials/{trial_id}")
    def trial(request: Request, trial_id: http_api.Id) -> HTMLResponse:
        result = queries.stored_trial(store, trial_id)
        env = result.environment
        device_memory = env.device_memory_bytes if env else None
        bar = memory_bar(result.memory, device_memory) if result.memory else None
        followed = store.get(result.follows) if result.follows is not None else None
        if followed is not None:  # (a rank's: held to as its whole job)
            followed = as_followed(followed, result)
        if result.kind is Kind.training:
            bar = None  # (its activations are not told apart: a stack would be wrong)
        return page(request, "trial.html", result=result, bar=bar,
                    report=as_html(tables.trial_view(result, followed)))  # fmt: skip

    @pages.get("/sweeps")
    def sweeps(request: Request) -> HTMLResponse:
        return page(request, "sweeps.html", sweeps=store.sweeps())

    @pages.get("/sweeps/{sweep_id}")
    def sweep(request: Request, sweep_id: http_api.Id) -> HTMLResponse:
        found, used = queries.stored_sweep(store, sweep_id)
        rec = queries.sweep_recommendation(found, used)
        plot, no_plot = None, None
        if not extras.installed("matplotlib"):
            no_plot = "the plot needs matplotlib: pip install 'advisor[plots]'"
        else:
            svg = io.BytesIO()
            plots.save_sweep([r for r, _ in used], rec, svg, "svg")
            plot = svg.getvalue().decode()
            plot = plot[plot.index("<svg") :]  # inline: without the XML prologue and doctype
        return page(request, "sweep.html", sweep=found, used=used, plot=plot, no_plot=no_plot,
                    report=as_html(sweep_report.recommendation_report(rec, None)))  # fmt: skip

    @pages.get("/recommend")
    def recommend(request: Request) -> HTMLResponse:
        given = dict(request.query_params)
        shown, message = None, None
        if given.get("model"):
            try:
                rec = queries.recommendation(store, given)
            except ConfigError as error:
                message = str(error)
            else:
                shown = as_html(sweep_report.recommendation_report(rec, None))
        return page(request, "recommend.html", given=given, models=store.model_names(),
                    gpus=list(gpus.load_profiles()), report=shown, error=message)  # fmt: skip

    return pages


def error_page(
    request: Request, status: int, message: str, headers: Mapping[str, str] | None = None
) -> HTMLResponse:
    """A 4xx or 503 as a page (the JSON API answers its own)."""
    return TEMPLATES.TemplateResponse(
        request, "error.html", {"status": status, "message": message, "database": ""},
        status_code=status, headers=headers,
    )  # fmt: skip


def memory_bar(memory: Memory, device_memory: int | None) -> Bar:
    """Against the GPU's memory, or the largest figure on a CPU (as the terminal's bar)."""
    sizes, scale = terminal.stacked(memory, device_memory)
    parts = [BarPart(label, terminal.gib(size), terminal.HEX[colour], size / scale)
             for label, size, colour in sizes if size > 0]  # fmt: skip
    scale_label = f"the GPU's {terminal.gib(device_memory)}" if device_memory else "the largest"
    return Bar(parts=parts, peak=terminal.gib(memory.device_peak_bytes),
               peak_share=memory.device_peak_bytes / scale, scale_label=scale_label)  # fmt: skip


def as_html(*renderables: RenderableType) -> str:
    """What the terminal shows, as HTML with its colours inline. Names are text, never markup:
    rich writes a link's target into the HTML as it is (issue 30: javascript: URLs)."""
    console = Console(record=True, width=120, file=io.StringIO(), color_system="truecolor",
                      markup=False)  # fmt: skip
    for renderable in renderables:
        console.print(renderable)
    return console.export_html(inline_styles=True, code_format='<pre class="rich">{code}</pre>')
