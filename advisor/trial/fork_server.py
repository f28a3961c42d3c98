"""The fork server: each trial a process forked from one that has imported torch once.

A trial's process used to import torch for itself, 2-3 s of every trial. The server (python -m
advisor.trial.fork_server ANSWERS_FD) imports advisor.trial.worker, torch, torch._dynamo, the
built-in workloads (advisor.catalog) and the model code of the libraries the workload uses
(transformers, torchvision) once; it never starts CUDA, and forks a process per trial, which
still has a process of its own (its CUDA state, a crash or a leak end with it) and starts in
milliseconds.

The runner writes one trial folder per line to the server's stdin. The server answers on a pipe
of its own (its stdout and stderr are its log): "PID" once the trial's process is forked, then
"PID CODE" with its exit code. It reaps that process only when the next folder (or its end)
comes, so the pid the runner may signal is never another process's. One trial at a time; a
server ends with its stdin, and on Linux with the thread that started it (PR_SET_PDEATHSIG),
and a trial with its server.

Only on Linux does the server import torch first: on macOS, forking after torch's import is not
safe (its Objective-C and Accelerate libraries), so there each trial imports torch itself.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings
from pathlib import Path

PRELOAD = sys.platform.startswith("linux")  # import torch before forking (see above)
RUNNER_PID = "ADVISOR_RUNNER_PID"  # set by the runner: the process the server must not outlive
# set by the runner: the model libraries the trials' workload uses, comma-separated; the server
# imports each one's model code before it forks, as it imports torch's
MODEL_LIBRARIES = "ADVISOR_MODEL_LIBRARIES"
# what a model of each library imports while it is built: transformers' gpt2 imported some
# 2,100 modules in each trial, 3.3 s of its setup on an H200 host
# (experiments/2026-12-02-h200-fork-preload)
LIBRARY_MODULES = {
    "transformers": "transformers.modeling_utils",
    "torchvision": "torchvision.models",
}
SERVERS_KEPT = 2  # per thread: a sweep alternates two environments (expandable segments or not)


class ForkServer:
    """The runner's end of one server, started with one trial environment and folder."""

    def __init__(self, env: dict[str, str]) -> None:
        # what the server says itself (an import that failed), kept as long as it runs
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        self._said = ""  # the log's text, once closed
        answers, theirs = os.pipe()
        self.process = subprocess.Popen(
            # -P: the current folder is not put first on the trial's path (a numpy.py there
            # was imported); a workload file's folder is, by the workload's loader
            [sys.executable, "-P", "-m", "advisor.trial.fork_server", str(theirs)],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=(theirs,),
            start_new_session=True,  # Ctrl-C in a terminal reaches the runner, which decides
        )
        os.close(theirs)
        self._answers = os.fdopen(answers, "rb", buffering=0)
        self._selector = selectors.DefaultSelector()  # (select() fails past fd 1023)
        self._selector.register(self._answers, selectors.EVENT_READ)
        self._unread = b""
        self.busy = False  # a trial asked for whose exit code is not read yet
        self.trial: int | None = None  # that trial's pid, once the server has said it
        self.asked = 0  # trials asked for
        _STARTED.add(self)

    def start(self, folder: Path) -> bool:
        """Ask for FOLDER's trial; False if the server has ended."""
        assert self.process.stdin is not None
        self.busy, self.trial, self.asked = True, None, self.asked + 1
        try:
            self.process.stdin.write(f"{folder}\n".encode())
            self.process.stdin.flush()
        except OSError:
            return False
        return True

    def answer(self, timeout_s: float) -> tuple[int, int | None] | None:
        """The server's next answer: (pid, None) once the trial is forked, (pid, exit code)
        once it has ended; None if it said nothing within timeout_s. EOFError once the server
        has ended."""
        while b"\n" not in self._unread:
            if not self._selector.select(timeout_s):
                return None
            chunk = self._answers.read(4096)
            if not chunk:
                raise EOFError
            self._unread += chunk
        line, _, self._unread = self._unread.partition(b"\n")
        pid, *code = map(int, line.split())
        self.trial = pid
        if code:
            self.busy = False
            return pid, code[0]
        return pid, None

    def abandon(self) -> None:
        """End the trial, its whole session, and the server (after a timeout, an interrupt or
        the server's own end): nothing of either is left, and no answer of theirs is left
        unread for the next trial to take as its own."""
        alive = self.process.poll() is None  # (else, on Linux, the trial ended with it)
        if self.trial is not None and self.trial > 1 and self.busy and alive:
            with contextlib.suppress(ProcessLookupError):
                try:  # (its server has not reaped it: the pid is still the trial's)
                    os.killpg(self.trial, signal.SIGKILL)
                except ProcessLookupError:  # it has not made its session yet
                    os.kill(self.trial, signal.SIGKILL)
        self.close()

    def close(self) -> None:
        """End the server and reap it. It never starts CUDA, so a kill leaves nothing behind."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        self._said = self.log()
        _STARTED.discard(self)
        self._selector.close()
        for pipe in (self.process.stdin, self._answers, self._log):
            if pipe is not None:
                pipe.close()

    def log(self) -> str:
        """What the server printed itself (a failed import's traceback), closed or not."""
        if self._log.closed:
            return self._said
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def usable(self) -> bool:
        """Running, and with no trial of its own left unfinished."""
        return not self.busy and self.process.poll() is None


class _ThreadServers(threading.local):
    def __init__(self) -> None:
        self.by_start: dict[tuple[str, tuple[tuple[str, str], ...]], ForkServer] = {}


_SERVERS = _ThreadServers()  # each thread's servers, by where and with what they started
_STARTED: set[ForkServer] = set()  # every thread's not closed yet: reaped, and at the exit


def server_for(env: dict[str, str]) -> ForkServer:
    """This thread's server for env and the current folder, started now if there is none (or
    it has ended). A server serves one environment (what torch may read on import, such as the
    allocator's settings, is the trial's), one folder, and one trial at a time, so it is the
    thread's. Past SERVERS_KEPT the one used longest ago is closed: each holds torch's
    hundreds of MiB of host memory."""
    for ended in [s for s in list(_STARTED) if not s.busy and s.process.poll() is not None]:
        ended.close()  # (a thread's that ended, on Linux with it: its pipes, its log)
    servers = _SERVERS.by_start
    key = (os.getcwd(), tuple(sorted(env.items())))  # a trial starts where its runner is
    server = servers.pop(key, None)
    if server is not None and server.usable():
        servers[key] = server  # (the one used last, last)
        return server
    if server is not None:
        server.close()  # it ended (killed, out of memory) or was left mid-trial: a new one
    while len(servers) >= SERVERS_KEPT:
        servers.pop(next(iter(servers))).close()
    server = servers[key] = ForkServer(env)
    return server


@atexit.register
def _close_all() -> None:
    """Servers end with this process, not after it: nothing of it lingers once it has exited
    (a shell's next command, a cgroup's removal)."""
    for server in list(_STARTED):
        server.close()


def die_with(parent: int) -> None:
    """A parent killed outright (kill -9) cannot kill its children, which run in process
    sessions of their own: ask the kernel to (Linux's PR_SET_PDEATHSIG), so no orphan goes on
    holding the GPU. If the parent is already gone, stop now."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # it died while this process was starting
        os._exit(1)


def _import_model_libraries(names: str) -> None:
    """The model code of the libraries named (none of it starts CUDA); one not installed, or
    broken, is left for the trial to say."""
    for name in filter(None, names.split(",")):
        if module := LIBRARY_MODULES.get(name):
            with contextlib.suppress(Exception):  # (the trial's own import says what)
                importlib.import_module(module)


def main(answers_fd: int) -> None:
    """The server's loop (see the module's docstring)."""
    die_with(int(os.environ.get(RUNNER_PID, os.getppid())))
    answers = os.fdopen(answers_fd, "w", buffering=1)
    if PRELOAD:
        # torch's import leaves a thread of its own, idle: forking after it (not after
        # CUDA's start, which the server never makes) is what DataLoader's workers do too
        warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
        # torch, and what every trial imports next: a model built under a device imports
        # dynamo (torch.utils._device), some 800 modules and a second of each trial on 2 cores
        import torch._dynamo  # noqa: F401

        import advisor.catalog  # noqa: F401  (the built-in workloads)
        import advisor.trial.worker  # noqa: F401

        _import_model_libraries(os.environ.get(MODEL_LIBRARIES, ""))
    server, last = os.getpid(), None
    while line := sys.stdin.readline():
        if last is not None:
            os.waitpid(last, 0)  # reaped only now: until then its pid is the trial's alone
        pid = os.fork()
        if pid == 0:
            answers.close()  # (the runner sees the answers end when the server does)
            code = _trial_process(Path(line.strip()), server)
            # a process's exit handlers (torch's compile workers are shut down by one), without
            # finalizing torch's modules as an interpreter's exit does: a second per trial
            atexit._run_exitfuncs()
            with contextlib.suppress(OSError):  # (its output's disk full: the result is kept)
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
        answers.write(f"{pid}\n")
        ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        assert ended is not None  # (None only with WNOHANG)
        code = ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status
        answers.write(f"{pid} {code}\n")
        last = pid


def _trial_process(folder: Path, server: int) -> int:
    """The trial's process, until its exit code: a session of its own (a timeout kills its
    children too), its output into FOLDER/output, and code 1 on an exception, whose traceback
    ends the output."""
    try:
        os.setsid()
        die_with(server)
        output = os.open(folder / "output", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        for fd in (1, 2):  # a model's prints must not reach the server's log
            os.dup2(output, fd)
        nothing = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nothing, 0)
        os.close(output)
        os.close(nothing)
        from advisor.trial.worker import trial

        trial(folder)
    except SystemExit as stop:  # as Python would exit with it
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    main(int(sys.argv[1]))
