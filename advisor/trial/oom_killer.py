"""The kernel's out-of-memory killer, as this process's cgroup counts its kills: a worker that
died of SIGKILL while the count went up was killed because the host ran out of memory.

cgroup v2 keeps the count in memory.events, v1 in memory.oom_control (both as `oom_kill N`).
Inside a container /proc/self/cgroup may name a path above the container's own mount, so the
path is tried from its longest tail to the mount itself.
"""

from __future__ import annotations

from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def kills() -> int | None:
    """The OOM killer's kills in this process's memory cgroup so far; None where unknown."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one unified hierarchy
            found = _count(CGROUP_ROOT, path, "memory.events")
        elif "memory" in controllers.split(","):
            found = _count(CGROUP_ROOT / "memory", path, "memory.oom_control")
        else:
            continue
        if found is not None:
            return found
    return None


def _count(mount: Path, path: str, name: str) -> int | None:
    parts = [p for p in path.split("/") if p]
    for start in range(len(parts) + 1):
        events = mount.joinpath(*parts[start:], name)
        try:
            text = events.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return None
