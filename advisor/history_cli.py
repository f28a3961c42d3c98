"""The `advisor` verbs over what is stored, which measure nothing: history, show, compare,
sweeps, export, import, and serve (the same, as a dashboard and a JSON API). cli.py adds them
to the command beside the verbs that measure."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated

import typer

from advisor import extras, queries
from advisor.communication import as_followed
from advisor.console import JsonFlag, Overrides, err, fail, only_db_url, out
from advisor.report import tables
from advisor.result import TrialResult
from advisor.store import schema, transfer
from advisor.store.store import existing

history_commands = typer.Typer()


@history_commands.command()
def history(filters: Overrides = None, as_json: JsonFlag = False) -> None:
    """List stored trials, newest first.

    \b
    Filters, KEY=VALUE: model=NAME workload=FILE.py:FUNCTION (its path's end)
      status=ok|oom|crashed|timeout gpu=TEXT (part of the device's name)
      torch=VERSION (2.11: any 2.11.x) since=DATE until=DATE (ISO, UTC:
      2026-12-01 or 2026-12-01T14:00) sweep=ID hash=SPEC_HASH
      kind=measured|training (advisor's measurements, your training runs)
      gpus=N (a rank of a job on N GPUs)
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


@history_commands.command()
def export(filters: Overrides = None) -> None:
    """Write stored trials to a file: out=FILE.json (advisor import reads it back, into any
    database), out=FILE.csv (a column per figure, for spreadsheets) or out=FILE.parquet (the
    same columns, typed, for pandas and the like; pip install 'advisor[parquet]').

    \b
    Filters as advisor history's (model=, gpu=, since=, sweep=, ...); all that
    match, unless limit=N; advisor's measurements only, not training runs.
      advisor export out=h200.json gpu=h200
    """
    outs = [item for item in filters or [] if item.startswith("out=")]
    if len(outs) != 1 or outs[0] == "out=":
        fail("export needs out=FILE.json, out=FILE.csv or out=FILE.parquet, once")
    path = Path(outs[0].removeprefix("out="))
    if not path.parent.is_dir():
        fail(f"out={path}: there is no folder {path.parent}; create it or name another file")
    given = [item for item in filters or [] if item not in outs]
    if any(item.startswith("kind=") and item != "kind=measured" for item in given):
        fail("export carries advisor's measurements (a training run's link names an id of this "
             "database): leave out kind=")  # fmt: skip
    results = _matching([*given, "kind=measured"], default_limit=0)
    transfer.export(results, path)
    err.print(f"{len(results)} trial(s) written to {path}", highlight=False)


@history_commands.command(name="import")
def import_command(source: str, options: Overrides = None) -> None:
    """Store the trials of an export (FILE.json) or of another advisor database (a SQLite file
    or a URL) here, each once: one already stored (its spec, measured at the same moment) is
    skipped. Sweeps stay behind.

    \b
    advisor import h200.json [db_url=URL]
    advisor import other/advisor.sqlite
    """
    stored, skipped = transfer.import_into(source, only_db_url(options))
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


@history_commands.command()
def show(trial_id: str, options: Overrides = None, as_json: JsonFlag = False) -> None:
    """Show one stored trial: its breakdown, its rate and spread, where it ran (a training run:
    beside the measured trial it followed).

    \b
    advisor show 12 [db_url=URL]   (ids: advisor history)
    """
    if not _an_id(trial_id):
        fail(f"a trial's id is a whole number (advisor history lists them), got {trial_id!r}")
    store = existing(only_db_url(options))
    result = store.get(int(trial_id))
    if result is None:
        fail(f"no trial {trial_id} in {schema.shown(store.url)}; advisor history lists the "
             "stored ones")  # fmt: skip
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    followed = store.get(result.follows) if result.follows is not None else None
    if followed is not None:  # (a rank's: held to as its whole job)
        followed = as_followed(followed, result)
    out.print(tables.trial_view(result, followed))


@history_commands.command()
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
    store = existing(only_db_url([i for i in ids or [] if "=" in i]))
    results = [store.get(int(i)) for i in given]
    missing = [i for i, r in zip(given, results, strict=True) if r is None]
    if missing:
        fail(f"no trial {', '.join(missing)} in {schema.shown(store.url)}; advisor history "
             "lists the stored ones")  # fmt: skip
    found = [r for r in results if r is not None]
    runs = {r.follows: r for r in found if r.follows is not None}
    found = [as_followed(r, runs[r.id]) if r.id in runs else r for r in found]
    if as_json:
        print(json.dumps([r.to_dict() for r in found], indent=2))
    else:
        out.print(tables.compare_table(found))


@history_commands.command()
def sweeps(options: Overrides = None, as_json: JsonFlag = False) -> None:
    """List the stored sweeps, newest first, with the trials each used.

    \b
    advisor sweeps [db_url=URL]   (a sweep's trials: advisor history sweep=ID)
    """
    found = existing(only_db_url(options)).sweeps()
    if as_json:
        rows = [{**dataclasses.asdict(s), "trials": n} for s, n in found]
        print(json.dumps(rows, indent=2))
    elif not found:
        err.print("no stored sweeps; start one with: advisor sweep model=...")
    else:
        out.print(tables.sweeps_table(found))


@history_commands.command()
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
    store = server.open_store(only_db_url(options))
    # one line, however long the database's path: the address stays whole (and clickable)
    err.print(f"serving {schema.shown(store.url)} read-only on http://{host}:{port}/ "
              "(Ctrl-C stops)", highlight=False, soft_wrap=True)  # fmt: skip
    uvicorn.run(server.create_app(store), host=host, port=port, log_level="warning")


def _an_id(text: str) -> bool:
    """A trial's id as the database can hold it (SQL's 64-bit integers)."""
    return text.isascii() and text.isdigit() and int(text) <= queries.LARGEST_ID
