"""The machine's load while a trial is timed: others' share of every core's time, from the
machine's CPU counters less the trial's own (psutil's, replaced here by known figures)."""

from __future__ import annotations

import collections
from types import SimpleNamespace

import psutil
import pytest

from advisor.trial import machine_load
from advisor.trial.machine_load import MachineLoad

# psutil's per-core times on Linux, field for field
CoreTimes = collections.namedtuple(
    "CoreTimes", "user nice system idle iowait irq softirq steal guest guest_nice"
)


def counters(monkeypatch, readings, cpus, allowed=None):
    """psutil as a script: each reading (wall s, (user, idle, guest) of the machine, the
    trial's own CPU seconds), one at the start and one at the end; the machine's times are
    shared evenly by its `cpus` cores, of which the process may run on `allowed` (all)."""
    walls = iter(wall for wall, _, _ in readings)
    machines = iter(
        [CoreTimes(user / cpus, 0.0, 0.0, idle / cpus, 0.0, 0.0, 0.0, 0.0, guest / cpus, 0.0)]
        * cpus
        for _, (user, idle, guest), _ in readings
    )
    owns = iter(
        SimpleNamespace(user=own, system=0.0, children_user=0.0, children_system=0.0)
        for _, _, own in readings
    )
    process = SimpleNamespace(cpu_times=lambda: next(owns))
    monkeypatch.setattr(psutil, "cpu_times", lambda percpu=False: next(machines))
    monkeypatch.setattr(psutil, "Process", lambda: process)
    monkeypatch.setattr(machine_load.time, "monotonic", lambda: next(walls))
    cores = set(range(cpus)) if allowed is None else allowed
    monkeypatch.setattr(machine_load.os, "sched_getaffinity", lambda pid: cores, raising=False)


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
    def refused(percpu: bool = False) -> None:
        raise psutil.AccessDenied()

    monkeypatch.setattr(psutil, "cpu_times", refused)
    assert MachineLoad().others_share() is None


def test_only_the_cores_the_trial_may_use_count(monkeypatch):
    """Pinned to 2 of 4 cores (taskset, Slurm): the other two, busy with others' work, do not
    load the trial; its own two are idle but for the trial."""
    walls = iter([0.0, 10.0])
    start = [CoreTimes(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)] * 4
    idle_pair = CoreTimes(2.5, 0.0, 0.0, 7.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)  # the trial's 5 s
    busy_pair = CoreTimes(10.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    machines = iter([start, [idle_pair, idle_pair, busy_pair, busy_pair]])
    owns = iter(
        SimpleNamespace(user=own, system=0.0, children_user=0.0, children_system=0.0)
        for own in (0.0, 5.0)
    )
    monkeypatch.setattr(psutil, "cpu_times", lambda percpu=False: next(machines))
    monkeypatch.setattr(psutil, "Process", lambda: SimpleNamespace(cpu_times=lambda: next(owns)))
    monkeypatch.setattr(machine_load.time, "monotonic", lambda: next(walls))
    monkeypatch.setattr(machine_load.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert MachineLoad().others_share() == pytest.approx(0.0)
