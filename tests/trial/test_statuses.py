"""oom, crashed and timeout, each produced for real by a worker process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import FAST, spec_of
from test_cli import ADVISOR

from advisor.result import Phase, Status
from advisor.trial.runner import TRIALS_DIR, run_trial


def test_out_of_memory_is_a_result_with_its_phase_and_request():
    # 100k samples: a 25.6 MB batch fits under the 400 MB cap, the forward's activations do not.
    spec = spec_of("model=tiny_mlp", "batch_size=100000", f"memory_cap={400 * 2**20}")
    result = run_trial(spec, FAST, timeout_s=120)
    assert result.status is Status.oom
    assert result.failure.phase is Phase.forward
    assert result.failure.requested_bytes == 100000 * 256 * 4  # one [batch, hidden] fp32 tensor
    assert "can't allocate memory" in result.failure.message
    assert result.environment is not None and result.memory is None


def test_a_cap_too_small_to_build_the_model_is_out_of_memory_not_a_crash():
    """Under a 2 MiB cap on the CPU, a builder's own MemoryError (wrapped by the loader)
    comes before any tensor: recorded as crashed until it was read as what it is. (tiny_mlp
    itself builds under it: the fork server has imported what building needs.)"""
    spec = spec_of("model=tiny_mlp", "model.module._target_=builders.hungry",
                   f"memory_cap={2**21}")  # fmt: skip
    result = run_trial(spec, FAST, timeout_s=120)
    assert result.status is Status.oom, result.failure
    assert result.failure.phase is Phase.setup and "MemoryError" in result.failure.message


def test_a_model_that_raises_is_crashed_with_the_tail_of_its_output():
    spec = spec_of(
        "model=tiny_mlp",
        "model.module._target_=builders.crashing",
    )
    result = run_trial(spec, FAST, timeout_s=120)
    assert result.status is Status.crashed
    assert "worker exited with code 1" in result.failure.message
    assert "ValueError: this model always fails in forward" in result.failure.message


def test_a_model_that_hangs_is_killed_as_timeout():
    spec = spec_of(
        "model=tiny_mlp",
        "model.module._target_=builders.hanging",
    )
    result = run_trial(spec, FAST, timeout_s=8)
    assert result.status is Status.timeout
    assert result.failure.message.startswith("killed after 8 s")
    assert 8 <= result.wall_s < 30


def test_a_worker_dies_with_its_runner_even_under_kill_9(tmp_path):
    """The trial runs in a process session of its own (so a timeout kills its children too),
    forked by the runner's fork server; a runner killed outright must leave neither running."""
    import sys

    code = (
        "from conftest import FAST, spec_of\n"
        "from advisor.trial.runner import run_trial\n"
        "run_trial(spec_of('model=tiny_mlp', 'model.module._target_=builders.hanging'),"
        " FAST, timeout_s=120)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    # (not from tests/: the worker's path leaves out the current folder, and builders is there)
    runner = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path)

    def workers() -> dict[int, tuple[int, bool]]:
        """Every live fork server and trial (advisor.trial.fork_server processes): pid ->
        (parent, whether it leads a session of its own, as a trial does)."""
        found = {}
        for entry in Path("/proc").iterdir():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            state, parent, _group, session = stat.rsplit(")", 1)[1].split()[:4]
            if b"advisor.trial.fork_server" in cmdline and state != "Z":
                found[int(entry.name)] = (int(parent), int(session) == int(entry.name))
        return found

    def mine() -> set[int]:
        """The runner's server and the trial it forked: not a process the server forks while
        it starts (a subprocess, between its fork and its exec, has the server's command
        line: the flake of issue 30, a 'trial' gone within two seconds)."""
        found = workers()
        servers = {pid for pid, (parent, _) in found.items() if parent == runner.pid}
        trials = {pid for pid, (parent, leads) in found.items() if parent in servers and leads}
        return servers | trials

    deadline = time.monotonic() + 60
    while len(started := mine()) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(started) == 2, "the runner never started its server and trial"
    time.sleep(2)
    assert runner.poll() is None and started <= set(workers()), "the trial did not hang"
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()
    deadline = time.monotonic() + 10
    while started & set(workers()):
        assert time.monotonic() < deadline, "a worker outlived its runner"
        time.sleep(0.2)
    # no cleanup survives kill -9: the runner's trial folder is left, and the next trial
    # (of any runner) removes it
    left = list(TRIALS_DIR.glob(f"{runner.pid}-*"))
    assert left and all(folder.is_dir() for folder in left)
    assert run_trial(spec_of("model=tiny_mlp"), FAST, timeout_s=120).status is Status.ok
    assert not any(folder.exists() for folder in left)


def test_trials_are_processes_of_their_own_forked_from_a_server_per_environment(
    tmp_path, monkeypatch
):
    """Each trial a process of its own, forked by the runner's server for its environment and
    folder; a server that ended between trials is replaced, and past SERVERS_KEPT servers the
    one used longest ago is closed."""
    from advisor.trial import fork_server

    monkeypatch.setattr(fork_server, "SERVERS_KEPT", 2)
    notes = tmp_path / "pids"
    spec = spec_of("model=tiny_mlp", "model.module._target_=builders.noting")

    def trial(env: str) -> tuple[int, int]:
        monkeypatch.setenv("ADVISOR_TEST_PIDS", str(notes.with_suffix(env)))
        assert run_trial(spec, FAST, timeout_s=120).status is Status.ok
        pid, parent = map(int, notes.with_suffix(env).read_text().split("\n")[-2].split())
        return pid, parent

    first, second = trial(".a"), trial(".a")
    assert first[0] != second[0] and first[1] == second[1] != os.getpid()  # one server
    os.kill(first[1], signal.SIGKILL)
    third = trial(".a")
    assert third[1] != first[1]  # a new server for the one killed
    other, last = trial(".b"), trial(".c")  # two more environments: .a's server is closed
    assert len({third[1], other[1], last[1]}) == 3
    assert not Path(f"/proc/{third[1]}").exists() and Path(f"/proc/{last[1]}").exists()
    monkeypatch.chdir(tmp_path)  # a trial starts in its runner's folder: a server for it
    assert trial(".c")[1] != last[1]


