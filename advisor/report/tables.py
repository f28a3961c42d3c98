"""What is stored, as tables: the trials newest first, one trial's environment, trials side by
side with what differs marked, and the sweeps (advisor history, show, compare, sweeps)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from advisor.communication import stored_job
from advisor.report.terminal import (
    CUT_LEGEND,
    Phrases,
    describe,
    gib,
    job_lines,
    rate,
    trial_report,
)
from advisor.result import Environment, Kind, TrialResult
from advisor.spec import Device

if TYPE_CHECKING:  # (a sweep as the store gives it; these tables need no database)
    from advisor.store.sweeps import Sweep


CODE_WIDTH = 8  # a workload's fingerprint, as history shows it
GAP = "  "  # between history's columns
FIGURES = ("id", "when (UTC)", "status", "samples/s", "device peak", "code")


def history_table(results: Sequence[TrialResult], width: int = 80) -> Group:
    """The trials, newest first: each trial's figures, code and device on a line, its setting
    last, where the terminal is that wide; else the setting whole on the next line, and the
    device too where the figures leave it no room (80 columns, or output piped to a file). In
    a table's column of its own, the setting wrapped over three or four lines at 80 columns
    and the code was hidden."""
    rows = [[*_history_row(r), _code(r)] for r in results]
    devices = [r.environment.device_name if r.environment else "-" for r in results]
    settings = [_setting(r) for r in results]
    widths = [max(map(cell_len, column)) for column in zip(FIGURES, *rows, strict=True)]
    figures = sum(widths) + len(GAP) * (len(widths) - 1)
    device = max(map(cell_len, ["device", *devices])) + len(GAP)
    setting = max(map(cell_len, ["setting", *settings])) + len(GAP)
    shows_device = figures + device <= width
    one_line = figures + device + setting <= width

    def line(cells: Sequence[str], device_name: str, setting_said: str = "") -> Text:
        padded = [_padded(cell, w, right=name in ("id", "samples/s"))
                  for name, cell, w in zip(FIGURES, cells, widths, strict=True)]  # fmt: skip
        if shows_device:
            padded.append(_padded(device_name, device))
        return Text((GAP.join(padded) + setting_said).rstrip())

    header = line(FIGURES, "device", "setting" if one_line else "")
    header.stylize("bold")
    lines: list[RenderableType] = [Text("stored trials, newest first", style="table.title"), header]
    indent = widths[0] + len(GAP)
    for row, on, said in zip(rows, devices, settings, strict=True):
        if one_line:
            lines.append(line(row, on, said))
        else:
            lines += [line(row, on), Padding(Text(said), (0, 0, 0, indent), expand=False)]
    captions = ["code: the workload's fingerprint (its source and the libraries' versions)"]
    if not shows_device:
        captions.append("device: on a wider terminal, or with --json")
    captions += [CUT_LEGEND] if any(r.throughput and r.throughput.cut for r in results) else []
    lines += [Text(caption, style="table.caption") for caption in captions]
    return Group(*lines)


def _padded(text: str, width: int, right: bool = False) -> str:
    """text filled to `width` cells of the terminal (a name's wide letters take two)."""
    space = " " * (width - cell_len(text))
    return space + text if right else text + space


def _history_row(r: TrialResult) -> list[str]:
    """A trial's id, when (to the minute: ids order the rest), status, rate (≤ for a cut one:
    its rate is a bound) and device peak."""
    when = (r.created_at or "")[:16].replace("T", " ")
    peak = gib(r.memory.device_peak_bytes) if r.memory else "-"
    return [str(r.id), when, r.status.value, rate(r.throughput), peak]


def _setting(r: TrialResult) -> str:
    said = describe(r)
    return f"training run of {r.follows}: {said}" if r.kind is Kind.training else said


def trial_view(result: TrialResult, followed: TrialResult | None = None) -> Group:
    """One stored trial as `advisor show` prints it (and the dashboard's trial page): its
    report, a rank's job step (modelled over the published link of the GPU it ran on), where
    it ran, and its memory snapshot, where it has one; a training run's, beside the measured
    trial it followed (`followed`, where still stored)."""
    env = result.environment
    parts: list[RenderableType] = [
        trial_report(result, env.device_memory_bytes if env else None),
        job_lines(result, stored_job(result)),  # (a rank's; nothing for the others)
        environment_line(result),
    ]
    if (snapshot := snapshot_line(result)) is not None:
        parts.append(snapshot)
    if followed is not None:
        parts.append(compare_table([followed, result]))
    return Group(*parts)


def environment_line(result: TrialResult) -> Text | Phrases:
    """Where and when a trial ran, with the versions that measured it."""
    env = result.environment
    when = (result.created_at or "")[:19].replace("T", " ")
    if env is None:
        return Text(f"stored {when} UTC; its environment was not recorded", style="grey50")
    gpu = [f"driver {env.driver}, ", f"CUDA {env.cuda}, "] if env.driver else []
    return Phrases(
        f"measured on {env.device_name}, ", *gpu, f"torch {env.torch}, ",
        f"advisor {env.advisor}, ", f"Python {env.python}, ", f"host {env.host}; ",
        f"stored {when} UTC; ", f"code {_code(result)}", style="grey50",
    )  # fmt: skip


def snapshot_line(result: TrialResult) -> Text | None:
    """Where the trial's memory snapshot is, and what opens it; None for a trial without."""
    path = result.memory_snapshot
    if path is None:
        return None
    if not Path(path).is_file():
        return Text(f"memory snapshot: {path} (no longer there)", style="yellow")
    return Text(f"memory snapshot: {path} (drag it onto https://pytorch.org/memory_viz)")


def compare_table(results: Sequence[TrialResult]) -> Table:
    """Trials side by side, a row per figure: what differs between them marked, settings and
    versions alike (the same setting on two torch versions is two experiments)."""
    table = Table(title="trials side by side (≠: differs)", title_justify="left")
    table.add_column("")
    table.add_column("", no_wrap=True)  # "expandable / segments" at 80 columns: the values wrap
    for r in results:
        table.add_column(f"trial {r.id}", justify="right")
    for label, values in _compared(results):
        differs = len(set(values)) > 1
        style = "bold yellow" if differs else None
        table.add_row("≠" if differs else "", label, *map(Text, values), style=style)
    table.caption = "\n".join(against_prediction(results)) or None
    return table


def against_prediction(results: Sequence[TrialResult]) -> list[str]:
    """Each training run against the measured trial it followed, where both are compared: its
    rate and memory as a difference from the prediction."""
    by_id = {r.id: r for r in results}
    said = []
    for run in results:
        predicted = by_id.get(run.follows) if run.kind is Kind.training else None
        if predicted is None:
            continue
        figures = [
            ("samples/s", run.samples_per_s or None, predicted.samples_per_s or None),
            *[(label, getattr(run.memory, name, None), getattr(predicted.memory, name, None))
              for name, label in (("peak_allocated_bytes", "peak allocated"),
                                  ("peak_reserved_bytes", "peak reserved"),
                                  ("device_peak_bytes", "device peak"))],
        ]  # fmt: skip
        differences = [f"{label} {real / guess - 1:+.1%}" for label, real, guess in figures
                       if real is not None and guess]  # fmt: skip
        if differences:
            said.append(f"training run {run.id} against trial {predicted.id}, the setting it "
                        f"followed: {', '.join(differences)}{_job_said(predicted)}")  # fmt: skip
    return said


def _job_said(predicted: TrialResult) -> str:
    """How a rank's prediction was held: its job's rate (modelled), or the rank's own."""
    if predicted.spec.gpus == 1:
        return ""
    if predicted.job is not None:
        return f"; its rate is the job's, modelled {predicted.job.how.partition(';')[0]}"
    return "; its rate is the rank's: no published link to model the job's communication over"


def _compared(results: Sequence[TrialResult]) -> list[tuple[str, list[str]]]:
    def each(figure: Callable[[TrialResult], object]) -> list[str]:
        return ["-" if (v := figure(r)) is None else str(v) for r in results]

    env = [(f.name, f.name.replace("_", " ")) for f in dataclasses.fields(Environment)]
    return [
        ("workload", each(lambda r: r.spec.model.name)),
        ("code", each(_code)),
        ("batch", each(lambda r: r.spec.batch_size)),
        ("accumulation", each(lambda r: r.spec.grad_accum)),
        ("precision", each(lambda r: r.spec.precision.value)),
        ("checkpointing", each(lambda r: r.spec.checkpointing.value)),
        ("optimizer", each(lambda r: r.spec.optimizer.name)),
        ("channels_last", each(lambda r: r.spec.channels_last)),
        ("compile", each(lambda r: r.spec.compile)),
        ("expandable segments", each(lambda r: r.spec.expandable_segments)),
        ("GPUs", each(lambda r: r.spec.gpus)),
        ("strategy", each(lambda r: r.spec.strategy and r.spec.strategy.value)),
        ("memory cap", each(lambda r: r.spec.memory_cap_bytes and gib(r.spec.memory_cap_bytes))),
        ("kind", each(lambda r: r.kind.value + (f" of {r.follows}" if r.follows else ""))),
        ("status", each(lambda r: r.status.value)),
        ("samples/s", each(lambda r: r.throughput and rate(r.throughput))),
        ("peak allocated", each(lambda r: r.memory and gib(r.memory.peak_allocated_bytes))),
        ("peak reserved", each(lambda r: r.memory and gib(r.memory.peak_reserved_bytes))),
        ("device peak", each(lambda r: r.memory and gib(r.memory.device_peak_bytes))),
        *[(label, each(_environment_field(name)))
          for name, label in env if name != "device_memory_bytes"],
        ("stored (UTC)", each(lambda r: (r.created_at or "")[:19].replace("T", " "))),
    ]  # fmt: skip


def _environment_field(name: str) -> Callable[[TrialResult], object]:
    def field(r: TrialResult) -> object:
        if r.environment is None or (name == "cuda" and r.spec.device is Device.cpu):
            return None  # a trial on the CPU: torch's build names a CUDA that ran nothing
        return getattr(r.environment, name)

    return field


def sweeps_table(sweeps: Sequence[tuple[Sweep, int]]) -> Table:
    table = Table(title="stored sweeps, newest first", title_justify="left")
    for column in ("id", "model", "for", "trials", "stopped"):
        table.add_column(column, justify="right" if column in ("id", "trials") else "left")
    for sweep, used in sweeps:
        target = f"{sweep.target} ({gib(sweep.target_memory_bytes)})"
        stopped = sweep.stop_reason or "running, or interrupted"
        table.add_row(str(sweep.id), Text(sweep.model), Text(target), str(used), Text(stopped))
    table.caption = "a sweep's trials: advisor history sweep=ID"
    return table


def _code(r: TrialResult) -> str:
    """Which code and libraries measured it (before workloads had one: -)."""
    return r.spec.model.fingerprint[:CODE_WIDTH] if r.spec.model.source else "-"
