"""Launching trials: one worker process per trial, its exit mapped to a status.

This process never initialises CUDA: the worker does, and whatever it does to the GPU (a leak,
a crash, a fragmented cache) ends with it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from advisor import gpus
from advisor.config import MeasureConfig
from advisor.errors import WorkloadError
from advisor.result import (
    Environment,
    Failure,
    Status,
    Throughput,
    TrialResult,
    failure_from_dict,
    memory_from_dict,
)
from advisor.spec import TrialSpec

STDERR_TAIL_CHARS = 3000  # how much of a crashed worker's output a result keeps


def run_trial(spec: TrialSpec, settings: MeasureConfig, timeout_s: float) -> TrialResult:
    """Measure one spec in a fresh worker process; never raises for what the trial did, only
    WorkloadError for a workload that breaks its contract (nothing to store)."""
    request = json.dumps({"spec": spec.to_dict(), "measure": dataclasses.asdict(settings)})
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="advisor-trial-") as tmp:
        result_path = Path(tmp) / "result.json"
        worker = subprocess.Popen(
            [sys.executable, "-m", "advisor.worker", str(result_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # a model's prints must not reach our stdout (--json)
            env=worker_environment(spec),
            start_new_session=True,  # so a timeout kills the worker's children too
            text=True,
        )
        try:
            output, _ = worker.communicate(request, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            output, _ = worker.communicate()
            message = f"killed after {timeout_s:g} s\n{_tail(output)}"
            return _failed(spec, Status.timeout, message, time.perf_counter() - started)
        except BaseException:  # Ctrl-C or a kill of ours: leave no worker holding the GPU
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
            raise
        wall_s = time.perf_counter() - started
        if worker.returncode != 0 or not result_path.exists():
            return _failed(spec, Status.crashed, _exit_text(worker.returncode, output), wall_s)
        outcome = json.loads(result_path.read_text())
    if "workload_error" in outcome:
        raise WorkloadError(outcome["workload_error"])
    return _with_mfu(
        TrialResult(
            spec=spec,
            status=Status(outcome["status"]),
            environment=Environment(**outcome["environment"]),
            memory=memory_from_dict(outcome["memory"]) if "memory" in outcome else None,
            throughput=Throughput(**outcome["throughput"]) if "throughput" in outcome else None,
            failure=failure_from_dict(outcome["failure"]) if "failure" in outcome else None,
            wall_s=wall_s,
        )
    )


def worker_environment(spec: TrialSpec) -> dict[str, str]:
    """The worker sees what this process can import, and the spec's allocator setting, which
    must be in the environment before CUDA starts."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["PYTORCH_CUDA_ALLOC_CONF"] = f"expandable_segments:{spec.expandable_segments}"
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def _with_mfu(result: TrialResult) -> TrialResult:
    """MFU against the profile of the GPU the trial ran on, where one matches its name."""
    t, env = result.throughput, result.environment
    if t is None or env is None or t.flops_per_step is None or env.device_name.startswith("CPU"):
        return result
    profile = gpus.profile_for_device_name(env.device_name)
    if profile is None:
        return result
    peak = profile.peak_flops[result.spec.precision.value]
    mfu = t.flops_per_step / t.step_s_median / peak
    return dataclasses.replace(result, throughput=dataclasses.replace(t, mfu=mfu))


def _failed(spec: TrialSpec, status: Status, message: str, wall_s: float) -> TrialResult:
    return TrialResult(
        spec=spec,
        status=status,
        environment=None,
        memory=None,
        throughput=None,
        failure=Failure(message=message),
        wall_s=wall_s,
    )


def _exit_text(returncode: int, output: str) -> str:
    if returncode < 0:
        how = f"killed by {signal.Signals(-returncode).name}"
    else:
        how = f"exited with code {returncode}"
    return f"worker {how}\n{_tail(output)}"


def _tail(output: str) -> str:
    return output[-STDERR_TAIL_CHARS:]
