"""How busy the machine was with other work while a trial's steps were timed.

A rate measured while other processes used the CPUs is not the rate of an idle machine: on a
loaded 2-core machine one setting measured 22.5 samples/s, and 433.9 later (issue 30). The
trial keeps the share of the machine's CPU time that others used (0: only the trial ran; 1:
every core busy with other work), so a sweep can tell which rates may be compared.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

# Readings of an idle machine differ by a few hundredths (the trial's own runner and the
# system's daemons count as "others"); loads further apart than this are different loads.
LOAD_NOISE = 0.10


class MachineLoad:
    """Started before the timed steps, read after them: the others' share of the CPU time."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self._start = self._now()

    def others_share(self) -> float | None:
        """Others' share of every core's time since the start, in [0, 1]; None when the
        machine does not say (psutil cannot read its counters there)."""
        if self._start is None or (end := self._now()) is None:
            return None
        (wall0, busy0, own0, cores), (wall1, busy1, own1, _) = self._start, end
        capacity = (wall1 - wall0) * cores
        if capacity <= 0:
            return None
        return min(max((busy1 - busy0 - (own1 - own0)) / capacity, 0.0), 1.0)

    def _now(self) -> tuple[float, float, float, int] | None:
        """(wall clock, the busy CPU seconds of the cores this process may run on, this
        process's and its children's, how many cores): a trial pinned to 2 cores of 64 (taskset,
        Slurm) is loaded by what runs on those 2, not by the host. (A cgroup's CPU quota
        without pinning is not seen.)"""
        try:
            per_core = psutil.cpu_times(percpu=True)
            own = self._process.cpu_times()
        except (psutil.Error, OSError):
            return None
        mine = own.user + own.system + own.children_user + own.children_system
        allowed = getattr(os, "sched_getaffinity", lambda pid: set(range(len(per_core))))(0)
        cores = [times for number, times in enumerate(per_core) if number in allowed] or per_core
        return time.monotonic(), sum(_busy(times) for times in cores), mine, len(cores)


def _busy(times: Any) -> float:
    """A core's busy seconds (psutil's cpu_times): all but idle and waiting for I/O, guests'
    time counted once (it is inside user and nice already)."""
    idle = times.idle + getattr(times, "iowait", 0.0)
    guests = getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    return float(sum(times)) - idle - guests
