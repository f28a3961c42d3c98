"""The worker on tiny models on the CPU: every category, the exact ones exact."""

from __future__ import annotations

import dataclasses
import io

import pytest
import torch
from conftest import FAST, spec_of
from rich.console import Console

from advisor.report.tables import trial_view
from advisor.result import Phase, Status, TrialResult
from advisor.trial.runner import run_trial
from advisor.trial.training import build

TINY_MLP_PARAMS = (
    [(64, 256), (256,)] + [(256, 256), (256,), (256,), (256,)] * 3 + [(256, 10), (10,)]
)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# Parameter bytes of tiny_mlp (in 64, hidden 256, depth 3, 10 classes) in fp32, counted by hand.
PARAM_BYTES = 4 * sum(_numel(s) for s in TINY_MLP_PARAMS)


def measured(*overrides: str) -> TrialResult:
    result = run_trial(spec_of("model=tiny_mlp", *overrides), FAST, timeout_s=120)
    assert result.status is Status.ok, result.failure
    assert result.memory is not None and result.throughput is not None
    return result


def test_exact_categories_with_adamw():
    result = measured("batch_size=32", "optimizer=adamw")
    m = result.memory
    assert m.params_bytes == PARAM_BYTES == 872_488 and m.buffers_bytes == 0
    assert m.grads_bytes == PARAM_BYTES
    # exp_avg and exp_avg_sq in fp32 (2 x parameters) plus one 4-byte step counter per tensor
    assert m.optimizer_state_bytes == 2 * PARAM_BYTES + 4 * len(TINY_MLP_PARAMS)
    assert m.inputs_bytes == 32 * 64 * 4 + 32 * 8  # float inputs and int64 labels


def test_categories_are_consistent_with_the_peak():
    m = measured("batch_size=64").memory
    assert m.activations_bytes > 0
    # At the end of the forward, parameters, optimizer state, the batch and the activations
    # are all alive; at the optimizer step, parameters, gradients and state are.
    assert m.params_bytes + m.optimizer_state_bytes + m.inputs_bytes + m.activations_bytes <= (
        m.steady_peak_allocated_bytes
    )
    assert m.params_bytes + m.grads_bytes + m.optimizer_state_bytes <= m.steady_peak_allocated_bytes
    assert m.steady_peak_allocated_bytes <= m.peak_allocated_bytes
    assert m.peak_reserved_bytes == m.peak_allocated_bytes  # no caching allocator on the CPU
    assert m.context_bytes == 0 and m.nvml_process_bytes is None
    assert m.device_peak_bytes == m.peak_reserved_bytes
    assert m.peak_phase in (Phase.forward, Phase.backward, Phase.optimizer)


def test_activations_grow_with_batch_and_shrink_with_checkpointing():
    small = measured("batch_size=64").memory.activations_bytes
    large = measured("batch_size=512").memory.activations_bytes
    checkpointed = measured("batch_size=512", "checkpointing=blocks").memory.activations_bytes
    assert 7.0 < large / small <= 8.5  # affine in batch size, the fixed part small
    assert checkpointed < 0.6 * large


@pytest.mark.parametrize(
    "optimizer,state_per_param_byte",
    [("sgd", 0), ("sgd_momentum", 1), ("adam", 2), ("adamw_fused", 2)],
)
def test_optimizer_state_per_implementation(optimizer, state_per_param_byte):
    m = measured(f"optimizer={optimizer}").memory
    steps = m.optimizer_state_bytes - state_per_param_byte * PARAM_BYTES
    assert steps in (0, 4 * len(TINY_MLP_PARAMS))  # Adam's step counters, where it keeps them


def test_grad_accumulation_counts_every_micro_batch():
    one = measured("batch_size=16").throughput
    four = measured("batch_size=16", "grad_accum=4").throughput
    assert four.flops_per_step == pytest.approx(4 * one.flops_per_step)
    assert four.samples_per_s == pytest.approx(64 / four.step_s_median)


