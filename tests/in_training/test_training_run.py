"""The user's real training recorded in the history (issue 29, item 3): a plain loop, transformers'
Trainer and Lightning's, each stored as a trial of kind training beside the measured trial it
followed, rewritten as it goes; a fallback stored as an OOM and the run's new setting; and none
of it taken for a measurement by the verbs that predict."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from conftest import spec_of
from fake_backend import fake_result
from rich.console import Console
from torch import nn
from typer.testing import CliRunner

from advisor.cli import app
from advisor.errors import ConfigError
from advisor.gpus import cpu_name
from advisor.in_training.oom_fallback import OOMFallback, Split
from advisor.in_training.training_run import TrainingRun
from advisor.queries import history, recommendation
from advisor.report import tables
from advisor.result import Kind, Status
from advisor.spec import Device
from advisor.store.store import Store
from advisor.store.trial_filter import TrialFilter


def followed(db_url: str, *overrides: str) -> int:
    """A measured trial stored to follow (its figures are the recorded backend's)."""
    spec = spec_of("model=tiny_mlp", "batch_size=16", *overrides)
    stored = Store(db_url).add(fake_result(spec))
    assert stored.id is not None
    return stored.id


def runs(db_url: str) -> list:
    return sorted(history(db_url=db_url, kind="training"), key=lambda r: r.id)


def tiny_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: int) -> None:
    loss = model(torch.randn(batch, 32)).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def test_a_plain_loop_is_a_training_run_of_the_trial_it_followed_stored_as_it_goes(db_url):
    trial = followed(db_url)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    seen_during = []
    with TrainingRun(trial, model=model, optimizer=optimizer, every=5, warmup=3,
                     db_url=db_url) as run:  # fmt: skip
        for step in range(1, 26):
            tiny_step(model, optimizer, 16)
            run.step()
            if step == 9:  # the first window (steps 4-8) is stored before the run ends
                seen_during = runs(db_url)
    assert [(r.follows, r.throughput.timed_steps) for r in seen_during] == [(trial, 5)]
    (stored,) = runs(db_url)
    assert stored.id == seen_during[0].id  # the same row, rewritten
    assert (stored.kind, stored.follows, stored.status) == (Kind.training, trial, Status.ok)
    assert stored.spec == Store(db_url).get(trial).spec.uncapped
    t = stored.throughput
    assert (t.timed_steps, t.warmup_steps) == (22, 3)  # 4 windows of 5, and the last 2 steps
    assert t.samples_per_s == pytest.approx(16 / t.step_s_median) and t.samples_per_s > 0
    assert stored.memory is None  # the CPU's figures are not the allocator's: none invented
    assert history(db_url=db_url, kind="measured")[0].id == trial


