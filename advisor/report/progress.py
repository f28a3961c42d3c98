"""The sweep's live progress on the terminal (rich): a bar of the trials budget with the time
elapsed, the most it has left by the budget (trials at the pace so far, and minutes=), the best
so far, and a line for each worker with the spec it measures and its phase (building,
compiling or first step, warm-up, timing). Each settled spec is also printed as a line above,
which is what stays in a log."""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn

from advisor.report import sweep_report, terminal
from advisor.result import TrialResult
from advisor.search.steps import Step, SweepProgress
from advisor.search.study import Resumed
from advisor.spec import TrialSpec


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"


class SweepDisplay:
    """SweepEvents' listener for the command line; a context manager around the sweep."""

    def __init__(self, console: Console, trials: int, minutes: float | None) -> None:
        self.console, self.trials, self.minutes = console, trials, minutes
        self.bar = Progress(
            TextColumn("{task.description}", markup=False),  # a worker's: the spec's names
            BarColumn(bar_width=24),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[times]}"),
            console=console,
            transient=True,
            disable=not console.is_terminal,  # a log gets the step lines alone
        )
        self.total = self.bar.add_task("sweep", total=trials, times="", count=f"0/{trials}")
        self.slots: dict[int, tuple[TaskID, str, float]] = {}  # slot: task, spec, since
        self.started_at = time.perf_counter()
        self.measured = 0
        self.best = ""
        self._lock = threading.Lock()
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._stop = threading.Event()

    def __enter__(self) -> SweepDisplay:
        self.bar.start()
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.bar.stop()

    def started(self, sweep_id: int, what: str, resumed: Resumed | None, workers: int) -> None:
        line = f"sweep {sweep_id}: {what}"
        line += f", up to {workers} trials at a time" if workers > 1 else ""
        self.console.print(line, highlight=False, markup=False)  # (names: the model's, the GPU's)
        if resumed is not None:
            self.console.print(sweep_report.resumed_line(resumed))

    def measuring(self, slot: int, spec: TrialSpec) -> None:
        with self._lock:
            if slot not in self.slots:
                task = self.bar.add_task("", total=None, times="", count="")
            else:
                task = self.slots[slot][0]
            self.slots[slot] = (task, terminal.describe_spec(spec), time.perf_counter())
        self.phase(slot, "starting")

    def phase(self, slot: int, phase: str) -> None:
        with self._lock:
            if slot not in self.slots:
                return
            task, spec, _ = self.slots[slot]
            self.bar.update(task, description=f"  worker {slot}: {phase:10} {spec}")

    def measured_again(self, result: TrialResult, why: str) -> None:
        self._line(sweep_report.measured_again_line(result, why))

    def step(self, progress: SweepProgress, step: Step) -> None:
        self._line(sweep_report.sweep_step_line(progress, step, self.trials))
        with self._lock:
            self.measured = progress.measured
            best = progress.best
            self.best = f"best {best.samples_per_s:,.1f}/s" if best is not None else ""
            self.bar.update(
                self.total, completed=self.measured, count=f"{self.measured}/{self.trials}"
            )

    def _line(self, line: terminal.Phrases) -> None:
        """One line a step in a log; in a terminal, broken between its phrases (at 80 columns
        rich broke "peak / 68.6 MiB (too big)")."""
        if self.console.is_terminal:
            self.console.print(line)
        else:
            self.console.print(line.joined(), soft_wrap=True)

    def _tick(self) -> None:
        """Once a second: the elapsed time and what the budget leaves."""
        while not self._stop.wait(1.0):
            with self._lock:
                elapsed = time.perf_counter() - self.started_at
                times = f"{_clock(elapsed)} elapsed"
                left = self._left(elapsed)
                if left is not None:
                    times += f", at most ~{_clock(left)} left"
                self.bar.update(self.total, description=f"sweep {self.best}", times=times)
                for task, _, since in self.slots.values():
                    self.bar.update(task, times=f"{_clock(time.perf_counter() - since)}")

    def _left(self, elapsed: float) -> float | None:
        """The budget's bound on the time left: the trials left at the pace so far, or the
        minutes left, whichever is less (the sweep often stops sooner, when nothing left looks
        faster)."""
        bounds = []
        if self.measured:
            bounds.append(elapsed / self.measured * max(0, self.trials - self.measured))
        if self.minutes is not None:
            bounds.append(max(0.0, 60 * self.minutes - elapsed))
        return min(bounds) if bounds else None
