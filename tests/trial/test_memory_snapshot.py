"""advisor run memory_snapshot=FILE.pickle, where no GPU is needed to check it: what is refused
before anything is measured, and how a trial's snapshot is kept, exported and shown. The
snapshot itself is written on the GPU (test_gpu.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from fake_backend import fake_result
from test_cli import advisor

from advisor.config import load, trial_spec
from advisor.errors import ConfigError
from advisor.store.store import Store
from advisor.verbs import snapshot_path


def test_a_snapshot_on_the_cpu_is_refused_and_nothing_stored(db_url, tmp_path):
    done = advisor("run", "model=tiny_mlp", "device=cpu", f"memory_snapshot={tmp_path}/m.pickle",
                   db_url=db_url)  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "memory_snapshot records the CUDA caching allocator's history" in done.stderr
    assert Store(db_url).trials() == []
    assert not (tmp_path / "m.pickle").exists()


@pytest.mark.parametrize(
    "given, said",
    [("m.pkl", "name a .pickle file"), ("missing/m.pickle", "cannot write into")],
)
def test_a_snapshot_path_that_cannot_be_written_is_said_first(tmp_path, monkeypatch, given, said):
    monkeypatch.chdir(tmp_path)
    spec = trial_spec(load(["model=tiny_mlp", "device=cuda"]))
    with pytest.raises(ConfigError, match=said):
        snapshot_path(given, spec)
    assert snapshot_path("m.pickle", spec) == tmp_path / "m.pickle"  # absolute, for the worker


def test_a_sweep_takes_no_snapshot(db_url, tmp_path):
    done = advisor("sweep", "model=tiny_mlp", "device=cpu", "gpu.memory=64MiB",
                   f"memory_snapshot={tmp_path}/m.pickle", db_url=db_url)  # fmt: skip
    assert done.returncode == 2 and "memory_snapshot is for one measured trial, not sweep" in (
        done.stderr
    )


def test_a_trials_snapshot_is_stored_exported_and_shown(db_url, tmp_path):
    snapshot = tmp_path / "trial.pickle"
    snapshot.write_bytes(b"not read by advisor")
    spec = trial_spec(load(["model=tiny_mlp", "device=cpu"]))
    store = Store(db_url)
    trial = store.add(dataclasses.replace(fake_result(spec), memory_snapshot=str(snapshot)))
    assert store.get(trial.id).memory_snapshot == str(snapshot)
    shown = advisor("show", str(trial.id), db_url=db_url)
    assert f"memory snapshot: {snapshot} (drag it onto https://pytorch.org/memory_viz)" in (
        shown.stdout.replace("\n", "")
    )
    exported = tmp_path / "out.json"
    assert advisor("export", f"out={exported}", db_url=db_url).returncode == 0
    assert json.loads(exported.read_text())["trials"][0]["memory_snapshot"] == str(snapshot)
    other = f"sqlite:///{tmp_path}/other.sqlite"
    assert advisor("import", str(exported), db_url=other).returncode == 0
    assert Store(other).trials()[0].memory_snapshot == str(snapshot)
    snapshot.unlink()
    gone = advisor("show", str(trial.id), db_url=db_url)
    assert "(no longer there)" in gone.stdout


def test_a_snapshot_that_cannot_be_written_costs_the_trial_nothing(tmp_path, monkeypatch, capsys):
    """(torch's recording replaced, so this runs without a GPU.) The dump fails: the trial's
    own error, here an OOM, goes on as it was; recording is stopped; no part is left."""
    import torch

    from advisor.trial.snapshot import MemorySnapshot

    calls = []
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history",
                        lambda *a, **k: calls.append(k))  # fmt: skip

    def dump(path: str) -> None:
        Path(path).write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", dump)
    path = tmp_path / "trial.pickle"
    with pytest.raises(torch.OutOfMemoryError), MemorySnapshot(str(path)):
        raise torch.OutOfMemoryError("CUDA out of memory")
    assert calls == [{"max_entries": 100_000}, {"enabled": None}]  # started, then stopped
    assert list(tmp_path.iterdir()) == []  # neither the snapshot nor its part
    assert "no memory snapshot written to" in capsys.readouterr().err
