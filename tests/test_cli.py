"""The real console script, end to end, in subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torchvision
from conftest import FAST_OVERRIDES
from sqlalchemy import create_engine, inspect

from advisor import cli

# The console script installed beside this Python (pip install -e .).
ADVISOR = shutil.which("advisor", path=str(Path(sys.executable).parent))


# The memory figures every verb's --json names the same way.
MEMORY_KEYS = (
    "context_bytes",
    "params_bytes",
    "activations_bytes",
    "grads_bytes",
    "optimizer_state_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
)


def advisor(
    *args: str, db_url: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("ADVISOR_DB_URL", None)
    env["COLUMNS"] = "200"  # rich wraps tables to the terminal's width
    if db_url:
        env["ADVISOR_DB_URL"] = db_url
    assert ADVISOR, "the advisor console script is not installed (pip install -e .)"
    return subprocess.run(
        [ADVISOR, *args], capture_output=True, text=True, env=env, timeout=600, cwd=cwd
    )


def trial_count(db_url: str) -> int:
    engine = create_engine(db_url)
    if "trials" not in inspect(engine).get_table_names():
        return 0
    with engine.connect() as connection:
        return connection.exec_driver_sql("select count(*) from trials").scalar()


def test_run_then_history_as_json(db_url, tmp_path):
    png = tmp_path / "breakdown.png"
    run = advisor(
        "run",
        "model=tiny_cnn",
        "batch_size=4",
        "device=cpu",
        f"plot={png}",
        "--json",
        *FAST_OVERRIDES,
        db_url=db_url,
    )
    assert run.returncode == 0, run.stderr
    trial = json.loads(run.stdout)
    assert trial["status"] == "ok" and isinstance(trial["id"], int)
    for key in (
        "model",
        "batch_size",
        "grad_accum",
        "precision",
        "checkpointing",
        "optimizer",
        "device",
    ):
        assert key in trial["spec"]
    for key in MEMORY_KEYS:
        assert isinstance(trial["memory"][key], int)
    assert trial["throughput"]["samples_per_s"] > 0
    assert trial["throughput"]["step_s_median"] > 0
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"

    history = advisor("history", "model=tiny_cnn", "--json", db_url=db_url)
    assert history.returncode == 0, history.stderr
    assert json.loads(history.stdout) == [trial]
    assert json.loads(advisor("history", "model=gpt2", "--json", db_url=db_url).stdout) == []


def test_run_shows_the_breakdown_as_tables(db_url):
    """... with only what applies to a CPU: no CUDA context, NVML or GPU to share."""
    run = advisor("run", "model=tiny_mlp", "device=cpu", *FAST_OVERRIDES, db_url=db_url)
    assert run.returncode == 0, run.stderr
    for words in (
        "parameters",
        "optimizer state",
        "activations",
        "gradients",
        "peak reserved",
        "samples/s on the CPU",
        "CPU: no device limit",
    ):
        assert words in run.stdout
    for words in ("CUDA", "NVML", "of GPU", "device peak", "allocator retries"):
        assert words not in run.stdout
    table = advisor("history", db_url=db_url)
    assert "tiny_mlp on cpu" in table.stdout


@pytest.mark.slow
def test_resnet50_runs_on_a_machine_without_a_gpu(db_url):
    run = advisor(
        "run",
        "model=resnet50",
        "batch_size=2",
        "device=cpu",
        "--json",
        *FAST_OVERRIDES,
        db_url=db_url,
    )
    assert run.returncode == 0, run.stderr
    trial = json.loads(run.stdout)
    assert trial["status"] == "ok"
    # Parameters and buffers (BatchNorm's running statistics) apart, as torch's MemTracker
    # counts them; once params_bytes held both (issue 12).
    model = torchvision.models.resnet50()
    memory = trial["memory"]
    assert memory["params_bytes"] == 102_228_128 == sum(_bytes(model.parameters()))
    assert memory["buffers_bytes"] == 212_904 == sum(_bytes(model.buffers()))
    assert trial["environment"]["device_name"].startswith("CPU")


def _bytes(tensors):
    return (t.numel() * t.element_size() for t in tensors)


@pytest.mark.parametrize(
    "args,message",
    [
        (["model=nonesuch"], "advisor: unknown model 'nonesuch'; choose one of: bert, convnext"),
        (["batch_size=0", "device=cpu"], "advisor: batch_size must be a whole number from 1 to"),
        (
            ["precision=fp8"],
            "advisor: precision: Invalid value 'fp8', expected one of [default, fp32",
        ),
        (
            ["device=cpu", "db_url=sqlite:////proc/version/results.sqlite"],
            "advisor: the results database sqlite:////proc/version/results.sqlite cannot be opened",
        ),
        (["model=tiny_mlp", "memory_cap=1"], "advisor: memory_cap is in bytes, from 1048576"),
        (
            ["model=tiny_mlp", "device=cpu", "optimizer.lr=abc"],
            "advisor: optimizer adamw (foreach=True, lr='abc', weight_decay=0.01) raised TypeError",
        ),
        (
            ["model=tiny_mlp", "device=cpu", "plot=/no/such/folder/breakdown.png"],
            "advisor: plot=/no/such/folder/breakdown.png: there is no folder /no/such/folder",
        ),
    ]
    + (
        []
        if torch.cuda.is_available()  # (a host without a GPU: this one, and CI)
        else [(["model=tiny_mlp", "device=cuda"], "advisor: device=cuda, but torch sees no CUDA")]
    ),
)
def test_bad_input_is_one_line_and_writes_nothing(args, message, db_url):
    result = advisor("run", *args, db_url=db_url)
    assert result.returncode != 0
    assert result.stderr.startswith(message)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""
    assert trial_count(db_url) == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="a host without a GPU")
def test_run_and_sweep_treat_no_gpu_alike(db_url):
    """run measured the CPU unasked where sweep refused: left to device=auto without a GPU,
    both refuse in one line that says how to measure the CPU, or estimate instead."""
    for verb in ("run", "sweep"):
        result = advisor(verb, "model=tiny_mlp", *FAST_OVERRIDES, db_url=db_url)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"advisor: no CUDA GPU here to {verb} on (device=auto)")
        assert f"advisor {verb} model=tiny_cnn device=cpu" in result.stderr
        assert "advisor estimate" in result.stderr and result.stderr.count("\n") == 1
        assert result.stdout == ""
    assert trial_count(db_url) == 0


@pytest.mark.parametrize(
    "given,message",
    [
        ("colour=blue", "unknown filter 'colour=blue'"),
        ("limit=1e20", "limit must be a whole number, got '1e20'"),
        (f"limit={10**20}", "limit must be from 0 (all) to 2147483648, got 100000000000000000000"),
        ("limit=-3", "limit must be from 0 (all) to"),
    ],
)
def test_bad_history_filter(db_url, given, message):
    result = advisor("history", given, db_url=db_url)
    assert result.returncode == 2
    assert result.stderr.startswith(f"advisor: {message}")
    assert result.stderr.count("\n") == 1


def test_help_says_what_and_shows_an_example():
    top = advisor("--help")
    assert top.returncode == 0 and "advisor run model=resnet50" in top.stdout
    for verb in ("run", "history"):
        help_text = advisor(verb, "--help").stdout
        assert "Examples:" in help_text and f"advisor {verb}" in help_text


def test_every_help_fits_an_80_column_terminal():
    """Its lists of knobs are printed as written (click's \\b): they once ran to 95 columns."""
    from typer.main import get_command
    from typer.testing import CliRunner

    verbs = list(get_command(cli.app).commands)  # type: ignore[attr-defined]
    assert len(verbs) >= 10
    for verb in verbs:
        shown = CliRunner().invoke(cli.app, [verb, "--help"], env={"COLUMNS": "80"})
        assert shown.exit_code == 0 and f"advisor {verb}" in shown.output
        too_long = [line for line in shown.output.splitlines() if len(line) > 80]
        assert too_long == [], verb
