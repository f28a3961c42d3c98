"""Launching trials: one worker process per trial, forked by a worker fork server (which has
imported torch once), its exit mapped to a status.

This process never initialises CUDA, nor does the server: the trial's process does, and
whatever it does to the GPU (a leak, a crash, a fragmented cache) ends with it.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import advisor
from advisor import gpus, oom_killer
from advisor.config import MeasureConfig
from advisor.errors import WorkloadError
from advisor.result import (
    Environment,
    Failure,
    Status,
    TrialResult,
    failure_from_dict,
    memory_from_dict,
    throughput_from_dict,
)
from advisor.spec import Precision, TrialSpec

STDERR_TAIL_CHARS = 3000  # how much of a crashed worker's output a result keeps


# each trial's folder (its request, result, phase and output), named by the runner's pid
TRIALS_DIR = Path(tempfile.gettempdir()) / f"advisor-trials-{os.getuid()}"
POLL_S = 0.25  # how often the runner looks at the worker's phase and for a cancel


def run_trial(
    spec: TrialSpec,
    settings: MeasureConfig,
    timeout_s: float,
    *,
    beat_samples_per_s: float | None = None,
    on_phase: Callable[[str], None] | None = None,
    gpu: str | None = None,
    compile_cache: Path | None = None,
    cancel: threading.Event | None = None,
    memory_snapshot: Path | None = None,
) -> TrialResult:
    """Measure one spec in a fresh worker process; never raises for what the trial did, only
    WorkloadError for a workload that breaks its contract (nothing to store).

    beat_samples_per_s: timing stops once the spec clearly cannot reach this rate (a sweep's
    best). on_phase: told the worker's phase as it changes. gpu: the CUDA_VISIBLE_DEVICES entry
    the worker runs on (None: as this process sees them). compile_cache: torch.compile's
    cache, shared by the trials (a warm cache compiles in a fraction of the time). cancel:
    once set, the worker is killed and KeyboardInterrupt raised (nothing to store).
    memory_snapshot: the worker writes torch's memory snapshot of the trial's build and
    warm-up there (CUDA), and the result names it."""
    request = {
        "spec": spec.to_dict(),
        "measure": dataclasses.asdict(settings),
        "beat_samples_per_s": beat_samples_per_s,
        "memory_snapshot": str(memory_snapshot) if memory_snapshot else None,
    }
    started = time.perf_counter()
    _remove_leftovers()
    kills_before = oom_killer.kills()
    _own_trials_dir()
    with tempfile.TemporaryDirectory(prefix=f"{os.getpid()}-", dir=TRIALS_DIR) as tmp:
        folder = Path(tmp)
        result_path = folder / "result.json"
        (folder / "request.json").write_text(json.dumps(request))
        (folder / "output").touch()
        server, pid = _fork(folder, worker_environment(spec, gpu, compile_cache))
        if pid is None:
            message = f"the worker's fork server did not start\n{_tail(server.errors())}"
            return _failed(spec, Status.crashed, message, time.perf_counter() - started)
        try:
            returncode, timed_out = _wait(server, pid, timeout_s, folder / "phase", on_phase,
                                          cancel)  # fmt: skip
        except BaseException:  # Ctrl-C, a cancel: leave no worker holding the GPU
            _kill(pid)
            with contextlib.suppress(EOFError):
                server.answer(timeout_s=10)
            raise
        output = (folder / "output").read_text(errors="replace")
        wall_s = time.perf_counter() - started
        if timed_out:
            message = f"killed after {timeout_s:g} s\n{_tail(output)}"
            return _failed(spec, Status.timeout, message, wall_s)
        if returncode is None:
            message = f"the worker's fork server ended during the trial\n{_tail(output)}"
            return _failed(spec, Status.crashed, message, wall_s)
        if returncode == -signal.SIGKILL and _count_rose(oom_killer.kills(), kills_before):
            message = (
                "the host ran out of memory: the kernel's out-of-memory killer ended the worker "
                f"(SIGKILL)\n{_tail(output)}"
            )
            return _failed(spec, Status.oom, message, wall_s)
        if returncode != 0 or not result_path.exists():
            return _failed(spec, Status.crashed, _exit_text(returncode, output), wall_s)
        outcome = json.loads(result_path.read_text())
    if "workload_error" in outcome:
        raise WorkloadError(outcome["workload_error"])
    return _with_mfu(
        TrialResult(
            spec=spec,
            status=Status(outcome["status"]),
            environment=Environment(**outcome["environment"]),
            memory=memory_from_dict(outcome["memory"]) if "memory" in outcome else None,
            throughput=throughput_from_dict(outcome["throughput"])
            if "throughput" in outcome
            else None,
            failure=failure_from_dict(outcome["failure"]) if "failure" in outcome else None,
            wall_s=wall_s,
            memory_snapshot=outcome.get("memory_snapshot"),
        )
    )


def _wait(
    server: ForkServer,
    pid: int,
    timeout_s: float,
    phase_path: Path,
    on_phase: Callable[[str], None] | None,
    cancel: threading.Event | None,
) -> tuple[int | None, bool]:
    """Wait for the trial's process, telling its phase as it changes: its exit code (None if
    its server ended first) and whether it was killed for time. KeyboardInterrupt once
    `cancel` is set."""
    deadline = time.perf_counter() + timeout_s
    phase = ""
    while True:
        try:
            answer = server.answer(timeout_s=POLL_S)
        except EOFError:
            return None, False
        if answer is not None:
            return answer, False
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt
        with contextlib.suppress(OSError):
            now = phase_path.read_text()
            if now and now != phase and on_phase is not None:
                phase = now
                on_phase(phase)
        if time.perf_counter() >= deadline:
            _kill(pid)
            with contextlib.suppress(EOFError):
                server.answer(timeout_s=None)
            return None, True


def _kill(pid: int) -> None:
    """SIGKILL to the trial's session (its children too), or to the trial alone if it has
    not made its session yet."""
    with contextlib.suppress(ProcessLookupError):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            os.kill(pid, signal.SIGKILL)


class ForkServer:
    """A worker fork server (python -m advisor.worker): torch imported once, then one process
    forked per trial, each with the environment the server started with."""

    def __init__(self, env: dict[str, str]) -> None:
        # what it says itself (an import that failed), kept as long as it runs
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115
        self.process = subprocess.Popen(
            # -P: the current folder is not put first on the worker's path (a numpy.py
            # there was imported); a workload file's folder is, by the workload's loader
            [sys.executable, "-P", "-m", "advisor.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            env=env,
            start_new_session=True,  # Ctrl-C in a terminal reaches the runner, which decides
        )
        self._read = b""
        _STARTED.add(self)

    def fork(self, folder: Path) -> int | None:
        """Start the trial of FOLDER: its pid, or None if the server has ended."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(f"{folder}\n".encode())
            self.process.stdin.flush()
            return self.answer(timeout_s=None)
        except (OSError, EOFError):
            return None

    def answer(self, timeout_s: float | None) -> int | None:
        """The server's next line, a number (a pid, then an exit code); None if it has said
        nothing within timeout_s. EOFError once it has ended."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._read:
            ready, _, _ = select.select([fd], [], [], timeout_s)
            if not ready:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise EOFError
            self._read += chunk
        line, _, self._read = self._read.partition(b"\n")
        return int(line)

    def errors(self) -> str:
        self._errors.seek(0)
        return self._errors.read().decode(errors="replace")

    def close(self) -> None:
        """End the server, between trials (it holds nothing a kill could leave behind: it
        never starts CUDA), and reap it."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout, self._errors):
            if pipe is not None:
                pipe.close()