def test_a_cancelled_trial_ends_with_its_server_and_the_next_trial_is_its_own():
    """Ctrl-C (a cancel) mid-trial ends the trial and its server, so no answer of theirs is
    left for the next trial to read as its own; the next trial on the thread runs whole."""
    cancel = threading.Event()
    busy = _once_the_trial_hangs(cancel.set)
    hanging = spec_of("model=tiny_mlp", "model.module._target_=builders.hanging")
    with pytest.raises(KeyboardInterrupt):
        run_trial(hanging, FAST, timeout_s=120, cancel=cancel)
    (server,) = busy
    assert server.trial is not None and _ends(server.trial) and _ends(server.process.pid)
    assert run_trial(spec_of("model=tiny_mlp"), FAST, timeout_s=120).status is Status.ok


def test_a_server_that_ends_mid_trial_or_cannot_start_is_a_crash_that_says_so(
    tmp_path, monkeypatch
):
    busy = _once_the_trial_hangs(lambda: os.kill(busy[0].process.pid, signal.SIGKILL))
    hanging = spec_of("model=tiny_mlp", "model.module._target_=builders.hanging")
    result = run_trial(hanging, FAST, timeout_s=120)
    assert result.status is Status.crashed
    assert result.failure.message.startswith("the worker's fork server ended during the trial")
    assert busy[0].trial is not None and _ends(busy[0].trial)  # its trial too
    site = tmp_path / "no-torch"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    monkeypatch.syspath_prepend(str(site))  # the next server's path: it cannot import torch
    result = run_trial(spec_of("model=tiny_mlp"), FAST, timeout_s=120)
    assert result.status is Status.crashed
    message = result.failure.message
    assert message.startswith("the worker's fork server ended before the trial started")
    assert "torch" in message and "Traceback" in message


def _once_the_trial_hangs(then) -> list:
    """Once a server's trial is forked and has had a second to reach its hang: the busy
    servers (filled in then), after calling then()."""
    from advisor.trial import fork_server

    busy: list = []

    def watch() -> None:
        while not (found := [s for s in list(fork_server._STARTED) if s.busy and s.trial]):
            time.sleep(0.1)
        time.sleep(1.0)
        busy.extend(found)
        then()

    threading.Thread(target=watch, daemon=True).start()
    return busy


def _ends(pid: int) -> bool:
    """Whether the process ends (or is a zombie) within 10 s: a kill takes a moment."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if " Z " in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:3]:
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


CGROUP_V1 = Path("/sys/fs/cgroup/memory")


@pytest.mark.skipif(
    not os.access(CGROUP_V1, os.W_OK),
    reason="makes the host run out of memory for real in a cgroup: needs cgroup v1 writable",
)
def test_a_worker_the_oom_killer_ends_is_the_host_out_of_memory(db_url):
    """A memory cgroup of 1.5 GiB for the command; the trial's 4 GB batch makes the kernel's
    OOM killer end the worker (it was stored as crashed, unnamed)."""
    group = CGROUP_V1 / f"advisor-test-{os.getpid()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(1536 * 2**20))
        run = subprocess.run(
            [ADVISOR, "run", "model=tiny_mlp", "device=cpu", "batch_size=4000000",
             f"db_url={db_url}", "--json"],
            preexec_fn=lambda: (group / "tasks").write_text(str(os.getpid())),
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        kills = (group / "memory.oom_control").read_text()
    finally:
        group.rmdir()
    assert "oom_kill 1" in kills
    assert run.returncode == 0, run.stderr  # an out-of-memory is a measurement
    trial = json.loads(run.stdout)
    assert trial["status"] == "oom"
    assert trial["failure"]["message"].startswith("the host ran out of memory: the kernel's")


def test_a_trials_folder_of_another_user_is_one_line_before_anything_is_measured(tmp_path):
    """In a shared temporary folder, another user may have made advisor's trials folder
    first (and could swap a trial's result): refused in one line, exit 1 (it was a 43-line
    traceback), nothing measured or stored."""
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    theirs = tmp_path / f"advisor-trials-{os.getuid()}"
    theirs.mkdir(mode=0o777)
    os.chown(theirs, 65534, 65534)  # nobody's
    env = {**os.environ, "TMPDIR": str(tmp_path), "COLUMNS": "200"}
    database = tmp_path / "results.sqlite"
    done = subprocess.run(
        [ADVISOR, "run", "model=tiny_mlp", "device=cpu", f"db_url=sqlite:///{database}"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1 and done.stderr.strip() == (
        f"advisor: {theirs}, where advisor's trials run, belongs to another user: remove it, "
        "or set TMPDIR to a folder of your own"
    ), done.stderr
    assert list(theirs.iterdir()) == []
