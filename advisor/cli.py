"""The `advisor` command: verbs over the functions of the other modules, and one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from advisor import report
from advisor.config import ConfigError, MeasureConfig, load, trial_spec
from advisor.result import Status
from advisor.runner import run_trial
from advisor.spec import SpecError
from advisor.store.store import Store, StoreError

app = typer.Typer(
    help="Measure where GPU memory and time go in real PyTorch training steps.\n\n"
    "Settings are Hydra overrides: advisor run model=resnet50 batch_size=128 precision=bf16",
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
      advisor run model=gpt2 batch_size=8 precision=bf16 checkpointing=blocks
      advisor run model=resnet50 batch_size=2 device=cpu plot=breakdown.png
    \b
    Knobs: model=resnet50|vit_b_16|gpt2|tiny_mlp|tiny_cnn|tiny_gpt2 (or model._target_=...),
      batch_size=N grad_accum=N checkpointing=none|blocks precision=fp32|tf32|bf16|fp16
      optimizer=sgd|sgd_momentum|adam|adamw|adamw_fused channels_last=true|false
      compile=true|false expandable_segments=true|false device=auto|cuda|cpu
      memory_cap=BYTES timeout_s=S db_url=URL plot=FILE.png
    Exit status: 0 when measured (an OOM is a measurement), 1 if the trial crashed or timed out.
    """
    try:
        cfg = load(overrides or [])
        spec = trial_spec(cfg)
    except (ConfigError, SpecError) as error:
        fail(str(error))
    try:
        store = Store(cfg.db_url)
    except StoreError as error:
        fail(str(error), code=1)
    settings = MeasureConfig(**cfg.measure)
    with err.status(
        f"measuring {spec.model.name} (batch {spec.batch_size}) on {spec.device.value}"
    ):
        result = store.add(run_trial(spec, settings, cfg.timeout_s))
    device_memory = result.environment.device_memory_bytes if result.environment else None
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        out.print(report.trial_report(result, device_memory))
    if cfg.plot and result.memory is not None:
        report.save_memory_png(result, device_memory, Path(cfg.plot))
        err.print(f"memory breakdown drawn in {cfg.plot}", highlight=False)
    if result.status in (Status.crashed, Status.timeout):
        raise typer.Exit(1)


HISTORY_FILTERS = ("model", "status", "hash", "limit", "db_url")


@app.command()
def history(filters: Overrides = None, as_json: JsonFlag = False) -> None:
    """List stored trials, newest first.

    \b
    Filters, KEY=VALUE: model=NAME status=ok|oom|crashed|timeout hash=SPEC_HASH
      limit=N (default 20, 0 for all) db_url=URL
    Examples:
      advisor history
      advisor history model=resnet50 status=ok --json
    """
    given: dict[str, str] = {}
    for item in filters or []:
        key, sep, value = item.partition("=")
        if not sep or key not in HISTORY_FILTERS:
            keys = ", ".join(HISTORY_FILTERS)
            fail(f"unknown filter {item!r}; use KEY=VALUE with KEY one of {keys}")
        given[key] = value
    if given.get("status") and given["status"] not in {s.value for s in Status}:
        fail(f"unknown status {given['status']!r}; choose one of ok, oom, crashed, timeout")
    try:
        limit = int(given.get("limit", "20"))
    except ValueError:
        fail(f"limit must be a whole number, got {given['limit']!r}")
    try:
        store = Store(given.get("db_url"))
    except StoreError as error:
        fail(str(error), code=1)
    results = store.trials(
        model=given.get("model"),
        status=given.get("status"),
        spec_hash=given.get("hash"),
        limit=limit or None,
    )
    if as_json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    elif not results:
        err.print("no stored trials match; measure one with: advisor run model=...")
    else:
        out.print(report.history_table(results))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("advisor: interrupted")
        sys.exit(130)
