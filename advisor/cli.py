"""The `advisor` command: verbs over the functions of the other modules, and one-line errors."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from advisor import gpus, report, search, study
from advisor.config import ConfigError, MeasureConfig, load, trial_spec
from advisor.estimate import Estimator, estimate
from advisor.recommend import recommend
from advisor.result import Status, TrialResult
from advisor.runner import run_trial
from advisor.space import space_of
from advisor.spec import Device, SpecError, TrialSpec
from advisor.store.store import Store, StoreError, Sweep, study_url
from advisor.target import target_of, trial_cap

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


def open_store(url: str | None) -> Store:
    """The results database, or a one-line error before anything runs."""
    try:
        return Store(url)
    except StoreError as error:
        fail(str(error), code=1)


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
    store = open_store(cfg.db_url)
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


@app.command()
def sweep(overrides: Overrides = None, as_json: JsonFlag = False) -> None:
    """Search the training settings for the fastest that fits a GPU, measuring each for real.

    \b
    Examples:
      advisor sweep model=resnet50
      advisor sweep model=resnet50 gpu=a100_40gb effective_batch_size=256
      advisor sweep model=gpt2 gpu.memory=40GiB trials=20 space.precision=[bf16]
    \b
    Target: gpu=auto (the local GPU), gpu=PROFILE (conf/gpu), or gpu.memory=SIZE; margin=0.05
      keeps that fraction free. Budget: trials=N (measured specs), minutes=M, patience=N;
      it also stops once no setting left is predicted 3% faster than the best.
    Space: space.batch_sizes=[...] space.grad_accum=[...] space.precision=[...]
      space.checkpointing=[...] space.optimizers=[...] (default: implementations of optimizer=)
      space.channels_last=[...] space.compile=[...] space.expandable_segments=[...]
    Running the same command again resumes an interrupted sweep; plot=FILE.png names the plot.
    """
    overrides = overrides or []
    try:
        cfg = load(overrides)
        base = trial_spec(cfg)
        target = target_of(cfg, base.device)
        local = gpus.local_gpu() if base.device is Device.cuda else None
        cap = trial_cap(target, local.memory_bytes if local else None)
        if base.memory_cap_bytes is None and cap is not None:
            base = dataclasses.replace(base, memory_cap_bytes=cap)
        space = space_of(cfg, overrides, base)
    except (ConfigError, SpecError) as error:
        fail(str(error))
    store = open_store(cfg.db_url)
    device_name, torch_version = local_device(base.device)
    backend = search.WorkerBackend(
        store, MeasureConfig(**cfg.measure), cfg.timeout_s, device_name, torch_version
    )
    key = study.sweep_key(space, target, device_name, torch_version)
    record = store.open_sweep(
        Sweep(
            key,
            base.model.name,
            target.name,
            target.memory_bytes,
            target.margin,
            space.effective_batch_size,
        )
    )
    assert record.id is not None
    sweep_id = record.id
    optuna_study = study.open_study(cfg.study_db_url or study_url(), key)
    earlier = store.sweep_trials(sweep_id)  # what earlier runs of this sweep used
    err.print(
        f"sweep {sweep_id}: {base.model.name} on {device_name} for {target.name} "
        f"({space.size()} points in the space)"
        + (f", resuming with {len(earlier)} trials" if earlier else ""),
        highlight=False,
    )
    history = store.trials(model=base.model.name)
    sweeper = search.Sweeper(
        space,
        target,
        MeasuringBackend(backend),
        optuna_study,
        on_step=lambda progress, step: err.print(
            report.sweep_step_line(progress, step, cfg.trials), soft_wrap=True
        ),
        on_result=lambda result, reused: store.link(sweep_id, result.id or 0, reused),
        estimate=Estimator(history),
    )
    sweeper.resume(earlier)
    sweeper.warm_start(
        [r for r in history if r.environment and r.environment.device_name == device_name]
    )
    reason = sweeper.run(cfg.trials, cfg.minutes, cfg.patience)
    err.print(f"stopped: {reason}", highlight=False)
    results = list(sweeper.results.values())
    rec = recommend(results, target, space.effective_batch_size)
    confirmation = None
    while rec.best is not None and cap is not None:
        if rec.best.spec.memory_cap_bytes == cap:  # measured under the cap: confirmed
            confirmation = rec.best
            break
        with err.status(f"confirming under a cap of {report.gib(cap)}"):
            confirmation = search.confirm_under_cap(backend, rec.best, cap)
        store.link(sweep_id, confirmation.id or 0, False)
        if confirmation.status is Status.ok:
            break
        results = [r for r in results if r.spec.uncapped != rec.best.spec.uncapped]
        rec = recommend(results, target, space.effective_batch_size)
    store.finish_sweep(sweep_id, reason)
    plot = Path(cfg.plot or f"advisor-sweep-{sweep_id}.png")
    if rec.considered:
        report.save_sweep_png(results, rec, plot)
    largest = report.largest_batches(sweeper.largest_batches)
    if as_json:
        payload = {
            "sweep": {"id": sweep_id, "stop_reason": reason, "plot": str(plot)},
            **rec.to_dict(),
            "confirmation": confirmation.to_dict() if confirmation else None,
            "largest_batches": largest,
        }
        print(json.dumps(payload, indent=2))
    else:
        out.print(report.recommendation_report(rec, confirmation))
        if largest:
            out.print(report.largest_batches_table(largest, target))
    if rec.considered:
        err.print(f"plot of throughput against memory: {plot}", highlight=False)
    if rec.best is None:
        raise typer.Exit(1)


@app.command(name="recommend")
def recommend_command(overrides: Overrides = None, as_json: JsonFlag = False) -> None:
    """Answer from history alone, without a GPU: the fastest stored setting that fits.

    \b
    Examples:
      advisor recommend model=resnet50 gpu=a100_40gb effective_batch_size=256
      advisor recommend model=gpt2 gpu.memory=24GiB --json
    Throughput comes from whatever GPU measured it (the output says which); whether a setting
    fits transfers between GPUs with the same torch version.
    """
    try:
        given = overrides or []
        # nothing runs; the device says which measurements count (GPU ones unless told)
        cfg = load(
            given if any(o.startswith("device=") for o in given) else ["device=cuda", *given]
        )
        base = trial_spec(cfg)
        target = target_of(cfg, base.device)
    except (ConfigError, SpecError) as error:
        fail(str(error))
    store = open_store(cfg.db_url)
    history = [
        r
        for r in store.trials(model=base.model.name, status="ok")
        if r.spec.model == base.model and r.spec.device is base.device
    ]
    rec = recommend(history, target, cfg.effective_batch_size)
    if as_json:
        print(json.dumps(rec.to_dict(), indent=2))
    else:
        out.print(report.recommendation_report(rec, None))
    if rec.best is None:
        raise typer.Exit(1)


@app.command(name="estimate")
def estimate_command(overrides: Overrides = None, as_json: JsonFlag = False) -> None:
    """Predict the memory breakdown of a setting without a GPU, and the largest batch that fits.

    \b
    Examples:
      advisor estimate model=gpt2 batch_size=16 precision=bf16 gpu=rtx4090
      advisor estimate model=resnet50 batch_size=256 checkpointing=blocks gpu.memory=24GiB --json
    Runs one training step on fake tensors (nothing is allocated), emulating what the GPU runs
    (CUDA autocast, fused attention); calibrates on measured history of the same model. Takes
    every knob of advisor run; gpu= names the target (default: the local GPU).
    """
    try:
        cfg = load(["device=cuda", *(overrides or [])])  # the estimate is for a GPU
        spec = trial_spec(cfg)
        target = target_of(cfg, spec.device)
    except (ConfigError, SpecError) as error:
        fail(str(error))
    store = open_store(cfg.db_url)
    history = store.trials(model=spec.model.name, status="ok")
    with err.status(f"estimating {report.describe_spec(spec)} on fake tensors"):
        result = estimate(spec, target, history)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        out.print(report.estimate_report(result))


class MeasuringBackend:
    """Shows a spinner naming the spec while a worker measures it."""

    def __init__(self, backend: search.WorkerBackend) -> None:
        self.backend = backend

    def measure(self, spec: TrialSpec) -> TrialResult:
        with err.status(f"measuring {report.describe_spec(spec)}"):
            return self.backend.measure(spec)

    def measured_before(self, spec: TrialSpec) -> TrialResult | None:
        return self.backend.measured_before(spec)


def local_device(device: Device) -> tuple[str, str]:
    """The name the worker will report for this device, and torch's version (no CUDA init)."""
    import torch

    gpu = gpus.local_gpu() if device is Device.cuda else None
    return (gpu.name if gpu else gpus.cpu_name()), torch.__version__


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
    store = open_store(given.get("db_url"))
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