def test_throughput_and_flops():
    t = measured("batch_size=32").throughput
    # Linear layers: 2 FLOPs per multiply-add forward, 4 backward (input and weight gradients),
    # except that the first layer needs no input gradient: the batch does not require one.
    linear_macs = 64 * 256 + 3 * 256 * 256 + 256 * 10
    assert t.flops_per_step == 6 * 32 * linear_macs - 2 * 32 * 64 * 256
    assert t.samples_per_s == pytest.approx(32 / t.step_s_median)
    assert t.timed_steps >= 3 and t.warmup_steps == 3
    assert t.mfu is None  # no peak FLOP/s for a CPU


@pytest.mark.parametrize(
    "model,overrides",
    [
        ("tiny_cnn", ["precision=bf16", "channels_last=true"]),
        ("tiny_gpt2", ["precision=fp16", "checkpointing=blocks"]),
        ("tiny_gpt2", ["precision=bf16", "optimizer=adamw_fused"]),
    ],
)
def test_other_models_and_knobs_run(model, overrides):
    result = run_trial(spec_of(f"model={model}", "batch_size=4", *overrides), FAST, timeout_s=120)
    assert result.status is Status.ok, result.failure
    assert result.memory.params_bytes > 0 and result.memory.activations_bytes > 0
    if model == "tiny_gpt2":
        assert result.throughput.tokens_per_s == pytest.approx(32 * result.throughput.samples_per_s)


def test_warm_up_lasts_until_fp16_really_steps():
    spec = spec_of("model=tiny_mlp", "model.module._target_=builders.loud", "precision=fp16")
    result = run_trial(spec, FAST, timeout_s=120)
    assert result.status is Status.ok, result.failure
    assert result.throughput.warmup_steps > 3  # the scaler skipped the first steps
    assert result.memory.optimizer_state_bytes == 2 * PARAM_BYTES + 4 * len(TINY_MLP_PARAMS)


def test_causal_lms_train_without_a_kv_cache_and_compute_their_own_loss():
    """As transformers trains them: the labels go into the model call, which shifts them and
    computes the loss (inside the compiled graph, when compiled); no KV cache, checkpointed or
    not (checkpointing's recompute would append each block's keys and values a second time)."""
    for overrides in ([], ["checkpointing=blocks"]):
        training = build(spec_of("model=tiny_gpt2", *overrides), torch.device("cpu"))
        assert training.model.config.use_cache is False
        assert set(training.batch) == {"input_ids", "labels"}
        training.model.eval()  # no dropout: the same loss twice
        output = training.model(**training.batch)
        assert output.past_key_values is None and output.loss.dim() == 0
        loss = training.workload.compute_loss(training.model, training.batch)
        assert torch.equal(loss, output.loss)


