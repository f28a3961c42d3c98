"""Launching trials: a process per trial, forked by a fork server (which has imported torch
once), its exit mapped to a status.

This process never initialises CUDA, nor does the server: the trial's process does, and
whatever it does to the GPU (a leak, a crash, a fragmented cache) ends with it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from advisor import gpus, paths
from advisor.errors import TrialsFolderError, WorkloadError
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
from advisor.trial import fork_server, oom_killer
from advisor.trial.timing import MeasureConfig

STDERR_TAIL_CHARS = 3000  # how much of a crashed worker's output a result keeps


# each trial's folder (its request, result, phase and output), named by the runner's pid
TRIALS_DIR = Path(tempfile.gettempdir()) / f"advisor-trials-{os.getuid()}"
POLL_S = 0.25  # how often the runner looks at the worker's phase and for a cancel
# The result file's room, taken before the trial starts (a result is a few KiB): a temporary
# folder whose disk fills while the trial runs cannot then lose what it measured.
RESULT_ROOM_BYTES = 1 << 20


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
    """Measure one spec in a process of its own; never raises for what the trial did, only
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
    with _trial_folder() as folder:
        result_path = folder / "result.json"
        try:
            _reserve(folder / "result.json.tmp", RESULT_ROOM_BYTES)
            (folder / "request.json").write_text(json.dumps(request))
            (folder / "output").touch()
        except OSError as error:
            raise _unusable(error) from None
        env = worker_environment(spec, gpu, compile_cache)
        server, returncode, timed_out = _run(folder, env, timeout_s, on_phase, cancel)
        output = (folder / "output").read_text(errors="replace")
        wall_s = time.perf_counter() - started
        if timed_out:
            message = f"killed after {timeout_s:g} s\n{_tail(output)}"
            return _failed(spec, Status.timeout, message, wall_s)
        killed = _count_rose(oom_killer.kills(), kills_before)
        if returncode is None and server.trial is None:
            message = f"the worker's fork server ended before the trial started\n{server.log()}"
            return _failed(spec, Status.crashed, _tail(message), wall_s)
        if returncode in (None, -signal.SIGKILL) and killed:
            message = (
                "the host ran out of memory: the kernel's out-of-memory killer ended the worker "
                f"(SIGKILL)\n{_tail(output)}"
            )
            return _failed(spec, Status.oom, message, wall_s)
        if returncode is None:
            message = f"the worker's fork server ended during the trial\n{_tail(output)}"
            return _failed(spec, Status.crashed, message, wall_s)
        if returncode != 0 or not result_path.exists():
            said = output or server.log()  # (a trial that failed before its output was its own)
            return _failed(spec, Status.crashed, _exit_text(returncode, said), wall_s)
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


def _run(
    folder: Path,
    env: dict[str, str],
    timeout_s: float,
    on_phase: Callable[[str], None] | None,
    cancel: threading.Event | None,
) -> tuple[fork_server.ForkServer, int | None, bool]:
    """FOLDER's trial, forked by this thread's server for env: the server, the trial's exit
    code (None if the server ended first) and whether its time ran out. A server kept from an
    earlier trial that had ended before this one was forked is replaced, once."""
    for _ in range(2):
        server = fork_server.server_for(env)
        try:
            returncode, timed_out = _wait(server, folder, timeout_s, on_phase, cancel)
        except BaseException:  # Ctrl-C, a cancel: leave no trial holding the GPU
            server.abandon()
            raise
        if returncode is not None:
            break
        server.abandon()  # its answers cannot be trusted to follow in step any more
        if timed_out or server.trial is not None or server.asked == 1:
            break  # (else it had ended before this trial was forked: once more, a new one)
    return server, returncode, timed_out


def _wait(
    server: fork_server.ForkServer,
    folder: Path,
    timeout_s: float,
    on_phase: Callable[[str], None] | None,
    cancel: threading.Event | None,
) -> tuple[int | None, bool]:
    """Start FOLDER's trial and wait for it, telling its phase as it changes: its exit code
    (None if the server ended first) and whether its time ran out, the server's start
    included. KeyboardInterrupt once `cancel` is set."""
    deadline = time.perf_counter() + timeout_s
    if not server.start(folder):
        return None, False
    phase = ""
    while True:
        try:
            answer = server.answer(timeout_s=POLL_S)
        except EOFError:
            return None, False
        if answer is not None and answer[1] is not None:
            return answer[1], False
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt
        with contextlib.suppress(OSError):
            now = (folder / "phase").read_text()
            if now and now != phase and on_phase is not None:
                phase = now
                on_phase(phase)
        if time.perf_counter() >= deadline:
            return None, True


def _count_rose(now: int | None, before: int | None) -> bool:
    return now is not None and before is not None and now > before


def _own_trials_dir() -> None:
    """TRIALS_DIR, this user's alone: in a shared /tmp another user could make it first and
    swap a trial's result. TrialsFolderError (one line) where it cannot be."""
    try:
        TRIALS_DIR.mkdir(mode=0o700, exist_ok=True)
        owner = TRIALS_DIR.stat().st_uid
    except OSError as error:
        raise _unusable(error) from None
    if owner != os.getuid():
        raise TrialsFolderError(
            f"{TRIALS_DIR}, where advisor's trials run, belongs to another user: remove it, "
            "or set TMPDIR to a folder of your own"
        )


@contextlib.contextmanager
def _trial_folder() -> Iterator[Path]:
    """A trial's folder in TRIALS_DIR, named by this runner's pid, removed after the trial."""
    try:
        made = tempfile.TemporaryDirectory(prefix=f"{os.getpid()}-", dir=TRIALS_DIR)
    except OSError as error:
        raise _unusable(error) from None
    with made as tmp:
        yield Path(tmp)


def _reserve(path: Path, size: int) -> None:
    """A file that holds `size` bytes of disk, for the worker to write into (worker.py)."""
    with path.open("wb") as file:
        try:
            os.posix_fallocate(file.fileno(), 0, size)
        except (AttributeError, OSError) as error:  # (a file system or OS without it)
            if isinstance(error, OSError) and error.errno == errno.ENOSPC:
                raise
            file.write(bytes(size))
            file.flush()


def _unusable(error: OSError) -> TrialsFolderError:
    """The one line for a temporary folder a trial cannot be set up in."""
    folder = TRIALS_DIR.parent
    if error.errno == errno.ENOSPC:
        free = shutil.disk_usage(folder).free // 1024
        why = f"is on a full disk ({free} KiB free; a trial needs {RESULT_ROOM_BYTES >> 10} KiB)"
        todo = "free some space, or set TMPDIR to a folder on another disk"
    else:
        why = f"cannot hold advisor's trials ({error.strerror or error})"
        todo = "set TMPDIR to a folder you can write"
    return TrialsFolderError(
        f"the temporary folder {folder} {why}: the trial was not started; {todo}"
    )


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
    own = str(paths.PACKAGE.parent)  # a checkout, or site-packages
    # not the current folder (`python -m advisor` puts it first): a workload file's folder is
    # put there by the workload's loader, in the worker too
    here = Path.cwd().resolve()
    forwarded = [p for p in sys.path if p and p != own and Path(p).resolve() != here]
    env["PYTHONPATH"] = os.pathsep.join([own, *forwarded])
    env["PYTORCH_CUDA_ALLOC_CONF"] = f"expandable_segments:{spec.expandable_segments}"
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env[fork_server.RUNNER_PID] = str(os.getpid())  # the server dies with this process
    env[fork_server.MODEL_LIBRARIES] = ",".join(name for name, _ in spec.model.versions)
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