_SERVERS = threading.local()  # each thread's fork servers, by environment (see _fork)
_STARTED: weakref.WeakSet[ForkServer] = weakref.WeakSet()  # every thread's, for the exit


@atexit.register
def _close_servers() -> None:
    """Servers end with this process, not after it: nothing of it lingers once it has exited
    (a shell's next command, a cgroup's removal)."""
    for server in list(_STARTED):
        server.close()


SERVERS_KEPT = 2  # per thread: a sweep alternates two environments (expandable segments or not)


def _fork(folder: Path, env: dict[str, str]) -> tuple[ForkServer, int | None]:
    """Start FOLDER's trial from this thread's server for env and the current folder, started
    now if there is none (or it has ended). A server serves one environment (what torch may
    read on import, such as the allocator's settings, is the trial's), one folder, and one
    trial at a time, so it is the thread's: on Linux it also ends with the thread that started
    it. Past SERVERS_KEPT, the one used longest ago is closed (each holds torch's hundreds of
    MiB of host memory)."""
    servers: dict[tuple[str, tuple[tuple[str, str], ...]], ForkServer] = (
        _SERVERS.__dict__.setdefault("by_env", {})
    )
    key = (os.getcwd(), tuple(sorted(env.items())))  # a trial starts where its runner is
    server = servers.pop(key, None)
    if server is not None:
        pid = server.fork(folder) if server.process.poll() is None else None
        if pid is not None:
            servers[key] = server  # (the one used last, last)
            return server, pid
        server.close()  # it ended (killed, or out of memory): a new one
    while len(servers) >= SERVERS_KEPT:
        servers.pop(next(iter(servers))).close()
    server = servers[key] = ForkServer(env)
    return server, server.fork(folder)


