"""oom, crashed and timeout, each produced for real by a worker process."""

from __future__ import annotations

from conftest import FAST, spec_of

from advisor.result import Phase, Status
from advisor.runner import run_trial


def test_out_of_memory_is_a_result_with_its_phase_and_request():
    # 100k samples: a 25.6 MB batch fits under the 400 MB cap, the forward's activations do not.
    spec = spec_of("model=tiny_mlp", "batch_size=100000", f"memory_cap={400 * 2**20}")
    result = run_trial(spec, FAST, timeout_s=120)
    assert result.status is Status.oom
    assert result.failure.phase is Phase.forward
    assert result.failure.requested_bytes == 100000 * 256 * 4  # one [batch, hidden] fp32 tensor
    assert "can't allocate memory" in result.failure.message
    assert result.environment is not None and result.memory is None


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
