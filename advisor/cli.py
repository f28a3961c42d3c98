"""The `advisor` command: verbs over the functions of the other modules, and one-line errors."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
from pathlib import Path

import typer
from rich.text import Text

from advisor import extras
from advisor.communication import modelled
from advisor.console import (
    JsonFlag,
    Overrides,
    err,
    fail,
    out,
    prints_to_stderr,
    replace_unencodable,
)
from advisor.emit.trainers import Trainer, require, trainer_of
from advisor.errors import (
    AdvisorError,
    ConfigError,
    EstimateError,
    StoreError,
    TrialNotKept,
    TrialsFolderError,
)
from advisor.history_cli import history_commands
from advisor.recommendation import Against, Recommendation, disagreement
from advisor.report import estimate_report, plots, sweep_report, tables, terminal
from advisor.result import Status
from advisor.store.store import Store

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
app.add_typer(history_commands)  # history, show, compare, sweeps, export, import, serve


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
      gpus=N strategy=ddp|fsdp|hsdp nodes=M (rank 0 of a job on N GPUs, on
      torch's fake process group: the rank's memory and compute, measured;
      the job's step, its communication modelled over gpu=NAME's link, or
      gpu.intra_node_busbw=GB/s gpu.inter_node_busbw=GB/s: nccl-tests' busbw)
      FSDP2's knobs: fsdp.reshard_after_forward=true|false
      fsdp.param_dtype=bf16|fp16|fp32 fsdp.reduce_dtype=bf16|fp16|fp32
    Exit status: 0 when measured (an OOM is a measurement), 1 if the trial
      crashed or timed out, or the database cannot be opened or written (one
      measured then waits in the spool, or is printed), 2 for a setting or
      workload to fix (nothing stored).
    """
    from advisor import verbs  # (torch: only the verbs that measure import it)
    from advisor.config import trial_spec

    with prints_to_stderr():
        cfg = verbs.configure(overrides=overrides or [], one_trial=True)
        _check_plot(cfg.plot)
        spec = trial_spec(cfg)
        # as Text: a status's str is read as markup, whatever the console says
        with err.status(Text(f"measuring {terminal.describe_spec(spec)}")):
            result = verbs.measure(spec, cfg)
    device_memory = result.environment.device_memory_bytes if result.environment else None
    job = modelled(result, cfg.gpu, cfg.nodes)  # (a rank's: the job's step, or why not)
    if as_json:
        shown = result.to_dict()
        if isinstance(job, str):  # (a rank's: the job's step, modelled, or why it is not)
            shown["job"] = {"not_modelled": job}
        elif job is not None:
            shown["job"] = dataclasses.asdict(job)
        print(json.dumps(shown, indent=2))
    else:
        out.print(terminal.trial_report(result, device_memory))
        out.print(terminal.job_lines(result, job))
    if cfg.plot and result.memory is not None:
        plots.save_memory_png(result, device_memory, Path(cfg.plot))
        err.print(f"memory breakdown drawn in {cfg.plot}", highlight=False)
    if (snapshot := tables.snapshot_line(result)) is not None:
        err.print(snapshot, highlight=False)
    if result.status in (Status.crashed, Status.timeout):
        said = result.failure.last_line if result.failure else ""
        fail(f"the trial {result.status.value}" + (f": {said}" if said else ""), code=1)


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
    emit=hf|lightning|accelerate|torch prints the answer as that trainer's
      configuration, ready to save (the report goes to stderr); --json adds it.
    A job on several GPUs: gpus=N (nodes=M) measures one rank of each setting,
      space.strategy=[ddp,fsdp,hsdp] searched (hsdp with nodes=2 or more), and
      ranks each by its job's step
      (communication modelled over gpu=NAME's link, or gpu.intra_node_busbw=
      GB/s); effective_batch_size counts all N; emit=torch prints the lines.
    """
    trainer, given = _emit_option(overrides or [])
    from advisor import verbs
    from advisor.report.progress import SweepDisplay
    from advisor.search.answer import NEAR

    with prints_to_stderr():
        cfg = verbs.configure(overrides=given)
        _check_emit_for(trainer, cfg.gpus)
    _check_plot(cfg.plot)
    with SweepDisplay(err, cfg.trials, cfg.minutes) as display, prints_to_stderr():
        events = verbs.SweepEvents(
            started=display.started,
            step=display.step,
            measuring=display.measuring,
            measured_again=display.measured_again,
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
    largest = sweep_report.largest_batches(outcome.largest_batches)
    if as_json:
        payload = {
            "sweep": {
                "id": outcome.sweep_id,
                "stop_reason": outcome.stop_reason,
                "plot": str(plot) if plot else None,
                "elapsed_s": outcome.elapsed_s,
                "time_to_98_s": outcome.time_to_answer_s,
                "workers": outcome.workers,
                "resumed": dataclasses.asdict(outcome.resumed) if outcome.resumed else None,
            },
            "baseline": outcome.baseline.to_dict() if outcome.baseline else None,
            "versus_baseline": _as_dict(outcome.against_baseline),
            **rec.to_dict(),
            "confirmation": outcome.confirmation.to_dict() if outcome.confirmation else None,
            "repeats": [r.to_dict() for r in outcome.repeats],
            "disagreement": outcome.disagreement,
            "load": outcome.load.to_dict() if outcome.load else None,
            "largest_batches": largest,
            **_emitted_dict(rec, trainer),
        }
        print(json.dumps(payload, indent=2))
    else:
        report = err if trainer else out  # stdout holds the configuration alone
        report.print(sweep_report.recommendation_report(rec, outcome.confirmation))
        report.print(sweep_report.repeats_line(outcome.repeats, outcome.disagreement))
        report.print(sweep_report.baseline_line(outcome.baseline, outcome.against_baseline, rec))
        for line in sweep_report.load_lines(outcome.load):
            report.print(line)
        report.print(sweep_report.timing_line(outcome.elapsed_s, outcome.time_to_answer_s, NEAR))
        if largest:
            report.print(sweep_report.largest_batches_table(largest, outcome.target))
        _print_emitted(rec, trainer)
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
      advisor recommend model=gpt2 gpu=h200 emit=hf > training_args.py
      advisor recommend model=gpt2 gpu=h200 gpus=8 emit=torch > train.py
    Throughput comes from whatever GPU measured it (the output says which);
    whether a setting fits transfers between GPUs with the same torch version.
    gpus=N (nodes=M, strategy=ddp|fsdp|hsdp): from the stored ranks of jobs on
    N GPUs (advisor run or sweep measured them), each ranked by its job's step,
    communication modelled over gpu=NAME's link or gpu.intra_node_busbw=GB/s
    (nccl-tests' busbw).
    emit=hf|lightning|accelerate|torch prints the answer as transformers'
    TrainingArguments, Lightning's Trainer, an accelerate config file or plain
    PyTorch, named as the installed library names them, ready to save (the
    report goes to stderr); --json adds it as "emit".
    """
    trainer, given = _emit_option(overrides or [])
    from advisor import verbs

    with prints_to_stderr():
        _check_emit_for(trainer, verbs.configure(overrides=given).gpus)
        rec = verbs.recommend(overrides=given)
    if as_json:
        print(json.dumps({**rec.to_dict(), **_emitted_dict(rec, trainer)}, indent=2))
    else:
        report = err if trainer else out
        report.print(sweep_report.recommendation_report(rec, None))
        if len(rec.best_counted) > 1:  # (one measurement: nothing to say)
            report.print(
                sweep_report.repeats_line(rec.best_counted, disagreement(rec.best_counted))
            )
        _print_emitted(rec, trainer)
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
    with err.status("estimating on fake tensors"), prints_to_stderr():
        from advisor import verbs

        result = verbs.estimate(overrides=overrides or [])
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        out.print(estimate_report.estimate_report(result))


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


