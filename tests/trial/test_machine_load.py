"""The machine's load while a trial is timed: others' share of every core's time, from the
machine's CPU counters less the trial's own (psutil's, replaced here by known figures)."""

from __future__ import annotations

from types import SimpleNamespace

import psutil
import pytest
from psutil._pslinux import scputimes

from advisor.trial import machine_load
from advisor.trial.machine_load import MachineLoad


def counters(monkeypatch, readings, cpus):
    """psutil as a script: each reading (wall s, (user, idle, guest) of the machine, the
    trial's own CPU seconds), one at the start and one at the end."""
    walls = iter(wall for wall, _, _ in readings)
    machines = iter(
        scputimes(user, 0.0, 0.0, idle, 0.0, 0.0, 0.0, 0.0, guest, 0.0)
        for _, (user, idle, guest), _ in readings
    )  # (Linux's fields: user nice system idle iowait irq softirq steal guest guest_nice)
    owns = iter(
        SimpleNamespace(user=own, system=0.0, children_user=0.0, children_system=0.0)
        for _, _, own in readings
    )
    process = SimpleNamespace(cpu_times=lambda: next(owns))
    monkeypatch.setattr(psutil, "cpu_count", lambda: cpus)
    monkeypatch.setattr(psutil, "cpu_times", lambda: next(machines))
    monkeypatch.setattr(psutil, "Process", lambda: process)
    monkeypatch.setattr(machine_load.time, "monotonic", lambda: next(walls))


def test_others_share_is_the_busy_time_the_trial_did_not_use(monkeypatch):
    """4 cores for 10 s: 40 core-seconds. The machine was busy 25 of them, the trial 5: the
    others used 20, half the machine."""
    counters(monkeypatch, [(100.0, (10.0, 90.0, 0.0), 1.0), (110.0, (35.0, 105.0, 0.0), 6.0)], 4)
    assert MachineLoad().others_share() == pytest.approx(0.5)


def test_guest_time_is_not_counted_twice(monkeypatch):
    """Guests' time is inside user already: 30 core-seconds of user, 10 of them a guest's,
    are 30 busy of 40, not 40."""
    counters(monkeypatch, [(0.0, (0.0, 0.0, 0.0), 0.0), (10.0, (30.0, 10.0, 10.0), 0.0)], 4)
    assert MachineLoad().others_share() == pytest.approx(0.75)


def test_the_share_stays_in_bounds(monkeypatch):
    """Counters read a moment apart can make the trial's own time exceed the machine's busy
    time: the share is 0 then, never below."""
    counters(monkeypatch, [(0.0, (0.0, 0.0, 0.0), 0.0), (10.0, (5.0, 35.0, 0.0), 8.0)], 4)
    assert MachineLoad().others_share() == 0.0


def test_a_machine_that_does_not_say_gives_no_load(monkeypatch):
    def refused():
        raise psutil.AccessDenied()

    monkeypatch.setattr(psutil, "cpu_times", refused)
    assert MachineLoad().others_share() is None
