"""The `advisor` command: verbs over the functions of the other modules, and one-line errors."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from advisor import extras, queries
from advisor.errors import AdvisorError, StoreError
from advisor.recommendation import Against
from advisor.report import plots, tables, terminal
from advisor.result import Status, TrialResult
from advisor.spec import Device
from advisor.store import schema, transfer
from advisor.store.store import Store, existing

app = typer.Typer(
    help="Measure where GPU memory and time go in real PyTorch training steps.\n\n"
    "Settings are Hydra overrides: advisor run model=resnet50 batch_size=128 precision=bf16\n\n"
    "Your own model: advisor sweep workload=path/to/file.py:function (see README, 'Your own "
    "model')",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)
out = Console()

Overrides = Annotated[
    list[str] | None,
    typer.Argument(help="Hydra overrides, KEY=VALUE", show_default=False),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON to stdout instead of tables.")]


def fail(message: str, code: int = 2) -> NoReturn:
    err.print(f"advisor: {message}", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(code)


@app.command()
def run(overrides: Overrides = None, as_json: JsonFlag = False) -> None:
    """Measure one training setting in its own process, store it, show the breakdown.

    \b
    Examples:
      advisor run model=resnet50 batch_size=128 precision=bf16
      advisor run workload=my_model.py:workload batch_size=16 precision=bf16
      advisor run model=gpt2 batch_size=8 precision=bf16 checkpointing=blocks
      advisor run model=resnet50 batch_size=2 device=cpu plot=breakdown.png
    \b
    Knobs: model=resnet50|vit_b_16|gpt2|bert|convnext_tiny|tiny_* (bundled)
      or workload=path/to/file.py:function (your own; it runs your code)
      batch_size=N grad_accum=N checkpointing=none|blocks
      precision=default|fp32|tf32|bf16|fp16 channels_last=true|false
      optimizer=sgd|sgd_momentum|adam|adamw|adamw_fused compile=true|false
      expandable_segments=true|false device=auto|cuda|cpu memory_cap=BYTES
      timeout_s=S db_url=URL plot=FILE.png memory_snapshot=FILE.pickle
      (torch's memory snapshot of the build and warm-up, for
      pytorch.org/memory_viz; CUDA only)
    Exit status: 0 when measured (an OOM is a measurement), 1 if the trial
      crashed or timed out (or the database cannot be opened), 2 for a setting
      or workload to fix (nothing stored).
    """
    from advisor import verbs  # (torch: only the verbs that measure import it

    cfg = verbs.configure(overrides=overrides or [], one_trial=True)
    _check_plot(cfg.plot)
    spec = verbs.trial_spec(cfg)
    if str(cfg.device) == "auto" and spec.device is Device.cpu:
        err.print("no CUDA GPU here: measuring on the CPU (device=cpu says you mean it)")
    with err.status(f"measuring {terminal.describe_spec(spec)}"):
        result = verbs.measure(spec, cfg)
    device_memory = result.environment.device_memory_bytes if result.environment else None
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        out.print(terminal.trial_report(result, device_memory))
    if cfg.plot and result.memory is not None:
        plots.save_memory_png(result, device_memory, Path(cfg.plot))
        err.print(f"memory breakdown drawn in {cfg.plot}", highlight=False)
    if (snapshot := tables.snapshot_line(result)) is not None:
        err.print(snapshot, highlight=False)
    if result.status in (Status.crashed, Status.timeout):
        raise typer.Exit(1)


@app.command()
def sweep(overrides: Overrides = None, as_json: JsonFlag = False) -> None:
    """Search the training settings for the fastest that fits a GPU, measuring each for real.
    Your settings (or the defaults) are measured first, and the answer is held against them.

    \b
    Examples:
      advisor sweep model=resnet50
      advisor sweep workload=my_model.py:workload gpu.memory=24GiB batch_size=16
      advisor sweep model=resnet50 gpu=a100_40gb effective_batch_size=256
      advisor sweep model=gpt2 gpu.memory=40GiB trials=20 space.precision=[bf16]
    \b
    Target: gpu=auto (the local GPU), gpu=PROFILE (conf/gpu) or gpu.memory=SIZE;
      margin=0.05 keeps that fraction free.
    Budget: minutes=7 (the answer is due by then: no trial starts that would end
      later; minutes=null for none), trials=N (measured specs), patience=N; it
      also stops once no setting left is predicted 2% faster than the best.
      workers=auto runs one trial at a time on each visible GPU (workers=N: the
      first N; on the CPU, N trials at once share the cores).
    Space: space.batch_sizes=[...] space.grad_accum=[...] space.precision=[...]
      space.checkpointing=[...] space.channels_last=[...] space.compile=[...]
      space.expandable_segments=[...] space.optimizers=[...] (default: the
      implementations of optimizer=)
    Running the same command again resumes an interrupted sweep (or, while it
      runs elsewhere on the same database, joins it). The plot goes beside a
      SQLite database (plots/) unless plot=FILE.png names it.
    """
    given = overrides or []
    from advisor import verbs
    from advisor.report.progress import SweepDisplay
    from advisor.search.answer import NEAR

    cfg = verbs.configure(overrides=given)
    _check_plot(cfg.plot)
    with SweepDisplay(err, cfg.trials, cfg.minutes) as display:
        events = verbs.SweepEvents(
            started=display.started,
            step=display.step,
            measuring=display.measuring,
            phase=display.phase,
        )
        outcome = verbs.sweep(overrides=given, events=events)
    err.print(f"stopped: {outcome.stop_reason}", highlight=False)
    rec = outcome.recommendation
    plot = Path(cfg.plot) if cfg.plot else Store(cfg.db_url).sweep_plot(outcome.sweep_id)
    if plot is not None and not extras.installed("matplotlib"):  # (plot= was checked up front)
        err.print("no plot drawn: pip install 'advisor[plots]' to draw one", highlight=False)
        plot = None
    if rec.considered and plot is not None:
        plot.parent.mkdir(parents=True, exist_ok=True)
        plots.save_sweep_png(outcome.results, rec, plot)
    largest = terminal.largest_batches(outcome.largest_batches)
    if as_json:
        payload = {
            "sweep": {
                "id": outcome.sweep_id,
                "stop_reason": outcome.stop_reason,
                "plot": str(plot) if plot else None,
                "elapsed_s": outcome.elapsed_s,
                "time_to_98_s": outcome.time_to_answer_s,
                "workers": outcome.workers,
            },
            "baseline": outcome.baseline.to_dict() if outcome.baseline else None,
            "versus_baseline": _as_dict(outcome.against_baseline),
            **rec.to_dict(),
            "confirmation": outcome.confirmation.to_dict() if outcome.confirmation else None,
            "repeats": [r.to_dict() for r in outcome.repeats],
            "disagreement": outcome.disagreement,
            "largest_batches": largest,
        }
        print(json.dumps(payload, indent=2))
    else:
        out.print(terminal.recommendation_report(rec, outcome.confirmation))
        out.print(terminal.repeats_line(outcome.repeats, outcome.disagreement))
        out.print(terminal.baseline_line(outcome.baseline, outcome.against_baseline, rec))
        out.print(terminal.timing_line(outcome.elapsed_s, outcome.time_to_answer_s, NEAR))
        if largest:
            out.print(terminal.largest_batches_table(largest, outcome.target))
    if rec.considered and plot is not None:
        err.print(f"plot of throughput against memory: {plot}", highlight=False)
    if rec.best is None:
        raise typer.Exit(1)


@app.command(name="recommend")
def recommend_command(overrides: Overrides = None, as_json: JsonFlag = False) -> None:
    """Answer from history alone, without a GPU: the fastest stored setting that fits.

    \b
    Examples:
      advisor recommend model=resnet50 gpu=a100_40gb effective_batch_size=256
      advisor recommend workload=my_model.py:workload gpu.memory=24GiB --json
    Throughput comes from whatever GPU measured it (the output says which);
    whether a setting fits transfers between GPUs with the same torch version.
    """
    from advisor import verbs

    rec = verbs.recommend(overrides=overrides or [])
    if as_json:
        print(json.dumps(rec.to_dict(), indent=2))
    else:
        out.print(terminal.recommendation_report(rec, None))
    if rec.best is None:
        raise typer.Exit(1)


@app.command(name="estimate")
def estimate_command(overrides: Overrides = None, as_json: JsonFlag = False) -> None:
    """Predict the memory breakdown of a setting without a GPU, and the largest batch that fits.

    \b
    Examples:
      advisor estimate model=gpt2 batch_size=16 precision=bf16 gpu=rtx4090
      advisor estimate workload=my_model.py:workload batch_size=8 gpu.memory=24GiB
      advisor estimate model=resnet50 batch_size=256 checkpointing=blocks gpu=l4
    Runs one training step on fake tensors (nothing is allocated), emulating
    what the GPU runs (CUDA autocast, fused attention); calibrates on measured
    history of the same workload. Takes every knob of advisor run; gpu= names
    the target (default: the local GPU).
    """
    with err.status("estimating on fake tensors"):
        from advisor import verbs

        result = verbs.estimate(overrides=overrides or [])
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        out.print(terminal.estimate_report(result))


@app.command()
def history(filters: Overrides = None, as_json: JsonFlag = False) -> None:
    """List stored trials, newest first.

    \b
    Filters, KEY=VALUE: model=NAME workload=FILE.py:FUNCTION (its path's end)
      status=ok|oom|crashed|timeout gpu=TEXT (part of the device's name)
      torch=VERSION (2.11: any 2.11.x) since=DATE until=DATE (ISO, UTC:
      2026-12-01 or 2026-12-01T14:00) sweep=ID hash=SPEC_HASH
      limit=N (default 20, 0 for all) db_url=URL
    Examples:
      advisor history
      advisor history model=resnet50 status=ok gpu=h200 since=2026-12-01 --json
    """
    results = _matching(filters or [], default_limit=20)
    if as_json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    elif not results:
        err.print("no stored trials match; measure one with: advisor run model=...")
    else:
        out.print(tables.history_table(results, out.width))


@app.command()
def export(filters: Overrides = None) -> None:
    """Write stored trials to a file: out=FILE.json (advisor import reads it back, into any
    database), out=FILE.csv (a column per figure, for spreadsheets) or out=FILE.parquet (the
    same columns, typed, for pandas and the like; pip install 'advisor[parquet]').

    \b
    Filters as advisor history's (model=, gpu=, since=, sweep=, ...); all that
    match, unless limit=N.
      advisor export out=h200.json gpu=h200
    """
    outs = [item for item in filters or [] if item.startswith("out=")]
    if len(outs) != 1 or outs[0] == "out=":
        fail("export needs out=FILE.json, out=FILE.csv or out=FILE.parquet, once")
    path = Path(outs[0].removeprefix("out="))
    if not path.parent.is_dir():
        fail(f"out={path}: there is no folder {path.parent}; create it or name another file")
    results = _matching([item for item in filters or [] if item not in outs], default_limit=0)
    transfer.export(results, path)
    err.print(f"{len(results)} trial(s) written to {path}", highlight=False)


@app.command(name="import")
def import_command(source: str, options: Overrides = None) -> None:
    """Store the trials of an export (FILE.json) or of another advisor database (a SQLite file
    or a URL) here, each once: one already stored (its spec, measured at the same moment) is
    skipped. Sweeps stay behind.

    \b
    advisor import h200.json [db_url=URL]
    advisor import other/advisor.sqlite
    """
    store = Store(_only_db_url(options))
    stored, skipped = transfer.import_into(store, source)
    err.print(f"{stored} trial(s) stored, {skipped} already here", highlight=False)


def _matching(filters: list[str], default_limit: int) -> list[TrialResult]:
    """The stored trials that history's filters select, newest first; a limit that leaves some
    out says so on stderr (where a table or JSON does not)."""
    given: dict[str, str] = {}
    keys = (*queries.FILTERS, "db_url")
    for item in filters:
        key, sep, value = item.partition("=")
        if not sep or key not in keys:
            fail(f"unknown filter {item!r}; use KEY=VALUE with KEY one of {', '.join(keys)}")
        given[key] = value
    url = given.pop("db_url", None)
    results, more = queries.trial_query(given, default_limit).run(existing(url))
    if more:
        err.print(f"the newest {len(results)} shown; more match (limit=0 for all)", highlight=False)
    return results


@app.command()
def show(trial_id: str, options: Overrides = None, as_json: JsonFlag = False) -> None:
    """Show one stored trial: its breakdown, its rate and spread, where it ran.

    \b
    advisor show 12 [db_url=URL]   (ids: advisor history)
    """
    if not _an_id(trial_id):
        fail(f"a trial's id is a whole number (advisor history lists them), got {trial_id!r}")
    store = existing(_only_db_url(options))
    result = store.get(int(trial_id))
    if result is None:
        fail(f"no trial {trial_id} in {schema.shown(store.url)}; advisor history lists the "
             "stored ones")  # fmt: skip
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    out.print(tables.trial_view(result))


@app.command()
def compare(ids: Overrides = None, as_json: JsonFlag = False) -> None:
    """Show stored trials side by side, marking what differs: settings, figures and versions.

    \b
    advisor compare 12 15 [21 ...] [db_url=URL]   (ids: advisor history)
    """
    given = [i for i in ids or [] if "=" not in i]
    if len(given) < 2 or not all(_an_id(i) for i in given):
        fail(
            "compare takes two trial ids or more (advisor history lists them); got "
            f"{' '.join(given) or 'none'}"
        )
    store = existing(_only_db_url([i for i in ids or [] if "=" in i]))
    results = [store.get(int(i)) for i in given]
    missing = [i for i, r in zip(given, results, strict=True) if r is None]
    if missing:
        fail(f"no trial {', '.join(missing)} in {schema.shown(store.url)}; advisor history "
             "lists the stored ones")  # fmt: skip
    found = [r for r in results if r is not None]
    if as_json:
        print(json.dumps([r.to_dict() for r in found], indent=2))
    else:
        out.print(tables.compare_table(found))


@app.command()
def sweeps(options: Overrides = None, as_json: JsonFlag = False) -> None:
    """List the stored sweeps, newest first, with the trials each used.

    \b
    advisor sweeps [db_url=URL]   (a sweep's trials: advisor history sweep=ID)
    """
    found = existing(_only_db_url(options)).sweeps()
    if as_json:
        rows = [{**dataclasses.asdict(s), "trials": n} for s, n in found]
        print(json.dumps(rows, indent=2))
    elif not found:
        err.print("no stored sweeps; start one with: advisor sweep model=...")
    else:
        out.print(tables.sweeps_table(found))


@app.command()
def serve(
    options: Overrides = None,
    port: Annotated[int, typer.Option(help="The port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="The address to listen on (0.0.0.0: every one).")] = (
        "127.0.0.1"
    ),
) -> None:
    """Serve the stored results, read-only: a dashboard (trials, breakdowns, sweeps,
    recommend) and a JSON API under /api/v1 (its OpenAPI document: /openapi.json).

    \b
    advisor serve [--port 8000] [--host 127.0.0.1] [db_url=URL]
    Nothing it answers measures, builds a model or imports: it only reads.
    """
    for library in ("fastapi", "uvicorn", "jinja2"):
        extras.require(library, "advisor serve")
    import uvicorn

    from advisor.service import server

    server.check_listening(host, port)
    store = server.open_store(_only_db_url(options))
    # one line, however long the database's path: the address stays whole (and clickable)
    err.print(f"serving {schema.shown(store.url)} read-only on http://{host}:{port}/ "
              "(Ctrl-C stops)", highlight=False, soft_wrap=True)  # fmt: skip
    uvicorn.run(server.create_app(store), host=host, port=port, log_level="warning")


def _an_id(text: str) -> bool:
    """A trial's id as the database can hold it (SQL's 64-bit integers)."""
    return text.isascii() and text.isdigit() and int(text) <= queries.LARGEST_ID


def _only_db_url(options: list[str] | None) -> str | None:
    """The db_url=URL of a command that takes nothing else."""
    url = None
    for item in options or []:
        key, sep, value = item.partition("=")
        if key != "db_url" or not sep:
            fail(f"unknown option {item!r}; this command takes db_url=URL only")
        url = value
    return url


def _check_plot(plot: str | None) -> None:
    """A plot that could not be written is said before anything is measured, not after."""
    if not plot:
        return
    extras.require("matplotlib", f"plot={plot}")
    folder = Path(plot).parent
    if not folder.is_dir():
        fail(f"plot={plot}: there is no folder {folder}; create it or name another file")
    if not os.access(folder, os.W_OK):
        fail(f"plot={plot}: cannot write into {folder}; name a file in a folder you can write")


def _as_dict(versus: Against | None) -> dict[str, object] | None:
    return versus.to_dict() if versus else None


# The database: 1, as for a trial that crashed; the rest of AdvisorError is a usage error: 2.
EXIT_CODES: dict[type[AdvisorError], int] = {StoreError: 1}


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM as Ctrl-C: the running trials end, nothing half-stored


def main() -> None:
    signal.signal(signal.SIGTERM, _terminated)
    try:
        app()
    except AdvisorError as error:
        err.print(f"advisor: {error}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(EXIT_CODES.get(type(error), 2))
    except KeyboardInterrupt:
        err.print("advisor: interrupted")
        sys.exit(130)
