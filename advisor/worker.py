"""The worker: one trial in its own process.

Each trial is a process forked from a fork server (python -m advisor.worker), which
has imported torch and this module once and never touches CUDA: a trial starts in milliseconds,
not the seconds torch's import takes, and still has a process of its own. The server reads one
trial folder per line on stdin, answers the trial's pid, then its exit code, one line each.

The trial reads {"spec": ..., "measure": ..., "beat_samples_per_s": ...} as JSON from
FOLDER/request.json, writes the phase it is in to FOLDER/phase as it goes, its output to
FOLDER/output, and {"status", "environment", "memory", "throughput", "failure"} as JSON to
FOLDER/result.json. An OOM is a result (exit 0); a workload that breaks its contract is reported
as {"workload_error": message} (exit 0), which is the user's to fix and no result; anything else
that goes wrong raises, so the process exits non-zero and the runner records a crash with the
tail of its output. CUDA state, leaks and crashes stay in the trial's process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import socket
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import advisor
from advisor import gpus
from advisor.config import MeasureConfig
from advisor.errors import WorkloadError
from advisor.measure import OutOfMemory, apply_memory_cap, measure
from advisor.result import Environment, Failure, Status
from advisor.spec import Device, TrialSpec, plain

# Read on import, before a trial's memory cap: under a 2 MiB cap, reading the package's
# metadata raised MemoryError and the trial was recorded as crashed, not oom.
ADVISOR_VERSION = advisor.__version__


def run(
    spec: TrialSpec,
    settings: MeasureConfig,
    beat_samples_per_s: float | None = None,
    phase_path: str | None = None,
    memory_snapshot: str | None = None,
) -> dict[str, Any]:
    apply_memory_cap(spec)
    if spec.device is Device.cuda:
        if not torch.cuda.is_available():
            raise RuntimeError("device=cuda but torch sees no CUDA GPU here; use device=cpu")
        torch.backends.cudnn.benchmark = True
    try:
        memory, throughput = measure(spec, settings, beat_samples_per_s,
                                     _phase_writer(phase_path), memory_snapshot)  # fmt: skip
    except WorkloadError as error:
        return {"workload_error": str(error)}
    except OutOfMemory as oom:
        failure = Failure(phase=oom.phase, requested_bytes=oom.requested_bytes, message=str(oom))
        return {
            "status": Status.oom.value,
            "environment": dataclasses.asdict(environment(spec)),
            "failure": plain(dataclasses.asdict(failure)),
            **_snapshot(memory_snapshot),
        }
    return {
        "status": Status.ok.value,
        "environment": dataclasses.asdict(environment(spec)),
        "memory": plain(dataclasses.asdict(memory)),
        "throughput": plain(dataclasses.asdict(throughput)),
        **_snapshot(memory_snapshot),
    }


def _snapshot(path: str | None) -> dict[str, str]:
    """The snapshot's path, where measure wrote one (an OOM's too)."""
    return {"memory_snapshot": path} if path and os.path.isfile(path) else {}


def _phase_writer(path: str | None) -> Callable[[str], None]:
    """Tell the runner the phase through a file it polls (stdout belongs to the model)."""

    def write(phase: str) -> None:
        if path is not None:
            with open(path + ".tmp", "w") as f:
                f.write(phase)
            os.replace(path + ".tmp", path)

    return write


def environment(spec: TrialSpec) -> Environment:
    if spec.device is Device.cuda:
        gpu = gpus.local_gpu(0)
        name = torch.cuda.get_device_name(0)
        memory: int | None = torch.cuda.get_device_properties(0).total_memory
        driver = gpu.driver if gpu else None
    else:
        name, memory, driver = gpus.cpu_name(), None, None
    return Environment(
        device_name=name,
        device_memory_bytes=memory,
        driver=driver,
        cuda=torch.version.cuda,
        torch=torch.__version__,
        advisor=ADVISOR_VERSION,
        python=platform.python_version(),
        host=socket.gethostname(),
    )


RUNNER_PID = "ADVISOR_RUNNER_PID"  # set by the runner: the process the server must not outlive


def _die_with(parent: int) -> None:
    """A parent killed outright (kill -9) cannot kill its children, which run in process
    sessions of their own: ask the kernel to (Linux's PR_SET_PDEATHSIG), so no orphan goes on
    holding the GPU. If the parent is already gone, stop now."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # it died while this process was starting
        os._exit(1)


def trial(folder: Path) -> None:
    """Run the trial FOLDER/request.json asks for; write FOLDER/result.json whole."""
    request = json.loads((folder / "request.json").read_text())
    outcome = run(
        TrialSpec.from_dict(request["spec"]),
        MeasureConfig(**request.get("measure", {})),
        request.get("beat_samples_per_s"),
        str(folder / "phase"),
        request.get("memory_snapshot"),
    )
    tmp = folder / "result.json.tmp"
    tmp.write_text(json.dumps(outcome))
    os.replace(tmp, folder / "result.json")  # the runner never reads half a result


def serve() -> None:
    """The fork server's loop: a trial folder per line in, its pid and then its exit code
    out. One trial at a time; it ends with its stdin (the runner) or, on Linux, its runner."""
    _die_with(int(os.environ.get(RUNNER_PID, os.getppid())))
    # torch's import leaves a thread of its own, idle: forking after it (not after CUDA's
    # start, which the server never makes) is what DataLoader's workers do too
    warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
    server = os.getpid()
    while line := sys.stdin.readline():
        folder = Path(line.strip())
        pid = os.fork()
        if pid == 0:
            sys.exit(_forked(folder, server))  # (out of the loop: this process is the trial's)
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


def _forked(folder: Path, server: int) -> int:
    """The trial's process, until its exit code: a session of its own (a timeout kills its
    children too), its output into FOLDER/output, and code 1 on an exception, whose traceback
    ends the output. It then exits as a process does (exit handlers run: torch's compile
    workers are shut down by one)."""
    try:
        os.setsid()
        _die_with(server)
        output = os.open(folder / "output", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        for fd in (1, 2):  # a model's prints must not reach the server's answers
            os.dup2(output, fd)
        nothing = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nothing, 0)
        os.close(output)
        os.close(nothing)
        trial(folder)
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    serve()
