"""A trial, in its own process: its spec in, its result out.

The process is forked by the fork server (advisor/trial/fork_server.py), which imports this module
(and torch) once. The trial reads {"spec": ..., "measure": ..., "beat_samples_per_s": ...} as
JSON from FOLDER/request.json, writes the phase it is in to FOLDER/phase as it goes, and
{"status", "environment", "memory", "throughput", "failure"} as JSON to FOLDER/result.json. An
OOM is a result (exit 0); a workload that breaks its contract is reported as
{"workload_error": message} (exit 0), which is the user's to fix and no result; anything else
that goes wrong raises, so the process exits non-zero and the runner records a crash with the
tail of its output. CUDA state, leaks and crashes stay in the trial's process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from advisor import gpus
from advisor.errors import WorkloadError
from advisor.result import Environment, Failure, Status
from advisor.spec import Device, TrialSpec, plain
from advisor.trial.measure import measure
from advisor.trial.out_of_memory import OutOfMemory, apply_memory_cap
from advisor.trial.timing import MeasureConfig
from advisor.version import version

# Read on import, before a trial's memory cap: under a 2 MiB cap, reading the package's
# metadata raised MemoryError and the trial was recorded as crashed, not oom.
ADVISOR_VERSION = version()


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
    """Tell the runner the phase through a file it polls (stdout belongs to the model). A
    phase that cannot be written (its disk filled during the trial) costs the progress line,
    not the trial."""

    def write(phase: str) -> None:
        if path is not None:
            with contextlib.suppress(OSError):  # (replaced only once written whole)
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
    # into the room the runner took for it (not truncated first, which would give it back):
    # a disk that filled during the trial still takes the result
    with tmp.open("r+b" if tmp.exists() else "wb") as file:
        file.write(json.dumps(outcome).encode())
        file.truncate()
    os.replace(tmp, folder / "result.json")  # the runner never reads half a result
