"""What is stored, as tables: the trials newest first, one trial's environment, trials side by
side with what differs marked, and the sweeps (advisor history, show, compare, sweeps)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from advisor.report.terminal import CUT_LEGEND, describe, gib, rate, trial_report
from advisor.result import Environment, TrialResult
from advisor.spec import Device

if TYPE_CHECKING:  # (a sweep as the store gives it; these tables need no database)
    from advisor.store.sweeps import Sweep


WIDE = 110  # columns a terminal needs for the history table to show each trial's device and code
SETTING_WIDTH = len("expandable_segments")  # the setting's longest word, kept whole


def history_table(results: Sequence[TrialResult], width: int = WIDE) -> Table:
    """The trials, one row each. On a terminal narrower than WIDE (80 columns, or output piped
    to a file) the device and code columns are left out, so the setting keeps room to read."""
    wide = width >= WIDE
    table = Table(title="stored trials, newest first", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)  # fmt: skip
    columns = ["id", "when (UTC)", "setting", "status", "samples/s", "device peak"]
    columns += ["device", "code"] if wide else []
    for column in columns:
        table.add_column(
            column,
            justify="right" if column in ("id", "samples/s") else "left",
            no_wrap=column != "setting",  # the setting wraps at its commas; the rest stay whole
            # min_width keeps the knobs' longest word whole; a longer one (a workload's name)
            # folds rather than ending in …
            overflow="fold" if column == "setting" else "ellipsis",
            min_width=SETTING_WIDTH if column == "setting" else None,
        )
    for r in results:
        t, m, env = r.throughput, r.memory, r.environment
        row: list[RenderableType] = [
            str(r.id),
            (r.created_at or "")[:16].replace("T", " "),  # to the minute: ids order the rest
            Text(describe(r)),
            r.status.value,
            rate(t),  # ≤ for a cut one: its rate is a bound
            gib(m.device_peak_bytes) if m else "-",
        ]
        row += [Text(env.device_name) if env else "-", _code(r)] if wide else []
        table.add_row(*row)
    captions = [
        "code: the workload's fingerprint (its source and the libraries' versions)"
        if wide
        else f"device and code: on a terminal {WIDE} columns wide, or with --json"
    ]
    if any(r.throughput and r.throughput.cut for r in results):
        captions.append(CUT_LEGEND)
    table.caption = "\n".join(captions)
    return table


def trial_view(result: TrialResult) -> Group:
    """One stored trial as `advisor show` prints it (and the dashboard's trial page): its
    report, where it ran, and its memory snapshot, where it has one."""
    env = result.environment
    parts: list[RenderableType] = [
        trial_report(result, env.device_memory_bytes if env else None),
        environment_line(result),
    ]
    if (snapshot := snapshot_line(result)) is not None:
        parts.append(snapshot)
    return Group(*parts)


def environment_line(result: TrialResult) -> Text:
    """Where and when a trial ran, with the versions that measured it."""
    env = result.environment
    when = (result.created_at or "")[:19].replace("T", " ")
    if env is None:
        return Text(f"stored {when} UTC; its environment was not recorded", style="grey50")
    gpu = f", driver {env.driver}, CUDA {env.cuda}" if env.driver else ""
    return Text(
        f"measured on {env.device_name}{gpu}, torch {env.torch}, advisor {env.advisor}, "
        f"Python {env.python}, host {env.host}; stored {when} UTC; code {_code(result)}",
        style="grey50",
    )


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
    table.add_column("")
    for r in results:
        table.add_column(f"trial {r.id}", justify="right")
    for label, values in _compared(results):
        differs = len(set(values)) > 1
        style = "bold yellow" if differs else None
        table.add_row("≠" if differs else "", label, *map(Text, values), style=style)
    return table


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
        ("memory cap", each(lambda r: r.spec.memory_cap_bytes and gib(r.spec.memory_cap_bytes))),
        ("status", each(lambda r: r.status.value)),
        ("samples/s", each(lambda r: r.throughput and rate(r.throughput))),
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
    return r.spec.model.fingerprint[:8] if r.spec.model.source else "-"