def test_timing_stops_once_the_rate_is_known_or_cannot_beat_the_best():
    from advisor.result import TimingStop
    from advisor.trial.timing import CUT_AFTER_STEPS, MeasureConfig, median_ci95, time_steps

    training = build(spec_of("model=tiny_mlp", "batch_size=32"), torch.device("cpu"))
    loose = MeasureConfig(min_timed_steps=5, max_timed_steps=500, max_timed_s=20.0,
                          target_precision=0.5)  # fmt: skip
    times, stopped = time_steps(training, loose)
    assert stopped is TimingStop.precise and 5 <= len(times) < 500
    assert median_ci95(times) <= 0.5 * sorted(times)[len(times) // 2]
    # far below a rate it would have to beat: stopped after a few steps, not at the limits
    strict = MeasureConfig(min_timed_steps=10, max_timed_steps=500, max_timed_s=20.0,
                           target_precision=0.0)  # fmt: skip
    times, stopped = time_steps(training, strict, beat_samples_per_s=1e12)
    # (at the earliest after CUT_AFTER_STEPS; a step slowed by the host widens the interval
    # past the median, and the cut waits until it narrows: 8 steps once on a loaded CI host,
    # 41 beside two other jobs on two cores; the limits are 500 steps and 20 s)
    assert stopped is TimingStop.cut and CUT_AFTER_STEPS <= len(times) <= 100
    times, stopped = time_steps(training, dataclasses.replace(strict, max_timed_steps=7))
    assert stopped is TimingStop.steps and len(times) == 7


def test_the_median_interval_uses_order_statistics():
    from advisor.trial.timing import median_ci95

    assert median_ci95([1.0]) == 0.0
    # n = 10: ranks 1 and 8 (0-based) bound the median: (8 - 1) / 2
    assert median_ci95([float(i) for i in range(10)]) == 3.5
    assert median_ci95([5.0, 1.0, 3.0, 2.0, 4.0]) == 2.0  # n = 5: the whole range


def test_a_trial_says_where_its_time_went_and_its_phases():
    phases: list[str] = []
    spec = spec_of("model=tiny_mlp", "batch_size=32")
    settings = dataclasses.replace(FAST, min_timed_steps=2000, max_timed_steps=2000,
                                   max_timed_s=1.5, target_precision=0.0)  # fmt: skip
    result = run_trial(spec, settings, timeout_s=120, on_phase=phases.append)
    t = result.throughput
    assert result.status is Status.ok and t.stopped.value == "seconds"
    assert min(t.setup_s, t.first_step_s, t.warmup_s) > 0 and t.timing_s >= 1.5
    assert t.setup_s + t.first_step_s + t.warmup_s + t.timing_s < result.wall_s
    assert t.precision is not None and t.precision > 0  # (its size is the machine's load's: 2.06
    # with others using 49% of the CPUs)
    assert t.machine_load is not None and 0.0 <= t.machine_load <= 1.0  # others' share
    order = ["building", "first step", "warm-up", "timing"]
    assert phases and phases[-1] == "timing"  # timing lasts 1.5 s: the runner saw it
    assert [order.index(p) for p in phases] == sorted(order.index(p) for p in phases)
    console = Console(file=io.StringIO(), width=400, record=True)  # and `advisor show` says so
    console.print(trial_view(result))
    assert f"others used {t.machine_load:.0%} of the CPUs while it timed" in console.export_text()


def test_trials_share_the_compile_cache_beside_the_results(tmp_path, monkeypatch):
    from advisor.store.store import Store
    from advisor.trial.runner import worker_environment

    store = Store(f"sqlite:///{tmp_path / 'results.sqlite'}")
    assert store.compile_cache() == tmp_path / "compile-cache"
    spec = spec_of("model=tiny_mlp")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    env = worker_environment(spec, "1", store.compile_cache())
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "compile-cache")
    assert env["CUDA_VISIBLE_DEVICES"] == "1"  # the worker's own GPU
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/elsewhere")  # the user's own choice wins
    assert worker_environment(spec, None, store.compile_cache())["TORCHINDUCTOR_CACHE_DIR"] == (
        "/elsewhere"
    )


@pytest.mark.slow
def test_a_compiled_cpu_trial_compiles_before_timing_not_in_it(monkeypatch):
    """CPU memory is counted by a dispatch mode, under which dynamo runs the model eagerly:
    the compile came at the first timed step (one 2-core trial's whole time budget). It is
    now made before timing, and counted as compiling."""
    from torch._dynamo.utils import counters

    from advisor.trial import measure as measuring
    from advisor.trial.timing import MeasureConfig

    graphs_at: dict[str, int] = {}
    timed = measuring.time_steps

    def watched(training, settings, beat_samples_per_s=None):
        graphs_at["timing"] = counters["stats"]["unique_graphs"]
        found = timed(training, settings, beat_samples_per_s)
        graphs_at["timed"] = counters["stats"]["unique_graphs"]
        return found

    monkeypatch.setattr(measuring, "time_steps", watched)
    torch._dynamo.reset()
    before = counters["stats"]["unique_graphs"]
    spec = spec_of("model=tiny_mlp", "batch_size=32", "compile=true")
    settings = MeasureConfig(warmup_steps=3, min_timed_steps=5, max_timed_steps=20)
    try:
        _, throughput = measuring.measure(spec, settings)
    finally:
        torch._dynamo.reset()  # (no compiled frames left to the tests after it)
    assert graphs_at["timing"] > before  # compiled before timing began
    assert graphs_at["timed"] == graphs_at["timing"]  # and nothing compiled while timing
    assert throughput.warmup_steps >= 5