def test_a_loop_that_raises_is_stored_as_the_error_that_ended_it(db_url):
    trial = followed(db_url)
    model = nn.Linear(32, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    # (the error goes on to the loop's caller)
    with pytest.raises(torch.cuda.OutOfMemoryError), TrainingRun(trial, every=2, warmup=1,
                                                                 db_url=db_url) as run:  # fmt: skip
        for _ in range(4):
            tiny_step(model, optimizer, 16)
            run.step()
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    with pytest.raises(ValueError), TrainingRun(trial, warmup=0, db_url=db_url):
        raise ValueError("a bad batch")
    oom, crashed = runs(db_url)
    assert (oom.status, oom.failure.message) == (Status.oom, "CUDA out of memory. Tried to "
                                                 "allocate 2.00 GiB")  # fmt: skip
    assert (crashed.status, crashed.failure.message) == (Status.crashed, "ValueError: a bad batch")
    assert oom.throughput.timed_steps == 2  # what it had recorded before (steps 2-3) is kept


def test_a_fallback_is_stored_as_an_oom_and_the_run_goes_on_at_its_new_split(db_url):
    """Step 3's micro batch of 16 runs out of memory: that setting is stored as an OOM of the
    run, and the run goes on, as a run of its own, at 4 a micro batch and 4 of them."""
    trial = followed(db_url)
    model = nn.Linear(32, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with TrainingRun(trial, every=2, warmup=1, db_url=db_url) as run:
        fallback = OOMFallback([Split(16, 1), Split(4, 4)], on_fallback=run.fell_back)

        def micro_step(micro: torch.Tensor, weight: float) -> None:
            if len(micro) > 4 and fallback.steps == 2:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
            (model(micro).square().mean() * weight).backward()

        def finish() -> None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        for _ in range(8):
            fallback.step(torch.randn(16, 32), micro_step, finish, optimizer.zero_grad)
            run.step()
    oom, after = runs(db_url)
    assert (oom.status, oom.spec.batch_size, oom.spec.grad_accum) == (Status.oom, 16, 1)
    assert oom.failure.message == "step 3: CUDA out of memory. Tried to allocate 1 GiB"
    assert (after.status, after.spec.batch_size, after.spec.grad_accum) == (Status.ok, 4, 4)
    assert after.throughput.timed_steps == 5  # the 6 steps at the new split, less 1 warm-up
    assert after.throughput.samples_per_s == pytest.approx(16 / after.throughput.step_s_median)
    assert {oom.follows, after.follows} == {trial}


def test_a_training_run_is_no_prediction(db_url, tmp_path):
    """A run of the same setting as a measured trial is never taken for its measurement: not
    reused by a sweep, not counted by recommend, not in an export's trials."""
    trial = followed(db_url)
    with TrainingRun(trial, warmup=0, every=1, db_url=db_url) as run:
        run.step()
    store = Store(db_url)
    measured = store.get(trial)
    env = measured.environment
    assert store.measured_before(measured.spec, env.device_name, env.torch).id == trial
    assert [r.id for r in store.trials()] == [trial]
    assert len(store.trials(where=TrialFilter(kind=None))) == 2
    out = tmp_path / "out.json"
    said = CliRunner().invoke(app, ["export", f"out={out}", f"db_url={db_url}"])
    assert "1 trial(s) written" in " ".join(said.output.split())  # (the run is left out)
    assert [json.loads(r["spec"])["batch_size"] for r in json.loads(out.read_text())["trials"]
            ] == [16]  # fmt: skip
    refused = CliRunner().invoke(app, ["export", f"out={out}", "kind=training", f"db_url={db_url}"])
    assert refused.exit_code == 2 and "export carries advisor's measurements" in refused.output
    with pytest.raises(ConfigError, match="unknown kind 'run'; choose one of measured"):
        history(db_url=db_url, kind="run")
    with pytest.raises(ConfigError, match="follows a stored ok trial that advisor measured"):
        TrainingRun(runs(db_url)[0].id, db_url=db_url)  # (a run follows a measurement)
    with pytest.raises(ConfigError, match="no trial 99 is stored"):
        TrainingRun(99, db_url=db_url)


def test_compare_and_show_put_the_run_beside_its_prediction(db_url):
    trial = followed(db_url)
    with TrainingRun(trial, warmup=0, every=1, db_url=db_url) as run:
        run.step()
    (stored,) = runs(db_url)
    measured = Store(db_url).get(trial)
    shown = _text(tables.compare_table([measured, stored]))
    assert "kind" in shown and f"training of {trial}" in shown
    expected = f"{stored.samples_per_s / measured.samples_per_s - 1:+.1%}"
    assert (f"training run {stored.id} against trial {trial}, the setting it followed: "
            f"samples/s {expected}") in " ".join(shown.split())  # fmt: skip
    view = _text(tables.trial_view(stored, measured))
    assert f"advisor compare {trial} {stored.id}" in view and "trials side by side" in view
    listed = _text(tables.history_table(runs(db_url), width=200))
    assert f"training run of {trial}:" in listed


def test_the_recommendations_answer_is_followed(db_url):
    """A Recommendation is followed by its answer; one with nothing that fits is refused."""
    for batch in (8, 16, 32):
        followed(db_url, f"batch_size={batch}")
    answer = recommendation(Store(db_url), {"model": "tiny_mlp", "device": "cpu",
                                            "memory": "100GiB"})  # fmt: skip
    run = TrainingRun(answer, db_url=db_url)
    assert run.followed.id == answer.best.id
    nothing = dataclasses.replace(answer, best=None, thin="nothing fits")
    with pytest.raises(ConfigError, match="no setting to follow: nothing fits"):
        TrainingRun(nothing, db_url=db_url)


def _text(renderable) -> str:
    console = Console(record=True, width=200)
    console.print(renderable)
    return console.export_text()


@pytest.mark.gpu
def test_on_cuda_a_run_records_the_allocators_peaks_and_its_tensors(db_url):
    """The run's peaks are torch's over the whole run; its parameters, gradients and AdamW's
    two moments are their tensors' sizes; the device peak adds NVML's context."""
    spec = dataclasses.replace(spec_of("model=tiny_mlp", "batch_size=256"), device=Device.cuda)
    trial = Store(db_url).add(fake_result(spec)).id
    torch.cuda.reset_peak_memory_stats()
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with TrainingRun(trial, model=model, optimizer=optimizer, every=5, warmup=5,
                     db_url=db_url) as run:  # fmt: skip
        for _ in range(20):
            loss = model(torch.randn(256, 1024, device="cuda")).square().mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            run.step()
    memory = runs(db_url)[0].memory
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    assert (memory.params_bytes, memory.grads_bytes) == (params, params)
    assert memory.optimizer_state_bytes == 2 * params
    assert memory.peak_allocated_bytes >= torch.cuda.max_memory_allocated()  # (reset at step 5)
    assert params * 4 <= memory.peak_allocated_bytes <= memory.peak_reserved_bytes
    assert memory.steady_peak_allocated_bytes <= memory.peak_allocated_bytes
    assert memory.device_peak_bytes == memory.peak_reserved_bytes + memory.context_bytes
    assert memory.context_bytes > 0 and memory.nvml_process_bytes is not None


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
def test_a_run_of_a_gpu_setting_where_there_is_none_says_where_it_ran(db_url):
    """Following a setting measured on CUDA, on a machine without it: the run is stored with
    this machine's environment (asking CUDA for its name raised), and no memory."""
    spec = dataclasses.replace(spec_of("model=tiny_mlp", "batch_size=16"), device=Device.cuda)
    trial = Store(db_url).add(fake_result(spec)).id
    with TrainingRun(trial, warmup=0, every=1, db_url=db_url) as run:
        run.step()
    (stored,) = runs(db_url)
    assert stored.environment.device_name == cpu_name() and stored.environment.driver is None
    assert stored.memory is None and stored.throughput.timed_steps == 1
