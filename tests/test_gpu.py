"""The measuring path on a real GPU (skipped without CUDA; run on the lent H200)."""

from __future__ import annotations

import json
import os

import pytest
from conftest import FAST, FAST_OVERRIDES

from advisor.config import load, trial_spec
from advisor.result import Phase, Status
from advisor.trial.runner import run_trial

pytestmark = pytest.mark.gpu


def measured(*overrides: str):
    result = run_trial(trial_spec(load(list(overrides))), FAST, timeout_s=300)
    assert result.status is Status.ok, result.failure
    return result


def test_gpu_trial_has_context_nvml_and_allocator_figures():
    result = measured("model=tiny_cnn", "device=cuda", "batch_size=64")
    m, env = result.memory, result.environment
    assert env.device_memory_bytes > 0 and env.driver and env.cuda
    assert m.context_bytes > 100 * 2**20  # a CUDA context is hundreds of MiB
    assert m.nvml_process_bytes is not None and m.nvml_process_bytes > m.context_bytes
    assert m.peak_reserved_bytes >= m.peak_allocated_bytes >= m.steady_peak_allocated_bytes
    assert m.device_peak_bytes == m.peak_reserved_bytes + m.context_bytes
    assert result.throughput.mfu is None or 0 < result.throughput.mfu < 1


def test_exact_categories_agree_between_gpu_and_cpu():
    gpu = measured("model=tiny_mlp", "device=cuda", "batch_size=32").memory
    cpu = measured("model=tiny_mlp", "device=cpu", "batch_size=32").memory
    assert gpu.params_bytes == cpu.params_bytes == gpu.grads_bytes
    # On the GPU, foreach AdamW keeps its step counters on the host: state is exactly 2 x params.
    assert gpu.optimizer_state_bytes == 2 * gpu.params_bytes
    assert gpu.inputs_bytes == cpu.inputs_bytes
    # The allocator rounds each block to 512 bytes, so GPU activations are at least the CPU's.
    assert gpu.activations_bytes >= cpu.activations_bytes


def test_gpu_out_of_memory_is_a_result_with_phase_and_request():
    spec = trial_spec(
        load(["model=tiny_mlp", "device=cuda", "batch_size=4000000", f"memory_cap={2**30}"])
    )
    result = run_trial(spec, FAST, timeout_s=300)
    assert result.status is Status.oom, result.failure
    assert result.failure.phase is Phase.forward
    assert result.failure.requested_bytes >= 4_000_000 * 256 * 4
    assert "out of memory" in result.failure.message.lower()


@pytest.mark.parametrize(
    "overrides",
    [
        ["precision=fp16", "checkpointing=blocks"],
        ["precision=bf16", "channels_last=true", "optimizer=adamw_fused"],
        ["precision=tf32", "expandable_segments=true", "grad_accum=2"],
        ["precision=bf16", "compile=true"],
    ],
)
def test_knobs_run_on_the_gpu(overrides):
    result = measured("model=tiny_cnn", "device=cuda", "batch_size=32", *overrides)
    assert result.memory.activations_bytes > 0 and result.throughput.samples_per_s > 0


def test_a_compiled_checkpointed_transformer_runs_on_the_gpu():
    """It crashed while checkpointing's recompute appended to transformers' KV cache."""
    result = measured("model=tiny_gpt2", "device=cuda", "batch_size=8", "precision=bf16",
                      "compile=true", "checkpointing=blocks")  # fmt: skip
    assert result.throughput.samples_per_s > 0


def test_a_sweep_for_a_smaller_gpu_runs_its_trials_under_the_targets_cap(db_url, tmp_path):
    import json
    import subprocess
    import sys

    from advisor.gpus import DEFAULT_CONTEXT_BYTES
    from advisor.store.store import Store

    sweep = subprocess.run(
        [sys.executable, "-m", "advisor", "sweep", "model=tiny_cnn", "device=cuda",
         "gpu.memory=2GiB", "trials=3", "space.batch_sizes=[64,256]", "space.precision=[bf16]",
         "space.compile=[false]", "space.expandable_segments=[false]",
         "measure.min_timed_steps=3", "measure.max_timed_s=0.5", f"db_url={db_url}",
         f"study_db_url=sqlite:///{tmp_path / 'o.sqlite'}", "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert sweep.returncode == 0, sweep.stderr
    answer = json.loads(sweep.stdout)
    cap = int(2 * 2**30 * 0.95) - DEFAULT_CONTEXT_BYTES
    trials = Store(db_url).trials()
    assert trials and all(r.spec.memory_cap_bytes == cap for r in trials)
    # the answer is measured twice at least, each time under the cap; it stands by one of them
    repeats = answer["repeats"]
    assert len(repeats) >= 2 and all(r["spec"]["memory_cap_bytes"] == cap for r in repeats)
    assert answer["recommendation"]["id"] in {r["id"] for r in repeats}
    assert answer["confirmation"]["id"] == repeats[0]["id"]


def test_a_memory_snapshot_of_the_build_and_warm_up(tmp_path, db_url):
    import pickle
    import subprocess
    import sys

    def advisor(*args: str, db_url: str) -> subprocess.CompletedProcess[str]:
        # python -m advisor: the GPU machine has the package on its path, not its script
        return subprocess.run([sys.executable, "-m", "advisor", *args, f"db_url={db_url}"],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "COLUMNS": "200"})  # fmt: skip

    path = tmp_path / "trial.pickle"
    done = advisor("run", "model=tiny_cnn", "device=cuda", "batch_size=64", *FAST_OVERRIDES,
                   f"memory_snapshot={path}", "--json", db_url=db_url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    trial = json.loads(done.stdout)
    assert trial["status"] == "ok" and trial["memory_snapshot"] == str(path)
    snapshot = pickle.loads(path.read_bytes())
    assert snapshot["segments"] and any(snapshot["device_traces"])  # memory_viz's two views
    sizes = [event["size"] for trace in snapshot["device_traces"] for event in trace
             if event["action"] == "alloc"]  # fmt: skip
    assert max(sizes) > 0 and not path.with_suffix(".pickle.part").exists()
    shown = advisor("show", str(trial["id"]), db_url=db_url)
    assert f"memory snapshot: {path}" in shown.stdout.replace("\n", "")


def test_each_trial_runs_under_its_own_allocator_setting(tmp_path):
    """Trials are forked from a server that imported torch: expandable segments, which torch
    may read as it starts, still follow each spec (a server per setting), one after another
    in one runner. Its snapshot says which segments were expandable."""
    import pickle

    def segments_expandable(expandable: bool, name: str) -> set[bool]:
        spec = trial_spec(load(["model=tiny_cnn", "device=cuda", "batch_size=64",
                                f"expandable_segments={str(expandable).lower()}"]))  # fmt: skip
        path = tmp_path / f"{name}.pickle"
        result = run_trial(spec, FAST, timeout_s=300, memory_snapshot=path)
        assert result.status is Status.ok, result.failure
        return {segment["is_expandable"] for segment in pickle.loads(path.read_bytes())["segments"]}

    assert segments_expandable(True, "on") == {True}
    assert segments_expandable(False, "off") == {False}
    assert segments_expandable(True, "on-again") == {True}