def _count_rose(now: int | None, before: int | None) -> bool:
    return now is not None and before is not None and now > before


def _own_trials_dir() -> None:
    """TRIALS_DIR, this user's alone: in a shared /tmp another user could make it first and
    swap a trial's result."""
    TRIALS_DIR.mkdir(mode=0o700, exist_ok=True)
    if TRIALS_DIR.stat().st_uid != os.getuid():
        raise RuntimeError(f"{TRIALS_DIR} belongs to another user; remove it or set TMPDIR")


def _remove_leftovers() -> None:
    """Trial folders of runners that are gone (killed with -9, which no cleanup survives);
    each folder is named by its runner's pid."""
    for folder in TRIALS_DIR.glob("*-*") if TRIALS_DIR.is_dir() else ():
        pid = folder.name.partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # PermissionError: alive, another user's
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def worker_environment(
    spec: TrialSpec, gpu: str | None = None, compile_cache: Path | None = None
) -> dict[str, str]:
    """The worker sees this advisor and what this process can import, the spec's allocator
    setting (which must be in the environment before CUDA starts), its GPU, and the shared
    compile cache."""
    env = dict(os.environ)
    own = str(Path(advisor.__file__).resolve().parent.parent)  # a checkout, or site-packages
    # not the current folder (`python -m advisor` puts it first): a workload file's folder is
    # put there by the workload's loader, in the worker too
    here = Path.cwd().resolve()
    forwarded = [p for p in sys.path if p and p != own and Path(p).resolve() != here]
    env["PYTHONPATH"] = os.pathsep.join([own, *forwarded])
    env["PYTORCH_CUDA_ALLOC_CONF"] = f"expandable_segments:{spec.expandable_segments}"
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["ADVISOR_RUNNER_PID"] = str(os.getpid())  # worker.RUNNER_PID: it dies with this process
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    if compile_cache is not None:
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(compile_cache))
    return env


def _with_mfu(result: TrialResult) -> TrialResult:
    """MFU against the profile of the GPU the trial ran on, where one matches its name."""
    t, env = result.throughput, result.environment
    if t is None or env is None or t.flops_per_step is None or env.device_name.startswith("CPU"):
        return result
    profile = gpus.profile_for_device_name(env.device_name)
    if profile is None:
        return result
    precision = result.spec.precision
    # torch's default may run convolutions in TF32: MFU against that peak, a lower bound
    peak = profile.peak_flops["tf32" if precision is Precision.default else precision.value]
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
