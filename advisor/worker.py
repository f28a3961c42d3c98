"""The worker: one trial in its own process (python -m advisor.worker RESULT_PATH [PHASE_PATH]).

It reads {"spec": ..., "measure": ..., "beat_samples_per_s": ...} as JSON on stdin, writes the
phase it is in to PHASE_PATH as it goes, and writes {"status", "environment",
"memory", "throughput", "failure"} as JSON to RESULT_PATH. An OOM is a result (exit 0); a
workload that breaks its contract is reported as {"workload_error": message} (exit 0), which is
the user's to fix and no result; anything else that goes wrong raises, so the process exits
non-zero and the runner records a crash with the tail of stderr. CUDA state, leaks and crashes
stay in this process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import socket
import sys
from collections.abc import Callable
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


RUNNER_PID = "ADVISOR_RUNNER_PID"  # set by the runner: the process this worker must not outlive


def _die_with_the_runner() -> None:
    """A runner killed outright (kill -9) cannot kill its worker, which runs in a process
    session of its own: ask the kernel to (Linux's PR_SET_PDEATHSIG), so no orphan goes on
    holding the GPU. If the runner is already gone, stop now."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    runner = int(os.environ.get(RUNNER_PID, os.getppid()))
    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != runner:  # it died while this process was starting
        os._exit(1)


def main() -> None:
    _die_with_the_runner()
    request = json.load(sys.stdin)
    spec = TrialSpec.from_dict(request["spec"])
    outcome = run(
        spec,
        MeasureConfig(**request.get("measure", {})),
        request.get("beat_samples_per_s"),
        sys.argv[2] if len(sys.argv) > 2 else None,
        request.get("memory_snapshot"),
    )
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(outcome, f)
    os.replace(tmp, sys.argv[1])  # the runner never reads half a result


if __name__ == "__main__":
    main()