def _check_emit_for(trainer: Trainer | None, gpus: int) -> None:
    """A trainer's words for a job on several GPUs are torch's alone so far: said before the
    search, not after it."""
    if trainer is not None and gpus > 1 and trainer is not Trainer.torch:
        raise ConfigError(
            f"emit={trainer.value} of a job on {gpus} GPUs is not written yet: emit=torch "
            "prints the lines torchrun runs"
        )


def _emit_option(overrides: list[str]) -> tuple[Trainer | None, list[str]]:
    """emit=TRAINER, the command's own (not a setting Hydra composes), out of the overrides:
    checked, and its library found, before anything is measured."""
    trainer = None
    rest = []
    for item in overrides:
        key, sep, value = item.partition("=")
        if key.strip() == "emit" and sep:
            trainer = trainer_of(value.strip())
            require(trainer)
        else:
            rest.append(item)
    return trainer, rest


def _emitted_dict(rec: Recommendation, trainer: Trainer | None) -> dict[str, object]:
    """--json's "emit": the configuration, or null where nothing fits."""
    if trainer is None:
        return {}
    return {"emit": rec.emit(trainer).to_dict() if rec.best else None}


def _print_emitted(rec: Recommendation, trainer: Trainer | None) -> None:
    """The configuration, as is on stdout (no console wrapping its lines), ready to save."""
    if trainer is None:
        return
    if rec.best is None:
        why = rec.thin or "no measured setting fits"
        err.print(f"advisor: nothing to write as emit={trainer.value}: {why}", highlight=False)
        return
    sys.stdout.write(rec.emit(trainer).text)


# The database, the trials' temporary folder and an estimate that cannot run: 1, as for a trial
# that crashed; the rest of AdvisorError is a usage error: 2.
EXIT_CODES: dict[type[AdvisorError], int] = {StoreError: 1, EstimateError: 1, TrialsFolderError: 1}


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM as Ctrl-C: the running trials end, nothing half-stored


def main() -> None:
    signal.signal(signal.SIGTERM, _terminated)
    replace_unencodable()
    try:
        app()
    except AdvisorError as error:
        said = str(error)
        if isinstance(error, TrialNotKept):  # the measurement, kept by the one who reads this
            from advisor.store.transfer import document

            print(json.dumps(document([error.record]), indent=2))
            said += (
                "; so it is printed on stdout, as an export: save it as FILE.json, and store "
                "it with advisor import FILE.json"
            )
        err.print(f"advisor: {said}", highlight=False, soft_wrap=True)
        # the code of its class or of the nearest it derives from (OlderSchema: StoreError's)
        sys.exit(next((EXIT_CODES[c] for c in type(error).__mro__ if c in EXIT_CODES), 2))
    except KeyboardInterrupt:
        err.print("advisor: interrupted")
        sys.exit(130)
